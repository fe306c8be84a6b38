"""Loaded tables: validated once, then laid out as flat Python lists for the per-character hot path.

The input is the table dict that `chatparse.compiler.build.build_tables` produces (or that a table file
decodes to). Every index is checked here, so a corrupted or hostile table raises ValueError instead of
misparsing or crashing later; after that the stepping code trusts the tables.
"""

from __future__ import annotations

import logging
import re
import re._constants as _C
import re._parser as sre_parse
from array import array

import numpy as np
import regex

from ..regex.lead_assert import start_guards

from ..values.parsers import STREAMABLE

logger = logging.getLogger("chatparse")

N_CODEPOINTS = 0x110000


class Mode:
    """One parser mode: the delimiters it watches and their combined DFA."""

    __slots__ = ("patterns", "trans", "eot", "acc", "term", "start0", "startN", "first_re", "n_classes",
                 "anchor_re", "anchor_char", "wchars", "wdeep_re", "jump", "loop", "can_start", "exact", "guards",
                 "lead_starts", "lead_starts0", "tmat", "facts", "cap")

    def __init__(self, raw: dict, n_classes: int, n_patterns: int, where: str, class_sources: list,
                 facts: "ClassFacts | None" = None):
        trans = np.asarray(raw["trans"])
        n_states = trans.shape[0] if trans.ndim == 2 else -1
        if trans.ndim != 2 or trans.shape[1] != n_classes or n_states < 1:
            raise ValueError(f"{where}: transition table has shape {trans.shape}, expected (states, {n_classes})")
        eot, acc, term = np.asarray(raw["eot"]), np.asarray(raw["acc"]), np.asarray(raw["term"])
        self.patterns = [int(p) for p in raw["patterns"]]
        if any(not 0 <= p < n_patterns for p in self.patterns):
            raise ValueError(f"{where}: pattern index out of range")
        if eot.shape != (n_states,) or term.shape != (n_states,) or acc.shape != (n_states, len(self.patterns)):
            raise ValueError(f"{where}: per-state arrays do not match {n_states} states")
        for name, arr in (("trans", trans), ("eot", eot)):
            if arr.size and (arr.min() < 0 or arr.max() >= n_states):
                raise ValueError(f"{where}: {name} holds a state outside 0..{n_states - 1}")
        if acc.size and (acc.min() < -1 or acc.max() > 1):
            raise ValueError(f"{where}: accept codes must be -1, 0 or 1")
        if (term[1:].astype(bool) & ~(acc[1:] >= 0).any(axis=1)).any():
            raise ValueError(f"{where}: a terminal state other than 0 accepts no pattern")
        self.start0, self.startN = int(raw["start0"]), int(raw["startN"])
        if not (0 <= self.start0 < n_states and 0 <= self.startN < n_states):
            raise ValueError(f"{where}: start state out of range")
        self.n_classes = n_classes
        # The matrix too, for the whole-row work below (numpy, so that building a mode stays linear in the size
        # of its tables however many classes there are); the stepping code uses the flat list.
        self.tmat = trans
        self.facts = facts if facts is not None else class_facts(class_sources)
        self.trans = trans.astype(np.int64).ravel().tolist()
        self.eot = eot.astype(np.int64).tolist()
        self.term = term.astype(bool).tolist()
        # acc[s] is None (no match ends in s) or a tuple of (local pattern index, characters back from here).
        # (from the accepting cells alone: a dense row per state is quadratic in the fields of a large template)
        self.acc = [None] * n_states
        rows, cols = np.nonzero(acc >= 0)
        if rows.size:
            codes = acc[rows, cols].tolist()
            bounds = np.flatnonzero(np.diff(rows)) + 1
            cols_l = cols.tolist()
            starts = [0] + bounds.tolist()
            ends = bounds.tolist() + [len(cols_l)]
            for r, a, b in zip(rows[starts].tolist(), starts, ends):
                self.acc[r] = tuple(zip(cols_l[a:b], [int(c) for c in codes[a:b]]))
        _check_first(raw["first"], where)
        self.first_re = _prefilter(self, class_sources)
        self.anchor_re, self.wchars, self.wdeep_re, self.anchor_char = _anchors(self, class_sources)
        self.jump, self.loop = _accelerations(self, class_sources)
        nullable = self.acc[self.startN] is not None
        self.can_start = [True] * n_classes if nullable else (trans[self.startN] != 0).tolist()
        self.exact = False  # every watched pattern decided by the tables alone (set by `Tables`)
        self.guards = None  # per class: lookbehinds one of which an attempt's start must satisfy (`lead_assert`)
        # per class: which patterns an attempt's start leaves out, by the lookbehinds that fail there (`lead_assert`);
        # `lead_starts0` for an attempt at offset 0 (in `start0`)
        self.lead_starts = self.lead_starts0 = None
        self.cap = None  # characters after which an attempt is decided whatever its state (`Tables`, `_max_width`)

    def cross(self, text: str, i: int, n: int, st: int) -> tuple[int, int]:
        """For a lone attempt in state `st` at offset `i` (< `n`): cross whole literals (`jump`) and runs that
        leave the state as it is (`loop`) in C, as far as they go; returns (offset, state). Nothing accepts or
        decides on the way (see `_accelerations`)."""
        jump, loop = self.jump, self.loop
        while i < n:
            lit = jump[st]
            if lit is not None and text.startswith(lit[0], i):
                i += len(lit[0])
                st = lit[1]
                continue
            rx = loop[st]
            if rx is not None:
                m = rx.search(text, i)
                j = m.start() if m is not None else n
                if j > i:
                    i = j
                    continue
            break
        return i, st

    def skip_to(self, text: str, i: int) -> int:
        """The first offset >= i where an attempt may matter (len(text) if none); exact to step from there.

        Short spans and modes whose delimiters cannot start with whitespace use the prefilter regex alone.
        Otherwise (delimiters such as ``\\s*</think>``, where every space of prose would pass the prefilter):
        search in C for an *anchor* character, one that no match can do without; a match may begin earlier
        only through a run of the mode's leading-whitespace characters, which `rstrip` walks back over.
        The anchor must also pass a prefilter: from the start state, or after a run from any state a run of
        whitespace can reach.
        """
        deep = self.first_re
        if deep is None:
            return i
        anchor, w = self.anchor_re, self.wchars
        n = len(text)
        if not w or n - i <= 256:  # short spans (streamed chunks): one C-level search is cheapest
            m = deep.search(text, i)
            return m.start() if m is not None else n
        one = self.anchor_char
        while True:
            if one is not None:  # one anchor character: `str.find` is many times faster than a search
                q = text.find(one, i)
                found = q >= 0
                if not found:
                    q = n
            else:
                m = anchor.search(text, i)
                found = m is not None
                q = m.start() if found else n
            # (the slice is copied only when whitespace comes just before the anchor)
            p = i + len(text[i:q].rstrip(w)) if q > i and text[q - 1] in w else q
            if not found:
                return p
            check = deep if p == q else self.wdeep_re
            if check is None or check.match(text, q):
                return p
            i = q + 1


