"""One-shot parsing when the whole text is known: candidates from the tables, decisions without stepping.

Streaming needs the automaton: it must know, before the text ends, whether a delimiter is already certain.
A one-shot parse (`parse_response`, `CompiledTemplate.parse`, batches) has the complete text, so at a
candidate start every watched pattern's match is simply `regex`'s match there - exactly the reference's
decision (earliest start first; the prefilters prove no earlier start can match).

Three paths give the same answer; `parse_whole` takes the first that applies:

1. The lean path (`_parse_lean`): no scanner, no region buffers, no events - a region's body is the slice
   since the previous delimiter. Per mode (runtime/oneshot/plan.py), candidates come from ``str.find`` when
   the mode's only delimiter is one literal, from a `re` alternation of the literals every match starts
   with, or from an 8-character prefilter; literal delimiters are decided by ``str.startswith``, other
   patterns by `regex` after a literal-prefix test. Where the literal found names the only pattern (and
   top-level alternative) that can match there (`plan._keyed`), only that one is asked, by its `re`
   twin where the text it may read is ASCII (runtime/regex/re_compat.py). Where every pattern of a mode is a
   whitespace lead, literals and a whitespace tail (`literals.literal_shapes`: qwen3's ``\\s*</think>\\s*``),
   one `re` search finds the next literal and string tests decide (`_decide_shaped`): no `regex` call at all.
   Where every pattern is a whitespace lead and a literal but some go on in ways only `regex` decides
   (glm-4.5's ``\\s*<tool_call>\\s*(?P<name>[^\\n<]+?)...``), the same search finds the candidates and
   `_decide_at` asks there only the patterns whose literal it found (`WideFinder.lits`), so a `regex` call
   never looks for an absent literal. Other whitespace-led modes (``\\s*</think>|\\s*$``) are decided by one
   attempt of the automaton per candidate (`_dfa_decide`) while more than `SCAN_PRONE_LIMIT` characters are
   left: a `regex` call on such a pattern first scans the whole rest of the text for its literal, which would
   make many candidates quadratic; closer to the end, `regex` decides, as in `WholeTextScanner`.
2. The streaming parser's region logic with `WholeTextScanner`, which asks `regex` at each candidate and
   keeps the automaton for whitespace-led modes on long texts.
3. The streaming parser alone (the automaton), which is linear.

`regex` backtracks, so the first two are guarded: match calls on patterns that could backtrack badly
(runtime/regex/backtrack.py) have a timeout, and the number of candidate starts is bounded by the text length.
Each other call reads the text in linear time, but many of them could still add up to quadratic time (a
pattern such as ``x[^<]*<`` on ``"xxxx..."`` reads to the end of the text at every ``x``), so the time spent
is checked every `CLOCK_EVERY` candidates against `SCAN_SECONDS` + `SCAN_SECONDS_PER_CHAR` per character.
If any of these is exceeded, the automaton redoes the parse. The result is the same either way; only the
time differs.
"""

from __future__ import annotations

from time import perf_counter

from ..regex.backtrack import stops_within
from ..regex.literals import SHAPE_AHEAD, SHAPE_TRAIL
from ..stream.parser import StreamParser, final_output, fresh_output, warn_loop, warn_stall
from ..stream.scanner import Scanner, pick_winner, record_ends, skip_within
from . import lean_regions
from .plan import _WS_CHARS, WindowTwin, plan_for

MATCH_TIMEOUT = 0.05  # seconds per `regex` call before falling back to the automaton
SCAN_PRONE_LIMIT = 4096  # characters left beyond which whitespace-led modes use the automaton
LEAN = True  # False: skip the lean path (tests force each path this way)
_native_regions = lean_regions._lean_regions.regions if lean_regions.NATIVE else None
CLOCK_EVERY = 64  # candidates between two looks at the clock
SCAN_SECONDS = 0.002  # time the candidate paths may take before the automaton redoes the parse ...
SCAN_SECONDS_PER_CHAR = 1e-6  # ... plus this per character (about what the automaton itself costs)


def _limits(n: int) -> tuple[int, float]:
    """For a text of `n` characters: how many candidate starts the candidate paths may try, and when their
    time is up (`perf_counter`)."""
    return n // 4 + 64, perf_counter() + SCAN_SECONDS + n * SCAN_SECONDS_PER_CHAR


