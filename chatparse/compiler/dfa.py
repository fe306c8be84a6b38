"""Combined leftmost-first DFA for the delimiters watched in one parser mode.

A mode watches several patterns at once (outside any region: every explicit open plus the implicit field's
close; inside field F: F's close). One DFA state is, for every watched pattern, the ordered list of NFA
threads still alive for an attempt that started at one position - the subset construction of a Pike VM.

Match semantics, stated precisely (they are the `regex` module's for a match attempted at a fixed start):

* Leftmost-first per pattern. Threads are kept in backtracking priority order; when a thread reaches MATCH,
  every lower-priority thread of that pattern is dropped. The pattern's match end is then the last position at
  which its thread list held a MATCH before it became empty. This is exact for patterns without lookaround
  or backreferences (regex-automata's leftmost-first DFA does the same).
* Regex-decided patterns (see `regex_ast`) are not pruned: their threads only tell whether a match is still
  possible, and `regex` decides the real one on the short span. Except those whose AST still orders their
  matches as `regex` does (a leading lookbehind, checked where an attempt starts, and trailing lookaheads, read
  as consumed text: `regex_ast.Analysis.loose`, `build`): pruned, their threads end as soon as `regex`'s match
  is certain, which `regex` still decides.
* Start states: ``start0`` for an attempt at offset 0 of the stream (``^``/``\\A`` hold), ``startN`` elsewhere.
* End of text is one extra symbol, EOT, fed once at finalize: ``\\Z`` waits for it, ``$`` waits for it
  directly or after one ``\\n`` (that match then ends before the ``\\n``: accept code 1).

Per state the tables hold: ``trans[state, class]``, ``eot[state]``, ``acc[state, pattern]`` (-1: no match ends
here, 0: a match ends here, 1: a match ends one character back) and ``term[state]``: no input can change the
outcome any more, so an attempt in that state is decided now (this is what lets a complete literal commit at
the very end of a feed without waiting for the next character).
State 0 is the dead state.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .nfa import BOL, CHAR, EOT, MATCH, MATCH_NL, NFA

MAX_DFA_STATES = 20_000


@dataclass
class ModeDFA:
    trans: np.ndarray
    eot: np.ndarray
    acc: np.ndarray
    term: np.ndarray
    start0: int
    startN: int


def _closure(nfa: NFA, roots, ctx0: bool, after_eot: bool, pruned: bool, out: list, seen: set) -> bool:
    """Append the threads reachable from `roots` by epsilon moves, in priority order. True if pruned at MATCH."""
    stack = list(reversed(roots))
    kind, nxt = nfa.kind, nfa.nxt
    while stack:
        s = stack.pop()
        if s in seen:
            continue
        seen.add(s)
        k = kind[s]
        if k == CHAR:
            if not after_eot:
                out.append(s)
        elif k == EOT:
            if after_eot:
                stack.append(nxt[s][0])
            else:
                out.append(s)
        elif k == BOL:
            if ctx0:
                stack.append(nxt[s][0])
        elif k == MATCH or k == MATCH_NL:
            out.append(s)
            if pruned:
                return True
        else:  # SPLIT
            stack.extend(reversed(nxt[s]))
    return False


def _step(nfa: NFA, threads: tuple, member_k, pruned: bool) -> tuple:
    out: list = []
    seen: set = set()
    for t in threads:
        if nfa.kind[t] == CHAR and member_k[nfa.arg[t]]:
            if _closure(nfa, nfa.nxt[t], False, False, pruned, out, seen):
                break
    return tuple(out)


def _step_eot(nfa: NFA, threads: tuple, pruned: bool) -> tuple:
    out: list = []
    seen: set = set()
    for t in threads:
        if nfa.kind[t] == EOT:
            if _closure(nfa, nfa.nxt[t], False, True, pruned, out, seen):
                break
    return tuple(out)


def _accept(nfa: NFA, threads: tuple) -> int:
    for t in threads:
        if nfa.kind[t] == MATCH:
            return 0
        if nfa.kind[t] == MATCH_NL:
            return 1
    return -1


def build_mode_dfa(nfas: list[NFA], pruned: list[bool], membership: np.ndarray, what: str) -> ModeDFA:
    """Subset-construct the product DFA of `nfas` over the template's character classes.

    `membership[k, j]` says whether class k lies in character set j. Raises ValueError naming `what` when the
    automaton would exceed MAX_DFA_STATES, so a hostile or accidental pattern cannot make compilation run away.
    """
    n_classes = membership.shape[0]
    member_rows = [membership[k].tolist() for k in range(n_classes)]
    # A state's key holds only the patterns with live threads, as ((pattern, threads), ...) in pattern order:
    # the work per state is then in the live patterns, not in every pattern the mode watches (outside any
    # region that is every field's open, so a dense key made a template of many fields quadratic).
    dead: tuple = ()
    ids = {dead: 0}
    states = [dead]

    def intern(key) -> int:
        sid = ids.get(key)
        if sid is None:
            if len(states) >= MAX_DFA_STATES:
                raise ValueError(f"{what}: delimiter automaton exceeds {MAX_DFA_STATES} states of its DFA (the limit "
                                 "per parser mode, chatparse.compiler.dfa.MAX_DFA_STATES); simplify the patterns (fewer overlapping wildcards or bounded "
                                 "repeats) or split them across fewer fields watched at once")
            sid = ids[key] = len(states)
            states.append(key)
        return sid

    def initial(ctx0: bool) -> int:
        key = []
        for p, (nfa, pr) in enumerate(zip(nfas, pruned)):
            out: list = []
            _closure(nfa, [nfa.start], ctx0, False, pr, out, set())
            if out:
                key.append((p, tuple(out)))
        return intern(tuple(key))

    start0, startN = initial(True), initial(False)
    trans_rows: list = []
    eot_col: list = []
    memo: dict = {}
    i = 0
    while i < len(states):
        key = states[i]
        row = []
        for k in range(n_classes):
            nk = []
            member_k = member_rows[k]
            for p, threads in key:
                mk = (p, threads, k)
                r = memo.get(mk)
                if r is None:
                    r = memo[mk] = _step(nfas[p], threads, member_k, pruned[p])
                if r:
                    nk.append((p, r))
            row.append(intern(tuple(nk)) if nk else 0)
        trans_rows.append(row)
        ek = []
        for p, threads in key:
            r = _step_eot(nfas[p], threads, pruned[p])
            if r:
                ek.append((p, r))
        eot_col.append(intern(tuple(ek)) if ek else 0)
        i += 1

    n = len(states)
    acc = np.full((n, len(nfas)), -1, dtype=np.int8)
    term = np.zeros(n, dtype=bool)
    for sid, key in enumerate(states):
        live = False
        for p, threads in key:
            nfa = nfas[p]
            acc[sid, p] = _accept(nfa, threads)
            if not live and any(nfa.kind[t] in (CHAR, EOT) for t in threads):
                live = True
        term[sid] = not live
    return ModeDFA(
        trans=np.array(trans_rows, dtype=np.int32).reshape(n, n_classes),
        eot=np.array(eot_col, dtype=np.int32),
        acc=acc,
        term=term,
        start0=start0,
        startN=startN,
    )
