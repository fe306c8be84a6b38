"""A delimiter pattern's leading lookbehind, checked where an automaton attempt would start.

The tables approximate a lookbehind by the empty string (`chatparse.compiler.regex_ast`): an attempt starts
wherever the rest of the pattern could match, and `regex` decides the lookbehind once the attempt is
resolved. Until then the attempt holds its characters back as a possible delimiter, even where the
lookbehind already fails: the reference (whose `regex` partial search sees the lookbehind fail) releases
them a feed earlier. A lookbehind at the very start of a pattern reads only characters before the attempt's
start, all known when the attempt would start, so it can be checked there instead.

`leading_assertion` finds such a lookbehind in a pattern's source. `start_guards` works out, per character
class, which patterns an attempt starting with that character could still match (from the automaton: the
patterns some path from the state it reaches accepts), and for those with a leading lookbehind, which state
the attempt starts in when some of their lookbehinds fail: the start state with those patterns projected out
(`_Projection`: states added to the mode's tables, that never accept the excluded patterns and are decided as
soon as no other pattern can match), or no attempt when that leaves no pattern (`Scanner._step_run`). That is
exact: a pattern whose lookbehind fails where an attempt starts can match nothing from there, so the attempt
is what it would be without it; and beside a pattern without a lookbehind it no longer keeps the attempt (and
the characters it holds) alive until its own view in the tables ends.
"""

from __future__ import annotations

import numpy as np
import regex

__all__ = ["leading_assertion", "start_guards"]


def _class_end(source: str, i: int) -> int:
    """The index just past the character class that opens at ``source[i] == "["``."""
    n = len(source)
    i += 1
    if i < n and source[i] == "^":
        i += 1
    if i < n and source[i] == "]":
        i += 1  # a leading ']' is a member
    while i < n and source[i] != "]":
        i += 2 if source[i] == "\\" else 1
    return i + 1


def _group_end(source: str, i: int) -> int:
    """The index just past the group that opens at ``source[i] == "("`` (escapes and character classes
    skipped), or -1 if it never closes."""
    depth = 0
    n = len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(source, i)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return -1


def _top_level_bar(source: str, i: int) -> bool:
    """Whether ``source[i:]`` has a ``|`` outside every group (then an earlier group binds one branch only).
    An unbalanced source counts as having one (no guard is derived from it)."""
    n = len(source)
    while i < n:
        c = source[i]
        if c == "|":
            return True
        if c == "\\":
            i += 2
        elif c == "[":
            i = _class_end(source, i)
        elif c == "(":
            i = _group_end(source, i)
            if i < 0:
                return True
        else:
            i += 1
    return False


def leading_assertion(source: str) -> str | None:
    """The source of the lookbehind that every match of pattern `source` starts with (``(?<=...)`` or
    ``(?<!...)``, at the start of the pattern, with no top-level alternative after it), or None."""
    if not source.startswith(("(?<=", "(?<!")):
        return None
    end = _group_end(source, 0)
    if end < 0 or _top_level_bar(source, end):
        return None
    return source[:end]


def _live_patterns(mode) -> list[int]:
    """Per DFA state, a bitmask of the mode's local patterns that some path from it (the end of the text
    included) can still match: its own accepts, or'ed over its strongly connected component and everything
    the component reaches (Tarjan's algorithm, iterative, which completes components successors first), so
    the cost is one pass over the transitions whatever the number of patterns."""
    n = len(mode.term)
    ncls = mode.n_classes
    trans, eot, acc = mode.trans, mode.eot, mode.acc
    own = [0] * n
    for s, hit in enumerate(acc):
        if hit is not None:
            for p, _ in hit:
                own[s] |= 1 << p
    succ: list = [()] * n
    for s in range(1, n):
        succ[s] = tuple(t for t in set(trans[s * ncls:(s + 1) * ncls]) | {eot[s]} if t)
    index = [-1] * n
    low = [0] * n
    on_stack = [False] * n
    stack: list = []
    live = [0] * n
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            edges = succ[v]
            while i < len(edges):
                w = edges[i]
                i += 1
                if index[w] < 0:
                    work.append((v, i))
                    work.append((w, 0))
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:  # v roots a component: every state it reaches outside is done
                    members = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        members.append(w)
                        if w == v:
                            break
                    mask = 0
                    for w in members:
                        mask |= own[w]
                        for t in succ[w]:
                            if not on_stack[t]:
                                mask |= live[t]
                    for w in members:
                        live[w] = mask
                if work:
                    u = work[-1][0]
                    low[u] = min(low[u], low[v])
    return live


