"""Literal strings a delimiter pattern's matches are made of, or start with, read from its source.

A one-shot parse (runtime/oneshot/parse.py) uses them to let ``str.find`` and ``str.startswith`` stand in for
`regex`: a pattern that is a list of literals is decided without `regex`, and a pattern whose every match
starts with one of a few literals is not asked where none starts. Both functions answer None whenever the
source uses anything they do not read exactly (classes, groups, quantifiers on the last character, inline
flags), so a None only costs speed. tests/test_oneshot.py checks them against `regex` at every offset.
"""

from __future__ import annotations

_META = frozenset(".^$*+?{}[]()|")
# Groups that only group, name, refer back or look around: they mean the same in `re` and `regex` and set
# no flags (runtime/values/parsers.py uses them too).
PLAIN_GROUP_STARTS = ("(?:", "(?P<", "(?P=", "(?=", "(?!", "(?<=", "(?<!")


def literal_pieces(source: str) -> tuple | None:
    """The alternatives of `source` when it is a list of non-empty literal strings (``a|b\\|c``: ("a", "b|c")),
    else None. `regex` matches such a pattern at an offset with the first alternative that starts there,
    which ``str.startswith`` decides, and ``str.find`` finds the alternatives without a regex search."""
    pieces, cur, i, n = [], [], 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            d = source[i + 1:i + 2]
            if not d or d.isalnum():
                return None
            cur.append(d)
            i += 2
            continue
        if c == "|":
            pieces.append("".join(cur))
            cur = []
        elif c in _META:  # (whitespace and '#' are literal: the verbose flag would need a "(?")
            return None
        else:
            cur.append(c)
        i += 1
    pieces.append("".join(cur))
    return tuple(pieces) if all(pieces) else None


def literal_prefixes(source: str) -> tuple | None:
    """Non-empty literal strings, one of which every match of `source` starts with (the literal start of each
    top-level alternative), or None when that cannot be said simply. A quick test before a `regex` call:
    ``str.startswith`` costs a tenth of a match call, and a risky pattern's call costs ten times more."""
    alternatives = top_alternatives(source)
    if alternatives is None:
        return None
    prefixes = []
    for alt in alternatives:
        lit = _literal_start(alt)
        if not lit:
            return None
        prefixes.append(lit)
    return tuple(prefixes)


def top_alternatives(source: str) -> list | None:
    """The sources of the top-level alternatives of `source` (``a|b(c|d)``: ["a", "b(c|d)"]), or None when
    it uses a group other than a plain, named, lookaround or backreference one (inline flags: a global one
    anywhere changes every alternative)."""
    alternatives, depth, start = [], 0, 0
    for i, c in _syntax(source):
        if c == "(":
            if source.startswith("(?", i) and not source.startswith(PLAIN_GROUP_STARTS, i):
                return None  # inline flags (a global one anywhere changes the whole pattern) or other groups
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            alternatives.append(source[start:i])
            start = i + 1
    alternatives.append(source[start:])
    return alternatives


def _syntax(source: str):
    """(offset, character) of each character of `source` outside escapes and character classes: the ones
    that can open or close a group or separate alternatives."""
    in_set, i, n = False, 0, len(source)
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if in_set:
            in_set = c != "]"
        elif c == "[":
            in_set = True
            if source[i + 1:i + 2] == "^":
                i += 1
            if source[i + 1:i + 2] == "]":
                i += 1
        else:
            yield i, c
        i += 1


def _literal_start(alt: str) -> str:
    """The literal characters every match of the alternative `alt` starts with ("" if none)."""
    lit, i = [], 0
    while i < len(alt):
        c = alt[i]
        if c == "\\":
            d = alt[i + 1:i + 2]
            if not d or d.isalnum():
                break
            lit.append(d)
            i += 2
        elif c in _META:
            if c in "*+?{" and lit:
                lit.pop()  # the last character was quantified
            break
        else:
            lit.append(c)
            i += 1
    return "".join(lit)


_LEAD_WS = ("\\s*", "\\s+")


