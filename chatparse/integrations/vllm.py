"""vLLM plugin: chatparse's compiled parser in place of vLLM 0.33.0's response-template parser.

``pip install "chatparse[vllm]"`` installs an entry point in vLLM's ``vllm.general_plugins`` group; vLLM calls
`register` in every process it starts, which registers the name ``chatparse`` as a tool-call parser and as a
reasoning parser. Then::

    vllm serve MODEL --enable-auto-tool-choice --tool-call-parser chatparse --reasoning-parser chatparse

serves a checkpoint of any bundled family, through `CompiledResponseTemplateParser`. The template is the
tokenizer config's own ``response_template``, else the one `chatparse.integrations.resolve` finds (the
operator's ``$CHATPARSE_RESPONSE_TEMPLATE``, the family by model id, the family by chat template: a bundled
family's serving-grade template), resolved, compiled and bound once per model and process (`_model`), logged
once. The parser is a subclass of vLLM's own `ResponseTemplateParser`, so request handling (tool choice none /
auto / required / named, include_reasoning, strict tools refused), the delta routing, the `DeltaMessage`s and
tool-call ids are vLLM's code; what it replaces is the parser underneath (vLLM's copy of the interpreter,
`vllm.parser.chat_parsing.ResponseParser`) with chatparse's compiled one in the serving dialect
(``dialect="vllm"``: the same events), fed token ids through the token tables where the ids are there. vLLM's
routing reads a view of the template (`vllm_template.vllm_view`: extension keys, and a reasoning field's
``join``/``repeats``, left out); chatparse parses with the whole of it, in vLLM's streaming variant (every
field optional, an implicit content field added; `vllm_template.serving_variant`), whose tables ``chatparse
compile DIR --vllm`` writes beside the tokenizer (``response_template.vllm.cpt``, token tables included); the
plugin loads that file when its template hash and tokenizer.json match.

vLLM serves the fields ``thinking``, ``content`` and ``tool_calls`` and refuses any other at startup. The
format's own name for reasoning is ``reasoning_content`` (chatparse's bundled templates use it): the plugin
serves it as ``thinking`` (the field renamed, nothing else changed). A template without a reasoning (or
tool-call) field is served with the same two flags: nothing of that kind to extract. What the plugin streams
beyond vLLM's adapter: the content field's ``join`` between the texts on both sides of a tool call (vLLM's
adapter glues them), and the last delta of a generation as vLLM's text (its ids carry a stop token the text
leaves out).

A request's parser costs mostly look-ups, since requests to one model start alike: the prompt is read from its
end up to its last start anchor, and the short end that decided the cut is kept with the token binding
(`TokenBinding.prompt_text`); the parser starts as the model's prototype for that cut, shared until the
request's first feed, with the stream's start state kept beside it (`_CompiledStream._start_shared`); and the
stream's state after a common first delta is kept too, so that a later request with the same first ids
rebuilds that delta and forks the kept state at its second delta, with its own tools (`_CompiledStream._first`).

Tested with vllm 0.33.0 (tests/test_vllm_plugin.py); it reads internals of `vllm.parser.response_template`
that other versions may not have, and `register` refuses other versions with a message saying so.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import vllm
from vllm.logger import init_logger
from vllm.parser import response_template as _rt
from vllm.parser.abstract_parser import Parser, StreamState
from vllm.parser.engine.adapters import ParserEngineToolAdapter
from vllm.renderers.chat_utils.tool_call import get_tool_call_id_type
from vllm.parser.parser_manager import ParserManager
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager

import chatparse
from chatparse.compiled import compile_template
from chatparse.integrations import vllm_reasoning as _reasoning
from chatparse.integrations.edge_timing import CLOSED, DELIMITED, edge_split
from chatparse.integrations.vllm_delta import content_delta, delta_of, reasoning_delta
from chatparse.integrations.resolve import Resolution, TemplateNotFound, inner_tokenizer, log_once, resolve
from chatparse.integrations.vllm_template import (SERVING_TABLES_NAME, serving_template, serving_variant, text_joins,
                                                  vllm_view)
from chatparse.runtime.tokens.binding import token_binding
from chatparse.compiler.template_objects import is_template_object, to_template_dict

__all__ = ["CompiledResponseTemplateParser", "ChatparseReasoningParser", "ChatparseToolParser", "register",
           "serving_template"]

TESTED_VLLM = ("0.33.0",)
NAME = "chatparse"
_logger = init_logger("vllm.chatparse")  # under vLLM's logger, so that its log configuration shows it


# --------------------------------------------------------------------------------------------------------------
# Resolved, compiled and bound once per model
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Model:
    """What the plugin needs of one model, computed once per (tokenizer, template given): the resolution (None
    when the caller passed a template), the template vLLM's routing reads (`view`, loaded by vLLM in its
    streaming form: `loaded`), chatparse's compiled serving variant of the full template, the token binding
    (None: the text path runs) and vLLM's reasoning-closer ids."""

    resolution: Resolution | None
    view: dict
    loaded: Any
    compiled: Any
    binding: Any
    reasoning_end_ids: Any
    joins: dict  # text field (served name) -> its join, put between its regions' streamed texts
    # cut prefix -> a token parser that has parsed it (`_prototype`): never fed, only forked
    prototypes: dict = field(default_factory=dict, compare=False)
    # (cut prefix, request settings) -> (a stream's start state, {first ids: its state after them})
    # (`_CompiledStream._start_shared`, `_first`)
    first_steps: dict = field(default_factory=dict, compare=False)

    @property
    def has_thinking(self) -> bool:
        return _rt.THINKING_FIELD in self.loaded.fields


