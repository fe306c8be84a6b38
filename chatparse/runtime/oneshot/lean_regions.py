"""The native regions of the lean path: templates whose every mode is decided by string tests alone.

`parse._parse_lean` finds a text's delimiters mode by mode, and where a mode's delimiters are one literal
(``str.find``), literals with whitespace around them (`plan._shaped`), or nothing at all (a field
without a close), every decision is a string test: no `regex` call, no capture. For a template whose modes
are all of these kinds (qwen3, hermes, smollm3, granite and ten more of the 36 bundled ones),
`chatparse.runtime.oneshot._lean_regions` (C) runs that whole loop, the region rules included, and hands back the
regions to store; `_parse_lean` stores them, in order, with the same store functions. The answer is the
Python loop's, step for step: the same delimiters, the same stall and loop stops, the same candidate budget
and deadline (whose end sends the parse to the automaton after the regions found before it are stored, as
the Python loop would have stored them). Templates with any other mode keep the Python loop. Why: that loop
was about three quarters of a short row's lean parse (bench/PERF_NOTES.md#lean-regions).

`native_spec(plan, ...)` builds the module's spec from a `plan.Plan` (None where a mode is of
another kind, or without the module: an install with no C compiler). ``NATIVE`` says whether the module is
built; ``_use_native`` switches it off for tests and the bench.
"""

from __future__ import annotations

import re

try:
    from . import _lean_regions
except ImportError:  # pragma: no cover - the Python loop gives the same answer
    _lean_regions = None

NATIVE = _lean_regions is not None
_use_native = NATIVE  # (False: `_parse_lean` takes its Python loop; tests and the bench switch it)


def native_specs(plan, ws_chars, nowhere, keyed_decider):
    """The compiled specs of `plan`'s modes for `_lean_regions.regions`, for any text and for text that is all
    ASCII (the same object where no keyed table differs), or (None, None) (module docstring).
    `ws_chars`: the characters `\\s` matches (`plan._WS_CHARS`); `nowhere`: the candidate search of
    a mode that watches no pattern (`plan._NOWHERE`); `keyed_decider`: `parse.keyed_decider`."""
    spec = native_spec(plan, plan.mode_tuples, ws_chars, nowhere, keyed_decider)
    if spec is None or all(m[5] is None for m in plan.mode_tuples):
        return spec, spec
    return spec, native_spec(plan, plan.ascii_mode_tuples, ws_chars, nowhere, keyed_decider)


def native_spec(plan, mode_tuples, ws_chars, nowhere, keyed_decider):
    """The compiled spec of `mode_tuples` (`plan`'s, for any text or for ASCII text), or None."""
    if _lean_regions is None or not plan.lean.usable:
        return None
    _, _, implicit, opens, pat_field, _, _, _ = plan.lean
    if any(type(f) is not int for f in pat_field):
        return None
    modes, ranks = [], {}
    for first_re, start0, wide, single, _watched, keyed, shaped in mode_tuples:
        if type(single) is tuple:  # (the branch order of `_parse_lean`: single, shaped, then the others)
            modes.append(("single", *single))
        elif shaped is not None:
            search, by_lit, solos, led = shaped
            literals = tuple(by_lit)
            if search.pattern != "|".join(map(re.escape, literals)) or search.flags & ~re.UNICODE:
                return None  # (built otherwise than `_shaped` builds it: not what the module searches for)
            modes.append(("shaped", led, literals, tuple(solos.get(lit) for lit in literals),
                          tuple(tuple(by_lit[lit]) for lit in literals)))
            for entries in by_lit.values():
                for _pi, rank, _alts in entries:
                    ranks[rank] = None
        elif keyed is not None:
            literals = tuple(keyed)
            if first_re.pattern != "|".join(map(re.escape, literals)) or first_re.flags & ~(re.UNICODE | re.DOTALL):
                return None  # (built otherwise than `Plan` builds it: not what the module searches for)
            modes.append(("keyed", literals, tuple(
                (key[0], len(lit)) if key[0] >= 0 and key[1] is None else keyed_decider(key, len(lit))
                for lit, key in keyed.items())))
        elif first_re is nowhere and not start0 and wide is None and single is None:
            modes.append(("nowhere",))
        else:
            return None
    try:
        order = {rank: k for k, rank in enumerate(sorted(ranks))}
    except TypeError:  # (ranks that do not compare: the Python loop compares them itself)
        return None
    modes = [m if m[0] != "shaped" else (*m[:4], tuple(tuple((pi, order[rank], alts) for pi, rank, alts in entries)
                                                       for entries in m[4])) for m in modes]
    return _lean_regions.compile("".join(sorted(ws_chars)), -1 if implicit is None else implicit,
                                 tuple(map(bool, opens)), tuple(pat_field), tuple(modes))
