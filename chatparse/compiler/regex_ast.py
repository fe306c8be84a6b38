"""Delimiter regexes to a small AST, and what the automaton can decide about each pattern by itself.

Patterns are parsed with CPython's own regex parser (`re._parser`), whose syntax the `regex` module extends;
regex-only syntax (``\\p{..}``, POSIX classes, branch reset, fuzzy matching...) is refused with a clear error.
Character sets are taken from `regex` itself (see `charsets`), so Unicode semantics are exactly the reference's.

AST nodes are tuples:

* ``("set", ranges)``                one character in `ranges`
* ``("seq", [nodes])`` / ``("alt", [nodes])``   concatenation / ordered alternation (leftmost-first)
* ``("rep", lo, hi_or_None, greedy, node)``      repetition; lazy when `greedy` is False
* ``("bol",)``                       ``^`` / ``\\A``: true only at offset 0 of the parsed stream
* ``("eot",)``                       ``\\Z`` as the last element: true only at end of text
* ``("dollar",)``                    ``$`` as the last element: end of text, or before a final ``\\n``
* ``("eps",)``                       the empty string

A pattern is *exact* when its AST says everything about where a match starts and ends (leftmost-first, lazy
and greedy quantifiers included): the tables then decide it alone. Anything else - lookarounds (other than a
trailing positive lookahead), backreferences, word boundaries, atomic groups, possessive quantifiers,
conditionals, ``$``/``\\Z`` before the end, MULTILINE, a counted repetition too large to expand
(`COUNT_LIMIT`) - makes it *regex-decided*: the AST is then a superset approximation (assertions become
empty, a trailing lookahead is consumed, a backreference becomes a copy of its group, ``x{m,n}`` becomes
``x+`` or ``x*``) used only to know where a match could start and when it can no longer grow; the exact
match is taken from `regex` on that short span, with `history` characters before it and `horizon`
characters after the approximation's last possible end.
"""

from __future__ import annotations

import re
import re._constants as C
import re._parser as sre_parse
from dataclasses import dataclass, field

from .charsets import MAX_CP, class_ranges, complement, literal_ranges

ALL = ((0, MAX_CP),)

# A counted repetition whose expansion would exceed this many NFA states (body states times the larger
# count) is not expanded: see `_node`. Small counts ({1,2}, {3}, x{0,8}) stay exact.
COUNT_LIMIT = 64

_CATEGORY_SOURCE = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}

# Syntax that the `regex` module reads differently from `re` (or that `re` reads at all where `regex`
# does not): refuse rather than risk a silent difference.
_REGEX_ONLY = re.compile(
    r"\[:\w+:\]|\\[pPXKGmML]|\(\?\||\(\?[rVbef]|\{(?:[eids](?:[<=]|\})|\d+[ids])|\(\?\(DEFINE|\(\?R|\(\?\d|\(\?&"
)


class PatternError(ValueError):
    """A delimiter pattern the compiler cannot turn into tables."""


@dataclass
class Analysis:
    ast: tuple
    exact: bool = True
    reasons: list = field(default_factory=list)
    history: int = 0  # characters before the match start that `regex` may inspect
    horizon: int | None = 0  # characters after the last possible end `regex` may inspect (None: unbounded)
    groups: dict = field(default_factory=dict)
    # Whether the AST may order matches otherwise than `regex` does: True for every reason to ask `regex` but
    # a trailing positive lookahead (read as consumed text, it keeps the order: the match of REST(?=LA) is
    # REST's part of the leftmost-first match of REST LA). A pattern that is not loose has its DFA threads
    # pruned as an exact pattern's are, so the tables say when its match can no longer change (build.py).
    loose: bool = False

    def need_regex(self, why: str, history: int = 0, horizon: int | None = 0, ordered: bool = False) -> None:
        self.exact = False
        if not ordered:
            self.loose = True
        if why not in self.reasons:
            self.reasons.append(why)
        self.history = max(self.history, history)
        if self.horizon is not None:
            self.horizon = None if horizon is None else max(self.horizon, horizon)


def _size(node) -> int:
    """About how many NFA states `node` expands to (`nfa.build_nfa`), counted repeats expanded."""
    kind = node[0]
    if kind == "set":
        return 1
    if kind in ("seq", "alt"):
        return sum(_size(c) for c in node[1]) + (kind == "alt")
    if kind == "rep":
        _, lo, hi, _, body = node
        return _size(body) * max(lo, hi or 0, 1) + 1
    return 1


def literal_ast(literals: list[str]) -> tuple:
    """The AST of a literal list, ordered longest-first like the reference's alternation."""
    ordered = sorted(literals, key=len, reverse=True)
    alts = [("seq", [("set", ((ord(ch), ord(ch)),)) for ch in s]) for s in ordered]
    return alts[0] if len(alts) == 1 else ("alt", alts)


def _width(sub) -> int | None:
    lo, hi = sub.getwidth()
    return None if hi >= C.MAXREPEAT - 1 else hi


def analyse(pattern: str) -> Analysis:
    """Parse `pattern` (compiled by the reference with DOTALL) into an `Analysis`."""
    if _REGEX_ONLY.search(pattern):
        raise PatternError(f"pattern {pattern!r} uses syntax specific to the `regex` module; chatparse supports "
                           "the syntax shared by `re` and `regex`")
    try:
        parsed = sre_parse.parse(_unique_group_names(pattern), re.DOTALL)
    except re.error as e:
        raise PatternError(f"pattern {pattern!r} cannot be compiled to tables: {e}") from e
    flags = parsed.state.flags
    an = Analysis(ast=("eps",))
    an.ast = _convert(parsed, flags, an, tail=True)
    return an


