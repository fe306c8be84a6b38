"""transformers integration: parse token ids where transformers hands them out.

* `ChatParseStreamer`: pass it as ``model.generate(..., streamer=ChatParseStreamer(tokenizer))``. It feeds
  the generated token ids straight to a `TokenParser` (no per-token decode) and exposes the events:
  iterate over it (from another thread, like transformers' ``TextIteratorStreamer``), read ``.events`` as
  they arrive, or ``.message`` after generation. The prompt that ``generate`` puts first becomes the parser's
  prefix unless ``prefix=``/``prefix_ids=`` is given. Batched generation (B > 1) is parsed with
  `TokenStreams`; a stream ends at its first EOS token (the padding ``generate`` appends after it is ignored).
* `parse_response(tokenizer, response, schema=None, *, prefix, tools=None)`: the same inputs and results as
  transformers' ``tokenizer.parse_response`` (str, list of str, list of ids, numpy arrays, tensors, 2-D
  batches; prefix as text or ids, broadcast or one per item), but token ids are parsed as ids.
* `get_response_parser(tokenizer, response_template=None, *, prefix, tools=None)`: a primed `TokenParser`.

transformers is only needed for the streamer's base class and for tensors; plain `tokenizers.Tokenizer`
objects work too where no ``response_template`` attribute is needed (pass ``schema=``).
"""

from __future__ import annotations

from queue import Empty, Queue
from typing import Any

import numpy as np

from ..compiled import parse_response as _parse_text
from ..tokenizer_dir import bind
from ..runtime.tokens import TokenParser, TokenStreams

__all__ = ["ChatParseStreamer", "parse_response", "get_response_parser"]

try:  # the streamer works without transformers too; inherit when it is there
    from transformers.generation.streamers import BaseStreamer as _Base
except Exception:  # pragma: no cover
    _Base = object

_PREFIX_REQUIRED = (
    "`parse_response` requires `prefix=` (the prompt that came before generation), because chat "
    "templates often pre-write part of the assistant message (e.g. an opening `<think>` tag) that the "
    "parser must see to parse correctly. If you're sure you don't need the prefix, you can pass an "
    "empty string or list."
)


def _template(tokenizer, schema):
    if schema is not None:
        return schema
    template = getattr(tokenizer, "response_template", None)
    if template is None:
        raise AttributeError("This tokenizer does not have a `response_template` for parsing chat responses!")
    return template