_models: dict = {}
_models_lock = threading.Lock()


def _model(tokenizer: Any, response_template: dict | None) -> _Model:
    """The `_Model` of `tokenizer` and the template a caller passed (None: resolved by `resolve.resolve`),
    built on the first call and then looked up: a request's parser construction costs a dictionary look-up,
    not vLLM's template loading (four times per request in vLLM's own constructors) nor chatparse's
    validation. Raises `TemplateNotFound` or ValueError (naming where the template came from)."""
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
        resolution = resolve(tokenizer)
        log_once(resolution, "vLLM", _logger)
        template, where = resolution.template, resolution.reason
    else:
        template, where = response_template, "the response_template given"
    try:
        full = serving_template(template)
        view = vllm_view(full)
        loaded = _rt._serving_template(tokenizer, view)
        variant = serving_variant(full)
        compiled = compile_template(variant)
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{where}: not a response template vLLM can serve: {exc}") from exc
    compiled, binding = _bound(tokenizer, compiled, variant)
    end_ids = _rt._reasoning_end_ids(tokenizer, tokenizer.get_vocab(), loaded)
    return _Model(resolution, view, loaded, compiled, binding, end_ids, text_joins(template))


def _bound(tokenizer: Any, compiled: Any, variant: dict):
    """(compiled template, token binding or None) for this tokenizer. The binding is None where chatparse
    cannot bind the tokenizer (then the text path runs).

    Where the tokenizer was loaded from a local directory that holds ``response_template.vllm.cpt`` (written by
    ``chatparse compile DIR --vllm``) for this very template and tokenizer, the parsers run on its tables and
    token tables, so the vocabulary and token tables are not built (`chatparse.tokenizer_dir.load_dir` checks
    the template hash and the tokenizer.json the file was built from, and rebuilds with a warning where either
    differs)."""
    hf = inner_tokenizer(tokenizer)
    directory = _local_dir(hf)
    if directory is not None:
        from chatparse import tokenizer_dir

        loaded_ct = tokenizer_dir.load_dir(directory, template=variant, name=SERVING_TABLES_NAME)
        if "tokens" in loaded_ct.raw_tables or getattr(loaded_ct, "_token_binding", None) is not None:
            return loaded_ct, token_binding(loaded_ct)
    try:
        return compiled, chatparse.bind(compiled, hf)
    except (TypeError, ValueError, AttributeError):
        return compiled, None


def _binding(tokenizer: Any, template: Any):
    """(compiled template, token binding or None) for a template dict or vLLM's loaded template (the bench's
    and tests' way in; the parsers use `_model`)."""
    if is_template_object(template):
        template = to_template_dict(template)
    model = _model(tokenizer, template)
    return model.compiled, model.binding


def _local_dir(hf: Any) -> str | None:
    """The local directory a transformers tokenizer was loaded from, when it holds the plugin's tables file."""
    path = getattr(hf, "name_or_path", None)
    if isinstance(path, str) and path and os.path.isfile(os.path.join(path, SERVING_TABLES_NAME)):
        return path
    return None


PROTOTYPES = 32  # prototypes kept per model (the oldest goes first)
PROTOTYPE_CUT = 4096  # characters of cut prefix a prototype is kept for at most
FIRST_STEPS = 64  # first deltas whose step is kept per prototype and request settings (`_CompiledStream._first`)
FIRST_IDS = 8  # ids in a first delta at most for its step to be kept (one without speculative decoding)


def _put(table: dict, key, value, limit: int) -> None:
    """``table[key] = value``, the oldest entries dropped first to keep at most `limit` (another thread may be
    changing `table` too: a failed drop is left to a later call)."""
    while len(table) >= limit:
        try:
            del table[next(iter(table))]
        except (StopIteration, KeyError, RuntimeError):
            break
    table[key] = value