class _Fallback(Exception):
    """The parse must be redone another way; `automaton`: straight by the automaton (a timeout or the
    candidate budget, which the `WholeTextScanner` path would meet again)."""

    def __init__(self, automaton: bool = False):
        super().__init__()
        self.automaton = automaton


class WholeTextScanner(Scanner):
    """A scanner whose `decide` asks `regex` at each candidate start; valid only once the text is complete."""

    def __init__(self, tables, text: str):
        super().__init__(tables)
        self.push(text)
        self.budget, self.deadline = _limits(len(text))
        plan = plan_for(tables)
        self.watched = {id(mode): entry.watched for mode, entry in zip(tables.modes, plan.modes)}

    def decide(self, eos: bool):
        mode = self.mode
        if mode.first_re is None or (mode.wchars and self.end - self.scan > SCAN_PRONE_LIMIT):
            # `regex` checks a whitespace-led pattern (\s*</think>) for its required literal over the whole
            # rest of the string on every call, so on long texts those modes use the linear automaton (as do
            # modes where an attempt can start anywhere).
            return Scanner.decide(self, eos)
        text, base = self.text, self.base
        n = len(text)
        watched = self.watched[id(mode)]
        i = self.scan - base
        while True:
            # Offset 0 is always a candidate: `^` can hold there, and the prefilter describes offsets > 0.
            stop = self.stop  # (`Scanner.stop`: only offsets up to the end of a JSON value that closes first matter)
            p = i if base + i == 0 and mode.start0 else (
                mode.skip_to(text, i) if stop < 0 else skip_within(mode, text, i, stop - base))
            if p >= n:  # a match starting at the very end never counts (as in the reference)
                self.scan = self.end
                return None
            if 0 <= self.stop < base + p:  # (`Scanner.stop`: past the end of a JSON value that closes first)
                self.scan = base + p
                return None
            self.budget -= 1
            if self.budget < 0 or not self.budget % CLOCK_EVERY and perf_counter() > self.deadline:
                raise _Fallback()
            found = _decide_at(watched, text, p)
            if found is not None:
                s, e, pi, m = found
                self.scan = base + e
                return base + s, base + e, pi, m
            i = p + 1

    def safe_end(self) -> int:
        return self.scan


