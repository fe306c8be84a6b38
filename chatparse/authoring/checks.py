"""Static checks of a response template, decided on the automata the compiler builds.

Every delimiter is turned into two Thompson NFAs by the compiler's own front end (`regex_ast` + `nfa`):

* the *match* automaton - what the tables use: a trailing lookahead is consumed, other assertions are empty,
  so it accepts a superset of the texts at which the delimiter can match;
* the *consumed* automaton - every lookahead and end anchor empty, so it accepts the spans a match eats.

All automata share one alphabet (the partition of the code points by every character set used, plus ``\\s``),
so products between them are cheap. Per parser mode the leftmost-first combined DFA is built with the
compiler's `build_mode_dfa` - the automaton the runtime executes (on a possibly finer alphabet). Checks:

``never-fires``   a watched delimiter that never wins at any position: whenever it matches, another one
                  wins by the reference's rule (earliest start, longest, open before close, field name), or
                  its automaton accepts nothing at all (error; warning when a regex-decided pattern is involved)
``empty-match``   a delimiter that matches the empty string anywhere, with nothing (not even a lookahead) to
                  anchor it (warning)
``overlap``       two delimiters of different fields watched together that both match one text (warning)
``swallow``       the implicit field's close consumes part of another field's open, which then never fires
                  there (error)
``contains``      an open spells another watched delimiter inside it (outside any wildcard): where both match,
                  the open wins (info: by design in several formats)
``consumes``      an explicit field's close can eat a whole open of another field: inside a region only its
                  close is watched, so that field can never open there (warning)
``unbounded-hold``a delimiter whose automaton loops before any literal character: the parser must hold back
                  text without bound while an attempt is alive (warning; info when the loop is whitespace only)
``needs-regex``   the tables cannot decide the pattern alone; `regex` runs on a short window, and why (info;
                  warning when the window is unbounded)
``backtracking``  exponential ambiguity (two ways to match one text inside a loop: nested quantifiers,
                  overlapping alternatives under a quantifier) - the reference's backtracking `regex` may take
                  exponential time on near-misses (warning)
``compile``       the template is refused by the loader or the compiler (error)

interegular (a declared dependency) is used as an independent cross-check of ASCII-only intersections in
`interegular_intersects`; it cannot parse anchors or lookarounds and reads ``\\w\\d\\s`` as ASCII, so the
checks themselves use the automata above, which follow `regex`'s Unicode classes exactly.
"""

from __future__ import annotations

import re
import re._parser as sre_parse
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chatparse.compiler.build import delimiter_source
from chatparse.compiler.charsets import MAX_CP, class_ranges, normalize, partition
from chatparse.compiler.dfa import build_mode_dfa
from chatparse.compiler.nfa import BOL, CHAR, EOT, MATCH, MATCH_NL, NFA, build_nfa
from chatparse.compiler.regex_ast import Analysis, PatternError, _convert, _unique_group_names, analyse, literal_ast

__all__ = ["Finding", "run_checks", "Automata", "format_findings", "interegular_intersects", "SEVERITIES"]

SEVERITIES = ("error", "warning", "info")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}
MAX_LANG_STATES = 5000
MAX_SEARCH_NODES = 60_000
TIE_RULE = "earliest start, then longest, then open before close, then field name"


@dataclass(frozen=True)
class Finding:
    severity: str  # "error" | "warning" | "info"
    check: str  # see the module docstring
    field: str | None  # field name, None for template-wide findings
    key: str | None  # "open", "open_pattern", "close", "close_pattern", "chat_template", ...
    message: str

    @property
    def where(self) -> str:
        if self.field is None:
            return self.key or "template"
        return f"{self.field}.{self.key}" if self.key else self.field

    def __str__(self) -> str:
        return f"{self.severity}: {self.where}: {self.message} [{self.check}]"

    def as_dict(self) -> dict:
        return {"severity": self.severity, "check": self.check, "field": self.field, "key": self.key,
                "message": self.message}


def format_findings(findings: list[Finding]) -> str:
    return "\n".join(str(f) for f in sort_findings(findings))


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_RANK[f.severity], f.where, f.check))


# ------------------------------------------------------------------------------------------------ alphabet


_WS = class_ranges(r"\s")
_PREFERRED = ("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 \n_-.:,;!?\"'<>/\\|[]{}()=+*&^%$#@~`\t"
              "\r\x0b\x0c")


class Alphabet:
    """Interned character sets and their partition into classes (see `charsets.partition`)."""

    def __init__(self):
        self.sets: list = []
        self._ids: dict = {}
        self.frozen = False

    def index(self, ranges) -> int:
        assert not self.frozen
        ranges = normalize(ranges)
        if ranges not in self._ids:
            self._ids[ranges] = len(self.sets)
            self.sets.append(ranges)
        return self._ids[ranges]

    def freeze(self) -> None:
        self.ws_set = self.index(_WS)
        self.frozen = True
        starts, class_of_interval, membership = partition(self.sets)
        self.starts = starts.tolist()
        self.class_of_interval = class_of_interval.tolist()
        self.membership = membership
        self.n = int(membership.shape[0])
        self.member_rows = [membership[k].tolist() for k in range(self.n)]
        self.classes_of_set = [np.nonzero(membership[:, j])[0].tolist() for j in range(membership.shape[1])]
        self.ws_classes = frozenset(self.classes_of_set[self.ws_set])
        ends = self.starts[1:] + [MAX_CP + 1]
        self.class_intervals: list = [[] for _ in range(self.n)]
        for lo, hi, c in zip(self.starts, ends, self.class_of_interval):
            self.class_intervals[c].append((lo, hi - 1))
        self.rep = [self._pick(k) for k in range(self.n)]
        self.single = [len(iv) == 1 and iv[0][0] == iv[0][1] for iv in self.class_intervals]

    def class_of(self, cp: int) -> int:
        import bisect

        return self.class_of_interval[bisect.bisect_right(self.starts, cp) - 1]

    def _pick(self, k: int) -> str:
        for ch in _PREFERRED:
            if self.class_of(ord(ch)) == k:
                return ch
        for lo, hi in self.class_intervals[k]:
            for cp in range(lo, min(hi, lo + 64) + 1):
                if not 0xD800 <= cp <= 0xDFFF:
                    return chr(cp)
        return chr(self.class_intervals[k][0][0])

    def ranges(self, classes) -> tuple:
        return normalize([iv for k in classes for iv in self.class_intervals[k]])

    def is_literal(self, classes) -> bool:
        r = self.ranges(classes)
        return len(r) == 1 and r[0][0] == r[0][1]


