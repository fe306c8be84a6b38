"""The ``json-values`` content parser (format extension ``json_values``): a run of comma-separated JSON values
to the list of those values.

What SGLang's base JSON detector reads in one ``<tool_call>`` block when a model writes two calls there,
``{"name": "a", ...}, {"name": "b", ...}``, which no base parser reads (``json`` takes one document). The
grammar (FORMAT.md, "Extensions", ``json_values``):

* the body is JSON whitespace (space, tab, LF, CR), a value, then any number of (JSON whitespace, ``,``, JSON
  whitespace, value), then JSON whitespace; the parser gives the list of the values in order (one value gives a
  one-element list, so ``[1, 2]`` gives ``[[1, 2]]``);
* each value is what Python's ``json.JSONDecoder().raw_decode(body, i)`` reads at its start ``i``: the C
  scanner's grammar (``NaN``, ``Infinity``, ``-Infinity``; duplicate keys keep the first place and the last
  value; integers up to 4300 digits), its value and its end;
* errors are ``ValueError("json-values: <what>")``: the scanner's own error (``Expecting value: line 1 column 1
  (char 0)`` for an empty body or a missing value after a comma, ...), or ``expected ',' or the end of the body
  at offset N`` (N in code points) after a value, or ``brackets nested more than 512 deep at offset N`` when
  the body's ``[``/``{`` outside JSON strings (string literals ``"..."`` with backslash escapes, taken left to
  right) nest deeper than `MAX_DEPTH` before anything is parsed (so no recursion limit decides).

One pass over the body in C (the scanner and two regexes); a Python step per value. Only the standard library
is imported.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["parse_json_values", "too_deep_at", "MAX_DEPTH"]

#: the deepest nesting of JSON containers a body may hold
MAX_DEPTH = 512

_decode = json.JSONDecoder().raw_decode
_WS = re.compile(r"[ \t\n\r]*")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKET = re.compile(r"[\[\]{}]")


def too_deep_at(text: str) -> int:
    """The offset of the first ``[``/``{`` of `text` outside string literals at which the nesting passes
    `MAX_DEPTH`, or -1. String literals are ``"..."`` with backslash escapes, found left to right."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return -1
    depth = 0
    pos = 0
    for m in _STRING.finditer(text):
        depth, at = _walk(text, pos, m.start(), depth)
        if at >= 0:
            return at
        pos = m.end()
    return _walk(text, pos, len(text), depth)[1]


def _walk(text: str, start: int, end: int, depth: int) -> tuple:
    for m in _BRACKET.finditer(text, start, end):
        if m.group() in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return depth, m.start()
        else:
            depth -= 1
    return depth, -1


def parse_json_values(text: str, args: Any = None) -> list:
    """The list of the comma-separated JSON values of `text`, or the ValueError the module states. `args` is
    the field's ``content_args`` (always ``{}``: the parser takes no options)."""
    at = too_deep_at(text)
    if at >= 0:
        raise ValueError(f"json-values: brackets nested more than {MAX_DEPTH} deep at offset {at}")
    out = []
    i = _WS.match(text).end()
    n = len(text)
    while True:
        try:
            value, i = _decode(text, i)
        except ValueError as e:  # (JSONDecodeError, or the 4300-digit limit of int)
            raise ValueError(f"json-values: {e}") from None
        out.append(value)
        i = _WS.match(text, i).end()
        if i == n:
            return out
        if text[i] != ",":
            raise ValueError(f"json-values: expected ',' or the end of the body at offset {i}")
        i = _WS.match(text, i + 1).end()
