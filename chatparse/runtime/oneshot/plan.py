"""What a one-shot parse needs of a template, computed once per loaded tables (`plan_for`).

Per mode: how to find candidate starts (one literal with ``str.find``, a `re` alternation of the literals
every match starts with, an 8-character prefilter, or, for whitespace-led modes, `WideFinder`), and per
watched pattern its literal pieces or prefixes (runtime/regex/literals.py), whether its `regex` calls need a
timeout (runtime/regex/backtrack.py) and its tie rank. Where the literal a candidate search finds names the one
pattern that can match there, a table from literal to that pattern (`_keyed`), with the `re` twins of its
alternatives (runtime/regex/re_compat.py). runtime/oneshot/parse.py runs the parse.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional, Union

import numpy as np
import regex

from ..regex.backtrack import SpanBound, backtracking_risk, bounded_call
from ..regex.literals import literal_pieces, literal_prefixes, literal_shapes, literals_after_whitespace, top_alternatives
from ..regex.re_compat import ascii_twin
from ..stream.parser import capture_reader, flat_defaults, stores_for
from ..tables.layout import _prefilter, whitespace_closure
from ..values.json_end import json_end_fields
from ..values.recovery import on_error_modes
from .lean_regions import native_specs

LEAN_PREFILTER_DEPTH = 8  # characters the one-shot prefilters look ahead (streaming uses 3)

#: How a watched pattern's `regex` calls are made (`oneshot._match_at`): False, a plain ``rx.match``; True, with
#: a timeout (the pattern can backtrack badly); a `backtrack.SpanBound`, no timeout where the span it bounds is
#: short (else with a timeout); a `WindowTwin`, its `re` twin where that span is ASCII. Kept as these plain
#: values (no common class) because the hot path tests ``risky is False`` / ``if risky`` per candidate.
Risk = Union[bool, "SpanBound", "WindowTwin"]
_LOOKBEHIND = re.compile(r"\(\?<[=!]")  # (a `WindowTwin` reads the text from its call's start on)


# Two records are read once per candidate start on the hot path, so they stay plain tuples (CPython unpacks an
# exact tuple in one specialised step and a NamedTuple, a tuple subclass, through its iterator: see
# bench/PERF_NOTES.md#namedtuple-unpacking). Their layouts, in order:
#: One pattern a mode watches, as `oneshot._decide_at` tries it at a candidate start: ``(pi, rx, risky, rank,
#: pieces, prefixes)``: the pattern index; its compiled `regex`; its `Risk`; its tie rank ((0 for an open, 1 for
#: a close; the field's name): the reference's order for equal-length matches at one start); the literal strings
#: the pattern is (`literals.literal_pieces`) or None; when it is not a literal, the literals every match starts
#: with (`literals.literal_prefixes`) or None.
Watched = tuple
#: `_keyed`'s entry for a literal the candidate search finds, the one pattern that can match there: ``(pi, rx,
#: risky, read)``: the pattern index; the compiled pattern (or its `re` twin) to run at the literal, None when
#: the literal is the match; its `Risk`; its capture reader (match -> named groups), None for a literal.
Keyed = tuple
#: `shaped_entries`' entry for a pattern that can match where a literal the search finds starts: ``(pi, rank,
#: alternatives)``: the pattern index, its tie rank, ``(run_min, run_max, length, after)`` per alternative that
#: can match there (`literals.literal_shapes`, with the length of the literal it takes).
Shaped = tuple


class ModePlan(NamedTuple):
    """How the lean path finds and decides delimiters in one mode (`Plan.modes` / `Plan.ascii_modes`)."""

    finder: Any  # the candidate search (``.search(text, i)``): a `re` alternation, a prefilter or `_NOWHERE`
    start0: bool  # offset 0 is a candidate of its own (`^` may hold there)
    wide: Optional["WideFinder"]  # whitespace-led mode: its candidate finder (and automaton), else None
    # the one literal every match starts with (a str; the lean path then reads `finder` only for a wide mode),
    # or a (literal, pattern index, length) triple when that literal is the mode's only delimiter, or None
    single: Union[None, str, tuple]
    watched: list  # of `Watched` tuples
    keyed: Optional[dict]  # `_keyed`'s table (literal -> `Keyed` tuple) or None
    shaped: Optional[tuple]  # `_shaped`'s (search, literal -> `Shaped` tuples, solos, led) or None


class LeanPlan(NamedTuple):
    """The rest `parse._parse_lean` reads of a template."""

    usable: bool  # every mode has a prefilter (else the lean path is not used)
    stores: list  # per field: its store (`parser.stores_for`)
    implicit: Optional[int]  # the implicit field's index
    opens: list  # per pattern: whether it opens its field
    pat_field: list  # per pattern: its field's index
    read_captures: list  # per pattern: its capture reader
    defaults: dict  # the template's defaults (a message starts as a copy of them)
    flat: bool  # every default is a scalar: a plain dict copy of them shares nothing (`parser.flat_defaults`)


class Plan:
    """What the lean path needs of a template, computed once per loaded tables (`plan_for`).

    ``modes[m]``: the `ModePlan` of mode m; ``ascii_modes``: the same with `_keyed`'s table for ASCII text.
    ``lean``: the `LeanPlan`; ``native`` / ``native_ascii``: its `lean_regions` specs (any text / ASCII text), or
    None. ``captures``: per pattern, its capture reader (match -> named groups).

    ``mode_tuples`` / ``ascii_mode_tuples``: the same `ModePlan`s as plain tuples, which `parse._parse_lean`
    unpacks at every delimiter (an exact tuple unpacks faster than a NamedTuple; see `Watched`).
    `Watched` and `Keyed` records are plain tuples for the same reason."""

    __slots__ = ("usable", "modes", "ascii_modes", "mode_tuples", "ascii_mode_tuples", "captures", "lean", "native",
                 "native_ascii")

    def __init__(self, tables):
        self.captures = [capture_reader(p.rx) for p in tables.patterns]  # per pattern: match -> named groups
        risky = [_windowed(p.source, backtracking_risk(p.source) and _bounded(p.source), read)
                 for p, read in zip(tables.patterns, self.captures)]
        names = [f["name"] for f in tables.fields]
        self.usable = all(m.first_re is not None for m in tables.modes)
        self.modes = []
        self.ascii_modes = []  # the same, with `_keyed`'s tables for text that is all ASCII
        for mode in tables.modes:
            watched = []
            for pi in mode.patterns:
                pat = tables.patterns[pi]
                rank = (0 if pat.kind == "open" else 1, names[pat.field])
                pieces = literal_pieces(pat.source)
                watched.append((pi, pat.rx, risky[pi], rank, pieces,  # a `Watched`
                                literal_prefixes(pat.source) if pieces is None else None))
            # Candidates: when every match starts with one of a few literals, exactly where one occurs (one
            # literal: `str.find`; several: a `re` alternation of them, which scans faster than several finds);
            # else the deeper prefilter; whitespace-led modes use their `WideFinder`.
            finder = single = keyed = ascii_keyed = None  # (the lean path reads `finder` only if `single` is None)
            starts = [pieces if pieces is not None else prefixes for _, _, _, _, pieces, prefixes in watched]
            # offset 0 is a candidate of its own (`^` may hold there) unless every match starts with a literal,
            # which the search finds at offset 0 as anywhere else
            start0 = bool(mode.start0) and not (watched and all(starts))
            if not watched:  # a field without a close: nothing ends its region
                finder = _NOWHERE
            elif all(starts):
                starts = list(dict.fromkeys(x for st in starts for x in st))
                if len(starts) == 1:
                    single = starts[0]
                    pi, _, _, _, pieces, _ = watched[0]
                    if len(watched) == 1 and pieces == (single,):
                        # the mode's one delimiter is this literal: where it occurs, it is the delimiter
                        single = (single, pi, len(single))
                else:
                    finder = re.compile("|".join(map(re.escape, starts)), re.DOTALL)
                    if not mode.wchars:
                        keyed, ascii_keyed = _keyed(watched, tables.patterns, self.captures, mode)
            else:
                finder = _deep_prefilter(tables, mode)
            wide = WideFinder(tables, mode, watched) if mode.wchars else None
            shaped = None if type(single) is tuple else _shaped(watched, tables.patterns)
            self.modes.append(ModePlan(finder, start0, wide, single, watched, keyed, shaped))
            self.ascii_modes.append(ModePlan(finder, start0, wide, single, watched, ascii_keyed, shaped))
        self.mode_tuples = [tuple(m) for m in self.modes]
        self.ascii_mode_tuples = [tuple(m) for m in self.ascii_modes]
        # (a region that closes at the end of its JSON value needs the streaming parser's tracker, and on_error
        # its region texts and events: no lean path for those templates)
        lean_ok = self.usable and not any(json_end_fields(tables)) and not any(on_error_modes(tables))
        self.lean = LeanPlan(lean_ok, stores_for(tables), tables.implicit,
                             [p.kind == "open" for p in tables.patterns], [p.field for p in tables.patterns],
                             self.captures, tables.template["defaults"], flat_defaults(tables))
        from .parse import keyed_decider  # (parse.py imports this module)

        self.native, self.native_ascii = native_specs(self, _WS_CHARS, _NOWHERE, keyed_decider)


class _Nowhere:
    """The candidate search of a mode that watches no pattern (`re` would try every offset to say so)."""

    @staticmethod
    def search(text: str, pos: int = 0) -> None:
        return None


_NOWHERE = _Nowhere()


def _bounded(source: str):
    """A risky pattern's care: its `backtrack.SpanBound` when it has a `match_bound`, else True."""
    bound = bounded_call(source)
    return True if bound is None else bound


