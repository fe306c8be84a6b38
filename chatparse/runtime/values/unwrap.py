"""Markup unwrapped from a region's body: the runtime of the ``unwrap_pattern`` format extension.

A field with ``"unwrap_pattern": "<regex>"`` (FORMAT.md, "Extensions") rewrites each region's raw body before
its content parser reads it: every match of the pattern (Python ``regex``, DOTALL, found as
``regex.finditer`` finds them: left to right, not overlapping) that is not empty is replaced by the text of
its named group ``keep`` (nothing where the pattern has no such group or the group did not take part); text
outside the matches, and empty matches, stay as they are. Cohere Command's citations,
``foo <co>bar</co: 0:[1,2]>`` -> ``foo bar``: ``<co(?:: [^>]*)?>(?P<keep>.*?)</co: [^>]*>``.

Only the standard library and ``regex`` are imported.
"""

from __future__ import annotations

from typing import Any, Callable

import regex

__all__ = ["unwrap", "unwrapping"]


def unwrap(rx: Any, body: str) -> str:
    """`body` with each non-empty match of the compiled `rx` replaced by its group ``keep`` (or nothing)."""
    keep = "keep" in rx.groupindex
    out, at = [], 0
    for m in rx.finditer(body):
        if m.end() == m.start():
            continue
        out.append(body[at:m.start()])
        if keep and m.group("keep") is not None:
            out.append(m.group("keep"))
        at = m.end()
    if not out:
        return body
    out.append(body[at:])
    return "".join(out)


def unwrapping(parse: Callable[[str], Any], pattern: str) -> Callable[[str], Any]:
    """`parse` reading the body unwrapped by `pattern`."""
    rx = regex.compile(pattern, regex.DOTALL)
    return lambda body: parse(unwrap(rx, body))