def _prototype(model: _Model, prefix: str):
    """(cut prefix of `prefix`, the model's prototype for it or None): a token parser in the serving dialect that
    has parsed the cut (the prompt after its last start anchor, all the parser's state depends on), built on
    the first request with that cut and kept, never fed, only forked (`TokenParser.fork`) per request.

    A prototype is built without tools, and kept only where parsing the cut closed no region (the one step that
    reads the tools: storing a value), so that it is the state any request's parser would reach; None where it
    is not kept (then the request builds its own parser)."""
    protos = model.prototypes
    cut = model.binding.compiled.tables.cut_prefix(prefix, log=False) if prefix else ""
    proto = protos.get(cut)
    if proto is None and len(cut) <= PROTOTYPE_CUT:  # (False: this cut's state reads the tools)
        proto = model.binding.parser(prefix=prefix, dialect="vllm")
        if not proto._core.usable or any(ev["type"] in CLOSED for ev in proto.initial_events):
            proto = False
        _put(protos, cut, proto, PROTOTYPES)
    return cut, proto or None


# --------------------------------------------------------------------------------------------------------------
# One generation
# --------------------------------------------------------------------------------------------------------------
_ROUTE = object()  # `_CompiledStream._chunks_delta`: these events take vLLM's routing
_OWNED = object()  # `_CompiledStream._tools`: the stream's parser is its own
_MISS = object()  # `_CompiledStream._first`: no kept step applies
# the attributes `_CompiledStream._start` sets, in its order (a kept start state is a tuple of them)
_START = ("template", "joins", "parse_reasoning", "include_reasoning", "parse_tools", "parser", "by_ids",
          "_prefix_end", "_next_tool_index", "_finalized", "_open_region", "_held", "_dest")
_CONTENT, _REASONING = "content", "reasoning"  # the delta field a region's text goes to


def _destinations(*, parse_reasoning: bool, include_reasoning: bool, parse_tools: bool) -> dict:
    """Region field -> the delta field its text streams in (`_CONTENT`, `_REASONING`; a field not in the
    map streams nowhere), as vLLM's `_ResponseStream._route` sends a region's chunks: tool-call text is
    content where tools are not parsed, reasoning is content where it is not parsed and dropped where it is
    parsed but not included."""
    return {_rt.TOOL_FIELD: None if parse_tools else _CONTENT, _rt.CONTENT_FIELD: _CONTENT,
            _rt.THINKING_FIELD: (_REASONING if include_reasoning else None) if parse_reasoning else _CONTENT}


def _text_parts(delta):
    """(content, reasoning) from which `vllm_delta.delta_of` rebuilds `delta` (None for no delta), or `_MISS`
    where it does not (tool calls, another field, an empty text given)."""
    if delta is None:
        return None
    if delta.tool_calls or not delta.model_fields_set <= {"content", "reasoning"}:
        return _MISS
    texts = (delta.content or "", delta.reasoning or "")
    again = delta_of(*texts)
    if again != delta or again.model_fields_set != delta.model_fields_set:
        return _MISS
    return texts


class _Delta(_rt._DeltaBuilder):
    """vLLM's `_DeltaBuilder`, building a text-only delta with `vllm_delta.delta_of` (equal to vLLM's)."""

    def build(self):
        if self.tool_calls:
            return super().build()
        return delta_of("".join(self.content), "".join(self.reasoning))


