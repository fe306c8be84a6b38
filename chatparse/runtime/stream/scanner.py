"""The delimiter automaton at run time: where the next delimiter is, decided exactly and incrementally.

Contract (what makes chatparse independent of how text is split into feeds): for the text received so far,
`decide()` returns the next delimiter match *only when no continuation of the text could change it*, and
`safe_end()` is the first position that might still belong to a delimiter. Both agree with running the
reference's search once over the complete text: the match with the earliest start wins, then the longest,
then an open over a close, then the smaller field name; each pattern's own match is its leftmost-first
(`regex`) match at that start.

How: every position where a delimiter can begin (found by a C-speed prefilter search, `Mode.skip_to`, so
plain text is skipped without a Python loop) starts an *attempt*, which steps the mode's combined DFA one
character at a time (a lone attempt crosses literal runs and self-loops in C: `Mode.jump`, `Mode.loop`). An attempt records, per pattern, where that pattern's match ends, and is decided when
its state is terminal or dead. The earliest attempt decides first; text before the earliest live attempt can
never be part of a delimiter. Regex-decided patterns ask `regex` for the exact match on the short window
around the attempt once the window is wide enough (`history`/`horizon`). Nothing is re-scanned except the
few held characters after a match, so the cost of a feed does not grow with what came before it.
"""

from __future__ import annotations

from ..tables.layout import PREFILTER_DEPTH

WAIT = object()


_COPIERS: dict = {}


def copy_slots(obj):
    """A shallow copy of a slotted object of this runtime (its slots, and its `__dict__` if it has one): what
    `copy.copy` does, faster, for the forks of `StreamParser.fork` and `TokenParser.fork`. One copy function
    per class, made on first use (one attribute read and write per slot, no `getattr`/`setattr` calls)."""
    cls = type(obj)
    copier = _COPIERS.get(cls)
    if copier is None:
        copier = _COPIERS[cls] = _slot_copier(cls)
    return copier(obj)


def _slot_copier(cls):
    names = [n for n in cls.__slots__ if n != "__dict__"]
    for n in names:
        if not n.isidentifier() or n.startswith("__"):
            raise TypeError(f"copy_slots: slot name {n!r} of {cls.__name__}")
    lines = ["def copy(obj):", "    new = make(cls)"]
    for n in names:  # (an unset slot stays unset)
        lines += ["    try:", f"        new.{n} = obj.{n}", "    except AttributeError:", "        pass"]
    lines += ["    extra = getattr(obj, '__dict__', None)", "    if extra:", "        new.__dict__.update(extra)",
              "    return new"]
    scope = {"make": cls.__new__, "cls": cls}
    exec("\n".join(lines), scope)
    return scope["copy"]


class Attempt:
    __slots__ = ("start", "state", "ends", "fin", "followers")

    def __init__(self, start: int, state: int):
        self.start = start
        self.state = state
        self.ends: dict | None = None  # local pattern index -> end offset of its match
        self.fin = -1  # offset after the last character the attempt needed, once decided
        self.followers: list | None = None  # later attempts in its state, not stepped (`_merge`)

    def fork(self) -> "Attempt":
        a = Attempt(self.start, self.state)
        a.fin = self.fin
        a.ends = None if self.ends is None else dict(self.ends)
        a.followers = None if self.followers is None else [f.fork() for f in self.followers]
        return a