def _windowed(source: str, risk, read):
    """`risk` (a `Risk`), or for a pattern with a `SpanBound`, no lookbehind and an `ascii_twin`, a
    `WindowTwin` of the whole pattern (glm-4.5's tool-call open: `re` takes a third of `regex`'s time). Its
    group numbers are the pattern's own (the same source, no duplicate names: `re` refuses those), so
    `read`, the pattern's capture reader, reads the twin's matches too."""
    if type(risk) is not SpanBound or _LOOKBEHIND.search(source):
        return risk
    twin = ascii_twin(source)
    return risk if twin is None else WindowTwin(twin, risk, read, read)


def _keyed(watched: list, patterns: list, readers: list, mode) -> tuple:
    """For a mode whose every delimiter match starts with one of a few literals: two tables, literal ->
    `Keyed` (pattern index; compiled pattern, risk and capture reader, or None for a pattern that is that
    literal), when no literal is a prefix of another; (None, None) otherwise.

    Then the literal the candidate search found at an offset is the only one there, so only the patterns
    that start with it can match there, and of each only the top-level alternative that starts with that
    literal: a literal pattern is decided, another needs one call, and the others need no look
    (`oneshot._decide_at` would try each). A literal several patterns start with (gpt-oss's
    ``<|channel|>commentary``: a tool call's header, or a preamble's) keys ``(-1, ((Keyed, tie rank), ...),
    None, None)``: each of them is asked, and the longest match wins, then the tie rank; or ``(-2, ...)`` when
    no two of them can match at one start (`_exclusive`: gpt-oss's two cannot), so the first match is the
    only one. The second table is for text that is all ASCII: there an alternative that cannot backtrack
    badly is run by `re` where it means the same (`re_compat.ascii_twin`)."""
    by_lit: dict = {}  # literal -> {pattern index: tie rank}, in watch order
    for pi, _rx, _risky, rank, pieces, prefixes in watched:
        for lit in pieces if pieces is not None else prefixes:
            by_lit.setdefault(lit, {})[pi] = rank
    for a in by_lit:
        for b in by_lit:
            if a != b and b.startswith(a):
                return None, None
    entry = {pi: (pi, None, None, None) if pieces is not None else (pi, rx, risky, readers[pi])
             for pi, rx, risky, _rank, pieces, _prefixes in watched}
    keyed: dict = {}
    ascii_keyed: dict = {}
    for lit, ranks in by_lit.items():
        plain, ascii = zip(*[_keyed_entry(lit, entry[pi], patterns) for pi in ranks])
        if len(ranks) == 1:
            keyed[lit], ascii_keyed[lit] = plain[0], ascii[0]
        else:
            how = -2 if _exclusive(mode, [mode.patterns.index(pi) for pi in ranks], patterns) else -1
            keyed[lit] = (how, tuple(zip(plain, ranks.values())), None, None)
            ascii_keyed[lit] = (how, tuple(zip(ascii, ranks.values())), None, None)
    return keyed, ascii_keyed


