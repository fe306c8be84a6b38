"""`TokenStreams`: many generations advanced one token each per ``step(ids)``, vectorised with numpy.

Guarantees:

* Each stream's events (``StepEvents[b]``) and final message are exactly those of its own `TokenParser` fed
  the same ids, and so those of `chatparse.ResponseParser` fed the decoded text. One stream's exception is
  kept for that stream (reading its events re-raises it) and does not stop the others.
* Out-of-range ids raise ValueError naming the id and the stream, before any stream advances.

Why it is built this way: every stream has an abstract row (`_Rows`, shared by all streams of one binding;
a row includes the text its pending attempts hold, so every transition is a function of the row and the
token). One numpy gather finds every stream's next row, and the known transitions (inert tokens, tokens
ending in whitespace before a ``\\s*`` delimiter and the tokens after them, the bytes of a character split
across tokens) need no Python work per stream: the token id goes to a ring buffer, the events are built only
when read, and the text reaches the stream's parser the next time that stream needs the character engine (or
the buffer wraps). A transition the tables do not have yet but the binding's parsers cached (a pending row
to a pending row), or a byte that only extends a split character, is taken in Python without the stream's
parser and then goes into the tables (`TokenStreams._without_parser`). Streams start in fresh rows: a
generation's first tokens that hand out nothing (qwen3's ``"<th"``, ``"ink"``) and the token that then opens
a region are learned once per prefix from the first streams' parsers and then taken by the tables; a
stream's parser is fed their text when it first runs (`TokenStreams._replay_fresh`). Only the other tokens
run through the stream's own `TokenParser` (which serves most of them from the same caches).

Cost per step: when every row stays (quiet streams, inert tokens) a step is a fixed handful of numpy
operations on arrays of B (a copy of the ids, the range check, one gather, one comparison of bytes) and one
`StepEvents`; row changes the tables know add two or three; only streams the tables do not know cost Python
work each (a dict lookup for a cached pending-to-pending transition, else the parser). When the ring buffer
wraps, and at `finalize_all`, the deferred tokens of all streams become text in one call (`kernels`: native
where a C compiler was at install time, else numpy and joins; at a wrap, each stream's texts are joined at once
and join its parser's deferred text); when one stream's parser needs its deferred tokens earlier, they too are
joined at once.

A caller that will not read a step's events says so (``step(ids, events=False)``): a stream whose token the
tables do not know then stops its parser instead of running it (a region's close would need it: its event
carries the region's value), and its row becomes D, which keeps every token. Its tokens stay in the ring
buffers (kept past a wrap while needed); its parser takes them in one call when next needed (a step with
events, `parser(b)`, an end with events), or never: ended with ``events=False``, its message is the one-shot
parse of its whole generation, which costs a fraction of running its parser at every region change
(bench/PERF_NOTES.md#events-off). What a caller can read is the same either way.
"""

from __future__ import annotations

import threading
from codecs import utf_8_decode
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..stream.collector import collector_paused
from . import kernels as stream_kernels
from .binding import TokenBinding
from .decode import _out_of_range
from .kernels import TokenTexts, join_columns
from .parser import TokenParser
from .tables import ROW_DETACHED, ROW_FRESH, ROW_HELD, ROW_MATCH, ROW_NONE, ROW_PENDING, ROW_QUIET

__all__ = ["TokenStreams", "StepEvents"]

_INT64 = np.dtype(np.int64)