class Scanner:
    """Holds the undecided tail of the text and the live attempts for the current mode."""

    # Slots (see `TokenParser.__slots__`)
    __slots__ = ("attempts", "base", "cmap", "end", "eot_fed", "keep", "mode", "pos", "scan", "stop", "t", "text",
                 "__dict__")

    def __init__(self, tables):
        self.t = tables
        self.cmap = tables.cmap
        # Characters kept before the first undecided one: the `history` a pattern's regex may read back, and
        # one more, so that once the buffer's start is not the text's start (base > 0) no such read reaches
        # index 0, where `regex` would take `^` (or `\A`) to hold.
        self.keep = tables.history + 1
        self.text = ""
        self.base = 0  # absolute offset of text[0]
        self.end = 0  # absolute offset just past the received text
        self.pos = 0  # first offset not yet handed out as region text or delimiter
        self.scan = 0  # next offset to step
        self.attempts: list[Attempt] = []
        self.eot_fed = False
        # No delimiter starting after this offset can matter (-1: any may): the end of a JSON value that closes
        # the region first (`StreamParser._decide_json_end`), so that `decide` does not search past it.
        self.stop = -1
        self.set_mode(0)

    def fork(self) -> "Scanner":
        """An independent copy (the tables and modes shared; the attempts copied): `StreamParser.fork`."""
        c = copy_slots(self)
        c.attempts = [a.fork() for a in self.attempts]
        return c

    # -- input ---------------------------------------------------------------------------------------------
    def push(self, chunk: str) -> None:
        self.text += chunk
        self.end += len(chunk)

    def set_mode(self, mode_index: int) -> None:
        self.mode = self.t.modes[mode_index]

    def restart(self, mode_index: int, at: int) -> None:
        """Continue from offset `at` (just after a committed delimiter) in another mode."""
        self.set_mode(mode_index)
        self.pos = self.scan = at
        self.attempts = []
        self.eot_fed = False
        self.stop = -1

    def safe_end(self) -> int:
        return self.attempts[0].start if self.attempts else self.scan

    def take(self, upto: int) -> str:
        """Hand out text[pos:upto] as region text and forget what no future decision can look at."""
        b = self.base
        out = self.text[self.pos - b: upto - b]
        self.pos = upto
        drop = upto - self.keep - b
        if drop > 256 and drop * 2 > len(self.text):
            self.text = self.text[drop:]
            self.base = b + drop
        return out

    # -- deciding ------------------------------------------------------------------------------------------
    def decide(self, eos: bool):
        """The next delimiter `(start, end, pattern_index, match_or_None)` once certain, else None."""
        mode = self.mode
        trans, term, acc = mode.trans, mode.term, mode.acc
        ncls = mode.n_classes
        cmap = self.cmap
        attempts = self.attempts
        stop = self.stop
        while True:
            if stop >= 0 and (attempts[0].start if attempts else self.scan) > stop:
                return None  # (`stop`: nothing from here on can matter)
            while attempts and attempts[0].fin >= 0:
                r = self._resolve(attempts[0], eos)
                if r is WAIT:
                    return None
                if r is not None:
                    return r
                self._drop([attempts[0]])  # (no match after all; its followers take its place)
            if self.scan >= self.end:
                if eos and not self.eot_fed:
                    self._feed_eot()
                    continue
                return None
            scan = self.scan
            text, base = self.text, self.base
            if not attempts and not (scan == 0 and mode.start0):
                i = mode.skip_to(text, scan - base) if stop < 0 else skip_within(mode, text, scan - base, stop - base)
                if i >= len(text):
                    self.scan = self.end
                    continue
                scan = base + i
                if stop >= 0 and scan > stop:
                    self.scan = scan
                    return None
            self.scan = self._step_run(scan, text, base, trans, term, acc, ncls, cmap)

    def _step_run(self, scan, text, base, trans, term, acc, ncls, cmap) -> int:
        """Step from `scan` while attempts are live; stop once the earliest one is decided or none is left.

        Returns the new scan offset. New attempts start wherever the mode's start state survives the character.

        Kept in one piece on purpose: this is the per-character loop of the automaton. Its seams (the lone
        attempt crossing literals in C, stepping the live attempts, starting an attempt at this character) run
        once per character, and moving even the last into a function made text that keeps attempts alive
        measurably slower (bench/PERF_NOTES.md#step-run).
        """
        mode = self.mode
        attempts = self.attempts
        record = self._record
        startN = mode.startN
        jump, loop = mode.jump, mode.loop
        i = scan - base
        n = self.end - base
        can_start = mode.can_start
        guards = mode.lead_starts
        cap = mode.cap
        while i < n:
            if len(attempts) == 1 and attempts[0].fin < 0:
                # One live attempt: cross whole literals and self-loops in C, then step plain characters
                # in a tight loop until one could start an attempt, accept, decide or kill this one.
                a = attempts[0]
                st = a.state
                # (with a cap, only up to the character that brings it to its cap: the loop below decides it)
                lim = n if cap is None else min(n, a.start + cap - 1 - base)
                while i < lim:
                    if cap is None and (jump[st] is not None or loop[st] is not None):
                        i, st = mode.cross(text, i, n, st)
                        if i >= n:
                            break
                    cls = cmap[ord(text[i])]
                    t = trans[st * ncls + cls]
                    if can_start[cls] or t == 0 or acc[t] is not None or term[t]:
                        break
                    st = t
                    i += 1
                a.state = st
                if i >= n:
                    break
            cls = cmap[ord(text[i])]
            pos = base + i
            nxt = pos + 1
            purge = False
            promoted = None
            for a in attempts:
                if a.fin < 0:
                    st = trans[a.state * ncls + cls]
                    a.state = st
                    if st == 0:
                        a.fin = nxt
                        if a.ends is None:
                            purge = True
                    else:
                        hit = acc[st]
                        if hit is not None:
                            record(a, hit, nxt)
                        if term[st]:
                            a.fin = nxt
                        elif cap is not None and nxt - a.start >= cap:
                            # no match from a.start can reach further (`Mode.cap`): decided; its followers
                            # were merged only for sharing its state, and live on from it
                            a.fin = nxt
                            if a.ends is None:
                                purge = True
                            if a.followers:
                                if promoted is None:
                                    promoted = []
                                promoted.append(_promote(a))
            if pos:
                st = startN
                if guards is not None and guards[cls] is not None:
                    st = _guarded_start(guards[cls], text, i)  # (patterns whose lookbehind fails left out)
            else:
                st = mode.start0
                if mode.lead_starts0 is not None and mode.lead_starts0[cls] is not None:
                    st = _guarded_start(mode.lead_starts0[cls], text, i)
            if st:
                hit = acc[st]
                if term[st]:
                    if hit is not None:
                        a = Attempt(pos, st)
                        record(a, hit, pos)
                        a.fin = pos
                        attempts.append(a)
                else:
                    st1 = trans[st * ncls + cls]
                    if st1 or hit is not None:
                        a = Attempt(pos, st1)
                        if hit is not None:
                            record(a, hit, pos)
                        if st1 == 0:
                            a.fin = nxt
                        else:
                            hit = acc[st1]
                            if hit is not None:
                                record(a, hit, nxt)
                            if term[st1]:
                                a.fin = nxt
                        attempts.append(a)
            i += 1
            if promoted is not None:
                attempts += promoted
                attempts.sort(key=_start)
            if purge:
                self._drop_dead()
            if not attempts or attempts[0].fin >= 0:
                break
            if len(attempts) > 1:
                self._merge()
        return base + i

    def _merge(self) -> None:
        """Keep the number of stepped attempts bounded by the mode's states: without this, text such as
        ``xxxx...`` under ``x[^<]*<``, or a run of spaces under ``\\s*</think>``, starts an attempt per
        character, all alive, and every character steps them all (quadratic).

        Two live attempts in one state at one offset have the same future in the tables: they record the
        same match ends from here on and die at the same place. The later one can only matter if the
        earlier one ends without a match, so it stops being stepped and waits as a *follower* of the earlier
        one, which `_drop` puts back, decided where the earlier one was decided, if that happens.

        Where the tables decide every pattern exactly (`Mode.exact`), a recorded end is a real match end,
        which gives two more facts: an attempt with a match wins unless an earlier one does, so everything
        after the earliest attempt with a match is dropped; and a follower that has no match yet will never
        get one (the earlier one had none either), so it is dropped at once. Elsewhere `regex` decides at
        each attempt's own start (lookarounds), so followers are kept and inherit the pattern candidates."""
        exact = self.mode.exact
        ordered = self.mode.cap is not None  # followers kept in start order (`_promote` takes the first)
        attempts = self.attempts
        kept: list = []
        seen: dict = {}
        for a in attempts:
            if a.fin < 0:
                f = seen.get(a.state)
                if f is not None:
                    if a.ends is not None or a.followers or not exact:
                        if f.followers is None:
                            f.followers = []
                        fl = f.followers
                        unsorted = ordered and fl and fl[-1].start > a.start
                        if a.ends is not None or not exact:
                            fl.append(a)
                        if a.followers:
                            fl += a.followers
                            a.followers = None
                        if unsorted:
                            fl.sort(key=_start)
                    if exact and a.ends is not None:
                        break
                    continue
                seen[a.state] = a
            kept.append(a)
            if exact and a.ends is not None:
                break
        if len(kept) != len(attempts):
            attempts[:] = kept

    def _drop_dead(self) -> None:
        """Remove decided attempts without a match (`_drop`)."""
        gone = [a for a in self.attempts if a.fin >= 0 and a.ends is None]
        if gone:
            self._drop(gone)

    def _drop(self, gone: list) -> None:
        """Remove the attempts in `gone` (decided, no match); their followers (`_merge`) take their place,
        decided where they were, with the pattern candidates they had (`regex` decides those at the
        follower's own start), in start order."""
        ids = {id(a) for a in gone}
        kept = [a for a in self.attempts if id(a) not in ids]
        back = []
        for a in gone:
            if a.followers:
                for f in a.followers:
                    f.fin = a.fin
                    if a.ends:
                        ends = f.ends = f.ends or {}
                        for k, e in a.ends.items():
                            ends.setdefault(k, e)
                back += a.followers
        if back:
            if self.mode.cap is not None:
                self._thin(back)
            kept += [f for f in back if f.ends is not None]
            kept.sort(key=_start)
        self.attempts[:] = kept

    def _thin(self, back: list) -> None:
        """Followers brought back by `_drop` in a capped mode (`Mode.cap`): each would ask `regex` for its
        regex-decided pattern candidates at its own start, one call per start (a run of 9,999 'a' under
        ``(?:a{100}){100}`` is 9,999 calls reading up to 10,000 characters each). One `search` from the first
        start says where the first match is; the candidates before it are dropped. No match from those starts
        reaches past where their leader ended (`fin`; the tables step a superset), and `regex` reads at most
        `horizon` characters further (what `_resolve` waits for), so the search stops there (and at the end of
        the text received, where their own calls stop too): what it says about those starts is what the calls
        would say, and it does not go on into the text after them."""
        back.sort(key=_start)
        t, mode, base = self.t, self.mode, self.base
        first, last = back[0].start, back[-1].start
        if last == first:
            return
        fin = max([f.fin for f in back])
        locals_ = set()
        for f in back:
            if f.ends:
                locals_.update(f.ends)
        for local in locals_:
            p = t.patterns[mode.patterns[local]]
            if p.exact or p.horizon < 0:
                continue
            stop = min(self.end, fin + p.horizon + 1)
            m = p.rx.search(self.text, first - base, stop - base)
            q = stop if m is None else m.start() + base
            for f in back:
                if f.start >= q:
                    break
                ends = f.ends
                if ends and local in ends:
                    del ends[local]
                    if not ends:
                        f.ends = None

    @staticmethod
    def _record(a: Attempt, hit: tuple, at: int) -> None:
        ends = a.ends
        if ends is None:
            ends = a.ends = {}
        record_ends(ends, hit, at)

    def _feed_eot(self) -> None:
        """End of text: one EOT step for every live attempt.

        No attempt starts at the very end: the reference never commits a match that starts at the end of
        the text (a zero-width open or close there is ignored; end of stream closes the region anyway).
        """
        mode = self.mode
        self.eot_fed = True
        end = self.end
        for a in self.attempts:
            if a.fin < 0:
                st = mode.eot[a.state]
                hit = mode.acc[st] if st else None
                if hit is not None:
                    self._record(a, hit, end)
                a.fin = end
        self._drop_dead()

    def _resolve(self, a: Attempt, eos: bool):
        """Pick the winning pattern of a decided attempt; WAIT if `regex` needs more text; None if no match."""
        t = self.t
        if not eos:
            for local in a.ends:
                p = t.patterns[self.mode.patterns[local]]
                if not p.exact and (p.horizon < 0 or self.end < a.fin + p.horizon):
                    return WAIT
        return pick_winner(t, self.mode, self.text, self.base, a.start, a.ends)