def _parse_lean(tables, tool_params: dict, text: str) -> dict:
    """The message for the complete `text`, computed without a scanner, a region buffer or events.

    The region rules are `StreamParser`'s, step for step (see runtime/stream/parser.py): every delimiter closes the
    current region, whose raw body is simply the text since the previous delimiter; an open delimiter
    opens its field; the implicit field opens only on a non-empty body; a zero-width close of the empty
    implicit region stops the parse. Delimiters are decided as `WholeTextScanner.decide` decides them. Raises
    `_Fallback` (before any effect is visible) where that scanner would need the automaton.

    Two steps: where every mode is decided by string tests, `_lean_native` (the C loop's regions, stored);
    otherwise the delimiter loop below, kept in this one function on purpose, though long. Its candidate
    searches (shaped, keyed, whitespace-led literals, candidate by candidate) are its natural seams, but as
    functions called once per delimiter, with the parse's state passed in and the budget passed back, they
    cost more than 3%: measured 2026-12-07 (issue #38), this function against that split in one process, 61
    interleaved rounds of 2,000 short qwen3 rows of `bench/datasets_gen.py` with the C loop off, median of the
    per-round ratios, split/whole 1.084 and 1.060 in two runs (the same function against itself 0.998-1.003);
    on 40 mixed 4k-character outputs of `bench/scenarios.py` (31 rounds) gemma4 1.016, qwen3_coder 1.024. The
    native step costs 1.008 and 1.019 on the same rows with the C loop on, so it is split out. Earlier
    measurements: bench/PERF_NOTES.md#parse-lean."""
    try:  # (`plan_for`, inline, as `fresh_output` and `_limits` below: bench/PERF_NOTES.md#parse-lean)
        plan = tables.oneshot_plan
    except AttributeError:
        plan = plan_for(tables)
    n = len(text)
    usable, stores, implicit, opens, pat_field, read_captures, defaults, flat = plan.lean
    if not usable:
        raise _Fallback()
    output = dict(defaults) if flat else fresh_output(tables)
    current, opened, captures = implicit, False, {}
    budget, deadline = n // 4 + 64, perf_counter() + SCAN_SECONDS + n * SCAN_SECONDS_PER_CHAR
    ascii = text.isascii()
    if plan.native is not None and lean_regions._use_native:  # every mode decided by string tests or keys: in C
        return _lean_native(tables, plan.native_ascii if ascii else plan.native, stores, read_captures, text, output,
                            tool_params, budget, deadline)
    modes = plan.ascii_mode_tuples if ascii else plan.mode_tuples  # (`ModePlan`s, as plain tuples)
    first_re, start0, wide, single, watched, keyed, shaped = modes[0]
    mi = pos = scan = 0
    stalled = False
    empty_open = -1  # offset of the current region's open delimiter when that was zero-width
    dead = after = None  # made when a mode searches candidate by candidate (the last branch below)
    while True:
        # -- the next delimiter at or after `scan` (WholeTextScanner.decide): [s, e) of pattern pi, match m --
        read = None  # a keyed decision's capture reader (for a twin's own group numbers)
        if type(single) is tuple:  # the mode's only delimiter is one literal: where it occurs, it is that
            s = text.find(single[0], scan)
            if s < 0:
                break
            e, pi, m = s + single[2], single[1], None
        elif shaped is not None:  # every pattern is a lead, literals, a tail: decided by string tests
            search, by_lit, solos, led = shaped
            i = scan
            while True:
                hit = search.search(text, i)
                if hit is None:
                    break
                p = q = hit.start()
                if led:  # (the earliest start: where the whitespace run before the literal starts)
                    while p > i and text[p - 1] in _WS_CHARS:
                        p -= 1
                budget -= 1
                if budget < 0 or not budget % CLOCK_EVERY and perf_counter() > deadline:
                    raise _Fallback(automaton=True)
                solo = solos.get(hit.group())
                if solo is not None:  # one pattern's one alternative can match here (`_decide_shaped`, inline)
                    pi, run_min, run_max, e, tail = solo
                    if q - p > run_max:  # (no lead: it can only start at the literal)
                        p = q
                    if q - p >= run_min:
                        if tail == SHAPE_AHEAD:
                            e = q
                        else:
                            e += q
                            if tail == SHAPE_TRAIL:
                                while e < n and text[e] in _WS_CHARS:
                                    e += 1
                        found = (p, e, pi, None)
                        break
                    i = q + 1
                    continue
                entries = by_lit[hit.group()]
                found = _decide_shaped(entries, text, p, q)
                if found is None and p < q:  # (an alternative without a lead can still start at q)
                    found = _decide_shaped(entries, text, q, q)
                if found is not None:
                    break
                i = q + 1
            if hit is None:
                break
            s, e, pi, m = found
        elif keyed is not None:  # the literal the search finds names the only pattern that can match there
            i = scan
            while True:
                hit = first_re.search(text, i)
                if hit is None:
                    break
                p = hit.start()
                budget -= 1
                if budget < 0 or not budget % CLOCK_EVERY and perf_counter() > deadline:
                    raise _Fallback(automaton=True)
                pi, rx, risky, read = keyed[hit.group()]
                if pi < 0:  # several patterns start with this literal (`_best_among`)
                    best = _best_among(rx, pi == -2, hit.end() - p, text, p)
                    if best is not None:
                        e, pi, m, read = best
                        s = p
                        break
                    i = p + 1
                    continue
                if rx is None:
                    s, e, m = p, hit.end(), None
                    break
                m = rx.match(text, p) if risky is False else _match_at(rx, risky, text, p)
                if m is not None:
                    s, e = p, m.end()
                    break
                i = p + 1
            if hit is None:
                break
        elif wide is not None and wide.lits is not None:
            # every pattern is a whitespace lead and literals (`WideFinder.lits`): the next occurrence of one
            # of them is the next candidate, where the whitespace run before it starts (a match starting
            # inside that run, or at the literal, would also match at the run's start, longer)
            lits = wide.lits
            i = scan
            while True:
                hit = lits.search(text, i)
                if hit is None:
                    break
                p = q = hit.start()
                while p > i and text[p - 1] in _WS_CHARS:
                    p -= 1
                budget -= 1
                if budget < 0 or not budget % CLOCK_EVERY and perf_counter() > deadline:
                    raise _Fallback(automaton=True)
                found = _decide_at(watched, text, p, wide)
                if found is not None:
                    break
                i = q + 1
            if hit is None:
                break
            s, e, pi, m = found
        else:
            if dead is None:
                dead = set()  # offset * states + state: where attempts without any match went (`_dfa_decide`)
                after = [-1] * len(modes)  # per mode: where its single start literal next occurs (n: nowhere)
            found = None
            i = scan
            while i < n:
                if single is not None:
                    p = after[mi]
                    if p < i:
                        p = text.find(single, i)
                        after[mi] = p = n if p < 0 else p
                elif i == 0 and start0:
                    p = 0
                elif wide is not None:
                    # just after a failed attempt, the rest of a whitespace run is tried at once (the memo of
                    # dead states makes that cheap); elsewhere the anchors say where to look
                    p = i if dead and i < n and text[i] in wide.wchars else wide.next(text, i)
                else:
                    hit = first_re.search(text, i)
                    if hit is None:
                        break
                    p = hit.start()
                if p >= n:  # a match starting at the very end never counts (as in the reference)
                    break
                budget -= 1
                if budget < 0 or not budget % CLOCK_EVERY and perf_counter() > deadline:
                    raise _Fallback(automaton=True)
                if wide is not None:
                    # `regex` where the text left is short, as in WholeTextScanner (its scan for the pattern's
                    # literal then reads little, and the call costs less than an attempt stepped in Python:
                    # bench/PERF_NOTES.md#wide-candidates), else one attempt of the automaton
                    found = (_decide_at(watched, text, p, wide.at_run_end and wide) if n - p <= SCAN_PRONE_LIMIT
                             else _dfa_decide(tables, wide.mode, text, p, dead))
                    if found is not None:
                        dead.clear()
                        break
                    i = p + 1
                    continue
                found = _decide_at(watched, text, p)
                if found is not None:
                    break
                i = p + 1
            if found is None:
                break
            s, e, pi, m = found
        # -- the delimiter closes the current region ... --
        if s > pos and current is not None:
            opened = True
        had = opened
        if current is not None and opened:
            stores[current](output, text[pos:s], captures, tool_params)
        if opens[pi]:  # ... and opens its field
            current, opened = pat_field[pi], True
            captures = read_captures[pi](m) if read is None else read(m)
            mi = 1 + current
            first_re, start0, wide, single, watched, keyed, shaped = modes[mi]
            empty_open = s if s == e else -1
        else:  # ... and the implicit field may open after it
            if not had and s == e:
                stalled = True
                if e < n:
                    warn_stall(s)
                break
            if s == e == empty_open:  # the same zero-width open would come again here, forever
                stalled = True
                warn_loop(s, tables.fields[current]["name"])
                break
            current, opened, captures = implicit, False, {}
            mi = 0
            first_re, start0, wide, single, watched, keyed, shaped = modes[0]
        pos = scan = e
    if not stalled:
        if n > pos and current is not None:
            opened = True
        if current is not None and opened:
            stores[current](output, text[pos:], captures, tool_params)
    return final_output(tables, output)