# --------------------------------------------------------------------------------------------------------------
# Many streams
# --------------------------------------------------------------------------------------------------------------
class _Rows:
    """Abstract per-stream states for `TokenStreams`, shared by all streams of one (template, tokenizer):

    * rows ``0..n_modes-1``: Q(m), quiet in mode m with its region open (the parser's fast state), or, for
      mode 0 of a template without an implicit field, quiet in the null sink (its tokens hand out nothing);
    * row ``n_modes``: NONE (the stream needs the character engine for its next token);
    * further rows: P(m, S, held), mode m with undecided, match-free attempts ``S = ((chars back from the
      end, DFA state), ...)`` that hold the text `held` (e.g. ``"\\n</"`` before ``\\s*</think>``); and, for
      byte-level vocabularies, H(m, S, held, hb): the same (S may be empty: quiet) with the decoder holding
      the bytes `hb` of a character split across tokens (after ``b" \\xf0\\x9f"``, a space and the first half
      of an emoji); M(m, records, held): the parser's core holds `held` with attempts (`attempt_record`) that
      recorded a match it must wait on (``"\\n</think>\\n\\n"``: more whitespace could follow); the core is
      brought there when the stream's parser next runs (`TokenParser.adopt`); F(m, prefix, held): a
      stream whose parser has been fed nothing yet (created after `prefix`, the prefix's text as the parser
      keeps it) and whose tokens so far hand out no event and decode to `held` (qwen3's ``"<th"``,
      ``"<think"``): its parser takes those tokens when it next runs (`TokenStreams._replay_fresh`); D
      (`detached_row`): a stream whose parser stopped at a step without events, every token back to D.

    ``info[row]`` is ``(kind, mode, S or records or prefix, held, hb)``. ``next[row * V + token]`` is (the offset
    ``row * V`` of) the row a token leads to when that is known without the engine, -1 otherwise: Q(m)->Q(m)
    for inert tokens and P->Q(m) for an inert token whose first character kills every attempt (filled when
    the row is made); Q(m)->Q(m) for a token whose attempts all die within it (``" </p>"`` before
    ``\\s*</think>``), Q->P, Q->H, P->P, P->H, H->H, H->Q, P->M and M->M (filled the first time Python worked
    the transition out: `TokenStreams._learn`, `_learn_split`, `_learn_held`, `_learn_from`,
    `_without_parser`); from an M row only the parser goes on; F->F and F->Q or P (`_learn_fresh`). Because
    the held text and bytes are part of the row, every entry is a function of the row and the token alone, and
    so are the events of a transition: the old row's held text plus the token's text (after the old row's held
    bytes), less the new row's held text (`StepEvents`); from an F row, none to another F row, else the events
    the parser that learned the transition handed out (`fresh_events`, none of them a region close). Only a Q
    row leads to itself by the tables (an unchanged row is Q->Q: its events are the token's text), besides D,
    which no step with events holds (detached streams take their parsers back before it).
    """

    MAX_ROWS = 128  # rows at least; a smaller vocabulary gets more, within ROW_MEMORY (`max_rows`)
    ROW_MEMORY = 128 << 20  # bytes of row tables at most (128 rows of 131,072 tokens)
    MAX_ROWS_CAP = 1024
    MAX_HELD_ROWS = 48  # H rows at most per 128 rows (split characters vary more than pending attempts)
    MAX_HELD_TEXT = 32  # no row for attempts holding more (the stream's parser holds such runs)
    # ... except in the null sink, whose rows hand out nothing: there attempts hold whole headers while they
    # run (gpt_oss's ``<|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>``)
    MAX_SINK_HELD_TEXT = 128
    MAX_FRESH_EVENTS = 4096  # F -> Q/P transitions kept with their events (each distinct first token has one)
    MAX_FRESH_ROWS = 24  # of the rows, F rows (a prefix without the start anchor keys its own; P rows keep room)

    def __init__(self, tt):
        self.tt = tt
        self.V = V = tt.size
        self.n_modes = tt.n_modes
        self.none = tt.none_row
        base = tt.flat.reshape(tt.n_modes + 1, V)
        # int64 entries (intp): a gather's result is the next step's gather offsets as it is. With int32 entries
        # (half the memory: 512 KiB per row for 131,072 tokens, against 1 MiB) every step where a row changes
        # paid a conversion, about a tenth of the step.
        self.dtype = np.int64
        # Headers spelled in many small tokens (gpt_oss's over an 8k vocabulary) take a row per token: a small
        # vocabulary's rows are cheap, so it gets more of them
        self.max_rows = max_rows(V)
        self.max_held_rows = self.MAX_HELD_ROWS * self.max_rows // self.MAX_ROWS  # (the same share of them)
        # Room for `max_rows` rows, reserved once and never moved: the system maps the pages of a row when it is
        # first written (`_row`), so memory grows with the rows made, and no step pays for copying the table.
        self._store = np.empty(self.max_rows * V, dtype=self.dtype)
        first = self._store[:(tt.n_modes + 1) * V]
        first.fill(-1)
        for m in range(tt.n_modes):
            first[m * V:(m + 1) * V][base[m] == 1] = m * V
        self.next = first  # entries are row offsets (row * V): a gather gives the next offsets
        self.info: list = [(ROW_QUIET, m, (), "", b"") for m in range(tt.n_modes)] + [(ROW_NONE, -1, (), "", b"")]
        self.keys: dict = {}
        self.n_held = 0  # H rows made so far
        self.n_fresh = 0  # F rows made so far
        self.fresh_events: dict = {}  # (F row, token) -> the events of a learned F -> Q or P transition
        cmap = tt.compiled.tables.cmap
        self.first_cls = np.array([cmap[ord(t[0])] if t else 0 for t in tt.vocab.tok_text], dtype=np.int64)
        # Every token's text, plus "" at index V (and so at -1, the id of an inactive stream's step): what
        # `kernels.join_columns` turns a run of deferred ids into. Byte-level vocabularies: their bytes (b""
        # at V): deferred tokens become text through their bytes, as the parser's decoder would decode them,
        # so tokens without text of their own (a character split across tokens, H rows) can be deferred too.
        # Other vocabularies: tokens without text of their own are never deferred (no row transition is
        # learned for them); they map to "".
        self.bytes_kind = tt.vocab.kind == "bytes"
        if self.bytes_kind:
            self.texts = TokenTexts(list(tt.vocab.tok_bytes) + [b""])
        else:
            self.texts = TokenTexts([t if t is not None else "" for t in tt.vocab.tok_text] + [""])
        self._piece_bytes = None
        self.lock = threading.Lock()

    def piece_bytes(self) -> TokenTexts:
        """For a ``pieces`` vocabulary: every token's bytes (b"" for a skipped token), as `TokenTexts`, built
        on first use (`TokenStreams._texts_of` joins whole generations with them)."""
        if self._piece_bytes is None:
            v = self.tt.vocab
            self._piece_bytes = TokenTexts([b"" if skip else data for data, skip in zip(v.tok_bytes, v.skip.tolist())]
                                           + [b""])
        return self._piece_bytes

    def pending_row(self, mode: int, S: tuple, held: str) -> int:
        """The row of P(mode, S, held), created on first use (NONE when there are too many)."""
        return self._row((ROW_PENDING, mode, S, held, b""))

    def held_row(self, mode: int, S: tuple, held: str, hb: bytes) -> int:
        """The row of H(mode, S, held, hb), created on first use (NONE when there are too many). Its
        transitions are learned; until then every token from it goes to Python."""
        return self._row((ROW_HELD, mode, S, held, hb))

    def fresh_row(self, mode: int, prefix: str, held: str) -> int:
        """The row of F(mode, prefix, held), created on first use (NONE when there are too many)."""
        return self._row((ROW_FRESH, mode, prefix, held, b""))

    def detached_row(self) -> int:
        """The row D, created on first use (NONE when there are too many rows): every token leads back to it,
        so the row tables keep a detached stream (`TokenStreams.step` with ``events=False``) without Python
        work; its tokens wait in the ring buffer (and the buffers kept since) for its parser or its one-shot
        end."""
        return self._row((ROW_DETACHED, 0, (), "", b""))

    def match_row(self, mode: int, held: str, records: tuple) -> int:
        """The row of M(mode, held, records), created on first use (NONE when there are too many): the parser's
        core holds `held` with the attempts `records` (`attempt_record`), a match among them that it must
        wait on (qwen3's ``\\n</think>\\n\\n``, where more whitespace could follow)."""
        return self._row((ROW_MATCH, mode, records, held, b""))

    def _row(self, info: tuple) -> int:
        """The row whose `info` this is, created on first use; NONE when there are too many rows (or H rows, or
        F rows), or its attempts hold more than `MAX_HELD_TEXT` characters (`MAX_SINK_HELD_TEXT` in the null
        sink). A new P row knows, for each inert token, whether its first character kills every attempt (then
        it leads back to Q); other entries are learned."""
        r = self.keys.get(info)
        if r is not None:
            return r
        kind, mode, S, held, _ = info
        if len(held) > (self.MAX_HELD_TEXT if self.tt.mode_field[mode] is not None else self.MAX_SINK_HELD_TEXT):
            return self.none
        with self.lock:
            r = self.keys.get(info)
            if r is not None:
                return r
            is_held = kind == ROW_HELD
            is_fresh = kind == ROW_FRESH
            if (len(self.info) >= self.max_rows or is_held and self.n_held >= self.max_held_rows
                    or is_fresh and self.n_fresh >= self.MAX_FRESH_ROWS):
                return self.none
            self.n_held += is_held
            self.n_fresh += is_fresh
            r = len(self.info)
            V = self.V
            row = self._store[r * V:(r + 1) * V]
            if kind == ROW_PENDING:
                kill = np.array(self.tt.kill_flags(mode, frozenset(st for _, st in S)), dtype=bool)
                inert = self.tt.flat[mode * V:(mode + 1) * V].astype(bool)
                row[:] = np.where(inert & kill[self.first_cls], mode * V, -1)
            elif kind == ROW_DETACHED:
                row[:] = r * V
            else:
                row[:] = -1
            self.next = self._store[:(r + 1) * V]  # (a reader's older view sees the same memory, minus this row)
            self.info.append(info)
            self.keys[info] = r
            return r

    def learn(self, row: int, token: int, to: int) -> None:
        """From `row`, `token` leads to row `to` (`row` itself only for a Q row: see the class)."""
        if to != row or row < self.n_modes:
            self.next[row * self.V + token] = to * self.V


