"""`TokenParser`: one generation parsed from token ids, with per-token fast paths and optional token spans.

Guarantees:

* ``feed_tokens(ids)`` with one id or many returns exactly the events that feeding the newly decoded text to
  `chatparse.ResponseParser` returns, and ``finalize()`` the same ``(message, final_events)``. The text is
  what the tokenizer's own ``decode`` gives for the ids so far (see `decode`).
* The parser core (`StreamParser`) always ends in the state that feeding the decoded text gives: every fast
  path either hands the core the same text later (its events already returned) or, for a token that is a
  whole delimiter, goes through the core's public `StreamParser.apply_delimiter`.
* With ``spans=True`` (opt-in, so that default events stay identical to the reference) every region and
  delimiter carries its character offsets in the decoded generation and the range of token indexes that
  produced them (``[first, last + 1)``), on ``region_open`` / ``region_close`` events and as ``parser.spans``.

Why the fast paths exist (cost per token): while the scanner is quiet (no delimiter attempt pending), the
decoder holds nothing and a region is open, a token that cannot start a delimiter in the current mode
(*inert*, from the per-mode token table) is one list lookup and one event. A token whose effect on the
pending attempts is known (a token ending in whitespace before a ``\\s*</think>`` close, the token after it, a
character completed across tokens) is a cached table entry and a little bookkeeping, without the character
engine. A token that is a whole delimiter by itself (a special token ``<think>``, ``<|im_end|>``...) switches
region in one step. Inside a region that closes where its JSON value ends (``close_json_end``), whose tracker
must read every character, an inert token's text goes to the core as it is, past the decoder and the general
path. Any other token runs through the character engine for that token's text alone.
"""

from __future__ import annotations

from codecs import utf_8_decode

from ..stream.dialect import resolve
from ..values.json_end import JSON_END
from ..stream.parser import StreamParser, feed_prompt, joined
from ..stream.scanner import Scanner, copy_slots
from .binding import TokenBinding, token_binding
from .decode import _Decoder, _ids_list, _out_of_range
from .tables import (ROW_HELD, ROW_MATCH, ROW_NONE, ROW_PENDING, ROW_QUIET, attempt_of, attempt_record,
                           undecided)

__all__ = ["TokenParser"]

_KEEP = object()  # `TokenParser.fork`: the tools stay


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

    def __init__(self, tables, tool_params_, owner, dialect):
        super().__init__(tables, tool_params_, dialect)
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

    def _open(self, fi: int, m, events: list, s: int, e: int) -> None:
        self.scanner.decided = None
        super()._open(fi, m, events, s, e)
        self.region_start = e
        self.open_span = (s, e)
        self.owner._on_open(events[-1], (s, e))

    def _close(self, events: list, s: int, e: int) -> None:
        fi, opened = self.current, self.opened
        d = self.scanner.decided
        close = None
        if d is not None:
            end = d[0]
            if d[2] == JSON_END or self.t.patterns[d[2]].kind == "close":  # (JSON_END: close_json_end)
                close = (d[0], d[1])
                self.scanner.decided = None
        else:
            end = self.scanner.end
        n = len(events)
        super()._close(events, s, e)
        if fi is not None and opened:
            rec = {"field": self.t.fields[fi]["name"], "open": self.open_span, "body": (self.region_start, end),
                   "close": close}
            # (the region's own closing event: on_error="content" appends the recovered text's events after it)
            ev = next((x for x in events[n:] if x["type"] in ("region_close", "region_malformed")), None)
            self.owner._on_close(ev, rec)
        self.region_start = None
        self.open_span = None