# Per mode, at most this many distinct leading lookbehinds get start states of their own (below: 2**n subsets),
# and at most this many states, of at most this many transitions in all, are added for them (beyond that, the
# mode keeps only the all-guarded rule). The JavaScript runtime has the same limits.
MAX_LOOKBEHINDS = 6
MAX_EXTRA_STATES = 4096
MAX_EXTRA_CELLS = 1 << 21


def start_guards(mode, sources: list[str], start: int | None = None) -> tuple:
    """``(guards, starts)`` for a mode whose pattern sources (in local order) are `sources`, for attempts that
    would start in state `start` (`startN` unless given: `start0` is the other, at offset 0).

    `starts`, per character class: None (an attempt starting with a character of that class starts in
    `startN`), or ``(lookbehinds, by_failed, every)``. `lookbehinds` are the distinct leading lookbehinds of
    the candidates at that class (the patterns some path from ``trans[startN][c]`` accepts, and those `startN`
    itself accepts); where an attempt is to start in `startN`, it starts in ``by_failed[k]``, where bit j of
    `k` is set when ``lookbehinds[j]`` fails at that offset (``by_failed[0]`` is `startN`). `every` is True when
    every candidate is lookbehind-led. None for the whole mode when no class has such a candidate, or when a
    lookbehind cannot be compiled on its own.

    ``by_failed[k]`` is `startN` with the candidates of the failing lookbehinds projected out (`_Projection`,
    which adds those states to the mode's tables): an attempt there never records their matches, and is
    decided as soon as no other pattern can still match. So a lookbehind that fails where a pattern without
    one could still match does not hold the attempt's characters until the tables' view of the excluded
    pattern ends. Where every candidate is excluded it is the dead state: no attempt. A mode that would need
    more than MAX_LOOKBEHINDS distinct lookbehinds, or more than MAX_EXTRA_STATES new states or
    MAX_EXTRA_CELLS new transitions, keeps only that last rule.

    `guards` is that last rule alone, per class: the lookbehinds one of which must hold for an attempt to
    start, where every candidate is lookbehind-led, else None (None for the whole mode when no class has
    one). The JavaScript runtime's `startGuards` computes the same (tests/test_format.py)."""
    found = [leading_assertion(s) for s in sources]
    if all(f is None for f in found):
        return None, None
    try:
        compiled = {f: regex.compile(f, regex.DOTALL) for f in found if f is not None}
    except regex.error:
        return None, None
    live = _live_patterns(mode)
    ncls = mode.n_classes
    if start is None:
        start = mode.startN
    nullable = live[start] & sum(1 << p for p, _ in (mode.acc[start] or ()))
    by_target: dict = {}  # (one answer per state reached: a file may have 65,535 classes)
    out: list = []
    for c in range(ncls):
        t = mode.trans[start * ncls + c]
        if t not in by_target:
            alive = nullable | (live[t] if t else 0)
            ps = [p for p in range(len(found)) if alive >> p & 1]
            guarded = [p for p in ps if found[p] is not None]
            g = None
            if guarded:
                groups: dict = {}
                for p in guarded:
                    groups[found[p]] = groups.get(found[p], 0) | 1 << p
                g = (tuple(compiled[f] for f in groups), tuple(groups.values()), len(guarded) == len(ps))
            by_target[t] = g
        out.append(by_target[t])
    entries = [g for g in by_target.values() if g is not None]
    made: dict = {}  # id(entry) -> by_failed
    project = _Projection(mode, live) if len(compiled) <= MAX_LOOKBEHINDS else None
    if project is not None:
        try:
            for rxs, bits, every in entries:
                by_failed = [start]
                for k in range(1, 1 << len(bits)):
                    mask = sum(b for j, b in enumerate(bits) if k >> j & 1)
                    by_failed.append(0 if every and k == (1 << len(bits)) - 1 else project.state(start, mask))
                made[id(rxs)] = by_failed
        except _TooMany:
            project = None
        else:
            project.install()
    if project is None:  # the all-guarded rule alone
        made = {id(rxs): [start] * ((1 << len(bits)) - 1) + [0] for rxs, bits, every in entries if every}
    entry: dict = {None: None}  # id(rxs) -> the class's `starts` entry (None where no start state changes)
    for rxs, bits, every in entries:
        by_failed = made.get(id(rxs))
        entry[id(rxs)] = None if by_failed is None or all(s == start for s in by_failed) else (rxs, by_failed, every)
    starts = [entry[None if g is None else id(g[0])] for g in out]
    guards = [g[0] if g is not None and g[2] else None for g in out]
    return (guards if any(g is not None for g in guards) else None,
            starts if any(g is not None for g in starts) else None)


