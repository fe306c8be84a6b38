"""The runtime side of a tokenizer vocabulary and of the per-mode token tables of one binding.

Guarantees:

* `VocabBase` is everything the runtime reads from a vocabulary, and ``VocabBase.decode`` is the reference
  decode (the tokenizer's ``decode``) that every faster decoder must equal. `LoadedVocab` builds it from the
  token section of a table file (FORMAT.md section 8) with no tokenizer and no per-token decoding.
* `TokenTablesBase` holds, per scanner mode, which tokens are *inert* (can never start a delimiter, so their
  text is region text) and which tokens are a *whole delimiter* on their own (`_whole_delimiter`: the real
  scanner decides exactly that delimiter within the token), plus a lazily cached `transition` probe that says
  what a text does to undecided delimiter attempts when nothing gets decided within it. Every entry is
  derived by running the same `Scanner` the parser runs, so a table entry never disagrees with the engine.
* Tables are shared between parsers and threads: rows and caches are built on first use under a lock.

Why a module of its own: these are plain data plus lookups, computed once per (template, tokenizer) by
``chatparse.compiler.tokens`` or read from a file, and read by the token parser and the batched streams.
Like the rest of the runtime it never imports the compiler, interegular or transformers.
"""

from __future__ import annotations

import threading

import numpy as np

from ..stream.scanner import WAIT, Attempt, Scanner
from .decode import clean_up_tokenization, decode_run

__all__ = ["VocabBase", "LoadedVocab", "TokenTablesBase", "TOKEN_SKIP", "TOKEN_TEXT", "TOKEN_BYTE"]

# The kinds of `TokenStreams`' rows (``_Rows.info[row][0]``; a `TokenParser`'s state as a row key,
# `TokenParser.row_key`), see `streams._Rows`: plain module-level strings (not an Enum), so the hot paths
# pay no attribute lookup.
ROW_QUIET = "Q"  # Q(m): quiet in mode m, its region open (the parser's fast state)
ROW_NONE = "NONE"  # the stream needs the character engine for its next token
ROW_PENDING = "P"  # P(m, S, held): undecided, match-free attempts holding `held`
ROW_HELD = "H"  # H(m, S, held, hb): the decoder holds the bytes of a character split across tokens
ROW_MATCH = "M"  # M(m, records, held): attempts that recorded a match the core must wait on
ROW_FRESH = "F"  # F(m, prefix, held): a stream whose parser has been fed nothing yet
ROW_DETACHED = "D"  # D: a stream whose parser stopped at a step taken with ``events=False``; every token stays


# Per-token flags of the token section of a table file (FORMAT.md section 8).
TOKEN_SKIP = 1  # dropped before decoding (no token for the id, or a skipped special token)
TOKEN_TEXT = 2  # not skipped, and its bytes are its text on their own (complete UTF-8, not a byte token)
TOKEN_BYTE = 4  # a ByteFallback ``<0xXX>`` token (``pieces`` kind): its one byte is its value


# --------------------------------------------------------------------------------------------------------------
# Vocabulary: the parts the runtime reads (derived by chatparse.compiler.tokens, or read from a table file)
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
        return self.finish_decoded(text)

    def finish_decoded(self, text: str) -> str:
        """The decoded tokens' text as the tokenizer hands it out: up to `strip_start` leading `strip_char`
        removed, then transformers' clean-up where the tokenizer does it."""
        if self.strip_start:
            n = 0
            while n < self.strip_start and n < len(text) and text[n] == self.strip_char:
                n += 1
            text = text[n:]
        if self.cleanup:
            text = clean_up_tokenization(text)
        return text


def _slices(s, offsets: list) -> list:
    """``[s[offsets[i]:offsets[i + 1]] for i ...]`` (the cheapest way found to cut many pieces: see
    bench/PERF_NOTES.md#token-tables)."""
    return [s[a:b] for a, b in zip(offsets, offsets[1:])]


class LoadedVocab(VocabBase):
    """A vocabulary read from the token section of a table file (`chatparse.runtime.tables.loader.loads` validated it).

    Builds the per-token Python lists the hot paths index (bytes, text) with slicing at C speed; no
    tokenizer, no decoder analysis, no per-token decoding."""

    def __init__(self, data: dict):
        from ..tables.loader import token_texts

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
        if self.kind == "bytes":  # a skipped token decodes to nothing, whatever bytes the file holds for it
            for i in np.flatnonzero(skip).tolist():
                self.tok_bytes[i] = b""
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


# --------------------------------------------------------------------------------------------------------------
# Per-mode token tables
# --------------------------------------------------------------------------------------------------------------
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