# --------------------------------------------------------------------------------------------------------------
# One stream
# --------------------------------------------------------------------------------------------------------------
class TokenParser:
    """Streaming parser for one generation, fed token ids. See the module docstring.

    ``TokenParser(binding, prefix=... | prefix_ids=..., tools=None, spans=False)``, or
    ``binding.parser(...)``.

    How the work is split: the parser core (`StreamParser`) receives text through ``feed`` only (whole-
    delimiter tokens excepted, see `StreamParser.apply_delimiter`); the token paths below hand out the events themselves
    and keep the text they handed out in ``_tail``, which reaches the core (as one ``feed``, whose events are
    dropped: they are the ones already handed out) the next time the core is needed. So the core's state is
    always exactly what feeding the decoded text gives, whatever the core does inside.

    * fast: quiet scanner, open region, nothing held: an inert token is one table lookup (`feed_tokens`);
    * lazy transitions: text whose effect on the undecided attempts is known (`TokenTables.transition`, e.g. a
      token ending in whitespace before a ``\\s*</think>`` close, the token after it, or the text a token
      completes after bytes of a split character) is handled from ``_pend`` = (attempts as (characters back
      from the end, DFA state), the text they hold), without the core. Once worked out for a token from a
      state (mode, attempts) with the decoder clean, the outcome is cached in that state's shared
      `TokenTablesBase.lazy_row` (``_lrow``), and `feed_tokens` serves it inline: a dict lookup, a slice
      and one event, with no decoder and no probe (what keeps code/HTML, dense with '<', newlines and
      indentation before ``\\s*`` delimiters, near the cost of inert tokens);
    * a token that is a whole delimiter switches region in one step (`StreamParser.apply_delimiter`);
    * everything else: decoded text to the core's ``feed``.
    """

    # Every attribute is a slot. Parsers are made by the hundred (`TokenStreams`) and their attributes are read
    # on every Python step: a plain instance with over 30 attributes (this class has 33) loses CPython 3.11's
    # shared-key inline values for a dict of its own (~800 more bytes per parser, and slower attribute reads).
    # The core, its scanner and the decoder are slotted too. `__dict__` stays so that one instance's method can
    # still be wrapped (a test spy, a debugger); `test_hot_objects_keep_every_attribute_in_slots` checks that no
    # attribute of a running parser lands there.
    __slots__ = ("_b", "_bytes_kind", "_core", "_cut", "_dec", "_delims", "_dirty", "_fast", "_fdirty", "_first_re",
                 "_fname", "_history", "hold_pure", "_lazy_ok", "_lrow", "_mheld", "_mode", "_mode_index", "_names",
                 "_never", "_opening", "_pbase", "_pend", "_records", "_sink", "_size", "_spans_on", "_tab", "_tail",
                 "_tail_append", "_tok_text", "_tt", "_jtab", "dialect", "initial_events", "__dict__")

    def __init__(self, binding: TokenBinding, *, prefix: str | None = None, prefix_ids=None, tools=None,
                 spans: bool = False, dialect=None, offsets: bool | None = None, malformed: str | None = None):
        if not isinstance(binding, TokenBinding):
            if getattr(binding, "_token_binding", None) is not None or "tokens" in (
                    getattr(binding, "raw_tables", None) or {}):
                binding = token_binding(binding)  # a CompiledTemplate loaded with token tables
            else:
                raise TypeError("TokenParser takes a TokenBinding: chatparse.bind(template, "
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
        d = self.dialect = resolve(dialect, offsets=offsets, malformed=malformed)
        core = _SpanCore(tables, tp, self, d) if spans else StreamParser(tables, tp, d)
        self._core = core
        self._records: list = []
        self._dec = _Decoder(vocab, track=spans)
        self.initial_events: list[dict] = []
        cut = tables.cut_prefix(prefix) if prefix else ""
        self._pbase = len(cut)
        self._cut = cut  # (what the core's state at the start is a function of: `TokenStreams` fresh rows)
        self.initial_events = feed_prompt(core, cut, d)
        self._tt = tt
        self._never = tt.never
        self._fast = tt.fast
        self._delims = tt.delims
        self._mode_index = tt.mode_index
        self._names = tt.field_names
        self._dirty = tables.dirty
        self._first_re = [m.first_re for m in tables.modes]
        self._history = tables.history
        self._tok_text = vocab.tok_text
        self._bytes_kind = vocab.kind == "bytes"
        self._tail: list = []
        self._tail_append = self._tail.append
        self._tab = self._never
        self._mode = 0
        self._pend = None  # lazy pending attempts: (((chars back from the end, state), ...), held text)
        self._sink = False  # the current "region" is the null sink (no implicit field)
        self._opening = False  # the implicit field opens with the next text
        self._lazy_ok = False  # the transition table applies (quiet or `_pend`, open region, decoder clean)
        self._lrow = None  # cached lazy transitions from the current state (see `_refresh`), or None
        self._jtab = None  # in a close_json_end region, the texts of tokens `_json_token` takes (`_refresh`)
        self._fname = None
        self._fdirty = False
        self.hold_pure = False  # the last `_feed_known` was a pure "H" outcome (`TokenStreams` reads and clears it)
        self._mheld = None  # (held text, attempt records) for the core at the end of `_tail` (`_hold_at_end`)
        self._refresh()

    def fork(self, *, tools=_KEEP) -> "TokenParser":
        """An independent parser in this one's state: feeding or finalizing either leaves the other as it was.
        With `tools` (a list of tools or None), the copy types tool-call arguments by those tools instead.

        What a per-model prototype is for: the state after a prompt's cut prefix depends only on that text,
        so a server builds it once (`chatparse.integrations.vllm`) and forks it per request, at a fraction of
        the cost of building a parser. The tables, token tables and vocabulary are shared (they never change);
        everything a step changes is copied (the core with its `input_text`, the decoder, the deferred text).
        Not with spans=True (the span records belong to their parser)."""
        if self._spans_on:
            raise ValueError("fork() is not available with spans=True")
        c = copy_slots(self)
        core = c._core = self._core.fork(keep_input=True)
        if tools is not _KEEP:
            core.tool_params = self._b.tool_params(tools)
        c._dec = self._dec.fork()
        c._records = []
        c._tail = list(self._tail)
        c._tail_append = c._tail.append
        c.initial_events = [dict(ev) for ev in self.initial_events]
        return c

    # -- the hot path ------------------------------------------------------------------------------------------
    def feed_tokens(self, ids) -> list[dict]:
        """Feed the next token id (an int) or ids (a sequence, numpy array or tensor); returns the events."""
        try:
            s = self._tab[ids]
        except (TypeError, IndexError):
            return self._feed_general(ids)
        if s is None:
            lrow = self._lrow
            if lrow is not None:
                hit = lrow.get(ids)
                if hit is not None:
                    # A cached lazy transition (see `_general`), inlined: hit = (attempts after the token,
                    # the next state's cache, how many characters of held text + token text are released,
                    # the token table of the state reached). `_lrow` is None while the decoder holds
                    # anything, and only tokens whose text is complete on their own are cached, so the
                    # decoded text is ``tok_text[ids]``. Equivalent to `_apply_lazy`.
                    text = self._tok_text[ids]
                    self._tail_append(text)
                    S, self._lrow, keep, tab = hit
                    pend = self._pend
                    if pend is not None:
                        text = pend[1] + text
                    back = len(text)  # (the released text starts this far back from the end handed out)
                    if S:
                        self._pend = (S, text[keep:])
                        text = text[:keep]
                        self._tab = tab  # `never`
                        if not text or self._sink:
                            return []
                    else:
                        self._pend = None
                        if self._sink:
                            return []
                        self._tab = tab  # quiet, region open (with this text), decoder clean: inert tokens
                    ev = {"type": "region_chunk", "field": self._fname, "text": text, "dirty": self._fdirty}
                    if self._opening:
                        self._opening = False
                        return [self._open_event(back), ev]
                    return [ev]
            jtab = self._jtab
            if jtab is not None:
                text = jtab[ids]
                if text is not None:
                    return self._json_token(text)
            return self._feed_general(ids)
        self._tail_append(s)
        return [{"type": "region_chunk", "field": self._fname, "text": s, "dirty": self._fdirty}]

    def _json_token(self, text: str) -> list[dict]:
        """The events of a token whose text is `text`, complete and inert in the mode (`_jtab`), inside a
        close_json_end region: the core takes the text as it is (its JSON tracker must read every character;
        no character can begin a delimiter, so it takes `StreamParser.feed`'s JSON fast path), skipping the
        decoder and the general path, which would only find the decoder clean and the text its own. The token
        paths are recomputed unless the step left the state `_refresh` set them from (the same tracker, still
        open; nothing pending; text only)."""
        core = self._core
        je = core.json_end
        try:
            events = core.feed(text)
        except BaseException:
            self._jtab = None  # (the core failed: the general path reports it from now on)
            raise
        sc = core.scanner
        if core.json_end is not je or sc.attempts or sc.scan != sc.end or any(
                ev["type"] != "region_chunk" for ev in events):
            self._refresh()
        return events

    def feed_inert(self, token_id: int) -> str | None:
        """Feed `token_id` if it is inert here (its text streams as one chunk of the open region, `open_field`,
        and nothing else happens) and return that text; else feed nothing and return None (`feed_tokens`
        then feeds it). For a caller that builds its own output from the chunk: ``feed_inert(i)`` returning
        ``t`` is exactly ``feed_tokens(i)`` returning ``[region_chunk(open_field, t)]``, without the event."""
        try:
            s = self._tab[token_id]
        except (TypeError, IndexError):
            return None
        if s is not None:
            self._tail_append(s)
        return s

    @property
    def open_field(self) -> str | None:
        """The field whose region the next inert token's text streams in (see `feed_inert`)."""
        return self._fname

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
        self._lazy_ok = False
        self._lrow = None
        self._jtab = None
        self._pend = None
        rest = self._dec.finish()
        events = core.feed(rest) if rest else []
        message, final = core.finish()
        return message, events + final

    # -- state -------------------------------------------------------------------------------------------------
    @property
    def input_text(self) -> str:
        """The cut prefix, then the text of every id fed (as `chatparse.ResponseParser.input_text`; bytes of
        a character still split across tokens are not text yet). Kept only in a dialect with
        ``input_text=True`` (the "vllm" preset)."""
        return self._core.input_text() + self._deferred_text()

    @property
    def spans(self) -> list[dict]:
        """With spans=True: one record per closed region, in order (field, open, body, close)."""
        if not self._spans_on:
            raise ValueError("token spans are off; create the parser with spans=True")
        return list(self._records)

    @property
    def _output(self) -> dict:
        self._sync()
        return joined(self._core.output)

    def _refresh(self) -> None:
        """Recompute the token paths from the core's state (after the core has run)."""
        core = self._core
        sc = core.scanner
        self._mode = m = self._mode_index[id(sc.mode)]
        self._tab = self._never
        self._pend = None
        self._lazy_ok = False
        self._lrow = None
        dec = self._dec
        mode = sc.mode
        self._jtab = None
        if core.json_end is not None:  # (a close_json_end region: its tracker reads every character)
            if (not self._spans_on and core.usable and not core.stalled and core.opened and core.current is not None
                    and not sc.attempts and sc.scan == sc.end and sc.pos >= core.prompt_end and dec.clean()
                    and self._mheld is None and not self._tail):
                self._jtab = self._fast[m]  # (`_json_token`: the inert tokens' texts)
            return
        if (self._spans_on or core.stalled or core.failed is not None or core.finished
                or sc.scan != sc.end or getattr(core, "pending", None) or dec.first or dec.strip_left
                or dec.cleanup is not None or self._first_re[m] is None
                or not (sc.end or mode.start0 == mode.startN)):  # the transition probe starts past offset 0
            return
        f = core.current
        self._sink = f is None  # no implicit field: text outside regions is dropped
        self._opening = f is not None and not core.opened  # the implicit region opens on its first text
        if sc.pos < core.prompt_end:  # (no prompt text held at the prompt's end: the core hands it out)
            return
        if f is not None:
            self._fname = self._names[f]
            self._fdirty = self._dirty[f]
        attempts = sc.attempts
        if attempts:
            if not undecided(attempts, sc.mode) or sc.pos != attempts[0].start:
                return
            end = sc.end
            S = tuple([(end - a.start, a.state) for a in attempts])
            self._pend = (S, sc.text[sc.pos - sc.base:])
            self._lazy_ok = True
            if not dec.held and not dec.run:
                self._lrow = self._tt.lazy_row(m, S)
            return
        self._lazy_ok = True
        if not dec.held and not dec.run:
            self._lrow = self._tt.lazy_row(m, ())
            if core.opened and f is not None:
                self._tab = self._fast[m]

    def _sync(self, tracked: bool = True) -> None:
        """Give the core the text the token paths handed out (its events were already returned).

        With `tracked` (the token state describes where that text left the attempts: the token paths
        maintain it), the text before the attempts' held text is known to hold no delimiter and to end every
        attempt that started before it without a match, so the core appends it without stepping the
        automaton (`StreamParser.feed_plain`) and steps only the held text, which starts the same attempts
        again. Without `tracked`, or if the held text is not the end of that text, the core steps all of it.
        After `_hold_at_end`, the core takes the held text with the attempts it was given there."""
        if self._mheld is not None:
            mheld = self._mheld
            self._mheld = None
            if tracked and not self._spans_on:
                self._restore_held(*mheld)
                return
        if self._tail:
            text = self._deferred_text()
            self._tail.clear()
            core = self._core
            if not tracked or self._spans_on:
                core.feed(text)
                return
            pend = self._pend
            if pend is None:
                core.feed_plain(text)
                return
            held = pend[1]
            k = len(text) - len(held)
            if k > 0 and text.endswith(held):
                core.feed_plain(text[:k])
                core.feed(held)
            else:
                core.feed(text)

    def probe(self, text: str) -> list[dict]:
        """The events that feeding `text` now would return, without changing this parser: its text so far
        reaches the parser core, and a fork of the core (`StreamParser.fork`) takes `text`. Bytes of a
        character still split across tokens are not text yet: `text` follows the text before them.

        For questions about the end of the text so far, as vLLM's reasoning-end check asks with a NUL
        (`chatparse.integrations.vllm`); feed the text to continue."""
        if self._spans_on:
            raise ValueError("probe() is not available with spans=True")
        core = self._core
        core._check_usable()
        self._sync()
        self._refresh()
        return core.fork().feed(text)

    @property
    def input_length(self) -> int:
        """``len(input_text)``, kept in every dialect and without joining the text."""
        core = self._core
        if self._mheld is None and core.usable and not core.stalled:
            # what `_sync` would give the core (its scanner's end grows by exactly the deferred text's length
            # while it is usable and not stalled), without running the core now: the token paths stay as they
            # are, and the text reaches the core at its next step as before
            tail = self._tail
            return core.scanner.end + (len(tail[0]) if len(tail) == 1 else len(self._deferred_text()))
        self._sync()
        self._refresh()
        return self._core.scanner.end

    @property
    def held_from(self) -> int:
        """Offset (in `input_text` coordinates) of the first character not handed out yet: the text from here
        on is held as a possible delimiter (and bytes of a split character are not text yet)."""
        self._sync()
        self._refresh()
        return self._core.scanner.pos

    # -- the general path ----------------------------------------------------------------------------------------
    def _feed_general(self, ids) -> list[dict]:
        try:
            return self._general(ids)
        except BaseException:
            # the core failed (or the ids were bad): no fast path may hand out events any more until the
            # state is recomputed, from a core that has all the text handed out (stepped: the token state
            # may not describe it any more)
            self._tab = self._never
            self._lazy_ok = False
            self._lrow = None
            self._jtab = None
            self._pend = None
            core = self._core
            if core.failed is None and not core.finished:
                try:
                    self._sync(tracked=False)
                except BaseException:
                    pass  # the core is failed now, and later calls say so
                else:
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
        if self._mheld is not None and len(ids) == 1:
            # `_hold_at_end` left the core's held text and attempts to be restored: a decision over that text
            # and this token's does not need them (the scanner would drop them at once)
            return self._feed_text(self._dec.feed(ids))
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
                lrow = self._lrow  # not None: the decoder holds nothing, so a complete token is its own text
                text = dec.feed(ids)
                if dec.held or dec.run:
                    self._tab = self._never
                    self._lrow = None
                if not text:
                    return []
                pend = self._pend
                eff = self._tt.transition(self._mode, tuple([st for _, st in pend[0]]) if pend else (), text)
                if eff is not None:
                    S = self._next_attempts(text, eff)
                    nxt = None
                    if not dec.held and not dec.run:
                        nxt = self._tt.lazy_row(self._mode, S)
                        if lrow is not None and text == self._tok_text[i]:
                            # the same token from the same (mode, attempts) always does the same: cache it
                            # (the held text is as long as the first attempt is back from the end)
                            n = (pend[0][0][0] if pend else 0) + len(text)
                            lrow[i] = (S, nxt, n - S[0][0], self._never) if S else (S, nxt, n,
                                                                                    self._fast[self._mode])
                    return self._apply_lazy(text, S, nxt)
                return self._feed_text(text)  # (`_lazy_ok`: no first-token, strip or clean-up state is left)
        self._sync()
        if core.stalled:
            core.feed(self._dec.feed(ids))  # nothing more is parsed; the input is still kept (input_text)
            return []
        sc = core.scanner
        if (len(ids) == 1 and not self._spans_on and not sc.attempts and sc.scan == sc.end
                and self._dec.clean() and core.json_end is None):
            d = self._delims[self._mode].get(ids[0])
            if d is not None:
                text = self._tok_text[ids[0]]
                if not sc.end:
                    # at offset 0 (the first token of a stream with no prompt text after the start anchor),
                    # where ``^`` and lookbehinds see no text before: the table's entry holds if the scanner's
                    # own decision at the start (cached per mode) is that same whole delimiter
                    out = self._tt.decision(self._mode, "", True, text)
                    if out is None or out[0] != "D" or out[1] != 0 or out[2] != len(text) or out[3] != d[0]:
                        return self._feed_text(self._dec.feed(ids))
                    d = out[3:]
                events = core.apply_delimiter(text, *d)  # d: (pattern index, captures or match)
                self._refresh()
                return events
        return self._feed_text(self._dec.feed(ids))

    def _feed_text(self, text: str) -> list[dict]:
        """The events of `text`, just decoded (by the decoder, or, for `TokenStreams`, from tokens whose texts
        are complete on their own while it holds nothing): from a cached decision where there is one, else
        through the core."""
        if text and not self._spans_on and self._dec.clean():
            events = self._feed_known(text)
            if events is not None:
                return events
        self._sync()
        events = self._core.feed(text) if text else []
        self._refresh()
        return events

    def _feed_known(self, text: str) -> list[dict] | None:
        """The events of `text` (decoded, the decoder holding nothing) where `TokenTablesBase.decision`
        knows what the core's scanner does with its undecided text plus `text`: a delimiter, or a match it
        must wait on; None (nothing done) otherwise.

        The undecided text starts where the last decision or released text ended: the held text of the
        lazy pending attempts (`_pend`), or the core's own pending attempts, or nothing. The text before it
        (deferred by the token paths, which tracked it; or held by attempts of the core that the token paths
        know to have died) reaches the core as plain text; the undecided text
        and `text` then go in with the decision (`StreamParser.feed_decided`, `feed_held`), so the automaton
        does not step them. Same events and state as the `_sync` and ``core.feed(text)`` it replaces:
        feeding held text alone releases nothing and decides nothing (that is what makes it held)."""
        core = self._core
        if core.json_end is not None:
            return None  # (a close_json_end region: the decision tables do not know where its value ends)
        sc = core.scanner
        deferred = self._deferred_text()
        n_core = sc.end
        pend = self._pend
        if pend is not None:
            at = n_core + len(deferred) - len(pend[1])
        elif self._mheld is not None:
            held = self._mheld[0]
            if len(held) > len(deferred) or not deferred.endswith(held):
                return None
            at = n_core + len(deferred) - len(held)
        elif self._lazy_ok:
            at = n_core + len(deferred)
        elif not deferred and sc.scan == n_core and (sc.attempts[0].start if sc.attempts else n_core) == sc.pos:
            at = sc.pos
        else:
            return None
        if at < n_core and at != sc.pos:
            return None
        lo = at - self._history
        at_start = lo <= 0
        lo = max(lo, 0)
        base = sc.base
        if lo < base and lo < n_core:
            return None  # (the core no longer keeps those characters)
        if at >= n_core:
            k = at - n_core
            held = deferred[k:]
            before = deferred[lo - n_core:k] if lo >= n_core else sc.text[lo - base:] + deferred[:k]
        else:
            held = sc.text[at - base:] + deferred
            before = sc.text[lo - base:at - base]
        out = self._tt.decision(self._mode, before, at_start, held + text)
        if out is None:
            return None
        self._tail.clear()
        self._mheld = None
        # everything before `at` is region text (the token paths returned its events)
        plain = deferred[:at - n_core] if at > sc.pos else None
        new = (deferred if at < n_core else held) + text  # what the core has not received yet
        if out[0] == "D":
            _, s, e, pi, m = out
            events = core.feed_decided(new, at + s, at + e, pi, m, plain)
        else:
            if plain is not None:
                core.feed_plain(plain)
            events = core.feed_held(new, [attempt_of(r, at) for r in out[1]])
            self.hold_pure = out[2]
        self._refresh()
        return events

    def _deferred_text(self) -> str:
        """The text the token paths handed out and the core has not received yet (`_tail`), joined; the tail
        keeps it as one piece until the caller clears it."""
        tail = self._tail
        if len(tail) > 1:
            tail[:] = ["".join(tail)]
        return tail[0] if tail else ""

    def _hold_at_end(self, held: str, records: tuple) -> None:
        """Take the state `TokenStreams` kept as a row: everything fed so far decided up to the last
        ``len(held)`` characters of the deferred text, which the attempts `records` (`attempt_record`,
        offsets from their start) hold, a match among them that the core must wait on. The core is brought
        there when it next runs (`_sync`: `_restore_held`), unless the next token's decision over the held text
        and its own (`_feed_known`) makes those attempts moot: qwen3's ``\\n</think>\\n\\n`` then a word."""
        self._mheld = (held, records)
        self._tab = self._never
        self._lazy_ok = False
        self._lrow = None
        self._pend = None

    def _restore_held(self, held: str, records: tuple) -> None:
        """Bring the core to the state `_hold_at_end` describes: the text before the held text is region text
        that the token paths already returned; the core takes it plain and the held text with those attempts,
        without stepping (else, if its own state does not line up with them, it steps the deferred text
        itself)."""
        core = self._core
        sc = core.scanner
        deferred = self._deferred_text()
        self._tail.clear()
        k = len(deferred) - len(held)
        if k >= 0 and deferred.endswith(held):
            at = sc.end + k
            if at > sc.pos:
                core.feed_plain(deferred[:k])
            core.feed_held(held, [attempt_of(r, at) for r in records])
        else:
            core.feed(deferred)
        self._refresh()

    def _open_event(self, back: int) -> dict:
        """The implicit field's ``region_open``, handed out by a token path with the first text of the region,
        which starts `back` characters before the end of the text handed out so far: the core's event
        (`StreamParser._implicit_open`), with its offsets where the dialect has them."""
        core = self._core
        return core._implicit_open(core.current,
                                   core.scanner.end + len(self._deferred_text()) - back if core.offsets else 0)

    def _next_attempts(self, text: str, eff) -> tuple:
        """The undecided attempts after `text` (``eff`` from `TokenTables.transition`), as (characters back
        from the end, DFA state), oldest first."""
        L = len(text)
        pend = self._pend
        if pend is not None:
            old = pend[0]
            return tuple([(old[j][0] + L, st) if j >= 0 else (L - off, st) for j, off, st in eff])
        return tuple([(L - off, st) for _, off, st in eff])

    def _apply_lazy(self, text: str, S: tuple, nxt) -> list[dict]:
        """Apply a known transition (see `TokenTables.transition`) without the core: `text` is the decoded
        text, `S` the undecided attempts after it (`_next_attempts`), `nxt` the cached transitions of the
        state reached (None while the decoder holds bytes). The release point is the start of the first
        surviving attempt; the text reaches the core later (``_tail``)."""
        pend = self._pend
        text_all = pend[1] + text if pend is not None else text
        self._tail_append(text)
        self._lrow = nxt
        if S:
            keep = len(text_all) - S[0][0]
            out = text_all[:keep]
            self._pend = (S, text_all[keep:])
            self._tab = self._never
        else:
            out = text_all
            self._pend = None
        if not out or self._sink:
            return []
        events = [{"type": "region_chunk", "field": self._fname, "text": out, "dirty": self._fdirty}]
        if self._opening:
            self._opening = False
            events.insert(0, self._open_event(len(text_all)))
        if not S and not self._dec.held and not self._dec.run:  # quiet, region open, decoder clean
            m = self._mode
            self._tab = self._fast[m]
        return events

    # -- what `TokenStreams` reads and sets ---------------------------------------------------------------------
    # `TokenStreams` keeps each stream's state as a row of shared tables and runs the stream's parser only where
    # the tables do not know the next token. These methods are all it uses of a parser besides `feed_tokens`,
    # `finalize`, `initial_events` and `hold_pure`: a state read as a row key (`row_key`, `fresh_start`,
    # `deferrable`), and the text and state of tokens the tables took without the parser (`adopt`,
    # `decode_deferred`, `feed_decoded`). Row keys are `_Rows.info` tuples (``(kind, mode, ...)``, kinds
    # `tables.ROW_*`).

    def deferrable(self) -> bool:
        """Whether tokens can be taken without this parser from its state: the decoder holds nothing and the
        core is usable and not stalled."""
        core = self._core
        return self._dec.clean() and not core.stalled and core.usable and core.json_end is None

    def fresh_start(self):
        """For a parser fed nothing since it was created: ``(mode, cut prefix)``, what its state is a function of
        (streams with the same one share an F row), or None where its tokens cannot be deferred (spans on, or
        not `deferrable`)."""
        if self._spans_on or not self.deferrable():
            return None
        return self._mode, self._cut

    def row_key(self):
        """This parser's state as a row key: its mode (an int) when quiet with its fast table, or quiet in the
        null sink (the Q row of that mode); ``(ROW_PENDING, mode, attempts, held text, b"")`` with undecided
        match-free attempts (in a region or in the sink); ``(ROW_HELD, mode, attempts, held text, held bytes)``
        while a byte-level decoder holds part of a character; ``(ROW_MATCH, mode, attempt records, held text,
        b"")`` when the core holds attempts with a match it must wait on (`attempt_record`); None where only the
        parser can take the next token."""
        if self._tab is not self._never:
            return self._mode
        dec = self._dec
        if not self._lazy_ok:
            return None if self._tail else self._match_key()
        if self._opening or dec.run:
            return None
        if dec.held:  # the decoder holds part of a character
            if not self._bytes_kind:
                return None
            S, held = self._pend if self._pend is not None else ((), "")
            return ROW_HELD, self._mode, S, held, dec.held
        if self._pend is None:
            if self._sink:  # quiet outside every region, with no implicit field: its Q row hands out nothing
                return self._mode
            return None if self._tail else self._match_key()
        S, held = self._pend
        return ROW_PENDING, self._mode, S, held, b""

    def _match_key(self):
        """`row_key`'s M key when the core holds attempts with a match it must wait on (nothing deferred),
        else None."""
        core = self._core
        sc = core.scanner
        att = sc.attempts
        if (not att or sc.scan != sc.end or att[0].start != sc.pos or self._sink or self._opening or self._spans_on
                or sc.pos < core.prompt_end or core.stalled or core.failed is not None or core.finished
                or not self._dec.clean() or core.json_end is not None):
            return None
        pos = sc.pos
        return ROW_MATCH, self._mode, tuple([attempt_record(a, pos) for a in att]), sc.text[pos - sc.base:], b""

    def decode_deferred(self, data: bytes) -> str:
        """The text of the bytes `data` of tokens taken without this parser (byte-level vocabularies), as its
        decoder's own ``feed`` gives it: the bytes it held first; an incomplete character at the end is held
        again (an H row)."""
        dec = self._dec
        if dec.held:
            data = dec.held + data
        text, k = utf_8_decode(data, "replace", False)
        dec.held = data[k:]
        return text

    def adopt(self, text: str, key: tuple) -> None:
        """Take `text`, the decoded text of tokens `TokenStreams` took without this parser (their events were
        handed out), and the state its row `key` (`row_key`'s form, or a Q or NONE row's) describes. The core
        gets the text with the parser's other deferred text when it next runs."""
        if text:
            self._tail.append(text)
        self._jtab = None  # (`_json_token` needs the core to have all the text: the next general step refreshes)
        kind, m, S, held, _ = key
        if kind == ROW_NONE:  # only inactive steps (id -1, no text) were deferred: the parser is up to date
            return
        if kind == ROW_MATCH:  # the core takes the held text with its attempts when it next runs
            self._hold_at_end(held, S)
            return
        self._mheld = None
        self._mode = m
        self._lazy_ok = True
        # (a row never changes the mode: the sink - mode 0 of a template without an implicit field - stays so)
        self._sink = sink = self._tt.mode_field[m] is None
        if kind == ROW_QUIET:
            self._pend = None
            self._tab = self._never if sink else self._fast[m]
            self._lrow = self._tt.lazy_row(m, ())
            return
        self._pend = (S, held) if S else None
        self._tab = self._never
        self._lrow = self._tt.lazy_row(m, S) if kind == ROW_PENDING else None

    def feed_decoded(self, text: str) -> list[dict]:
        """The events of `text`, decoded from tokens whose texts are complete on their own while the decoder
        holds nothing (`TokenStreams` replaying a fresh stream's tokens)."""
        return self._feed_text(text)

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
        self._token_range(event)

    def _token_range(self, event) -> None:
        """With spans and offsets both on: ``token_start``/``token_end``, the generated tokens that overlap the
        event's ``[start, end)`` (for an empty span, the token holding that boundary, or none where it falls
        between two tokens); None for a span inside the prompt."""
        if event is not None and "start" in event:
            span = self._span(event["start"], event["end"])
            event["token_start"], event["token_end"] = (None, None) if span is None else span["tokens"]

    def _on_close(self, event, rec: dict) -> None:
        out = {"field": rec["field"],
               "open": None if rec["open"] is None else self._span(*rec["open"]),
               "body": self._span(*rec["body"]),
               "close": None if rec["close"] is None else self._span(*rec["close"])}
        self._records.append(out)
        if event is not None:
            event["span"] = out
            self._token_range(event)

