"""Which patterns can make `regex` backtrack badly, read from their source (`backtracking_risk`).

The one-shot path (runtime/oneshot/parse.py) asks `regex` to match delimiter patterns at candidate starts. A
`regex` call is linear in the text it reads unless the pattern lets the engine try many ways to split the
same text. Calls on such patterns get a timeout (which costs time on every call, so only they get one: see
bench/PERF_NOTES.md#regex-timeout).
The ways to many splits, and how each is recognised here:

* a quantified group, such as ``(?:a|aa)+`` (exponential) or ``(?:\\w+,)*``;
* a backreference, such as ``(a*)\\1``;
* two unbounded quantifiers (``*``, ``+``, ``{m,}``, or a bound above `_BIG`) with no *separator* between
  them: ``[^<]*[^<]*<``, ``(?P<name>[^\\s<]+)[^<]*``, ``\\s*(?:x)?\\s*``, or an unbounded quantifier inside
  a lookahead while one before it is still open, as in ``\\s*(?=\\s*{)``. Each is quadratic.

A separator is a character every match must contain after the first quantifier's run, which that run cannot
consume: a mandatory literal character outside the quantifier's class, as ``<`` in ``\\s*</think>\\s*``. The
run must then stop just before it, so only a bounded number of splits survive (the greedy run and the
handful of characters that optional items before the separator could take).

The reading is conservative: syntax it does not follow (conditionals, branch reset, a class it cannot parse)
counts as a risk, classes never count as separators, and an alternative or an optional group keeps the open
quantifier of every path through it.

A quadratic pattern can still be cheap to call: gpt-oss's tool-call open never takes more than three '<',
and no class in it takes a '<' at all, so a call can stop just before the fourth '<' after its start, and
costs at most the square of that span (`match_bound`). A short span then needs no timeout (`bounded_call`);
the same holds for a cubic pattern (three open runs in a row: glm-4.5's tool-call open) over a shorter span.
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

_BIG = 64  # a {m,n} quantifier with n above this counts as unbounded
# The spans (characters from a call's start) within which a bounded call needs no timeout, per degree: about a
# million steps of the engine at most either way (1,024 squared, 100 cubed), a few milliseconds.
SPANS = {2: 1024, 3: 100}
_QUANT = regex.compile(r"\{(\d*)(?:(,)(\d*))?\}")
_ESCAPED_CONTROL = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a"}
_ZERO_WIDTH_ESCAPES = frozenset("AZbBGzK")
_ARG_ESCAPES = {"x": 2, "u": 4, "U": 8}


class _Risky(Exception):
    pass


def backtracking_risk(source: str) -> bool:
    """True when `regex` might try many ways to split a text on `source` (see the module docstring).
    False means every `regex` call on it reads the text in linear time."""
    return _analysis(source).risky


def match_bound(source: str) -> tuple[str, int] | None:
    """For a pattern whose only risk is two or three open unbounded runs in a row (quadratic or cubic, not
    worse): a character `c` and a count `k` such that no match, and no path `regex` tries, holds more than `k`
    occurrences of `c`, and nothing in the pattern tests where the text ends (``$``, ``\\Z``, ``\\b``, ...).
    Then a call at `p` may stop the text just before the (k+1)-th `c` from `p` (``endpos``) without changing
    its result, and its time is polynomial in that span (of the pattern's degree), so a short span needs no
    timeout (`bounded_call`, runtime/oneshot/parse.py). None when there is no such character.

    Why the stop changes nothing: a path reads a position only after taking everything from `p` up to it (a
    lookaround's path: the main path up to the lookaround, then its own), and the count covers lookarounds
    too (their literals count with their branch's). Only a literal `c` can take a `c` (no class takes it), so
    no path takes the (k+1)-th one: there every attempt fails whether the text goes on or stops, and only an
    assertion about the end could tell the two apart. So a lookahead such as glm-4.5's
    ``(?=<arg_key>|</tool_call>|\\n)`` after its tool call's name is no obstacle."""
    a = _analysis(source)
    if not a.risky or a.other or a.degree not in SPANS or a.end_test:
        return None
    best = None
    for c in dict.fromkeys(ch for ch, _, _ in a.literals):
        if any(_in_class(c, atom) for atom in a.classes):
            continue
        per_branch: dict = {}
        for ch, hi, branch in a.literals:
            if ch == c:
                per_branch[branch] = None if hi is None or per_branch.get(branch, 0) is None else \
                    per_branch.get(branch, 0) + hi
        if None in per_branch.values():
            continue
        k = max(per_branch.values())  # a match takes one top-level alternative
        if best is None or k < best[1]:
            best = (c, k)
    return best


def span_test(bound: tuple[str, int]):
    """For a `match_bound` of (c, k): a compiled `re` pattern that matches at `p`, with the text stopped at
    some end, exactly when the (k+1)-th c from `p` comes before that end (one C call: counting or finding
    the c's from Python costs twice as much). `stops_within` asks it."""
    c, k = bound
    e = re.escape(c)
    return re.compile(f"(?:[^{e}]*{e}){{{k + 1}}}", re.DOTALL)


def stops_within(text: str, p: int, test, span: int) -> bool:
    """For a `match_bound` whose `span_test` is `test`: True when a call at `p` may stop the text at
    ``p + span`` without changing its result, because the (k+1)-th c from `p` comes before it or the text
    ends first. (No path can take that c, and nothing tests where the text ends, so any end at or after it
    gives the whole text's result; the call's time is then polynomial in `span`, of the pattern's degree.)"""
    return len(text) - p <= span or test.match(text, p, p + span) is not None


class SpanBound:
    """How calls on a risky pattern with a `match_bound` are kept short (`bounded_call`): `test`, its
    `span_test`; `span`, the characters from a call's start within which the (k+1)-th c must come (or the text
    end) for the call to run without a timeout, by the pattern's degree (`SPANS`)."""

    __slots__ = ("test", "span")

    def __init__(self, test, span: int):
        self.test, self.span = test, span


def bounded_call(source: str) -> SpanBound | None:
    """The `SpanBound` of a pattern with a `match_bound`, else None."""
    bound = match_bound(source)
    if bound is None:
        return None
    return SpanBound(span_test(bound), SPANS[_analysis(source).degree])


class _Analysis:
    __slots__ = ("risky", "other", "degree", "end_test", "literals", "classes", "branch")

    def __init__(self):
        self.risky = self.other = self.end_test = False
        self.degree = 1  # the longest chain of open unbounded runs
        # per literal atom: (character, most occurrences or None for unbounded, top-level alternative)
        self.literals: list = []
        self.branch = 0
        self.classes: list = []  # sources of the atoms that match a class of characters


@lru_cache(maxsize=1024)
def _analysis(source: str) -> _Analysis:
    a = _Analysis()
    try:
        _scan(source, a)
    except _Risky:
        a.risky = a.other = True
    return a


def _quantifier(source: str, i: int) -> tuple[int, int | None, int]:
    """The quantifier at `i` (``(min, max or None for unbounded, offset after it)``; (1, 1, i) if none)."""
    c = source[i:i + 1]
    lo, hi, j = 1, 1, i
    if c == "*":
        lo, hi, j = 0, None, i + 1
    elif c == "+":
        lo, hi, j = 1, None, i + 1
    elif c == "?":
        lo, hi, j = 0, 1, i + 1
    elif c == "{":
        m = _QUANT.match(source, i)
        if m is None:
            return 1, 1, i  # a literal '{'
        lo = int(m.group(1) or 0)
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if hi is not None and hi > _BIG:
            hi = None
        j = m.end()
    if j > i and source[j:j + 1] in ("?", "+"):  # lazy or possessive
        j += 1
    return lo, hi, j


def _class_end(source: str, i: int) -> int:
    """The offset after the character class opening at `i`."""
    j = i + 1
    if source[j:j + 1] == "^":
        j += 1
    if source[j:j + 1] == "]":
        j += 1
    n = len(source)
    while j < n:
        c = source[j]
        if c == "\\":
            j += 2
        elif c == "[":
            if source.startswith("[:", j):
                k = source.find(":]", j + 2)
                if k < 0:
                    raise _Risky()
                j = k + 2
            else:
                raise _Risky()  # nested sets (version 1 syntax): not followed here
        elif c == "]":
            return j + 1
        else:
            j += 1
    raise _Risky()


def _escape_end(source: str, i: int) -> tuple[int, str | None, bool]:
    """The escape at `i`: (offset after it, the one character it stands for or None, zero width?)."""
    c = source[i + 1:i + 2]
    if not c:
        raise _Risky()
    if c.isdigit() and c != "0" or c == "g":
        raise _Risky()  # a backreference
    if c in _ZERO_WIDTH_ESCAPES:
        return i + 2, None, True
    if c in _ESCAPED_CONTROL:
        return i + 2, _ESCAPED_CONTROL[c], False
    if c in _ARG_ESCAPES:
        k = i + 2 + _ARG_ESCAPES[c]
        try:
            return k, chr(int(source[i + 2:k], 16)), False
        except ValueError as e:
            raise _Risky() from e
    if c in "pPN":
        if source[i + 2:i + 3] == "{":
            k = source.find("}", i + 2)
            if k < 0:
                raise _Risky()
            return k + 1, None, False
        return i + 3, None, False
    if c.isalnum():
        return i + 2, None, False  # \w \d \s ... : a class
    return i + 2, c, False


def _scan(source: str, a: _Analysis) -> None:
    """Walk `source` into `a`, keeping `pending`: (class source, chain length) of the unbounded quantifiers
    that no separator has closed yet, one per path that reaches this point. An unbounded quantifier while
    one is pending makes a chain (``risky``, ``degree``); raises `_Risky` at other signs of many splits."""
    pending: tuple = ()
    # per open group: (pending at its opening, lookaround?, pending at the end of each finished branch)
    stack: list[tuple[tuple, bool, list]] = []
    i, n = 0, len(source)
    while i < n:
        c = source[i]
        if c == "|":
            if stack:
                stack[-1][2].append(pending)
                pending = stack[-1][0]
            else:  # a new top-level alternative: nothing is open at its start
                a.branch += 1
                pending = ()
            i += 1
        elif c == "(":
            i = _open_group(source, i, stack, pending, a)
        elif c == ")":
            if not stack:
                raise _Risky()
            pending, i = _close_group(source, i, stack.pop(), pending)
        else:
            pending, i = _atom(source, i, pending, a)
    if stack:
        raise _Risky()


def _open_group(source: str, i: int, stack: list, pending: tuple, a: _Analysis) -> int:
    """`_scan` at the ``(`` at `i`: a comment or inline flags are skipped, a group is pushed on `stack` (with
    `pending` at its opening); returns where the scan goes on."""
    if source.startswith("(?#", i):
        k = source.find(")", i)
        if k < 0:
            raise _Risky()
        return k + 1
    if source.startswith(("(?P=", "(?(", "(?|"), i):
        raise _Risky()  # backreference, conditional, branch reset
    look = source.startswith(("(?=", "(?!", "(?<=", "(?<!"), i)
    m = regex.match(r"\(\?[a-zA-Z\-]+\)", source[i:])
    if m is not None:  # inline flags for the whole pattern: no group
        return i + m.end()
    stack.append((pending, look, []))
    i += 1
    if source.startswith("?", i):
        # skip the group's head: ?: ?P<name> ?<name> ?= ?! ?<= ?<! ?> or scoped flags ?i:
        m = regex.match(r"\?(?:P?<\w+>|<=|<!|[:=!>]|[a-zA-Z\-]+:)", source[i:])
        if m is None:
            raise _Risky()
        i += m.end()
    return i


def _close_group(source: str, i: int, group: tuple, pending: tuple) -> tuple[tuple, int]:
    """`_scan` at the ``)`` at `i` closing `group` (popped from the stack; `pending` at the end of its last
    branch): ``(pending after it, where the scan goes on)``."""
    at_open, look, branches = group
    branches.append(pending)
    inner = tuple(dict.fromkeys(x for b in branches for x in b))
    lo, hi, j = _quantifier(source, i + 1)
    if j > i + 1 and (hi is None or hi > 1):
        raise _Risky()  # a quantified group
    if look:
        return at_open, j
    if lo == 0:
        return tuple(dict.fromkeys(at_open + inner)), j
    return inner, j


def _atom(source: str, i: int, pending: tuple, a: _Analysis) -> tuple[tuple, int]:
    """`_scan` at the atom at `i` (an escape, a class, an anchor, a character) and its quantifier: ``(pending
    after it, where the scan goes on)``."""
    c = source[i]
    # the atom's extent, and the one character it stands for (None: a class or several)
    if c == "\\":
        k, char, zero = _escape_end(source, i)
        if zero:
            a.end_test = a.end_test or source[i + 1] not in "A"  # \Z \z \b \B \G \K: may test the end
            return pending, k
        atom = source[i:k]
    elif c == "[":
        k = _class_end(source, i)
        atom, char = source[i:k], None
    elif c in "^$":
        a.end_test = a.end_test or c == "$"
        return pending, i + 1
    else:
        k = i + 1
        atom, char = c, (None if c == "." else c)
    lo, hi, j = _quantifier(source, k)
    if char is None:
        a.classes.append(atom)
    else:
        a.literals.append((char, hi, a.branch))
    if lo >= 1 and char is not None and pending and not any(_in_class(char, p) for p, _ in pending):
        pending = ()  # a separator: no open run can take this character, and it must come
    if hi is None:
        chain = 1 + max((length for _, length in pending), default=0)
        if chain > 1:
            a.risky = True
            a.degree = max(a.degree, chain)
        pending = ((atom, chain),)
    return pending, j


def _in_class(char: str, atom: str) -> bool:
    return regex.fullmatch(atom, char, flags=regex.DOTALL) is not None
