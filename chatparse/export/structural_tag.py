"""A template's outputs as xgrammar's structural tag (the JSON vLLM 0.33.0 passes as ``structured_outputs``
``structural_tag``), for `chatparse.export.grammar.export(format="structural_tag")`.

Structural tags have no recursion, no intersection and no negation, but the parser's modes form a star
around mode 0 (every explicit region returns to it), so the language is regular in regions:

    [the rest of the region the prompt left open]  (item)*  tail

where an item is text then one mode-0 delimiter (and, for an explicit field, its body and closer), and the
tail is text, or text and a region left open at the end (or closed by a closer that only matches at the end).
Text is ``any_text`` whose ``excludes`` are the literal cores of what the mode watches
(`schema_guard.literal_cores`: a string every match contains), so it is a subset where a delimiter is a
pattern; delimiters are ``regex`` elements (exact); tool-call bodies are ``json_schema`` whose strings and
keys exclude the closer's cores (xgrammar's ``excludes``), xml-inline parameters per schema type.
``tool_choice="required"`` is ``(item without a call)* call-item (item)* tail``.

What a structural tag cannot say is either narrowed (a subset, noted) or refused:

* a tool name written into a greedy group (``to=functions.(?P<name>[^\\s<]+)``) is followed only by what the
  opener allows *and* the group does not take (`regex_lark.restrict_first`), so the parser reads that name;
* a closer alternative with a trailing lookahead is written joined to a mode-0 item that begins with the
  lookahead's literal (``\\s*(?=<tool_call>)`` closing reasoning, then the call's opener from
  `regex_lark.derive`); a lookahead alternative that is not a literal is not offered, nor a second such
  closer right after the first (subsets, noted); an alternative that only matches at the end of the output
  (``\\Z``) ends it;
* text may not hold the literal a watched delimiter's match begins with either (a match beginning in the
  text could run into the delimiter that follows it, and the parser would take it first);
* after an opener with a trailing lookahead an xml-inline call must be closed (the output cannot end right
  after the opener, where the lookahead fails);
* an opener that can match the empty string, whose closer has a lookbehind, is written non-empty after text
  (the closer could otherwise match at the start of the body, looking back into the text);
* a string-typed xml-inline value read as JSON is empty, a JSON string, or text ``json.loads`` refuses
  (`_Tag.string_text`; text beginning with a digit, whitespace, ``[`` or ``{`` is not offered: a subset);
* xml-inline parameters come in the schema's order (as in the Lark export), then any others, whose names
  may not be listed ones (`grammar.other_key`);
* a JSON body whose closer can begin in whitespace between JSON tokens cannot be constrained (xgrammar's
  ``json_schema`` does not limit JSON whitespace): the export raises `Unconstrainable` naming the field.
"""

from __future__ import annotations

import json
import re

from . import regex_lark as rl
from . import schema_guard as sg
from ..compiler.charsets import MAX_CP, complement

_HEX = re.compile(r"\\x\{([0-9a-f]+)\}")
_WS_CHARS = ((9, 10), (13, 13), (32, 32))
# Characters a JSON value (json.loads also reads NaN, Infinity) can begin with, whitespace first.
_NONSTRING_FIRST_CHARS = ' \t\n\r-0123456789tfnNI[{"'



class Unconstrainable(ValueError):
    """A template whose outputs a structural tag cannot constrain soundly; the message says which field and
    why. (The Lark export, for llguidance, has no such limit.)"""


def xg_regex(rx: str) -> str:
    """Engine (Rust-syntax) regex from `regex_lark` in xgrammar's regex syntax."""
    def one(m):
        cp = int(m.group(1), 16)
        return "\\u%04x" % cp if cp <= 0xFFFF else chr(cp)

    return _HEX.sub(one, rx.replace("(?s:.)", "[\\s\\S]"))


def _seq(*els):
    els = [e for e in els if e is not None]
    if not els:
        return None
    return els[0] if len(els) == 1 else {"type": "sequence", "elements": list(els)}


_WS = {"type": "regex", "pattern": "[ \\t\\n\\r]*"}
_WS_RX = "[ \\t\\n\\r]*"


def _or(els):
    els = [e for e in els if e is not None]
    if not els:
        return None
    return els[0] if len(els) == 1 else {"type": "or", "elements": list(els)}