def _lean_native(tables, native, stores, read_captures, text: str, output: dict, tool_params: dict, budget: int,
                 deadline: float) -> dict:
    """`_parse_lean` where every mode is decided by string tests or by a keyed literal: the regions the C loop
    (`lean_regions`) finds, stored in order with the same store functions (the captures read from the match a
    keyed decision gave, as the Python loop reads them), and its stops (a stall, a loop, the budget or the
    deadline) handled as the Python loop handles them."""
    found, status, at, end = _native_regions(native, text, budget, deadline, perf_counter)
    for field, body, open_pi, m, read in found:
        captures = {} if open_pi < 0 else read_captures[open_pi](m) if read is None else read(m)
        stores[field](output, body, captures, tool_params)
    if status == 1 and end < len(text):  # (statuses: 0 the end, 1 a stall, 2 a loop, 3 the budget or the deadline)
        warn_stall(at)
    elif status == 2:
        warn_loop(at, tables.fields[end]["name"])
    elif status == 3:
        raise _Fallback(automaton=True)
    return final_output(tables, output)


def _decide_at(watched: list, text: str, p: int, wide=None):
    """The delimiter starting at `p` among a mode's `watched` patterns (`plan.Watched`):
    ``(p, end, pattern index, match or None)``, or None. Literal patterns are decided by ``str.startswith``,
    others by `regex` after their literal-prefix test (with a timeout where they could backtrack badly and
    no bound keeps the call short: `_Fallback` to the automaton when it runs out); among matches, the
    longest, then the tie rank. With `wide` (a whitespace-led mode's `plan.WideFinder` that knows
    literals after the whitespace), a pattern led by ``\\s*`` is asked only where one of its literals starts
    at the end of the whitespace run from `p`."""
    best_key = found = None
    if wide is not None:
        ws, q, n = wide.run, p, len(text)
        while q < n and text[q] in ws:
            q += 1
        lit = wide.at_run_end.match(text, q)
        watched = wide.rest if lit is None else wide.by_lit[lit.group()]
    for pi, rx, risky, rank, pieces, prefixes in watched:
        if prefixes is not None and not text.startswith(prefixes, p):
            continue
        if pieces is not None:
            for piece in pieces:
                if text.startswith(piece, p):
                    key = (-len(piece), rank)
                    if best_key is None or key < best_key:
                        best_key, found = key, (p, p + len(piece), pi, None)
                    break
            continue
        m = _match_at(rx, risky, text, p) if risky else rx.match(text, p)
        if m is not None:
            key = (p - m.end(), rank)
            if best_key is None or key < best_key:
                best_key, found = key, (p, m.end(), pi, m)
    return found