def describe_ranges(ranges, limit: int = 48) -> str:
    """A short regex-class-like description of a code-point set (``'<'``, ``[a-z]``, ``\\s``, ``[^\\s<]``)."""
    from chatparse.compiler.charsets import complement

    ranges = tuple(ranges)
    if ranges == _WS:
        return r"\s"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return repr(chr(ranges[0][0]))
    size = sum(hi - lo + 1 for lo, hi in ranges)
    inner, neg = (complement(ranges), "^") if size > (MAX_CP + 1) // 2 else (ranges, "")
    if not inner:
        return "any character"
    text = ""
    if _subset(_WS, inner):  # spell the whitespace part as \s
        text, inner = r"\s", _minus(inner, _WS)
    parts = [_class_char(lo) if lo == hi else f"{_class_char(lo)}-{_class_char(hi)}"
             for lo, hi in inner if (lo, hi) != (0xD800, 0xDFFF)]
    text += "".join(parts)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return f"[{neg}{text}]"


def _subset(a, b) -> bool:
    return all(any(lo2 <= lo and hi <= hi2 for lo2, hi2 in b) for lo, hi in a)


def _minus(a, b) -> tuple:
    from chatparse.compiler.charsets import complement

    cb = complement(b)
    out = []
    for lo, hi in a:
        for lo2, hi2 in cb:
            x, y = max(lo, lo2), min(hi, hi2)
            if x <= y:
                out.append((x, y))
    return normalize(out)


def _class_char(cp: int) -> str:
    ch = chr(cp)
    if ch in "\\]^-[":
        return "\\" + ch
    if ch == "\n":
        return r"\n"
    if ch == "\t":
        return r"\t"
    if ch == "\r":
        return r"\r"
    if ch == " ":
        return r"\x20"
    if 0x21 <= cp <= 0x7E:
        return ch
    if cp < 0x100:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}" if not ch.isprintable() or cp >= 0xD800 else ch
    return f"\\U{cp:08x}"


