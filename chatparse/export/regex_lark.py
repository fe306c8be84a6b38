r"""Delimiter regexes (Python `regex` syntax, DOTALL) rewritten for grammar engines' regex syntax.

The grammar export (`chatparse.export.grammar`) needs each delimiter as a regex the engine understands:
llguidance's (the Rust `regex` crate's syntax: ``\x{..}`` code points, no lookarounds, no backreferences).
Patterns are parsed with CPython's own parser like `regex_ast` does; character sets are resolved to code-point
ranges with `charsets` (the reference's Unicode semantics), so a set is printed as its exact ranges.

What a grammar cannot say is rewritten and *reported* (`Converted.approximations`):

* a trailing positive lookahead ``(?=Y)`` is kept apart as the variant's ``lookahead`` (the grammar places it
  on what follows, which is exact), one variant per alternative that ends in one;
* ``\Z`` / ``$`` at the end make the variant ``at_end`` (the output must end there: exact);
* a lookbehind, a lookahead elsewhere, ``^``, a word boundary become the empty string (a superset), a
  backreference a copy of its group's pattern (a superset); each is named in ``approximations``.

Named groups can be *substituted*: ``subst={"name": "get_weather"}`` replaces group ``name`` by that literal
(how a tool name is written into an opener), and a group listed in ``split`` is replaced by a marker, so the
caller can cut a tag pattern around its ``value`` group.

For structural tags, which have no negation, `restrict_first` (the matches whose first character is in a
set) and `derive` (what may follow a given literal beginning) rewrite a converted variant exactly.
"""

from __future__ import annotations

import re
import re._constants as C
from functools import lru_cache
import re._parser as sre_parse
from dataclasses import dataclass, field

from ..compiler.charsets import MAX_CP, class_ranges, complement, literal_ranges, normalize
from ..compiler.regex_ast import _in_source  # a character class as source the reference's `re` reads

SPLIT_MARK = "\x00SPLIT\x00"
SUBST_MARK = "\x00SUBST\x00"  # where a substituted greedy group ends (see `grammar._Lark.seg`)

_NAMED_GROUP = re.compile(r"(?<!\\)\(\?P<(\w+)>")
_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_=:;,'\"!@%&<>`~ ")


@dataclass
class Variant:
    """One way a delimiter can match: `regex` (engine syntax), then `lookahead` (engine syntax or None) must
    follow it, or the output must end right after it when `at_end`."""

    regex: str
    lookahead: str | None = None
    at_end: bool = False
    lossy: bool = False  # an assertion in this variant was dropped (it matches more than the pattern)


@dataclass
class Converted:
    variants: list[Variant]
    approximations: list[str] = field(default_factory=list)
    lookbehinds: list[str] = field(default_factory=list)  # positive lookbehinds' patterns (engine syntax)
    follow: str | None = None  # the class a substituted greedy group runs on (its literal ends at SUBST_MARK)

    @property
    def exact(self) -> bool:
        return not self.approximations

    def union(self) -> str:
        """All variants as one regex, lookaheads consumed (what a match can span, for exclusions)."""
        parts = [v.regex + (f"(?:{v.lookahead})" if v.lookahead else "") for v in self.variants
                 if not v.at_end]
        return _alt(parts) if parts else ""


_LEAD = re.compile(r"^\(\?:\[[^\]]*\]\)\*")


def strip_lead(rx: str) -> str:
    """`rx` without a leading ``(?:[class])*`` (what the text before a delimiter can absorb)."""
    return _LEAD.sub("", rx, count=1)


def to_python(rx: str) -> str:
    """An engine-syntax regex in Python `regex` syntax (``\\x{..}`` -> ``\\U........``)."""
    rx = rx.replace(SUBST_MARK, "")
    return re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: "\\U%08x" % int(m.group(1), 16), rx)


def escape_char(cp: int) -> str:
    ch = chr(cp)
    if ch in _PLAIN:
        return ch
    return f"\\x{{{cp:x}}}"


def literal(text: str) -> str:
    return "".join(escape_char(ord(c)) for c in text)


