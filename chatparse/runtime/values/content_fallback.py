"""Content parsers tried in order: the runtime of the ``content_fallback`` format extension.

A field with ``"content_fallback": [{"content": "xml-inline", "content_args": {...}}, ...]`` (FORMAT.md,
"Extensions") parses a region's body with its own ``content`` parser first; when that raises ``ValueError``,
``KeyError`` or ``TypeError`` (the failures the serving dialect and ``on_error`` act on), each listed parser is
tried on the same body in order, and the first that returns gives the parsed value. When every one fails, the
error of the field's own parser is raised, exactly as without the key. The value then goes through the
field's steps and transform as any parsed value (DeepSeek V3.2 writes an invoke's arguments as parameter tags
or as one JSON object: ``"content": "json"`` with an ``xml-inline`` fallback).

Only the standard library and runtime/values/parsers.py are used.
"""

from __future__ import annotations

from typing import Any, Callable

from .parsers import content_parser

__all__ = ["FALLBACK_ERRORS", "with_fallback"]

FALLBACK_ERRORS = (ValueError, KeyError, TypeError)


def with_fallback(parse: Callable[[str], Any], fallback: list) -> Callable[[str], Any]:
    """`parse` (the field's own content parser), then the parsers of `fallback` (normalized entries
    ``{"content", "content_args"}``) in order on a failure; the first value wins, else `parse`'s error."""
    others = [content_parser(entry["content"], entry["content_args"]) for entry in fallback]

    def parse_any(body: str) -> Any:
        try:
            return parse(body)
        except FALLBACK_ERRORS as first:
            for other in others:
                try:
                    return other(body)
                except FALLBACK_ERRORS:
                    continue
            raise first

    return parse_any