def _check_first(first, where: str) -> None:
    """Validate the tables' two-character prefilter (kept in the format for ports; see FORMAT.md)."""
    if first is None:
        return
    for pair in first:
        if len(pair) != 2:
            raise ValueError(f"{where}: prefilter entries must be [first, second] pairs")
        for ranges in pair:
            for lo, hi in ranges or []:
                if not 0 <= lo <= hi < N_CODEPOINTS:
                    raise ValueError(f"{where}: prefilter range {lo}..{hi} out of range")


PREFILTER_DEPTH = 3
_MAX_CLASS_RANGES = 48


def _class_sources(starts: np.ndarray, ids: np.ndarray, n_classes: int) -> list:
    """Per class, a `re` character class for its code points, or None when it has too many ranges."""
    ranges: list = [[] for _ in range(n_classes)]
    ends = starts[1:].tolist() + [N_CODEPOINTS]
    for lo, hi, c in zip(starts.tolist(), ends, ids.tolist()):
        ranges[c].append((lo, hi - 1))
    return [rs if len(rs) <= _MAX_CLASS_RANGES else None for rs in ranges]


def _union_source(classes: list, class_sources: list) -> str:
    rs = []
    for c in classes:
        if class_sources[c] is None:
            return r"[\s\S]"  # too large to spell out: over-approximate with any character (still safe)
        rs.extend(class_sources[c])
    parts = [f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in sorted(rs)]
    return "[" + "".join(parts) + "]"