class _CompiledStream(_rt._ResponseStream):
    """vLLM's `_ResponseStream` (its routing of events to deltas) over chatparse's parser in the serving
    dialect: a `TokenParser` when the tokenizer is bound, else a text `ResponseParser`.

    Events reach vLLM's routing when vLLM's interpreter would hand them out: a delimiter match that ends at
    the end of the text so far is held until more text comes, as vLLM's `_can_grow` holds it
    (`edge_timing.edge_split`); chatparse alone would hand some of them out a delta earlier."""

    def __init__(self, template, *, prefix: str, tools, parse_reasoning: bool, include_reasoning: bool,
                 parse_tools: bool, new_tool_call_id, binding=None, compiled=None, joins=None, model=None) -> None:
        self.new_tool_call_id = new_tool_call_id
        self._segments: dict = {}  # field -> "seen" (text streamed) or "pending" (a later region opened)
        self._shown = 0  # characters of output vLLM has shown in the texts of the deltas `feed_ids` took
        self._tools = _OWNED  # else: the tools of this request, whose parser is still shared (`_own`)
        self._firsts = None  # the first steps kept for this request's prototype and settings (`_first`)
        settings = (template, joins or {}, parse_reasoning, include_reasoning, parse_tools)
        if model is not None and model.binding is not None:
            cut, proto = _prototype(model, prefix)
            if proto is not None:
                self._start_shared(model, cut, proto, tools, settings)
                return
            parser = model.binding.parser(prefix=prefix, tools=tools, dialect="vllm")
        elif binding is not None:
            parser = binding.parser(prefix=prefix, tools=tools, dialect="vllm")
        else:
            parser = chatparse.ResponseParser(compiled, prefix=prefix, tools=tools, dialect="vllm")
        self._start(parser, settings, by_ids=binding is not None or model is not None and model.binding is not None)

    def _start(self, parser, settings: tuple, *, by_ids: bool) -> None:
        """Set the state a stream starts in (`_START` lists it) over `parser`, fresh or a prototype."""
        self.template, self.joins, self.parse_reasoning, self.include_reasoning, self.parse_tools = settings
        self.parser = parser
        self.by_ids = by_ids
        self._prefix_end = len(parser.input_text)
        self._next_tool_index = 0
        self._finalized = False
        self._open_region = None
        self._held: list = []
        self._dest = _destinations(parse_reasoning=settings[2], include_reasoning=settings[3],
                                   parse_tools=settings[4])
        self._track(self._as_vllm(parser.initial_events))

    def _start_shared(self, model: _Model, cut: str, proto, tools, settings: tuple) -> None:
        """Start over the model's prototype `proto`, shared until the first feed (`_own`): the start state is
        the same for every request with this cut prefix and these settings, so it is kept with them (with the
        first steps kept after it, `_first`) and copied."""
        key = (cut,) + settings[2:]
        kept = model.first_steps.get(key)
        # (kept for another prototype, template or joins: `_START`'s parser, template and joins)
        if kept is None or kept[0][5] is not proto or kept[0][0] is not settings[0] or kept[0][1] != settings[1]:
            self._start(proto, settings, by_ids=True)
            kept = (tuple([getattr(self, name) for name in _START]), {})
            _put(model.first_steps, key, kept, PROTOTYPES * 4)
        else:
            # (set one by one, in `_start`'s order: the instance keeps its compact attribute layout, which the
            # per-delta path reads; a ``__dict__.update`` or a class change would cost every later delta)
            (self.template, self.joins, self.parse_reasoning, self.include_reasoning, self.parse_tools,
             self.parser, self.by_ids, self._prefix_end, self._next_tool_index, self._finalized, self._open_region,
             held, self._dest) = kept[0]
            self._held = list(held)
        self._tools, self._firsts = tools, kept[1]

    def _route(self, events, delta) -> None:
        super()._route(self._joined(events) if self.joins else events, delta)

    def _joined(self, events: list) -> list:
        """`events` with a text field's ``join`` put before the first text of each of its regions after the
        first one that streamed text: vLLM's routing concatenates the regions' chunks, so without it the
        text on both sides of a tool call runs together where the delimiters took the whitespace
        (``0<tool_call>...</tool_call> a`` streamed as ``0a``; the message joins them with the template's
        ``join``, and the per-model parsers keep the model's own whitespace)."""
        out = []
        state = self._segments
        for ev in events:
            field = ev.get("field")
            if field in self.joins:
                if ev["type"] == "region_open" and state.get(field) == "seen":
                    state[field] = "pending"
                elif ev["type"] == "region_chunk" and ev["text"].strip():
                    if state.get(field) == "pending":
                        ev = dict(ev, text=self.joins[field] + ev["text"])
                    state[field] = "seen"
            out.append(ev)
        return out

    def _as_vllm(self, events: list) -> list:
        """`events`, and those held before, less what vLLM's interpreter would still hold (kept for later)."""
        if not self._held and not any(ev["type"] in DELIMITED for ev in events):
            return events
        handed, self._held = edge_split(self.template, self._held + events, self.parser.input_length)
        return handed

    def _own(self) -> None:
        """Give this request a parser of its own (a fork, typing arguments by its tools) in place of the shared
        state it starts from; before its first feed, so that a shared parser is never fed."""
        self.parser = self.parser.fork(tools=self._tools)
        self._tools = _OWNED
        self._firsts = None

    def _first(self, token_ids: Sequence[int], finished: bool):
        """The delta of a request's first `feed_ids`, while it shares its prototype (`_MISS`: `feed_ids` goes on,
        the parser now its own).

        Many requests of a model start from the same prompt end and the same first token (``<think>``,
        ``<tool_call>``, a usual first word), so the stream's state after that first step is kept per prototype
        and request settings (the first `FIRST_STEPS` first deltas seen): a later request whose first delta has
        the same ids takes the kept state as its shared parser and rebuilds the kept delta, and forks that state
        at its next feed (with its own tools), as it would have forked the prototype. Kept only where replaying
        gives what stepping gives: a few ids (`FIRST_IDS`), not the last delta, no region closed (a stored value
        reads the tools; a tool call draws a new id) and a delta that is text only (`vllm_delta.delta_of`
        rebuilds it)."""
        firsts = self._firsts
        key = None
        if firsts is not None and not finished and 0 < len(token_ids) <= FIRST_IDS:
            key = token_ids[0] if len(token_ids) == 1 else tuple(token_ids)
            hit = firsts.get(key)
            if hit is not None:
                self.parser, segments, held, self._open_region, texts = hit
                self._segments, self._held, self._firsts = dict(segments), list(held), None
                return None if texts is None else delta_of(*texts)
        self._own()
        if key is None or not all(type(i) is int for i in token_ids):
            return _MISS
        events = self.parser.feed_tokens(key if type(key) is int else list(key))
        delta = self._quick(events)
        if len(firsts) < FIRST_STEPS and not any(ev["type"] in CLOSED for ev in events):
            texts = _text_parts(delta)
            if texts is not _MISS:
                firsts[key] = (self.parser.fork(), dict(self._segments), tuple(self._held), self._open_region, texts)
        return delta

    def feed(self, text: str, *, finished: bool):
        if self._tools is not _OWNED:
            self._own()
        if self._finalized:
            return None
        delta = _Delta()
        self._route(self._track(self._as_vllm(self.parser.feed(text))), delta)
        if finished:
            self._finish(delta)
        return delta.build()

    def feed_ids(self, token_ids: Sequence[int], text: str, *, finished: bool):
        """`feed` for a delta given as token ids (the text path where there are none). In the last delta of a
        generation, vLLM's detokenizer leaves a stop token's text out while the ids still carry the token: the
        last id is fed only where the characters vLLM has shown (`_shown`) outrun what the other ids gave (fed
        anyway, ``<|im_end|>`` would end up in an open reasoning region or break an open tool call)."""
        if self._tools is not _OWNED:  # (the first feed of a stream that shares its start state)
            first = self._first(token_ids, finished)
            if first is not _MISS:
                self._shown += len(text)
                return first
        self._shown += len(text)
        if len(token_ids) == 1 and not finished and self.by_ids and not self._held and not self._finalized:
            parser = self.parser
            chunk = parser.feed_inert(token_ids[0])
            if chunk is not None:  # (fed: one chunk of the open field; the delta `_chunks_delta` would build)
                field = parser.open_field
                # (a field that streamed text and has no region pending stays so: `_unjoined` skipped)
                if self.joins and self._segments.get(field) != "seen" and not self._unjoined(field, chunk):
                    return self._quick([{"type": "region_chunk", "field": field, "text": chunk}])
                to = self._dest.get(field)
                if not chunk or to is None:
                    return None
                return content_delta(chunk) if to is _CONTENT else reasoning_delta(chunk)
            return self._quick(parser.feed_tokens(token_ids[0]))
        if not self.by_ids or (text and not token_ids):
            return self.feed(text, finished=finished)
        if self._finalized:
            return None
        if finished:  # the last id may be a stop token whose text vLLM left out: fed only if its text was shown
            ids = list(token_ids)
            events = self.parser.feed_tokens(ids[:-1]) if len(ids) > 1 else []
            if self.parser.input_length - self._prefix_end < self._shown:
                events += self.parser.feed_tokens(ids[-1])
            delta = _Delta()
            self._route(self._track(self._as_vllm(events)), delta)
            self._finish(delta)
            return delta.build()
        # one id as an int: the token tables' inline path (a list takes the general one)
        return self._quick(self.parser.feed_tokens(token_ids[0] if len(token_ids) == 1 else list(token_ids)))

    def _quick(self, events: list):
        """The delta of `events` (`_chunks_delta`'s where it applies, else through vLLM's routing)."""
        if not self._held:
            quick = self._chunks_delta(events)
            if quick is not _ROUTE:
                return quick
        delta = _Delta()
        self._route(self._track(self._as_vllm(events)), delta)
        return delta.build()

    def _chunks_delta(self, events: list):
        """The delta of `events` where they are region chunks only (most deltas) and nothing is held: what
        `_as_vllm`, `_track`, `_route` and ``_DeltaBuilder.build`` give for them (those hand chunks on
        unchanged, track no region and hold nothing), built directly (`vllm_delta.delta_of`); `_ROUTE` for
        any other event, or a chunk whose text a join would change, which take that path."""
        reasoning = content = ""
        joins, dest = self.joins, self._dest
        for ev in events:
            if ev["type"] != "region_chunk":
                return _ROUTE
            field, text = ev["field"], ev["text"]
            if joins and not self._unjoined(field, text):
                return _ROUTE
            to = dest.get(field)
            if to is _CONTENT:
                content += text
            elif to is _REASONING:
                reasoning += text
        return delta_of(content, reasoning)

    def _unjoined(self, field: str, text: str) -> bool:
        """For a chunk of `field` streamed outside vLLM's routing: False where the field's join goes before
        `text` (`_joined` puts it there, so the chunk must take the routing); else True, having noted, as
        `_joined` notes it, that the field streamed text (idempotent if the chunk is routed after all)."""
        if field in self.joins and text.strip():
            if self._segments.get(field) == "pending":
                return False
            self._segments[field] = "seen"
        return True

    def _finish(self, delta) -> None:
        self._finalized = True
        if len(self.parser.input_text) > self._prefix_end:
            events = self.parser.feed(self._closer_rest())
            held, self._held = self._held, []
            self._route(held + events + self.parser.finalize()[1], delta)