def _no_surrogates(ranges) -> list:
    out = []
    for a, b in ranges:
        if a < 0xD800 <= b or a <= 0xDFFF < b or 0xD800 <= a <= b <= 0xDFFF:
            if a < 0xD800:
                out.append((a, 0xD7FF))
            if b > 0xDFFF:
                out.append((0xE000, b))
        else:
            out.append((a, b))
    return out


def ranges_regex(ranges) -> str:
    ranges = list(ranges)
    if ranges == [(0, MAX_CP)]:
        return "(?s:.)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return escape_char(ranges[0][0])
    comp = _no_surrogates(complement(tuple(ranges)))
    if len(comp) < len(ranges) and comp:
        return "[^" + "".join(_range(a, b) for a, b in comp) + "]"
    return "[" + "".join(_range(a, b) for a, b in _no_surrogates(ranges)) + "]"


def _range(a: int, b: int) -> str:
    if a == b:
        return f"\\x{{{a:x}}}"
    return f"\\x{{{a:x}}}-\\x{{{b:x}}}"


def _alt(parts: list[str]) -> str:
    parts = list(dict.fromkeys(parts))
    if len(parts) == 1:
        return parts[0]
    return "(?:" + "|".join(parts) + ")"


def _unique_group_names(pattern: str) -> str:
    names = _NAMED_GROUP.findall(pattern)
    if len(names) == len(set(names)):
        return pattern
    counter = iter(range(1, len(names) + 1))
    return _NAMED_GROUP.sub(lambda m: f"(?P<{m.group(1)}__{next(counter)}>", pattern)


def convert(pattern: str, *, subst: dict | None = None, split: tuple = ()) -> Converted:
    """`pattern` (DOTALL) as engine-syntax variants. Raises ValueError for what cannot be converted."""
    try:
        parsed = sre_parse.parse(_unique_group_names(pattern), re.DOTALL)
    except re.error as e:
        raise ValueError(f"pattern {pattern!r}: {e}") from e
    conv = _Conv(parsed.state, subst or {}, split)
    variants = conv.seq(list(parsed), parsed.state.flags, tail=True)
    if conv.notes_outside_branches:
        for v in variants:
            v.lossy = True
    follow = next(iter(conv.follow.values())) if conv.follow else None
    return Converted(variants=_merge(variants), approximations=conv.approx, lookbehinds=conv.lookbehinds,
                     follow=follow)


def start_forms(pattern: str, *, subst: dict | None = None) -> tuple[str, str]:
    """(M, P) in engine syntax for the pattern *as it can start a match*: M is the pattern without a leading
    ``\\s*``-like run, with a trailing lookahead's text consumed and other assertions empty; P is the
    prefixes of M (the empty string included). A match of the pattern starts at a position from which the
    text is in ``M.*`` - and may start from one where the text (so far) is in P."""
    parsed = sre_parse.parse(_unique_group_names(pattern), re.DOTALL)
    conv = _Conv(parsed.state, subst or {}, ())
    items = _strip_items(list(parsed))
    flags = parsed.state.flags
    return conv.full(items, flags), conv.pref(items, flags)


def _strip_items(items: list) -> list:
    """`items` without a leading ``x*`` run of one character class (in each alternative of a leading
    alternation)."""
    if not items:
        return items
    op, av = items[0]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] == 0 and av[1] >= C.MAXREPEAT and len(list(av[2])) == 1 \
            and list(av[2])[0][0] in (C.IN, C.LITERAL, C.ANY, C.NOT_LITERAL):
        return items[1:]
    if op is C.BRANCH and len(items) == 1:
        return [(C.BRANCH, (av[0], [_Items(_strip_items(list(b))) for b in av[1]]))]
    return items


class _Items(list):
    """A plain list standing in for a parsed subpattern."""