class ClassFacts:
    """What the accelerations ask of each character class, as numpy arrays over class ids (from
    `_class_sources`, once per table): `single` the code point of a one-code-point class (else -1), `wide` a
    class too large to spell out or of 8+ code points, `space` a spelled-out class of at most 64 code points,
    all whitespace."""

    __slots__ = ("single", "wide", "space")

    def __init__(self, single, wide, space):
        self.single, self.wide, self.space = single, wide, space


def class_facts(class_sources: list) -> ClassFacts:
    n = len(class_sources)
    single = np.full(n, -1, np.int64)
    wide = np.zeros(n, bool)
    space = np.zeros(n, bool)
    for c, rs in enumerate(class_sources):
        if rs is None:
            wide[c] = True
            continue
        size = sum(hi - lo + 1 for lo, hi in rs)
        if size == 1:
            single[c] = rs[0][0]
        wide[c] = size >= 8
        space[c] = size <= 64 and all(chr(cp).isspace() for lo, hi in rs for cp in range(lo, hi + 1))
    return ClassFacts(single, wide, space)


# Budgets of the optional accelerations, so that building a mode stays linear in the size of its tables (a
# hostile file can have 65,535 classes and many states): beyond them a state or mode simply goes without
# (`jump`/`loop` None, no anchor search), which changes what is skipped in C, never a result. Compiled tables
# stay far below them.
_JUMP_STEPS = 1 << 16  # characters of `jump` literals per mode, plus 8 per state
_LOOP_RANGES = 1 << 14  # character ranges spelled out in the `loop` regexes of one mode
_ANCHOR_RANGES = 1 << 12  # character ranges of one mode's anchor class


def _spelled_ranges(classes, class_sources: list) -> int:
    """How many ranges `_union_source` spells out for these classes (0 when it gives "any character")."""
    total = 0
    for c in classes:
        rs = class_sources[c]
        if rs is None:
            return 0
        total += len(rs)
    return total


def _decides(mode: "Mode") -> np.ndarray:
    """Per state: it accepts or is terminal."""
    return np.fromiter((a is not None for a in mode.acc), bool, len(mode.acc)) | np.asarray(mode.term, bool)


def _anchors(mode: "Mode", class_sources: list, depth: int = 0):
    """Anchor characters and leading-whitespace characters of a mode (see `Mode.skip_to`): (anchor regex,
    whitespace characters, prefilter after a whitespace run, the anchor character if there is only one).

    W is the set of whitespace characters an attempt can start with; it is used only if every state reached
    from the start through W alone neither accepts nor decides (so a run of W can matter only when followed by
    an anchor) and W is small enough to hand to `str.rstrip`. Anchors are every other character that keeps an
    attempt alive from the start or from a W-only state.
    """
    s = mode.startN
    if s == 0 or mode.acc[s] is not None:
        return re.compile("(?!)"), "", None, None
    w_classes, states = whitespace_closure(mode, class_sources)
    wmask = np.zeros(mode.n_classes, bool)
    wmask[w_classes] = True
    anchors = np.flatnonzero((mode.tmat[sorted(states)] != 0).any(axis=0) & ~wmask).tolist()
    if _spelled_ranges(anchors, class_sources) > _ANCHOR_RANGES:
        return re.compile("(?!)"), "", None, None  # (skip_to then searches with the prefilter alone)
    wchars = "".join(chr(cp) for c in w_classes for lo, hi in class_sources[c] for cp in range(lo, hi + 1))
    anchor_re = re.compile(_union_source(anchors, class_sources) if anchors else "(?!)")
    ranges = [r for c in anchors for r in (class_sources[c] or [(0, 1)])]
    one = chr(ranges[0][0]) if len(ranges) == 1 and ranges[0][0] == ranges[0][1] else None
    # At an anchor after a whitespace run, the attempt is in one of `states`: filter on what they survive.
    return anchor_re, wchars, (_prefilter(mode, class_sources, states, depth) if wchars else None), one


