"""Which `regex` patterns the standard `re` module can run with the same meaning, and their `re` twins.

The reference runs every pattern in `regex`. `re` answers a short call in less than half the time (see
bench/PERF_NOTES.md#re-and-regex), so the runtime uses it where the two provably agree:

* syntax whose meaning the two modules share (str patterns, DOTALL, version 0 of `regex`), read from the
  source by `same_in_re`; anything else keeps `regex`: inline flags, possessive quantifiers, atomic groups,
  POSIX classes, set operations, \\p, \\N, \\X, \\G, \\K, octal escapes, fuzzy matching;
* \\w \\d \\s \\b and their negations only on ASCII text, compiled with ``re.ASCII``: `regex`'s Unicode
  classes and `re.ASCII`'s agree on all 128 ASCII characters (tests/test_oneshot.py checks each one), and
  ASCII text holds no other character;
* a pattern `re` refuses (duplicate group names, variable-width lookbehind) keeps `regex`.

Only the standard library is imported.
"""

from __future__ import annotations

import re

from .literals import PLAIN_GROUP_STARTS

_SAME_ESCAPES = frozenset("ntrfvaxuU123456789AZ")
_ASCII_CLASS_ESCAPES = frozenset("wWdDsSbB")
_SET_OPERATORS = ("--", "&&", "||", "~~", "[:")


def same_in_re(pattern: str, ascii_text: bool = False) -> bool:
    """True when `pattern` uses only syntax with the same meaning in `re` and in `regex` (version 0); with
    `ascii_text`, the class escapes \\w \\d \\s \\b (and negations) count as the same too, for `re.ASCII`
    on text that is all ASCII."""
    escapes = _SAME_ESCAPES | _ASCII_CLASS_ESCAPES if ascii_text else _SAME_ESCAPES
    i, n, in_set = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if nxt.isalnum() and nxt not in escapes or nxt.isdigit() and pattern[i + 2:i + 3].isdigit():
                return False  # (a single-digit backreference only: longer ones may read as octal)
            i += 2
            continue
        if in_set:
            if c == "[" or pattern.startswith(_SET_OPERATORS, i):
                return False
            if c == "]":
                in_set = False
        elif c == "[":
            in_set = True
            j = i + 1 + (pattern[i + 1:i + 2] == "^")
            if pattern[j:j + 1] == "]":  # a leading ']' is a literal member
                i = j
            elif pattern[j:j + 1] == "[":
                return False
        elif c == "(" and pattern.startswith("(?", i) and not pattern.startswith(PLAIN_GROUP_STARTS, i):
            return False
        elif c in "*+?}" and pattern[i + 1:i + 2] == "+":
            return False
        i += 1
    return True


def re_twin(pattern: str, ascii_text: bool = False):
    """`pattern` compiled by `re` (DOTALL; with `ascii_text`, also ASCII, for matching text that is all
    ASCII), where it means what `regex` (DOTALL) means (`same_in_re`); None where it may not, or where `re`
    refuses it."""
    if not same_in_re(pattern, ascii_text=ascii_text):
        return None
    try:
        return re.compile(pattern, re.DOTALL | re.ASCII if ascii_text else re.DOTALL)
    except (re.error, ValueError, OverflowError, RecursionError):
        return None


def ascii_twin(pattern: str):
    """`re_twin` for text that is all ASCII."""
    return re_twin(pattern, ascii_text=True)
