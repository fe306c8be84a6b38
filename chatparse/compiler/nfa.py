"""Thompson NFA with ordered (priority) epsilon edges, built from a `regex_ast` tree.

The order of a SPLIT's targets is the order in which a backtracking engine such as `regex` tries them:
alternatives left to right, a greedy loop before its exit, a lazy loop after it. The subset construction in
`dfa` keeps threads in that order, which is what lets a DFA reproduce leftmost-first match ends exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHAR, SPLIT, MATCH, MATCH_NL, BOL, EOT = range(6)

MAX_NFA_STATES = 20_000


@dataclass
class NFA:
    kind: list = field(default_factory=list)
    arg: list = field(default_factory=list)  # CHAR: set index; others: unused
    nxt: list = field(default_factory=list)  # CHAR/BOL/EOT: [next]; SPLIT: ordered targets
    start: int = -1

    def add(self, kind: int, arg=None, nxt=None) -> int:
        if len(self.kind) >= MAX_NFA_STATES:
            raise ValueError(f"pattern too large: more than {MAX_NFA_STATES} NFA states (the limit per delimiter, "
                             "chatparse.compiler.nfa.MAX_NFA_STATES); counted repeats of up to "
                             "regex_ast.COUNT_LIMIT states are expanded: use fewer alternatives or smaller bounds")
        self.kind.append(kind)
        self.arg.append(arg)
        self.nxt.append(list(nxt or []))
        return len(self.kind) - 1


def build_nfa(ast: tuple, set_index) -> NFA:
    """Compile `ast` into an NFA. `set_index(ranges) -> int` interns character sets across a template."""
    nfa = NFA()
    match = nfa.add(MATCH)
    nfa.start = _compile(nfa, ast, match, set_index)
    return nfa


def _compile(nfa: NFA, node: tuple, nxt: int, set_index) -> int:
    kind = node[0]
    if kind == "set":
        return nfa.add(CHAR, set_index(node[1]), [nxt])
    if kind == "seq":
        for child in reversed(node[1]):
            nxt = _compile(nfa, child, nxt, set_index)
        return nxt
    if kind == "alt":
        return nfa.add(SPLIT, None, [_compile(nfa, c, nxt, set_index) for c in node[1]])
    if kind == "eps":
        return nxt
    if kind == "bol":
        return nfa.add(BOL, None, [nxt])
    if kind == "eot":
        return nfa.add(EOT, None, [nxt])
    if kind == "dollar":
        # End of text, or a final "\n" then end of text; the second match ends before that "\n".
        match_nl = nfa.add(MATCH_NL)
        before_nl = nfa.add(CHAR, set_index(((10, 10),)), [nfa.add(EOT, None, [match_nl])])
        return nfa.add(SPLIT, None, [nfa.add(EOT, None, [nxt]), before_nl])
    if kind == "rep":
        _, lo, hi, greedy, body = node
        if hi is None:
            loop = nfa.add(SPLIT)
            inner = _compile(nfa, body, loop, set_index)
            nfa.nxt[loop] = [inner, nxt] if greedy else [nxt, inner]
            nxt = loop
        else:
            end = nxt  # x{0,3} is (x(x(x)?)?)?: every optional copy exits straight to the continuation
            for _ in range(hi - lo):
                inner = _compile(nfa, body, nxt, set_index)
                nxt = nfa.add(SPLIT, None, [inner, end] if greedy else [end, inner])
        for _ in range(lo):
            nxt = _compile(nfa, body, nxt, set_index)
        return nxt
    raise ValueError(f"unknown AST node {kind}")