def _decide_shaped(entries: tuple, text: str, p: int, q: int):
    """`_decide_at` at `p` for `plan._shaped` patterns, where the whitespace run from `p` ends at `q`
    and `entries` (`plan.shaped_entries`) are the alternatives that can match with the literal at
    `q`: each pattern's match is its first alternative whose run bounds admit ``q - p``, ending after its
    literal (and the whitespace run after it, for a trailing ``\\s*``), or at `q` for a lookahead; among
    them the longest, then the tie rank. The same answer as the `regex` calls (`literals.literal_shapes`
    says why), without any. (Run bounds are 0 or unbounded above, so a match that does not start at `p`
    can only start at `q`.)"""
    best_key = found = None
    run = q - p
    for pi, rank, alternatives in entries:
        for run_min, run_max, length, after in alternatives:
            if not run_min <= run <= run_max:
                continue
            if after == SHAPE_AHEAD:
                e = q
            else:
                e = q + length
                if after == SHAPE_TRAIL:
                    n = len(text)
                    while e < n and text[e] in _WS_CHARS:
                        e += 1
            key = (p - e, rank)
            if best_key is None or key < best_key:
                best_key, found = key, (p, e, pi, None)
            break
    return found


def keyed_decider(key: tuple, length: int):
    """The decision of `_parse_lean`'s keyed branch at a candidate where the literal of `key` (a `plan.Keyed`
    whose pattern is no mere literal), `length` characters long, starts, as a function for the C loop
    (`lean_regions`): ``decide(text, p)`` gives None where nothing matches at p, else ``(end, pattern index,
    match, capture reader or None)``, step for step what the branch decides there (the same calls, the same
    timeouts: `_Fallback`)."""
    pi, rx, risky, read = key
    if pi >= 0:
        if risky is False:
            match = rx.match

            def decide(text: str, p: int):
                m = match(text, p)
                return None if m is None else (m.end(), pi, m, read)
        else:
            def decide(text: str, p: int):
                m = _match_at(rx, risky, text, p)
                return None if m is None else (m.end(), pi, m, read)
        return decide
    first_only = pi == -2

    def decide_among(text: str, p: int):
        return _best_among(rx, first_only, length, text, p)

    return decide_among


def _best_among(entries: tuple, first_only: bool, length: int, text: str, p: int):
    """Where several patterns start with the literal (`length` characters long) found at `p`: of `entries`
    (``(Keyed, tie rank)`` pairs, `plan._keyed`), the longest match, then the smallest tie rank, as ``(end,
    pattern index, match, capture reader)``, or None. `first_only` (-2): no two of them can match at one start,
    so the first match is the only one."""
    best = None
    for (cpi, crx, crisky, cread), rank in entries:
        if crx is None:  # (that pattern is this literal)
            cm, ce = None, p + length
        else:
            cm = crx.match(text, p) if crisky is False else _match_at(crx, crisky, text, p)
            if cm is None:
                continue
            ce = cm.end()
        if best is None or (p - ce, rank) < best[0]:
            best = ((p - ce, rank), ce, cpi, cm, cread)
            if first_only:
                break
    return None if best is None else best[1:]