EXCLUSIVE_MAX_CELLS = 1 << 19  # transition cells beyond which `_exclusive` does not look (and answers False)


def _exclusive(mode, local: list, patterns: list) -> bool:
    """True when no two of the mode's patterns `local` (local indices, all decided by the tables alone) can
    match at one start: then at a start where one matches, it is the only match, and the longest-match rule
    has nothing to choose. False when that is not shown (a pattern `regex` decides, or tables too large).

    Why the automaton shows it: for an exact pattern, the mode's automaton records the pattern's match end
    (`acc`) at the state it reaches there, whatever else it tracks. If patterns A and B both match at a start,
    the attempt passes a state recording the earlier of the two ends (say A's) from which B still accepts,
    there or later. So it is enough that no state reachable from a start records one of them while another
    can still be recorded from it or its successors (its "live" set). Both sets are walks over the
    automaton's edges, each edge taken once per pattern, so the time is linear in the tables' size."""
    if len(local) < 2 or not all(patterns[mode.patterns[li]].exact for li in local):
        return False
    n_states = mode.tmat.shape[0]
    if mode.tmat.size > EXCLUSIVE_MAX_CELLS:
        return False
    succ = np.concatenate([mode.tmat, np.asarray(mode.eot)[:, None]], axis=1)  # (the end-of-text step too)
    acc = np.zeros((n_states, len(local)), bool)
    for s, hits in enumerate(mode.acc):
        for li, _back in hits or ():
            if li in local:
                acc[s, local.index(li)] = True
    acc[0] = False  # (state 0: the attempt is dead)
    src = np.repeat(np.arange(n_states), succ.shape[1])
    dst = succ.ravel()
    order = np.argsort(dst, kind="stable")  # predecessors of each state, as slices of `pred`
    pred, bounds = src[order], np.searchsorted(dst[order], np.arange(n_states + 1))
    live = np.zeros_like(acc)  # live[s, k]: pattern k accepts at s or after it
    for k in range(len(local)):
        todo = np.flatnonzero(acc[:, k]).tolist()
        live[todo, k] = True
        while todo:
            t = todo.pop()
            for s in pred[bounds[t]:bounds[t + 1]].tolist():
                if s and not live[s, k]:
                    live[s, k] = True
                    todo.append(s)
    after = live[succ].any(axis=1)  # pattern k accepts strictly after s (live[0] is False)
    seen = _reached(succ, [s for s in {mode.start0, mode.startN} if s])
    for s in np.flatnonzero(seen & acc.any(axis=1)).tolist():
        if (acc[s] | after[s]).sum() > 1:  # one ends here while another ends here or later
            return False
    return True