def _regex(rx: str):
    return {"type": "regex", "pattern": xg_regex(rx.replace(rl.SUBST_MARK, ""))}


def _star(els):
    alt = _or(els)
    return {"type": "star", "content": alt} if alt is not None else None


class _Tag:
    def __init__(self, g):
        self.g = g  # the Lark exporter: delimiters, notes, schemas
        self._joined: dict = {}  # items with no text before them, by the literal they begin with

    def cores(self, mode: int) -> list[str]:
        out = []
        for f, kind in self.g.watched(mode):
            d = f[kind]
            lead = _leading_literals(d)
            if lead:
                # a match beginning in the text could run into the delimiter that follows it (the parser
                # would take that match first): text may not hold the literal a match begins with
                self.g.note(f["name"], kind, _src(d), f"structural tag: text may not hold {lead!r} (the "
                            "literal a match begins with): a subset", kind="subset")
                out.extend(lead)
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

    # -- delimiters
    def variants(self, f, kind, subst=None) -> tuple[list, list, list]:
        """(variants written where something follows, variants that end the output, closer variants
        ending in a lookahead - written only joined to what follows them, see `closer_forms`)."""
        vs = self.g.delim(f, kind, subst).variants
        if kind == "open":
            vs = self.g.offered(f, vs)
        ends = [v for v in vs if v.at_end]
        vs = [v for v in vs if not v.at_end]
        if kind == "open":
            if ends:
                self.g.note(f["name"], kind, _src(f[kind]), "structural tag: alternatives that only match at the "
                            "end of the output are not offered (a subset)", kind="subset")
            if any(v.lookahead for v in vs):
                self.g.note(f["name"], kind, _src(f[kind]), "structural tag: trailing lookahead dropped: the body "
                            "that follows is constrained by its own grammar, which the lookahead is not checked "
                            "against (a superset)")
            return vs, [], []
        return [v for v in vs if not v.lookahead], ends, [v for v in vs if v.lookahead]

    def delim(self, f, kind, subst=None, lead="", nonempty=False, at_end=False, after=None):
        """The delimiter as one element (None when no alternative can be written): `nonempty` keeps its
        non-empty matches only, `at_end` gives the alternatives that end the output, `after` (a literal)
        keeps the matches that begin with it (written after a closer whose lookahead is that literal)."""
        conv = self.g.delim(f, kind, subst)
        keep, ends, _ = self.variants(f, kind, subst)
        out = []
        for v in (ends if at_end else keep):
            rx = v.regex
            if rl.SUBST_MARK in rx:
                rx = self.after_name(f, rx, conv.follow)
                if rx is None:
                    continue
            if nonempty:
                rx = rl.restrict_first(rx, ((0, MAX_CP),))
                if rx is None:
                    continue
            if after is not None:
                rest = rl.derive(lead + rx, after)
                if rest is None:
                    continue
                out.append(_regex(rl.literal(after) + rest))
                continue
            out.append(_regex(lead + rx))
        return _or(out)

    def after_name(self, f, rx: str, follow: str) -> str | None:
        """An opener variant holding a tool name put in a greedy group, with what follows the name limited
        to what the group does not take (the parser's capture is then exactly the name)."""
        head, tail = rx.split(rl.SUBST_MARK)
        allowed = complement(rl.char_ranges(follow))
        r = rl.restrict_first(tail, allowed) if tail else None
        if tail and not rl.nullable(tail):
            return None if r is None else head + r
        # the opener can end right after the name: the body must not begin with a character of the group
        starts = _WS_CHARS + ((ord("{"), ord("{")), (ord("["), ord("[")))
        if f["content"] != "json" or rl._intersect(starts, allowed) != rl._intersect(starts, starts):
            self.g.note(f["name"], "open", _src(f["open"]), "structural tag: the body after a tool name may begin "
                        "with a character the name's group takes (the parser then reads another name): a superset")
        return head + (f"(?:{r})?" if r else "")

    def can_be_empty(self, f, kind) -> bool:
        keep, _, _ = self.variants(f, kind)
        return any(rl.nullable(v.regex.replace(rl.SUBST_MARK, "")) for v in keep)

    # -- bodies
    def body(self, fi, f, tool):
        from .grammar import call_schema, envelope

        env = envelope(f)
        if f["content"] == "json":
            if env is None:
                self.g.note(f["name"], "body", json.dumps(f.get("transform")),
                            "transform not understood: the body is any JSON value")
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
            self.check_whitespace(f, cores)
            return _seq(_WS, self.json(schema, cores), _WS)
        if f["content"] == "xml-inline":
            return self.xml(fi, f, tool)
        return self.text(fi + 1)

    def json(self, schema, excludes: list[str]):
        out = {"type": "json_schema", "json_schema": schema}
        ex = [c for c in dict.fromkeys(excludes) if c]
        if ex:
            out["excludes"] = ex
        return out

    def check_whitespace(self, f, cores: list[str]) -> None:
        pieces = sg.fit(cores) if cores else []
        ws = [p for p in pieces if not p.strip()]
        if ws:
            raise Unconstrainable(
                f"structural tag: field '{f['name']}': its closer {_src(f['close'])!r} can match between JSON "
                f"tokens (every match holds {ws[0]!r}, which is JSON whitespace), and xgrammar's json_schema "
                "cannot limit JSON whitespace, so a sampled call body could close early and fail to parse; "
                "use format='lark' (llguidance limits the whitespace)")

    def xml(self, fi, f, tool):
        from .grammar import BOOL_WORDS, _enum, _reads_as_other_json, _types, other_key

        args = f["content_args"]
        tag = args["tag_pattern"]
        vp = args.get("value_parser")
        as_json = isinstance(vp, dict) and vp.get("name") == "json"
        params = tool.parameters if isinstance(tool.parameters, dict) else {}
        props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
        required = params.get("required") or []
        closer = self.g.close_cores(f)

        def param(key, schema):
            c = rl.convert(tag, subst={"key": key if key is not None else ("rx", other_key(props))},
                           split=("value",))
            for how in c.approximations:
                self.g.note(f["name"], "tag_pattern", tag, how)
            before, after = c.variants[0].regex.replace(rl.SUBST_MARK, "").split(rl.SPLIT_MARK)
            after_src = tag.split("(?P<value>.*?)")
            after_cores = (sg.literal_cores(after_src[1], None) or []) if len(after_src) == 2 else []
            excludes = list(dict.fromkeys(after_cores + closer))
            types = _types(schema)
            if isinstance(schema, dict) and isinstance(schema.get("enum", schema.get("const")), (list, str)) \
                    and all(isinstance(e, str) for e in _enum(schema)):
                vals = [e for e in _enum(schema) if not _reads_as_other_json(e)] if as_json else _enum(schema)
                return _regex(_WS_RX + before + rl._alt([rl.literal(e) for e in vals] or ["x"]) + after)
            if types == ("boolean",):
                return _regex(_WS_RX + before + _WS_RX + rl._alt([rl.literal(w) for w in BOOL_WORDS]) + _WS_RX
                              + after)
            if not types or "string" in types:
                if isinstance(schema, dict) and any(k in schema for k in ("pattern", "minLength", "maxLength",
                                                                            "format")):
                    self.g.note(f["name"], "tag_pattern", tag, f"string constraints of parameter {key!r} are not "
                                "enforced in xml-inline text values (a superset)")
                value = {"type": "any_text", "excludes": excludes}
                if as_json and types:
                    value = self.string_text(f, tag, excludes)
            else:
                value = _seq(_WS, self.json(schema, excludes), _WS)
            return _seq(_regex(_WS_RX + before), value, _regex(after))

        parts = []
        for key, schema in props.items():
            p = param(key, schema)
            parts.append(p if key in required else {"type": "optional", "content": p})
        if params.get("additionalProperties", True) is not False:
            parts.append({"type": "star", "content": param(None, {})})
        return _seq(*parts) if parts else {"type": "const_string", "value": ""}

    def string_text(self, f, tag, excludes):
        """A string parameter's value text that the json value parser keeps a string: empty, a JSON string,
        or text that `json.loads` refuses - one that begins with a character no JSON value begins with, or
        with a word's beginning (``tr``, ``nul``, ``NaN``) and then something else, or with ``-`` and no
        number (text beginning with a digit, whitespace, ``[`` or ``{`` is not offered: a subset)."""
        self.g.note(f["name"], "tag_pattern", tag, "structural tag: a string value read as JSON does not begin "
                    "with whitespace, a digit, '[' or '{' (json.loads must not read it as another type): "
                    "a subset", kind="subset")
        ex_first = {e[0] for e in excludes if e}
        text = {"type": "any_text", "excludes": excludes} if excludes else {"type": "any_text"}

        def other(chars) -> str:
            bad = tuple((ord(c), ord(c)) for c in set(chars) | ex_first)
            return rl.ranges_regex(rl._no_surrogates(complement(bad)))

        forms = [self.json({"type": "string"}, excludes),
                 _seq(_regex(other(_NONSTRING_FIRST_CHARS)), text),
                 _seq(_regex("-" + other("0123456789I")), text)]
        for word in ("true", "false", "null", "NaN", "Infinity"):
            if ex_first & set(word):
                continue
            for k in range(1, len(word)):
                forms.append(_regex(rl.literal(word[:k])))
                forms.append(_seq(_regex(rl.literal(word[:k]) + other(word[k])), text))
            forms.append(_seq(_regex(rl.literal(word) + _WS_RX + other(" \t\n\r")), text))
        forms.append(_regex("-"))
        return {"type": "optional", "content": _or(forms)}

    # -- items
    def items(self, t, after=None) -> list:
        """Mode-0 items as (element, makes a call, ends the output): text `t` (None: none), then one mode-0
        delimiter (beginning with the literal `after`, when given) and what it opens up to its closer."""
        g = self.g
        key = (after,)
        if t is None and key in self._joined:
            return self._joined[key]
        out = []
        for fi, f in enumerate(g.fields):
            if f["open"] is None:
                continue
            if g.is_tool_field(f):
                if g.allow_calls:
                    out.extend(self.call_items(fi, f, t, after))
                continue
            opener = self.delim(f, "open", after=after)
            if opener is None:
                continue
            head = _seq(t, opener, self.text(fi + 1))
            if f["close"] is not None:
                out.extend(self.closer_forms(f, head, False, joins=after is None))
            out.append((head, False, True))
        for f in g.fields:
            if f["name"] == g.implicit and f["close"] is not None:
                # (`t` is None right after a joined closer: an empty item is no item)
                out.extend(x for x in self.closer_forms(f, t, False, joins=after is None, first=after)
                           if x[0] is not None)
        if t is None:
            self._joined[key] = out
        return out

    def closer_forms(self, f, head, call: bool, joins: bool, lead: str = "", first=None) -> list:
        """`head` then the field's closer: back to mode 0, at the end of the output, or - for a closer
        alternative with a trailing lookahead that is a literal Y - joined to a mode-0 item that begins with
        Y (a lookahead that is not a literal is not offered: a subset)."""
        out = []
        closer = self.delim(f, "close", lead=lead, after=first)
        if closer is not None:
            out.append((_seq(head, closer), call, False))
        end = self.delim(f, "close", lead=lead, at_end=True, after=first)
        if end is not None:
            out.append((_seq(head, end), call, True))
        _, _, las = self.variants(f, "close")
        if not las:
            return out
        if not joins or first is not None:
            self.g.note(f["name"], "close", _src(f["close"]), "structural tag: a closer alternative ending in a "
                        "lookahead is not offered right after another one (a subset)", kind="subset")
            return out
        for v in las:
            ys, complete = rl.literal_alternatives(v.lookahead)
            if not complete:
                self.g.note(f["name"], "close", _src(f["close"]), "structural tag: after this closer, what its "
                            "lookahead allows is offered only where it is a literal: a subset", kind="subset")
            for y in ys:
                for el2, call2, final2 in self.items(None, after=y):
                    out.append((_seq(head, _regex(lead + v.regex), el2), call or call2, final2))
        return out

    def call_items(self, fi, f, t, after) -> list:
        from .grammar import envelope

        g = self.g
        env = envelope(f) if f["content"] in ("json", "xml-inline") else None
        lookbehind_close = t is not None and f["close"] is not None and bool(g.delim(f, "close").lookbehinds) \
            and self.can_be_empty(f, "open")
        full, nonempty = [], []
        for tool in g.tools:
            subst = {env.name_group: tool.name} if env and env.name_group and tool.name else None
            opener = self.delim(f, "open", subst, after=after)
            if opener is None:
                continue
            body = self.body(fi, f, tool)
            full.append(_seq(opener, body))
            if lookbehind_close:
                o = self.delim(f, "open", subst, nonempty=True)
                if o is not None:
                    nonempty.append(_seq(o, body))
        if not full:
            return []
        if lookbehind_close:
            g.note(f["name"], "open", _src(f["open"]), "structural tag: after text this opener is written "
                   "non-empty (its closer's lookbehind could match at the start of the body, looking back into "
                   "the text): a subset", kind="subset")
            head = _or([_seq(t, _or(nonempty)), _or(full)])
        else:
            head = _seq(t, _or(full))
        out = []
        if f["close"] is not None:
            out.extend(self.closer_forms(f, head, True, joins=after is None, lead=_WS_RX))
        if f["content"] == "xml-inline" and g.open_lookahead(f):
            g.note(f["name"], "open", _src(f["open"]), "structural tag: the call must be closed (the output "
                   "cannot end right after the opener, where its lookahead fails): a subset", kind="subset")
        else:
            out.append((head, True, True))
        return out

    def build(self, start_mode: int) -> dict:
        g = self.g
        its = self.items(self.text(0))
        back_nc = [e for e, c, fin in its if not c and not fin]
        back_c = [e for e, c, fin in its if c and not fin]
        final_nc = [e for e, c, fin in its if not c and fin]
        final_c = [e for e, c, fin in its if c and fin]
        tail = _or([self.text(0)] + final_nc + final_c)
        rest_any = _seq(_star(back_nc + back_c), tail)
        if g.required:
            loop_nc = _star(back_nc)
            forms = []
            if back_c:
                forms.append(_seq(loop_nc, _or(back_c), rest_any))
            if final_c:
                forms.append(_seq(loop_nc, _or(final_c)))
            if not forms:
                raise Unconstrainable("structural tag: tool_choice requires a call, and no call can be written")
            rest = _or(forms)
        else:
            rest = rest_any
        if not start_mode:
            return {"type": "structural_tag", "format": rest}
        f = g.fields[start_mode - 1]
        first = [] if g.required else [self.text(start_mode)]
        if f["close"] is not None:
            for el, call, final in self.closer_forms(f, self.text(start_mode), False, joins=True):
                if final:
                    if call or not g.required:
                        first.append(el)
                else:
                    first.append(_seq(el, rest_any if call else rest))
        return {"type": "structural_tag", "format": _or(first)}