def _to_py(x) -> Any:
    """Tensors and arrays to nested Python lists (what transformers' `to_py_obj` does for decode)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch
        x = x.detach().cpu().numpy()
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple)):
        return [_to_py(v) for v in x]
    return x


def _split(value) -> tuple[list, bool]:
    """(items, batched) for a response or prefix that is not text: items are id lists."""
    v = _to_py(value)
    if isinstance(v, int):
        return [[v]], False
    if isinstance(v, list) and v and isinstance(v[0], (list, tuple)):
        return [list(x) for x in v], True
    return [list(v)], False


def parse_response(tokenizer, response, schema: dict | None = None, *, prefix=None, tools=None,
                   spans: bool = False):
    """transformers' ``tokenizer.parse_response``, parsing token ids directly (see the module docstring).

    A single sequence returns a message dict, a batch a list of them. With ``spans=True`` each message comes
    as ``(message, spans)``.
    """
    template = _template(tokenizer, schema)
    if prefix is None:
        raise ValueError(_PREFIX_REQUIRED)
    b = bind(template, tokenizer)

    # Responses: text stays text; ids stay ids.
    if isinstance(response, str):
        responses, batched, as_text = [response], False, True
    elif isinstance(response, (list, tuple)) and (not response or isinstance(response[0], str)):
        responses, batched, as_text = list(response), True, True
    else:
        responses, batched = _split(response)
        as_text = False

    # Prefixes: text, or ids (decoded exactly as the tokenizer does).
    if isinstance(prefix, str):
        prefix_texts, prefix_batched = [prefix], False
    elif isinstance(prefix, (list, tuple)) and not prefix:
        prefix_texts, prefix_batched = [""], False
    elif isinstance(prefix, (list, tuple)) and isinstance(prefix[0], str):
        prefix_texts, prefix_batched = list(prefix), True
    else:
        items, prefix_batched = _split(prefix)
        prefix_texts = [b.decode(p) for p in items]
    if not prefix_batched:
        prefixes = prefix_texts * len(responses)
    elif len(prefix_texts) != len(responses):
        raise ValueError(
            f"Got {len(responses)} response(s) but {len(prefix_texts)} prefix(es); `prefix` must be "
            "a single sequence (broadcast to every response), or one prefix per response."
        )
    else:
        prefixes = prefix_texts

    if as_text:
        if spans:
            raise ValueError("spans=True needs token ids (token indexes have no meaning for text input)")
        parsed = [_parse_text(t, b.compiled, prefix=p, tools=tools) for t, p in zip(responses, prefixes)]
    else:
        parsed = [b.parse(ids, prefix=p, tools=tools, spans=spans) for ids, p in zip(responses, prefixes)]
    return parsed if batched else parsed[0]


def get_response_parser(tokenizer, response_template: dict | None = None, *, prefix=None, tools=None,
                        spans: bool = False) -> TokenParser:
    """A `TokenParser` primed with `prefix` (text or one sequence of ids); see transformers'
    ``tokenizer.get_response_parser``. Feed it with ``feed_tokens(ids)``."""
    template = response_template if response_template is not None else getattr(tokenizer, "response_template", None)
    if template is None:
        raise AttributeError(
            "This tokenizer does not have a `response_template` set; cannot create a response event stream."
        )
    b = bind(template, tokenizer)
    if prefix is not None and not isinstance(prefix, str):
        items, batched = _split(prefix)
        if batched:
            raise ValueError(
                "`prefix=` must be a single sequence (str, list[int], or 1D tensor) for `get_response_parser`.")
        return b.parser(prefix_ids=items[0], tools=tools, spans=spans)
    return b.parser(prefix=prefix, tools=tools, spans=spans)


_END = object()


class ChatParseStreamer(_Base):
    """A ``generate(streamer=...)`` streamer that parses token ids as they come (see the module docstring).

    Args:
        tokenizer: the model's tokenizer (its ``response_template`` is used unless `response_template` is given).
        prefix / prefix_ids: the prompt as text or ids; by default the prompt ``generate`` puts first.
        tools: as for `parse_response`.
        spans: add token spans to region events (see `TokenParser`).
        eos_token_id: batched generation only: ids that end a stream (default: the tokenizer's EOS id).
        timeout: seconds iteration waits for the next event before raising `queue.Empty`.

    After ``generate`` returns: ``message`` (B == 1) or ``messages`` (one per stream), ``events`` (B == 1: the
    list of event dicts, including ``initial_events``; B > 1: one list per stream). Iterating yields the
    event dicts (B == 1) or ``(stream, event)`` pairs (B > 1) as they are produced, until generation ends.
    """

    def __init__(self, tokenizer, response_template: dict | None = None, *, prefix: str | None = None,
                 prefix_ids=None, tools=None, spans: bool = False, eos_token_id=None,
                 timeout: float | None = None):
        self.binding = bind(_template(tokenizer, response_template), tokenizer)
        self.tokenizer = tokenizer
        self._prefix = prefix
        self._prefix_ids = prefix_ids
        self._tools = tools
        self._spans = spans
        eos = eos_token_id if eos_token_id is not None else getattr(tokenizer, "eos_token_id", None)
        self._eos = set([eos] if isinstance(eos, int) else (eos or []))
        self.timeout = timeout
        self.queue: Queue = Queue()
        self.parser: TokenParser | None = None
        self.streams: TokenStreams | None = None
        self.events: list = []
        self.message: dict | None = None
        self.messages: list | None = None
        self.error: BaseException | None = None
        self._started = False
        self._alive: np.ndarray | None = None

    # -- generate's side -------------------------------------------------------------------------------------
    def put(self, value) -> None:
        arr = np.asarray(_to_py(value), dtype=np.int64)
        try:
            if not self._started:
                self._started = True
                self._start(arr)
            elif self.streams is None:
                flat = arr.reshape(-1)
                self._emit(self.parser.feed_tokens(int(flat[0]) if flat.size == 1 else flat))
            else:
                cols = arr.reshape(self.streams.n, -1) if arr.ndim else arr.reshape(1, 1)
                for k in range(cols.shape[1]):
                    self._step(cols[:, k])
        except BaseException as e:
            self.error = e
            self.queue.put(_END)
            raise

    def end(self) -> None:
        try:
            if self.streams is None:
                if self.parser is not None:
                    self.message, final = self.parser.finalize()
                    self._emit(final)
            else:
                s = self.streams
                self.messages = list(self.messages or [None] * s.n)
                for b in range(s.n):
                    if not s.done[b]:
                        self._finish_stream(b)
        finally:
            self.queue.put(_END)

    def _start(self, prompt: np.ndarray) -> None:
        rows = prompt.reshape(1, -1) if prompt.ndim <= 1 else prompt
        kw = dict(tools=self._tools, spans=self._spans)
        if self._prefix is not None or self._prefix_ids is not None:
            kw.update(prefix=self._prefix, prefix_ids=self._prefix_ids)
        if rows.shape[0] == 1:
            if "prefix" not in kw:
                kw["prefix_ids"] = rows[0]
            self.parser = self.binding.parser(**kw)
            self._emit(self.parser.initial_events)
        else:
            if "prefix" not in kw:
                kw["prefix_ids"] = list(rows)
            self.streams = self.binding.streams(rows.shape[0], **kw)
            self.events = [list(e) for e in self.streams.initial_events]
            for b, evs in enumerate(self.streams.initial_events):
                for ev in evs:
                    self.queue.put((b, ev))
            self.messages = [None] * rows.shape[0]
            self._alive = np.ones(rows.shape[0], dtype=bool)

    def _emit(self, evs: list) -> None:
        for ev in evs:
            self.events.append(ev)
            self.queue.put(ev)

    def _step(self, ids: np.ndarray) -> None:
        s = self.streams
        alive = self._alive
        out = s.step(ids, active=alive)
        for b in np.flatnonzero(alive).tolist():
            evs = out[b]
            for ev in evs:
                self.events[b].append(ev)
                self.queue.put((b, ev))
            if int(ids[b]) in self._eos:
                alive[b] = False
                self._finish_stream(b)

    def _finish_stream(self, b: int) -> None:
        message, final = self.streams.finalize(b)
        self.messages[b] = message
        for ev in final:
            self.events[b].append(ev)
            self.queue.put((b, ev))

    # -- the consumer's side ---------------------------------------------------------------------------------
    def __iter__(self):
        return self

    def __next__(self):
        try:
            item = self.queue.get(timeout=self.timeout)
        except Empty:
            raise
        if item is _END:
            self.queue.put(_END)  # iteration stays finished
            if self.error is not None:
                raise RuntimeError("generation stopped: the streamer failed") from self.error
            raise StopIteration
        return item
