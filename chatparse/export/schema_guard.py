r"""Keep a delimiter out of the strings of a JSON body, through the body's JSON Schema (grammar export).

A tool call's JSON body ends at the first match of its region's closer: a string value (or key) that
spells the closer cuts the body there and the parse fails. Grammar engines generate JSON from a schema and
cannot intersect it with "does not contain X", but a schema can say it: every string gets a ``pattern``
that excludes the closer's literal *core* (a string every match of the closer contains), and every object
that allows further properties takes them through ``patternProperties`` with that pattern on the key.

The pattern is built without lookarounds (engines refuse them): for literals whose first characters occur
nowhere else in them, "contains none of them" is

    ( [^F] | (f_l W_l)* f_l Z_l )* (f_l W_l)*

with F the first characters, W_l the proper prefixes of literal l after its first character and Z_l such a
prefix followed by a character that neither continues it nor starts a literal (a run of partial matches,
then a character that breaks it). `cores` picks, for each literal, its longest piece that fits.
"""

from __future__ import annotations

import re
import re._constants as C
import re._parser as sre_parse
from typing import Any

_ANY_NAME = "__chatparse_any"


def literal_cores(pattern: str | None, literals: list[str] | None) -> list[str] | None:
    """Strings one of which every match of the delimiter contains (None: none found)."""
    if literals is not None:
        return list(literals)
    try:
        parsed = sre_parse.parse(re.sub(r"\(\?P<(\w+)>", "(?:", pattern), re.DOTALL)
    except re.error:
        return None
    return _cores(list(parsed))


def _cores(items) -> list[str] | None:
    best: list[str] | None = None
    run = ""

    def consider(c):
        nonlocal best
        if c and (best is None or min(map(len, c)) > min(map(len, best))):
            best = c

    for op, av in items:
        if op is C.LITERAL:
            run += chr(av)
            continue
        consider([run] if run else None)
        run = ""
        if op is C.SUBPATTERN:
            consider(_cores(list(av[3])))
        elif op is C.BRANCH:
            # an alternative that is only an end anchor matches only at the end of the text
            alts = [_cores(list(b)) for b in av[1]
                    if not (len(b) == 1 and b[0][0] is C.AT)]
            if alts and all(alts):
                consider([x for a in alts for x in a])
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT) and av[0] >= 1:
            consider(_cores(list(av[2])))
        elif op is C.ASSERT and av[0] > 0:
            consider(_cores(list(av[1])))
    consider([run] if run else None)
    return best


def fit(literals: list[str]) -> list[str]:
    """Pieces of `literals` (one substring each) whose first characters occur nowhere else in any piece:
    avoiding a piece avoids its literal. Greedy, longest pieces first; single characters as a last resort."""
    chosen: list[str] = []
    for lit in sorted(dict.fromkeys(literals), key=len, reverse=True):
        if any(p in lit for p in chosen):
            continue  # avoiding an already chosen piece avoids this literal too
        firsts = {p[0] for p in chosen}
        subs = sorted({lit[i:j] for i in range(len(lit)) for j in range(i + 1, len(lit) + 1)},
                      key=len, reverse=True)
        for sub in subs:
            if sub[0] in sub[1:] or sub[0] in firsts or any(c in firsts for c in sub[1:]):
                continue
            if any(sub[0] in p[1:] for p in chosen):
                continue
            chosen.append(sub)
            break
        else:
            return sorted({c for lit in literals for c in lit[:1]})
    return chosen


def _esc(ch: str) -> str:
    return re.escape(ch) if ch not in "\n\t\r" else {"\n": "\\n", "\t": "\\t", "\r": "\\r"}[ch]


def _cls(chars) -> str:
    return "[^" + "".join(_esc(c) if c not in "]^-\\" else "\\" + c for c in sorted(set(chars))) + "]"