class _TooMany(Exception):
    pass


class _Projection:
    """States of a mode's DFA with some of its patterns projected out (`start_guards`): state ``(s, mask)``
    steps as `s` does, records only the accepts of patterns not in `mask`, and is terminal once no pattern
    outside `mask` can still match on any path from it (the dead state if it accepts none then). Where no
    pattern of `mask` can match from `s` any more, ``(s, mask)`` is `s` itself. New states are numbered after
    the mode's own, and made only as far as they are reached."""

    def __init__(self, mode, live: list):
        self.mode = mode
        self.live = live
        self.n = len(mode.term)
        self.memo: dict = {}
        self.rows: list = []  # per new state: (transition row or None, eot, acc, term)
        self.todo: list = []

    def _future(self, s: int) -> int:
        """The patterns some path from `s` accepts after at least one more step (a character or the end)."""
        mode, live = self.mode, self.live
        out = live[mode.eot[s]] if mode.eot[s] else 0
        for t in np.unique(mode.tmat[s]).tolist():
            if t:
                out |= live[t]
        return out

    def _id(self, s: int, mask: int) -> int:
        if s == 0 or not self.live[s] & mask:
            return s
        key = (s, mask)
        sid = self.memo.get(key)
        if sid is None:
            hits = tuple(h for h in (self.mode.acc[s] or ()) if not mask >> h[0] & 1) or None
            future = self._future(s) & ~mask
            if hits is None and not future:
                sid = 0
            else:
                if len(self.rows) >= MAX_EXTRA_STATES or (len(self.rows) + 1) * self.mode.n_classes > MAX_EXTRA_CELLS:
                    raise _TooMany
                sid = self.n + len(self.rows)
                self.rows.append((None, 0, hits, not future))
                if future:
                    self.todo.append((s, mask, sid))
            self.memo[key] = sid
        return sid

    def state(self, s: int, mask: int) -> int:
        """`s` with the patterns in `mask` projected out (0: dead), made with every state it reaches."""
        first = self._id(s, mask)
        mode = self.mode
        while self.todo:
            s0, m, sid = self.todo.pop()
            targets, inverse = np.unique(mode.tmat[s0], return_inverse=True)
            mapped = np.asarray([self._id(t, m) for t in targets.tolist()], dtype=np.int64)
            _, _, hits, term = self.rows[sid - self.n]
            self.rows[sid - self.n] = (mapped[inverse.ravel()], self._id(mode.eot[s0], m), hits, term)
        return first

    def install(self) -> None:
        """Append the new states to the mode's tables (`trans`, `tmat`, `eot`, `acc`, `term`; no `jump` or
        `loop` for them: a lone attempt in one steps character by character)."""
        if not self.rows:
            return
        mode = self.mode
        zero = np.zeros(mode.n_classes, dtype=np.int64)
        block = np.stack([zero if row is None else row for row, _, _, _ in self.rows])
        mode.tmat = np.vstack([mode.tmat, block.astype(mode.tmat.dtype)])
        mode.trans = mode.trans + block.ravel().tolist()
        mode.eot = mode.eot + [e for _, e, _, _ in self.rows]
        mode.acc = mode.acc + [h for _, _, h, _ in self.rows]
        mode.term = mode.term + [t for _, _, _, t in self.rows]
        mode.jump = mode.jump + [None] * len(self.rows)
        mode.loop = mode.loop + [None] * len(self.rows)