def max_rows(V: int) -> int:
    """How many rows `_Rows` makes at most for a vocabulary of V tokens: `_Rows.MAX_ROWS`, or as many more as
    `_Rows.ROW_MEMORY` holds (up to `_Rows.MAX_ROWS_CAP`)."""
    return max(_Rows.MAX_ROWS, min(_Rows.MAX_ROWS_CAP, _Rows.ROW_MEMORY // (8 * V)))


def minus_one_needle(V: int, dtype) -> bytes:
    """Bytes whose presence in a gather's bytes (`dtype` entries, each -1 or a row offset ``row * V`` with
    ``row < max_rows(V)``) means exactly that some entry is -1. Where no row offset has a 0xff byte (V =
    2**17: the low two bytes are 0, the third is 2 * row < 256), one 0xff byte, a memchr; else a run of 0xff
    as long as an entry, which covers the top byte of one entry, below 0x80 unless that entry is negative."""
    offsets = (np.arange(max_rows(V), dtype=np.int64) * V).astype(dtype).tobytes()
    return b"\xff" * (1 if b"\xff" not in offsets else np.dtype(dtype).itemsize)


class StepEvents(Sequence):
    """The per-stream events of one `TokenStreams.step`: ``events[b]`` is stream b's list of events.

    Events of streams whose token was handled by the row tables (no character engine) are built when read;
    ``slow`` lists the streams whose token was handled in Python in this step (by their parser, or without it:
    `TokenStreams._without_parser`); ``errors`` maps a stream to the
    exception its parser raised (reading that stream's events re-raises it).
    """

    __slots__ = ("_owner", "_ids", "_old", "_new", "_slow", "errors")

    def __init__(self, owner, ids, old, new, slow, errors):
        self._owner = owner
        self._ids = ids
        self._old = old  # row offsets before the step
        self._new = new  # row offsets after (None: unchanged)
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
                append([] if f is None else
                       [{"type": "region_chunk", "field": names[f], "text": tt[i], "dirty": dirty[f]}])
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
            if new != old:  # the old row's held text and the token's text, less what the new row holds
                kind, _, _, held, hb = info[old]
                if kind == ROW_FRESH:  # (to another F row: none)
                    return [dict(e) for e in o._R.fresh_events.get((old, i), ())]
                if hb or text is None:
                    text = utf_8_decode(hb + o._tok_bytes[i], "replace", False)[0]
                text = held + text
                keep = len(info[new][3])
                if keep:
                    text = text[:len(text) - keep]
                if not text:
                    return []
                old = new
        f = o._mode_field[info[old][1]]
        if f is None:  # the null sink (no implicit field): its text is dropped
            return []
        return [{"type": "region_chunk", "field": o._names[f], "text": text, "dirty": o._dirty[f]}]


class _Parsers(list):
    """The streams' `TokenParser`s where every stream has the same prefix, each made on first use (by `make`):
    a stream whose message comes from the one-shot parse (`TokenStreams.step` without events) never needs
    one, and making 256 costs about 2 ms. Indexing and iterating make them; `len` is the number of streams."""

    __slots__ = ("_make",)

    def __init__(self, first: TokenParser, n: int, make):
        super().__init__([first] + [None] * (n - 1))
        self._make = make

    def __getitem__(self, b):
        if isinstance(b, slice):
            return [self[k] for k in range(*b.indices(len(self)))]
        p = list.__getitem__(self, b)
        if p is None:
            p = self._make()
            list.__setitem__(self, b, p)
        return p

    def __iter__(self):
        return (self[b] for b in range(len(self)))


class TokenStreams:
    """B independent generations advanced together: ``step(ids)`` takes one token id per stream.

    ``step(ids, active=None, events=True)``: `ids` has shape (B,); `active` (optional bool array) marks the
    streams that take a token in this step (the others are left alone). Returns `StepEvents` (with
    ``events=False``, None: see `step`). ``finalize(b)`` ends one stream (``(message, final_events)``);
    ``finalize_all()`` ends every stream still open; with ``events=False`` both give messages alone.

    Each stream has a row (see `_Rows`); one numpy gather finds every stream's next row, and the known
    transitions (inert tokens, tokens ending in whitespace before a ``\\s*`` delimiter and the tokens after
    them) are applied with numpy too, so those streams cost no Python work per stream: the token id goes to a
    ring buffer, the events are built when read, and the text reaches the stream's parser the next time that
    stream needs the character engine (or the buffer wraps). A transition from a pending row that the
    binding's parsers cached, or a byte that only extends a split character, is taken without the parser
    (`_without_parser`) and learned by the tables; only the other tokens run through the stream's own
    `TokenParser`.
    """

    def __init__(self, binding: TokenBinding, n: int, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                 spans: bool = False, capacity: int = 1024, dialect=None, offsets: bool | None = None,
                 malformed: str | None = None):
        if n < 1:
            raise ValueError("TokenStreams needs at least one stream")
        prefixes = binding._batch_prefixes(n, prefix, prefix_ids)
        self.binding = binding
        self.n = n
        def make(p):
            return TokenParser(binding, prefix=p, tools=tools, spans=spans, dialect=dialect, offsets=offsets,
                               malformed=malformed)

        same = all(p == prefixes[0] for p in prefixes)
        with collector_paused():
            self.parsers = (_Parsers(make(prefixes[0]), n, lambda: make(prefixes[0])) if same
                            else [make(p) for p in prefixes])
        tt = binding.tables
        self._tt = tt
        self._R = tt.batch_rows(_Rows, self.parsers[0].dialect)
        self._size = V = binding.vocab.size
        self._nm = tt.n_modes
        self._none = tt.none_row
        self._mode_field = tt.mode_field
        self._names = tt.field_names
        self._dirty = binding.compiled.tables.dirty
        self._tok_text = binding.vocab.tok_text
        self._tok_bytes = binding.vocab.tok_bytes
        # (streams with the same prefix start in the same state: the first one's row is every one's)
        rows = [self._start_row(self.parsers[0])] * n if same else [self._start_row(p) for p in self.parsers]
        # Streams whose parser has been fed nothing: their F row when the parser's deferred tokens begin (at
        # `_since`), replayed by `_replay_fresh`; None once the parser has run.
        self._frow = [r if self._R.info[r][0] == ROW_FRESH else None for r in rows]
        # Streams whose parser has run on exactly the text of this F row and handed out nothing (so that the
        # transitions of F rows are all learned by the first streams, not one more per generation of streams)
        self._fseen: list = [None] * n
        # Row offsets (never mutated once a step has returned): `_rowoff` (int64, the table's dtype: what a
        # gather returns, and the intp offsets numpy gathers fastest with), `_rowb` its bytes.
        self._set_rows(np.array(rows, dtype=self._R.dtype) * V)
        self._idx = np.empty(n, dtype=np.int64)  # scratch: the gather's indexes
        self._spare = np.empty(n, dtype=self._R.dtype)  # scratch: the native step's next rows
        self._neg = np.empty(n, dtype=bool)  # scratch: the streams the row tables do not know
        self._zero = np.array(0, dtype=self._R.dtype)
        self._minus_one = minus_one_needle(V, self._R.dtype)
        self._cap = capacity
        self._new_buffer()
        self._since = [0] * n
        self._r = 0
        self.done = [False] * n
        # Steps taken with ``events=False`` (see `step`): streams whose parser stopped there (`_detached`: the
        # wrap, the step of the buffer its parser is behind since, the step of the first token the tables did not
        # know, the row before it); the ring buffers of earlier wraps that hold such tokens (`_hist`, from wrap
        # `_hist0`; `_wraps` wraps so far); `_whole`: every buffer since the first
        # step is kept (no step has asked for events yet), so a detached stream's whole generation can be
        # parsed in one shot at its end (`_oneshot`: where that gives its parser's message: no tools, spans,
        # offsets, dialect or malformed setting, which the one-shot path does not take from the parser)
        self._prefixes = prefixes
        self._detached: dict = {}
        self._one_shot_ended: set = set()  # streams ended by `_end_detached`: their parsers never caught up
        self._hist: list = []
        self._hist0 = 0
        self._wraps = 0
        self._whole = True
        self._oneshot = tools is None and not spans and not offsets and dialect is None and malformed is None

    @property
    def initial_events(self) -> list:
        return [p.initial_events for p in self.parsers]

    def _start_row(self, p: TokenParser) -> int:
        """The row of a parser just created: F(mode, prefix, "") where its tokens can be deferred before it
        has run (see `_Rows`), else its row by its state (`_row_of`)."""
        fresh = p.fresh_start()
        if fresh is None:
            return self._row_of(p)
        return self._R.fresh_row(fresh[0], fresh[1], "")

    def _row_of(self, p: TokenParser) -> int:
        """The row for parser `p`'s current state (`TokenParser.row_key`)."""
        key = p.row_key()
        if key is None:
            return self._none
        if key.__class__ is int:  # quiet in that mode: its Q row
            return key
        return self._R._row(key)

    def _set_rows(self, rows, rows_bytes: bytes | None = None) -> None:
        """The streams' rows from here on: `rows`, row offsets in the table's dtype (not mutated afterwards);
        `rows_bytes`, their bytes where the caller has them."""
        self._rowoff = rows
        self._rowb = rows.tobytes() if rows_bytes is None else rows_bytes

    def step(self, ids, active=None, *, events: bool = True) -> StepEvents | None:
        """Advance every stream (every active one) by one token; returns the step's `StepEvents`.

        The all-quiet path (every stream quiet and its token inert) is a handful of numpy operations on
        arrays of B: the range check, one gather of the next rows, one comparison of their bytes.

        With ``events=False`` the caller will not read this step's events (None is returned): a stream whose
        token the row tables do not know then does not run its parser but stops it there ("detaches": its
        row becomes D, which keeps every token, so that its later steps cost no Python work either). A
        detached stream's parser takes its tokens in one `TokenParser.feed_tokens` call when it is needed
        again: at the next step with events (before it), at `parser(b)`, or at its end with events; ended
        with ``events=False`` (`finalize`, `finalize_all`) it is not needed at all where its whole generation
        is still kept (no step asked for events) and the one-shot path gives its parser's message
        (`_oneshot`): the message is then ``CompiledTemplate.parse`` of its decoded ids. Either way every
        event, message and exception a caller can read is its own parser's, as with events; an exception
        the parser raises on a token of a step without events is not seen there (nobody reads that step), but
        the parser is failed from then on: its later steps and its end raise as they would have.
        """
        if events and (self._whole or self._detached):
            self._whole = False
            self._attach(sorted(self._detached))  # (and the kept buffers go)
        a = np.asarray(ids)
        plain = a.dtype is _INT64 and a.ndim == 1  # (what the native kernel reads as it is)
        if not plain and a.dtype.kind not in "iu":
            raise TypeError(f"token ids must be integers, got dtype {a.dtype}")
        n = self.n
        if a.size != n:
            raise ValueError(f"step() takes one token id per stream ({n}), got shape {a.shape}")
        # The step's row of the ring buffer holds its copy of the ids (the lazy events of this step keep a view:
        # a wrap starts a fresh buffer). Until the step is taken (`_r`), the row is scratch.
        r = self._r
        ids = self._buf[r]
        rowoff = self._rowoff
        advance = stream_kernels.advance
        nb = None  # the next rows' bytes, where the numpy spelling made them
        if active is None and advance is not None:  # the native kernel: the same rows, in one pass
            nxt = self._spare
            if not plain:
                ids[...] = a if a.ndim == 1 else a.reshape(n)
                a = ids
            code = advance(a, ids, rowoff, self._R.next, nxt, self._size)
            if code < 0:
                raise _out_of_range(int(a[-1 - code]), self._size, f" (stream {-1 - code})")
            if code:
                self._spare = np.empty(n, dtype=self._R.dtype)  # (`nxt` becomes the rows: never mutated)
        else:
            ids[...] = a if a.ndim == 1 else a.reshape(n)
            if active is None:
                u = self._ubuf[r]  # the same ids as uint64: negative ones are huge
                if u.item(u.argmax()) >= self._size:  # (argmax: the cheapest whole-array check numpy has for B ~ 256)
                    b = int(np.flatnonzero(u >= self._size)[0])
                    raise _out_of_range(int(ids[b]), self._size, f" (stream {b})")
                nxt = self._R.next[np.add(rowoff, ids, out=self._idx)]
            else:
                R = self._R
                u = self._ubuf[r]
                act = np.asarray(active, dtype=bool).reshape(-1)
                if act.shape != (n,):
                    raise ValueError(f"`active` must have one flag per stream ({n})")
                badm = act & (u >= self._size)
                if badm.any():
                    b = int(np.flatnonzero(badm)[0])
                    raise _out_of_range(int(ids[b]), self._size, f" (stream {b})")
                ids[~act] = -1
                nxt = R.next[rowoff + np.where(act, ids, 0)]
                nxt[~act] = rowoff[~act]
            nb = nxt.tobytes()
            # as `advance` returns: every row unchanged (quiet streams, inert tokens), rows changed all by the
            # tables (see `_minus_one`), or some the tables do not know
            code = 0 if nb == self._rowb else 1 if self._minus_one not in nb else 2
        self._r = r + 1
        if code == 0:
            out = StepEvents(self, ids, rowoff, None, None, None) if events else None
        elif code == 1:
            self._set_rows(nxt, nb)
            out = StepEvents(self, ids, rowoff, nxt, None, None) if events else None
        else:
            out = self._changes(ids, nxt, r, events)
        if self._r == self._cap:
            self._wrap()
        return out

    def _changes(self, ids, nxt, r, events: bool = True) -> StepEvents | None:
        """Rows change, some the tables do not know. `nxt` (a fresh array) is every stream's next row offset,
        -1 where the row tables do not know it: those streams take a transition an earlier stream of this step
        taught the tables, or a known transition without their parser (`_without_parser`), or run their
        parser (without `events`: detach, see `step`); the others just move to their next row."""
        V = self._size
        old = self._rowoff
        neg = np.less(nxt, self._zero, out=self._neg)
        slow = {}
        errors = {}
        parsers = self.parsers
        p_first = self._none + 1
        R = self._R
        info = R.info
        todo = np.flatnonzero(neg).tolist()
        since = self._since
        seen = [self._fseen[b] if since[b] == r else None for b in todo]  # (else tables took steps since)
        detached = None if events else R.detached_row()
        if detached == self._none:
            detached = None  # (no room for the row: the parsers run)
        elif detached is not None:
            detached *= V
        # Streams with deferred tokens, out of F rows: caught up together, their texts joined in one pass over
        # the buffer's rows rather than a column each (streams that started together reach a region's close
        # within a few steps of each other: 156 of 256 in one step, at 17 us a column read alone). Catching up
        # is always allowed (a wrap does it); a stream that then takes a transition taught in this step only
        # had its deferred text handed over earlier.
        catch = [b for b in todo if since[b] < r and info[int(old[b]) // V][0] != ROW_FRESH] if events else ()
        if len(catch) > 1:
            for b in catch:  # (as `_catch_up` does first: its parser is fed the tokens of its fresh rows)
                self._fseen[b] = None
                if self._frow[b] is not None:
                    since[b] = self._replay_fresh(b, since[b], r)
            catch = [b for b in catch if since[b] < r]
            self._catch_up_many(catch, r, [int(old[b]) // V for b in catch])
        for b, fresh in zip(todo, seen):
            i = int(ids[b])
            prev = int(old[b]) // V
            # Streams in the same row taking the same token (streams started together read the same header):
            # the first one's transition, once learned, is every other's, with the same events (`_Rows`)
            learned = int(R.next[prev * V + i])
            if learned >= 0:
                nxt[b] = learned
                continue
            if info[prev][0] == ROW_FRESH:
                fresh = prev
            if prev >= p_first:
                known = self._without_parser(prev, i)
                if known is not None:
                    nr, slow[b] = known
                    nxt[b] = nr * V
                    continue
            if not events and detached is not None and not self.done[b]:
                # (its parser is not caught up, nor made (`_Parsers`): where it ends in one shot, it never is)
                self._fseen[b] = None
                self._detached[b] = (self._wraps, since[b], r, prev)
                nxt[b] = detached
                continue
            p = parsers[b]
            try:
                self._catch_up(b, r, prev)
                slow[b] = p.feed_tokens(i)
            except Exception as e:  # one stream's failure does not stop the others
                errors[b] = e
                slow[b] = []
            self._since[b] = r + 1
            nr = self._row_of(p)
            self._fseen[b] = None
            if b not in errors:
                if fresh is not None:
                    self._fseen[b] = self._learn_fresh(fresh, i, nr, p, slow[b])
                self._learn_from(prev, i, nr, p.hold_pure)
            p.hold_pure = False
            nxt[b] = nr * V
        self._set_rows(nxt)
        return StepEvents(self, ids, old, nxt, slow, errors or None) if events else None

    def _without_parser(self, row: int, i: int):
        """Token `i` from P or H row `row`, without the stream's parser where the outcome is known: ``(next
        row, events)``, or None. Two cases:

        * from P(m, S, held), a token with text of its own that the binding's parsers have a cached lazy
          transition for (`TokenTablesBase.lazy_row`, filled by `TokenParser` the first time one of them
          worked it out): exactly what the parser's own cached path does in that state;
        * from P or H, a token that only adds bytes to a character still incomplete (byte-level
          vocabularies): the parser returns no events and keeps its attempts, its decoder holding the bytes.

        The token stays deferred (its text, or bytes, reach the parser with the stream's other deferred
        tokens), and the transition goes into the row table (`_Rows.learn`): the next stream in that row
        takes it with numpy. Saves the parser's catch-up, step and row lookup on ``"\\n"`` after ``" "``,
        ``"</"`` and ``"think"`` after ``"\\n"`` before ``\\s*</think>``, and split emoji after a space."""
        R = self._R
        kind, m, S, held, hb = R.info[row]
        if kind == ROW_MATCH or kind == ROW_FRESH:  # a match waited on, a parser not run yet: only the parser goes on
            return None
        text = self._tok_text[i]
        if text is not None and not hb:
            lrow = self._tt.lazy_row(m, S)
            hit = lrow.get(i) if lrow is not None else None
            if hit is None:
                return None
            S2, _, keep, _ = hit
            text = held + text
            if S2:
                nr = R.pending_row(m, S2, text[keep:])
                if nr == self._none:
                    return None
                text = text[:keep]
            else:
                nr = m
        elif text is None and R.bytes_kind:
            data = hb + self._tok_bytes[i]
            if utf_8_decode(data, "replace", False)[1]:
                return None
            nr = R.held_row(m, S, held, data)
            if nr == self._none:
                return None
            text = ""
        else:
            return None
        R.learn(row, i, nr)
        f = self._mode_field[m]
        if not text or f is None:
            return nr, []
        return nr, [{"type": "region_chunk", "field": self._names[f], "text": text, "dirty": self._dirty[f]}]

    def _learn_from(self, prev: int, i: int, nr: int, pure_hold: bool) -> None:
        """After the parser took the stream from row `prev` to row `nr` on token `i`: remember the transitions
        the tables can take (`_learn`, `_learn_split`, `_learn_held`; Q, P or M -> M where the parser's cached
        scanner run said the held outcome depends on nothing before the held text, `pure_hold`, and the M row
        holds all the text the transition added: qwen3's ``</tool_call>`` token, after which ``\\s*`` may
        still take whitespace, hands out nothing)."""
        info = self._R.info
        text = self._tok_text[i]
        if prev < self._nm:
            if pure_hold and text and info[nr][0] == ROW_MATCH and info[nr][1] == prev and info[nr][3] == text:
                self._R.learn(prev, i, nr)
            elif text:
                self._learn(prev, i, text, nr)
            elif text is None and info[nr][0] == ROW_HELD:
                self._learn_split(prev, i, nr)
        elif prev > self._none:
            kind = info[prev][0]
            if kind == ROW_HELD:
                self._learn_held(prev, i, nr)
            elif (pure_hold and text and (kind == ROW_PENDING or kind == ROW_MATCH) and info[nr][0] == ROW_MATCH
                  and info[nr][3] == info[prev][3] + text):
                self._R.learn(prev, i, nr)

    def _learn_fresh(self, prev: int, i: int, nr: int, p: TokenParser, events: list) -> int | None:
        """After parser `p`, fed exactly the text of F row `prev` (by `_replay_fresh`, or by running on it
        itself) and having handed out nothing, took token `i` to row `nr`: with no events, F(m, prefix, held)
        -> F(m, prefix, held + the token's text) (every parser created after that prefix and fed that text is
        in the same state, and has handed out nothing), returned; with events none of which is a region close
        (whose value could depend on the parser's tools), -> `nr` where that is a Q or P row, the events kept
        for `StepEvents`; None then."""
        text = self._tok_text[i]
        if text is None or not p.deferrable():
            return None
        R = self._R
        if not events:
            _, m, prefix, held, _ = R.info[prev]
            to = R.fresh_row(m, prefix, held + text)
            if to == self._none:
                return None
            R.learn(prev, i, to)
            return to
        if (R.info[nr][0] in (ROW_QUIET, ROW_PENDING) and len(R.fresh_events) < R.MAX_FRESH_EVENTS
                and all(e["type"] != "region_close" for e in events)):
            R.fresh_events[(prev, i)] = [dict(e) for e in events]
            R.learn(prev, i, nr)
        return None

    def _learn(self, mode: int, i: int, text: str, nr: int) -> None:
        """After the engine took quiet mode `mode` to row `nr` on token `i`: remember it when the transition
        probe says the same, so the next stream doing this needs no engine (Q(m) -> Q(m) for a token whose
        attempts all die within it, Q(m) -> P(m, S, held) for one that leaves undecided attempts)."""
        kind, m, S, held, _ = self._R.info[nr]
        if m != mode:
            return
        eff = self._tt.transition(mode, (), text)
        if eff is None:
            return
        if kind == ROW_QUIET if not eff else (kind == ROW_PENDING and held == text[len(text) - len(held):] and tuple(
                (len(text) - off, st) for _, off, st in eff) == S):
            self._R.learn(mode, i, nr)

    def _learn_split(self, mode: int, i: int, nr: int) -> None:
        """After the engine took quiet mode `mode` to H row `nr` on token `i`, which ends in part of a
        character: remember it when the token's complete characters leave exactly that row's attempts and
        held text (the transition probe says so) and its last bytes are the row's held bytes."""
        data = self._tok_bytes[i]
        text, k = utf_8_decode(data, "replace", False)
        _, m, S, held, hb = self._R.info[nr]
        if m != mode or hb != data[k:] or held != text[len(text) - len(held):]:
            return
        if text:
            eff = self._tt.transition(mode, (), text)
            if eff is None or tuple((len(text) - off, st) for _, off, st in eff) != S:
                return
        elif S:
            return
        self._R.learn(mode, i, nr)

    def _learn_held(self, row: int, i: int, nr: int) -> None:
        """After the engine took H row `row` (mode m, attempts S holding `held`, held bytes hb) to row `nr` on
        token `i`: remember H(m, S, held, hb) -> H(m, S, held, hb + bytes) when the character is still
        incomplete, and -> Q(m) when the bytes complete text that ends every attempt in S without a match
        and leaves none (the transition probe says so)."""
        _, m, S, held, hb = self._R.info[row]
        data = hb + self._tok_bytes[i]
        text, k = utf_8_decode(data, "replace", False)
        if k == 0:
            if self._R.info[nr] == (ROW_HELD, m, S, held, data):
                self._R.learn(row, i, nr)
        elif (nr == m and k == len(data) and text
              and self._tt.transition(m, tuple([st for _, st in S]), text) == ()):
            self._R.learn(row, i, nr)

    def _catch_up(self, b: int, upto: int | None = None, row: int | None = None, buf=None) -> None:
        """Hand stream b's parser the tokens its rows handled since its last own step: their texts, joined
        here (`kernels.join_columns`; joining them later, when the parser next needs its core, costs about
        twice as much), join the parser's deferred text (the core sees it on the parser's next engine step) and
        the parser's token state becomes the row's (`row`, default the stream's current row). `buf`: the ring
        buffer holding those steps (default the current one; a detached stream's may be a kept one)."""
        r = self._r if upto is None else upto
        buf = self._buf if buf is None else buf
        s0 = self._since[b]
        self._since[b] = r
        if s0 < r:  # (the tables took steps since the parser's last one: its F row, if any, is not current)
            self._fseen[b] = None
        if self._frow[b] is not None:  # (the parser runs next: from here on it is not fresh)
            s0 = self._replay_fresh(b, s0, r, buf)
        if s0 >= r:
            return
        data = join_columns(self._R.texts, buf, [b], [s0], r)[0]
        self._deferred(self.parsers[b], data, self._row_now(b) if row is None else row)

    def _row_now(self, b: int) -> int:
        return int(self._rowoff[b]) // self._size

    def _replay_fresh(self, b: int, s0: int, r: int, buf=None) -> int:
        """Stream b's parser has been fed nothing; its deferred tokens (steps `s0`..`r`) began in F row
        ``_frow[b]``. Feed it the text of the tokens up to and including the one that took the stream out of F
        rows (all of them if none did), discarding the events: the tables handed out the same (`_learn_fresh`).
        Returns the step after those tokens; the later ones are deferred text as usual, from the state the
        parser is in now, which is the row those tokens led to. `buf`: the ring buffer holding those steps
        (default the current one)."""
        R = self._R
        info, nxt, V = R.info, R.next, self._size
        buf = self._buf if buf is None else buf
        row = self._frow[b]
        self._frow[b] = None
        text = info[row][3]
        at = s0
        while at < r and info[row][0] == ROW_FRESH:
            for i in buf[at:min(r, at + 16), b].tolist():  # (F rows hold a few tokens: read a few ids)
                at += 1
                if i >= 0:
                    text = info[row][3] + self._tok_text[i]  # (F transitions are learned for such tokens only)
                    row = int(nxt[row * V + i]) // V
                    if info[row][0] != ROW_FRESH:
                        break
        if text:
            self.parsers[b].feed_decoded(text)  # (its decoder stays clean: these tokens' texts are complete)
        return at

    def _deferred(self, p: TokenParser, data, row: int) -> None:
        """Give a stream's parser `p` its deferred tokens' texts joined (`data`: their bytes, for byte-level
        vocabularies, which `TokenParser.decode_deferred` decodes, leaving an incomplete character's bytes in the parser's
        decoder for an H row) and the state of `row`."""
        p.adopt(p.decode_deferred(data) if self._R.bytes_kind else data, self._R.info[row])

    def _catch_up_all(self, r: int) -> None:
        """`_catch_up` for every open stream at once (one `kernels.join_columns` over the whole buffer). Each
        stream's texts reach its parser as one string."""
        since, done, detached = self._since, self.done, self._detached
        todo = [b for b in range(self.n) if not done[b] and since[b] < r and b not in detached]
        if not todo:
            return
        fresh = [b for b in todo if self._frow[b] is not None]
        if fresh:
            self._replay_all_fresh(fresh, r)
        rows = (self._rowoff // self._size).tolist()
        self._catch_up_many(todo, r, [rows[b] for b in todo])

    def _catch_up_many(self, streams: list, r: int, rows: list) -> None:
        """`_catch_up` of `streams` (none in an F row, each with deferred tokens) up to step `r`, each parser
        taking the state of its row in `rows`: their texts joined in one `kernels.join_columns`."""
        since, parsers, deferred = self._since, self.parsers, self._deferred
        texts = join_columns(self._R.texts, self._buf, streams, [since[b] for b in streams], r)
        for b, data, row in zip(streams, texts, rows):
            since[b] = r
            self._fseen[b] = None
            deferred(parsers[b], data, row)

    def _replay_all_fresh(self, streams: list, r: int) -> None:
        """`_replay_fresh` for `streams` before a wrap (or the end): a stream still in an F row has its parser
        fed all its tokens and takes the row of its parser's state."""
        rows = None
        for b in streams:
            self._since[b] = self._replay_fresh(b, self._since[b], r)
            if self._R.info[self._row_now(b)][0] == ROW_FRESH:
                if rows is None:
                    rows = self._rowoff.copy()
                rows[b] = self._row_of(self.parsers[b]) * self._size
        if rows is not None:
            self._set_rows(rows)

    def _wrap(self) -> None:
        self._catch_up_all(self._r)
        if self._whole or self._detached:  # (their tokens in this buffer are still to be read)
            if not self._hist:
                self._hist0 = self._wraps
            self._hist.append(self._buf)
        self._wraps += 1
        self._since = [0] * self.n
        self._r = 0
        self._new_buffer()  # (earlier steps' events keep views of the old one)

    # -- detached streams (steps taken with ``events=False``) ---------------------------------------------------
    def _ids_since(self, b: int, g: int) -> np.ndarray:
        """Stream b's ids from global step `g` to now (the kept buffers, then the ring buffer), inactive steps
        left out."""
        cap = self._cap
        k0 = g // cap
        parts = [self._hist[k - self._hist0][:, b] for k in range(k0, self._wraps)]
        parts.append(self._buf[:self._r, b])
        col = np.concatenate(parts)[g - k0 * cap:] if len(parts) > 1 else parts[0][g - k0 * cap:]
        return col[col >= 0]

    def _attach(self, streams: list) -> None:
        """Detached `streams` (see `step`) run their parsers again: each parser takes the text of the tokens
        the row tables took before it stopped (as `_catch_up` would have handed it over there), then the
        stream's tokens since in one `feed_tokens` call (their events dropped: they belong to steps taken
        without events; an exception leaves the parser failed, and its later calls say so, as they would
        have), and the stream takes the row of its parser's state. The kept buffers go once nothing needs
        them."""
        rows = self._rowoff.copy()
        V, r, cap = self._size, self._r, self._cap
        for b in streams:
            # detached in wrap w at step rd of its buffer, from row prev, its parser behind since step s0 (the
            # tokens the tables took, as `_catch_up` hands them over), then one token at a time
            w, s0, rd, prev = self._detached.pop(b)
            p = self.parsers[b]
            self._since[b] = s0
            self._catch_up(b, rd, prev, self._buf if w == self._wraps else self._hist[w - self._hist0])
            self._fseen[b] = None
            ids = self._ids_since(b, w * cap + rd)
            if ids.size:
                try:
                    p.feed_tokens(ids)
                except Exception:  # noqa: BLE001 (see above: the parser keeps it)
                    pass
            p.hold_pure = False
            self._since[b] = r
            rows[b] = self._row_of(p) * V
        self._set_rows(rows)
        self._release_buffers()

    def _release_buffers(self) -> None:
        """The kept ring buffers go once no detached stream and no one-shot end can need them."""
        if not self._detached and not self._whole:
            self._hist = []

    def _texts_of(self, streams: list) -> list:
        """The decoded text of each of `streams`' whole generations (every buffer kept: `_whole`), as
        `TokenBinding.decode` gives it (`VocabBase.decode`): the tokens' bytes joined in one pass over each
        buffer (`join_columns`; a skipped token's are none), decoded, then what `decode` does to the whole
        (the first token's Metaspace text, the leading strip and clean-up: `VocabBase.finish_decoded`).
        ``pieces`` vocabularies: a token's bytes are its text's UTF-8, or a ByteFallback token's byte; `decode`
        decodes each run of byte tokens on its own, strictly (else U+FFFD per byte), and a token's text is
        complete UTF-8, so the joined bytes decode strictly exactly where every run does, to the same text;
        a stream where they do not (it holds byte tokens) takes `VocabBase.decode`'s loop."""
        v, R = self.binding.vocab, self._R
        bufs = self._hist + [self._buf]
        stops = [self._cap] * len(self._hist) + [self._r]
        zeros = [0] * len(streams)
        texts = R.texts if R.bytes_kind else R.piece_bytes()
        pieces = [join_columns(texts, buf, streams, zeros, stop) for buf, stop in zip(bufs, stops) if stop]
        out = []
        first_text, tok_text = v.first_text, v.tok_text
        for b, ps in zip(streams, zip(*pieces) if pieces else [()] * len(streams)):
            data = b"".join(ps)
            if R.bytes_kind:
                text = data.decode("utf-8", "replace")
            else:
                try:
                    text = data.decode("utf-8")
                except UnicodeDecodeError:  # (some run of byte tokens is not UTF-8 on its own)
                    out.append(v.decode(self._ids_since(b, 0).tolist()))
                    continue
            if first_text:
                i = self._first_id(b, bufs, stops)
                first = first_text.get(i) if i is not None else None
                if first is not None:  # (the tokens before it are skipped ones: their text is empty)
                    text = first + text[len(tok_text[i]):]
            out.append(v.finish_decoded(text))
        return out

    def _first_id(self, b: int, bufs: list, stops: list) -> int | None:
        """Stream b's first id that `VocabBase.decode` keeps (active, not skipped), or None."""
        skip = self.binding.vocab.skip
        for buf, stop in zip(bufs, stops):
            col = buf[:stop, b]
            col = col[col >= 0]
            col = col[~skip[col]]
            if col.size:
                return int(col[0])
        return None

    def _end_detached(self, streams: list) -> dict:
        """The messages of detached `streams`, ended without events: ``CompiledTemplate.parse`` of each one's
        decoded generation where the one-shot path gives its parser's message (`_oneshot`, `_whole`); where
        it raises, or does not apply, the stream's parser takes its tokens (`_attach`) and ends (raising
        what it raises). Returns {stream: message}."""
        out = {}
        if self._oneshot and self._whole:
            parse = self.binding.compiled.parse
            with collector_paused():  # (the messages: new containers, not garbage)
                for b, text in zip(streams, self._texts_of(streams)):
                    try:
                        out[b] = parse(text, prefix=self._prefixes[b])
                    except Exception:  # noqa: BLE001 (its parser says what, below)
                        pass
        return out

    def _new_buffer(self) -> None:
        self._buf = np.empty((self._cap, self.n), dtype=np.int64)
        self._ubuf = self._buf.view(np.uint64)

    def __repr__(self) -> str:
        names = [f["name"] for f in self.binding.compiled.spec["fields"]]
        d = self.parsers[0].dialect
        return (f"<TokenStreams {self.n} streams ({self.n - sum(self.done)} open) fields={names} "
                f"vocab={self.binding.vocab.size} ids dialect={d.name if d.name != 'custom' else d!r}>")

    def finalize(self, b: int, *, events: bool = True):
        """End stream `b`; returns its `(message, final_events)`, or with ``events=False`` its message alone
        (a detached stream may then not run its parser: see `step`). Later steps must mark it inactive."""
        ended = self._end_detached([b]) if not events and b in self._detached else {}
        if b in ended:
            del self._detached[b]
            self._one_shot_ended.add(b)
            self._release_buffers()
        else:
            if b in self._detached:
                self._attach([b])
            self._catch_up(b)
        self.done[b] = True
        rows = self._rowoff.copy()
        rows[b] = self._none * self._size
        self._set_rows(rows)
        if b in ended:
            return ended[b]
        out = self.parsers[b].finalize()
        return out if events else out[0]

    def finalize_all(self, *, events: bool = True) -> list:
        """End every stream not yet finalized; returns their `(message, final_events)` (None for ended ones),
        or with ``events=False`` their messages (detached streams may then not run their parsers: see
        `step`). Raises the first failing stream's exception."""
        ended = {}
        if self._detached:
            if not events:
                ended = self._end_detached(sorted(self._detached))
            self._attach([b for b in sorted(self._detached) if b not in ended])
        self._catch_up_all(self._r)
        # every parser is up to date: NONE (the parser decides) is right for every stream from here on
        self._set_rows(np.full(self.n, self._none * self._size, dtype=self._R.dtype))
        self._detached.clear()
        self._hist = []
        out = []
        with collector_paused():  # (every stream's message and events: new containers, not garbage)
            for b in range(self.n):
                if self.done[b]:
                    out.append(None)
                    continue
                self.done[b] = True
                if b in ended:
                    self._one_shot_ended.add(b)
                    out.append(ended[b])
                else:
                    r = self.parsers[b].finalize()
                    out.append(r if events else r[0])
        return out

    def parser(self, b: int) -> TokenParser:
        """Stream b's TokenParser, brought up to date (e.g. to read `_output`). A stream ended without events
        whose message came from the one-shot parse has none: ValueError."""
        if b in self._one_shot_ended:
            raise ValueError(f"stream {b} ended without events and its message came from the one-shot parse of "
                             "its generation: its parser never took its tokens")
        if b in self._detached:
            self._attach([b])
        if self._frow[b] is not None:
            self._replay_all_fresh([b], self._r)
        self._catch_up(b)
        return self.parsers[b]