def _merge(variants: list[Variant]) -> list[Variant]:
    by_key: dict = {}
    for i, v in enumerate(variants):
        # a variant holding a substituted group stays on its own (its end is marked)
        key = (v.lookahead, v.at_end, v.lossy, i if SUBST_MARK in v.regex else -1)
        by_key.setdefault(key, []).append(v.regex)
    return [Variant(_alt(rxs), la, end, lossy) for (la, end, lossy, _), rxs in by_key.items()]


class _Conv:
    def __init__(self, state, subst: dict, split: tuple):
        self.names = {gid: name.split("__")[0] for name, gid in state.groupdict.items()}
        self.subst = subst
        self.split = split
        self.approx: list[str] = []
        self.groups: dict = {}
        self.n_notes = 0
        self.follow: dict = {}
        self.lookbehinds: list[str] = []
        self.branch_depth = 0
        self.notes_outside_branches = False

    def note(self, what: str) -> None:
        self.n_notes += 1
        if not self.branch_depth:
            self.notes_outside_branches = True
        if what not in self.approx:
            self.approx.append(what)

    def seq(self, items, flags, tail: bool) -> list[Variant]:
        """Variants of a concatenation: only its last item may end in a lookahead or at the end."""
        prefix = ""
        for i, (op, av) in enumerate(items):
            last = tail and i == len(items) - 1
            vs = self.node(op, av, flags, last)
            if last:
                return [Variant(prefix + v.regex, v.lookahead, v.at_end, v.lossy) for v in vs]
            prefix += self.plain(vs)
        return [Variant(prefix)]

    # -- (M, P) forms for `start_forms`: lookaheads consumed, other assertions empty
    def full(self, items, flags) -> str:
        return "".join(self.full1(op, av, flags) for op, av in items)

    def full1(self, op, av, flags) -> str:
        if op is C.BRANCH:
            return _alt([self.full(list(b), flags) for b in av[1]])
        if op is C.SUBPATTERN:
            gid, add, dele, p = av
            name = self.names.get(gid)
            if name is not None and name in self.subst:
                v = self.subst[name]
                return f"(?:{v[1]})" if isinstance(v, tuple) else literal(v)
            return "(?:" + self.full(list(p), (flags | add) & ~dele) + ")"
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            hi = "" if hi >= C.MAXREPEAT else hi
            return "(?:" + self.full(list(p), flags) + "){%d,%s}" % (lo, hi)
        if op is C.ATOMIC_GROUP:
            return "(?:" + self.full(list(av), flags) + ")"
        if op is C.ASSERT and av[0] > 0:
            return "(?:" + self.full(list(av[1]), flags) + ")"
        if op in (C.ASSERT, C.ASSERT_NOT, C.AT):
            return ""
        if op is C.GROUPREF:
            return self.groups.get(av, "(?s:.)*")
        if op is C.GROUPREF_EXISTS:
            gid, yes, no = av
            return _alt([self.full(list(yes), flags), self.full(list(no), flags) if no else ""])
        return self.plain(self.node(op, av, flags, False))

    def pref(self, items, flags) -> str:
        """Prefixes (the empty one included) of `full(items)`."""
        alts = []
        done = ""
        for op, av in items:
            p1 = self.pref1(op, av, flags)
            alts.append(done + f"(?:{p1})" if p1 else done)
            done += self.full1(op, av, flags)
        alts.append(done)
        return _alt(alts) if alts else ""

    def pref1(self, op, av, flags) -> str:
        if op is C.BRANCH:
            return _alt([self.pref(list(b), flags) for b in av[1]])
        if op is C.SUBPATTERN:
            gid, add, dele, p = av
            name = self.names.get(gid)
            if name is not None and name in self.subst:
                v = self.subst[name]
                if isinstance(v, tuple):
                    return f"(?:{v[1]})?"  # a prefix of the substituted class run: approximated by it
                return _alt([""] + ["".join(escape_char(ord(c)) for c in v[:k]) for k in range(1, len(v) + 1)]) \
                    if v else ""
            return self.pref(list(p), (flags | add) & ~dele)
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            if hi == 0:
                return ""
            inner = self.full(list(p), flags)
            hi2 = "" if hi >= C.MAXREPEAT else hi - 1
            return f"(?:{inner}){{0,{hi2}}}(?:{self.pref(list(p), flags)})"
        if op is C.ATOMIC_GROUP:
            return self.pref(list(av), flags)
        if op is C.ASSERT and av[0] > 0:
            return self.pref(list(av[1]), flags)
        if op in (C.ASSERT, C.ASSERT_NOT, C.AT):
            return ""
        if op is C.GROUPREF:
            return self.groups.get(av, "(?s:.)*")
        if op is C.GROUPREF_EXISTS:
            gid, yes, no = av
            return _alt([self.pref(list(yes), flags), self.pref(list(no), flags) if no else ""])
        return "(?:" + self.plain(self.node(op, av, flags, False)) + ")?"

    def plain(self, vs: list[Variant]) -> str:
        """Variants in a non-final position (never carry a lookahead)."""
        if any(v.lossy for v in vs) and self.branch_depth:
            self.n_notes += 1  # the enclosing branch's variants become lossy
        return _alt([v.regex for v in vs])

    def sub(self, p, flags) -> str:
        return self.plain(self.seq(list(p), flags, tail=False))

    def node(self, op, av, flags, tail: bool) -> list[Variant]:
        ic = bool(flags & re.IGNORECASE)
        if op is C.LITERAL:
            return [Variant(ranges_regex(literal_ranges(av, ic)))]
        if op is C.NOT_LITERAL:
            return [Variant(ranges_regex(complement(literal_ranges(av, ic))))]
        if op is C.ANY:
            return [Variant("(?s:.)" if flags & re.DOTALL else "[^\\n]")]
        if op is C.IN:
            return [Variant(ranges_regex(class_ranges(_in_source(av), re.IGNORECASE if ic else 0)))]
        if op is C.BRANCH:
            out = []
            self.branch_depth += 1
            for b in av[1]:
                before = self.n_notes
                vs = self.seq(list(b), flags, tail)
                if self.n_notes > before:
                    for v in vs:
                        v.lossy = True
                out.extend(vs)
            self.branch_depth -= 1
            return _merge(out)
        if op is C.SUBPATTERN:
            gid, add, dele, p = av
            name = self.names.get(gid)
            if name is not None and name in self.split:
                return [Variant(SPLIT_MARK)]
            if name is not None and name in self.subst:
                value = self.subst[name]
                if isinstance(value, tuple):  # ("regex", engine-syntax regex)
                    return [Variant(f"(?:{value[1]})")]
                inner = list(p)
                if len(inner) == 1 and inner[0][0] is C.MAX_REPEAT and inner[0][1][1] >= C.MAXREPEAT:
                    # a greedy run: the parser's capture is the literal only if the run stops right after it
                    self.follow[name] = self.sub(inner[0][1][2], (flags | add) & ~dele)
                    return [Variant(literal(value) + SUBST_MARK)]
                return [Variant(literal(value))]
            vs = self.seq(list(p), (flags | add) & ~dele, tail)
            if gid is not None:
                self.groups[gid] = self.plain(vs)
            return vs
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            if op is C.POSSESSIVE_REPEAT:
                self.note("possessive quantifier read as greedy (a superset)")
            inner = self.sub(p, flags)
            hi = None if hi >= C.MAXREPEAT else hi
            if (lo, hi) == (0, None):
                q = "*"
            elif (lo, hi) == (1, None):
                q = "+"
            elif (lo, hi) == (0, 1):
                q = "?"
            else:
                q = "{%d,%s}" % (lo, "" if hi is None else hi)
            return [Variant(f"(?:{inner}){q}")]
        if op is C.ATOMIC_GROUP:
            self.note("atomic group read as a plain group (a superset)")
            return self.seq(list(av), flags, tail)
        if op is C.AT:
            if av is C.AT_END_STRING and tail:
                return [Variant("", at_end=True)]
            if av is C.AT_END and tail and not flags & re.MULTILINE:
                return [Variant("", at_end=True), Variant("\\n", at_end=True)]
            self.note(f"assertion {av} dropped (a superset)")
            return [Variant("")]
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, p = av
            if op is C.ASSERT and direction > 0 and tail:
                return [Variant("", lookahead=self.sub(p, flags))]
            if op is C.ASSERT and direction < 0:
                self.lookbehinds.append(self.sub(p, flags))
            kind = "lookbehind" if direction < 0 else "lookahead"
            neg = "negative " if op is C.ASSERT_NOT else ""
            self.note(f"{neg}{kind} dropped (a superset)")
            return [Variant("")]
        if op is C.GROUPREF:
            self.note("backreference read as a copy of its group's pattern (a superset)")
            return [Variant(self.groups.get(av, "(?s:.)*"))]
        if op is C.GROUPREF_EXISTS:
            gid, yes, no = av
            self.note("conditional group read as either branch (a superset)")
            out = self.seq(list(yes), flags, tail) + (self.seq(list(no), flags, tail) if no else [Variant("")])
            return _merge(out)
        raise ValueError(f"unsupported regex construct {op}")