def whitespace_closure(mode: "Mode", class_sources: list) -> tuple[list, set]:
    """(W, states): the whitespace classes an attempt can start with, and the states runs of them reach from
    the start (the start included) - or ([], {start}) when some such state accepts or decides, since then a
    run can matter without an anchor after it (see `_anchors`)."""
    s = mode.startN
    trans, n = mode.trans, mode.n_classes
    w_classes = np.flatnonzero((mode.tmat[s] != 0) & mode.facts.space).tolist()
    states, todo = {s}, [s]
    while todo:
        st = todo.pop()
        for c in w_classes:
            t = trans[st * n + c]
            if t and t not in states:
                states.add(t)
                todo.append(t)
    if any(mode.acc[st] is not None or mode.term[st] for st in states if st != s) or not w_classes:
        return [], {s}
    return w_classes, states


def _accelerations(mode: "Mode", class_sources: list):
    """Per state, ways for a lone attempt to cross many characters in one C-level call.

    ``jump[s] = (literal, state)``: from s only one code point at a time keeps the attempt alive, for the
    whole `literal`, no state on the way accepts or decides, and none of those characters can start another
    attempt; so if the text continues with `literal`, the attempt is in `state` after it, and nothing else
    happened. ``loop[s]``: a regex finding the next character that does not keep s where it is (or could
    start another attempt); everything before it leaves the attempt unchanged. Both are None when unusable
    (or beyond the budgets above). The per-state facts are whole-matrix numpy operations: linear in the
    size of the tables.
    """
    acc, n, s0 = mode.acc, mode.n_classes, mode.startN
    n_states = len(acc)
    if s0 != 0 and acc[s0] is not None:
        return [None] * n_states, [None] * n_states  # an attempt may start anywhere: never skip
    tm = mode.tmat
    facts = mode.facts
    starts = tm[s0] != 0 if s0 else np.zeros(n, bool)
    decides = _decides(mode)
    live = tm != 0
    only = live.argmax(axis=1)  # the live class, where there is exactly one
    nxt = tm[np.arange(n_states), only].astype(np.int64)
    single = facts.single[only]
    # a step of a jump: one live class, of one code point, that cannot start an attempt, to a quiet state
    step = (live.sum(axis=1) == 1) & ~starts[only] & (single >= 0) & ~decides[nxt]
    step_l, nxt_l = step.tolist(), nxt.tolist()
    char_l = [chr(c) if c >= 0 else "" for c in single.tolist()]
    jump: list = [None] * n_states
    budget = _JUMP_STEPS + 8 * n_states
    for s in range(1, n_states):
        if not step_l[s] or budget <= 0:
            continue
        chars, st = [], s
        while step_l[st] and len(chars) < 256:
            t = nxt_l[st]
            if t == s:
                break
            chars.append(char_l[st])
            st = t
        budget -= len(chars)
        if len(chars) >= 2:
            jump[s] = ("".join(chars), st)
    # loops: states that stay where they are on a wide class (and neither accept nor decide)
    stay = (tm == np.arange(n_states)[:, None]) & ~starts
    stay[0] = False
    candidates = np.flatnonzero((stay & facts.wide).any(axis=1) & ~decides).tolist()
    loop: list = [None] * n_states
    budget = _LOOP_RANGES
    made: dict = {}
    for s in candidates:
        key = np.packbits(stay[s]).tobytes()
        rx = made.get(key)
        if rx is None:
            leave = np.flatnonzero(~stay[s]).tolist()
            cost = _spelled_ranges(leave, class_sources)
            if cost > budget:
                continue
            budget -= cost
            rx = made[key] = re.compile(_union_source(leave, class_sources)) if leave else re.compile("(?!)")
        loop[s] = rx
    return jump, loop


class _TooLong(Exception):
    pass


