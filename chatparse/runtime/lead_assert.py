"""A delimiter pattern's leading lookbehind, checked where an automaton attempt would start.

The tables approximate a lookbehind by the empty string (`chatparse.compiler.regex_ast`): an attempt starts
wherever the rest of the pattern could match, and `regex` decides the lookbehind once the attempt is
resolved. Until then the attempt holds its characters back as a possible delimiter, even where the
lookbehind already fails: the reference (whose `regex` partial search sees the lookbehind fail) releases
them a feed earlier. A lookbehind at the very start of a pattern reads only characters before the attempt's
start, all known when the attempt would start, so it can be checked there instead.

`leading_assertion` finds such a lookbehind in a pattern's source. `start_guards` works out, per character
class, which patterns an attempt starting with that character could still match (from the automaton: the
patterns some path from the state it reaches accepts); where every one of them has a leading lookbehind, the
attempt starts only if one of those holds (`Scanner._step_run`). That is exact: such an attempt where every
candidate's lookbehind fails can match nothing.
"""

from __future__ import annotations

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


def start_guards(mode, sources: list[str]) -> list | None:
    """Per character class: the compiled leading lookbehinds one of which must hold where an attempt
    starting with a character of that class (after offset 0) is to start, or None (start it; always None
    where a pattern without a leading lookbehind could still match from there). None for the whole mode when
    no class is guarded. `sources` are the mode's pattern sources, in local order."""
    found = [leading_assertion(s) for s in sources]
    if all(f is None for f in found):
        return None
    try:
        compiled = {f: regex.compile(f, regex.DOTALL) for f in found if f is not None}
    except regex.error:
        return None
    live = _live_patterns(mode)
    ncls = mode.n_classes
    start = mode.startN
    nullable = live[start] & sum(1 << p for p, _ in (mode.acc[start] or ()))
    out: list = []
    by_target: dict = {}  # (one answer per state reached: a file may have 65,535 classes)
    for c in range(ncls):
        t = mode.trans[start * ncls + c]
        if t not in by_target:
            alive = nullable | (live[t] if t else 0)
            ps = [p for p in range(len(found)) if alive >> p & 1]
            if not ps or any(found[p] is None for p in ps):
                by_target[t] = None
            else:
                by_target[t] = tuple(dict.fromkeys(compiled[found[p]] for p in ps))
        out.append(by_target[t])
    return out if any(g is not None for g in out) else None