def _leading_literals(d: dict) -> list[str]:
    """The literal text each alternative of a delimiter pattern begins with after a leading whitespace-like
    run (two characters or more; none for an alternative that begins otherwise)."""
    import re._constants as C
    import re._parser as sre_parse

    if "pattern" not in d:
        return []
    try:
        items = list(sre_parse.parse(re.sub(r"\(\?P<(\w+)>", "(?:", d["pattern"]), re.DOTALL))
    except re.error:
        return []

    def lead(items) -> list[str]:
        run = ""
        for i, (op, av) in enumerate(items):
            if op is C.LITERAL:
                run += chr(av)
            elif op is C.BRANCH:  # (the parser factors a common prefix out of alternatives)
                return [run + x for b in av[1] for x in lead(list(b))]
            elif op is C.SUBPATTERN and not av[1] and not av[2]:
                return [run + x for x in lead(list(av[3]) + items[i + 1:])]
            else:
                break
        return [run]

    return [x for x in dict.fromkeys(lead(rl._strip_items(items))) if len(x) >= 2]


def _src(d: dict) -> str:
    return d["pattern"] if "pattern" in d else json.dumps(d["literals"])


def export_structural_tag(spec, tools, required, mode, start_field):
    """The structural tag of `spec` (see the module docstring); raises `Unconstrainable` for a template a
    structural tag cannot constrain soundly."""
    from .grammar import ExportedGrammar, _Lark

    g = _Lark(spec, tools, required, allow_calls=bool(tools))
    tag = _Tag(g).build(mode)
    return ExportedGrammar(json.dumps(tag, ensure_ascii=False), "structural_tag", g.approx, start_field)