def _prefilter(mode: "Mode", class_sources: list, states=None, depth: int = 0, first=None):
    """The C-speed search for the next offset where an attempt can matter; None when every offset can.

    It matches at p when the mode's DFA, started at p (in `startN`, or in any of `states` when given),
    survives the next `depth` (default PREFILTER_DEPTH) characters (or accepts, or decides, or the text ends
    first). Offsets it skips would start an attempt that dies without a match, so skipping them changes
    nothing; where a class is too large to spell out, "any character" is used, which only makes the filter
    let more through. `first` (a set of class ids) restricts the first character to those classes. Looking
    fewer characters ahead where the regex would be longer than `_PREFILTER_CHARS`.
    """
    s = mode.startN
    if s == 0:
        return re.compile("(?!)")
    if mode.acc[s] is not None:
        return None
    tm, n = mode.tmat, mode.n_classes
    decides = _decides(mode)
    only = None
    if first is not None:
        only = np.zeros(n, bool)
        only[sorted(first)] = True
    roots = sorted(states or [s])
    for d in range(depth or PREFILTER_DEPTH, 0, -1):
        try:
            source = _prefilter_source(tm, decides, class_sources, roots, d, only)
        except _TooLong:
            continue
        if len(source) <= _PREFILTER_CHARS:
            return re.compile(source)
    return None


_PREFILTER_CHARS = 20_000


def _prefilter_source(tm, decides, class_sources: list, roots: list, depth: int, only) -> str:
    """The prefilter regex source for `depth` characters; raises _TooLong as soon as it is sure to be longer
    than `_PREFILTER_CHARS`. Every node built appears in the result, nested at most `depth` deep, so once the
    nodes built add up to more than `depth` times the limit, so does the result: the work before giving up
    is bounded by the limit, and each node costs one row of the matrix."""
    memo: dict = {}
    spent = [0]
    limit = _PREFILTER_CHARS * depth

    def node(state: int, depth: int, only=None) -> str:
        key = (state, depth, only is not None)
        if key in memo:
            return memo[key]
        row = tm[state]
        mask = row != 0
        if only is not None:
            mask &= only
        classes = np.flatnonzero(mask)
        targets = row[classes]
        uniq, inverse = np.unique(targets, return_inverse=True)
        subs = [None if depth == 1 or decides[t] else node(int(t), depth - 1) for t in uniq.tolist()]
        # classes grouped by what follows them, groups in the order of their first class
        groups: dict = {}
        for c, ti in zip(classes.tolist(), inverse.ravel().tolist()):
            groups.setdefault(subs[ti], []).append(c)
        alts = []
        for sub, cs in groups.items():
            alts.append(_union_source(cs, class_sources) + ("" if sub is None else f"(?:{sub}|\\Z)"))
            spent[0] += len(alts[-1])
            if spent[0] > limit:
                raise _TooLong
        out = memo[key] = "(?:" + "|".join(alts) + ")" if alts else "(?!)"
        return out

    return "|".join(node(st, depth, only) for st in roots)


class Pattern:
    __slots__ = ("kind", "field", "exact", "rx", "named_groups", "history", "horizon", "source")

    def __init__(self, raw: dict, n_fields: int, where: str):
        self.kind = raw["kind"]
        if self.kind not in ("open", "close"):
            raise ValueError(f"{where}: kind must be 'open' or 'close'")
        self.field = int(raw["field"])
        if not 0 <= self.field < n_fields:
            raise ValueError(f"{where}: field index out of range")
        self.exact = bool(raw["exact"])
        self.named_groups = bool(raw["named_groups"])
        self.history = int(raw["history"])
        self.horizon = int(raw["horizon"])
        if self.history < 1 or self.horizon < -1:
            raise ValueError(f"{where}: bad history/horizon")
        self.source = raw["source"]
        self.rx = regex.compile(self.source, regex.DOTALL)


