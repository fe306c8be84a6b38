"""Exact Unicode character sets, computed by the `regex` module itself.

The reference compiles every delimiter with `regex` (DOTALL on, MULTILINE off, Unicode-aware). A class such
as ``\\w`` or ``[^<\\s]`` must therefore contain exactly the code points that `regex` says it does - not what
Python's `re`, `str.isalnum` or interegular think. Rather than re-deriving Unicode tables, we ask `regex`: a
class is evaluated once over a string holding every code point (U+0000..U+10FFFF, surrogates included) and
the matching runs become sorted, disjoint, inclusive ``(lo, hi)`` ranges. Results are cached per source.

The alphabet of a compiled template is the partition of all code points by membership in its sets
(`partition`), so the automata step on a few dozen classes instead of 1.1M characters.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import regex

MAX_CP = 0x10FFFF
Ranges = tuple  # tuple[tuple[int, int], ...], sorted, disjoint, inclusive

_ALL: str | None = None


def _all_chars() -> str:
    global _ALL
    if _ALL is None:
        _ALL = "".join(map(chr, range(MAX_CP + 1)))
    return _ALL


@lru_cache(maxsize=4096)
def class_ranges(class_source: str, flags: int = 0) -> Ranges:
    """Code points matched by the single-character regex `class_source` (e.g. ``\\w``, ``[^<]``), as ranges.

    `flags` are `regex` flags (IGNORECASE is the one that matters); DOTALL is always on, as in the reference.
    """
    pat = regex.compile(f"(?:{class_source})+", flags | regex.DOTALL)
    return tuple((m.start(), m.end() - 1) for m in pat.finditer(_all_chars()))


def literal_ranges(cp: int, ignorecase: bool = False) -> Ranges:
    if not ignorecase:
        return ((cp, cp),)
    return class_ranges(regex.escape(chr(cp)), regex.IGNORECASE)


def normalize(ranges) -> Ranges:
    """Sort and merge overlapping or adjacent ranges."""
    out: list[list[int]] = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def complement(ranges: Ranges) -> Ranges:
    out = []
    nxt = 0
    for lo, hi in normalize(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CP:
        out.append((nxt, MAX_CP))
    return tuple(out)


def partition(sets: list[Ranges]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Partition the code points by membership in `sets`.

    Returns ``(starts, class_of_interval, membership)``: `starts` are the first code points of consecutive
    elementary intervals (starts[0] == 0), `class_of_interval[i]` the class id of interval i, and
    `membership[k, j]` whether class k lies inside set j. Class 0 is the class of code point 0's interval.
    """
    points = {0}
    for rs in sets:
        for lo, hi in rs:
            points.add(lo)
            if hi + 1 <= MAX_CP:
                points.add(hi + 1)
    starts = np.array(sorted(points), dtype=np.int64)
    member = np.zeros((len(starts), max(1, len(sets))), dtype=bool)
    for j, rs in enumerate(sets):
        for lo, hi in rs:
            a = np.searchsorted(starts, lo)
            b = np.searchsorted(starts, hi + 1) if hi + 1 <= MAX_CP else len(starts)
            member[a:b, j] = True
    uniq, inverse = np.unique(member, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    # Renumber classes in order of first appearance so the result is deterministic and class 0 = U+0000's.
    order = {}
    remap = np.empty(len(uniq), dtype=np.int64)
    for c in inverse:
        if c not in order:
            order[c] = len(order)
    for old, new in order.items():
        remap[old] = new
    membership = np.zeros_like(uniq)
    for old, new in order.items():
        membership[new] = uniq[old]
    return starts, remap[inverse], membership


def ranges_to_class_source(ranges: Ranges) -> str:
    """A `regex`/`re` character class matching exactly `ranges` (for C-speed skipping at run time)."""
    parts = []
    for lo, hi in ranges:
        parts.append(f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}")
    return "[" + "".join(parts) + "]" if parts else "(?!)"
