"""The checks of a table file that are not about its byte layout, written so that the JavaScript reader
(`loadTables` in js/chatparse.mjs) can make exactly the same decisions with exactly the same messages
(FORMAT.md section 1, "What a reader must check", steps 5-8):

* `quote`: how a message shows a string taken from the file (JSON with ASCII escapes: the same text in both
  runtimes, whatever the string holds);
* `check_depth`: JSON nesting is bounded (`MAX_DEPTH`) before parsing, so deep nesting is a table-file error at
  the same point in both runtimes rather than whichever recursion limit is hit first;
* `template_rules`: the normalized-template rules as an ordered list of checks that need no Python regex
  engine (the regex compilation and the final round trip through `load_template` stay in runtime/tables/loader.py,
  after every check a port can make);
* `prefilter_pairs`: a mode's two-character prefilter (``modes[m].first``) as its automaton defines it; a
  file's ``first`` must be exactly this, so a runtime may use it or ignore it with the same result.

Messages are returned/raised without the ``chatparse table file: `` prefix (`fail` adds it).
"""

from __future__ import annotations

import json
from typing import Any, Callable

import numpy as np

from ..values.extensions import EXTENSIONS, check_field_keys, content_names, field_keys
from ..values.parsers import PARSER_NAMES
from ..values.transform import PLACEHOLDER

__all__ = ["MAX_DEPTH", "quote", "quote_list", "check_depth", "template_rules", "prefilter_pairs"]

MAX_DEPTH = 100
N_CODEPOINTS = 0x110000
NORMALIZED_KEYS = ("version", "defaults", "start_anchor", "implicit", "fields")
FIELD_KEYS = ("name", "open", "close", "content", "content_args", "repeats", "join", "optional", "transform",
              "transform_each")


def quote(s: str) -> str:
    """A string of the file as messages show it: JSON, non-ASCII as \\u escapes (identical in JavaScript)."""
    return json.dumps(s)


def quote_list(items) -> str:
    return "[" + ", ".join(quote(s) for s in items) + "]"


def check_depth(text: str, what: str, fail: Callable) -> None:
    """Refuse JSON text nesting deeper than `MAX_DEPTH`: brackets counted outside strings (a string starts at
    a ``"`` outside one and ends at the next ``"`` not taken by a backslash escape), whether or not the text is
    valid JSON. Linear; runs before the parser."""
    depth = 0
    in_str = False
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
        elif c in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                fail(f"{what} section nests deeper than {MAX_DEPTH} levels")
        elif c in "]}":
            depth -= 1
        i += 1


def _delimiter(d: Any, where: str, fail: Callable, allow_none: bool) -> None:
    if d is None and allow_none:
        return
    if type(d) is not dict or len(d) != 1 or not (type(d.get("literals")) is list or type(d.get("pattern")) is str):
        fail(f"{where}: expected {'null, ' if allow_none else ''}{{\"literals\": [...]}} or {{\"pattern\": str}}")
    lits = d.get("literals")
    if lits is not None:
        if not lits or any(type(s) is not str or not s for s in lits):
            fail(f"{where}.literals: expected non-empty strings")
        if len(set(lits)) != len(lits):
            fail(f"{where}.literals: a literal is repeated")


def _mixed_placeholder(value: Any) -> bool:
    """Whether a string anywhere in a transform holds a {placeholder} but is not exactly one (depth is bounded
    by `check_depth`)."""
    if type(value) is dict:
        return any(_mixed_placeholder(v) for v in value.values())
    if type(value) is list:
        return any(_mixed_placeholder(v) for v in value)
    if type(value) is str:
        return bool(PLACEHOLDER.search(value)) and not PLACEHOLDER.fullmatch(value)
    return False