def _promote(a: Attempt) -> Attempt:
    """The first follower of `a`, which is decided by its cap and not by its state, as a live attempt in `a`'s
    state leading the other followers, with the pattern candidates `a` recorded (`regex` decides those at the
    follower's own start)."""
    rest = a.followers
    a.followers = None
    f = rest.pop(0)
    f.state = a.state
    f.followers = rest or None
    if a.ends:
        ends = f.ends = f.ends or {}
        for k, e in a.ends.items():
            ends.setdefault(k, e)
    return f


def skip_within(mode, text: str, i: int, stop: int) -> int:
    """`Mode.skip_to` for a caller that cares only about attempts starting at or before index `stop`: the first
    candidate offset >= i, or some offset > `stop` when there is none up to `stop`. The search reads no further
    than the prefilter can look past `stop` (its end there counts as the end of the text, which only lets more
    offsets through), so a delimiter search bounded by the end of a JSON value (`Scanner.stop`) does not run on
    through the rest of a long text once per region."""
    deep = mode.first_re
    if deep is None:
        return i
    limit = min(len(text), stop + 1 + PREFILTER_DEPTH)
    m = deep.search(text, i, limit)
    return m.start() if m is not None else limit


def _guarded_start(guard: tuple, text: str, i: int) -> int:
    """The state an attempt starting at buffer index `i` starts in, where that would be `startN` (`guard` is the
    `Mode.lead_starts` entry of its first character's class): `startN` without the patterns whose leading
    lookbehind fails there (`runtime/regex/lead_assert.py`), the dead state when that is every pattern it could
    match."""
    rxs, by_failed, _ = guard
    k = 0
    for j, rx in enumerate(rxs):
        if rx.match(text, i) is None:
            k |= 1 << j
    return by_failed[k]


