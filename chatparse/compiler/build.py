"""Compile a validated response template into the tables the runtime executes.

Output (`build_tables`) is a plain dict of JSON-able metadata and numpy integer arrays - the in-memory form of
the table format; nothing in it needs the compiler, interegular or transformers to run:

* ``template``: the normalized template (see `validate.load_template`), used for region logic and values.
* ``class_starts`` / ``class_ids``: the alphabet. Code points ``[class_starts[i], class_starts[i+1])`` belong to
  class ``class_ids[i]``; ``n_classes`` classes in all.
* ``patterns``: one entry per watched delimiter: kind ("open"/"close"), field index, the `regex` source the
  reference would compile, whether the tables decide it alone (``exact``), why not (``reasons``), whether it
  has named groups, and for regex-decided ones the ``history``/``horizon`` windows (-1: unbounded horizon).
* ``modes``: mode 0 is "no explicit region open"; mode 1+i is "inside explicit field i". Each has its watched
  pattern ids, the combined DFA (`dfa.ModeDFA`) and ``first``: the code-point ranges that can start an attempt
  (``None`` when an attempt can start anywhere because some pattern matches the empty string), as pairs of
  first/second character ranges (see `_first_ranges`).
"""

from __future__ import annotations

import numpy as np
import regex

from ..runtime.regex.lead_assert import leading_assertion
from .charsets import normalize, partition
from .dfa import build_mode_dfa
from .nfa import build_nfa
from .regex_ast import PatternError, analyse, literal_ast

FORMAT_VERSION = 1

# Size limits, so that a hostile or accidental template is refused at once with a ValueError saying what was
# exceeded instead of compiling for minutes (see also nfa.MAX_NFA_STATES per delimiter and
# dfa.MAX_DFA_STATES per parser mode). 1,000 fields compile in about 1.5 s.
MAX_FIELDS = 2048
MAX_PATTERN_LENGTH = 8192  # characters of one delimiter's regex source (literals: their escaped alternation)


def delimiter_source(delim: dict) -> str:
    """The regex the reference compiles for a delimiter: the pattern, or the literals longest-first."""
    if "pattern" in delim:
        return delim["pattern"]
    return "|".join(regex.escape(s) for s in sorted(delim["literals"], key=len, reverse=True))


def build_tables(spec: dict) -> dict:
    """Compile the normalized template `spec`. Raises ValueError naming the field and key on refusal."""
    fields = spec["fields"]
    implicit = spec["implicit"]
    if len(fields) > MAX_FIELDS:
        raise ValueError(f"response_template has {len(fields)} fields, more than the limit of {MAX_FIELDS} "
                         "(chatparse.compiler.build.MAX_FIELDS); merge fields that never occur together")
    patterns: list[dict] = []
    analyses = []
    for fi, f in enumerate(fields):
        for kind in ("open", "close"):
            delim = f[kind]
            if delim is None:
                continue
            key = kind if "literals" in delim else f"{kind}_pattern"
            size = len(delimiter_source(delim))
            if size > MAX_PATTERN_LENGTH:
                raise ValueError(f"Field '{f['name']}': {key}: the delimiter's regex is {size} characters long, "
                                 f"more than the limit of {MAX_PATTERN_LENGTH} "
                                 "(chatparse.compiler.build.MAX_PATTERN_LENGTH); use a shorter pattern or fewer "
                                 "literals")
            if "literals" in delim:
                an = analyse_literals(delim["literals"])
            else:
                try:
                    an = analyse(delim["pattern"])
                except PatternError as e:
                    raise ValueError(f"Field '{f['name']}': {key}: {e}") from e
            src = delimiter_source(delim)
            patterns.append({
                "kind": kind,
                "field": fi,
                "key": key,
                "source": src,
                "exact": an.exact,
                "reasons": list(an.reasons),
                "named_groups": bool(regex.compile(src, regex.DOTALL).groupindex),
                "history": max(1, an.history),
                "horizon": -1 if an.horizon is None else an.horizon,
            })
            analyses.append(an)

    _check_no_empty_loop(fields, patterns, analyses)
    # per pattern: its DFA threads pruned leftmost-first (`dfa`): exact patterns, and regex-decided ones whose
    # AST still orders their matches as `regex` does (`Analysis.loose`, `_prunable_after_lead`)
    pruned = [not an.loose or _prunable_after_lead(p["source"]) for p, an in zip(patterns, analyses)]

    # Alphabet: intern every character set used by any pattern.
    sets: list = []
    set_ids: dict = {}

    def set_index(ranges) -> int:
        ranges = normalize(ranges)
        if ranges not in set_ids:
            set_ids[ranges] = len(sets)
            sets.append(ranges)
        return set_ids[ranges]

    nfas = []
    for p, an in zip(patterns, analyses):
        try:
            nfas.append(build_nfa(an.ast, set_index))
        except ValueError as e:
            raise ValueError(f"Field '{fields[p['field']]['name']}': {p['key']}: {e}") from e
    starts, class_of_interval, membership = partition(sets)
    n_classes = int(membership.shape[0])

    mode_watch: list[list[int]] = [[]]
    for pi, p in enumerate(patterns):
        if p["kind"] == "open" or (p["kind"] == "close" and fields[p["field"]]["name"] == implicit):
            mode_watch[0].append(pi)
    closes: dict = {}  # field -> its close pattern (one pass: a per-field scan is quadratic in the fields)
    for pi, p in enumerate(patterns):
        if p["kind"] == "close" and fields[p["field"]]["name"] != implicit:
            closes.setdefault(p["field"], []).append(pi)
    for fi in range(len(fields)):
        mode_watch.append(closes.get(fi, []))

    modes = []
    for mi, watch in enumerate(mode_watch):
        what = ", ".join(f"Field '{fields[patterns[i]['field']]['name']}' {patterns[i]['key']}" for i in watch[:8])
        if len(watch) > 8:
            what += f" and {len(watch) - 8} more delimiters watched at once"
        dfa = build_mode_dfa([nfas[i] for i in watch], [pruned[i] for i in watch], membership, what)
        modes.append({
            "patterns": watch,
            "trans": dfa.trans,
            "eot": dfa.eot,
            "acc": dfa.acc,
            "term": dfa.term,
            "start0": dfa.start0,
            "startN": dfa.startN,
            "first": _first_ranges(dfa, starts, class_of_interval),
        })
    return {
        "format": FORMAT_VERSION,
        "template": spec,
        "class_starts": starts.astype(np.int64),
        "class_ids": class_of_interval.astype(np.int32),
        "n_classes": n_classes,
        "patterns": patterns,
        "modes": modes,
    }


