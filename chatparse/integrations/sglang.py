"""SGLang plugin: chatparse's compiled parser under SGLang 0.5.23's response-template detectors.

``pip install "chatparse[sglang]"`` installs an entry point in SGLang's ``sglang.srt.plugins`` group
(`chatparse.integrations.sglang_plugin`); SGLang's `load_plugins` calls `register` in every process it starts,
before it parses its command line, which registers the name ``chatparse`` as a tool-call parser
(`FunctionCallParser.ToolCallParserEnum`) and a reasoning parser (`ReasoningParser.DetectorMap`). Then::

    python -m sglang.launch_server --model-path MODEL --tool-call-parser chatparse --reasoning-parser chatparse

serves a checkpoint of any bundled family. The template is the tokenizer config's own ``response_template``,
else the one `chatparse.integrations.resolve` finds (the operator's ``$CHATPARSE_RESPONSE_TEMPLATE``, the
family by model id, the family by chat template: a bundled family's serving-grade template), the same
resolver and order as the vLLM plugin; resolved, compiled and cached once per model and process (`_model`),
logged once.

The detectors are subclasses of SGLang's own `ResponseTemplateToolDetector` and
`ResponseTemplateReasoningDetector`, so SGLang's serving code treats them as response-template detectors
(detokenization keeping the delimiters, the prompt handed over as the parser's prefix, tool-call ids, tool
choice, structural-tag requests) and their routing of events into `StreamingParseResult`s and `ToolCallItem`s
is SGLang's code (`ResponseTemplateStreamAdapter.route_tool_events` / `route_reasoning_events`), but for a
delta of region chunks only, whose text the detectors hand on themselves as SGLang's routing would
(`chunk_text`: the routing's per-delta cost was most of the plugin's). What they
replace is the parser underneath each request's adapter (SGLang's vendored interpreter,
`sglang.srt.parser.chat_parsing.ResponseParser`) with chatparse's compiled parser in the serving dialect
(``dialect="vllm"``, whose events are SGLang's: docs/serving-sglang.md), on the whole template (format
extensions included), in the variant SGLang parses with: the reasoning detector with SGLang's streaming form
(every field optional, an implicit ``content`` field added), the tool detector with its tool-extraction form
(an implicit passthrough field and the tool-call field). SGLang hands its detectors text, never token ids, so
the text path runs.

SGLang's routing reads a view of the template (`vllm_template.vllm_view` of `vllm_template.serving_template`:
the reasoning field under SGLang's name ``thinking``, the content field without ``join``/``repeats``, the
extension keys left out), which SGLang's own loader and serving check accept. Events reach the routing
when SGLang's interpreter would hand them out (`edge_split`: a delimiter match ending at the end of the text
so far waits for more text, as SGLang's `_can_grow` makes it wait). Tool-call arguments are typed by SGLang's
own rule (`_SGLangTyping`: SGLang's `_coerce_tool_calls` over the tools as its adapter types them), not by
chatparse's (transformers' rule; SGLang's differs for unions with ``string``: docs/serving-sglang.md).

Inert deltas (most of a long answer, reasoning or call): each detector, while its parser is quiet in a region
(nothing held back, no delimiter attempt live: `inert_state`), hands a delta in which no delimiter of that
region can begin (read off the parser's own tables, as the runtime's fast path reads it: `Mode.skip_to`) on as
that region's text, as its chunks-only path would, without feeding the parser; those deltas are fed in one
piece before the parser is next needed (`_InertDeltas`, tests/test_sglang_inert.py).

Left to SGLang's own adapter (on the view; no chatparse underneath): a request whose grammar is SGLang's own
tag holding its calls (``constrained``: SGLang then reads closers inside JSON strings as content, a rule
chatparse has not; under chatparse's own tag, which keeps closers out of JSON strings, chatparse parses:
`sglang_holds_calls`) and a request with a JSON response format (``grammar_start``: SGLang parses only up to
the reasoning's end).

Structural tags: for a required or named tool choice, and an automatic one with strict tools, the tool
detector hands SGLang a structural tag (`ChatparseToolDetector.get_structural_tag`: SGLang's own derivation
where it derives one, else chatparse's export; bench/results/SGLANG_STRUCTURAL_TAGS.md).

Tested with sglang 0.5.23 (tests/test_sglang_*.py); `register` refuses other versions.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sglang
from sglang.srt.function_call.base_format_detector import BaseFormatDetector
from sglang.srt.function_call.core_types import StreamingParseResult as ToolStreamingParseResult
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.function_call.response_template_structural_tag import message_start_anchors, message_start_openers
from sglang.srt.parser import response_template as _rt
from sglang.srt.parser.chat_parsing.response_parser import ResponseParser as _SGLangParser
from sglang.srt.parser.chat_parsing.response_parser import _json_valued
from sglang.srt.parser.reasoning_parser import ReasoningParser

import chatparse
from chatparse import templates as bundled
from chatparse.compiled import compile_template
from chatparse.integrations.edge_timing import DELIMITED, edge_split
from chatparse.integrations.resolve import Resolution, TemplateNotFound, log_once, resolve
from chatparse.integrations.vllm_template import serving_template, serving_variant, vllm_view

__all__ = ["ChatparseReasoningDetector", "ChatparseToolDetector", "NAME", "TESTED_SGLANG", "register"]

TESTED_SGLANG = ("0.5.23",)
NAME = "chatparse"
THINKING, CONTENT, TOOLS, PASSTHROUGH = "thinking", "content", "tool_calls", "normal"
_logger = logging.getLogger("sglang.chatparse")  # under SGLang's logger, so that its log configuration shows it


# --------------------------------------------------------------------------------------------------------------
# Resolved, compiled and cached once per model
# --------------------------------------------------------------------------------------------------------------
def tool_extraction_variant(template: dict) -> dict | None:
    """The template SGLang's tool detector parses with (`response_template._tool_extraction_template`), made
    from chatparse's whole template: the start anchor, an implicit passthrough field (``normal``) and the
    tool-call field, optional. Unlike SGLang's, the tool field keeps ``transform_each`` (chatparse applies it;
    SGLang wraps the members and applies it per member itself). None without a tool-call field."""
    fields = template.get("fields") or {}
    if TOOLS not in fields:
        return None
    out = {k: v for k, v in template.items() if k in ("start_anchor", "start_anchor_pattern", "version", "extensions")}
    out["fields"] = {PASSTHROUGH: {}, TOOLS: dict(fields[TOOLS], optional=True)}
    return out


def reasoning_variant(template: dict) -> dict:
    """The template SGLang's reasoning detector parses with (its streaming form: `serving_variant`), made from
    chatparse's whole template, less the tool-call field's ``on_error``: the reasoning detector hands tool
    regions back verbatim for the tool detector to parse, so a malformed one must not also come back as
    recovered content (the tool detector's variant keeps ``on_error`` and recovers it there)."""
    out = serving_variant(template)
    tool = out["fields"].get(TOOLS)
    if isinstance(tool, dict):
        tool.pop("on_error", None)
    return out


# End-of-message tokens a server stops at and leaves out of the text: a tool-call field whose close delimiter
# can be one of them (or the end of the text) ends its calls at the end of the stream by design.
END_OF_MESSAGE = ("</s>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|endoftext|>", "<|end|>", "<|im_end|>",
                  "<eos>", "<|return|>")


def closes_at_end_of_message(template: dict) -> bool:
    """Whether the tool-call field's close delimiter names an end-of-message token (`END_OF_MESSAGE`) or the
    end of the text (``\\Z``): then a call that reaches the end of the stream without its closer was ended by
    the stop token the server left out, not cut off."""
    field = (template.get("fields") or {}).get(TOOLS) or {}
    close = field.get("close", field.get("close_pattern"))
    texts = close if isinstance(close, list) else [close] if isinstance(close, str) else []
    for text in texts:
        if "close_pattern" in field and "\\Z" in text:
            return True
        plain = text.replace("\\", "") if "close_pattern" in field else text
        if any(token in plain for token in END_OF_MESSAGE):
            return True
    return False


@dataclass(frozen=True)
class _Model:
    """What the plugin needs of one model: the resolution (None when the caller passed a template), the view
    SGLang's routing reads and SGLang's derived templates of it, chatparse's compiled streaming and
    tool-extraction variants of the whole template, and the per-model constants SGLang's detectors compute
    in their constructors."""

    resolution: Resolution | None
    view: dict
    derived: Any  # SGLang's `_ServingTemplates` of the view
    streaming: Any  # compiled: the reasoning detector's parser
    tools: Any  # compiled: the tool detector's parser (None: no tool-call field)
    json_values: bool  # SGLang's `_json_valued` of the tool field
    message_start: Any
    think_openers: Any
    eos_closes: bool  # `closes_at_end_of_message`


_models: dict = {}
_models_lock = threading.Lock()


def _model(tokenizer: Any, response_template: dict | None) -> _Model:
    """The `_Model` of `tokenizer` and the template a caller passed (None: resolved), built on the first call
    and then looked up. Raises ValueError (SGLang's error for a template it cannot serve), naming where the
    template came from or listing the ways to give one."""
    key = (id(tokenizer), None if response_template is None
           else json.dumps(response_template, sort_keys=True, ensure_ascii=False, default=repr))
    with _models_lock:
        hit = _models.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    model = _build_model(tokenizer, response_template)
    with _models_lock:
        _models[key] = (tokenizer, model)
    return model


def _build_model(tokenizer: Any, response_template: dict | None) -> _Model:
    resolution = None
    if response_template is None:
        try:
            resolution = resolve(tokenizer)
        except TemplateNotFound as exc:
            raise ValueError(f"--tool-call-parser/--reasoning-parser {NAME}: {exc}") from None
        log_once(resolution, "SGLang", _logger)
        template, where = resolution.template, resolution.reason
    else:
        template, where = response_template, "the response_template given"
    try:
        full = serving_template(template)
        view = vllm_view(full)
        derived = _rt._derive_serving_templates(view)
        streaming = compile_template(reasoning_variant(full))
        extraction = tool_extraction_variant(full)
        tools = compile_template(extraction) if extraction is not None else None
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{where}: not a response template SGLang can serve: {exc}") from exc
    source = derived.source
    thinking = source.fields.get(THINKING)
    message_start = message_start_anchors(source)
    return _Model(resolution, view, derived, streaming, tools,
                  TOOLS in source.fields and _json_valued(source.fields[TOOLS]), message_start,
                  message_start_openers(thinking, message_start) if thinking else [],
                  closes_at_end_of_message(full))


# --------------------------------------------------------------------------------------------------------------
# When SGLang's interpreter hands events out
# --------------------------------------------------------------------------------------------------------------
def chunk_text(events: list, fields: tuple) -> str | None:
    """What SGLang's routing (`route_tool_events`, `route_reasoning_events`) makes of `events` when they are
    all ``region_chunk``s (most deltas): the text of the chunks of `fields`, joined; it changes no state for
    them. None when any event is not a chunk: then SGLang's routing runs."""
    parts = []
    for ev in events:
        if ev["type"] != "region_chunk":
            return None
        if ev.get("field") in fields:
            parts.append(ev["text"])
    return "".join(parts)


# the fields whose chunks SGLang's routing hands on as normal text: the tool detector's (the tool-call field's
# chunks wait for its close; a content field's are dropped), and the reasoning detector's (the reasoning
# field's chunks are reasoning)
_TOOL_NORMAL = (PASSTHROUGH, THINKING)
_REASONING_NORMAL = (CONTENT, PASSTHROUGH, TOOLS)


# --------------------------------------------------------------------------------------------------------------
# SGLang's argument typing
# --------------------------------------------------------------------------------------------------------------
class _SGLangTyping:
    """SGLang's `ResponseParser._coerce_tool_calls` (its code) over the tool parameters SGLang's adapter hands
    its parser: each tool as `_typed_tool` types it (not strict: the plugin's adapter is never constrained)."""

    __slots__ = ("_tool_params", "_strict_params", "json_values")

    def __init__(self, tools: Sequence[Any] | None, json_values: bool):
        self.json_values = json_values
        self._tool_params: dict = {}
        self._strict_params: dict = {}
        for tool in tools or ():
            typed = _rt._typed_tool(tool if isinstance(tool, dict) else tool.model_dump(), None)
            fn = typed.get("function", typed) if isinstance(typed, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("name"), str):
                parameters = fn.get("parameters")
                properties = parameters.get("properties") if isinstance(parameters, dict) else None
                self._tool_params[fn["name"]] = properties if isinstance(properties, dict) else {}

    _coerce_tool_calls = _SGLangParser._coerce_tool_calls  # its list case calls itself on `self`

    def __call__(self, value: Any) -> Any:
        if not self._tool_params:
            return value
        return self._coerce_tool_calls(value, json_values=self.json_values)


# --------------------------------------------------------------------------------------------------------------
# One response
# --------------------------------------------------------------------------------------------------------------
class _CompiledAdapter(_rt.ResponseTemplateStreamAdapter):
    """SGLang's `ResponseTemplateStreamAdapter` (its routing of events into normal text, reasoning and tool
    calls) over chatparse's parser in the serving dialect, fed text; `template` is SGLang's loaded variant
    (what the routing reads), `compiled` chatparse's compiled variant of the whole template (what parses).
    `typing_json` is not None for the tool detector: tool-call values are typed by SGLang's rule."""

    def __init__(self, template: Any, compiled: Any, *, prefix: str, typing_json: bool | None = None,
                 eos_closes: bool = False):
        super().__init__(template, prefix=prefix)
        self._compiled = compiled
        self._eos_closes = eos_closes
        self._typing_json = typing_json
        self._typing = None
        self._held: list = []

    def _start(self, tools: Sequence[Any] | None) -> list[dict]:
        if self._parser is not None:
            return []
        self._parser = chatparse.ResponseParser(self._compiled, prefix=self._prefix, dialect="vllm")
        if self._typing_json is not None:
            self._typing = _SGLangTyping(tools, self._typing_json)
        self._prefix_end = self._parser.input_length
        initial = self._parser.initial_events
        self._track(initial)
        for event in reversed(initial):  # SGLang's: replay a tool region the prefix left open
            if event.get("field") == TOOLS and event["type"] != "region_chunk":
                return [event] if event["type"] == "region_open" else []
        return []

    def _handed(self, events: list) -> list:
        """`events`, and those held before, less what SGLang's interpreter would still hold; tool-call values
        typed by SGLang's rule."""
        if not self._held:
            for ev in events:
                if ev["type"] in DELIMITED:
                    break
            else:  # chunks only (most deltas): nothing to hold, type or track (SGLang's `_track` reads opens
                return events  # and closes)
        events, self._held = edge_split(self._template, self._held + events, self._parser.input_length)
        if self._typing is not None:
            for ev in events:
                if ev["type"] == "region_close" and ev["field"] == TOOLS:
                    ev["value"] = self._typing(ev["value"])
        return self._track(events)

    def _is_unusable_tool_end(self, event: dict) -> bool:
        """SGLang's rule (a malformed call, or one cut off at the end of the stream, is dropped), except that a
        call whose value parsed is kept at the end of the stream where the format ends calls with the
        end-of-message token (`closes_at_end_of_message`): the server stopped at that token and left it out
        of the text, so the call was complete (Mistral's, GigaChat's, Llama's JSON calls ...).

        SGLang's routing asks this of every tool-region event, chunks included. Only a close can be unusable
        (SGLang's check answers False for anything else), so only a close goes on to SGLang's check, which
        reads the whole `input_text`: chatparse's parser joins every delta so far for it, a cost per delta that
        grew with the output inside a call."""
        kind = event["type"]
        if kind == "region_malformed":
            return True
        if kind != "region_close":
            return False
        return not self._eos_closes and super()._is_unusable_tool_end(event)

    def feed(self, text: str, tools: Sequence[Any] | None = None) -> list[dict]:
        if self._finalized:
            return []
        if self._parser is not None:
            return self._handed(self._parser.feed(text))
        events = self._start(tools)
        return events + self._handed(self._parser.feed(text))

    def finalize(self, tools: Sequence[Any] | None = None) -> list[dict]:
        if self._finalized:
            return []
        events = self._start(tools)
        self._finalized = True
        self._output_end = self._parser.input_length
        held, self._held = self._held, []
        rest = self._parser.feed(self._closer_rest())
        tail = self._parser.finalize()[1]
        closing = held + rest + tail
        if self._typing is not None:
            for ev in closing:
                if ev["type"] == "region_close" and ev["field"] == TOOLS:
                    ev["value"] = self._typing(ev["value"])
        return events + self._track(closing)


# --------------------------------------------------------------------------------------------------------------
# Structural tags (issue #39): SGLang's derivation and chatparse's export, for `ChatparseToolDetector`
# --------------------------------------------------------------------------------------------------------------
def _tool_choice_name(tool_choice: Any) -> str | None:
    """The tool a named choice names (SGLang's `ToolChoice` or its dict form), else None."""
    function = getattr(tool_choice, "function", None)
    if function is None and isinstance(tool_choice, dict):
        function = tool_choice.get("function", tool_choice)
    name = getattr(function, "name", None) if function is not None and not isinstance(function, dict) \
        else (function or {}).get("name")
    return name if isinstance(name, str) else None


def sglang_structural_tag(model: _Model, tools: list[dict], *, tool_choice: Any = "auto",
                          thinking_mode: bool = False, parallel_tool_calls: bool = True,
                          message_start: bool = False) -> dict | None:
    """SGLang's derivation for a template detector (`BeamDetector.get_structural_tag`'s call of
    `tool_call_structural_tag`, without Beam's sorted and strict arguments) on SGLang's loaded view of the
    model's template; None where it derives none or refuses a tool name."""
    from sglang.srt.function_call.response_template_structural_tag import tool_call_structural_tag

    source = model.derived.source
    field = source.fields.get(TOOLS)
    if tool_choice == "none":
        tools, tool_choice = [], "auto"
    name = _tool_choice_name(tool_choice)
    if name is not None:
        tools = [t for t in tools if (t.get("function") or t).get("name") == name]
    try:
        return tool_call_structural_tag(
            field, tools, parallel_tool_calls=parallel_tool_calls and name is None,
            thinking=source.fields.get(THINKING) if thinking_mode else None,
            answer=source.fields.get(CONTENT) if tool_choice == "auto" else None,
            message_start=model.message_start if message_start else None, grammar_requires_reasoning=True)
    except ValueError:
        return None


def sglang_holds_calls(model: _Model, tools: Sequence[Any] | None) -> bool:
    """Whether the grammar SGLang marks as holding a request's calls (``constrained``) is SGLang's own
    derivation: it derives a call tag for these tools. Otherwise it is chatparse's tag
    (`ChatparseToolDetector.get_structural_tag`), and the plugin parses the output as it parses an unconstrained
    one, with chatparse's parser: SGLang's constrained rule (a closer inside a JSON string is content) is
    for its own tags; chatparse's keeps the closer out of JSON strings and keys altogether (xgrammar's
    ``excludes``), so every output it allows reads the same either way - and SGLang's interpreter, on the view
    of a serving-grade template, drops calls chatparse reads (qwen3's)."""
    if TOOLS not in model.derived.source.fields:
        return True
    tool_dicts = [t.model_dump() if hasattr(t, "model_dump") else dict(t) for t in tools or ()]
    return bool(tool_dicts) and sglang_structural_tag(model, tool_dicts, tool_choice="required") is not None


_tag_templates: dict = {}


def _tag_template(model: _Model) -> Any:
    """The compiled template chatparse's tag is exported from (`ChatparseToolDetector.get_structural_tag`),
    or None; once per model."""
    key = id(model)
    hit = _tag_templates.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    candidates = [serving_template(model.resolution.template) if model.resolution is not None else model.view]
    if model.resolution is not None and model.resolution.family is not None:
        candidates.append(serving_template(bundled.get(model.resolution.family)))  # its base-format template
    compiled = None
    for template in candidates:
        try:
            compiled = compile_template(template)
        except (TypeError, ValueError, KeyError):
            compiled = None
        if compiled is not None and not compiled.spec.get("extensions"):
            break
        compiled = None
    _tag_templates[key] = (model, compiled)
    return compiled


@functools.lru_cache(maxsize=256)
def _exported_tag(compiled: Any, tools_json: str, choice: str) -> str | None:
    """The exported tag's JSON, once per template, tool list and choice; None where the export refuses the
    template (`Unconstrainable`) or xgrammar cannot compile the tag (`xgrammar_compiles`)."""
    from chatparse.export.structural_tag import Unconstrainable

    try:
        text = compiled.grammar(json.loads(tools_json), tool_choice=choice, format="structural_tag").text
    except Unconstrainable:
        return None
    return text if xgrammar_compiles(text) else None


def xgrammar_compiles(tag_json: str) -> bool:
    """Whether xgrammar (SGLang's grammar backend for structural tags) compiles the tag: on an empty vocabulary,
    which costs milliseconds; SGLang compiles it again on the model's. A tag xgrammar refuses would fail the
    request in SGLang's backend (xgrammar 0.2.7 raises ``bitset::set`` on some regexes with a negated class of
    non-ASCII characters: mistral_v11's opener), so it is not handed over."""
    try:
        import xgrammar
    except ImportError:  # no xgrammar: SGLang's other backends compile what they can
        return True
    try:
        xgrammar.GrammarCompiler(xgrammar.TokenizerInfo([]), cache_enabled=False).compile_structural_tag(tag_json)
    except Exception:  # noqa: BLE001 - xgrammar raises RuntimeError and its own errors
        return False
    return True


def chatparse_structural_tag(model: _Model, tools: list[dict], *, tool_choice: Any = "auto") -> dict | None:
    """chatparse's export (`CompiledTemplate.grammar(tools, tool_choice=..., format="structural_tag")`) of the
    model's template (`_tag_template`), from the start of the message; a strict tool's arguments follow its
    schema, another's are any JSON object. None where the template cannot be exported."""
    compiled = _tag_template(model)
    if compiled is None:
        return None
    typed = []
    for tool in tools:
        fn = tool.get("function") or tool
        parameters = fn.get("parameters") if fn.get("strict") else None
        typed.append({"type": "function", "function": {
            "name": fn["name"], "parameters": parameters if isinstance(parameters, dict) else {"type": "object"}}})
    name = _tool_choice_name(tool_choice)
    choice = name if name is not None else tool_choice if isinstance(tool_choice, str) else "auto"
    if choice != "none" and not typed:
        if choice != "auto":  # a call is required, and there is no tool to call
            return None
        choice = "none"
    try:
        text = _exported_tag(compiled, json.dumps(typed), choice)  # key order kept: xgrammar writes properties in it
    except ValueError:
        return None
    return None if text is None else json.loads(text)


# --------------------------------------------------------------------------------------------------------------
# Inert deltas: text no delimiter can begin in, while a detector's parser is quiet
# --------------------------------------------------------------------------------------------------------------
INERT = True  # tests turn it off to compare with the parsers fed every delta
VERIFY_INERT = False  # tests turn it on: a lagging feed whose events are not the text handed out raises
# inert deltas held at most before they are fed to the parser in one piece: at a few characters a delta, a
# piece of over 256 characters, which the runtime searches for the mode's anchor in C where it steps every
# whitespace run of a shorter one (`Mode.skip_to`): with 64 the flushes were a fifth of the mean cost per delta
LAG = 256
# the fields whose regions the detectors' inert paths serve: the reasoning detector's (content and a call's
# text are normal text, the reasoning field's is reasoning) and the tool detector's (passthrough text is
# normal text; a call's text waits for its close)
_REASONING_INERT = (CONTENT, TOOLS, THINKING)
_TOOL_INERT = (PASSTHROUGH, TOOLS)


class _ToolResult:
    """Duck-types SGLang's `StreamingParseResult` of a tool detector (a pydantic model: building one validates
    it, about 1 us a delta, the largest single cost of the tool detector's chunks-only path) for a delta of
    normal text only, as SGLang's own `_ReasoningResult` duck-types the reasoning detector's. Everything in
    SGLang that reads a tool detector's streaming result reads these two attributes (`FunctionCallParser
    .parse_stream_chunk`, `serving_chat`, `serving_responses`)."""

    __slots__ = ("normal_text", "calls")

    def __init__(self, normal_text: str):
        self.normal_text = normal_text
        self.calls = []


def inert_state(adapter: Any, fields: tuple) -> tuple | None:
    """(anchor, spaces, mode, field, run) when `adapter`'s compiled parser is quiet in a region of one of
    `fields` (opened, no JSON value tracked, not finished, everything fed stepped, nothing pending, and nothing
    held back but `run`, a run of the mode's leading whitespace at the end), else None.

    Then a text in which no delimiter of the scanner's current mode can begin, read off the mode as the
    runtime reads it (`Mode.skip_to`), is that region's text whole, and the parser stays so in the same region:
    the runtime's own fast path (`StreamParser.feed`). Where the mode has a single anchor character
    (`anchor`: every character other than the mode's leading whitespace `spaces` that keeps an attempt alive
    is it), such a text is one without it: `run` and the text are handed out, but for a run of `spaces` at its
    end, which is held (an attempt in it dies at the first character that is neither, and can live on only
    through the anchor). Without one (`anchor` None, `run` empty): a text with ``mode.skip_to(text, 0) ==
    len(text)``."""
    if not INERT:
        return None
    parser = adapter._parser
    if parser is None or adapter._held or adapter._finalized:
        return None
    core = parser._core
    sc = core.scanner
    fi = core.current
    if (fi is None or not core.opened or core.pending or core.json_end is not None or core.stalled
            or not core.usable or not sc.end or sc.scan != sc.end):
        return None
    field = core.names[fi]
    if field not in fields:
        return None
    mode = sc.mode
    anchor, spaces = mode.anchor_char, mode.wchars
    run = ""
    if sc.pos != sc.end or sc.attempts:
        run = sc.text[sc.pos - sc.base:]
        if anchor is None or not run or run.strip(spaces):
            return None
    return anchor, spaces, mode, field, run


class _InertDeltas:
    """What both detectors do with a delta while their parser is quiet in a region (`_inert`: `inert_state`):
    a delta in which no delimiter can begin is handed on as that region's text (`_inert_text`), as their
    chunks-only path would hand it, without feeding the parser; those deltas (`_lag`) are fed in one piece
    before the parser is next needed, or once `LAG` of them wait (`_feed_lag`).

    The inert path returns one result object per detector (`_inert_out`), its attributes set anew for each
    delta: every caller in SGLang 0.5.23 (the only version `register` accepts) reads a detector's streaming
    result before it hands the detector the next delta (`ReasoningParser.parse_stream_chunk`,
    `FunctionCallParser.parse_stream_chunk`), and a result made per delta was a quarter of the plugin's own
    cost per inert delta."""

    _inert: tuple | None = None  # (anchor, spaces, mode, field) while quiet
    _run = ""  # the leading whitespace held at the end of the text so far (by the parser or in the lag)
    _synced_run = ""  # ... when the parser was last fed
    _lag: list

    def _arm(self, fields: tuple) -> None:
        state = inert_state(self._adapter, fields)
        if state is None:
            self._inert = None
        else:
            self._inert = state[:4]
            self._run = self._synced_run = state[4]

    def _inert_text(self, new_text: str) -> str | None:
        """The text a non-empty delta hands on while `_inert` (held whitespace before it, less held
        whitespace at its end), the delta kept in the lag; None where a delimiter may begin in it."""
        anchor, spaces, mode, _ = self._inert
        if anchor is None:
            if mode.skip_to(new_text, 0) != len(new_text):
                return None
            text = new_text
        elif anchor in new_text:
            return None
        elif new_text[-1] in spaces:
            run = self._run
            text = run + new_text if run else new_text
            kept = text.rstrip(spaces)
            self._run = text[len(kept):]
            text = kept
        elif self._run:
            text = self._run + new_text
            self._run = ""
        else:
            text = new_text
        lag = self._lag
        lag.append(new_text)
        if len(lag) >= LAG:
            self._feed_lag()
        return text

    def _leave_inert(self) -> None:
        """Before the parser is needed again: the lagging deltas fed, the inert path off until `_arm`."""
        if self._lag:
            self._feed_lag()
        self._inert = None

    def _feed_lag(self) -> None:
        """Feed the parser the deltas the inert path handed out: its events are one chunk of the text handed
        out (handed out already), and it stays quiet in that region, holding `_run`."""
        lagging = "".join(self._lag)
        self._lag = []
        events = self._adapter._parser.feed(lagging)
        if VERIFY_INERT:
            field, run = self._inert[3], self._run
            text = self._synced_run + lagging
            text = text[:len(text) - len(run)]
            state = inert_state(self._adapter, (field,))
            if (len(events) != bool(text) or chunk_text(events, (field,)) != text or state is None
                    or state[4] != run):
                raise AssertionError(f"inert deltas {lagging!r} in {field}: the parser gives {events!r}")
        self._synced_run = self._run


# --------------------------------------------------------------------------------------------------------------
# The detectors SGLang selects by name
# --------------------------------------------------------------------------------------------------------------
class ChatparseToolDetector(_InertDeltas, _rt.ResponseTemplateToolDetector):
    """SGLang's response-template tool detector, on chatparse's parser. A template without a tool-call field
    is served too: no calls, the text passes through."""

    def __init__(self, tokenizer=None, response_template: dict | None = None, prefix: str = "",
                 tools=None, constrained: bool = False):
        # SGLang's constructor body, on the model's state computed once (`_model`), not per request
        BaseFormatDetector.__init__(self)
        model = self._model = _model(tokenizer, response_template)
        if constrained and not sglang_holds_calls(model, tools):
            constrained = False  # the grammar holding the calls is chatparse's own: `sglang_holds_calls`
        templates = model.derived
        self.response_template = model.view
        self._prefix = prefix
        self._tools = tools
        self._constrained = constrained
        self.incomplete_tool_call_indices: set[int] = set()
        self._tool_indices = None
        self._lag = []  # inert deltas not fed to the parser yet (`_InertDeltas`)
        self._inert_out = _ToolResult("")  # the inert path's result, reused (`_InertDeltas`)
        self._thinking_field = templates.source.fields.get(THINKING)
        self._content_field = templates.source.fields.get(CONTENT)
        self._message_start = model.message_start
        self._passthrough = templates.tool_extraction is None
        if self._passthrough:  # (kimi_vl_think) nothing to extract
            self._ends_at_answer = False
            self._template = templates.streaming
            self._tool_field = None
            self._each_transform = None
            self.tool_close_literals = []
            self._adapter = None
            return
        self._ends_at_answer = constrained and templates.tool_to_answer is not None
        self._template = templates.tool_to_answer if self._ends_at_answer else templates.tool_extraction
        self._tool_field = templates.source.fields[TOOLS]
        self._each_transform = self._tool_field.transform if self._tool_field.transform_each else None
        self._adapter = self._new_adapter()
        self.tool_close_literals = self._tool_field.close_literals or []
        if self.tool_close_literals:
            self.eot_token = self.tool_close_literals[0]

    def _new_adapter(self):
        if self._constrained:  # SGLang's own adapter: see the module docstring
            return super()._new_adapter()
        return _CompiledAdapter(self._template, self._model.tools, prefix=self._prefix,
                                typing_json=self._model.json_values, eos_closes=self._model.eos_closes)

    def has_tool_call(self, text: str) -> bool:
        return False if self._passthrough else super().has_tool_call(text)

    def detect_and_parse(self, text: str, tools):
        if self._passthrough:
            return ToolStreamingParseResult(normal_text=text, calls=[])
        return super().detect_and_parse(text, tools)

    def parse_streaming_increment(self, new_text: str, tools):
        inert = self._inert
        if inert is not None and new_text:
            # the parser is quiet in the passthrough region or in a call: `_InertDeltas` (its commonest case
            # inline, as in the reasoning detector; a call's text waits for its close, as in the chunks-only
            # path below)
            anchor = inert[0]
            if anchor is not None and anchor not in new_text and new_text[-1] not in inert[1] and not self._run:
                lag = self._lag
                lag.append(new_text)
                if len(lag) >= LAG:
                    self._feed_lag()
                text = new_text
            else:
                text = self._inert_text(new_text)
            if text is not None:
                out = self._inert_out
                out.normal_text = text if inert[3] == PASSTHROUGH else ""
                return out
        if self._passthrough:
            return ToolStreamingParseResult(normal_text=new_text, calls=[])
        self._leave_inert()
        adapter = self._adapter
        if type(adapter) is not _CompiledAdapter:
            return self._emit_streaming_events(adapter.feed(new_text, tools), tools)
        parser = adapter._parser
        direct = parser is not None and not adapter._held and not adapter._finalized
        # `_CompiledAdapter.feed`, whose `_handed` hands chunks on unchanged: run below where an event is not one
        events = parser.feed(new_text) if direct else adapter.feed(new_text, tools)
        # a delta of chunks only: SGLang's routing would hand on their normal text and nothing else
        # (`chunk_text`); its per-call setup and two passes were most of the plugin's cost per delta
        text = ""
        for ev in events:
            if ev["type"] != "region_chunk":
                result = self._emit_streaming_events(adapter._handed(events) if direct else events, tools)
                break
            if ev["field"] in _TOOL_NORMAL:
                text += ev["text"]
        else:
            if self._tool_indices is None:
                self._tool_indices = self._get_tool_indices(tools)
            result = _ToolResult(text)
        if self._tool_indices is not None:  # (the inert path leaves SGLang's routing state as it is)
            self._arm(_TOOL_INERT)
        return result

    def finish(self, tools):
        if self._passthrough:
            return ToolStreamingParseResult(normal_text="", calls=[])
        self._leave_inert()
        return super().finish(tools)

    def open_call_closer(self, text: str):
        return None if self._passthrough else super().open_call_closer(text)

    # ---- structural tags (issue #39): what SGLang constrains a request's tool calls with
    def supports_structural_tag(self) -> bool:
        """Whether this detector hands SGLang a structural tag for its tools' calls (`get_structural_tag`, for
        ``tool_choice="required"``): SGLang then parses a forced call in the template's own format (with this
        detector) instead of constraining it to its generic JSON array."""
        if self._passthrough:
            return False
        try:
            return self.get_structural_tag(tools=self._tools, tool_choice="required") is not None
        except ValueError:
            return False

    def get_structural_tag(self, tools=None, tool_choice: Any = "auto", thinking_mode: bool = False,
                           parallel_tool_calls: bool = True, message_start: bool = False):
        """The structural tag SGLang constrains this request's output with (an xgrammar `StructuralTag`), or
        None (SGLang then falls back to its generic JSON constraint).

        The rule: **SGLang's own derivation where it derives a call tag** (`sglang_structural_tag`: the call
        SGLang's template detectors make of `response_template_structural_tag.tool_call_structural_tag`),
        **else chatparse's export** (`chatparse_structural_tag`: `CompiledTemplate.grammar(...,
        format="structural_tag")`). Measured on every bundled family's serving-grade template and its
        real-output corpus (bench/sglang_structural_tags.py, bench/results/SGLANG_STRUCTURAL_TAGS.md): SGLang
        derives a call tag for none of them (its derivation needs a tool-call closer written as literals,
        JSON arguments without ``content_args`` or xml-inline ones, and the function named by the opener;
        the bundled templates pad their delimiters with ``\\s*``), while chatparse's constrains the calls of
        every family it exports (unknown tool names and non-JSON arguments rejected) and accepts the corpus
        outputs listed there. So a bundled family gets chatparse's tag; a template SGLang can derive (a
        tokenizer config's own, literal-delimited) keeps SGLang's, which SGLang itself would build.

        chatparse's tag is exported from the model's template, or, where that template uses a format
        extension (which the export refuses) and is a bundled family's serving-grade one, from the family's
        base-format template (the extensions widen what is read as a call, not what a model writes). It
        covers the output from the start of the message (reasoning included, optional); the arguments of a
        strict tool (SGLang makes every tool strict at ``SGLANG_TOOL_STRICT_LEVEL`` >= PARAMETER) follow its
        JSON Schema, those of another tool are any JSON object. It cannot limit the number of calls:
        ``parallel_tool_calls=False`` with ``tool_choice="auto"`` stays refused (SGLang's own error), and
        with a required or named choice the tag asks for at least one call (not exactly one)."""
        if self._passthrough:
            return None
        tool_dicts = [t.model_dump() if hasattr(t, "model_dump") else dict(t) for t in tools or ()]
        tag = None
        if tool_dicts and tool_choice != "none":  # a call tag (without calls, SGLang's is its answer only)
            tag = sglang_structural_tag(self._model, tool_dicts, tool_choice=tool_choice,
                                        thinking_mode=thinking_mode, parallel_tool_calls=parallel_tool_calls,
                                        message_start=message_start)
        if tag is None:
            if tool_choice == "auto" and not parallel_tool_calls:
                return None
            tag = chatparse_structural_tag(self._model, tool_dicts, tool_choice=tool_choice)
        if tag is None:
            return None
        from xgrammar import StructuralTag

        return StructuralTag.model_validate(tag)

    def validate_structure_constraint_request(self, tool_choice: Any, parallel_tool_calls: bool,
                                              strict_requested: bool, *, tools, thinking_mode: bool = False):
        """SGLang's question before it constrains a request's calls: the tag (`get_structural_tag`) for a
        required or named tool choice, and for an automatic one with strict tools; None for an automatic
        choice with neither (unconstrained). Raises, as SGLang's template detectors do, for an automatic
        choice the tag cannot hold (``parallel_tool_calls=False``, or strict tools without a tag)."""
        if self._passthrough:
            return super().validate_structure_constraint_request(
                tool_choice, parallel_tool_calls, strict_requested, tools=tools, thinking_mode=thinking_mode)
        if tool_choice == "auto" and parallel_tool_calls and not strict_requested:
            return None
        tag = self.get_structural_tag(tools=tools, tool_choice=tool_choice, thinking_mode=thinking_mode,
                                      parallel_tool_calls=parallel_tool_calls)
        if tag is None and tool_choice == "auto":
            requested = "strict tools" if strict_requested and parallel_tool_calls else "parallel_tool_calls=False"
            raise ValueError(f"{type(self).__name__} cannot enforce {requested} with automatic tool choice for "
                             "this response template")
        return tag


class ChatparseReasoningDetector(_InertDeltas, _rt.ResponseTemplateReasoningDetector):
    """SGLang's response-template reasoning detector, on chatparse's parser. A template without a reasoning
    field is served too: the whole output is normal text."""

    def __init__(self, stream_reasoning: bool = True, tokenizer=None, response_template: dict | None = None,
                 prefix: str = "", force_nonempty_content: bool = False, grammar_start: str | None = None,
                 tools=None, constrained: bool = False, **_kwargs):
        # SGLang's constructor body, on the model's state computed once (`_model`), not per request
        model = self._model = _model(tokenizer, response_template)
        templates = model.derived
        self.response_template = model.view
        self.stream_reasoning = stream_reasoning
        self.think_excluded_tokens = None
        self._force_nonempty_content = force_nonempty_content
        self._open_reasoning = ""
        thinking = templates.source.fields.get(THINKING)
        self.think_start_token = thinking.open_literals[0] if thinking and thinking.open_literals else ""
        self.think_end_token = thinking.close_literals[0] if thinking and thinking.close_literals else ""
        self._thinking_field = thinking
        self._content_field = templates.source.fields.get(CONTENT)
        self._tool_field = templates.source.fields.get(TOOLS)
        self._message_start = model.message_start
        self.message_start_think_openers = model.think_openers
        self.think_start_self_label = ""
        if grammar_start in (_rt.GRAMMAR_AFTER_REASONING, _rt.GRAMMAR_AT_ANSWER) and thinking is None:
            grammar_start = _rt.GRAMMAR_FROM_START
        self._grammar_start = grammar_start
        if grammar_start == _rt.GRAMMAR_AT_ANSWER:
            self._template = templates.reasoning_to_answer
        elif grammar_start == _rt.GRAMMAR_AFTER_REASONING:
            self._template = templates.reasoning_only
        else:
            self._template = templates.streaming
        self._prefix = prefix
        self._tools = tools
        self._constrained = constrained
        self._adapter = self._new_adapter()
        self.answer_started = False
        self._lag = []  # inert deltas not fed to the parser yet (`_InertDeltas`)
        self._inert_out = _rt._ReasoningResult()  # the inert path's result, reused (`_InertDeltas`)

    def _new_adapter(self):
        if self._grammar_start is not None or self._constrained:  # SGLang's own: see the module docstring
            return super()._new_adapter()
        return _CompiledAdapter(self._template, self._model.streaming, prefix=self._prefix)

    def parse_streaming_increment(self, new_text: str):
        inert = self._inert
        if inert is not None and new_text:
            # the parser is quiet in the answer, a call or the reasoning: `_InertDeltas` (its commonest case
            # inline: a Python call was a fifth of the cost)
            anchor = inert[0]
            if anchor is not None and anchor not in new_text and new_text[-1] not in inert[1] and not self._run:
                lag = self._lag
                lag.append(new_text)
                if len(lag) >= LAG:
                    self._feed_lag()
                text = new_text
            else:
                text = self._inert_text(new_text)
            if text is not None:
                out = self._inert_out
                if inert[3] == THINKING:
                    out.normal_text, out.reasoning_text = "", text
                else:
                    out.normal_text, out.reasoning_text = text, ""
                return out
        adapter = self._adapter
        if type(adapter) is not _CompiledAdapter or self._force_nonempty_content or not self.stream_reasoning:
            return super().parse_streaming_increment(new_text)
        self._leave_inert()
        # (SGLang's `_record_answer` sets `answer_started` to ``self._constrained and ...``: False on this
        # adapter, which serves only unconstrained requests, as __init__ set it)
        parser = adapter._parser
        direct = parser is not None and not adapter._held and not adapter._finalized
        # `_CompiledAdapter.feed`, whose `_handed` hands chunks on unchanged: run below where an event is not one
        events = parser.feed(new_text) if direct else adapter.feed(new_text, self._tools)
        # a delta of chunks only: SGLang's routing would make it reasoning and normal text and nothing else
        # (`chunk_text`); one pass over the events
        normal = reasoning = ""
        for ev in events:
            if ev["type"] != "region_chunk":
                result = adapter.route_reasoning_events(adapter._handed(events) if direct else events,
                                                        stream_reasoning=True)
                break
            field = ev["field"]
            if field == THINKING:
                reasoning += ev["text"]
            elif field in _REASONING_NORMAL:
                normal += ev["text"]
        else:
            result = _rt._ReasoningResult(normal, reasoning)
        self._arm(_REASONING_INERT)
        return result

    def finish(self):
        self._leave_inert()
        return super().finish()


# --------------------------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------------------------
def recognises(ctx: Any) -> bool:
    """The predicate of the plugin's `--tool-call-parser auto` / `--reasoning-parser auto` rule: whether a
    bundled family recognises the chat template SGLang's detection reads (`TemplateDetectionContext.template`),
    as the shared resolver's last step does (`chatparse.templates.family_of_chat_template`)."""
    template = getattr(ctx, "template", None)
    return isinstance(template, str) and bundled.family_of_chat_template(template) is not None


_AUTO_RULES = ("TOOL_CALL_PARSER_RULES", "REASONING_PARSER_RULES")


def _register_auto() -> None:
    """Put the plugin's rule first in SGLang's ``auto`` detection rules (`sglang.srt.parser.template_detection`),
    so that ``auto`` picks ``chatparse`` wherever a bundled family recognises the chat template, before SGLang's
    own rules (which would pick a hand-written detector) and before SGLang's fallback to a tokenizer config's
    ``response_template`` (which the plugin reads first anyway). `template_manager` copies the rule tuples
    when it is imported: patched too where it already is (importing it here would cost a server's start-up
    nothing, but any other process about 25 s)."""
    import sys

    from sglang.srt.parser import template_detection

    rule = template_detection.DetectionRule(name=NAME, value=NAME, predicate=recognises)
    modules = [template_detection]
    manager = sys.modules.get("sglang.srt.parser.template_manager")
    if manager is not None:
        modules.append(manager)
    for module in modules:
        for attr in _AUTO_RULES:
            rules = getattr(module, attr)
            if not any(r.name == NAME for r in rules):
                setattr(module, attr, (rule, *rules))


def register() -> None:
    """SGLang's plugin hook: register ``chatparse`` as a tool-call parser and a reasoning parser (SGLang's
    command line reads the choices from these registries once a plugin has imported them), and as what
    ``auto`` picks for a chat template a bundled family recognises (`_register_auto`)."""
    if sglang.__version__ not in TESTED_SGLANG:
        raise RuntimeError(f"chatparse's SGLang plugin is tested with sglang {', '.join(TESTED_SGLANG)}; "
                           f"this is sglang {sglang.__version__}")
    FunctionCallParser.ToolCallParserEnum[NAME] = ChatparseToolDetector
    ReasoningParser.DetectorMap[NAME] = ChatparseReasoningDetector
    from sglang.srt.function_call import parser_names
    from sglang.srt.parser import reasoning_parser_names

    for names in (parser_names.TOOL_CALL_PARSER_NAMES, reasoning_parser_names.REASONING_PARSER_NAMES):
        if NAME not in names:
            names.append(NAME)
    _register_auto()