# --------------------------------------------------------------------------------------------------------------
# The parsers vLLM selects by name
# --------------------------------------------------------------------------------------------------------------
class ChatparseReasoningParser(_rt.ResponseTemplateReasoningParser):
    """vLLM's response-template reasoning parser, on chatparse's parser, for a template whose reasoning field
    may also be named ``reasoning_content``.

    `is_reasoning_end` answers as vLLM's (`vllm_reasoning.reasoning_has_ended`: vLLM's own decision over
    chatparse's events, placed where vLLM's interpreter hands them out). `is_reasoning_end_streaming` keeps
    vLLM's token-window check where every reasoning closer is a literal (it costs the new ids already); where
    one is not, vLLM re-parses all ids on every call, and this continues one parser over the new ids
    (`vllm_reasoning.ReasoningEndTracker`)."""

    @classmethod
    def unified_parser_cls(cls):
        return CompiledResponseTemplateParser

    def __init__(self, tokenizer, *args, response_template: dict | None = None, **kwargs) -> None:
        # vLLM's constructor body, on the model's state computed once (`_model`), not per request
        ReasoningParser.__init__(self, tokenizer, *args, **kwargs)
        model = _model(tokenizer, response_template)
        self.response_template = model.loaded
        self._thinking_disabled = not (kwargs.get("chat_template_kwargs") or {}).get("enable_thinking", True)
        self._reasoning_end_ids = model.reasoning_end_ids
        self._compiled, self._binding, self._has_thinking = model.compiled, model.binding, model.has_thinking
        self._tracker = None

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        if not self._has_thinking:
            return True  # nothing to extract: the output is content from its first token (as vLLM decides)
        try:
            parser = chatparse.ResponseParser(self._compiled, prefix=_rt._decode(self.model_tokenizer, input_ids),
                                              dialect="vllm")
        except Exception:
            return False  # as vLLM: no parser, no end
        return _reasoning.reasoning_has_ended(self.response_template, parser,
                                              thinking_disabled=self._thinking_disabled)

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids) -> bool:
        if not self._has_thinking:
            return True
        if self._reasoning_end_ids is not None or self._binding is None:
            return super().is_reasoning_end_streaming(input_ids, delta_ids)
        if self._tracker is None:
            self._tracker = _reasoning.ReasoningEndTracker(self._binding, self.response_template,
                                                           thinking_disabled=self._thinking_disabled)
        return self._tracker(input_ids)