_NAMED_GROUP = re.compile(r"(?<!\\)\(\?P<(\w+)>")


def _unique_group_names(pattern: str) -> str:
    """`regex` allows one group name in several alternatives (gpt-oss does this); `re`'s parser does not.

    The AST never needs group names (captures are read from `regex` itself), so duplicates are renamed.
    A named backreference to a duplicated name is refused: which group it means is `regex`-specific.
    """
    names = _NAMED_GROUP.findall(pattern)
    dupes = {n for n in names if names.count(n) > 1}
    if not dupes:
        return pattern
    if any(f"(?P={n})" in pattern for n in dupes):
        raise PatternError(f"pattern {pattern!r} refers back to a group name it defines more than once")
    counter = iter(range(1, len(names) + 1))
    return _NAMED_GROUP.sub(lambda m: f"(?P<{m.group(1)}__{next(counter)}>", pattern)


def _convert(sub, flags: int, an: Analysis, tail: bool) -> tuple:
    items = list(sub)
    out = []
    for i, (op, av) in enumerate(items):
        out.append(_node(op, av, flags, an, tail and i == len(items) - 1))
    return out[0] if len(out) == 1 else ("seq", out)


def _anchor_slack(sub) -> int:
    """Extra characters `regex` must see past a lookahead's width: `$`/`\\Z` inside need 2, `\\b` 1."""
    text = repr(sub.data)
    return 2 if "AT_END" in text else 1 if "BOUNDARY" in text else 0


def _in_source(items) -> str:
    parts = []
    negate = ""
    for op, av in items:
        if op is C.NEGATE:
            negate = "^"
        elif op is C.LITERAL:
            parts.append(f"\\U{av:08x}")
        elif op is C.RANGE:
            parts.append(f"\\U{av[0]:08x}-\\U{av[1]:08x}")
        elif op is C.CATEGORY and av in _CATEGORY_SOURCE:
            parts.append(_CATEGORY_SOURCE[av])
        else:
            raise PatternError(f"unsupported character-class item {op} {av}")
    return "[" + negate + "".join(parts) + "]"


def _node(op, av, flags: int, an: Analysis, tail: bool) -> tuple:
    ic = bool(flags & re.IGNORECASE)
    ml = bool(flags & re.MULTILINE)
    if op is C.LITERAL:
        return ("set", literal_ranges(av, ic))
    if op is C.NOT_LITERAL:
        return ("set", complement(literal_ranges(av, ic)))
    if op is C.ANY:
        return ("set", ALL if flags & re.DOTALL else complement(((10, 10),)))
    if op is C.IN:
        return ("set", class_ranges(_in_source(av), re.IGNORECASE if ic else 0))
    if op is C.BRANCH:
        return ("alt", [_convert(b, flags, an, tail) for b in av[1]])
    if op is C.SUBPATTERN:
        gid, add, dele, p = av
        inner = _convert(p, (flags | add) & ~dele, an, tail)
        if gid is not None:
            an.groups[gid] = inner
        return inner
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        lo, hi, p = av
        if op is C.POSSESSIVE_REPEAT:
            an.need_regex("possessive quantifier")
        body = _convert(p, flags, an, False)
        hi = None if hi >= C.MAXREPEAT else hi
        if _size(body) * max(lo, hi or 0) > COUNT_LIMIT:
            # Expanded, x{2000} is 2000 automaton states, and text such as "aaaa..." keeps an attempt alive
            # in each of them at once. The tables step the superset x+ (x* when lo == 0) instead, and `regex`
            # decides the real match on the attempt's short span (the runtime bounds that span by the
            # pattern's maximum width, `runtime/tables/layout.py` `_max_width`).
            an.need_regex("large counted repetition")
            return ("rep", min(lo, 1), None, True, body)
        return ("rep", lo, hi, op is not C.MIN_REPEAT, body)
    if op is C.ATOMIC_GROUP:
        an.need_regex("atomic group")
        return _convert(av, flags, an, tail)
    if op is C.AT:
        if av in (C.AT_BEGINNING, C.AT_BEGINNING_STRING) and not (ml and av is C.AT_BEGINNING):
            return ("bol",)
        if av is C.AT_BEGINNING:
            an.need_regex("'^' with MULTILINE", history=1)
            return ("eps",)
        if av is C.AT_END_STRING:
            if tail:
                return ("eot",)
            an.need_regex("'\\Z' before the end of the pattern", horizon=1)
            return ("eps",)
        if av is C.AT_END:
            if tail and not ml:
                return ("dollar",)
            an.need_regex("'$' before the end of the pattern", horizon=2)
            return ("eps",)
        an.need_regex("word boundary", history=1, horizon=1)
        return ("eps",)
    if op in (C.ASSERT, C.ASSERT_NOT):
        direction, p = av
        width = _width(p)
        if direction < 0:
            if width is None:
                raise PatternError("unbounded lookbehind cannot be decided on a bounded window")
            an.need_regex("lookbehind", history=width)
            return ("eps",)
        if op is C.ASSERT and tail:
            an.need_regex("lookahead", ordered=True)  # (`Analysis.loose`)
            return _convert(p, flags, an, True)
        an.need_regex("lookahead", horizon=None if width is None else width + _anchor_slack(p))
        return ("eps",)
    if op is C.GROUPREF:
        an.need_regex("backreference")
        if av not in an.groups:
            raise PatternError(f"backreference to group {av} before it is defined")
        return an.groups[av]
    if op is C.GROUPREF_EXISTS:
        gid, yes, no = av
        an.need_regex("conditional group")
        return ("alt", [_convert(yes, flags, an, tail), _convert(no, flags, an, tail) if no else ("eps",)])
    raise PatternError(f"unsupported regex construct {op}")