def show_text(s: str) -> str:
    """Render a witness string for a message: JSON-quoted, non-ASCII letters kept."""
    import json

    return json.dumps(s, ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ patterns


@dataclass
class Delim:
    """One watched delimiter, numbered as in the compiled tables' ``patterns``."""

    index: int
    kind: str  # "open" | "close"
    field_index: int
    field: str
    key: str  # "open" | "open_pattern" | "close" | "close_pattern"
    source: str
    exact: bool
    reasons: list
    history: int
    horizon: int  # -1: unbounded
    match_ast: tuple
    consumed_ast: tuple
    match_nfa: NFA | None = None
    consumed_nfa: NFA | None = None
    _lang: dict = field(default_factory=dict)

    @property
    def tie_key(self) -> tuple:
        return (0 if self.kind == "open" else 1, self.field)

    @property
    def label(self) -> str:
        return f"{self.field} {self.kind}"


def consumed_ast(pattern: str) -> tuple:
    """The AST of the text a match of `pattern` consumes: lookaheads and end anchors are empty."""
    parsed = sre_parse.parse(_unique_group_names(pattern), re.DOTALL)
    return _convert(parsed, parsed.state.flags, Analysis(ast=("eps",)), tail=False)


class Automata:
    """Everything the checks need about one template: delimiters, alphabet, per-pattern and per-mode DFAs."""

    def __init__(self, spec: dict, raw_tables: dict):
        self.spec = spec
        self.fields = spec["fields"]
        self.implicit = spec["implicit"]
        self.alpha = Alphabet()
        self.delims: list[Delim] = []
        for pi, p in enumerate(raw_tables["patterns"]):
            f = self.fields[p["field"]]
            delim = f[p["kind"]]
            if "literals" in delim:
                m_ast = c_ast = literal_ast(delim["literals"])
            else:
                m_ast = analyse(delim["pattern"]).ast
                c_ast = consumed_ast(delim["pattern"])
            assert p["source"] == delimiter_source(delim)
            self.delims.append(Delim(
                index=pi, kind=p["kind"], field_index=p["field"], field=f["name"], key=p["key"], source=p["source"],
                exact=bool(p["exact"]), reasons=list(p["reasons"]), history=int(p["history"]),
                horizon=int(p["horizon"]), match_ast=m_ast, consumed_ast=c_ast,
            ))
        for d in self.delims:
            d.match_nfa = build_nfa(d.match_ast, self.alpha.index)
            d.consumed_nfa = build_nfa(d.consumed_ast, self.alpha.index)
        self.alpha.freeze()
        # Modes exactly as the compiler builds them.
        self.mode_watch: list[list[int]] = [[
            d.index for d in self.delims
            if d.kind == "open" or (d.kind == "close" and d.field == self.implicit)
        ]]
        for fi, f in enumerate(self.fields):
            self.mode_watch.append([d.index for d in self.delims
                                    if d.field_index == fi and d.kind == "close" and f["name"] != self.implicit])
        self._modes: dict = {}

    def mode_dfa(self, mi: int):
        """The leftmost-first combined DFA of mode `mi` (`build_mode_dfa`), as Python lists."""
        if mi not in self._modes:
            watch = self.mode_watch[mi]
            md = build_mode_dfa([self.delims[i].match_nfa for i in watch], [self.delims[i].exact for i in watch],
                                self.alpha.membership, f"mode {mi}")
            self._modes[mi] = _ListDFA(md)
        return self._modes[mi]

    def lang(self, d: Delim, which: str = "match") -> "LangDFA":
        if which not in d._lang:
            d._lang[which] = LangDFA(d.match_nfa if which == "match" else d.consumed_nfa, self.alpha)
        return d._lang[which]


class _ListDFA:
    def __init__(self, md):
        self.trans = md.trans.tolist()
        self.eot = md.eot.tolist()
        self.acc = [[p for p, code in enumerate(row) if code >= 0] for row in md.acc.tolist()]
        self.term = md.term.tolist()
        self.start0 = int(md.start0)
        self.startN = int(md.startN)
        self.n = len(self.trans)


class LangDFA:
    """Plain (unordered) subset construction: which texts a delimiter matches in full, trimmed to live states.

    State 0 is dead. ``acc[s]``: a match ends here (possibly only at end of text). ``start0``/``startN``: an
    attempt at offset 0 of the stream (``^`` holds) / elsewhere.
    """

    def __init__(self, nfa: NFA, alpha: Alphabet):
        self.nfa, self.alpha = nfa, alpha
        self._eot_ok: dict = {}
        states: list = [frozenset()]
        ids = {frozenset(): 0}

        def intern(key) -> int:
            sid = ids.get(key)
            if sid is None:
                if len(states) >= MAX_LANG_STATES:
                    raise _TooComplex()
                sid = ids[key] = len(states)
                states.append(key)
            return sid

        self.start0 = intern(self._closure([nfa.start], True))
        self.startN = intern(self._closure([nfa.start], False))
        trans: list = []
        i = 0
        kind, arg, nxt = nfa.kind, nfa.arg, nfa.nxt
        rows = alpha.member_rows
        while i < len(states):
            key = states[i]
            chars = [t for t in key if kind[t] == CHAR]
            row = [0] * alpha.n
            if chars:
                for k in range(alpha.n):
                    mk = rows[k]
                    roots = [n for t in chars if mk[arg[t]] for n in nxt[t]]
                    if roots:
                        row[k] = intern(self._closure(roots, False))
            trans.append(row)
            i += 1
        acc = [self._accepts(key) for key in states]
        self.acc_now = [any(nfa.kind[t] == MATCH for t in key) for key in states]  # not waiting for EOT
        # Trim: keep only states from which an accepting state is reachable.
        rev: list = [[] for _ in states]
        for s, row in enumerate(trans):
            for t in set(row):
                rev[t].append(s)
        live = [False] * len(states)
        stack = [s for s in range(1, len(states)) if acc[s]]
        for s in stack:
            live[s] = True
        while stack:
            t = stack.pop()
            for s in rev[t]:
                if not live[s] and s != 0:
                    live[s] = True
                    stack.append(s)
        self.trans = [[t if live[t] else 0 for t in row] if live[s] else [0] * alpha.n for s, row in enumerate(trans)]
        self.acc = [acc[s] and live[s] for s in range(len(states))]
        self.live = live
        self.n = len(states)
        if not live[self.start0]:
            self.start0 = 0
        if not live[self.startN]:
            self.startN = 0

    def _closure(self, roots, ctx0: bool) -> frozenset:
        nfa = self.nfa
        out, seen, stack = set(), set(), list(roots)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            k = nfa.kind[s]
            if k in (CHAR, EOT, MATCH, MATCH_NL):
                out.add(s)
            elif k == BOL:
                if ctx0:
                    stack.append(nfa.nxt[s][0])
            else:
                stack.extend(nfa.nxt[s])
        return frozenset(out)

    def _accepts(self, key) -> bool:
        nfa = self.nfa
        for t in key:
            k = nfa.kind[t]
            if k in (MATCH, MATCH_NL):
                return True
            if k == EOT and self._eot_reaches_match(t):
                return True
        return False

    def _eot_reaches_match(self, e: int) -> bool:
        if e in self._eot_ok:
            return self._eot_ok[e]
        nfa, seen, stack, ok = self.nfa, set(), [nfa_next for nfa_next in self.nfa.nxt[e]], False
        while stack and not ok:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            k = nfa.kind[s]
            if k in (MATCH, MATCH_NL):
                ok = True
            elif k in (EOT,) or k not in (CHAR, BOL):
                stack.extend(nfa.nxt[s])
        self._eot_ok[e] = ok
        return ok


class _TooComplex(Exception):
    pass


# ------------------------------------------------------------------------------------------------ searches


def _path_text(alpha: Alphabet, parent: dict, node) -> str:
    chars = []
    while parent[node] is not None:
        node, k = parent[node]
        chars.append(alpha.rep[k])
    return "".join(reversed(chars))


def _intersection_witness(alpha: Alphabet, a: LangDFA, b: LangDFA) -> str | None:
    """Shortest text matched in full by both (attempts at the same position), or None."""
    starts = [(a.startN, b.startN), (a.start0, b.start0)]
    parent: dict = {}
    queue: deque = deque()
    for st in starts:
        if st[0] and st[1] and st not in parent:
            parent[st] = None
            queue.append(st)
    while queue:
        node = queue.popleft()
        x, y = node
        if a.acc[x] and b.acc[y]:
            return _path_text(alpha, parent, node)
        for k in range(alpha.n):
            nx, ny = a.trans[x][k], b.trans[y][k]
            if nx and ny and (nx, ny) not in parent:
                parent[(nx, ny)] = (node, k)
                queue.append((nx, ny))
    return None


def _path_text_eps(alpha: Alphabet, parent: dict, node) -> str:
    chars = []
    while parent[node] is not None:
        a, b = parent[node]
        if a == "eps":
            node = b
            continue
        node, k = a, b
        chars.append(alpha.rep[k])
    return "".join(reversed(chars))


def _contains(alpha: Alphabet, outer: LangDFA, inner: LangDFA, nonws: bool = True) -> str | None:
    """Like `_containment_witness` with epsilon moves handled in the parent map."""
    ws = alpha.ws_classes
    if not outer.startN or not inner.startN:
        return None
    parent: dict = {}
    queue: deque = deque()
    start = (outer.startN, 0, 0, False, False)  # outer, phase, inner, saw non-space, inner consumed >= 1
    parent[start] = None
    queue.append(start)
    while queue:
        node = queue.popleft()
        o, phase, i, saw, moved = node
        if phase == 2 and outer.acc[o]:
            return _path_text_eps(alpha, parent, node)
        eps = []
        if phase == 0:
            eps.append((o, 1, inner.startN, False, False))
        if phase == 1 and moved and inner.acc[i] and (saw or not nonws):
            eps.append((o, 2, 0, True, True))
        for child in eps:
            if child not in parent:
                parent[child] = ("eps", node)
                queue.appendleft(child)
        for k in range(alpha.n):
            no = outer.trans[o][k]
            if not no:
                continue
            if phase == 1:
                ni = inner.trans[i][k]
                if not ni:
                    continue
                child = (no, 1, ni, saw or k not in ws, True)
            else:
                child = (no, phase, 0, saw, moved)
            if child not in parent:
                parent[child] = (node, k)
                queue.append(child)
    return None


@dataclass
class _Outcome:
    fires: bool = False
    matches: bool = False
    shadow: tuple | None = None  # (witness text, winner local index)


def _winner_search(alpha: Alphabet, md: _ListDFA, keys: list, a: int) -> _Outcome:
    """Can local pattern `a` win an attempt in this mode? BFS over (state, current leader, a matched)."""
    out = _Outcome()

    def lead(accs, leader):
        return min(accs, key=lambda p: keys[p]) if accs else leader

    parent: dict = {}
    queue: deque = deque()
    for s in (md.start0, md.startN):
        if not s:
            continue
        node = (s, lead(md.acc[s], -1), a in md.acc[s])
        if node not in parent:
            parent[node] = None
            queue.append(node)

    def final(leader, seen, node, k):
        if leader == a:
            out.fires = True
        if seen:
            out.matches = True
            if leader != a and out.shadow is None:
                text = _path_text(alpha, parent, node) + (alpha.rep[k] if k is not None else "")
                out.shadow = (text, leader, k is None)

    visited = 0
    while queue and not out.fires:
        node = queue.popleft()
        visited += 1
        if visited > MAX_SEARCH_NODES:
            raise _TooComplex()
        s, leader, seen = node
        e = md.eot[s]
        if e:
            final(lead(md.acc[e], leader), seen or a in md.acc[e], node, None)
        else:
            final(leader, seen, node, None)
        for k in range(alpha.n):
            t = md.trans[s][k]
            if not t:
                final(leader, seen, node, k)
                continue
            child = (t, lead(md.acc[t], leader), seen or a in md.acc[t])
            if md.term[t]:
                if child not in parent:
                    parent[child] = (node, k)
                final(child[1], child[2], child, None)
                continue
            if child not in parent:
                parent[child] = (node, k)
                queue.append(child)
    return out


def _overlap_witness(alpha: Alphabet, md: _ListDFA, a: int, b: int) -> str | None:
    """Shortest text at which local patterns `a` and `b` both end a match from the same start."""
    parent: dict = {}
    queue: deque = deque()
    for s in (md.startN, md.start0):
        if s and (s,) not in parent:
            parent[(s,)] = None
            queue.append((s,))
    while queue:
        node = queue.popleft()
        s = node[0]
        if a in md.acc[s] and b in md.acc[s]:
            return _path_text(alpha, parent, node)
        e = md.eot[s]
        if e and a in md.acc[e] and b in md.acc[e]:
            return _path_text(alpha, parent, node)
        for k in range(alpha.n):
            t = md.trans[s][k]
            if t and (t,) not in parent:
                parent[(t,)] = (node, k)
                queue.append((t,))
    return None


def _swallow_witness(alpha: Alphabet, md: _ListDFA, keys: list, x: int, other: LangDFA) -> str | None:
    """A text where local pattern `x` wins the attempt at offset 0 while a match of `other` that started
    later has read a non-space character of the span `x` consumes - and cannot be found again from x's end
    with the same end (so a leading ``\\s*`` or ``[^<]*`` that merely gets shorter is not reported).

    `other`'s attempts at offsets >= 1 are a set of ``(state, read non-space, eaten, aux)``: for an attempt
    not (yet) eaten `aux` says whether it has matched; for an eaten one it is the state of the *restart*, the
    attempt from x's end, which covers the eaten one once both reach the same state."""
    def lead(accs, leader):
        return min(accs, key=lambda p: keys[p]) if accs else leader

    s0, o0 = md.startN, other.startN
    if not s0 or not o0:
        return None
    ws = alpha.ws_classes
    trans, acc = other.trans, other.acc
    parent: dict = {}
    queue: deque = deque()
    start = (s0, lead(md.acc[s0], -1), frozenset(), False)
    parent[start] = None
    queue.append(start)
    visited = 0
    while queue:
        node = queue.popleft()
        visited += 1
        if visited > MAX_SEARCH_NODES:
            raise _TooComplex()
        s, leader, attempts, hit = node
        e = md.eot[s]
        if hit and (lead(md.acc[e], leader) if e else leader) == x:
            return _path_text(alpha, parent, node)
        for k in range(alpha.n):
            t = md.trans[s][k]
            nonws = k not in ws
            n_hit = hit
            stepped = set()
            for q, nw, eaten, aux in attempts:
                q2 = trans[q][k] if q else 0
                if eaten:
                    if not q2:
                        continue
                    r2 = trans[aux][k] if aux else 0
                    if q2 == r2:
                        continue  # the restart from x's end covers it
                    if acc[q2] and not (r2 and acc[r2]):
                        n_hit = True
                    stepped.add((q2, True, True, r2))
                elif q2 or aux:
                    stepped.add((q2, nw or (nonws and bool(q2)), False, aux or bool(q2 and acc[q2])))
            if not t:
                if leader == x and (n_hit or any(a[2] and not a[3] for a in stepped)):
                    return _path_text(alpha, parent, node) + alpha.rep[k]
                continue
            accs = md.acc[t]
            if x in accs:  # x's match now ends here: every character read so far is inside it
                moved = set()
                for q, nw, eaten, aux in stepped:
                    if eaten:
                        if q != o0:
                            moved.add((q, True, True, o0))
                    elif nw:
                        if aux:
                            n_hit = True  # it already matched, entirely before x's new end
                        if q and q != o0:
                            moved.add((q, True, True, o0))
                    else:
                        moved.add((q, nw, eaten, aux))
                stepped = moved
            stepped = {a for a in stepped if a[0] or (not a[2] and a[3])}
            stepped.add((o0, False, False, bool(acc[o0])))
            n_leader = lead(accs, leader)
            child = (t, n_leader, frozenset(stepped), n_hit)
            if child in parent:
                continue
            parent[child] = (node, k)
            if md.term[t]:
                if n_leader == x and (n_hit or any(a[2] and not a[3] for a in stepped)):
                    return _path_text(alpha, parent, child)
                continue
            queue.append(child)
    return None


def _literal_containment(alpha: Alphabet, outer: LangDFA, inner: LangDFA) -> str | None:
    """A text `outer` matches in full containing a full, non-empty match of `inner` that `outer` reads through
    literal (single-character) edges only - containment by structure, not through a wildcard."""
    if not outer.startN or not inner.startN:
        return None
    parent: dict = {}
    queue: deque = deque()
    start = (outer.startN, 0, 0, False)  # outer state, phase (0 before, 1 inside, 2 after), inner, strict
    parent[start] = None
    queue.append(start)
    while queue:
        node = queue.popleft()
        o, phase, i, strict = node
        if phase == 2 and strict and outer.acc[o]:
            return _path_text_eps(alpha, parent, node)
        eps = []
        if phase == 0:
            eps.append((o, 1, inner.startN, strict))
        if phase == 1 and inner.acc[i] and parent[node] is not None and parent[node][0] != "eps":
            eps.append((o, 2, 0, strict))
        for child in eps:
            if child not in parent:
                parent[child] = ("eps", node)
                queue.appendleft(child)
        for k in range(alpha.n):
            no = outer.trans[o][k]
            if not no:
                continue
            if phase == 1:
                ni = inner.trans[i][k]
                if not ni or not alpha.single[k] or not _single_edge(outer, o, k):
                    continue
                child = (no, 1, ni, strict)
            else:
                child = (no, phase, 0, True)
            if child not in parent:
                parent[child] = (node, k)
                queue.append(child)
    return None


def _single_edge(dfa: LangDFA, s: int, k: int) -> bool:
    """Whether the edge of `s` on class `k` is a literal edge: no other class leads to the same target."""
    t = dfa.trans[s][k]
    return sum(1 for t2 in dfa.trans[s] if t2 == t) == 1


def _hold_cycle(alpha: Alphabet, dfa: LangDFA) -> tuple | None:
    """A loop reachable from the start through non-literal edges only: (prefix text, loop classes)."""
    s0 = dfa.startN
    if not s0:
        return None
    # Group each state's edges by target; keep the non-literal ones.
    wide: dict = {}
    for s in range(1, dfa.n):
        by_target: dict = {}
        for k, t in enumerate(dfa.trans[s]):
            if t:
                by_target.setdefault(t, []).append(k)
        wide[s] = {t: ks for t, ks in by_target.items() if not alpha.is_literal(ks)}
    parent: dict = {s0: None}
    order = [s0]
    queue = deque([s0])
    while queue:
        s = queue.popleft()
        for t, ks in wide[s].items():
            if t not in parent:
                parent[t] = (s, ks[0])
                order.append(t)
                queue.append(t)
    reach = set(order)
    sccs = _tarjan(order, lambda s: [t for t in wide[s] if t in reach])
    for comp in sccs:
        comp_set = set(comp)
        loop = [k for s in comp for t, ks in wide[s].items() if t in comp_set for k in ks]
        if loop:
            first = min(comp, key=order.index)
            text = []
            node = first
            while parent[node] is not None:
                node, k = parent[node]
                text.append(alpha.rep[k])
            return "".join(reversed(text)), sorted(set(loop))
    return None


def _tarjan(nodes, succ) -> list:
    """Strongly connected components (iterative Tarjan), each a list of nodes."""
    index: dict = {}
    low: dict = {}
    on: set = set()
    stack: list = []
    out: list = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(succ(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(succ(w))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                # keep only components with a cycle (size > 1 or a self loop)
                if len(comp) > 1 or v in succ(v):
                    out.append(comp)
    return out


# ------------------------------------------------------------------------------------------------ ambiguity


def _position_automaton(nfa: NFA):
    """Epsilon-free automaton over CHAR positions: {src: {dst: multiplicity (1 or 2)}}, accepting positions.

    src -1 is the initial state. Multiplicity 2 means two distinct epsilon paths (or an epsilon loop)."""
    kind, nxt = nfa.kind, nfa.nxt
    memo: dict = {}

    def targets(s, path: set) -> tuple:
        """(dict CHAR -> multiplicity, reaches MATCH, hit an epsilon cycle)"""
        if s in memo:
            return memo[s]
        k = kind[s]
        if k == CHAR:
            return {s: 1}, False, False
        if k in (MATCH, MATCH_NL):
            return {}, True, False
        if k == EOT:
            res = targets(nxt[s][0], path | {s}) if nxt[s] else ({}, False, False)
            return {}, res[1], res[2]
        if s in path:
            return {}, False, True
        out: dict = {}
        acc = cyc = False
        for n in nxt[s]:
            d, a, c = targets(n, path | {s})
            for t, m in d.items():
                out[t] = min(2, out.get(t, 0) + m)
            acc, cyc = acc or a, cyc or c
        if cyc:
            out = {t: 2 for t in out}
        res = (out, acc, cyc)
        if not path:
            memo[s] = res
        return res

    edges: dict = {}
    accepting: set = set()
    init = targets(nfa.start, set())
    edges[-1] = init[0]
    if init[1]:
        accepting.add(-1)
    for s in range(len(kind)):
        if kind[s] != CHAR:
            continue
        d: dict = {}
        acc = False
        for n in nxt[s]:
            dd, a, _ = targets(n, set())
            for t, m in dd.items():
                d[t] = min(2, d.get(t, 0) + m)
            acc = acc or a
        edges[s] = d
        if acc:
            accepting.add(s)
    return edges, accepting


def ambiguity(nfa: NFA, alpha: Alphabet) -> tuple | None:
    """Exponential degree of ambiguity (Weber-Seidl criteria) of the trimmed position automaton.

    Returns ``(position, kind)`` when two different runs can read the same text around a loop
    (kind "parallel" or "diverging"), else None."""
    edges, accepting = _position_automaton(nfa)
    # Trim: reachable from init and co-reachable to an accepting position.
    reach, stack = {-1}, [-1]
    while stack:
        s = stack.pop()
        for t in edges.get(s, {}):
            if t not in reach:
                reach.add(t)
                stack.append(t)
    rev: dict = {}
    for s, d in edges.items():
        for t in d:
            rev.setdefault(t, []).append(s)
    co, stack = set(accepting), list(accepting)
    while stack:
        t = stack.pop()
        for s in rev.get(t, []):
            if s not in co:
                co.add(s)
                stack.append(s)
    useful = reach & co
    succ = {s: {t: m for t, m in edges.get(s, {}).items() if t in useful} for s in useful}
    # (a) a doubled edge inside a loop
    for comp in _tarjan(list(useful), lambda s: list(succ[s])):
        cs = set(comp)
        for s in comp:
            for t, m in succ[s].items():
                if t in cs and m >= 2:
                    return s, "parallel"
    # (b) a diagonal pair and an off-diagonal pair in one SCC of the squared automaton
    arg = nfa.arg
    member = alpha.membership

    def inter(p, q) -> bool:
        return bool((member[:, arg[p]] & member[:, arg[q]]).any())

    inter_memo: dict = {}

    def isect(p, q) -> bool:
        key = (p, q) if p <= q else (q, p)
        r = inter_memo.get(key)
        if r is None:
            r = inter_memo[key] = inter(p, q)
        return r

    def succ2(pair):
        p, q = pair
        return [(p2, q2) for p2 in succ[p] for q2 in succ[q] if isect(p2, q2)]

    diag = [(s, s) for s in useful if s != -1]
    seen, order, stack = set(diag), list(diag), list(diag)
    while stack:
        pr = stack.pop()
        for nx in succ2(pr):
            if nx not in seen:
                seen.add(nx)
                order.append(nx)
                stack.append(nx)
                if len(seen) > MAX_SEARCH_NODES:
                    raise _TooComplex()
    succ_cache: dict = {}

    def succ2c(pr):
        r = succ_cache.get(pr)
        if r is None:
            r = succ_cache[pr] = succ2(pr)
        return r

    for comp in _tarjan(order, succ2c):
        diag_in = [p for p, q in comp if p == q]
        if diag_in and any(p != q for p, q in comp):
            return diag_in[0], "diverging"
    return None


def _ambiguity_hint(ast: tuple) -> str:
    """Name the construct most likely responsible: nested quantifiers or overlapping alternatives."""
    def unbounded_rep(node) -> bool:
        k = node[0]
        if k == "rep":
            return node[2] is None or unbounded_rep(node[4])
        if k in ("seq", "alt"):
            return any(unbounded_rep(c) for c in node[1])
        return False

    def has_alt(node) -> bool:
        k = node[0]
        if k == "alt":
            return True
        if k == "seq":
            return any(has_alt(c) for c in node[1])
        if k == "rep":
            return has_alt(node[4])
        return False

    def walk(node) -> str | None:
        k = node[0]
        if k == "rep" and (node[2] is None or node[2] > 1):
            body = node[4]
            if unbounded_rep(body):
                return "nested quantifiers"
            if has_alt(body):
                return "overlapping alternatives under a quantifier"
            return walk(body)
        if k in ("seq", "alt"):
            for c in node[1]:
                r = walk(c)
                if r:
                    return r
        return None

    return walk(ast) or "ambiguous repetition"


# ------------------------------------------------------------------------------------------------ checks


def run_checks(template: Any) -> list[Finding]:
    """All static checks for `template` (a dict, or a `CompiledTemplate`). Never raises for a bad template:
    a template the loader or compiler refuses yields one ``compile`` error."""
    from chatparse.compiled import CompiledTemplate, compile_template

    try:
        compiled = template if isinstance(template, CompiledTemplate) else compile_template(template)
    except (ValueError, TypeError, KeyError, PatternError) as e:
        return [Finding("error", "compile", _field_of(str(e)), None, f"template is refused: {e}")]
    try:
        auto = Automata(compiled.spec, compiled.raw_tables)
    except (ValueError, PatternError, _TooComplex) as e:
        return [Finding("info", "compile", None, None, f"static analysis skipped: {e}")]
    findings: list[Finding] = []
    for check in (_check_never_fires, _check_empty_match, _check_overlap, _check_swallow, _check_consumes, _check_hold,
                  _check_needs_regex, _check_backtracking):
        try:
            findings.extend(check(auto))
        except _TooComplex:
            findings.append(Finding("info", check.__name__[7:].replace("_", "-"), None, None,
                                    "analysis skipped: the automaton is too large to search exhaustively"))
    return sort_findings(_dedupe(findings))


def _dedupe(findings):
    seen, out = set(), []
    for f in findings:
        if f not in seen:
            seen.add(f)
            out.append(f)
    return out


def _field_of(message: str) -> str | None:
    m = re.match(r"Field '([^']*)'", message)
    return m.group(1) if m else None


def _sev(base: str, *delims: Delim) -> str:
    """Downgrade an error to a warning when a regex-decided (approximated) delimiter is involved."""
    if base == "error" and not all(d.exact for d in delims):
        return "warning"
    return base


def _outside_competition(auto: Automata):
    """(the outside mode's product DFA, its watched delimiters) when two or more delimiters compete there,
    else None: what the never-fires, overlap and swallow checks examine."""
    watch = auto.mode_watch[0]
    if len(watch) < 2:
        return None
    return auto.mode_dfa(0), [auto.delims[i] for i in watch]


def _check_never_fires(auto: Automata) -> list[Finding]:
    out = []
    # A delimiter whose own automaton accepts nothing.
    for d in auto.delims:
        lang = auto.lang(d)
        if not lang.startN and not lang.start0:
            what = ("the field can never open" if d.kind == "open"
                    else "once open, the field runs to the end of the stream")
            out.append(Finding(_sev("error", d), "never-fires", d.field, d.key,
                               f"{d.kind} {d.source!r} can never match: {what}"))
    # A mode-0 delimiter that never wins the competition.
    outside = _outside_competition(auto)
    if outside is None:
        return out
    md, delims = outside
    keys = [d.tie_key for d in delims]
    for a, d in enumerate(delims):
        lang = auto.lang(d)
        if not lang.startN and not lang.start0:
            continue
        res = _winner_search(auto.alpha, md, keys, a)
        if res.fires:
            continue
        if res.shadow is not None:
            text, winner, _ = res.shadow
            w = delims[winner] if winner >= 0 else None
            who = f"field '{w.field}' {w.kind} ({w.source!r})" if w else "another delimiter"
            out.append(Finding(_sev("error", d, *([w] if w else [])), "never-fires", d.field, d.key,
                               f"{d.kind} {d.source!r} can never fire: wherever it matches, {who} wins "
                               f"({TIE_RULE}), e.g. on {show_text(text)}"))
        else:
            out.append(Finding(_sev("error", d), "never-fires", d.field, d.key,
                               f"{d.kind} {d.source!r} can never fire in the outside-any-region mode"))
    return out


def _check_empty_match(auto: Automata) -> list[Finding]:
    """A delimiter that matches the empty string with no lookahead to anchor it fires everywhere."""
    out = []
    for d in auto.delims:
        lang = auto.lang(d)
        if not (lang.startN and lang.acc_now[lang.startN]):
            continue
        if any(r in ("lookbehind", "word boundary", "'^' with MULTILINE") for r in d.reasons):
            continue  # an assertion before the empty match anchors it
        if d.kind == "open":
            what = "the field opens at the first position of the outside text, before anything else can match"
        elif d.field == auto.implicit:
            what = "the implicit field is closed before it can collect any text"
        else:
            what = "the field closes as soon as it opens, so it never holds any text"
        out.append(Finding("warning", "empty-match", d.field, d.key,
                           f"{d.kind} {d.source!r} matches the empty string at any position: {what}"))
    return out


def _check_overlap(auto: Automata) -> list[Finding]:
    out = []
    outside = _outside_competition(auto)
    if outside is None:
        return out
    md, delims = outside
    for a in range(len(delims)):
        for b in range(a + 1, len(delims)):
            da, db = delims[a], delims[b]
            if da.field_index == db.field_index:
                continue
            text = _overlap_witness(auto.alpha, md, a, b)
            if text is None:
                continue
            win, lose = (da, db) if da.tie_key < db.tie_key else (db, da)
            out.append(Finding("warning", "overlap", lose.field, lose.key,
                               f"{lose.kind} {lose.source!r} and field '{win.field}' {win.kind} {win.source!r} "
                               f"both match {show_text(text)} at one position; the tie rule ({TIE_RULE}) gives it "
                               f"to '{win.field}'"))
    return out


def _check_swallow(auto: Automata) -> list[Finding]:
    out = []
    outside = _outside_competition(auto)
    if outside is None:
        return out
    md, delims = outside
    keys = [d.tie_key for d in delims]
    for x, dx in enumerate(delims):
        for do in delims:
            if do.field_index == dx.field_index:
                continue
            if dx.kind == "close":  # the implicit field's close against every open
                text = _swallow_witness(auto.alpha, md, keys, x, auto.lang(do))
                if text is not None:
                    out.append(Finding(_sev("error", dx, do), "swallow", dx.field, dx.key,
                                       f"the implicit field's close {dx.source!r} swallows field '{do.field}' "
                                       f"{do.kind} {do.source!r}: the close starts earlier or is longer, so "
                                       f"'{do.field}' never fires there, e.g. on {show_text(text)}"))
            else:
                text = _literal_containment(auto.alpha, auto.lang(dx, "consumed"), auto.lang(do))
                if text is not None:
                    out.append(Finding("info", "contains", dx.field, dx.key,
                                       f"open {dx.source!r} contains field '{do.field}' {do.kind} "
                                       f"{do.source!r}; where both match, the open starts no later and is "
                                       f"longer, so it wins, e.g. on {show_text(text)}"))
    return out


def _check_consumes(auto: Automata) -> list[Finding]:
    out = []
    for mi in range(1, len(auto.mode_watch)):
        for ci in auto.mode_watch[mi]:
            c = auto.delims[ci]
            for o in auto.delims:
                if o.kind != "open" or o.field_index == c.field_index:
                    continue
                text = _contains(auto.alpha, auto.lang(c, "consumed"), auto.lang(o, "consumed"))
                if text is None:
                    continue
                out.append(Finding("warning", "consumes", c.field, c.key,
                                   f"close {c.source!r} can consume a whole field '{o.field}' open {o.source!r} "
                                   f"(e.g. {show_text(text)}); inside '{c.field}' only its close is watched, so "
                                   f"'{o.field}' cannot open there - use a lookahead such as (?=...) to stop "
                                   "before it"))
    return out


def _check_hold(auto: Automata) -> list[Finding]:
    out = []
    for d in auto.delims:
        cyc = _hold_cycle(auto.alpha, auto.lang(d))
        if cyc is None:
            continue
        prefix, loop = cyc
        ranges = auto.alpha.ranges(loop)
        desc = describe_ranges(ranges)
        ws_only = set(loop) <= auto.alpha.ws_classes
        where = "at its start" if not prefix else f"after {show_text(prefix)}"
        if ws_only:
            out.append(Finding("info", "unbounded-hold", d.field, d.key,
                               f"{d.kind} {d.source!r} loops on whitespace {where}: runs of whitespace are held "
                               "back until the delimiter is decided"))
        else:
            out.append(Finding("warning", "unbounded-hold", d.field, d.key,
                               f"{d.kind} {d.source!r} can hold text back without bound: it loops on {desc} "
                               f"{where} before any literal character, so ordinary text stays pending until "
                               "the attempt fails; start the delimiter with a literal token"))
    return out


def _check_needs_regex(auto: Automata) -> list[Finding]:
    out = []
    for d in auto.delims:
        if d.exact:
            continue
        why = ", ".join(d.reasons) or "unsupported construct"
        window = ("an unbounded window after the candidate match" if d.horizon < 0 else
                  f"{d.history} character(s) before and {d.horizon} after the candidate span")
        sev = "warning" if d.horizon < 0 else "info"
        out.append(Finding(sev, "needs-regex", d.field, d.key,
                           f"{d.kind} {d.source!r} needs `regex` at run time ({why}): the tables find the "
                           f"candidate span, `regex` decides the exact match looking at {window}"))
    return out


def _check_backtracking(auto: Automata) -> list[Finding]:
    out = []
    for d in auto.delims:
        if d.key in ("open", "close"):  # literal lists cannot backtrack
            continue
        res = ambiguity(d.match_nfa, auto.alpha)
        if res is None:
            continue
        pos, _kind = res
        chars = describe_ranges(auto.alpha.sets[d.match_nfa.arg[pos]]) if pos >= 0 else "?"
        out.append(Finding("warning", "backtracking", d.field, d.key,
                           f"{d.kind} {d.source!r} is prone to exponential backtracking in the reference "
                           f"({_ambiguity_hint(d.match_ast)}: text made of {chars} can be matched in many ways "
                           "inside a loop, and the backtracking `regex` search tries them all on a near-miss)"))
    return out


# ------------------------------------------------------------------------------------------------ interegular


def interegular_intersects(a: str, b: str) -> bool | None:
    """Whether two patterns share a full match according to interegular; None if it cannot parse them
    (anchors, lookarounds, backreferences). ASCII semantics for ``\\w\\d\\s``: a cross-check only."""
    if any(tok in a or tok in b for tok in ("(?=", "(?!", "(?<", "\\b", "\\Z", "$", "^")):
        return None  # interegular does not model assertions faithfully
    try:
        import interegular
    except ImportError:  # pragma: no cover - a declared dependency
        return None
    try:
        fa = interegular.parse_pattern(a).to_fsm()
        fb = interegular.parse_pattern(b).to_fsm()
        return not fa.intersection(fb).empty()
    except Exception:
        return None