class _DecisionProbe(Scanner):
    """The real scanner, noting whether it resolved any attempt (`pick_winner`, which may ask `regex` to look
    before a match start)."""

    resolved = False

    def _resolve(self, a, eos):
        r = Scanner._resolve(self, a, eos)
        if r is not WAIT:
            self.resolved = True
        return r


def _scan_after(scanner: Scanner, mode: int, lead: str, text: str):
    """`scanner` (fresh) in `mode`, quiet after `lead`, fed `text`: its first decision (`Scanner.decide`)."""
    scanner.push(lead)
    scanner.restart(mode, len(lead))
    scanner.push(text)
    return scanner.decide(False)


def _probe_decision(tables, mode: int, before: str, at_start: bool, text: str):
    """`TokenTablesBase.decision`, computed: the real scanner on `before` (after one placeholder character
    unless `at_start`) and `text`, in `mode`, from the start of `text`."""
    lead = before if at_start else "\x00" + before
    n0 = len(lead)
    sc = _DecisionProbe(tables)
    try:
        d = _scan_after(sc, mode, lead, text)
    except Exception:  # (the parser meets it again on the real text, and raises it there)
        return None
    if d is not None:
        s, e, pi, m = d
        return ("D", s - n0, e - n0, pi, m)
    if sc.scan != sc.end or not sc.attempts or sc.attempts[0].start != n0 or sc.eot_fed:
        return None  # (text before the first attempt would be released)
    # "pure": the same for any characters before `text` (not at the start, where `^` holds, and no attempt was
    # resolved, which is where `regex` may look back)
    pure = not at_start and not sc.resolved and tables.modes[mode].lead_starts is None  # (they read `before`)
    return ("H", tuple([attempt_record(a, n0) for a in sc.attempts]), pure)


def attempt_record(a: Attempt, at: int) -> tuple:
    """Attempt `a` as plain data, offsets relative to `at`: ``(start, state, fin or -1, ends or None,
    followers or None)`` (`attempt_of` rebuilds it)."""
    return (a.start - at, a.state, a.fin - at if a.fin >= 0 else -1,
            None if a.ends is None else tuple([(k, v - at) for k, v in a.ends.items()]),
            tuple([attempt_record(f, at) for f in a.followers]) if a.followers else None)


def attempt_of(record: tuple, at: int) -> Attempt:
    """A fresh `Attempt` from `attempt_record`'s data, offsets made absolute by adding `at`."""
    start, state, fin, ends, followers = record
    a = Attempt(start + at, state)
    if fin >= 0:
        a.fin = fin + at
    if ends is not None:
        a.ends = {k: v + at for k, v in ends}
    if followers:
        a.followers = [attempt_of(f, at) for f in followers]
    return a


def _whole_delimiter(tables, mode: int, text: str):
    """``(pattern index, captures or None)`` when `text`, fed on its own to a quiet scanner in `mode` (not at
    offset 0), is decided as exactly one whole delimiter; else None."""
    d = _scan_after(Scanner(tables), mode, "\x00", text)
    if d is None:
        return None
    s, e, pi, m = d
    if s != 1 or e != 1 + len(text):
        return None
    caps = None
    if m is not None:
        caps = _Captures({k: v for k, v in m.groupdict().items()})
    return pi, caps


def undecided(attempts: list, mode=None) -> bool:
    """True when every attempt in `attempts` (a scanner's) is undecided and match-free, followers included.

    Then the attempts themselves - without their followers (`Scanner._merge`) - are all the lazy token paths
    need to know: a follower is in its leader's state, so it has its leader's future, and is not stepped; it
    starts after its leader, so it never moves the release point; and while neither it nor its leader has
    a match recorded it cannot outlive its leader (`Scanner._drop` brings a follower back only with a match
    of its own or a pattern candidate its leader recorded; a token that records one is not lazy). The core
    parser, fed the same text later, keeps its own followers. So the lazy state keeps the attempts alone,
    which also keeps it as small as the scanner's (a run of spaces is one attempt). Not in a `mode` with a cap
    (`Mode.cap`): there a follower outlives a leader that reaches its cap, and the cap counts from each
    attempt's own start, which the lazy state does not keep."""
    if mode is not None and mode.cap is not None and attempts:
        return False
    for a in attempts:
        if a.fin >= 0 or a.ends is not None:
            return False
        if a.followers:
            for f in a.followers:
                if f.ends is not None:
                    return False
    return True


