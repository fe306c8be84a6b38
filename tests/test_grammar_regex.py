"""The regex operations the structural-tag export builds on (`chatparse.export.regex_lark`), checked against
the `regex` module on every string up to a length over a small alphabet:

* `restrict_first(rx, allowed)` matches exactly the non-empty matches of rx whose first character is in
  `allowed` (how a tool name in a greedy group is kept from running on);
* `derive(rx, text)` matches exactly the w with text + w a match of rx (how a delimiter is written after a
  closer whose lookahead is that literal);
* `nullable`, `literal_alternatives`; and `grammar.other_key` (a parameter name other than the listed ones).
"""

from __future__ import annotations

import itertools

import regex

from chatparse.export import regex_lark as rl
from chatparse.export.grammar import _ANY_KEY, other_key

ALPHABET = "ab< \n"
PATTERNS = [
    r"a*b", r"(?:ab|b)*<", r"\s*(?:<a>)?b", r"[^\s<]+[^<]*(?:<b>[^<]*)?<a>", r"(?:a|)(?:b|)", r"a{2,3}b?",
    r"(?:a\s*)+<", r"[ab]*", r"\s*(?:;\s*|<)",
]


def _strings(n: int = 5):
    for k in range(n + 1):
        for t in itertools.product(ALPHABET, repeat=k):
            yield "".join(t)


def _full(engine_rx: str | None, s: str) -> bool:
    return engine_rx is not None and regex.fullmatch(rl.to_python(engine_rx), s, regex.DOTALL) is not None


def _engine(pattern: str) -> str:
    (v,) = rl.convert(pattern).variants
    return v.regex


def test_restrict_first_is_exact():
    for pattern in PATTERNS:
        rx = _engine(pattern)
        for allowed_chars in ("a", "<", " \n", "ab<"):
            allowed = tuple((ord(c), ord(c)) for c in allowed_chars)
            r = rl.restrict_first(rx, allowed)
            for s in _strings():
                want = bool(s) and s[0] in allowed_chars and regex.fullmatch(pattern, s, regex.DOTALL) is not None
                assert _full(r, s) == want, (pattern, allowed_chars, s, r)


def test_derive_is_exact():
    for pattern in PATTERNS:
        rx = _engine(pattern)
        for text in ("a", "<", "ab", " ", "<a>", "b<"):
            d = rl.derive(rx, text)
            for s in _strings(4):
                want = regex.fullmatch(pattern, text + s, regex.DOTALL) is not None
                assert _full(d, s) == want, (pattern, text, s, d)


def test_nullable_and_literal_alternatives():
    for pattern in PATTERNS:
        assert rl.nullable(_engine(pattern)) == (regex.fullmatch(pattern, "") is not None), pattern
    la = rl.convert(r"x(?=<a>|<b>|\{\s*\"n\")").variants[0].lookahead
    assert rl.literal_alternatives(la) == (("<a>", "<b>"), False)
    assert rl.literal_alternatives(rl.convert(r"x(?=<\|eot\|>|<\|eom\|>)").variants[0].lookahead) == \
        (("<|eot|>", "<|eom|>"), True)


def test_other_key_leaves_out_exactly_the_listed_names():
    listed = ["days", "d", "city", "unit"]
    rx = rl.to_python(other_key(listed))
    for s in itertools.chain(listed, ["da", "dayz", "days2", "x", "c", "cit", "citys", "_a", "unit.x", "9a", ""]):
        want = regex.fullmatch(_ANY_KEY, s) is not None and s not in listed
        assert (regex.fullmatch(rx, s) is not None) == want, s