# -------------------------------------------------------------- first-character restriction (structural tags)


@lru_cache(maxsize=4096)  # pure, and asked again per tool and per export
def char_ranges(rx: str) -> tuple:
    """The code points an engine-syntax regex of one character (a class, ``(?s:.)``, a literal) matches."""
    parsed = list(sre_parse.parse(to_python(rx), re.DOTALL))
    if len(parsed) == 1 and parsed[0][0] is C.SUBPATTERN:
        parsed = list(parsed[0][1][3])
    if len(parsed) != 1:
        raise ValueError(f"not a single character: {rx!r}")
    op, av = parsed[0]
    return _item_ranges(op, av, re.DOTALL)


def _item_ranges(op, av, flags):
    ic = bool(flags & re.IGNORECASE)
    if op is C.LITERAL:
        return literal_ranges(av, ic)
    if op is C.NOT_LITERAL:
        return complement(literal_ranges(av, ic))
    if op is C.ANY:
        return ((0, MAX_CP),) if flags & re.DOTALL else complement(((10, 10),))
    if op is C.IN:
        if not ic and all(k in (C.LITERAL, C.RANGE, C.NEGATE) for k, _ in av):
            # the classes `ranges_regex` prints: code points and ranges (fast; no scan of all characters)
            rs = normalize([(v, v) if k is C.LITERAL else v for k, v in av if k is not C.NEGATE])
            return complement(rs) if any(k is C.NEGATE for k, _ in av) else rs
        return class_ranges(_in_source(av), re.IGNORECASE if ic else 0)
    return None


