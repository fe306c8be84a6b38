"""`parse_response` and `ResponseParser`: call-compatible with `transformers.utils.chat_parsing`.

Same arguments, message dicts, events and exception classes as the reference for the same calls. The one
deliberate difference: the answer never depends on how the text was split into `feed` calls, or between the
prefix and the generation - it is always the answer for the unsplit text.

The private names that transformers' own tests reach for (`_output`, `_coerce_tool_calls`, module-level
`_coerce` and `_schema_types`) exist here too.
"""

from __future__ import annotations

from collections.abc import Callable
from inspect import isfunction, ismethod
from typing import Any

from .compiled import CompiledTemplate, compile_template
from .runtime.values.coerce import coerce as _coerce
from .runtime.values.coerce import coerce_tool_calls
from .runtime.values.coerce import schema_types as _schema_types
from .runtime.values.coerce import tool_params
from .runtime.values.args import check_tools, text_error
from .runtime.stream.dialect import Dialect, resolve
from .runtime.oneshot.parse import parse_whole
from .runtime.stream.parser import StreamParser, joined, raise_malformed

__all__ = ["ResponseParser", "parse_response", "_coerce", "_schema_types"]

_PREFIX_REQUIRED = (
    "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an "
    "opening `<think>` tag) that the parser must see to parse the output correctly. If the generation "
    'already contains the complete message, pass `prefix=""` to opt out explicitly.'
)


def _tool_schemas(tools) -> list:
    """Convert Python callables to JSON schemas the way transformers does (imported only when needed)."""
    check_tools(tools)
    out = []
    for tool in tools or []:
        if isfunction(tool) or ismethod(tool):
            from transformers.utils.chat_template_utils import get_json_schema

            tool = get_json_schema(tool)
        out.append(tool)
    return out


class ResponseParser:
    """Streaming parser for one generation. See the module docstring and transformers' ResponseParser.

    `initial_events` holds the events produced by the prefix (after its last start anchor). `feed(text)`
    returns the events `text` completes; `finalize()` returns `(message, final_events)`.

    ``dialect`` picks the events: "transformers" (the default: transformers 5.23's), "vllm" (vLLM 0.33.0's
    serving dialect: spans and captures on events, ``region_malformed`` events that do not end the parse,
    `input_text`), or a `chatparse.Dialect`; ``offsets=`` and ``malformed=`` set those two options over it
    (see `chatparse.runtime.stream.dialect`). `response_template` may be a template dict, a `CompiledTemplate`,
    or the pre-loaded ``ResponseTemplate`` object of vLLM's or transformers' interpreter.
    """

    def __init__(self, response_template: Any, prefix: str | None = None, *,
                 tools: list[dict | Callable] | None = None, dialect: str | Dialect | None = None,
                 offsets: bool | None = None, malformed: str | None = None):
        compiled = compile_template(response_template)
        d = resolve(dialect, offsets=offsets, malformed=malformed)
        if prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        if prefix and type(prefix) is not str and not isinstance(prefix, str):  # ([] opts out, like "")
            raise text_error(prefix, "ResponseParser() argument 'prefix' (the chat prompt)")
        self._compiled = compiled
        self.dialect = d
        self._tool_params = tool_params(_tool_schemas(tools))
        self._core = core = StreamParser(compiled.tables, self._tool_params, d)
        self.feed = core.feed  # bound directly: one call layer less on the per-chunk path
        self.initial_events: list[dict] = []
        if prefix:
            cut = compiled.tables.cut_prefix(prefix)
            if cut:
                self.initial_events = core.feed(cut)
                if not d.prompt_chunks:
                    core.prompt_end = len(cut)

    def feed(self, text: str) -> list[dict]:
        """Feed the next piece of generated text; returns the events it completes."""
        return self._core.feed(text)

    def finalize(self) -> tuple[dict, list[dict]]:
        """End of generation: close what is open; returns `(message, final_events)`."""
        return self._core.finish()

    @property
    def input_text(self) -> str:
        """The parser's input after start-anchor truncation: the cut prefix, then everything fed. Before the
        first `feed` it is exactly the cut prefix, so its length is where generated text begins. Kept only in
        a dialect with ``input_text=True`` (the "vllm" preset); AttributeError otherwise."""
        return self._core.input_text()

    def probe(self, text: str) -> list[dict]:
        """The events that feeding `text` now would return, without changing this parser (a fork of its state
        takes `text`: `chatparse.runtime.stream.parser.StreamParser.fork`). For questions about the end of the text
        so far, as vLLM's reasoning-end check asks by feeding a NUL; feed the text to continue."""
        return self._core.fork().feed(text)

    @property
    def input_length(self) -> int:
        """``len(input_text)``, kept in every dialect and without joining the text."""
        return self._core.scanner.end

    @property
    def held_from(self) -> int:
        """Offset (in `input_text` coordinates) of the first character not handed out yet: text from here on
        is held as a possible delimiter. Everything before it is decided: no later event starts before it."""
        return self._core.scanner.pos

    @property
    def _output(self) -> dict:
        return joined(self._core.output)

    def _coerce_tool_calls(self, value: Any) -> Any:
        return coerce_tool_calls(value, self._tool_params)


def parse_response(text: str, response_template: Any, *, prefix: str | None = None,
                   tools: list[dict | Callable] | None = None, dialect: str | Dialect | None = None,
                   malformed: str | None = None) -> dict:
    """Parse a complete generation into a message dict (see ResponseParser).

    With ``malformed="event"`` (the "vllm" dialect) the whole text is parsed before an error is raised, as
    vLLM's copy does: a missing required field is reported first, else the first region whose value failed
    to parse raises its error. Without a failure the message is the same in every dialect."""
    compiled = compile_template(response_template)
    d = resolve(dialect, malformed=malformed)
    try:
        return parse_compiled(compiled, text, prefix, tools)
    except (KeyError, TypeError, ValueError):
        if d.malformed == "raise":
            raise
    # malformed="event": which error comes first is decided by the whole parse, so run it with the events
    parser = ResponseParser(compiled, prefix, tools=tools, dialect=d)
    events = parser.initial_events + parser.feed(text)
    message, final = parser.finalize()
    raise_malformed(events + final)
    return message


def parse_compiled(compiled: CompiledTemplate, text: str, prefix: str | None, tools) -> dict:
    """`parse_response` for a template already compiled (`CompiledTemplate.parse` comes here directly)."""
    if prefix is None:
        raise ValueError(_PREFIX_REQUIRED)
    if type(text) is not str and not isinstance(text, str):
        raise text_error(text, "parse_response() argument 'text' (the generated text)")
    if prefix and type(prefix) is not str and not isinstance(prefix, str):  # ([] opts out, like "")
        raise text_error(prefix, "parse_response() argument 'prefix' (the chat prompt)")
    params = tool_params(_tool_schemas(tools)) if tools else check_tools(tools) or {}
    head = compiled.tables.cut_prefix(prefix) if prefix else ""
    # The whole text is known: decide delimiters with `regex` at each candidate (see runtime/oneshot/parse.py).
    return parse_whole(compiled.tables, params, head + text)