class Tables:
    """Everything one compiled template needs at run time."""

    def __init__(self, raw: dict):
        self.template = raw["template"]
        self.fields = self.template["fields"]
        names = [f["name"] for f in self.fields]
        implicit = self.template["implicit"]
        self.implicit = names.index(implicit) if implicit is not None else None
        self.required = [f["name"] for f in self.fields if not f["optional"]]  # (`parser.final_output`)
        self.n_classes = int(raw["n_classes"])
        if not 1 <= self.n_classes <= 65535:
            raise ValueError("tables: n_classes out of range")
        self.cmap = _class_map(np.asarray(raw["class_starts"]), np.asarray(raw["class_ids"]), self.n_classes)
        self.patterns = [Pattern(p, len(self.fields), f"pattern {i}") for i, p in enumerate(raw["patterns"])]
        sources = _class_sources(np.asarray(raw["class_starts"]), np.asarray(raw["class_ids"]), self.n_classes)
        facts = class_facts(sources)
        self.modes = [Mode(m, self.n_classes, len(self.patterns), f"mode {i}", sources, facts)
                      for i, m in enumerate(raw["modes"])]
        self.class_sources = sources  # for deeper prefilters built on demand (runtime/oneshot/parse.py)
        for mode in self.modes:
            mode.exact = all(self.patterns[pi].exact for pi in mode.patterns)
            sources = [self.patterns[pi].source for pi in mode.patterns]
            mode.guards, mode.lead_starts = start_guards(mode, sources)
            mode.lead_starts0 = mode.lead_starts
            if mode.start0 != mode.startN and mode.start0:
                mode.lead_starts0 = start_guards(mode, sources, mode.start0)[1]
            if not mode.exact:
                widths = [_max_width(self.patterns[pi].source) for pi in mode.patterns]
                if None not in widths:
                    mode.cap = max(widths + [1]) + 1
        if len(self.modes) != len(self.fields) + 1:
            raise ValueError("tables: expected one mode per field plus the outside mode")
        self.history = max([p.history for p in self.patterns] + [1])
        self.dirty = [f["content"] not in STREAMABLE for f in self.fields]
        anchor = self.template["start_anchor"]
        self.anchor_literals = None
        if "literals" in anchor:
            literals = anchor["literals"]
            src = "|".join(regex.escape(s) for s in sorted(literals, key=len, reverse=True))
            if _occur_apart(literals):
                self.anchor_literals = tuple(literals)
            self.anchor_kind = "start_anchor"
        else:
            src = anchor["pattern"]
            self.anchor_kind = "start_anchor_pattern"
        self.anchor_rx = regex.compile(src, regex.DOTALL)
        # (`tail_anchor_end`: a pattern's widest match; None where unbounded, or where it may look behind)
        self.anchor_width = None if "(?<" in src else _max_width(src)

    def cut_prefix(self, prefix: str, log: bool = True) -> str:
        """The part of `prefix` after the last (non-overlapping) start-anchor match; all of it if none (said in
        the log unless `log` is False: a caller that only looks the cut up, and logs when it parses)."""
        last = self.last_anchor_end(prefix)
        if last is None:
            if log:
                logger.info("response_template defines %s but the anchor was not found in the prefix; "
                            "the parser will process the entire prefix instead.", self.anchor_kind)
            return prefix
        return prefix[last:]

    def last_anchor_end(self, text: str) -> int | None:
        """Where the last (non-overlapping) start-anchor match in `text` ends; None if there is none."""
        last = None
        if self.anchor_literals is not None:
            # occurrences cannot overlap or nest, so every one is a match and the last ends furthest
            for s in self.anchor_literals:
                i = text.rfind(s)
                if i >= 0 and (last is None or i + len(s) > last):
                    last = i + len(s)
        else:
            for m in self.anchor_rx.finditer(text):
                last = m.end()
        return last

    def tail_anchor_end(self, tail: str) -> int | None:
        """For `tail`, the end of a longer text: where the whole text's last start-anchor match ends, in
        `tail`'s offsets, when `tail` alone shows it; None when it does not (no match in `tail`, or one that a
        match starting before it could change).

        Literals that cannot overlap: the last occurrence in `tail` is the last one in all. A pattern whose
        matches span at most ``w = anchor_width`` characters (lookaheads counted, lookbehinds refused): the last
        match M in `tail` is the whole text's last match where it is not empty, starts at least `w` into
        `tail`, is the match the pattern makes at its start, and no match starting in the `w` characters before
        it reaches past its start. Then no match of the whole text's scan covers M's start (one from further
        back ends before it), so that scan reaches M's start searching and finds M, and from M's end both scans
        read the same text; what a match at those offsets reads before itself (``\b``) is inside `tail`."""
        if self.anchor_literals is not None:
            return self.last_anchor_end(tail)
        w = self.anchor_width
        if w is None:
            return None
        last = None
        for last in self.anchor_rx.finditer(tail):
            pass
        if last is None:
            return None
        s, e = last.span()
        match = self.anchor_rx.match
        if e == s or s < w:
            return None
        at = match(tail, s)
        if at is None or at.span() != (s, e):
            return None
        for p in range(s - w + 1, s):
            m = match(tail, p)
            if m is not None and m.end() > s:
                return None
        return e