def _intersect(a, b) -> tuple:
    out = []
    for lo, hi in normalize(a):
        for lo2, hi2 in normalize(b):
            lo3, hi3 = max(lo, lo2), min(hi, hi2)
            if lo3 <= hi3:
                out.append((lo3, hi3))
    return normalize(out)


def _nullable(items) -> bool:
    for op, av in items:
        if _item_ranges(op, av, 0) is not None or op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
            return False
        if op is C.BRANCH:
            if not any(_nullable(list(b)) for b in av[1]):
                return False
        elif op is C.SUBPATTERN:
            if not _nullable(list(av[3])):
                return False
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            if av[0] > 0 and not _nullable(list(av[2])):
                return False
        elif op is C.ATOMIC_GROUP:
            if not _nullable(list(av)):
                return False
        elif op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            continue
        else:
            raise ValueError(f"unsupported regex construct {op}")
    return True


@lru_cache(maxsize=4096)  # pure, and asked again per tool and per export
def nullable(rx: str) -> bool:
    """Whether an engine-syntax regex (without assertions) matches the empty string."""
    return _nullable(list(sre_parse.parse(to_python(rx), re.DOTALL)))


@lru_cache(maxsize=4096)  # pure, and asked again per tool and per export
def derive(rx: str, text: str) -> str | None:
    """The engine-syntax regex of the strings w such that `text` + w matches `rx` (None: no match of `rx`
    begins with `text`): how a structural tag writes "a delimiter whose match begins with Y" after a closer
    whose trailing lookahead is the literal Y."""
    for ch in text:
        if rx is None:
            return None
        rx = restrict_first(rx, ((ord(ch), ord(ch)),), consume=True)
    return rx


