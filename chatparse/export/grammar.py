r"""Export a response template as a constrained-decoding grammar (issue #18).

`export(template, tools, tool_choice=..., format="lark")` returns an `ExportedGrammar`: the grammar text and
what in it is an over-approximation. The language is the outputs that parse under the template, in the
parser's own terms (see the reference `ResponseParser`): mode 0 is "no explicit region open" (text goes to
the implicit field, or nowhere), and watches every field's opener and the implicit field's closer; inside an
explicit field only that field's closer is watched. So an output is a sequence of *segments*: text that holds
no match of anything the current mode watches, then one delimiter, which decides the next mode.

* a text region's segment is one lexeme ``(text & ~(.*W.*)) D`` (llguidance's ``&``/``~`` operators), W the
  union of the mode's watched delimiters: the text between two delimiters holds no delimiter, as the
  parser's leftmost-first scan requires; D's leading whitespace-like run is left to the text, and the text
  may not end with the beginning of another watched match (which could run into D: the parser would take
  it first). Engines' lexers are greedy and never backtrack, so every choice must be decidable at the
  byte where it happens: that is why delimiters are joined to the text before them;
* a structured region (``json``, ``xml-inline``) is its body grammar between optional whitespace: a tool
  call's JSON through ``%json`` with the tool's schema (names from the tool list, arguments per schema, the
  envelope the field's ``transform`` reads), xml-inline parameters per their schema types (booleans also as
  Python's ``True``/``False``, which the parser casts with the tools; parameters beyond the listed ones may
  not take a listed name, `other_key`);
* tool names written by an opener (``(?P<name>..)``) become one opener per tool with the name substituted;
* a closer's trailing lookahead ``(?=Y)`` is exact: that closer's lexeme is joined to the next segment,
  which must begin with Y; an opener's is not checked (the body's grammar follows), and text may not hold
  the opener without it; opener alternatives holding a lookbehind are not offered;
* a JSON body's strings cannot spell the region's closer (`schema_guard`);
* ``tool_choice``: "none" offers no tool-call opener (text still cannot hold one: the parser would open it),
  "required" (or a named tool) runs the grammar in two copies, before and after the first call, and only
  the second may end.

Over-approximations are listed in `ExportedGrammar.approximated` (field, which delimiter or body, how).
``format="structural_tag"`` is in `chatparse.export.structural_tag`.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

import regex

from . import regex_lark as rl
from . import schema_guard as sg

ANY = "(?s:.*)"
WS_RX = "[ \\t\\n\\r]+"  # what json.loads skips around a value
WS_OPT = "[ \\t\\n\\r]*"
# What json.loads turns into a non-string (a string-typed xml-inline value must not be one of these).
_JSON_NUMBER = "-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?(?:[eE][+-]?[0-9]+)?"
_JSON_NONSTRING = ("[ \\t\\n\\r]*(?:" + _JSON_NUMBER + "|true|false|null|NaN|-?Infinity|\\[(?s:.*)\\]|\\{(?s:.*)\\})"
                   "[ \\t\\n\\r]*")
_PERMISSIVE_ARGS = {"type": "object"}
# A parameter name the schema does not list (additionalProperties): an identifier, a subset of what
# tag patterns allow, so that a lazy key group cannot run past its end tag.
_ANY_KEY = "[A-Za-z_][A-Za-z0-9_.\\-]*"
_KEY_FIRST, _KEY_REST = "A-Za-z_", "A-Za-z0-9_.\\-"
# A boolean parameter's xml-inline text: JSON's words, or Python's (the parser casts them with the tools'
# schema: `runtime.coerce`).
BOOL_WORDS = ("true", "false", "True", "False")


def other_key(listed, first: str = _KEY_FIRST, rest: str = _KEY_REST) -> str:
    """An engine regex of the names ``[first][rest]*`` (class bodies; `_ANY_KEY` by default) except the
    `listed` ones: the name of a property beyond those a schema lists (a listed name there would take that
    parameter's value untyped)."""
    any_key = f"[{first}][{rest}]*"
    listed = sorted({k for k in listed if regex.fullmatch(any_key, k)})
    if not listed:
        return any_key

    def node(prefix: str, is_first: bool) -> str:
        kids = sorted({k[len(prefix)] for k in listed if k.startswith(prefix) and len(k) > len(prefix)})
        alts = []
        chars = first if is_first else rest
        others = "".join(c for c in map(chr, range(128)) if regex.fullmatch(f"[{chars}]", c) and c not in kids)
        if others:
            alts.append(_ranges_of(others) + f"[{rest}]*")
        for c in kids:
            alts.append(rl.escape_char(ord(c)) + node(prefix + c, False))
        body = rl._alt(alts) if alts else None
        if prefix and prefix not in listed:  # the name may end here
            return f"(?:{body})?" if body else ""
        return body if body is not None else "[^\\x{0}-\\x{10ffff}]"

    return node("", True)


def _ranges_of(chars: str) -> str:
    """A character class of ASCII `chars` (as runs)."""
    cps = sorted(ord(c) for c in chars)
    runs, start = [], cps[0]
    for a, b in zip(cps, cps[1:] + [None]):
        if b != a + 1:
            runs.append((start, a))
            start = b
    return "[" + "".join(f"\\x{{{lo:x}}}" if lo == hi else f"\\x{{{lo:x}}}-\\x{{{hi:x}}}" for lo, hi in runs) + "]"


@dataclass
class ExportedGrammar:
    """A grammar for the outputs that parse under a template: ``text`` in ``format``.

    ``approximated`` lists the over-approximations (``{"field", "where", "pattern", "how"}``); an empty list
    means the grammar is exact for the template's delimiters. ``start_field`` is the region the output
    starts in (from the prompt prefix)."""

    text: str
    format: str
    approximated: list = field(default_factory=list)
    start_field: str | None = None

    @property
    def exact(self) -> bool:
        return not self.approximated

    def as_dict(self) -> dict:
        return {"format": self.format, "grammar": self.text, "exact": self.exact,
                "approximated": self.approximated, "start_field": self.start_field}

    def __str__(self) -> str:
        return self.text


# ----------------------------------------------------------------------------------------------- tools


@dataclass
class Tool:
    name: str | None  # None: any name (no tool list)
    parameters: dict


def normalize_tools(tools) -> list[Tool] | None:
    if tools is None:
        return None
    out = []
    for tool in tools:
        if callable(tool) and not isinstance(tool, dict):
            from ..compiler.tools import tool_schemas

            tool = tool_schemas([tool])[0]
        fn = tool.get("function", tool) if isinstance(tool, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError(f"a tool must be {{'type': 'function', 'function': {{'name': ...}}}}, got {tool!r}")
        params = fn.get("parameters")
        out.append(Tool(fn["name"], params if isinstance(params, dict) else {"type": "object", "properties": {}}))
    return out


def choose(tools: list[Tool] | None, tool_choice) -> tuple[list[Tool], bool]:
    """(tools a call may use, whether at least one call is required)."""
    if tool_choice in (None, "auto"):
        return (tools if tools is not None else [Tool(None, _PERMISSIVE_ARGS)]), False
    if tool_choice == "none":
        return [], False
    if tool_choice == "required":
        t = tools if tools is not None else [Tool(None, _PERMISSIVE_ARGS)]
        if not t:
            raise ValueError('tool_choice="required" needs at least one tool')
        return t, True
    name = tool_choice
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or tool_choice).get("name")
    if not isinstance(name, str):
        raise ValueError(f"tool_choice must be 'none', 'auto', 'required', a tool name or "
                         f"{{'type': 'function', 'function': {{'name': ...}}}}, got {tool_choice!r}")
    chosen = [t for t in (tools or []) if t.name == name]
    if not chosen:
        raise ValueError(f"tool_choice names {name!r}, which is not in the tool list")
    return chosen, True


# ------------------------------------------------------------------------------------- call envelopes


def _placeholder(value: Any) -> str | None:
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return value[1:-1]
    return None


@dataclass
class Envelope:
    """Where a tool call's name and arguments live, from the field's transform."""

    name_group: str | None = None  # the opener's named group that writes the name
    name_path: tuple | None = None  # path in the (item of the) body
    args_path: tuple | None = None  # () = the whole body / item
    other_paths: list = field(default_factory=list)  # further body paths the transform reads
    each: bool = False  # the body is a list of calls (transform_each)


def envelope(f: dict) -> Envelope | None:
    t = f.get("transform")
    fn = t.get("function") if isinstance(t, dict) else None
    env = Envelope(each=bool(f.get("transform_each")))
    paths: list = []

    def body_path(p: str) -> tuple | None:
        parts = tuple(p.split("."))
        if env.each:
            return parts
        if parts[0] == "content":
            return parts[1:]
        return None

    if _placeholder(fn) is not None:  # "function": "{content}" (or a path): {"name", "arguments"} object
        base = body_path(_placeholder(fn))
        if base is None:
            return None
        env.name_path, env.args_path = base + ("name",), base + ("arguments",)
    elif isinstance(fn, dict):
        n, a = _placeholder(fn.get("name")), _placeholder(fn.get("arguments"))
        if n is None or a is None:
            return None
        if body_path(n) is not None:
            env.name_path = body_path(n)
        else:
            env.name_group = n
        env.args_path = body_path(a)
        if env.args_path is None:
            return None
    else:
        return None

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        else:
            p = _placeholder(v)
            if p is not None:
                paths.append(p)

    walk(t)
    for p in paths:
        bp = body_path(p)
        if bp is not None and bp not in (env.name_path, env.args_path) and bp:
            env.other_paths.append(bp)
    return env


def _nest(paths: dict, first_ok=None) -> dict:
    """{path tuple: schema} -> one object schema holding them (every path required). `first_ok(key)` says
    which keys may come first at the top (an opener's lookahead may require one)."""
    if () in paths:
        return paths[()]
    props: dict = {}
    order: list = []
    for path, schema in paths.items():
        head = path[0]
        if head not in props:
            order.append(head)
            props[head] = {}
        props[head][path[1:]] = schema
    schemas = {k: _nest(props[k]) for k in order}
    if 1 < len(order) <= 3:  # llguidance fixes the order of properties: offer every order
        perms = [p for p in itertools.permutations(order) if first_ok is None or first_ok(p[0])]
        perms = perms or [tuple(order)]
        alts = [{"type": "object", "properties": {k: schemas[k] for k in perm}, "required": list(perm),
                 "additionalProperties": False} for perm in perms]
        return alts[0] if len(alts) == 1 else {"anyOf": alts}
    return {"type": "object", "properties": schemas, "required": order, "additionalProperties": False}


def call_schema(env: Envelope, tool: Tool, first_ok=None) -> dict:
    """The JSON schema of a call's body (or of one item of a list body) for `tool`."""
    paths: dict = {}
    if env.name_path is not None:
        paths[env.name_path] = {"type": "string"} if tool.name is None else {"const": tool.name}
    for p in env.other_paths:
        paths[p] = {}
    paths[env.args_path] = tool.parameters
    return _nest(paths, first_ok)


# ------------------------------------------------------------------------------------------ exporter


class _Lark:
    def __init__(self, spec: dict, tools: list[Tool], required: bool, allow_calls: bool):
        self.spec = spec
        self.fields = spec["fields"]
        self.implicit = spec["implicit"]
        self.tools = tools
        self.required = required
        self.allow_calls = allow_calls
        self.approx: list[dict] = []
        self.terms: dict[str, str] = {}
        self.rules: dict[str, str] = {}
        self.conv_cache: dict = {}
        self.partial_cache: dict = {}
        self.n = 0

    # -- helpers
    def note(self, fname: str, where: str, pattern: str, how: str, kind: str = "superset") -> None:
        item = {"field": fname, "where": where, "pattern": pattern, "how": how, "kind": kind}
        if item not in self.approx:
            self.approx.append(item)

    def term(self, prefix: str, body: str) -> str:
        for k, v in self.terms.items():
            if v == body:
                return k
        self.n += 1
        name = f"{prefix}_{self.n}"
        self.terms[name] = body
        return name

    def delim(self, f: dict, kind: str, subst: dict | None = None) -> rl.Converted:
        d = f[kind]
        key = (f["name"], kind, json.dumps(subst, sort_keys=True))
        if key in self.conv_cache:
            return self.conv_cache[key]
        if "literals" in d:
            c = rl.Converted([rl.Variant(rl._alt([rl.literal(s) for s in d["literals"]]))])
        else:
            c = rl.convert(d["pattern"], subst=subst)
            for how in c.approximations:
                self.note(f["name"], f"{kind}_pattern", d["pattern"], how)
        self.conv_cache[key] = c
        return c

    def is_tool_field(self, f: dict) -> bool:
        return f["name"] == "tool_calls"

    def watched(self, mode: int) -> list:
        """(field, kind) pairs the parser watches in `mode` (0, or 1 + field index)."""
        if mode == 0:
            out = [(f, "open") for f in self.fields if f["open"] is not None]
            for f in self.fields:
                if f["name"] == self.implicit and f["close"] is not None:
                    out.append((f, "close"))
            return out
        f = self.fields[mode - 1]
        return [(f, "close")] if f["close"] is not None else []

    def exclusion(self, f: dict, kind: str) -> list[str]:
        """What text in a mode watching this delimiter must not hold.

        A closer's trailing lookahead is exact (see `after_close`). An opener's is not kept: the engines'
        lexers are greedy and do not backtrack, so text must stop where the opener begins. The text may
        not hold the opener without its lookahead; when the opener can match the empty string, it may not
        hold the lookahead's first character at all (both a subset of what the parser allows)."""
        out = []
        for v in self.delim(f, kind).variants:
            if v.at_end:
                continue
            if not v.lookahead or kind == "close":
                out.append(v.regex + (f"(?:{v.lookahead})" if v.lookahead else ""))
                continue
            if regex.fullmatch(rl.to_python(v.regex), ""):
                first = _first_chars(v.lookahead)
                out.append(v.regex + first)
                self.note(f["name"], "open", _src(f[kind]),
                          f"text before it may not hold {first} (the opener can be empty and its lookahead "
                          "begins with that): a subset", kind="subset")
            else:
                out.append(v.regex)
                self.note(f["name"], "open", _src(f[kind]),
                          "text may not hold the opener even where its lookahead fails: a subset", kind="subset")
        return out

    def notx(self, mode: int, extra: list | None = None) -> str:
        parts = [p for f, k in self.watched(mode) for p in self.exclusion(f, k)] + list(extra or [])
        parts = [p for p in parts if p]
        if not parts:
            return self.term("TEXT", f"/{ANY}/")
        return self.term("TEXT", f"/{ANY}/ & ~/{ANY}{rl._alt(parts)}{ANY}/")

    def partial_starts(self, mode: int) -> str | None:
        """The non-empty beginnings of a match of something `mode` watches (see
        `regex_lark.start_forms`), as one engine regex; None when nothing is watched."""
        if mode in self.partial_cache:
            return self.partial_cache[mode]
        ps = []
        for f, kind in self.watched(mode):
            d = f[kind]
            src = "|".join(regex.escape(x) for x in d["literals"]) if "literals" in d else d["pattern"]
            ps.append(rl.start_forms(src)[1])
        self.partial_cache[mode] = rl._alt(ps) if ps else None
        return self.partial_cache[mode]

    def closer_at_start(self, f: dict, v: rl.Variant) -> str | None:
        """When an opener can match the empty string and the field's closer holds a lookbehind (which the
        grammar drops), the closer could match right at the start of the body, looking back into the text
        before the opener: that text may not end with what the lookbehind looks for (a subset)."""
        if f["close"] is None or "pattern" not in f["close"] or not regex.fullmatch(rl.to_python(v.regex), ""):
            return None
        lbs = self.delim(f, "close").lookbehinds
        if not lbs:
            return None
        self.note(f["name"], "open", _src(f["open"]), "text right before this opener may not end with what the "
                  "closer's lookbehind looks for (the closer could match at the start of the body): a subset",
                  kind="subset")
        return rl._alt(lbs)

    def seg(self, mode: int, text_term: str, rx: str, not_ending: str | None = None,
            follow: str | None = None) -> str:
        """Text, then a delimiter, as one lexeme.

        The delimiter's leading ``(?:[class])*`` run is left to the text (a match ending inside that run
        could otherwise hide in the text). And the text may not end with the beginning (two characters or
        more) of a match of something the mode watches: that match could run into (or past) the delimiter,
        and the parser would take it first (a subset: such text is only offered where no delimiter follows;
        a match beginning with the text's last character alone is not excluded)."""
        rx = rl.strip_lead(rx)
        if not_ending:
            text_term = self.term("TEXTSEG", f"{text_term} & ~/{ANY}(?:{not_ending})/")
        p = self.partial_starts(mode)
        if p is not None:
            text_term = self.term("TEXTSEG", f"{text_term} & ~(/{ANY}/ (/{p}/ & /(?s:.){{2,}}/))")
            self.note("*", "text", "", "text right before a delimiter may not end with the first two or more "
                      "characters of a match of something else the region watches: a subset", kind="subset")
        if rl.SUBST_MARK in rx:
            # a tool name put in a greedy group: the delimiter may not go on with a character the group
            # would take (the parser would read a longer name)
            head = rx.split(rl.SUBST_MARK)[0]
            plain = rx.replace(rl.SUBST_MARK, "")
            return f"{text_term} (/{plain}/ & ~/{head}(?:{follow}){ANY}/)"
        return f"{text_term} /{rx}/" if rx else text_term

    # -- mode 0 transitions: (terminal body, continuation rule or None for "output ends", makes a call)
    def transitions0(self, s: str) -> list:
        x0 = self.notx(0)
        out = []
        for fi, f in enumerate(self.fields):
            if f["open"] is None:
                continue
            if self.is_tool_field(f):
                if not self.allow_calls:
                    continue
                for ti, tool in enumerate(self.tools):
                    env = envelope(f) if f["content"] in ("json", "xml-inline") else None
                    subst = {env.name_group: tool.name} if env and env.name_group and tool.name else None
                    conv = self.delim(f, "open", subst)
                    for v in self.offered(f, conv.variants):
                        self._open_lookahead(f, v)
                        cont = self.body_rule(fi, f, tool, ti, "d")
                        out.append((self.seg(0, x0, v.regex, self.closer_at_start(f, v), conv.follow),
                                    None if v.at_end else cont, True))
                continue
            for v in self.offered(f, self.delim(f, "open").variants):
                self._open_lookahead(f, v)
                out.append((self.seg(0, x0, v.regex), None if v.at_end else self.mode_rule(fi + 1, s), False))
        for f in self.fields:
            if f["name"] == self.implicit and f["close"] is not None:
                for v in self.delim(f, "close").variants:
                    if v.lookahead:
                        self.note(f["name"], "close", _src(f["close"]), "trailing lookahead dropped (a superset)")
                    out.append((self.seg(0, x0, v.regex), None if v.at_end else self.mode_rule(0, s), False))
        return out

    def offered(self, f: dict, variants: list) -> list:
        """An opener's variants a grammar may write: not one whose lookbehind (or other assertion) was
        dropped, unless all were (then it is a stated superset)."""
        exact = [v for v in variants if not v.lossy]
        if exact and len(exact) < len(variants):
            self.note(f["name"], "open", _src(f["open"]), "alternatives holding a lookbehind (or another "
                      "assertion a grammar cannot check) are not offered: a subset", kind="subset")
            return exact
        return variants

    def _open_lookahead(self, f: dict, v: rl.Variant) -> None:
        if v.lookahead:
            self.note(f["name"], "open", _src(f["open"]),
                      "trailing lookahead dropped: the body that follows is constrained by its own grammar, "
                      "which the lookahead is not checked against")

    def after_close(self, s: str, v: rl.Variant, prefix: str) -> list:
        """Alternatives after a closer variant whose lexeme is `prefix` (terminal expression)."""
        if v.at_end:
            return [self.term("END", prefix)] if s == "d" else []
        if not v.lookahead:
            return [f"{self.term('SEG', prefix)} {self.mode_rule(0, s)}"]
        alts = []
        for body, cont, call in self.transitions0(s):
            s2 = "d" if call else s
            t = self.term("SEG", f"{prefix} ({self.term('SEG', body)} & /{v.lookahead}{ANY}/)")
            if cont is None:
                if s2 == "d":
                    alts.append(t)
            else:
                alts.append(f"{t} {cont}")
        return alts

    # -- rules
    def mode_rule(self, mode: int, s: str) -> str:
        name = f"m{mode}_{s}"
        if name in self.rules:
            return name
        self.rules[name] = ""  # reserve (recursion)
        alts = []
        if mode == 0:
            for body, cont, call in self.transitions0(s):
                t = self.term("SEG", body)
                if cont is None:
                    if call or s == "d":
                        alts.append(t)
                else:
                    alts.append(f"{t} {cont}")
            if s == "d":
                alts.append(self.notx(0))
        else:
            f = self.fields[mode - 1]
            if f["content"] not in ("text", None):
                self.note(f["name"], "body", f["content"],
                          f"content {f['content']!r} outside tool calls is read as any text without its closer")
            x = self.notx(mode)
            if f["close"] is not None:
                for v in self.delim(f, "close").variants:
                    alts.extend(self.after_close(s, v, self.seg(mode, x, v.regex)))
            if s == "d":
                alts.append(x)
        self.rules[name] = " | ".join(alts) if alts else '""'
        return name

    def body_rule(self, fi: int, f: dict, tool: Tool, ti: int, s: str) -> str:
        name = f"call{fi}_{ti}_{s}"
        if name in self.rules:
            return name
        self.rules[name] = ""
        ws = self.term("WS", f"/{WS_RX}/")
        env = envelope(f)
        if f["content"] == "json":
            if env is None:
                self.note(f["name"], "body", json.dumps(f.get("transform")),
                          "transform not understood: the body is any JSON value")
                schema: dict = {}
            elif env.each:
                first_ok = self.first_key_check(f)
                items = {"anyOf": [call_schema(env, t, first_ok) for t in self.tools]} if len(self.tools) > 1 \
                    else call_schema(env, self.tools[0], first_ok)
                schema = {"type": "array", "items": items}
                if self.required:
                    schema["minItems"] = 1
            else:
                schema = call_schema(env, tool, self.first_key_check(f))
            cores = self.close_cores(f)
            ca = f["content_args"]
            if ca.get("unquoted_keys"):
                # the dialect quotes a bare `word:` after "{" or "," - inside strings too
                cores = cores + ["{", ","]
            if isinstance(ca.get("string_delims"), list):
                cores = cores + [d for pair in ca["string_delims"] for d in pair if isinstance(d, str) and d]
            raw = schema
            schema = self.guarded(f, schema, cores)
            body = f"%json {json.dumps(schema)}"
            dialect = self.dialect(f, env, raw)
            if dialect:
                # the dialect alone: next to %json, llguidance let JSON whitespace into the dialect's "{"
                body = dialect
            elif ca.get("unquoted_keys") or ca.get("string_delims"):
                self.note(f["name"], "body", json.dumps(ca), "unquoted keys / custom string delimiters are not "
                          "generated for this schema: the body is strict JSON, which the parser also reads",
                          kind="subset")
        elif f["content"] == "xml-inline":
            body = self.xml_body(fi, f, tool, ti)
            tail = self.close_tail(f, s, lead=WS_OPT)
            if tail and self.open_lookahead(f):
                # the opener's lookahead is not checked: the end of the output right after it (where the
                # lookahead fails) is not offered, the closer is required
                tail = tail[:-1]
            self.rules[name] = f"{body} {tail}".strip()
            return name
        else:
            body = self.notx(fi + 1)
        self.rules[name] = f"{ws}? {body} {ws}? {self.close_tail(f, s)}".strip()
        return name

    def dialect(self, f: dict, env, schema) -> str | None:
        """A rule for the body in the field's JSON dialect (`dialect`), or None: only where the body
        is the arguments (a transform like ``{"name": "{name}", "arguments": "{content}"}``), the field has
        bare keys and one pair of string delimiters, and the schema has a dialect rule."""
        from .dialect import DialectBody

        ca = f["content_args"]
        delims = ca.get("string_delims")
        if not (ca.get("unquoted_keys") and isinstance(delims, list) and len(delims) == 1 and env is not None
                and not env.each and env.args_path == () and env.name_path is None and not env.other_paths):
            return None
        key = ("dialect", f["name"])
        if key not in self.conv_cache:
            self.conv_cache[key] = DialectBody(self, f["name"], delims[0][0], delims[0][1], self.close_cores(f))
        rule = self.conv_cache[key].rule(schema)
        if rule:
            self.note(f["name"], "body", json.dumps(ca), "the body is written in the dialect (bare keys, "
                      "delimited strings), compactly and in the schema's property order, not as strict JSON: "
                      "a subset", kind="subset")
        return rule

    def first_key_check(self, f: dict):
        """A test of which key may open a JSON body, from the opener's trailing lookaheads (None: any)."""
        las = [regex.compile(rl.to_python(v.lookahead), regex.DOTALL)
               for v in self.delim(f, "open").variants if v.lookahead]
        if not las:
            return None

        def ok(key: str) -> bool:
            return all(any(la.match(p + json.dumps(key), partial=True) for p in ("{", "[{")) for la in las)
        return ok

    def open_lookahead(self, f: dict) -> bool:
        return f["open"] is not None and any(v.lookahead for v in self.delim(f, "open").variants)

    def close_cores(self, f: dict) -> list[str]:
        d = f["close"]
        if d is None:
            return []
        cores = sg.literal_cores(d.get("pattern"), d.get("literals"))
        if cores is None:
            self.note(f["name"], "body", _src(d), "no literal found in the closer: strings in the body are not "
                      "kept from spelling it")
            return []
        return cores

    def guarded(self, f: dict, schema: Any, cores: list[str]) -> Any:
        """`schema` whose strings (and open keys) cannot spell any of `cores` (see `schema_guard`)."""
        if not cores:
            return schema
        pieces = sg.fit(cores)
        if pieces != cores:
            self.note(f["name"], "body", json.dumps(cores), f"strings in the body may not hold {pieces!r} "
                      "(pieces of what the closer must contain): a subset", kind="subset")
        out, notes = sg.guard(schema, sg.avoid_regex(pieces))
        for n in notes:
            self.note(f["name"], "body", "", n)
        if any(not c.strip() for c in pieces):
            # the closer can match between JSON tokens (e.g. a newline): no newlines there
            out["x-guidance"] = {"whitespace_pattern": "[ \\t]+"}
            self.note(f["name"], "body", json.dumps(pieces), "JSON whitespace is limited to spaces and tabs "
                      "(the closer can begin in it): a subset", kind="subset")
        return out

    def close_tail(self, f: dict, s: str, lead: str = "") -> str:
        """A structured body's closer and what follows it; optional (the end of the output closes it too)."""
        closes = []
        if f["close"] is not None:
            for v in self.delim(f, "close").variants:
                closes.extend(self.after_close(s, v, f"/{lead}{v.regex}/"))
        return f"({' | '.join(closes)})?" if closes else ""

    def xml_body(self, fi: int, f: dict, tool: Tool, ti: int) -> str:
        args = f["content_args"]
        tag = args["tag_pattern"]
        vp = args.get("value_parser")
        as_json = isinstance(vp, dict) and vp.get("name") == "json"
        closer = self.delim(f, "close").union() if f["close"] is not None else ""
        ws = self.term("WS", f"/{WS_RX}/")
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        props = props if isinstance(props, dict) else {}
        required = tool.parameters.get("required") or [] if isinstance(tool.parameters, dict) else []
        additional = tool.parameters.get("additionalProperties", True) if isinstance(tool.parameters, dict) \
            else True

        def param(key: str | None, schema: Any) -> str:
            c = rl.convert(tag, subst={"key": key if key is not None else ("rx", other_key(props))},
                           split=("value",))
            for how in c.approximations:
                self.note(f["name"], "tag_pattern", tag, how)
            # (a key put in a greedy group is followed by the tag's own delimiter in the bundled patterns)
            rx = c.variants[0].regex.replace(rl.SUBST_MARK, "")
            if len(c.variants) != 1 or rx.count(rl.SPLIT_MARK) != 1:
                raise ValueError(f"Field '{f['name']}': tag_pattern {tag!r}: the value group must appear once, "
                                 "outside alternatives")
            before, after = rx.split(rl.SPLIT_MARK)
            if key is None:
                before = before  # the key group's own pattern (converted), any key it allows
            types = _types(schema)
            text_like = not types or "string" in types
            if isinstance(schema, dict) and isinstance(schema.get("enum", schema.get("const")), (list, str)) \
                    and all(isinstance(e, str) for e in _enum(schema)):
                # the raw text is the value (it does not read as JSON, or reads as that string)
                vals = [e for e in _enum(schema) if not _reads_as_other_json(e)] if as_json else _enum(schema)
                return self.term("PARAM", f"/{WS_OPT}{before}{rl._alt([rl.literal(e) for e in vals] or ['x'])}{after}/")
            if types == ("boolean",):
                words = rl._alt([rl.literal(w) for w in BOOL_WORDS])
                return self.term("PARAM", f"/{WS_OPT}{before}{WS_OPT}{words}{WS_OPT}{after}/")
            if text_like and isinstance(schema, dict) and any(k in schema for k in (
                    "pattern", "minLength", "maxLength", "format")):
                self.note(f["name"], "tag_pattern", tag, f"string constraints of parameter {key!r} are not "
                          "enforced in xml-inline text values (a superset)")
            if text_like:
                excl = [after] + ([closer] if closer else [])
                val = f"/{ANY}/ & ~/{ANY}{rl._alt(excl)}{ANY}/"
                if as_json and types:
                    val = f"({val}) & ~/{_JSON_NONSTRING}/"
                return self.term("PARAM", f"/{WS_OPT}{before}/ ({val}) /{after}/")
            pb, pa = self.term("PB", f"/{WS_OPT}{before}/"), self.term("PA", f"/{after}/")
            after_src = tag.split("(?P<value>.*?)")
            cores = self.close_cores(f) + (sg.literal_cores(after_src[1], None) or [] if len(after_src) == 2 else [])
            return f"{pb} {ws}? %json {json.dumps(self.guarded(f, schema, cores))} {ws}? {pa}"

        # Whitespace between parameters is part of each parameter's lexeme: a separate whitespace lexeme
        # next to a closer that begins with whitespace would make the engines' greedy lexers commit to the
        # closer on the first "<".
        parts = []
        for key, schema in props.items():
            p = param(key, schema)
            parts.append(p if key in required else f"({p})?")
        if additional is not False and (not props or additional):
            parts.append(f"({param(None, {})})*")
        return " ".join(parts) if parts else '""'

    def build(self, start_mode: int) -> str:
        s0 = "n" if self.required else "d"
        start = self.mode_rule(start_mode, s0)
        lines = ["%llguidance {}", f"start: {start}"]
        for name, body in self.rules.items():
            lines.append(f"{name}: {body}")
        for name, body in self.terms.items():
            lines.append(f"{name}: {body}")
        return "\n".join(lines) + "\n"


def _enum(schema: dict) -> list:
    return schema["enum"] if "enum" in schema else [schema["const"]]


def _reads_as_other_json(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), str)
    except ValueError:
        return False


