"""A template's outputs as xgrammar's structural tag (the JSON vLLM 0.33.0 passes as ``structured_outputs``
``structural_tag``), for `chatparse.compiler.grammar.export(format="structural_tag")`.

Structural tags have no recursion and no intersection, but the parser's modes form a star around mode 0
(every explicit region returns to it), so the language is regular in regions:

    [the rest of the region the prompt left open]  (item)*  tail

where an item is text then one mode-0 delimiter (and, for an explicit field, its body and closer), and the
tail is text, or text and a region left open at the end. Text is ``any_text`` whose ``excludes`` are the
literal cores of what the mode watches (`schema_guard.literal_cores`: a string every match contains), so it
is a subset where a delimiter is a pattern (text may not hold the core even where the pattern would not
match around it); delimiters are ``regex`` elements (exact), tool-call bodies ``json_schema`` with the same
guarded schemas as the Lark export, xml-inline parameters per schema type. ``tool_choice="required"`` is
``(item without a call)* call-item (item)* tail``.

A closer's trailing lookahead cannot be joined to what follows here: such closer alternatives are dropped
when the closer has others, and otherwise kept without their lookahead (both noted).
"""

from __future__ import annotations

import json
import re

from . import regex_lark as rl
from . import schema_guard as sg

_HEX = re.compile(r"\\x\{([0-9a-f]+)\}")


def xg_regex(rx: str) -> str:
    """Engine (Rust-syntax) regex from `regex_lark` in xgrammar's regex syntax."""
    def one(m):
        cp = int(m.group(1), 16)
        return "\\u%04x" % cp if cp <= 0xFFFF else chr(cp)

    return _HEX.sub(one, rx.replace("(?s:.)", "[\\s\\S]"))


def _seq(*els):
    els = [e for e in els if e is not None]
    return els[0] if len(els) == 1 else {"type": "sequence", "elements": list(els)}


_WS = {"type": "regex", "pattern": "[ \\t\\n\\r]*"}


def _or(els):
    return els[0] if len(els) == 1 else {"type": "or", "elements": list(els)}


def _regex(rx: str):
    return {"type": "regex", "pattern": xg_regex(rx.replace(rl.SUBST_MARK, ""))}