@lru_cache(maxsize=4096)  # pure, and asked again per tool and per export
def literal_alternatives(rx: str) -> tuple[tuple, bool]:
    """The literal strings among the top-level alternatives of an engine-syntax regex (the others are left
    out: a caller uses these as a subset), and whether every alternative is one."""
    parsed = list(sre_parse.parse(to_python(rx), re.DOTALL))

    def lits(items) -> list[str] | None:
        outs = [""]
        for op, av in items:
            if op is C.LITERAL:
                outs = [o + chr(av) for o in outs]
            elif op is C.SUBPATTERN and not av[1] and not av[2]:
                sub = lits(list(av[3]))
                if sub is None:
                    return None
                outs = [o + x for o in outs for x in sub]
            elif op is C.BRANCH:
                alts = [lits(list(b)) for b in av[1]]
                if any(a is None for a in alts):
                    return None
                outs = [o + x for o in outs for a in alts for x in a]
            else:
                return None
        return outs

    whole = lits(parsed)
    if whole is not None:
        return tuple(x for x in dict.fromkeys(whole) if x), all(whole)
    out, complete = [], True
    if len(parsed) == 1 and parsed[0][0] is C.BRANCH:
        for b in parsed[0][1][1]:
            one = lits(list(b))
            complete = complete and bool(one) and all(one)
            out.extend(one or [])
    else:
        complete = False
    return tuple(x for x in dict.fromkeys(out) if x), complete


@lru_cache(maxsize=4096)  # pure, and asked again per tool and per export
def restrict_first(rx: str, allowed, consume: bool = False) -> str | None:
    """The non-empty matches of the engine-syntax regex `rx` whose first character is in `allowed` (code-point
    ranges), as an engine-syntax regex; None when there is none.

    Exact for the variants `convert` makes (no assertions left in them): it is how a structural tag, which has
    no negation, says "a tool name, then anything the opener allows except a character the name's greedy
    group would also take" (restrict what follows the name to the complement of that group's class)."""
    parsed = sre_parse.parse(to_python(rx), re.DOTALL)
    conv = _Conv(parsed.state, {}, ())
    allowed = normalize(allowed)

    def seq(items, flags):
        alts = []
        for i, (op, av) in enumerate(items):
            r = one(op, av, flags)
            if r is not None:
                alts.append(r + (conv.sub(items[i + 1:], flags) if i + 1 < len(items) else ""))
            if not _nullable([(op, av)]):
                break
        return _alt(alts) if alts else None

    def one(op, av, flags):
        rs = _item_ranges(op, av, flags)
        if rs is not None:
            inter = _intersect(rs, allowed)
            return ("" if consume else ranges_regex(inter)) if inter else None
        if op is C.BRANCH:
            alts = [r for r in (seq(list(b), flags) for b in av[1]) if r is not None]
            return _alt(alts) if alts else None
        if op is C.SUBPATTERN:
            r = seq(list(av[3]), (flags | av[1]) & ~av[2])
            return None if r is None else f"(?:{r})" if r else ""
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            if hi == 0:
                return None
            r = seq(list(p), flags)
            if r is None:
                return None
            lo2 = 0 if _nullable(list(p)) else max(lo - 1, 0)
            hi2 = "" if hi >= C.MAXREPEAT else hi - 1
            head = f"(?:{r})" if r else ""
            if hi2 == 0:
                return head
            q = "*" if (lo2, hi2) == (0, "") else "{%d,%s}" % (lo2, hi2)
            return f"{head}(?:{conv.sub(list(p), flags)}){q}"
        if op is C.ATOMIC_GROUP:
            return seq(list(av), flags)
        if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
            return None
        raise ValueError(f"unsupported regex construct {op}")

    return seq(list(parsed), parsed.state.flags)