def _match_at(rx, risky, text: str, p: int):
    """`rx`'s match at `p` or None, with the care its `risky` (`plan.Risk`) asks for."""
    if type(risky) is WindowTwin:
        # the call may stop right after the (k+1)-th c (`stops_within`): only that span needs to be ASCII
        bound = risky.bound
        span = bound.span
        stop = bound.test.match(text, p, p + span)
        if stop is not None:
            end = stop.end()
        elif len(text) - p <= span:
            end = len(text)
        else:
            return _guarded_match(rx, text, p)
        return (risky.twin if text.isascii() or text[p:end].isascii() else rx).match(text, p, end)
    if risky is not True and risky:
        # a `SpanBound` (c, k): no path takes more than k c's, so the call may stop at or after the (k+1)-th c
        # from p, and its time is polynomial in that span (`backtrack.match_bound`)
        span = risky.span
        if stops_within(text, p, risky.test, span):
            return rx.match(text, p, p + span)
        return _guarded_match(rx, text, p)
    if risky:
        return _guarded_match(rx, text, p)
    return rx.match(text, p)


def _guarded_match(rx, text: str, p: int):
    try:
        return rx.match(text, p, timeout=MATCH_TIMEOUT)
    except TimeoutError as e:
        raise _Fallback(automaton=True) from e


def _dfa_decide(tables, mode, text: str, p: int, dead: set):
    """The delimiter starting at `p` in a whitespace-led `mode` (``(p, end, pattern index, match or None)``),
    or None: one attempt of the mode's automaton, as `Scanner` steps it, with `regex` only to confirm a
    pattern the tables do not decide exactly and to read named groups within the match.

    `dead` holds (offset, state) pairs of earlier attempts in this mode that ended without any match: an
    attempt that reaches one of them would follow the same path from there, so it stops. Attempts that end
    without a match add the pairs of their leading whitespace run, where attempts overlap. This keeps a
    long whitespace run, where every offset is a candidate, linear. Past the run, literals and self-loops
    are crossed in C as `Scanner` does for a lone attempt.

    Why not `regex` at once: for a pattern such as ``\\s*</think>`` each `regex` call first looks for the
    literal over the whole rest of the text, so calls at many candidates would cost time quadratic in the
    length; the automaton reads only as far as the attempt lives."""
    trans, acc, term, ncls = mode.trans, mode.acc, mode.term, mode.n_classes
    nst = len(acc)
    cmap = tables.cmap
    n = len(text)
    st = mode.start0 if p == 0 else mode.startN
    if not st:
        return None
    ends: dict = {}
    hit = acc[st]
    if hit is not None:
        record_ends(ends, hit, p)
    i = p
    path = []
    jump, loop, wchars = mode.jump, mode.loop, mode.wchars
    in_run = True  # the memo is kept for the leading whitespace run, where attempts overlap
    if not term[st]:
        while i < n:
            if not in_run and (jump[st] is not None or loop[st] is not None):
                i, st = mode.cross(text, i, n, st)  # literals and self-loops in C
                if i >= n:
                    continue  # (to the end-of-text step below)
            c = text[i]
            st = trans[st * ncls + cmap[ord(c)]]
            i += 1
            if not st:
                break
            if in_run:
                if c in wchars:
                    key = i * nst + st
                    if key in dead:
                        break
                    path.append(key)
                else:
                    in_run = False
            hit = acc[st]
            if hit is not None:
                record_ends(ends, hit, i)
            if term[st]:
                break
        else:  # the attempt is alive at the end of the text: one end-of-text step
            st = mode.eot[st]
            hit = acc[st] if st else None
            if hit is not None:
                record_ends(ends, hit, n)
    if not ends:
        dead.update(path)
        return None
    return pick_winner(tables, mode, text, 0, p, ends)


def parse_whole(tables, tool_params: dict, text: str) -> dict:
    """The message for the complete `text` (cut prefix + generation), as `StreamParser` would give it.

    Three ways to the same answer, cheapest first: the lean path (`_parse_lean`); the streaming parser's
    region logic with `regex` deciding delimiters (`WholeTextScanner`), where whitespace-led modes on long
    texts keep the automaton; the automaton alone, if `regex` hits a timeout or the candidate budget (the
    lean path's timeouts and budget go to it directly)."""
    if LEAN:
        try:
            return _parse_lean(tables, tool_params, text)
        except _Fallback as f:
            if f.automaton:
                return _parse_by_automaton(tables, tool_params, text)
    core = StreamParser(tables, tool_params)
    core.scanner = WholeTextScanner(tables, text)
    try:
        return core.finish()[0]
    except _Fallback:
        return _parse_by_automaton(tables, tool_params, text)


def _parse_by_automaton(tables, tool_params: dict, text: str) -> dict:
    core = StreamParser(tables, tool_params)
    core.feed(text)
    return core.finish()[0]