_TRANSITION_CACHE = 65536
_DECISION_CACHE = 16384  # (mode, text) outcomes of `TokenTablesBase.decision`; keys hold up to 256 characters
_LAZY_ROWS = 4096  # states whose lazy transitions are cached (`TokenTablesBase.lazy_row`)


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
    * ``decision(mode, before, at_start, text)``: what the scanner does with text it has not decided yet,
      when that is a delimiter or a match it must wait on (lazily cached, see there).
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
        self._decided: list = [{} for _ in t.modes]
        self._lrows: dict = {}
        self._lock = threading.Lock()

    def _fast_row(self, k: int) -> list:
        """Mode k's row of `fast` (built on first use: bench/PERF_NOTES.md#token-tables)."""
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
        attempts in scanner order (followers of merged attempts left out, see `undecided`):
        ``(old_index, -1, new_state)`` for an attempt that was live before, and
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
        # (a mode whose attempts start only where a lookbehind holds cannot be probed after placeholders)
        if text and len(text) <= 256 and self.compiled.tables.modes[mode].lead_starts is None:
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
            if d is None and sc.scan == sc.end and undecided(sc.attempts, sc.mode):
                ident = {id(a): k for k, a in enumerate(old)}
                eff = tuple((ident[id(a)], -1, a.state) if id(a) in ident else (-1, a.start - 1 - n, a.state)
                            for a in sc.attempts)
        with self._lock:
            cache[key] = eff
        return eff

    def decision(self, mode: int, before: str, at_start: bool, text: str):
        """What a scanner in `mode` does with `text` when it decided everything before `text` (the attempts it
        holds, if any, all started in `text`), `before` being the ``tables.history`` characters before `text`
        (fewer only at the start of the text: `at_start`):

        * ``("D", s, e, pattern index, match or None)``: its first decision is the delimiter ``[s, e)``
          (offsets in `text`);
        * ``("H", attempts, pure)``: it decides nothing and releases nothing (every character is held by its
          attempts), and its attempts afterwards are `attempts` (`attempt_record`, offsets in `text`); `pure`
          when that holds whatever the characters before `text` (not at the start of the text, and no
          attempt was resolved: the automaton alone looked at `text`);
        * None otherwise (or for texts over 256 characters).

        Exact because the probe is the real `Scanner` on the same characters: the automaton's attempts
        depend only on the characters from their start, and `regex` reads at most ``tables.history``
        characters before a match start (`before`, behind a placeholder unless `at_start`, so that ``^``
        and lookbehinds see what they would see) and decides only where the text ends late enough. So the
        result, match object included, is the same for every parser that meets these characters, and is
        cached per mode. `TokenParser` uses it where a token's text decides something: the core then skips
        stepping the held characters again (`StreamParser.feed_decided`, `feed_held`)."""
        cache = self._decided[mode]
        key = (before, at_start, text)
        try:
            return cache[key]
        except KeyError:
            pass
        out = _probe_decision(self.compiled.tables, mode, before, at_start, text) if len(text) <= 256 else None
        if len(cache) < _DECISION_CACHE:
            with self._lock:
                cache[key] = out
        return out

    def lazy_row(self, mode: int, S: tuple):
        """The shared cache of lazy transitions out of the state (`mode`, undecided attempts `S`), ``S`` as
        in `TokenParser._pend` (``()`` = quiet); None once `_LAZY_ROWS` states are cached.

        A dict: token id -> ``(S', lazy_row(mode, S'), released, table)``: the attempts after that token, the
        cache of the state it leads to, how many characters of held text + token text are released, and the
        token table of the state reached (`never` while attempts are pending, else the mode's inert table).
        `TokenParser` fills an entry the first time the token's transition (`transition`) is known from that
        state with the decoder holding nothing and the token's text complete on its own: the outcome depends
        on nothing else (the attempts' states and their distances from the end are all `transition` reads),
        so the next parser in that state can skip the decoder and the probe.
        """
        key = (mode, S)
        row = self._lrows.get(key)
        if row is None:
            with self._lock:
                row = self._lrows.get(key)
                if row is None:
                    if len(self._lrows) >= _LAZY_ROWS:
                        return None
                    row = self._lrows[key] = {}
        return row

    def kill_flags(self, mode: int, states: frozenset) -> list:
        """Per character class: does that class kill every attempt in `states` (all transitions dead)?"""
        m = self.compiled.tables.modes[mode]
        trans, ncls = m.trans, m.n_classes
        return [all(trans[s * ncls + c] == 0 for s in states) for c in range(ncls)]

    def batch_rows(self, factory, key=None):
        """The shared row tables of `TokenStreams` for this binding and event dialect `key` (built on first
        use). Each dialect has its own: a row table keeps the events of learned transitions, and those are
        the dialect's (spans or not)."""
        with self._lock:
            tables = getattr(self, "_rows", None)
            if tables is None:
                tables = self._rows = {}
            rows = tables.get(key)
            if rows is None:
                rows = tables[key] = factory(self)
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


