r"""A JSON body in the dialect a template's parser reads (``content_args`` ``unquoted_keys`` and
``string_delims``: gemma4's ``{city:<|"|>Paris<|"|>,days:3}``, functiongemma's ``<escape>`` strings), as Lark
rules for the grammar export (`chatparse.export.grammar`, llguidance only).

The parser turns such a body into JSON before ``json.loads``: each ``OPEN(.*?)CLOSE`` string (the first
CLOSE after OPEN) becomes a JSON string, then each bare ``\w+`` right after ``{`` or ``,`` and before ``:``
is quoted (`chatparse.runtime.values.parsers`). The rules here write only text that turns into a JSON value of the
schema, compactly (no whitespace):

* a string is ``OPEN text CLOSE`` where text holds neither CLOSE, nor the region closer's cores, nor the
  parser's own sentinels ``\x01`` / ``\x02`` (input holding them is refused); an enum of strings is its
  values so delimited;
* a key is bare (``[A-Za-z_][A-Za-z0-9_]*``: what the quoting reads), or a delimited string where the
  object lists no properties; properties come in the schema's order, optional ones may be left out, then any
  others (whose names are not listed ones, `grammar.other_key`);
* numbers, booleans and null go through ``%json`` with their schema (bounds and enums enforced there);
* arrays of one item schema, ``anyOf`` / ``oneOf`` and type lists as alternatives.

A schema using anything else (string patterns or lengths, ``$ref``, item counts, ...) has no dialect rule
(`DialectBody.rule` returns None): the body is then strict JSON only, which the parser also reads.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import regex_lark as rl

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_META = {"description", "title", "default", "examples", "$comment"}
_SCALARS = ("integer", "number", "boolean", "null")


class DialectBody:
    """Lark rules of dialect bodies for one field: `rule(schema)` gives a rule name (or None)."""

    def __init__(self, g, field_name: str, open_d: str, close_d: str, cores: list[str]):
        self.g = g  # the Lark exporter: rules, terms, notes
        self.field = field_name
        self.open_d, self.close_d = open_d, close_d
        self.avoid = [close_d] + [c for c in cores if c] + ["\x01", "\x02"]
        self.memo: dict = {}
        self.n = 0

    def rule(self, schema: Any) -> str | None:
        key = json.dumps(schema, sort_keys=True)
        if key in self.memo:
            return self.memo[key]
        self.n += 1
        name = f"dl_{id(self) % 9973}_{self.n}"
        self.memo[key] = name  # (recursion through DANY only, which is fixed)
        body = self.value(schema)
        if body is None:
            self.memo[key] = None
            return None
        self.g.rules[name] = body
        return name

    # -- pieces
    def string_term(self) -> str:
        o, c = rl.literal(self.open_d), rl.literal(self.close_d)
        bad = rl._alt([rl.literal(x) for x in self.avoid])
        return self.g.term("DSTR", f"/{o}/ (/(?s:.*)/ & ~/(?s:.*){bad}(?s:.*)/) /{c}/")

    def any_rule(self) -> str:
        name = f"dl_{id(self) % 9973}_any"
        if name in self.g.rules:
            return name
        self.g.rules[name] = ""
        key = f'({self.g.term("DKEY", f"/{_BARE.pattern[:-2]}/")} | {self.string_term()})'
        pair = f'{key} ":" {name}'
        obj = f'"{{" ({pair} ("," {pair})*)? "}}"'
        arr = f'"[" ({name} ("," {name})*)? "]"'
        scalar = '%json {"type": ["number", "boolean", "null"]}'
        self.g.rules[name] = f"{self.string_term()} | {scalar} | {obj} | {arr}"
        return name

    def value(self, s: Any) -> str | None:
        if s is True or s == {}:
            return self.any_rule()
        if not isinstance(s, dict):
            return None
        keys = set(s) - _META
        for union in ("anyOf", "oneOf"):
            if union in s:
                if keys - {union}:
                    return None
                alts = [self.rule(b) for b in s[union]]
                return None if not alts or None in alts else " | ".join(alts)
        if "enum" in s or "const" in s:
            vals = s["enum"] if "enum" in s else [s["const"]]
            if keys - {"enum", "const", "type"} or not isinstance(vals, list) or not vals:
                return None
            out = []
            for v in vals:
                if isinstance(v, str):
                    if any(x in v for x in self.avoid):
                        continue
                    out.append(self.g.term("DENUM", "/" + rl.literal(self.open_d + v + self.close_d) + "/"))
                elif v is None or isinstance(v, (bool, int, float)):
                    out.append(f"%json {json.dumps({'const': v})}")
                else:  # an object or list constant: its JSON could hold text the bare-key quoting rewrites
                    return None
            return " | ".join(out) if out else None
        t = s.get("type")
        if isinstance(t, list):
            alts = [self.rule({**{k: v for k, v in s.items() if k != "type"}, "type": x}) for x in t]
            return None if not alts or None in alts else " | ".join(alts)
        if t in _SCALARS:
            return f"%json {json.dumps(s)}"
        if t == "string":
            return self.string_term() if not keys - {"type"} else None
        if t == "array" or (t is None and "items" in s):
            if keys - {"type", "items"}:
                return None
            item = self.rule(s.get("items", {}))
            return None if item is None else f'"[" ({item} ("," {item})*)? "]"'
        if t == "object" or (t is None and "properties" in s):
            return self.object(s, keys)
        if t is None and not keys:
            return self.any_rule()
        return None

    def object(self, s: dict, keys: set) -> str | None:
        from .grammar import other_key

        if keys - {"type", "properties", "required", "additionalProperties"}:
            return None
        props = s.get("properties") or {}
        required = s.get("required") or []
        if not isinstance(props, dict) or not isinstance(required, list) or any(k not in props for k in required):
            return None
        if any(not _BARE.match(k) for k in props):
            return None
        pairs = []
        for k, sub in props.items():
            v = self.rule(sub)
            if v is None:
                return None
            pairs.append((f'"{k}:" {v}', k in required))
        extra = s.get("additionalProperties", True)
        if extra is not False:
            v = self.rule({} if extra is True else extra)
            if v is None:
                return None
            key = self.g.term("DXKEY", "/" + other_key(list(props), "A-Za-z_", "A-Za-z0-9_") + "/")
            if not props:  # (a delimited key could spell a listed name: only where none is listed)
                key = f"({key} | {self.string_term()})"
            pairs.append((f'{key} ":" {v}', None))  # any number of them
        self.n += 1
        base = f"dlo_{id(self) % 9973}_{self.n}"
        # r{i}f: pairs i.. with none written yet; r{i}n: after one (each further pair after a comma)
        for i in range(len(pairs), -1, -1):
            if i == len(pairs):
                self.g.rules[f"{base}_{i}f"] = '""'
                self.g.rules[f"{base}_{i}n"] = '""'
                continue
            pair, req = pairs[i]
            if req is None:  # the extra pairs: zero or more
                self.g.rules[f"{base}_{i}f"] = f'({pair} ("," {pair})*)?'
                self.g.rules[f"{base}_{i}n"] = f'("," {pair})*'
                continue
            f_alts = [f"{pair} {base}_{i + 1}n"] + ([] if req else [f"{base}_{i + 1}f"])
            n_alts = [f'"," {pair} {base}_{i + 1}n'] + ([] if req else [f"{base}_{i + 1}n"])
            self.g.rules[f"{base}_{i}f"] = " | ".join(f_alts)
            self.g.rules[f"{base}_{i}n"] = " | ".join(n_alts)
        return f'"{{" {base}_0f "}}"'