class _Tag:
    def __init__(self, g):
        self.g = g  # the Lark exporter: delimiters, notes, schemas

    def cores(self, mode: int) -> list[str]:
        out = []
        for f, kind in self.g.watched(mode):
            d = f[kind]
            c = sg.literal_cores(d.get("pattern"), d.get("literals"))
            if c is None:
                self.g.note(f["name"], kind, _src(d), "structural tag: no literal in this delimiter, text is not "
                            "kept from holding it", kind="superset")
                continue
            if "pattern" in d:
                self.g.note(f["name"], kind, d["pattern"], f"structural tag: text may not hold {c!r} (what every "
                            "match contains): a subset", kind="subset")
            out.extend(c)
        return list(dict.fromkeys(out))

    def text(self, mode: int):
        ex = self.cores(mode)
        return {"type": "any_text", "excludes": ex} if ex else {"type": "any_text"}

    def variants(self, f, kind, subst=None):
        vs = self.g.delim(f, kind, subst).variants
        if kind == "open":
            vs = self.g.offered(f, vs)
        plain = [v for v in vs if not v.lookahead]
        if len(plain) < len(vs):
            self.g.note(f["name"], kind, _src(f[kind]), "structural tag: alternatives ending in a lookahead are "
                        + ("dropped (a subset)" if plain else "kept without it (a superset)"),
                        kind="subset" if plain else "superset")
        return plain or vs

    def delim(self, f, kind, subst=None, lead=""):
        if subst and self.g.delim(f, kind, subst).follow:
            self.g.note(f["name"], kind, _src(f[kind]), "structural tag: a tool name may be followed by characters "
                        "its group takes (the parser then reads another name): a superset")
        return _or([_regex(lead + v.regex) for v in self.variants(f, kind, subst)])

    def body(self, fi, f, tool):
        from .grammar import call_schema, envelope

        env = envelope(f)
        if f["content"] == "json":
            if env is None:
                schema = {}
            elif env.each:
                t = self.g.tools
                items = {"anyOf": [call_schema(env, x, self.g.first_key_check(f)) for x in t]} if len(t) > 1 \
                    else call_schema(env, t[0], self.g.first_key_check(f))
                schema = {"type": "array", "items": items}
                if self.g.required:
                    schema["minItems"] = 1
            else:
                schema = call_schema(env, tool, self.g.first_key_check(f))
            cores = self.g.close_cores(f)
            ca = f["content_args"]
            if ca.get("unquoted_keys") or ca.get("string_delims"):
                self.g.note(f["name"], "body", json.dumps(ca), "unquoted keys / custom string delimiters are not "
                            "generated: the body is strict JSON, which the parser also reads", kind="subset")
                cores = cores + (["{", ","] if ca.get("unquoted_keys") else []) + [
                    d for pair in ca.get("string_delims") or [] for d in pair if isinstance(d, str) and d]
            schema = self.g.guarded(f, schema, cores)
            xg = schema.pop("x-guidance", None)
            if xg:
                self.g.note(f["name"], "body", "", "structural tag: JSON whitespace is not limited (a superset)")
            return _seq(_WS, {"type": "json_schema", "json_schema": schema}, _WS)
        if f["content"] == "xml-inline":
            return self.xml(fi, f, tool)
        return self.text(fi + 1)

    def xml(self, fi, f, tool):
        from .grammar import _ANY_KEY, _enum, _types

        tag = f["content_args"]["tag_pattern"]
        params = tool.parameters if isinstance(tool.parameters, dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = params.get("required") or []
        closer = self.g.close_cores(f)

        def param(key, schema):
            c = rl.convert(tag, subst={"key": key if key is not None else ("rx", _ANY_KEY)}, split=("value",))
            before, after = c.variants[0].regex.replace(rl.SUBST_MARK, "").split(rl.SPLIT_MARK)
            after_src = tag.split("(?P<value>.*?)")
            after_cores = (sg.literal_cores(after_src[1], None) or []) if len(after_src) == 2 else []
            types = _types(schema)
            if isinstance(schema, dict) and isinstance(schema.get("enum", schema.get("const")), (list, str)) \
                    and all(isinstance(e, str) for e in _enum(schema)):
                return _seq(_regex("[ \\t\\n\\r]*" + before + rl._alt([rl.literal(e) for e in _enum(schema)])
                                   + after))
            if not types or "string" in types:
                value = {"type": "any_text", "excludes": after_cores + closer}
            else:
                value = {"type": "json_schema",
                         "json_schema": self.g.guarded(f, schema, after_cores + closer)}
                value["json_schema"].pop("x-guidance", None)
            return _seq(_regex("[ \\t\\n\\r]*" + before), value, _regex(after))

        parts = []
        for key, schema in props.items():
            p = param(key, schema)
            parts.append(p if key in required else {"type": "optional", "content": p})
        if params.get("additionalProperties", True) is not False and not props:
            parts.append({"type": "star", "content": param(None, {})})
        return _seq(*parts) if parts else {"type": "const_string", "value": ""}

    def items(self, with_calls: bool, calls_only: bool = False) -> list:
        """Mode-0 items that return to mode 0, and the terminal ones (which end the output)."""
        g = self.g
        back, final = [], []
        t0 = self.text(0)
        for fi, f in enumerate(g.fields):
            if f["open"] is None:
                continue
            is_tool = g.is_tool_field(f)
            if is_tool != calls_only and calls_only:
                continue
            if is_tool and (not with_calls or not g.allow_calls):
                continue
            if not is_tool and calls_only:
                continue
            if is_tool:
                from .grammar import envelope

                env = envelope(f) if f["content"] in ("json", "xml-inline") else None
                bodies = []
                for tool in g.tools:
                    subst = {env.name_group: tool.name} if env and env.name_group and tool.name else None
                    bodies.append(_seq(self.delim(f, "open", subst), self.body(fi, f, tool)))
                head = _seq(t0, _or(bodies))
                if f["close"] is not None:
                    back.append(_seq(head, self.delim(f, "close", lead="[ \\t\\n\\r]*")))
                final.append(head)
            else:
                head = _seq(t0, self.delim(f, "open"), self.text(fi + 1))
                if f["close"] is not None:
                    back.append(_seq(head, self.delim(f, "close")))
                final.append(head)
        if not calls_only:
            for f in g.fields:
                if f["name"] == g.implicit and f["close"] is not None:
                    back.append(_seq(t0, self.delim(f, "close")))
        return back, final

    def build(self, start_mode: int) -> dict:
        g = self.g
        back, final = self.items(with_calls=True)
        tail = _or([self.text(0)] + final)
        if g.required:
            back_nc, _ = self.items(with_calls=False)
            call_back, call_final = self.items(with_calls=True, calls_only=True)
            loop_nc = {"type": "star", "content": _or(back_nc)} if back_nc else None
            loop = {"type": "star", "content": _or(back)} if back else None
            rest = _or([_seq(loop_nc, _or(call_back), loop, tail)] + ([_seq(loop_nc, _or(call_final))]
                                                                      if call_final else []))
        else:
            loop = {"type": "star", "content": _or(back)} if back else None
            rest = _seq(loop, tail)
        if start_mode:
            f = g.fields[start_mode - 1]
            first = [self.text(start_mode)] if not g.required else []
            if f["close"] is not None:
                first = [_seq(self.text(start_mode), self.delim(f, "close"), rest)] + first
            return {"type": "structural_tag", "format": _or(first)}
        return {"type": "structural_tag", "format": rest}


def _src(d: dict) -> str:
    return d["pattern"] if "pattern" in d else json.dumps(d["literals"])


def export_structural_tag(spec, tools, required, mode, start_field):
    from .grammar import ExportedGrammar, _Lark

    g = _Lark(spec, tools, required, allow_calls=bool(tools))
    tag = _Tag(g).build(mode)
    return ExportedGrammar(json.dumps(tag, ensure_ascii=False), "structural_tag", g.approx, start_field)