def _reached(succ, starts: list):
    """The states (a bool array) an attempt from `starts` reaches through the successor table `succ`."""
    seen = np.zeros(succ.shape[0], bool)
    seen[starts] = True
    todo = list(starts)
    while todo:
        for t in set(succ[todo.pop()].tolist()):
            if t and not seen[t]:
                seen[t] = True
                todo.append(t)
    return seen


def _shaped(watched: list, patterns: list):
    """For a mode whose every watched pattern is `literals.literal_shapes` and one at least is no mere list
    of literals (qwen3's ``\\s*<think>``, ``\\s*</think>\\s*|\\s*(?=<tool_call>)``, ``</tool_call>\\s*``):
    ``(search, by literal, solos, led)``. `search` (a `re` alternation of every literal, longest first) finds
    the next literal any match needs; `by literal` gives, per literal, `shaped_entries` (what can match
    where it starts); `solos`, per literal where that is one pattern's one alternative, its ``(pattern
    index, run_min, run_max, length, after)``, which `parse._parse_lean` decides inline; `led` says
    whether any alternative has a whitespace lead (then a match may start where the whitespace run before
    the literal starts). None for other modes: modes of literal patterns alone are decided by `_keyed` or
    ``str.find`` with less work per candidate."""
    if all(w[4] is not None for w in watched):  # (no pattern, or literal `pieces` only)
        return None
    shaped = [(w[0], w[3], literal_shapes(patterns[w[0]].source)) for w in watched]
    if not all(sh for _, _, sh in shaped):
        return None
    every = sorted({lit for _, _, sh in shaped for _, _, lits, _ in sh for lit in lits}, key=len, reverse=True)
    by_lit = {m: shaped_entries(m, shaped) for m in every}
    solos = {m: (entries[0][0], *entries[0][2][0]) for m, entries in by_lit.items()
             if len(entries) == 1 and len(entries[0][2]) == 1}
    led = any(run_max for _, _, sh in shaped for _, run_max, _, _ in sh)
    return re.compile("|".join(map(re.escape, every))), by_lit, solos, led