class ChatparseToolParser(_rt.ResponseTemplateToolParser):
    """Selects `CompiledResponseTemplateParser` as the tool parser."""

    @classmethod
    def unified_parser_cls(cls):
        return CompiledResponseTemplateParser


class _ToolCallIds:
    """vLLM's `_new_tool_call_id` (its own code) over the request's stream state alone: the stream holds this,
    not a bound method of the parser, so that parser and stream form no reference cycle and a finished
    request's objects are freed at once rather than by the cyclic garbage collector (whose pauses, with
    thousands of requests' objects waiting, showed up as the cost of making the next request's parser)."""

    __slots__ = ("_stream_state",)

    def __init__(self, state) -> None:
        self._stream_state = state

    def new(self, name: str) -> str:
        return _rt.ResponseTemplateParser._new_tool_call_id(self, name)


def _tool_dicts(tools) -> list[dict]:
    """vLLM's `_as_tool_dicts(tools)` (what its adapter hands the parser), without its `model_dump` of every
    chat tool (18 us per request for one tool): a chat-completions tool gives ``{"type": "function",
    "function": {"name", "parameters"}}``, all that argument typing reads (`coerce.tool_params`). Any other
    kind of tool (Responses API tools, namespaces) goes through vLLM's own conversion."""
    out = []
    for tool in tools or ():
        fn = getattr(tool, "function", None)
        if getattr(tool, "type", None) != "function" or not isinstance(getattr(fn, "name", None), str):
            return _rt._as_tool_dicts(tools)
        out.append({"type": "function", "function": {"name": fn.name, "parameters": fn.parameters}})
    return out


def _engine_based(cls) -> bool:
    """`Parser.__init__`'s ``_engine_based`` for parser class `cls`, from its sub-parser classes (whose
    ``engine_based_streaming`` is a class attribute), once per class."""
    known = cls.__dict__.get("_chatparse_engine_based")
    if known is None:
        r, t = cls.reasoning_parser_cls, cls.tool_parser_cls
        known = (r is None or bool(getattr(r, "engine_based_streaming", False))) and (
            t is None or bool(getattr(t, "engine_based_streaming", False)))
        cls._chatparse_engine_based = known
    return known