def _start(a: Attempt) -> int:
    return a.start


def record_ends(ends: dict, hit: tuple, at: int) -> None:
    """An accepting state's `hit` ((local pattern, characters back), ...) reached just before offset `at`:
    each pattern's match ends `back` characters before `at`; a later end replaces an earlier one."""
    for p, back in hit:
        ends[p] = at - back


def pick_winner(tables, mode, text: str, base: int, start: int, ends: dict):
    """The delimiter an attempt from absolute offset `start` decides - ``(start, end, pattern index, match or
    None)`` - or None. `ends` maps the mode's local pattern indexes to the match ends the tables found; `text`
    begins at absolute offset `base`. A pattern the tables do not decide exactly is asked of `regex` at
    `start` (its own end then counts); the winner is the longest match, then an open over a close, then the
    smaller field name; an exact winner's named groups are read by `regex` within its span. Shared by
    `Scanner` and the one-shot path's automaton attempts (runtime/oneshot/parse.py)."""
    best_key = best = None
    patterns, fields = tables.patterns, tables.fields
    for local, end in ends.items():
        pi = mode.patterns[local]
        p = patterns[pi]
        m = None
        if not p.exact:
            m = p.rx.match(text, start - base)
            if m is None:
                continue
            end = m.end() + base
        key = (start - end, 0 if p.kind == "open" else 1, fields[p.field]["name"])
        if best_key is None or key < best_key:
            best_key, best = key, (start, end, pi, m)
    if best is None:
        return None
    s, e, pi, m = best
    p = patterns[pi]
    if m is None and p.named_groups:
        m = p.rx.fullmatch(text, s - base, e - base)
        if m is None:  # the tables and `regex` disagree: never guess
            raise RuntimeError(f"chatparse internal error: tables matched {p.source!r} at {s}..{e} "
                               "but regex does not")
    return s, e, pi, m
