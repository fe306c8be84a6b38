"""The public API over the runtime: compile a template once (`compile_template`, `CompiledTemplate`) and parse
text with it (`parse_response`, `ResponseParser`). Per-token parsing starts from `chatparse.bind`
(`tokenizer_dir.bind`).

`compile_template` is the one entry point from a template dict to runtime tables. Results are cached by the
template's canonical JSON, so passing the same dict to `parse_response` a million times compiles it once.
The same dict object passed again unchanged (compared strictly with a copy taken when it was compiled) skips
even the validation and the canonical JSON, which cost about as much as a short parse.

`parse_response` and `ResponseParser` are call-compatible with `transformers.utils.chat_parsing`:
same arguments, message dicts, events and exception classes as the reference for the same calls. The one
deliberate difference: the answer never depends on how the text was split into `feed` calls, or between the
prefix and the generation - it is always the answer for the unsplit text.

The private names that transformers' own tests reach for (`_output`, `_coerce_tool_calls`, module-level
`_coerce` and `_schema_types`) exist here too.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from copy import deepcopy
from typing import Any

from .runtime.oneshot.parse import parse_whole
from .runtime.stream.dialect import Dialect, resolve
from .runtime.stream.parser import StreamParser, feed_prompt, joined, raise_malformed
from .runtime.tables.template import RuntimeTemplate, register_template_class
from .runtime.values.args import check_tools, text_error
from .runtime.values.coerce import coerce as _coerce
from .runtime.values.coerce import coerce_tool_calls
from .runtime.values.coerce import schema_types as _schema_types
from .runtime.values.coerce import tool_params

__all__ = ["CompiledTemplate", "ResponseParser", "compile_template", "parse_response", "_coerce", "_schema_types"]

_CACHE_SIZE = 64
_cache: "OrderedDict[str, CompiledTemplate]" = OrderedDict()
_lock = threading.Lock()
# id(template) -> (the template object, a copy of its content or None, its compiled template): `_remember`
_by_id: dict[int, tuple[Any, Any, "CompiledTemplate"]] = {}


class CompiledTemplate(RuntimeTemplate):
    """A response template compiled to tables. Accepted wherever a template dict is.

    The data (``spec``, ``raw_tables``, ``tables``, ``template``) is the runtime's `RuntimeTemplate`; this adds
    the public API's parse methods and pickling through the table format."""

    def parse(self, text: str, *, prefix: Any = None, tools=None, dialect=None, malformed=None) -> dict:
        """`chatparse.parse_response` with this template (``dialect``/``malformed`` as there)."""
        if dialect is None and malformed is None:
            return parse_compiled(self, text, prefix, tools)
        return parse_response(text, self, prefix=prefix, tools=tools, dialect=dialect, malformed=malformed)

    def parser(self, prefix: Any = None, *, tools=None, dialect=None, offsets=None, malformed=None):
        """`chatparse.ResponseParser` with this template (``dialect``, ``offsets``, ``malformed`` as there)."""
        return ResponseParser(self, prefix=prefix, tools=tools, dialect=dialect, offsets=offsets,
                                     malformed=malformed)

    def parse_batch(self, texts: list[str], prefixes: Any = None, *, tools=None) -> list[dict]:
        """Parse many outputs. `prefixes` is one prefix for all, or a list matching `texts` one to one."""
        if prefixes is None:
            raise ValueError('parse_batch requires `prefixes` (a prefix for all items or one per item); '
                             'pass "" to opt out explicitly')
        if isinstance(prefixes, str):
            prefixes = [prefixes] * len(texts)
        elif len(prefixes) != len(texts):
            raise ValueError(f"parse_batch got {len(prefixes)} prefixes for {len(texts)} texts")
        return [self.parse(t, prefix=p, tools=tools) for t, p in zip(texts, prefixes)]

    def grammar(self, tools=None, *, tool_choice="auto", format="lark", prefix=None):
        """This template's outputs as a constrained-decoding grammar (`chatparse.export.grammar.export`):
        ``format="lark"`` (llguidance) or ``"structural_tag"`` (xgrammar, as vLLM passes it); tool calls
        limited to ``tools`` and their JSON Schemas, ``tool_choice`` "none"/"auto"/"required"/a tool name;
        ``prefix`` (the prompt) sets the region the output starts in. Returns an `ExportedGrammar`
        (``.text``, ``.approximated``)."""
        from .export.grammar import export

        return export(self, tools, tool_choice=tool_choice, format=format, prefix=prefix)

    def __reduce__(self):
        """Pickle through the table format (small, no code objects, validated on load)."""
        from .compiler.writer import compiled_reduce

        return compiled_reduce(self)

    @staticmethod
    def convert_tools(tools) -> list:
        """transformers' conversion of Python tools to JSON schemas (for bindings built from token tables)."""
        return _tool_schemas(tools)