class CompiledResponseTemplateParser(_rt.ResponseTemplateParser):
    """Drop-in for vLLM's `ResponseTemplateParser` (same constructor and methods), parsing with chatparse."""

    reasoning_parser_cls = ChatparseReasoningParser
    tool_parser_cls = ChatparseToolParser

    def __init__(self, tokenizer, tools=None, *, response_template: dict | None = None,
                 enable_auto_tools: bool | None = None, model_config=None, **kwargs) -> None:
        # vLLM's constructor body, on the model's state computed once (`_model`), not per request; what
        # `Parser.__init__` sets, except that the reasoning and tool sub-parsers are made when first read
        # (`_reasoning_parser`, `_tool_parser`): the stream of a request reads neither
        model = _model(tokenizer, response_template)
        self._model = model
        self.response_template = model.loaded
        self.model_tokenizer = tokenizer
        self._sub_args = (tools, response_template, model_config, kwargs)
        engine_based = _engine_based(type(self))
        self._engine_based = engine_based
        self._stream_state = StreamState(
            tool_call_id_type=get_tool_call_id_type(model_config) if model_config is not None else "random",
            engine_based=engine_based)
        if enable_auto_tools is not None:
            self._enable_auto_tools = enable_auto_tools
        self._tools = _tool_dicts(tools)
        self._prompt_token_ids = None
        self._prefix = ""
        self._stream = None
        self._reasoning_counter = None
        self._compiled, self._binding, self._joins = model.compiled, model.binding, model.joins

    # vLLM's two sub-parsers, as `Parser.__init__` makes them, made on first read (or set by whoever sets them)
    @property
    def _reasoning_parser(self):
        return self._subparsers()[0]

    @_reasoning_parser.setter
    def _reasoning_parser(self, value) -> None:
        self._subs = (value, self._subparsers(None)[1])

    @property
    def _tool_parser(self):
        return self._subparsers()[1]

    @_tool_parser.setter
    def _tool_parser(self, value) -> None:
        self._subs = (self._subparsers(None)[0], value)

    def _subparsers(self, unmade=...) -> tuple:
        """(reasoning parser, tool parser), made now if they are not yet (with `unmade` given and this object
        not made by this class's constructor: (unmade, unmade))."""
        subs = self.__dict__.get("_subs")
        if subs is not None:
            return subs
        if unmade is not ... and "_sub_args" not in self.__dict__:
            return unmade, unmade
        return self._make_subs()

    def _make_subs(self) -> tuple:
        """(reasoning parser, tool parser) as `Parser.__init__` makes them for this class."""
        tools, response_template, model_config, kwargs = self._sub_args
        cls = type(self)
        reasoning = tool = None
        if cls.reasoning_parser_cls is not None:
            reasoning = cls.reasoning_parser_cls(self.model_tokenizer, model_config=model_config,
                                                 response_template=response_template, **kwargs)
        if cls.tool_parser_cls is not None:
            if issubclass(cls.tool_parser_cls, ParserEngineToolAdapter):
                tool = cls.tool_parser_cls(self.model_tokenizer, tools, model_config=model_config,
                                           response_template=response_template, **kwargs)
            else:
                tool = cls.tool_parser_cls(self.model_tokenizer, tools)
        if reasoning is None and tool is not None and hasattr(tool, "skip_reasoning_parsing"):
            tool.skip_reasoning_parsing = True
        self._subs = (reasoning, tool)
        return self._subs

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        """vLLM's, with the prompt decoded by the token tables where they decode as vLLM's `_decode` does (no
        clean-up of spaces), and only its last turn where the start anchor is literal
        (`TokenBinding.prompt_text`): the cost per request does not grow with the conversation before it."""
        prompt_token_ids = list(prompt_token_ids)
        if prompt_token_ids == self._prompt_token_ids:
            return
        self._prompt_token_ids = prompt_token_ids
        binding = self._binding
        if binding is not None and not binding.vocab.cleanup:
            self._prefix = binding.prompt_text(prompt_token_ids)
        else:
            self._prefix = _rt._decode(self.model_tokenizer, prompt_token_ids)
        self._stream = None
        self._reasoning_counter = None

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """vLLM's count (the generated tokens whose text the template parses as reasoning), each call costing
        its new tokens (`vllm_reasoning.ReasoningTokenCounter`)."""
        if type(self).reasoning_parser_cls is None or _rt.THINKING_FIELD not in self.response_template.fields:
            return 0
        counter = self._reasoning_counter
        if counter is None or not counter.continues(token_ids):
            counter = self._reasoning_counter = _reasoning.ReasoningTokenCounter(
                self._compiled, self.response_template, self._prefix, self.model_tokenizer)
        return counter.count(token_ids)

    def parse_delta(self, delta_text: str, delta_token_ids: list[int], request, prompt_token_ids=None, *,
                    finished: bool):
        stream = self._stream
        if stream is not None and (prompt_token_ids is None or self._prompt_token_ids is not None):
            # (vLLM's steps below change nothing once the stream is made and the prompt ids are set)
            return stream.feed_ids(delta_token_ids or (), delta_text, finished=finished)
        self._initialize_history_tool_call_cnt(request)
        if self._prompt_token_ids is None and prompt_token_ids is not None:
            self.set_prompt_token_ids(prompt_token_ids)
        if self._stream is None:
            self._stream = self._new_stream(request, enable_auto_tools=self._enable_auto_tools,
                                            include_reasoning=request.include_reasoning)
        return self._stream.feed_ids(delta_token_ids or (), delta_text, finished=finished)

    def _new_stream(self, request, *, enable_auto_tools: bool, include_reasoning: bool):
        return _CompiledStream(
            self.response_template, prefix=self._prefix, tools=self._tools,
            parse_reasoning=type(self).reasoning_parser_cls is not None, include_reasoning=include_reasoning,
            parse_tools=type(self).tool_parser_cls is not None
            and _rt._tool_parsing_enabled(request, enable_auto_tools=enable_auto_tools),
            new_tool_call_id=_ToolCallIds(self._stream_state).new, binding=self._binding, compiled=self._compiled,
            joins=self._joins, model=self._model)


