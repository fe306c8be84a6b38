"""Per-field recovery from a value that fails to parse: the runtime of the ``on_error`` format extension.

A field with ``"on_error": "content"`` or ``"drop"`` (FORMAT.md, "Extensions") does not end the parse when a
region's value fails (a ``KeyError``, ``TypeError`` or ``ValueError`` from its content parser, transform,
``join`` or tool-argument typing), in either dialect: what servers do with a malformed tool call.

Guarantees (`recover_region` is called by `StreamParser._close` with the failure in hand):

* The failed region ends with a ``region_malformed`` event (the serving dialect's event, in both dialects; with
  offsets its ``start``/``end`` are the close delimiter's span, as there) carrying the ``error`` and
  ``"recovered": "content" | "drop"``. The message gets nothing from the region; the field is not counted as a
  missing required field; `parse_response` does not raise the error (`parser.raise_malformed` skips it).
* ``"content"``: the region's raw text ``R`` - its open delimiter, body and close delimiter, exactly as they
  appeared (an empty close where the region ended at the end of its JSON value, at the end of the stream) - is
  stored into the implicit field as one more implicit region with body ``R``: the implicit field's content
  parser, transform and ``join``/``repeats`` apply (so with ``join`` it is joined to the content before and
  after it; without ``repeats`` it replaces earlier content, as any later implicit region does). ``R`` is not
  scanned for delimiters again. Events: ``region_open``, one ``region_chunk`` with ``R``, ``region_close`` of
  the implicit field, right after the ``region_malformed`` (with offsets: the open at the region's open
  delimiter, the close at the failed region's end, both empty spans; in a dialect without prompt chunks, the
  chunk leaves out the characters of ``R`` that were the prompt's, as every chunk does). If storing ``R`` fails
  too, the region fails as it would without ``on_error``.
* ``"drop"``: nothing else happens.

Recovery costs nothing until a value fails: the parser keeps the open delimiter's text (a slice it makes
anyway) and the close delimiter's text of the region being closed.
"""

from __future__ import annotations

__all__ = ["ON_ERROR_MODES", "on_error_modes", "recover_region"]

ON_ERROR_MODES = ("content", "drop")  # ("raise", the base behaviour, is the default: the key is then left out)


def on_error_modes(tables) -> tuple:
    """Per field of `tables`, its ``on_error`` mode ("content", "drop") or None; computed once per tables."""
    modes = getattr(tables, "on_error_modes", None)
    if modes is None:
        modes = tables.on_error_modes = tuple(f.get("on_error") for f in tables.fields)
    return modes


def recover_region(parser, events: list, fi: int, mode: str, body: str, s: int, e: int, error: Exception) -> None:
    """Recover from `error`, raised while closing field `fi`'s region (raw `body`, close delimiter ``[s, e)``),
    as `mode` says: store the recovered text and append the events (see the module docstring). Where the
    recovered text cannot be stored in the implicit field either, that error propagates before anything is
    done (`StreamParser._close` then fails the region as without ``on_error``)."""
    if mode == "content":
        ii = parser.t.implicit
        raw = parser.open_text + body + parser.closing
        value = parser.stores[ii](parser.output, raw, {}, parser.tool_params)  # may raise: the caller decides
    parser._malformed_event(events, parser.names[fi], s, e, error)
    events[-1]["recovered"] = mode
    if mode == "content":
        name = parser.names[ii]
        if parser.offsets:
            at = parser.open_start
            events.append({"type": "region_open", "field": name, "start": at, "end": at})
        else:
            events.append({"type": "region_open", "field": name})
        # (with prompt_chunks=False, prompt characters are never in a chunk: the value still holds them)
        chunk = raw[parser.prompt_end - parser.open_start:] if parser.prompt_end > parser.open_start else raw
        if chunk:
            events.append({"type": "region_chunk", "field": name, "text": chunk, "dirty": parser.t.dirty[ii]})
        events.append(parser._close_event(name, e, e, value))