def _occur_apart(literals: list) -> bool:
    """True when no two occurrences of these (non-empty) literals in any text can overlap: no literal holds
    another, and no proper suffix of one is a prefix of one. Then a left-to-right scan finds every
    occurrence, so the last match of their alternation is the occurrence that ends furthest."""
    if not all(literals):
        return False
    for a in literals:
        for b in literals:
            if a != b and a in b:
                return False
            if any(b.startswith(a[i:]) for i in range(1, len(a))):
                return False
    return True


def _class_map(starts: np.ndarray, ids: np.ndarray, n_classes: int):
    if starts.ndim != 1 or starts.shape != ids.shape or len(starts) == 0 or starts[0] != 0:
        raise ValueError("tables: class map must start at code point 0 with one class id per interval")
    if (np.diff(starts) <= 0).any() or starts[-1] >= N_CODEPOINTS:
        raise ValueError("tables: class map intervals must be increasing and inside U+0000..U+10FFFF")
    if ids.min() < 0 or ids.max() >= n_classes:
        raise ValueError("tables: class id out of range")
    lengths = np.diff(np.append(starts, N_CODEPOINTS))
    full = np.repeat(ids, lengths)
    if n_classes <= 256:
        return full.astype(np.uint8).tobytes()
    return array("H", full.astype(np.uint16).tobytes())


def _max_width(source: str) -> int | None:
    """The most characters a match of `source` can span, lookaheads counted as if consumed; None when
    unbounded or when the pattern can look at the end of the text (``$``, ``\\Z``: its attempt must live
    until the end-of-text step).

    A regex-decided pattern's tables step a superset (a large ``x{m,n}`` as ``x+``, `compiler/regex_ast.py`),
    whose attempts can live on long after any real match could have ended; a mode whose patterns all have a
    width decides an attempt once it has read that many characters and one more (`Mode.cap`, `Scanner`), so
    text is not held longer than a match could span. Results are the same either way (`regex` decides)."""
    try:
        parsed = sre_parse.parse(source, re.DOTALL)
    except (re.error, RecursionError, OverflowError):  # (`regex`-only syntax such as a repeated group name)
        return None
    groups: dict = {}
    return _width_of(parsed, groups)



def _width_of(items, groups: dict) -> int | None:
    total = 0
    for op, av in items:
        if op in (_C.LITERAL, _C.NOT_LITERAL, _C.ANY, _C.IN):
            w = 1
        elif op is _C.BRANCH:
            ws = [_width_of(b, groups) for b in av[1]]
            w = None if None in ws else max(ws, default=0)
        elif op is _C.SUBPATTERN:
            w = _width_of(av[3], groups)
            if av[0] is not None:
                groups[av[0]] = w
        elif op is _C.ATOMIC_GROUP:
            w = _width_of(av, groups)
        elif op in (_C.MAX_REPEAT, _C.MIN_REPEAT, _C.POSSESSIVE_REPEAT):
            lo, hi, sub = av
            inner = _width_of(sub, groups)
            w = None if inner is None or hi >= _C.MAXREPEAT else inner * hi
        elif op is _C.AT:
            if av in (_C.AT_END, _C.AT_END_STRING):
                return None
            w = 0
        elif op in (_C.ASSERT, _C.ASSERT_NOT):
            w = _width_of(av[1], groups) if av[0] > 0 else 0
        elif op is _C.GROUPREF:
            w = groups.get(av)
        elif op is _C.GROUPREF_EXISTS:
            ys = _width_of(av[1], groups)
            no = _width_of(av[2], groups) if av[2] else 0
            w = None if ys is None or no is None else max(ys, no)
        else:
            return None
        if w is None:
            return None
        total += w
    return total