def shaped_entries(lit: str, shaped: list) -> tuple:
    """`Shaped` entries for where `lit` is the longest of a mode's literals that starts at a candidate's
    literal position: of each pattern ``(pattern index, tie rank, shapes)`` in `shaped` (watch order), the
    alternatives that can match there, as ``(run_min, run_max, length, after)``, `length` that of the
    alternative's first literal `lit` starts with (which `regex` takes there: every literal that starts
    there is a prefix of `lit`, the longest)."""
    entries = []
    for pi, rank, shapes in shaped:
        alts = tuple((run_min, run_max, len(first), after) for run_min, run_max, lits, after in shapes
                     for first in [next((x for x in lits if lit.startswith(x)), None)] if first is not None)
        if alts:
            entries.append((pi, rank, alts))
    return tuple(entries)


def _keyed_entry(lit: str, keyed: tuple, patterns: list) -> tuple:
    """`_keyed`'s entries for pattern `keyed` under literal `lit`: (any text, ASCII text). Where the one
    top-level alternative that starts with `lit` has an `ascii_twin`: the twin for ASCII text when it cannot
    backtrack badly, or a `WindowTwin` in both when a bound keeps its calls short."""
    pi, rx, risky, read = keyed
    if rx is None:
        return keyed, keyed
    alternatives = [alt for alt in top_alternatives(patterns[pi].source) if literal_prefixes(alt) == (lit,)]
    if len(alternatives) != 1:
        return keyed, keyed
    twin = ascii_twin(alternatives[0])
    if twin is None:
        return keyed, keyed
    alt_risk = backtracking_risk(alternatives[0]) and _bounded(alternatives[0])
    twin_read = capture_reader(twin)
    if alt_risk is False:
        return keyed, (pi, twin, False, twin_read)
    if alt_risk is not True and not _LOOKBEHIND.search(alternatives[0]):
        # bounded: the twin runs where the bounded span is ASCII (`re` has no timeout); a lookbehind would read
        # before the span
        window = WindowTwin(twin, alt_risk, read, twin_read)
        return (pi, rx, window, window.read), (pi, rx, window, window.read)
    return keyed, keyed


class WindowTwin:
    """The risk of a keyed alternative whose calls `backtrack.match_bound` keeps within a short span (`bound`,
    a `backtrack.SpanBound`) and whose `re` twin means what it means on ASCII text: `oneshot._match_at` runs
    the twin where the span it may read, from the candidate on, is ASCII (such an alternative has no
    lookbehind, and nothing in it reads past that span), and the pattern itself elsewhere. `read` reads the
    captures of either's match."""

    __slots__ = ("twin", "bound", "_rx_read", "_twin_read")

    def __init__(self, twin, bound, rx_read, twin_read):
        self.twin, self.bound, self._rx_read, self._twin_read = twin, bound, rx_read, twin_read

    def read(self, m) -> dict:
        return self._twin_read(m) if m.re is self.twin else self._rx_read(m)


def _deep_prefilter(tables, mode):
    """The mode's prefilter looking LEAN_PREFILTER_DEPTH characters ahead (the streaming one, 3, when it
    cannot be built): built once per template, it lets far fewer candidates through in text that shares a
    few characters with a delimiter (``</td>`` against ``\\s*</think>``)."""
    sources = getattr(tables, "class_sources", None)
    if sources is None or mode.first_re is None:
        return mode.first_re
    return _prefilter(mode, sources, depth=LEAN_PREFILTER_DEPTH) or mode.first_re