# --------------------------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------------------------
_original_validate = _rt.validate_tokenizer_response_template


def _validate_tokenizer_response_template(tokenizer: Any, *, reasoning_parser: str | None,
                                          tool_parser: str | None) -> None:
    """vLLM's startup check, where the parser is chatparse's, on the template the plugin resolved
    (`resolve.resolve`, logged once) as vLLM's routing reads it (`vllm_view`). A template without a reasoning
    field is served with ``--reasoning-parser chatparse`` too: there is no reasoning to extract, and the
    reasoning parser passes the output through as content; likewise a template without a tool-call field with
    ``--tool-call-parser chatparse``. Every failure is the TypeError vLLM's own check
    raises, naming the flags and saying what is wrong (no template found: the ways to give one)."""
    if NAME not in (reasoning_parser, tool_parser):
        return _original_validate(tokenizer, reasoning_parser=reasoning_parser, tool_parser=tool_parser)
    flags = " ".join(f"{flag} {name}" for flag, name in (("--reasoning-parser", reasoning_parser),
                                                          ("--tool-call-parser", tool_parser)) if name)
    try:
        model = _model(tokenizer, None)
    except (TemplateNotFound, ValueError) as exc:
        raise TypeError(f"{flags}: {exc}") from exc
    fields = model.loaded.fields
    if reasoning_parser == NAME and _rt.THINKING_FIELD not in fields:
        reasoning_parser = None
    if tool_parser == NAME and _rt.TOOL_FIELD not in fields:
        tool_parser = None  # (kimi_vl_think) no calls to extract: the output is reasoning and content
    return _original_validate(_TemplateView(model.view), reasoning_parser=reasoning_parser,
                              tool_parser=tool_parser)


class _TemplateView:
    """A tokenizer stand-in for vLLM's startup check: only its `response_template` is read."""

    def __init__(self, template: dict | None):
        self.response_template = template
        self.init_kwargs = {"response_template": template}


_original_compose = ParserManager._compose_parser.__func__


def _compose_parser(cls, *, is_harmony: bool = False, **kwargs):
    """vLLM's parser composition, except that a gpt-oss checkpoint (``model_type: gpt_oss``, for which vLLM
    builds its Harmony parser whatever parser is named) is parsed by chatparse when ``chatparse`` is named:
    the prompt is still rendered by Harmony; the output's text, special tokens kept, is what the gpt_oss
    template parses."""
    if is_harmony and NAME in (kwargs.get("tool_parser_name"), kwargs.get("reasoning_parser_name")):
        is_harmony = False
    return _original_compose(cls, is_harmony=is_harmony, **kwargs)


def register() -> None:
    """vLLM's plugin hook: register ``chatparse`` as a tool-call parser and a reasoning parser."""
    if vllm.__version__ not in TESTED_VLLM:
        raise RuntimeError(f"chatparse's vLLM plugin is tested with vllm {', '.join(TESTED_VLLM)}; "
                           f"this is vllm {vllm.__version__}")
    ToolParserManager.register_module(NAME, force=True, module=ChatparseToolParser)
    ReasoningParserManager.register_module(NAME, force=True, module=ChatparseReasoningParser)
    _rt.validate_tokenizer_response_template = _validate_tokenizer_response_template
    ParserManager._compose_parser = classmethod(_compose_parser)