def avoid_regex(literals: list[str]) -> str:
    """An anchored regex (JSON Schema `pattern` dialect, no lookarounds) of the strings holding none of
    `literals` (as given by `fit`)."""
    firsts = [p[0] for p in literals]
    run_w, run_z = [], []
    for p in literals:
        f = _esc(p[0])
        w = ["".join(_esc(c) for c in p[1:k + 1]) for k in range(len(p) - 1)]
        z = ["".join(_esc(c) for c in p[1:k + 1]) + _cls(firsts + [p[k + 1]]) for k in range(len(p) - 1)]
        if len(p) == 1:  # a single character: never allowed
            continue
        run_w.append(f + "(?:" + "|".join(w) + ")")
        run_z.append(f + "(?:" + "|".join(z) + ")")
    w_any = "(?:" + "|".join(run_w) + ")" if run_w else None
    z_any = "(?:" + "|".join(run_z) + ")" if run_z else None
    block = _cls(firsts)
    if z_any:
        block = f"(?:{block}|(?:{w_any})*{z_any})"
    tail = f"(?:{w_any})*" if w_any else ""
    return f"^{block}*{tail}$"


def guard(schema: Any, pattern: str) -> tuple[Any, list[str]]:
    """`schema` with `pattern` on every string and on every key it leaves open. Returns (schema, notes on
    what could not be guarded)."""
    notes: list[str] = []
    any_ref = {"$ref": f"#/$defs/{_ANY_NAME}"}

    def g(s: Any) -> Any:
        if s is True or s == {}:
            return any_ref
        if not isinstance(s, dict):
            return s
        s = dict(s)
        for k in ("anyOf", "oneOf", "allOf"):
            if isinstance(s.get(k), list):
                s[k] = [g(x) for x in s[k]]
        for k in ("$defs", "definitions"):
            if isinstance(s.get(k), dict):
                s[k] = {n: g(x) for n, x in s[k].items()}
        if "not" in s:
            notes.append("a 'not' schema is left as it is")
        t = s.get("type")
        types = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []
        if "string" in types and not any(k in s for k in ("enum", "const", "format")):
            if "pattern" in s:
                notes.append(f"a string with its own pattern {s['pattern']!r} is not guarded")
            else:
                s["pattern"] = pattern
        if "object" in types or "properties" in s:
            if isinstance(s.get("properties"), dict):
                s["properties"] = {k: g(v) for k, v in s["properties"].items()}
            if "patternProperties" in s:
                notes.append("patternProperties are left as they are")
                s["patternProperties"] = {k: g(v) for k, v in s["patternProperties"].items()}
            else:
                extra = s.get("additionalProperties", True)
                if extra is not False and not s.get("properties"):
                    s["patternProperties"] = {pattern: g(extra)}
                    s["additionalProperties"] = False
                elif extra is not False:
                    # a key pattern would also apply to the listed properties (JSON Schema intersects
                    # them, which the engines refuse for recursive schemas): values only
                    s["additionalProperties"] = g(extra)
                    notes.append("the names of properties beyond the listed ones are not kept from spelling "
                                 "the closer (their values are)")
        if "array" in types or "items" in s or "prefixItems" in s:
            if "items" in s:
                s["items"] = g(s["items"])
            elif "array" in types and "prefixItems" not in s:
                s["items"] = any_ref
            if isinstance(s.get("prefixItems"), list):
                s["prefixItems"] = [g(x) for x in s["prefixItems"]]
        if not types and not any(k in s for k in ("properties", "items", "prefixItems", "anyOf", "oneOf",
                                                   "allOf", "enum", "const", "$ref")):
            return {**{k: v for k, v in s.items() if k in ("$defs", "definitions")}, **any_ref}
        return s

    out = g(schema)
    any_schema = {"anyOf": [
        {"type": "string", "pattern": pattern}, {"type": "number"}, {"type": "boolean"}, {"type": "null"},
        {"type": "array", "items": any_ref},
        {"type": "object", "patternProperties": {pattern: any_ref}, "additionalProperties": False},
    ]}
    if not isinstance(out, dict):
        out = any_ref
    out = dict(out)
    defs = dict(out.get("$defs") or {})
    defs[_ANY_NAME] = any_schema
    out["$defs"] = defs
    return out, notes