def literals_after_whitespace(source: str) -> tuple | None:
    """Non-empty literal strings, one of which every match of `source` has right after its leading run of
    whitespace, when every top-level alternative is ``\\s*`` or ``\\s+`` followed by a literal start (plain,
    in a non-capturing group, or in a lookahead: ``\\s*</think>\\s*|\\s*(?=<tool_call>)`` gives
    ("</think>", "<tool_call>")) and no such literal starts with whitespace; None otherwise.

    Then a match at `p` needs one of them exactly where the run of `regex`'s whitespace from `p` ends: the run
    cannot stop earlier (the next character, whitespace, cannot start the literal), nor take a character
    past its end. A one-shot parse tests that with ``str.startswith`` instead of a `regex` call per pattern
    (qwen3's mode outside regions watches three such patterns at every candidate)."""
    alternatives = top_alternatives(source)
    if not alternatives:
        return None
    out: list = []
    for alt in alternatives:
        if alt[:3] not in _LEAD_WS:
            return None
        rest = alt[3:]
        if rest[:1] in ("*", "+", "?", "{"):  # (a lazy or possessive run, or a quantified one)
            return None
        if rest.startswith(("(?:", "(?=")):
            end = _group_end(rest)
            if end is None or rest[end + 1:end + 2] in ("*", "+", "?", "{"):
                return None  # (an optional or repeated group)
            rest = rest[3:end]
        lits = literal_prefixes(rest)
        if lits is None:
            return None
        out.extend(lits)
    if any(lit[0].isspace() for lit in out):
        return None  # (a literal that could start inside the run: `str.isspace` takes all `regex`'s \s takes)
    return tuple(dict.fromkeys(out))


def _group_end(source: str) -> int | None:
    """The offset of the ``)`` that closes the group `source` starts with, or None."""
    depth = 0
    for i, c in _syntax(source):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
    return None


#: What a shaped alternative's match takes after its literal (`literal_shapes`).
SHAPE_END, SHAPE_TRAIL, SHAPE_AHEAD = 0, 1, 2
_ANY_RUN = 1 << 62  # (no bound on the leading whitespace run)


def literal_shapes(source: str) -> tuple | None:
    """Per top-level alternative of `source`, in order, ``(run_min, run_max, literals, after)`` when every one
    is exactly an optional lead (``\\s*``: a whitespace run of 0 or more, ``\\s+``: 1 or more, none: 0)
    followed by literal strings, and nothing else: ``LIT``, ``(?:A|B)`` (`literals` the choices, in order) or
    the lookahead ``(?=A|B)``, then for the first two optionally ``\\s*`` at the very end. `after` is
    SHAPE_END (the match ends after the literal), SHAPE_TRAIL (then takes the whole whitespace run after it)
    or SHAPE_AHEAD (the match ends where the literal starts). No literal starts with whitespace. None for
    any other source (``</tool_call>\\s*``, ``\\s*</think>\\s*|\\s*(?=<tool_call>)`` are shaped).

    Then `regex`'s match at `p` is found with string tests alone (`oneshot._decide_shaped`): where the run of
    whitespace from `p` ends at `q`, a lead can only end at `q` (the next character, not whitespace, cannot be
    taken by it, and a literal cannot start earlier), so an alternative matches when its run bounds admit
    ``q - p`` and one of its literals starts at `q`; the pattern's match is its first such alternative (in a
    group, the first choice that starts there: nothing after the choice can fail), and a trailing ``\\s*``
    takes the whole run after the literal. A shaped pattern has no capturing group."""
    alternatives = top_alternatives(source)
    if not alternatives:
        return None
    out = []
    for alt in alternatives:
        if alt[:3] in _LEAD_WS:
            run_min, run_max, rest = int(alt[2] == "+"), _ANY_RUN, alt[3:]
        else:
            run_min, run_max, rest = 0, 0, alt
        grouped = rest.startswith(("(?:", "(?="))
        after = SHAPE_AHEAD if rest.startswith("(?=") else SHAPE_END
        if grouped:
            end = _group_end(rest)
            if end is None:
                return None
            rest, tail = rest[3:end], rest[end + 1:]
        elif rest.endswith("\\s*") and literal_pieces(rest[:-3]) is not None:
            rest, tail = rest[:-3], "\\s*"
        else:
            tail = ""
        if tail == "\\s*" and after == SHAPE_END:
            after = SHAPE_TRAIL
        elif tail:
            return None
        lits = literal_pieces(rest)
        if lits is None or (len(lits) > 1 and not grouped) or any(lit[0].isspace() for lit in lits):
            return None
        out.append((run_min, run_max, lits, after))
    return tuple(out)