def _types(schema: Any) -> tuple:
    if not isinstance(schema, dict):
        return ()
    t = schema.get("type")
    out = [t] if isinstance(t, str) else list(t) if isinstance(t, list) else []
    for k in ("anyOf", "oneOf"):
        for c in schema.get(k) or []:
            out.extend(_types(c))
    if "enum" in schema and not out:
        out.extend({"string" if isinstance(e, str) else "other" for e in schema["enum"]})
    return tuple(out)


def _first_chars(lookahead: str) -> str:
    """A character class of the (ASCII) characters a match of `lookahead` can begin with."""
    py = regex.compile(rl.to_python(lookahead), regex.DOTALL)
    chars = [c for c in map(chr, range(1, 128)) if py.match(c, partial=True)]
    return "[" + "".join(rl.escape_char(ord(c)) if c.isalnum() else f"\\x{{{ord(c):x}}}" for c in chars) + "]"


def _src(d: dict) -> str:
    return d["pattern"] if "pattern" in d else json.dumps(d["literals"])


def start_mode(compiled, prefix) -> int:
    r"""The mode the output starts in after `prefix` (the prompt): the explicit field it left open, or 0.

    A region whose closer already matched at the end of the prompt and is only held because it could go on
    (``</think>\n`` before a closer's trailing ``\s*``) is closed: what the output writes first extends that
    closer or is mode-0 text. Told apart by finishing the prompt alone with offsets: the region's close then
    spans the closer's text (an open region's close at the end spans nothing)."""
    if not prefix:
        return 0
    from ..runtime.stream.dialect import resolve
    from ..runtime.stream.parser import StreamParser, feed_prompt

    dialect = resolve("vllm")
    parser = StreamParser(compiled.tables, {}, dialect)  # (as `ResponseParser(compiled, prefix, dialect="vllm")`)
    open_field = None
    for e in feed_prompt(parser, compiled.tables.cut_prefix(prefix), dialect):
        if e["type"] == "region_open":
            open_field = e["field"]
        elif e["type"] == "region_close":
            open_field = None
    names = [f["name"] for f in compiled.spec["fields"]]
    if open_field is None or open_field == compiled.spec["implicit"]:
        return 0
    try:
        _, final = parser.finish()
    except ValueError:  # the prompt's region does not parse on its own: it stays open
        final = []
    if any(e["type"] == "region_close" and e["field"] == open_field and e.get("end", 0) > e.get("start", 0)
           for e in final):
        return 0
    return names.index(open_field) + 1


def export(compiled, tools=None, *, tool_choice="auto", format="lark", prefix=None) -> ExportedGrammar:
    """See `CompiledTemplate.grammar`. A template that uses a format extension is refused (ValueError naming
    it): the grammar is built from the base format's value rules, which such a field does not follow."""
    spec = compiled.spec
    for name in spec.get("extensions", ()):
        raise ValueError(f"grammar export is not supported for format extension '{name}' (the template uses it)")
    chosen, required = choose(normalize_tools(tools), tool_choice)
    has_tool_field = any(f["name"] == "tool_calls" for f in spec["fields"])
    if required and not has_tool_field:
        raise ValueError(f"tool_choice={tool_choice!r}: the template has no tool_calls field")
    mode = start_mode(compiled, prefix)
    start_field = spec["fields"][mode - 1]["name"] if mode else None
    if format == "lark":
        g = _Lark(spec, chosen, required, allow_calls=bool(chosen))
        text = g.build(mode)
        return ExportedGrammar(text, "lark", g.approx, start_field)
    if format == "structural_tag":
        from .structural_tag import export_structural_tag

        return export_structural_tag(spec, chosen, required, mode, start_field)
    raise ValueError(f"format must be 'lark' or 'structural_tag', got {format!r}")
