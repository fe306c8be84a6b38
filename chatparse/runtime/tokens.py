"""Parsing token IDs directly: incremental decoding, per-token fast paths, token spans, many streams at once.

A `TokenBinding` ties a compiled template to a tokenizer's token tables; build it (once, cached) with
``chatparse.compiler.tokens.bind(template, tokenizer)``, or read it from a table file with a token section
(FORMAT.md section 8): `token_binding(compiled)` / ``TokenParser(compiled, prefix=...)`` for a
`CompiledTemplate` loaded from such a file (`binding_from_data` does the work: `LoadedVocab` and
`TokenTablesBase` from the file's arrays, no tokenizer, no re-derivation). This module only runs bindings: like
the rest of the runtime it imports neither the compiler nor transformers. From a binding:

* `TokenParser` (``binding.parser(prefix=..., prefix_ids=...)``): ``feed_tokens(ids)`` with one id or many
  returns exactly the events that feeding the newly decoded text to `chatparse.ResponseParser` returns, and
  ``finalize()`` the same ``(message, final_events)``. The text is what the tokenizer's own ``decode`` gives
  for the ids so far: bytes of a character split across tokens are held until the character is complete (or
  turns out invalid), so a U+FFFD appears exactly where ``decode`` puts one and never earlier.

  Cost per token: while the scanner is quiet (no delimiter attempt pending), the decoder holds nothing and a
  region is open, a token that cannot start a delimiter in the current mode (*inert*, from the per-mode
  token table) is one list lookup and one event. A token whose effect on the pending attempts is known
  (a token ending in whitespace before a ``\\s*</think>`` close, the token after it, a character completed
  across tokens) is a cached table entry and a little bookkeeping, without the character engine. A token that
  is a whole delimiter by itself (a special token ``<think>``, ``<|im_end|>``...) switches region in one
  step. Any other token runs through the character engine for that token's text alone.

* `parse_tokens(ids, binding, prefix_ids=...)`: one-shot, and `parse_tokens_batch` for many sequences.

* Token spans (``spans=True``, opt-in so that default events stay identical to the reference): every region
  and delimiter with its character offsets in the decoded generation and the range of token indexes that
  produced those characters (``[first, last + 1)``), on ``region_open`` / ``region_close`` events and as
  ``parser.spans`` beside the final message.

* `TokenStreams`: B streams advanced by one token each per ``step(ids)``, vectorised over the batch with
  numpy; inert tokens of streams in their fast state, and the common whitespace transitions, cost no
  Python work per stream at all, and the per-stream events are built only when read.

Token ids must be ``0 <= id < vocab size``; anything else raises ValueError naming the id (an id inside the
range that has no token decodes to nothing, as in ``decode``).
"""

from __future__ import annotations

import threading
from codecs import utf_8_decode
from collections.abc import Sequence
from operator import index as _index
from typing import Any

import numpy as np

from .coerce import tool_params
from .parser import StreamParser
from .scanner import Attempt, Scanner

__all__ = ["TokenBinding", "TokenParser", "TokenStreams", "StepEvents", "parse_tokens", "parse_tokens_batch",
           "decode_run", "CLEANUP_RULES", "VocabBase", "TokenTablesBase", "LoadedVocab", "binding_from_data",
           "token_binding", "clean_up_tokenization", "TOKEN_SKIP", "TOKEN_TEXT", "TOKEN_BYTE"]

_PREFIX_REQUIRED = (
    "`TokenParser`/`parse_tokens` requires `prefix` or `prefix_ids` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an opening "
    "`<think>` tag) that the parser must see to parse the output correctly. If the generation already contains "
    'the complete message, pass `prefix=""` or `prefix_ids=[]` to opt out explicitly.'
)


CLEANUP_RULES = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
"""transformers' ``clean_up_tokenization``: these replaces, in this order, over the whole text."""


def decode_run(run) -> str:
    """A run of ByteFallback byte tokens: strict UTF-8, or one U+FFFD per byte when invalid."""
    try:
        return bytes(run).decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" * len(run)


def clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization` (the same chain of replaces)."""
    for old, new in CLEANUP_RULES:
        text = text.replace(old, new)
    return text


# Per-token flags of the token section of a table file (FORMAT.md section 8).
TOKEN_SKIP = 1  # dropped before decoding (no token for the id, or a skipped special token)
TOKEN_TEXT = 2  # not skipped, and its bytes are its text on their own (complete UTF-8, not a byte token)
TOKEN_BYTE = 4  # a ByteFallback ``<0xXX>`` token (``pieces`` kind): its one byte is its value


# --------------------------------------------------------------------------------------------------------------
# Token ids in, validated
# --------------------------------------------------------------------------------------------------------------
def _out_of_range(i, size: int, where: str = "") -> ValueError:
    return ValueError(f"token id {i}{where} is out of range for this tokenizer (valid ids: 0..{size - 1})")


def _ids_list(x, size: int) -> list:
    """A flat list of Python ints from an int, a sequence, a numpy array or a tensor; range-checked."""
    if isinstance(x, list) or isinstance(x, tuple):
        ids = list(x) if isinstance(x, tuple) else x
        if ids and not (type(ids[0]) is int):
            ids = [_index(i) for i in ids]
    elif hasattr(x, "__array__") or isinstance(x, np.ndarray):
        arr = np.asarray(x)
        if arr.ndim > 1:
            raise ValueError(f"expected one sequence of token ids, got an array of shape {arr.shape}")
        if arr.dtype.kind not in "iub":
            raise TypeError(f"token ids must be integers, got an array of dtype {arr.dtype}")
        if arr.size:
            lo, hi = arr.min(), arr.max()
            if lo < 0 or hi >= size:
                bad = int(lo) if lo < 0 else int(hi)
                raise _out_of_range(bad, size)
        return arr.reshape(-1).tolist()
    else:
        try:
            return _ids_list([_index(x)], size)
        except TypeError:
            pass
        try:
            ids = [_index(i) for i in x]
        except TypeError as e:
            raise TypeError(f"token ids must be integers or a sequence of integers, got {type(x).__name__}") from e
    if ids:
        try:
            lo, hi = min(ids), max(ids)
        except TypeError as e:
            raise TypeError("token ids must be integers") from e
        if lo < 0 or hi >= size:
            raise _out_of_range(lo if lo < 0 else hi, size)
    return ids


# --------------------------------------------------------------------------------------------------------------
# Incremental decoders
# --------------------------------------------------------------------------------------------------------------
def _utf8_char_lengths(data: bytes, n: int) -> list:
    """Byte lengths of the characters `data[:n].decode("utf-8", "replace")` produces (a U+FFFD counts its
    maximal invalid subpart)."""
    out = []
    i = 0
    while i < n:
        b = data[i]
        if b < 0x80:
            out.append(1)
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= b <= 0xEC or 0xEE <= b <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif b == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif b == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            out.append(1)
            i += 1
            continue
        k = 0
        if i + 1 < n and lo <= data[i + 1] <= hi:
            k = 1
            while k < need and i + 1 + k < n and 0x80 <= data[i + 1 + k] <= 0xBF:
                k += 1
        out.append(1 + k)
        i += 1 + k
    return out


class _Cleanup:
    """transformers' clean_up_tokenization as a chain of streaming replaces (exact: each stage holds back the
    characters that could still begin its pattern)."""

    def __init__(self):
        self.held = [""] * len(CLEANUP_RULES)

    def feed(self, text: str, final: bool) -> str:
        for k, (old, new) in enumerate(CLEANUP_RULES):
            buf = self.held[k] + text
            if final:
                text = buf.replace(old, new)
                self.held[k] = ""
                continue
            keep = len(old) - 1
            # Replace every occurrence that is complete; hold the tail that could begin one.
            out = []
            pos = 0
            while True:
                j = buf.find(old, pos)
                if j < 0:
                    break
                out.append(buf[pos:j])
                out.append(new)
                pos = j + len(old)
            cut = max(pos, len(buf) - keep)
            out.append(buf[pos:cut])
            self.held[k] = buf[cut:]
            text = "".join(out)
        return text

    def clean(self) -> bool:
        return not any(self.held)


class _Decoder:
    """Incremental decode of one generation: `feed(ids)` returns the text those ids complete.

    With `track` on, it also records for every released character the index of the token holding its first
    byte and of the token holding its last byte (`cfirst`, `clast`).
    """

    def __init__(self, vocab, track: bool = False):
        self.v = vocab
        self.bytes_kind = vocab.kind == "bytes"
        self.tb = vocab.tok_bytes
        self.tt = vocab.tok_text
        self.bv = vocab.byte_val_list
        self.skip = vocab.skip
        self.held = b""  # bytes kind: an incomplete UTF-8 sequence
        self.held_tok: list = []  # its bytes' token indexes (track)
        self.run = bytearray()  # pieces kind: pending ByteFallback run
        self.run_tok: list = []
        self.first = bool(vocab.first_text)  # Metaspace: the next non-skipped token is the first one
        self.strip_left = vocab.strip_start
        self.cleanup = _Cleanup() if vocab.cleanup else None
        self.track = track
        self.ntok = 0  # tokens fed (indexes for spans)
        self.cfirst: list = []
        self.clast: list = []

    def clean(self) -> bool:
        """Nothing held: the next complete token decodes to its own text."""
        return (not self.held and not self.run and not self.first and not self.strip_left
                and self.cleanup is None)

    # -- feeding ---------------------------------------------------------------------------------------------
    def feed(self, ids: list) -> str:
        if self.bytes_kind:
            text = self._feed_bytes(ids, final=False)
        else:
            text = self._feed_pieces(ids, final=False)
        return self._post(text, final=False)

    def finish(self) -> str:
        if self.bytes_kind:
            text = self._feed_bytes([], final=True)
        else:
            text = self._feed_pieces([], final=True)
        return self._post(text, final=True)

    def _post(self, text: str, final: bool) -> str:
        if self.strip_left and text:
            n = 0
            c = self.v.strip_char
            while n < self.strip_left and n < len(text) and text[n] == c:
                n += 1
            if n < len(text):
                self.strip_left = 0
            else:
                self.strip_left -= n
            if n:
                text = text[n:]
                if self.track:
                    del self.cfirst[len(self.cfirst) - len(text) - n:len(self.cfirst) - len(text)]
                    del self.clast[len(self.clast) - len(text) - n:len(self.clast) - len(text)]
        if self.cleanup is not None:
            text = self.cleanup.feed(text, final)
        return text

    def _feed_bytes(self, ids: list, final: bool) -> str:
        tb = self.tb
        if len(ids) == 1:
            data = tb[ids[0]]
        else:
            data = b"".join([tb[i] for i in ids])
        held = self.held
        if held:
            data = held + data
        text, n = utf_8_decode(data, "replace", final)
        self.held = data[n:]
        if self.track:
            self._track_bytes(ids, data, n, text)
        else:
            self.ntok += len(ids)
        return text

    def _track_bytes(self, ids: list, data: bytes, n: int, text: str) -> None:
        # Token index of every byte of `data` (held bytes first).
        base = self.ntok
        origin = list(self.held_tok)
        tb = self.tb
        for k, i in enumerate(ids):
            origin.extend([base + k] * len(tb[i]))
        self.ntok = base + len(ids)
        if "\ufffd" in text:
            lengths = _utf8_char_lengths(data, n)
        else:
            lengths = None
        if lengths is None and n == len(text):  # all ASCII
            self.cfirst.extend(origin[:n])
            self.clast.extend(origin[:n])
        else:
            if lengths is None:
                arr = np.frombuffer(data, dtype=np.uint8, count=n)
                starts = np.flatnonzero((arr & 0xC0) != 0x80)
                ends = np.append(starts[1:], n) - 1
                o = np.asarray(origin, dtype=np.int64)
                self.cfirst.extend(o[starts].tolist())
                self.clast.extend(o[ends].tolist())
            else:
                p = 0
                for L in lengths:
                    self.cfirst.append(origin[p])
                    self.clast.append(origin[p + L - 1])
                    p += L
        self.held_tok = origin[n:]

    def _feed_pieces(self, ids: list, final: bool) -> str:
        out = []
        bv, tt, skip = self.bv, self.tt, self.skip
        run = self.run
        track = self.track
        base = self.ntok
        for k, i in enumerate(ids):
            if skip[i]:
                continue
            b = bv[i]
            if b >= 0:
                run.append(b)
                if track:
                    self.run_tok.append(base + k)
                self.first = False
                continue
            if run:
                out.append(self._flush_run())
            if self.first:
                self.first = False
                s = self.v.first_text.get(i, tt[i])
            else:
                s = tt[i]
            out.append(s)
            if track and s:
                self.cfirst.extend([base + k] * len(s))
                self.clast.extend([base + k] * len(s))
        self.ntok = base + len(ids)
        if final and run:
            out.append(self._flush_run())
        return "".join(out)

    def _flush_run(self) -> str:
        run = self.run
        s = decode_run(run)
        if self.track:
            toks = self.run_tok
            if len(s) == len(run):  # ASCII or one U+FFFD per byte
                self.cfirst.extend(toks)
                self.clast.extend(toks)
            else:
                p = 0
                for L in _utf8_char_lengths(bytes(run), len(run)):
                    self.cfirst.append(toks[p])
                    self.clast.append(toks[p + L - 1])
                    p += L
            self.run_tok = []
        run.clear()  # in place: `_feed_pieces` holds a reference
        return s


# --------------------------------------------------------------------------------------------------------------
# The parser core with span hooks
# --------------------------------------------------------------------------------------------------------------
class _SpanScanner(Scanner):
    """Remembers the delimiter `decide()` handed out last, for span bookkeeping."""

    def __init__(self, tables):
        super().__init__(tables)
        self.decided = None

    def decide(self, eos: bool):
        d = super().decide(eos)
        if d is not None:
            self.decided = d
        return d


class _SpanCore(StreamParser):
    """StreamParser that records the offsets of every region and delimiter (absolute scanner offsets)."""

    def __init__(self, tables, tool_params_, owner):
        super().__init__(tables, tool_params_)
        self.scanner = _SpanScanner(tables)
        self.owner = owner
        self.region_start = None
        self.open_span = None

    def feed(self, text: str) -> list[dict]:
        start = self.scanner.end
        events = super().feed(text)
        for ev in events:
            if ev["type"] == "region_open" and "open" not in ev:
                # opened lazily by a fast path that did not go through `_text`: the text starts there
                self.region_start = start
                self.open_span = None
                self.owner._on_open(ev, None)
        return events

    def _text(self, text: str, events: list) -> None:
        if text and self.current is not None and not self.opened:
            n = len(events)
            super()._text(text, events)
            self.region_start = self.scanner.pos - len(text)
            self.open_span = None
            if len(events) > n:
                self.owner._on_open(events[-1], None)
            return
        super()._text(text, events)

    def _open(self, fi: int, m, events: list) -> None:
        d = self.scanner.decided
        self.scanner.decided = None
        super()._open(fi, m, events)
        s, e = (d[0], d[1]) if d is not None else (self.scanner.pos, self.scanner.pos)
        self.region_start = e
        self.open_span = (s, e)
        self.owner._on_open(events[-1], (s, e))

    def _close(self, events: list) -> None:
        fi, opened = self.current, self.opened
        d = self.scanner.decided
        close = None
        if d is not None:
            end = d[0]
            if self.t.patterns[d[2]].kind == "close":
                close = (d[0], d[1])
                self.scanner.decided = None
        else:
            end = self.scanner.end
        n = len(events)
        super()._close(events)
        if fi is not None and opened:
            rec = {"field": self.t.fields[fi]["name"], "open": self.open_span, "body": (self.region_start, end),
                   "close": close}
            ev = events[-1] if len(events) > n and events[-1]["type"] == "region_close" else None
            self.owner._on_close(ev, rec)
        self.region_start = None
        self.open_span = None


# --------------------------------------------------------------------------------------------------------------
# Binding
# --------------------------------------------------------------------------------------------------------------
class TokenBinding:
    """A compiled template bound to a tokenizer's token tables (`chatparse.compiler.tokens.TokenVocab` and
    `TokenTables`). Build with ``chatparse.compiler.tokens.bind(template, tokenizer)``.

    `convert_tools` turns the ``tools`` argument into JSON schemas (Python functions included); the binder
    supplies transformers' conversion, so the runtime itself never imports it.
    """

    def __init__(self, compiled, vocab, tables, convert_tools=None):
        self.compiled = compiled
        self.vocab = vocab
        self.tables = tables
        self.convert_tools = convert_tools

    def tool_params(self, tools) -> dict:
        tools = list(tools or [])
        if self.convert_tools is not None:
            tools = self.convert_tools(tools)
        elif any(not isinstance(t, dict) for t in tools):
            raise TypeError("this binding takes tools as JSON schemas (dicts); bind with "
                            "chatparse.compiler.tokens.bind to pass Python functions")
        return tool_params(tools)

    @property
    def size(self) -> int:
        return self.vocab.size

    def decode(self, ids) -> str:
        """The tokenizer's decode of `ids` (the text the parser sees)."""
        return _decode_all(self.vocab, _ids_list(ids, self.vocab.size))

    def parser(self, *, prefix: str | None = None, prefix_ids=None, tools=None, spans: bool = False) -> "TokenParser":
        return TokenParser(self, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans)

    def parse(self, ids, *, prefix: str | None = None, prefix_ids=None, tools=None, spans: bool = False):
        """One-shot: the message for a complete generation given as ids ((message, spans) with spans=True)."""
        prefix = self._prefix_text(prefix, prefix_ids)
        if spans:
            p = TokenParser(self, prefix=prefix, tools=tools, spans=True)
            p.feed_tokens(ids)
            message, _ = p.finalize()
            return message, p.spans
        text = _decode_all(self.vocab, _ids_list(ids, self.vocab.size))
        tables = self.compiled.tables
        core = StreamParser(tables, self.tool_params(tools))  # what chatparse.parse_response does
        cut = tables.cut_prefix(prefix) if prefix else ""
        if cut:
            core.feed(cut)
        core.feed(text)
        message, _ = core.finish()
        return message

    def parse_batch(self, batch, *, prefix: Any = None, prefix_ids: Any = None, tools=None, spans: bool = False) -> list:
        """Parse many generations (a list of id sequences or a 2-D array). The prefix (text or ids) is one for
        all items or one per item."""
        items = _batch_items(batch)
        prefixes = self._batch_prefixes(len(items), prefix, prefix_ids)
        return [self.parse(ids, prefix=p, tools=tools, spans=spans) for ids, p in zip(items, prefixes)]

    def streams(self, n: int, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                spans: bool = False, capacity: int = 1024) -> "TokenStreams":
        """`TokenStreams` for `n` generations (prefix: one for all or one per stream)."""
        return TokenStreams(self, n, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans,
                            capacity=capacity)

    # -- prefixes ---------------------------------------------------------------------------------------------
    def _prefix_text(self, prefix, prefix_ids) -> str:
        if prefix_ids is not None:
            if prefix is not None:
                raise ValueError("pass either `prefix` (text) or `prefix_ids` (token ids), not both")
            return _decode_all(self.vocab, _ids_list(prefix_ids, self.vocab.size))
        if prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a string (use `prefix_ids=` for token ids), got {type(prefix).__name__}")
        return prefix

    def _batch_prefixes(self, n: int, prefix, prefix_ids) -> list:
        if prefix_ids is not None:
            if prefix is not None:
                raise ValueError("pass either `prefix` (text) or `prefix_ids` (token ids), not both")
            if _is_single_ids(prefix_ids):
                return [self._prefix_text(None, prefix_ids)] * n
            texts = [self._prefix_text(None, p) for p in _batch_items(prefix_ids)]
        elif prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        elif isinstance(prefix, str):
            return [prefix] * n
        else:
            texts = list(prefix)
            for p in texts:
                if not isinstance(p, str):
                    raise TypeError("`prefix` must be a string or a list of strings (use `prefix_ids=` for ids)")
        if len(texts) != n:
            raise ValueError(f"Got {n} sequence(s) but {len(texts)} prefix(es); the prefix must be one for all "
                             "sequences or one per sequence.")
        return texts


def _is_single_ids(x) -> bool:
    if isinstance(x, (list, tuple)):
        return not x or not isinstance(x[0], (list, tuple, np.ndarray)) and not hasattr(x[0], "__len__")
    arr = np.asarray(x)
    return arr.ndim <= 1


def _batch_items(batch) -> list:
    if isinstance(batch, (list, tuple)):
        return list(batch)
    arr = np.asarray(batch)
    if arr.ndim != 2:
        raise ValueError(f"a batch of token ids must be 2-D (or a list of sequences), got shape {arr.shape}")
    return list(arr)


def _decode_all(vocab, ids: list) -> str:
    """Whole-sequence decode, fast paths first (the same text as `vocab.decode`)."""
    if vocab.kind == "bytes" and not vocab.strip_start and not vocab.cleanup:
        tb = vocab.tok_bytes
        return b"".join(map(tb.__getitem__, ids)).decode("utf-8", "replace")
    if vocab.kind == "pieces" and not vocab.cleanup and not vocab.strip_start and not vocab.first_text:
        parts = list(map(vocab.tok_text.__getitem__, ids))
        if None not in parts:
            return "".join(parts)
    return vocab.decode(ids)


# --------------------------------------------------------------------------------------------------------------
# One stream
# --------------------------------------------------------------------------------------------------------------
def _mark_failed(core, ex: BaseException) -> None:
    core.failed = ex
    if hasattr(core, "usable"):
        core.usable = False


class TokenParser:
    """Streaming parser for one generation, fed token ids. See the module docstring.

    ``TokenParser(binding, prefix=... | prefix_ids=..., tools=None, spans=False)``, or
    ``binding.parser(...)``.

    How the work is split: the parser core (`StreamParser`) receives text through ``feed`` only (whole-
    delimiter tokens excepted, see `_apply_delimiter`); the token paths below hand out the events themselves
    and keep the text they handed out in ``_tail``, which reaches the core (as one ``feed``, whose events are
    dropped: they are the ones already handed out) the next time the core is needed. So the core's state is
    always exactly what feeding the decoded text gives, whatever the core does inside.

    * fast: quiet scanner, open region, nothing held: an inert token is one table lookup (`feed_tokens`);
    * lazy transitions: text whose effect on the undecided attempts is known (`TokenTables.transition`, e.g. a
      token ending in whitespace before a ``\\s*</think>`` close, the token after it, or the text a token
      completes after bytes of a split character) is handled from ``_pend`` = (attempts as (characters back
      from the end, DFA state), the text they hold), without the core;
    * a token that is a whole delimiter switches region in one step (`_apply_delimiter`);
    * everything else: decoded text to the core's ``feed``.
    """

    def __init__(self, binding: TokenBinding, *, prefix: str | None = None, prefix_ids=None, tools=None,
                 spans: bool = False):
        if not isinstance(binding, TokenBinding):
            if getattr(binding, "_token_binding", None) is not None or "tokens" in (
                    getattr(binding, "raw_tables", None) or {}):
                binding = token_binding(binding)  # a CompiledTemplate loaded with token tables
            else:
                raise TypeError("TokenParser takes a TokenBinding: chatparse.compiler.tokens.bind(template, "
                                "tokenizer), or a compiled template loaded with token tables")
        b = binding
        self._b = b
        tt = b.tables
        vocab = b.vocab
        self._size = vocab.size
        prefix = b._prefix_text(prefix, prefix_ids)
        if spans and vocab.cleanup:
            raise ValueError("spans=True is not supported for a tokenizer with clean_up_tokenization_spaces on")
        self._spans_on = bool(spans)
        tp = b.tool_params(tools)
        tables = b.compiled.tables
        core = _SpanCore(tables, tp, self) if spans else StreamParser(tables, tp)
        self._core = core
        self._records: list = []
        self._dec = _Decoder(vocab, track=spans)
        self.initial_events: list[dict] = []
        cut = tables.cut_prefix(prefix) if prefix else ""
        self._pbase = len(cut)
        if cut:
            self.initial_events = core.feed(cut)
        self._tt = tt
        self._never = tt.never
        self._fast = tt.fast
        self._delims = tt.delims
        self._mode_index = tt.mode_index
        self._names = tt.field_names
        self._dirty = tables.dirty
        self._patterns = tables.patterns
        self._first_re = [m.first_re for m in tables.modes]
        self._tok_text = vocab.tok_text
        self._bytes_kind = vocab.kind == "bytes"
        self._tail: list = []
        self._tail_append = self._tail.append
        self._tab = self._never
        self._row = tt.none_row
        self._mode = 0
        self._pend = None  # lazy pending attempts: (((chars back from the end, state), ...), held text)
        self._sink = False  # the current "region" is the null sink (no implicit field)
        self._opening = False  # the implicit field opens with the next text
        self._lazy_ok = False  # the transition table applies (quiet or `_pend`, open region, decoder clean)
        self._fname = None
        self._fdirty = False
        self._refresh()

    # -- the hot path ------------------------------------------------------------------------------------------
    def feed_tokens(self, ids) -> list[dict]:
        """Feed the next token id (an int) or ids (a sequence, numpy array or tensor); returns the events."""
        try:
            s = self._tab[ids]
        except (TypeError, IndexError):
            return self._feed_general(ids)
        if s is None:
            return self._feed_general(ids)
        self._tail_append(s)
        return [{"type": "region_chunk", "field": self._fname, "text": s, "dirty": self._fdirty}]

    def feed(self, text: str) -> list[dict]:
        """Feed decoded text instead of ids (as `chatparse.ResponseParser.feed`), e.g. text a tool inserted.
        Refused while bytes of a split character are held (the text would land inside that character)."""
        core = self._core
        core._check_usable()
        if self._spans_on:
            raise ValueError("feed(text) has no token indexes for spans; feed token ids with spans=True")
        dec = self._dec
        if dec.held or dec.run:
            raise ValueError("feed(text) while the bytes of a character split across tokens are held; feed the "
                             "token ids that complete it first")
        if not text:
            return []
        self._sync()
        try:
            events = core.feed(text)
        finally:
            self._refresh()
        return events

    def finalize(self) -> tuple[dict, list[dict]]:
        """End of generation: release held bytes, close what is open; returns `(message, final_events)`."""
        core = self._core
        core._check_usable()
        self._sync()
        self._tab = self._never
        self._row = self._tt.none_row
        self._lazy_ok = False
        self._pend = None
        rest = self._dec.finish()
        events = core.feed(rest) if rest else []
        message, final = core.finish()
        return message, events + final

    # -- state -------------------------------------------------------------------------------------------------
    @property
    def spans(self) -> list[dict]:
        """With spans=True: one record per closed region, in order (field, open, body, close)."""
        if not self._spans_on:
            raise ValueError("token spans are off; create the parser with spans=True")
        return list(self._records)

    @property
    def _output(self) -> dict:
        self._sync()
        return self._core.output

    def _refresh(self) -> None:
        """Recompute the token paths from the core's state (after the core has run)."""
        core = self._core
        sc = core.scanner
        self._mode = m = self._mode_index[id(sc.mode)]
        self._tab = self._never
        self._row = self._tt.none_row
        self._pend = None
        self._lazy_ok = False
        dec = self._dec
        mode = sc.mode
        if (self._spans_on or core.stalled or core.failed is not None or core.finished
                or sc.scan != sc.end or getattr(core, "pending", None) or dec.first or dec.strip_left
                or dec.cleanup is not None or self._first_re[m] is None
                or not (sc.end or mode.start0 == mode.startN)):  # the transition probe starts past offset 0
            return
        f = core.current
        self._sink = f is None  # no implicit field: text outside regions is dropped
        self._opening = f is not None and not core.opened  # the implicit region opens on its first text
        if f is not None:
            self._fname = self._names[f]
            self._fdirty = self._dirty[f]
        attempts = sc.attempts
        if attempts:
            for a in attempts:
                if a.fin >= 0 or a.ends is not None:
                    return
            if sc.pos != attempts[0].start:
                return
            end = sc.end
            self._pend = (tuple([(end - a.start, a.state) for a in attempts]), sc.text[sc.pos - sc.base:])
            self._lazy_ok = True
            return
        self._lazy_ok = True
        if not dec.held and not dec.run and core.opened and f is not None:
            self._tab = self._fast[m]
            self._row = m

    def _sync(self) -> None:
        """Give the core the text the token paths handed out (its events were already returned)."""
        tail = self._tail
        if tail:
            text = tail[0] if len(tail) == 1 else "".join(tail)
            tail.clear()
            self._core.feed(text)

    # -- the general path ----------------------------------------------------------------------------------------
    def _feed_general(self, ids) -> list[dict]:
        try:
            return self._general(ids)
        except BaseException:
            # the core failed (or the ids were bad): no fast path may hand out events any more until the
            # state is recomputed
            self._tab = self._never
            self._row = self._tt.none_row
            self._lazy_ok = False
            self._pend = None
            if self._core.failed is None and not self._core.finished:
                self._refresh()
            raise

    def _general(self, ids) -> list[dict]:
        core = self._core
        core._check_usable()
        if type(ids) is int:
            if not 0 <= ids < self._size:
                raise _out_of_range(ids, self._size)
            ids = [ids]
        else:
            ids = _ids_list(ids, self._size)
            if not ids:
                return []
        tab = self._tab
        if len(ids) > 1:
            if tab is not self._never:
                parts = [tab[i] for i in ids]
                if None not in parts:
                    s = "".join(parts)
                    self._tail_append(s)
                    return [{"type": "region_chunk", "field": self._fname, "text": s, "dirty": self._fdirty}]
        elif self._lazy_ok:
            i = ids[0]
            dec = self._dec
            if (self._pend is None and not dec.held and not dec.run and self._delims[self._mode].get(i)
                    is not None):
                pass  # a whole delimiter: one step below
            else:
                text = dec.feed(ids)
                if dec.held or dec.run:
                    self._tab = self._never
                    self._row = self._tt.none_row
                if not text:
                    return []
                pend = self._pend
                eff = self._tt.transition(self._mode, tuple([st for _, st in pend[0]]) if pend else (), text)
                if eff is not None:
                    return self._lazy_transition(text, eff)
                self._sync()
                events = core.feed(text)
                self._refresh()
                return events
        self._sync()
        if core.stalled:
            self._dec.feed(ids)
            return []
        sc = core.scanner
        if (len(ids) == 1 and not self._spans_on and sc.end and not sc.attempts and sc.scan == sc.end
                and self._dec.clean()):
            d = self._delims[self._mode].get(ids[0])
            if d is not None:
                events = self._apply_delimiter(self._tok_text[ids[0]], d)
                self._refresh()
                return events
        text = self._dec.feed(ids)
        events = core.feed(text) if text else []
        self._refresh()
        return events

    def _lazy_transition(self, text: str, eff) -> list[dict]:
        """Apply a known transition (see `TokenTables.transition`) without the core: the release point is the
        start of the first surviving attempt."""
        pend = self._pend
        L = len(text)
        if pend is not None:
            old, held = pend
            S = tuple([(old[j][0] + L, st) if j >= 0 else (L - off, st) for j, off, st in eff])
            text_all = held + text
        else:
            S = tuple([(L - off, st) for _, off, st in eff])
            text_all = text
        self._tail_append(text)
        m = self._mode
        if S:
            keep = len(text_all) - S[0][0]
            out = text_all[:keep]
            self._pend = (S, text_all[keep:])
            self._tab = self._never
            self._row = self._tt.none_row
        else:
            out = text_all
            self._pend = None
        if not out or self._sink:
            return []
        events = [{"type": "region_chunk", "field": self._fname, "text": out, "dirty": self._fdirty}]
        if self._opening:
            self._opening = False
            events.insert(0, {"type": "region_open", "field": self._fname})
        if not S and not self._dec.held and not self._dec.run:
            self._tab = self._fast[m]
            self._row = m
        return events

    def _apply_delimiter(self, text: str, d) -> list[dict]:
        """A token that is a whole delimiter, on a quiet scanner: what `StreamParser._process` does for it."""
        pi, caps = d
        core = self._core
        sc = core.scanner
        events: list = []
        try:
            s = sc.end
            sc.push(text)
            sc.scan = e = sc.end
            sc.take(s)
            sc.take(e)
            p = self._patterns[pi]
            core._close(events)
            if p.kind == "open":
                core._open(p.field, caps, events)
                sc.restart(1 + p.field, e)
            else:
                sc.restart(0, e)
            core._flush(events)
        except BaseException as ex:
            _mark_failed(core, ex)
            raise
        return events

    # -- spans -------------------------------------------------------------------------------------------------
    def _span(self, s: int, e: int) -> dict | None:
        """Absolute scanner offsets -> generation char offsets and token index range (None: in the prefix)."""
        base = self._pbase
        if e < base or (e == base and s < base):
            return None
        cs, ce = max(s - base, 0), e - base
        dec = self._dec
        cf, cl = dec.cfirst, dec.clast
        n = len(cf)
        if ce > cs:
            ts = cf[cs] if cs < n else dec.ntok
            te = (cl[ce - 1] + 1) if ce - 1 < n else dec.ntok
        else:
            ts = te = cf[cs] if cs < n else dec.ntok
        return {"chars": (cs, ce), "tokens": (ts, te)}

    def _on_open(self, event: dict, delim) -> None:
        event["open"] = None if delim is None else self._span(*delim)

    def _on_close(self, event, rec: dict) -> None:
        out = {"field": rec["field"],
               "open": None if rec["open"] is None else self._span(*rec["open"]),
               "body": self._span(*rec["body"]),
               "close": None if rec["close"] is None else self._span(*rec["close"])}
        self._records.append(out)
        if event is not None:
            event["span"] = out


# --------------------------------------------------------------------------------------------------------------
# Vocabulary and per-mode token tables: the parts the runtime reads (built by chatparse.compiler.tokens, or
# read from the token section of a table file)
# --------------------------------------------------------------------------------------------------------------
class VocabBase:
    """What the runtime reads from a tokenizer vocabulary. `chatparse.compiler.tokens.TokenVocab` derives it
    from a tokenizer; `LoadedVocab` reads it from a table file. Attributes:

    ``kind`` (``"bytes"`` / ``"pieces"``), ``size``, ``tok_bytes[id]``, ``tok_text[id]`` (None: no text on its
    own), ``byte_val`` (int16 array, -1 or the byte of a ``<0xXX>`` token) and ``byte_val_list``, ``skip``
    (bool array), ``first_text`` (Metaspace: id -> text as the first token), ``strip_char`` / ``strip_start``,
    ``cleanup``, ``name``, ``has_bytes_tokens``, ``n_partial``.
    """

    kind: str
    size: int

    def decode(self, ids) -> str:
        """Decode a sequence of ids exactly like the tokenizer does (ids must be in range)."""
        ids = [i for i in ids if not self.skip[i]]
        if self.kind == "bytes":
            text = b"".join([self.tok_bytes[i] for i in ids]).decode("utf-8", "replace")
        else:
            out = []
            run = bytearray()
            bv = self.byte_val_list
            for k, i in enumerate(ids):
                b = bv[i]
                if b >= 0:
                    run.append(b)
                    continue
                if run:
                    out.append(decode_run(run))
                    run = bytearray()
                if k == 0 and i in self.first_text:
                    out.append(self.first_text[i])
                else:
                    out.append(self.tok_text[i])
            if run:
                out.append(decode_run(run))
            text = "".join(out)
        if self.strip_start:
            n = 0
            while n < self.strip_start and n < len(text) and text[n] == self.strip_char:
                n += 1
            text = text[n:]
        if self.cleanup:
            text = clean_up_tokenization(text)
        return text


def _slices(s, offsets: list) -> list:
    """``[s[offsets[i]:offsets[i + 1]] for i ...]`` (the cheapest way to cut many pieces; ~50 ns each)."""
    return [s[a:b] for a, b in zip(offsets, offsets[1:])]


class LoadedVocab(VocabBase):
    """A vocabulary read from the token section of a table file (`chatparse.runtime.loader.loads` validated it).

    Builds the per-token Python lists the hot paths index (bytes, text) with slicing at C speed; no
    tokenizer, no decoder analysis, no per-token decoding."""

    def __init__(self, data: dict):
        from .loader import token_texts

        meta = data["meta"]
        self.kind = meta["kind"]
        self.size = size = int(meta["size"])
        self.strip_char = meta["strip_char"]
        self.strip_start = int(meta["strip_start"])
        self.cleanup = bool(meta["cleanup"])
        self.name = meta["name"]
        offsets = np.asarray(data["offsets"], dtype=np.int64)
        blob = bytes(np.asarray(data["bytes"], dtype=np.uint8))
        self.tok_bytes = _slices(blob, offsets.tolist())
        flags = np.asarray(data["flags"], dtype=np.uint8)
        skip = (flags & TOKEN_SKIP) != 0
        self.skip = skip
        byte_val = np.full(size, -1, dtype=np.int16)
        bidx = np.flatnonzero(flags & TOKEN_BYTE)
        if bidx.size:
            byte_val[bidx] = np.asarray(data["bytes"], dtype=np.uint8)[offsets[bidx]]
        self.byte_val = byte_val
        self.byte_val_list = byte_val.tolist()
        text, char_offsets, first_text, first_offsets = token_texts(data)
        texts = _slices(text, char_offsets.tolist())
        has_text = (flags & TOKEN_TEXT) != 0
        for i in np.flatnonzero(~has_text).tolist():  # byte tokens, incomplete UTF-8, skipped: a few percent
            texts[i] = None
        for i in np.flatnonzero(skip).tolist():
            texts[i] = ""
        self.tok_text = texts
        ids = np.asarray(data["first_ids"]).tolist()
        self.first_text = dict(zip(ids, _slices(first_text, first_offsets.tolist()))) if ids else {}
        self.has_bytes_tokens = bool(bidx.size)
        self.n_partial = int((~has_text & ~skip).sum())


class _Bail(Exception):
    pass


class _Probe(Scanner):
    """A scanner that stops as soon as any match end is recorded (the transition probe refuses then: the
    placeholder characters must never reach a decision)."""

    def _record(self, a, hit, at):  # overrides the static method of Scanner
        raise _Bail()


class _Captures:
    """Stands in for a match object: the parser only calls `groupdict()`."""

    __slots__ = ("d",)

    def __init__(self, d: dict):
        self.d = d

    def groupdict(self) -> dict:
        return dict(self.d)


def _whole_delimiter(tables, mode: int, text: str):
    """``(pattern index, captures or None)`` when `text`, fed on its own to a quiet scanner in `mode` (not at
    offset 0), is decided as exactly one whole delimiter; else None."""
    sc = Scanner(tables)
    sc.push("\x00")
    sc.restart(mode, 1)
    sc.push(text)
    d = sc.decide(False)
    if d is None:
        return None
    s, e, pi, m = d
    if s != 1 or e != 1 + len(text):
        return None
    caps = None
    if m is not None:
        caps = _Captures({k: v for k, v in m.groupdict().items()})
    return pi, caps


_TRANSITION_CACHE = 65536


class TokenTablesBase:
    """Per-mode token tables of one compiled template bound to one vocab (the runtime part; see
    `chatparse.compiler.tokens.TokenTables` for how they are computed).

    Made from ``inert`` (uint8, one row per mode: 1 where the token is inert in that mode) and ``delims`` (per
    mode, token id -> (pattern index, captures or None)):

    * ``fast[m]``: a list of ``2 * size`` entries: the token's text when the token is inert in mode ``m``
      (non-empty, complete text, no character passes the mode's prefilter), else None. The second half is all
      None, so a negative id never finds an entry (Python lists wrap negative indexes).
    * ``never``: the same shape, all None (the table in use while the parser is not in its fast state).
    * ``flat``: ``(n_modes + 1) * size`` uint8: 1 where inert; the last row is all 0. For batched stepping.
    * ``delims[m]``: token id -> (pattern index, captures-or-None) for a token whose text is, on its own, a
      whole delimiter decided within the token in mode ``m`` (a quiet scanner, not at offset 0).
    * ``mode_index``: id(Mode) -> its index.
    * ``transition(mode, states, text)``: what a text does to undecided attempts (lazily cached, see there).
    * ``batch_rows(...)``: the row tables `TokenStreams` shares between all its streams (built on first use).
    """

    def __init__(self, compiled, vocab, inert: np.ndarray, delims: list):
        t = compiled.tables
        self.compiled = compiled
        self.vocab = vocab
        self.size = size = vocab.size
        self.n_modes = n_modes = len(t.modes)
        self.mode_index = {id(m): k for k, m in enumerate(t.modes)}
        # Field shown by a region_chunk in mode m's fast state: the implicit field in mode 0, field i in 1+i.
        self.mode_field = [t.implicit] + list(range(len(t.fields)))
        inert = np.asarray(inert, dtype=np.uint8).reshape(n_modes, size)
        self.never = [None] * (2 * size)
        self._texts = None
        self._inert = inert
        self.fast = _FastRows(self, [mode.first_re is None for mode in t.modes])
        flat = np.zeros((n_modes + 1) * size, dtype=np.uint8)
        flat[:n_modes * size] = inert.reshape(-1)
        self.flat = flat
        self.delims: list = list(delims)
        self.none_row = n_modes
        self.field_names = [f["name"] for f in t.fields]
        self.exact_modes = [all(t.patterns[p].exact for p in m.patterns) for m in t.modes]
        self._trans: list = [{} for _ in t.modes]
        self._lock = threading.Lock()

    def _fast_row(self, k: int) -> list:
        """Mode k's row of `fast` (built on first use: a few ms per 100k tokens)."""
        size = self.size
        dead = np.flatnonzero(self._inert[k] == 0)
        if len(dead) * 4 < size:  # mostly inert: copy the texts, blank the others
            row = list(self.vocab.tok_text)
            for i in dead.tolist():
                row[i] = None
            row += [None] * size
            return row
        texts = self._texts
        if texts is None:
            texts = np.empty(self.size, dtype=object)
            texts[:] = self.vocab.tok_text
            self._texts = texts
        row = np.empty(2 * self.size, dtype=object)  # all None
        sel = self._inert[k] != 0
        row[:self.size][sel] = texts[sel]
        return row.tolist()

    def transition(self, mode: int, states: tuple, text: str):
        """What feeding `text` does to a scanner in `mode` whose live attempts are undecided, match-free
        attempts in `states` (oldest first; ``()`` = quiet), when nothing gets decided or matched within it.

        Returns None when something would (then the character engine runs), else a tuple of the surviving
        attempts in scanner order: ``(old_index, -1, new_state)`` for an attempt that was live before, and
        ``(-1, offset_in_text, state)`` for one that starts inside the text. Cached lazily per mode (the
        texts are token texts, so the variety is bounded by the vocabulary).
        The probe runs the real `Scanner` on the text after placeholder characters (the attempts' states do
        not depend on the characters they already consumed), and refuses as soon as any match end is
        recorded, so regex-decided patterns (lookaround) never enter.
        """
        cache = self._trans[mode]
        key = (states, text)
        try:
            return cache[key]
        except KeyError:
            pass
        if len(cache) >= _TRANSITION_CACHE:
            return None
        eff = None
        if text and len(text) <= 256:
            n = len(states)
            sc = _Probe(self.compiled.tables)
            sc.push("\x00" * (1 + n))
            sc.restart(mode, 1 + n)
            old = [Attempt(1 + k, st) for k, st in enumerate(states)]
            sc.attempts = list(old)
            if old:
                sc.pos = 1
            sc.push(text)
            try:
                d = sc.decide(False)
            except _Bail:
                d = True
            if (d is None and sc.scan == sc.end
                    and all(a.fin < 0 and a.ends is None for a in sc.attempts)):
                ident = {id(a): k for k, a in enumerate(old)}
                eff = tuple((ident[id(a)], -1, a.state) if id(a) in ident else (-1, a.start - 1 - n, a.state)
                            for a in sc.attempts)
        with self._lock:
            cache[key] = eff
        return eff

    def kill_flags(self, mode: int, states: frozenset) -> list:
        """Per character class: does that class kill every attempt in `states` (all transitions dead)?"""
        m = self.compiled.tables.modes[mode]
        trans, ncls = m.trans, m.n_classes
        return [all(trans[s * ncls + c] == 0 for s in states) for c in range(ncls)]

    def batch_rows(self, factory):
        """The shared row tables of `TokenStreams` for this binding (built on first use)."""
        with self._lock:
            rows = getattr(self, "_rows", None)
            if rows is None:
                rows = self._rows = factory(self)
        return rows


class _FastRows:
    """`TokenTablesBase.fast`: ``fast[m]`` is mode m's row (a list), built the first time it is asked for;
    modes without a prefilter share ``never``."""

    __slots__ = ("_tt", "_rows", "_lock")

    def __init__(self, tt: TokenTablesBase, never_modes: list):
        self._tt = tt
        self._rows = [tt.never if no else None for no in never_modes]
        self._lock = threading.Lock()

    def __getitem__(self, m: int) -> list:
        row = self._rows[m]
        if row is None:
            with self._lock:
                row = self._rows[m]
                if row is None:
                    row = self._rows[m] = self._tt._fast_row(m)
        return row

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self):
        return (self[m] for m in range(len(self._rows)))


def _bad_tokens(msg: str):
    raise ValueError(f"chatparse table file: token section: {msg}")


def binding_from_data(compiled, data: dict, convert_tools=None) -> "TokenBinding":
    """A `TokenBinding` from the token section of a table file (``loads(...)["tokens"]``) and the
    `CompiledTemplate` of the same file: no compiler, no tokenizer, no re-derivation of the vocabulary.

    Checks what needs the compiled tables (the loader checked everything else): no inert tokens and no
    whole-delimiter tokens in a mode without a prefilter, whole-delimiter tokens only in modes whose patterns
    are all exact, and every listed whole-delimiter token really is that delimiter on its own (the scanner
    runs each one; its captures come from that run)."""
    t = compiled.tables
    n_modes = len(t.modes)
    size = int(data["meta"]["size"])
    inert = np.asarray(data["inert"])
    if inert.shape != (n_modes, size):
        _bad_tokens(f"inert table has shape {inert.shape}, expected ({n_modes}, {size}) for this template")
    vocab = LoadedVocab(data)
    exact_modes = [all(t.patterns[p].exact for p in m.patterns) for m in t.modes]
    delims: list = [{} for _ in range(n_modes)]
    texts = vocab.tok_text
    for m, i, pi in np.asarray(data["delims"]).reshape(-1, 3).tolist():
        if m >= n_modes or i >= size:
            _bad_tokens(f"whole-delimiter entry ({m}, {i}) out of range")
        if t.modes[m].first_re is None or not exact_modes[m]:
            _bad_tokens(f"mode {m} cannot have whole-delimiter tokens")
        d = _whole_delimiter(t, m, texts[i]) if texts[i] else None
        if d is None or d[0] != pi:
            _bad_tokens(f"token {i} is not a whole delimiter (pattern {pi}) in mode {m}")
        delims[m][i] = d
    for m, mode in enumerate(t.modes):
        if mode.first_re is None and inert[m].any():
            _bad_tokens(f"mode {m} has no prefilter, so no token can be inert in it")
    tables = TokenTablesBase(compiled, vocab, inert, delims)
    return TokenBinding(compiled, vocab, tables, convert_tools=convert_tools)


_binding_lock = threading.Lock()


def token_binding(compiled) -> "TokenBinding":
    """The `TokenBinding` of a `CompiledTemplate` that carries token tables: one loaded from a table file with
    a token section (``chatparse.tokenizer_dir.load_dir``, or ``CompiledTemplate(raw["template"], raw)`` of
    ``loads``), or one `load_dir` bound to a tokenizer. Built once per object (20-30 ms per 100k tokens).
    `TokenParser(compiled, ...)` calls this."""
    b = getattr(compiled, "_token_binding", None)
    if b is not None:
        return b
    data = (getattr(compiled, "raw_tables", None) or {}).get("tokens")
    if data is None:
        raise ValueError("this compiled template carries no token tables: bind it to a tokenizer with "
                         "chatparse.compiler.tokens.bind(template, tokenizer), or load a table file written "
                         "with token tables (`chatparse compile DIR` with a tokenizer.json)")
    with _binding_lock:
        b = getattr(compiled, "_token_binding", None)
        if b is None:
            from ..response_parser import _tool_schemas  # transformers' conversion of Python tools, lazily

            b = binding_from_data(compiled, data, convert_tools=_tool_schemas)
            compiled._token_binding = b
    return b


# --------------------------------------------------------------------------------------------------------------
# One-shot helpers
# --------------------------------------------------------------------------------------------------------------
def parse_tokens(ids, binding: TokenBinding, *, prefix: str | None = None, prefix_ids=None, tools=None,
                 spans: bool = False):
    """Parse a complete generation given as token ids. Returns the message, or `(message, spans)`."""
    return binding.parse(ids, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans)


def parse_tokens_batch(batch, binding: TokenBinding, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                       spans: bool = False) -> list:
    """Parse many generations (list of id sequences or a 2-D array); prefix one for all or one per item."""
    return binding.parse_batch(batch, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans)


# --------------------------------------------------------------------------------------------------------------
# Many streams
# --------------------------------------------------------------------------------------------------------------
class _Rows:
    """Abstract per-stream states for `TokenStreams`, shared by all streams of one (template, tokenizer):

    * rows ``0..n_modes-1``: Q(m), quiet in mode m with its region open (the parser's fast state);
    * row ``n_modes``: NONE (the stream needs the character engine for its next token);
    * further rows: P(m, S), mode m with undecided, match-free attempts ``S = ((chars back from the end,
      DFA state), ...)`` (e.g. after a token ending in "\\n" before a ``\\s*</think>`` delimiter).

    ``next[row * V + token]`` is (the offset ``row * V`` of) the row a token leads to when that is known
    without the engine: Q(m)->Q(m)
    for inert tokens, Q(m)->P(m, S) for a token whose effect from a quiet scanner is S (filled in the first
    time the engine has handled that token), P(m, S)->Q(m) for an inert token whose first character kills
    every attempt in S; -1 otherwise.
    """

    MAX_ROWS = 128

    def __init__(self, tt):
        self.tt = tt
        self.V = V = tt.size
        self.n_modes = tt.n_modes
        self.none = tt.none_row
        base = tt.flat.reshape(tt.n_modes + 1, V)
        # int32 offsets: MAX_ROWS * V stays below 2**31 for any vocabulary under 16M tokens
        self.dtype = np.int32 if self.MAX_ROWS * V < 2 ** 31 else np.int64
        nxt = np.full((tt.n_modes + 1, V), -1, dtype=self.dtype)
        for m in range(tt.n_modes):
            nxt[m][base[m] == 1] = m * V
        self.next = nxt.reshape(-1)  # entries are row offsets (row * V): a gather gives the next offsets
        self.info: list = [("Q", m, (), 0) for m in range(tt.n_modes)] + [("NONE", -1, (), 0)]
        self.keys: dict = {}
        cmap = tt.compiled.tables.cmap
        self.first_cls = np.array([cmap[ord(t[0])] if t else 0 for t in tt.vocab.tok_text], dtype=np.int64)
        # Every token's UTF-8 in one array, to turn long runs of complete tokens into text with numpy.
        enc = [t.encode("utf-8") if t else b"" for t in tt.vocab.tok_text]
        self.lens = np.fromiter((len(x) for x in enc), dtype=np.int64, count=len(enc))
        self.starts = np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(self.lens)[:-1]])
        self.flat = np.frombuffer(b"".join(enc), dtype=np.uint8)
        self.lock = threading.Lock()

    def text_of(self, ids: np.ndarray) -> str:
        """The concatenated text of complete tokens (a gather of their UTF-8, decoded once)."""
        L = self.lens[ids]
        ends = np.cumsum(L)
        total = int(ends[-1])
        if not total:
            return ""
        idx = np.repeat(self.starts[ids] - (ends - L), L) + np.arange(total)
        return self.flat[idx].tobytes().decode("utf-8")

    def pending_row(self, mode: int, S: tuple) -> int:
        """The row of P(mode, S), created on first use (NONE when there are too many)."""
        key = (mode, S)
        r = self.keys.get(key)
        if r is not None:
            return r
        with self.lock:
            r = self.keys.get(key)
            if r is not None:
                return r
            if len(self.info) >= self.MAX_ROWS:
                return self.none
            tt = self.tt
            kill = np.array(tt.kill_flags(mode, frozenset(st for _, st in S)), dtype=bool)
            V = self.V
            inert = tt.flat[mode * V:(mode + 1) * V].astype(bool)
            row = np.where(inert & kill[self.first_cls], mode * V, -1).astype(self.dtype)
            r = len(self.info)
            self.next = np.concatenate([self.next, row])  # readers keep the old array until they reload
            self.info.append(("P", mode, S, S[0][0]))
            self.keys[key] = r
            return r

    def learn(self, mode: int, token: int, row: int) -> None:
        self.next[mode * self.V + token] = row * self.V


class StepEvents(Sequence):
    """The per-stream events of one `TokenStreams.step`: ``events[b]`` is stream b's list of events.

    Events of streams whose token was handled by the row tables (no character engine) are built when read;
    ``slow`` lists the streams that ran their parser's engine in this step; ``errors`` maps a stream to the
    exception its parser raised (reading that stream's events re-raises it).
    """

    __slots__ = ("_owner", "_ids", "_old", "_new", "_held_tok", "_held_str", "_slow", "errors")

    def __init__(self, owner, ids, old, new, held_tok, held_str, slow, errors):
        self._owner = owner
        self._ids = ids
        self._old = old  # row offsets before the step
        self._new = new  # row offsets after (None: unchanged)
        self._held_tok = held_tok
        self._held_str = held_str
        self._slow = slow
        self.errors = errors

    def __len__(self) -> int:
        return len(self._ids)

    @property
    def slow(self) -> list:
        return sorted(self._slow) if self._slow else []

    def __iter__(self):
        return iter(self.tolist())

    def tolist(self) -> list:
        """Every stream's events (the same as ``[events[b] for b in range(len(events))]``, faster)."""
        o = self._owner
        V = o._size
        ids = self._ids.tolist()
        old = (self._old // V).tolist()
        new = old if self._new is None else (self._new // V).tolist()
        info, mf, names, dirty, tt = o._R.info, o._mode_field, o._names, o._dirty, o._tok_text
        slow = self._slow or {}
        errors = self.errors or {}
        out = []
        append = out.append
        for b, i in enumerate(ids):
            if i < 0:
                append([])
            elif old[b] == new[b] and b not in slow and b not in errors:
                f = mf[info[old[b]][1]]
                append([{"type": "region_chunk", "field": names[f], "text": tt[i], "dirty": dirty[f]}])
            else:
                append(self[b])
        return out

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self[k] for k in range(*b.indices(len(self)))]
        if b < 0:
            b += len(self._ids)
        if self.errors and b in self.errors:
            raise self.errors[b]
        if self._slow and b in self._slow:
            return self._slow[b]
        i = int(self._ids[b])
        if i < 0:
            return []
        o = self._owner
        V = o._size
        old = int(self._old[b]) // V
        text = o._tok_text[i]
        info = o._R.info
        if self._new is not None:
            new = int(self._new[b]) // V
            if new != old:
                kind, m, S, back = info[new]
                if kind == "P":  # Q(m) -> P(m, S): the attempts hold the last `back` characters
                    text = text[:len(text) - back]
                    if not text:
                        return []
                else:  # P(m, S) -> Q(m): the held characters and the token are region text
                    back = info[old][3]
                    h = int(self._held_tok[b])
                    held = o._tok_text[h][len(o._tok_text[h]) - back:] if h >= 0 else self._held_str[b]
                    text = held + text
                old = new
        f = o._mode_field[info[old][1]]
        return [{"type": "region_chunk", "field": o._names[f], "text": text, "dirty": o._dirty[f]}]


class TokenStreams:
    """B independent generations advanced together: ``step(ids)`` takes one token id per stream.

    ``step(ids, active=None)``: `ids` has shape (B,); `active` (optional bool array) marks the streams that
    take a token in this step (the others are left alone). Returns `StepEvents`. ``finalize(b)`` ends one
    stream (``(message, final_events)``); ``finalize_all()`` ends every stream still open.

    Each stream has a row (see `_Rows`); one numpy gather finds every stream's next row, and the known
    transitions (inert tokens, tokens ending in whitespace before a ``\\s*`` delimiter and the tokens after
    them) are applied with numpy too, so those streams cost no Python work per stream: the token id goes to a
    ring buffer, the events are built when read, and the text reaches the stream's parser the next time that
    stream needs the character engine (or the buffer wraps). Only the other tokens run through the stream's
    own `TokenParser`.
    """

    def __init__(self, binding: TokenBinding, n: int, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                 spans: bool = False, capacity: int = 1024):
        if n < 1:
            raise ValueError("TokenStreams needs at least one stream")
        prefixes = binding._batch_prefixes(n, prefix, prefix_ids)
        self.binding = binding
        self.n = n
        self.parsers = [TokenParser(binding, prefix=p, tools=tools, spans=spans) for p in prefixes]
        tt = binding.tables
        self._tt = tt
        self._R = tt.batch_rows(_Rows)
        self._size = V = binding.vocab.size
        self._nm = tt.n_modes
        self._none = tt.none_row
        self._mode_field = tt.mode_field
        self._names = tt.field_names
        self._dirty = binding.compiled.tables.dirty
        self._tok_text = binding.vocab.tok_text
        self._held_str = [""] * n  # P rows entered by the engine: the text the pending attempts hold
        self._held_tok = np.full(n, -1, dtype=np.int64)  # P rows entered by a token: that token
        rows = np.array([self._row_of(b, p) for b, p in enumerate(self.parsers)], dtype=np.int64)
        self._rowoff = rows * V
        self._cap = capacity
        self._buf = np.empty((capacity, n), dtype=np.int64)
        self._since = [0] * n
        self._r = 0
        self.done = [False] * n

    @property
    def initial_events(self) -> list:
        return [p.initial_events for p in self.parsers]

    def _row_of(self, b: int, p: TokenParser) -> int:
        """The row for parser `p`'s current state (and the text its pending attempts hold)."""
        if p._tab is not p._never:
            return p._mode
        if (p._pend is not None and p._lazy_ok and not p._dec.held and not p._dec.run and not p._sink
                and not p._opening):
            S, held = p._pend
            r = self._R.pending_row(p._mode, S)
            if r != self._none:
                self._held_str[b] = held
                if self._held_tok[b] >= 0:
                    ht = self._held_tok.copy()
                    ht[b] = -1
                    self._held_tok = ht
            return r
        return self._none

    def step(self, ids, active=None) -> StepEvents:
        n, V = self.n, self._size
        a = np.asarray(ids)
        if a.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got dtype {a.dtype}")
        ids = a.astype(np.int64).reshape(-1)  # always a copy: the lazy events of this step keep it
        if ids.shape != (n,):
            raise ValueError(f"step() takes one token id per stream ({n}), got shape {a.shape}")
        rowoff = self._rowoff
        u = ids.view(np.uint64)
        R = self._R
        if active is None:
            if u.max() >= V:
                bad = np.flatnonzero(u >= V)[0]
                raise _out_of_range(int(ids[bad]), V, f" (stream {bad})")
            nxt = R.next[rowoff + ids]
            same = nxt == rowoff
        else:
            act = np.asarray(active, dtype=bool).reshape(-1)
            if act.shape != (n,):
                raise ValueError(f"`active` must have one flag per stream ({n})")
            badm = act & (u >= V)
            if badm.any():
                bad = np.flatnonzero(badm)[0]
                raise _out_of_range(int(ids[bad]), V, f" (stream {bad})")
            ids[~act] = -1
            nxt = R.next[rowoff + np.where(act, ids, 0)]
            same = (nxt == rowoff) | ~act
        r = self._r
        self._buf[r] = ids
        self._r = r + 1
        if same.all():
            out = StepEvents(self, ids, rowoff, None, None, None, None, None)
        else:
            out = self._changes(ids, nxt, same, r)
        if self._r == self._cap:
            self._wrap()
        return out

    def _changes(self, ids, nxt, same, r) -> StepEvents:
        V = self._size
        old = self._rowoff
        new = old.copy()
        idx = np.flatnonzero(~same)
        nx = nxt[idx]
        ok = nx >= 0
        held_tok = self._held_tok
        held_str = None
        if ok.any():
            kidx = idx[ok]
            knx = nx[ok]
            new[kidx] = knx
            p_first = (self._none + 1) * V
            into_p = knx >= p_first
            from_p = old[kidx] >= p_first
            if from_p.any():  # P -> Q from an engine-entered P: keep the held text for the lazy events
                eng = kidx[from_p & (held_tok[kidx] < 0)]
                if eng.size:
                    held_str = {b: self._held_str[b] for b in eng.tolist()}
            if into_p.any():
                ht = held_tok.copy()
                ht[kidx[into_p]] = ids[kidx[into_p]]
                self._held_tok = ht
        slow: dict = {}
        errors: dict = {}
        if not ok.all():
            self._rowoff = new  # _catch_up reads the rows the deferred tokens ended in (unchanged for these)
            info = self._R.info
            tok_text = self._tok_text
            for b in idx[~ok].tolist():
                p = self.parsers[b]
                i = int(ids[b])
                prev = int(old[b]) // V
                try:
                    self._catch_up(b, r)
                    slow[b] = p.feed_tokens(i)
                except Exception as e:  # one stream's failure does not stop the others
                    errors[b] = e
                    slow[b] = []
                self._since[b] = r + 1
                nr = self._row_of(b, p)
                text = tok_text[i]
                if prev < self._nm and info[nr][0] == "P" and info[nr][1] == prev and text:
                    eff = self._tt.transition(prev, (), text)
                    if eff is not None and tuple((len(text) - off, st) for _, off, st in eff) == info[nr][2]:
                        self._R.learn(prev, i, nr)
                new[b] = nr * V
        self._rowoff = new
        return StepEvents(self, ids, old, new, held_tok, held_str, slow or None, errors or None)

    def _catch_up(self, b: int, upto: int | None = None) -> None:
        """Hand stream b's parser the tokens its rows handled since its last own step: their text joins the
        parser's deferred text (the core sees it on the parser's next engine step) and the parser's token
        state becomes the row's."""
        r = self._r if upto is None else upto
        s0 = self._since[b]
        self._since[b] = r
        if s0 >= r:
            return
        col = self._buf[s0:r, b]
        if r - s0 >= 64:  # long runs: numpy is faster than a join per token
            if (col < 0).any():
                col = col[col >= 0]
            if not len(col):
                return
            p = self.parsers[b]
            p._tail_append(self._R.text_of(col))
        else:
            lst = col.tolist()
            if -1 in lst:
                lst = [i for i in lst if i >= 0]
            if not lst:
                return
            p = self.parsers[b]
            p._tail_append("".join(map(self._tok_text.__getitem__, lst)))
        tt = self._tok_text
        kind, m, S, back = self._R.info[int(self._rowoff[b]) // self._size]
        p._mode = m
        p._lazy_ok = True
        if kind == "P":
            h = int(self._held_tok[b])
            held = tt[h][len(tt[h]) - back:] if h >= 0 else self._held_str[b]
            p._pend = (S, held)
            p._tab = p._never
            p._row = self._none
        else:
            p._pend = None
            p._tab = p._fast[m]
            p._row = m

    def _wrap(self) -> None:
        r = self._r
        for b in range(self.n):
            if not self.done[b]:
                self._catch_up(b, r)
            self._since[b] = 0
        self._r = 0

    def finalize(self, b: int) -> tuple[dict, list[dict]]:
        """End stream `b`; returns its `(message, final_events)`. Later steps must mark it inactive."""
        self._catch_up(b)
        self.done[b] = True
        rowoff = self._rowoff.copy()
        rowoff[b] = self._none * self._size
        self._rowoff = rowoff
        return self.parsers[b].finalize()

    def finalize_all(self) -> list:
        """End every stream not yet finalized; returns their `(message, final_events)` (None for ended ones)."""
        return [None if self.done[b] else self.finalize(b) for b in range(self.n)]

    def parser(self, b: int) -> TokenParser:
        """Stream b's TokenParser, brought up to date (e.g. to read `_output`)."""
        self._catch_up(b)
        return self.parsers[b]