class WideFinder:
    """Candidates in a whitespace-led mode (delimiters such as ``\\s*</think>``): `Mode.skip_to`'s, found
    with fewer Python steps. `Mode.skip_to` stops at every *anchor* (a non-whitespace character a match can
    start with or reach after a whitespace run) and asks a prefilter; in code or HTML that is every '<'.
    Here the prefilters themselves, restricted to start with an anchor, do the search: ``after`` (from every
    state a whitespace run reaches) finds the next anchor worth a look, ``at`` (from the start state) checks
    an anchor with no whitespace before it; the candidate is the start of the whitespace run before the
    anchor, as in `skip_to`. Both filters look LEAN_PREFILTER_DEPTH characters ahead."""

    __slots__ = ("mode", "wchars", "after", "at", "run", "at_run_end", "by_lit", "rest", "lits")

    def __init__(self, tables, mode, watched: list):
        self.mode = mode
        self.wchars = mode.wchars
        self._after_whitespace(tables.patterns, watched)
        self.after = self.at = None
        sources = getattr(tables, "class_sources", None)
        if sources is None:
            return
        w_classes, states = whitespace_closure(mode, sources)
        if "".join(chr(cp) for c in w_classes for lo, hi in sources[c] for cp in range(lo, hi + 1)) != mode.wchars:
            return
        anchors = frozenset(range(mode.n_classes)) - frozenset(w_classes)
        self.after = _prefilter(mode, sources, states, LEAN_PREFILTER_DEPTH, anchors)
        self.at = _prefilter(mode, sources, None, LEAN_PREFILTER_DEPTH, anchors)
        if self.after is None or self.at is None:
            self.after = self.at = None

    def _after_whitespace(self, patterns: list, watched: list) -> None:
        """What `oneshot._decide_at` reads to ask fewer patterns at a candidate: `at_run_end`, a `re`
        alternation of the literals one of which each pattern led by ``\\s*`` has where the whitespace run
        (`run`: the characters `regex`'s \\s takes) ends (`literals_after_whitespace`), longest first, so that
        its match is the longest literal there and the others there are its prefixes; `by_lit`: per such
        literal, the watched patterns that can match with it (those with a literal it starts with, and the
        others); `rest`: those that can match where none starts. None where the mode watches fewer than two
        such patterns: one is asked anyway (the prefilter has looked past the whitespace already).

        `lits`: `at_run_end` where `rest` is empty (every pattern is led by whitespace and one of the
        literals), else None. Then a match needs one of them, so the literals' next occurrence, with the
        whitespace run before it, is the next candidate (`parse._parse_lean`): no prefilter, no automaton."""
        self.run, self.at_run_end, self.lits = _WS_CHARS, None, None
        lits = {w[0]: got for w in watched if (got := literals_after_whitespace(patterns[w[0]].source))}
        if len(lits) < 2:
            return
        every = sorted({lit for got in lits.values() for lit in got}, key=len, reverse=True)
        self.at_run_end = re.compile("|".join(map(re.escape, every)), re.DOTALL)
        self.rest = [w for w in watched if w[0] not in lits]
        if not self.rest:
            self.lits = self.at_run_end
        self.by_lit = {m: [w for w in watched if w[0] not in lits or any(m.startswith(lit) for lit in lits[w[0]])]
                       for m in every}

    def next(self, text: str, i: int) -> int:
        """The first candidate at or after `i` (len(text) if none)."""
        if self.after is None:
            return self.mode.skip_to(text, i)
        w = self.wchars
        while True:
            m = self.after.search(text, i)
            if m is None:  # a whitespace run at the very end may still matter (\s*$)
                return i + len(text[i:].rstrip(w))
            q = p = m.start()
            while p > i and text[p - 1] in w:  # (back over the whitespace before the anchor, without a copy)
                p -= 1
            # (a prefilter too wide to name its anchors, such as one that took any character, may stop on
            # whitespace: the run there is a candidate like any other)
            if p < q or text[q] in w or self.at.match(text, q):
                return p
            i = q + 1


# the characters `regex`'s \s takes (a delimiter's leading \s*), found by asking it once (none lies past U+3000;
# tests/test_oneshot.py checks all of Unicode). Runs are short: a loop over them costs less than a call.
_WS_CHARS = frozenset(regex.findall(r"\s", "".join(map(chr, range(0x3001)))))


def plan_for(tables) -> Plan:
    plan = getattr(tables, "oneshot_plan", None)
    if plan is None:
        plan = tables.oneshot_plan = Plan(tables)
    return plan