def template_rules(spec: Any, fail: Callable) -> None:
    """The template section holds a normalized template (FORMAT.md section 2), checked in this order; each
    failure names the place. Regex syntax is not checked here (see the module docstring)."""
    extended = type(spec) is dict and "extensions" in spec
    if extended:
        names = spec["extensions"]
        if type(names) is not list or not names or type(spec.get("version")) is not int or spec["version"] != 2:
            fail("template: 'extensions' must be a non-empty list, with 'version': 2")
        for n in names:
            if type(n) is not str:
                fail("template: 'extensions' must hold extension names (strings)")
            if n not in EXTENSIONS:
                shown = f"'{n}'" if all(" " <= c <= "~" and c != "'" for c in n) else quote(n)
                fail(f"table uses format extension {shown}, which this reader does not support")
        if any(a >= b for a, b in zip(names, names[1:])):
            fail("template: not in normalized form: 'extensions' must be sorted and distinct")
    keys = ("extensions",) + NORMALIZED_KEYS if extended else NORMALIZED_KEYS
    if type(spec) is not dict or set(spec) != set(keys):
        fail(f"template: expected an object with keys {quote_list(keys)}")
    if not extended and (type(spec["version"]) is not int or spec["version"] != 1):
        fail("template: version must be 1 (2 with 'extensions')")
    if type(spec["defaults"]) is not dict:
        fail("template.defaults: expected an object")
    fields = spec["fields"]
    if type(fields) is not list or not fields:
        fail("template: fields must be a non-empty list")
    ext_keys = field_keys()
    ext_parsers = content_names()
    names_seen: set = set()
    used: set = set()
    for i, f in enumerate(fields):
        where = f"template.fields[{i}]"
        if type(f) is not dict or not set(FIELD_KEYS) <= set(f) or not set(f) - set(FIELD_KEYS) <= ext_keys.keys():
            fail(f"{where}: expected an object with keys {quote_list(FIELD_KEYS)} (and format extension keys)")
        if type(f["name"]) is not str:
            fail(f"{where}.name: expected a string")
        if f["name"] in names_seen:
            fail(f"template: duplicate field name {quote(f['name'])}")
        names_seen.add(f["name"])
        if type(f["content"]) is not str or (f["content"] not in PARSER_NAMES and f["content"] not in ext_parsers):
            fail(f"{where}.content: unknown content parser")
        if f["content"] in ext_parsers:
            used.add(ext_parsers[f["content"]])
            if type(f["content_args"]) is not dict or f["content_args"]:
                fail(f"{where}.content_args: the {quote(f['content'])} parser takes none")
        _delimiter(f["open"], f"{where}.open", fail, True)
        _delimiter(f["close"], f"{where}.close", fail, True)
        for key in ("repeats", "optional", "transform_each"):
            if type(f[key]) is not bool:
                fail(f"{where}.{key}: expected true/false")
        if f["join"] is not None and type(f["join"]) is not str:
            fail(f"{where}.join: expected null or a string")
        if f["join"] is not None and not f["repeats"]:
            fail(f"{where}.join: needs 'repeats': true")
        if f["transform_each"] and f["transform"] is None:
            fail(f"{where}.transform_each: needs a 'transform'")
        if _mixed_placeholder(f["transform"]):
            fail(f"{where}.transform: a string mixes a {{placeholder}} with other text")
        extra = {k: f[k] for k in f if k in ext_keys}
        if extra:
            try:
                check_field_keys(f"Field {f['name']!r}", extra)
            except ValueError as e:
                fail(f"template: {e}")
            used.update(ext_keys[k] for k in extra)
    implicit = [f["name"] for f in fields if f["open"] is None]
    if len(implicit) > 1 or spec["implicit"] != (implicit[0] if implicit else None) \
            or (spec["implicit"] is not None and type(spec["implicit"]) is not str):
        fail("template: 'implicit' does not name the one field without an open delimiter")
    _delimiter(spec["start_anchor"], "template.start_anchor", fail, False)
    if sorted(used) != (spec["extensions"] if extended else []):
        fail("template: not in normalized form: 'extensions' does not list exactly the extensions the fields use")


def prefilter_pairs(trans: np.ndarray, acc: np.ndarray, term: np.ndarray, start: int, starts: np.ndarray,
                    ids: np.ndarray):
    """The prefilter of a mode (FORMAT.md section 4, ``first``) from its automaton: ``[]`` when no attempt can
    start at offset > 0 (`start` is the dead state); None when one can match the empty string there;
    otherwise pairs ``[first, second]`` of merged code-point ranges, one pair per distinct ``second``, in order
    of the smallest class reaching it: class ``c`` with ``t = trans[start][c] != 0`` goes to the pair whose
    ``second`` is None when ``t`` accepts or is terminal, else the classes ``c2`` with ``trans[t][c2] != 0``.
    Work: one row of `trans` per distinct ``t`` and one pass over the class intervals per pair."""
    if start == 0:
        return []
    if (acc[start] >= 0).any():
        return None
    groups: dict = {}
    rows: dict = {}
    for c1 in np.flatnonzero(trans[start]).tolist():
        t1 = int(trans[start, c1])
        if t1 not in rows:
            if (acc[t1] >= 0).any() or term[t1]:
                rows[t1] = None
            else:
                rows[t1] = np.flatnonzero(trans[t1]).tobytes()
        groups.setdefault(rows[t1], []).append(c1)
    n_classes = trans.shape[1]
    ends = np.append(starts[1:].astype(np.int64), N_CODEPOINTS)
    lo_all = starts.astype(np.int64)

    def ranges(classes) -> list:
        member = np.zeros(n_classes, dtype=bool)
        member[classes] = True
        mask = member[ids]
        lo, hi = lo_all[mask], ends[mask] - 1
        if not lo.size:
            return []
        cut = np.flatnonzero(lo[1:] > hi[:-1] + 1) + 1  # merge adjacent intervals
        return [[int(a), int(b)] for a, b in zip(lo[np.r_[0, cut]].tolist(), hi[np.r_[cut - 1, len(hi) - 1]].tolist())]

    return [[ranges(firsts), None if second is None else ranges(np.frombuffer(second, dtype=np.intp))]
            for second, firsts in groups.items()]
