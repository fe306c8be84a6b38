"""Which events a parser speaks: transformers 5.23's (the default) or the serving dialect of vLLM 0.33.0.

vLLM 0.33.0 ships its own copy of the response-template interpreter (`vllm.parser.chat_parsing`), which a
server needs in four ways that transformers 5.23's does not give:

* ``offsets``: ``region_open``, ``region_close`` and ``region_malformed`` events carry ``start`` and ``end``,
  the span of the parser's input text (`input_text`: the prefix cut at its last start anchor, then every
  character fed) that the event's delimiter consumed, empty for an implicit boundary (an implicit region
  opening on its first character, a region closed by the next open, end of stream). An explicit open also
  carries ``captures``, the named groups of its match that took part in it.
* ``malformed="event"``: a region whose value fails to parse (``KeyError``, ``TypeError`` or ``ValueError``
  from the content parser, the transform, tool-argument typing or ``join``) ends with a
  ``region_malformed`` event carrying the ``error`` instead of raising, and the parse goes on; such a field
  does not count as a missing required field at the end. `parse_response` still raises the first such error
  once the whole text is parsed (a missing required field is reported before it, as vLLM does).
* ``prompt_chunks=False``: characters of the prompt held back as a possible delimiter and released by a
  later feed belong to the prompt, so they are left out of that feed's ``region_chunk`` (the region's value
  still holds them).
* ``input_text=True``: the parser keeps its whole input, as vLLM's adapter reads it (``len(input_text)``
  before the first feed is where generated text begins). Off by default: it costs one character per
  character generated, beyond the open region's body.

A field with the ``on_error`` format extension recovers from a failed value in every dialect, with a
``region_malformed`` event that says ``"recovered"`` (runtime/values/recovery.py); ``malformed`` decides only for the
other fields.

`TRANSFORMERS` and `VLLM` are the two presets; `resolve` turns a caller's ``dialect=`` and keyword overrides
into one `Dialect`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["Dialect", "TRANSFORMERS", "VLLM", "resolve"]

_MALFORMED = ("raise", "event")


@dataclass(frozen=True)
class Dialect:
    """The event options of one parser. See the module docstring for what each means."""

    offsets: bool = False
    malformed: str = "raise"
    prompt_chunks: bool = True
    input_text: bool = False
    name: str = "custom"

    def __post_init__(self):
        for key in ("offsets", "prompt_chunks", "input_text"):
            if type(getattr(self, key)) is not bool:
                raise TypeError(f"Dialect.{key} must be a bool, got {type(getattr(self, key)).__name__}")
        if self.malformed not in _MALFORMED:
            raise ValueError(f"Dialect.malformed must be 'raise' or 'event', got {self.malformed!r}")


TRANSFORMERS = Dialect(name="transformers")
VLLM = Dialect(offsets=True, malformed="event", prompt_chunks=False, input_text=True, name="vllm")
_PRESETS = {"transformers": TRANSFORMERS, "vllm": VLLM}


def resolve(dialect=None, *, offsets: bool | None = None, malformed: str | None = None) -> Dialect:
    """The `Dialect` for ``dialect=`` (None or "transformers": the default; "vllm": vLLM 0.33.0's; or a
    `Dialect`) with the keyword options ``offsets`` and ``malformed`` applied over it where given."""
    if dialect is None:
        d = TRANSFORMERS
    elif isinstance(dialect, Dialect):
        d = dialect
    elif isinstance(dialect, str):
        d = _PRESETS.get(dialect)
        if d is None:
            raise ValueError(f"dialect must be 'transformers', 'vllm' or a chatparse.Dialect, got {dialect!r}")
    else:
        raise TypeError(f"dialect must be 'transformers', 'vllm' or a chatparse.Dialect, "
                        f"got {type(dialect).__name__}")
    changes = {}
    if offsets is not None:
        if type(offsets) is not bool:
            raise TypeError(f"offsets must be a bool, got {type(offsets).__name__}")
        changes["offsets"] = offsets
    if malformed is not None:
        if malformed not in _MALFORMED:
            raise ValueError(f"malformed must be 'raise' or 'event', got {malformed!r}")
        changes["malformed"] = malformed
    if changes and any(getattr(d, k) != v for k, v in changes.items()):
        d = replace(d, name="custom", **changes)
    return d