register_template_class(CompiledTemplate)  # what the runtime's loader builds (`compiled_from_bytes`)




def _tool_schemas(tools) -> list:
    """`chatparse.compiler.tools.tool_schemas`, imported only where tools are given: a process that loads
    precompiled tables and parses without tools never imports the compiler (tests/test_format_tokens.py)."""
    if not tools:
        check_tools(tools)
        return []
    from .compiler.tools import tool_schemas

    return tool_schemas(tools)


def compile_template(template: Any) -> CompiledTemplate:
    """Validate `template` (same rules and errors as transformers) and compile it, cached."""
    if isinstance(template, RuntimeTemplate):
        if isinstance(template, CompiledTemplate):
            return template
        return CompiledTemplate(template.spec, template.raw_tables)
    if not isinstance(template, dict):
        from .compiler.template_objects import is_template_object, to_template_dict

        if is_template_object(template):  # vLLM's (or transformers') pre-loaded ResponseTemplate
            template = to_template_dict(template)
    seen = _by_id.get(id(template))
    if seen is not None and seen[0] is template and seen[1] is not None and _same(template, seen[1]):
        return seen[2]
    # Imported here so that loading precompiled tables never imports the compiler.
    from .compiler.build import build_tables
    from .compiler.validate import load_template

    spec = load_template(template)
    # Keyed by the spec with its key order (not `canonical_json`, which sorts keys): the order of a transform's
    # keys is the order of the output's, so two templates differing only in it compile apart
    key = json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
    with _lock:
        compiled = _cache.get(key)
        if compiled is not None:
            _cache.move_to_end(key)
    if compiled is None:
        compiled = CompiledTemplate(spec, build_tables(spec))
        with _lock:
            _cache[key] = compiled
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    _remember(template, compiled)
    return compiled


def _remember(template: Any, compiled: "CompiledTemplate") -> None:
    """Keep `template` (so its id stays its own). The second time the same object is compiled, keep a copy of
    its content too, when that content is plain JSON data `_same` can compare: from then on an unchanged
    object skips validation. (Copying at the first sighting would slow down callers that build a new dict
    for every call.)"""
    seen = _by_id.get(id(template))
    snapshot = None
    if seen is not None and seen[0] is template:
        try:
            snapshot = deepcopy(template)
        except Exception:  # noqa: BLE001 - content that cannot be copied is simply not remembered
            snapshot = None
        if snapshot is not None and not _same(template, snapshot):
            snapshot = None
    with _lock:
        if len(_by_id) >= _CACHE_SIZE:
            _by_id.clear()
        _by_id[id(template)] = (template, snapshot, compiled)


def _same(a: Any, b: Any) -> bool:
    """`a` and `b` are the same JSON data: same types (True is not 1, a tuple is not a list), same values,
    same key order. Anything else is never the same."""
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if type(ka) is not str or type(kb) is not str or ka != kb or not _same(va, vb):
                return False
        return True
    if t is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if t is str or t is int or t is bool or t is float or a is None:
        return a == b
    return False


# ------------------------------------------------------------------------------------------------ parsing

_PREFIX_REQUIRED = (
    "`ResponseParser`/`parse_response` requires `prefix` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an "
    "opening `<think>` tag) that the parser must see to parse the output correctly. If the generation "
    'already contains the complete message, pass `prefix=""` to opt out explicitly.'
)




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
        self.initial_events: list[dict] = feed_prompt(core, compiled.tables.cut_prefix(prefix) if prefix else "", d)

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