def analyse_literals(literals: list[str]):
    from .regex_ast import Analysis

    return Analysis(ast=literal_ast(literals))


def _class_ranges(classes: set, starts: np.ndarray, class_of_interval: np.ndarray) -> list:
    ends = list(starts[1:].tolist()) + [0x110000]
    ranges = [(lo, hi - 1) for lo, hi, c in zip(starts.tolist(), ends, class_of_interval.tolist()) if c in classes]
    return [list(r) for r in normalize(ranges)]


def _first_ranges(dfa, starts: np.ndarray, class_of_interval: np.ndarray):
    r"""Where an attempt can start at offset > 0, as a two-character prefilter; None if anywhere.

    A list of ``[first, second]`` pairs of code-point ranges: an attempt starting at p can only matter if
    text[p] is in some ``first`` and text[p+1] is in its ``second`` (or the text ends after p). ``second`` is
    None when the first character alone already decides or accepts. The runtime turns this into one
    C-speed regex search, so runs such as "a space followed by a letter" in front of a ``\s*</think>``
    delimiter are skipped without stepping the automaton.
    """
    s = dfa.startN
    if s == 0:
        return []
    if (dfa.acc[s] >= 0).any():
        return None
    groups: dict = {}
    for c1 in np.nonzero(dfa.trans[s] != 0)[0].tolist():
        t1 = int(dfa.trans[s, c1])
        if (dfa.acc[t1] >= 0).any() or dfa.term[t1]:
            second = None
        else:
            second = frozenset(np.nonzero(dfa.trans[t1] != 0)[0].tolist())
        groups.setdefault(second, set()).add(c1)
    out = []
    for second, firsts in groups.items():
        out.append([_class_ranges(firsts, starts, class_of_interval),
                    None if second is None else _class_ranges(set(second), starts, class_of_interval)])
    return out


def _check_no_empty_loop(fields, patterns, analyses) -> None:
    """Refuse an explicit field whose open and close can both match the empty string.

    The reference loops forever on such a template (zero-width open, zero-width close, open again at the same
    offset). The check is conservative: assertions count as possibly empty.
    """
    by_field: dict = {}
    for p, an in zip(patterns, analyses):
        by_field.setdefault(p["field"], {})[p["kind"]] = (p, an)
    for fi, kinds in by_field.items():
        if "open" in kinds and "close" in kinds and all(_nullable(an.ast) for _, an in kinds.values()):
            name = fields[fi]["name"]
            raise ValueError(
                f"Field '{name}': open_pattern and close_pattern can both match the empty string, so the parser "
                "would open and close this field forever at one position; make one of them consume text"
            )


def _nullable(node) -> bool:
    kind = node[0]
    if kind == "set":
        return False
    if kind == "seq":
        return all(_nullable(c) for c in node[1])
    if kind == "alt":
        return any(_nullable(c) for c in node[1])
    if kind == "rep":
        return node[1] == 0 or _nullable(node[4])
    return True  # eps and zero-width assertions


def _prunable_after_lead(source: str) -> bool:
    """Whether a pattern that begins with a lookbehind (`runtime/regex/lead_assert.py`) orders its matches, after
    that lookbehind, as its AST does (`Analysis.loose`): its DFA threads are then pruned as an exact pattern's
    are (leftmost-first), so the tables say when its match can no longer change as soon as `regex` could. The
    runtime checks the lookbehind where an attempt starts and `regex` still decides the match, but the attempt
    no longer lives on after that match is certain (``(?<=[ab])/*?`` is the empty match at once, not after a
    run of ``/``)."""
    lead = leading_assertion(source)
    if lead is None:
        return False
    try:
        return not analyse(source[len(lead):]).loose
    except (PatternError, regex.error, ValueError):
        return False
