"""Hypothesis strategies for generated templates and texts, shared by the differential suites (against
transformers' interpreter, tests/test_differential.py, and vLLM's copy, tests/test_vllm_dialect.py).

Imports neither reference: the vLLM suite runs in an environment where transformers' interpreter is absent.
"""

from __future__ import annotations

import regex
from hypothesis import strategies as st

import chatparse

ALPHA = "ab<>/x\n "
lit = st.text(alphabet="ab<>/x", min_size=1, max_size=4)

ATOMS = [r"[ab]", r"\w", r".", r"[^>]", r"\s", r"x", r"<", r">", r"/", r"b"]
QUANTS = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{1,2}", "{0,2}?"]


@st.composite
def regex_source(draw, allow_groups=True):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            parts.append(regex.escape(draw(lit)))
        else:
            parts.append(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANTS)))
    body = "".join(parts)
    if draw(st.integers(0, 4)) == 0:
        body = f"(?:{body}|{regex.escape(draw(lit))})"
    if allow_groups and draw(st.integers(0, 3)) == 0:
        body = f"(?P<g>{body})"
    return body


@st.composite
def delimiter(draw, kind: str, implicit_close: bool = False):
    """A field's open or close: a literal, a literal list, or a pattern (possibly anchored or lookaround)."""
    choice = draw(st.integers(0, 9))
    if choice <= 3:
        return {kind: draw(lit)}
    if choice <= 5:
        return {kind: draw(st.lists(lit, min_size=1, max_size=3))}
    src = draw(regex_source())
    extra = draw(st.integers(0, 9))
    if kind == "open" and extra == 0:
        src = f"(?:^|{src})"
    elif kind == "close" and implicit_close and extra <= 1:
        src = draw(st.sampled_from([r"$", r"\Z", src + r"(?=x)", src + "$"]))
    elif extra == 2:
        src = r"(?<=[ab])" + src
    elif extra == 3:
        src = src + r"(?=[ab\n])"
    return {f"{kind}_pattern": src}


# Bodies for the value kinds that can fail to parse (`templates(failing=True)`): JSON that parses or not,
# numbers and not, dicts with and without the key a dotted transform reads.
VALUE_PIECES = ['{"x": 1}', '{"x": "a"}', '{"y": 2}', '[1, 2]', "12", " 7 ", "{bad", '"s"', "x1"]


def _failing_value(draw, f: dict) -> None:
    """Give field `f` a value that can fail to parse: JSON (bad bodies), int, a dotted transform over JSON
    (a body without the key, or not a dict), or a join over JSON values (not strings)."""
    kind = draw(st.integers(0, 5))
    groups = "transform" in f and "g" in f["transform"]
    if kind == 1:
        f["content"] = "json"
    elif kind == 2:
        f["content"] = "int"
    elif kind == 3:
        f["content"] = "json"
        f.pop("join", None)
        f["transform"] = {"x": "{content.x}", **({"g": "{g}"} if groups else {})}
    elif kind == 4 and f.get("repeats") and not groups:
        f["content"] = "json"
        f["join"] = "|"


@st.composite
def templates(draw, failing: bool = False):
    """A random template of 1-3 explicit fields and maybe an implicit one. With `failing`, fields may also
    take value kinds whose bodies can fail to parse (`_failing_value`); without it the draws are the same
    as they always were (the transformers suite's examples do not move)."""
    fields = {}
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "tool"]), min_size=1, max_size=3, unique=True))
    for name in names:
        f = dict(draw(delimiter("open")))
        if draw(st.integers(0, 5)) > 0:
            f.update(draw(delimiter("close")))
        content_kind = draw(st.integers(0, 5))
        if content_kind == 0:
            f["content_args"] = {"strip": False}
        if draw(st.booleans()):
            f["repeats"] = True
            if draw(st.integers(0, 2)) == 0:
                f["join"] = "|"
        pats = [v for k, v in f.items() if k.endswith("_pattern")]
        if any(regex.compile(p).groupindex for p in pats):
            f["transform"] = {"g": "{g}", "c": "{content}"} if "join" not in f else None
            if f["transform"] is None:
                del f["transform"]
                del f["join"]
                f["transform"] = {"g": "{g}", "c": "{content}"}
        if failing:
            _failing_value(draw, f)
        fields[name] = f
    if draw(st.booleans()):
        impl = {}
        if draw(st.integers(0, 3)) > 0:
            impl.update(draw(delimiter("close", implicit_close=True)))
            for k in list(impl):
                if k.endswith("_pattern") and regex.compile(impl[k]).groupindex:
                    impl["transform"] = {"g": "{g}", "c": "{content}"}
        if draw(st.integers(0, 2)) == 0:
            impl["repeats"] = True
        fields["content"] = impl
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


def _delims(template) -> list[str]:
    out = []
    for f in template["fields"].values():
        for k in ("open", "close"):
            v = f.get(k)
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, list):
                out.extend(v)
    return out or ["<a>"]


@st.composite
def texts_for(draw, template, extra: tuple = ()):
    """A text of delimiters, cut delimiters and filler; with `extra`, pieces drawn from it too."""
    delims = _delims(template)
    pieces = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.integers(0, 4 if extra else 3))
        if kind == 4:
            pieces.append(draw(st.sampled_from(extra)))
        elif kind == 0:
            pieces.append(draw(st.sampled_from(delims)))
        elif kind == 1:
            d = draw(st.sampled_from(delims))
            pieces.append(d[: draw(st.integers(0, len(d)))])
        else:
            pieces.append(draw(st.text(alphabet=ALPHA, max_size=4)))
    return "".join(pieces)


@st.composite
def shaped_templates(draw, opens: list, closes: list, json_bodies: bool = False):
    """Templates of up to three fields (and maybe content) whose delimiters are drawn from `opens` and `closes`
    (the callers' lists: mostly `literal_shapes` patterns, with a few that are not), with or without a close,
    repeating or not, keeping whitespace or not (else a whitespace run's end would not show in the message);
    with `json_bodies`, a quarter of the fields parse their body as JSON (a body that is not JSON raises)."""
    fields = {}
    for name in draw(st.lists(st.sampled_from(["a", "b", "tool"]), min_size=1, max_size=3, unique=True)):
        f = {"open_pattern": draw(st.sampled_from(opens))}
        if draw(st.integers(0, 4)):
            f["close_pattern"] = draw(st.sampled_from(closes))
        if draw(st.booleans()):
            f["repeats"] = True
        if json_bodies and draw(st.integers(0, 3)) == 0:
            f["content"] = "json"
        elif draw(st.booleans()):
            f["content_args"] = {"strip": False}
        fields[name] = f
    if draw(st.booleans()):
        fields["content"] = {"close_pattern": draw(st.sampled_from(closes))} if draw(st.booleans()) else {}
        if draw(st.booleans()):
            fields["content"]["content_args"] = {"strip": False}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


# After a whitespace lead: a literal, then what string tests cannot decide (a named group, a class, a lazy run and
# a lookahead: glm-4.5's tool-call open), or a plain literal / lookahead, so that modes mixing them are drawn
LIT_TAILS = ["<a>", "<a>(?P<g>[ab]+)", r"<b>\s*(?P<g>[^\n<]+?)\s*(?=<c>|\n)", r"(?:<x>|<y>)\s*", "<c>[^<]*",
             "(?=<d>)", "<ab>"]
LIT_TEXT_PIECES = ["<a>", "ab", "b", "<b>", " name", "\n", "<c>", "<x>", "<y>", "<d>", "</e>", "<ab>", " ", "  \n ",
                   "\xa0", "\u3000", "\t", "x", "<", "é"]


@st.composite
def literal_led_templates(draw):
    """Templates whose mode outside regions watches patterns that are each a whitespace lead and a literal,
    some followed by what only `regex` decides (`WideFinder.lits`)."""
    tails = draw(st.lists(st.sampled_from(LIT_TAILS), min_size=2, max_size=3, unique=True)
                 .filter(lambda ts: any("(?P<g>" in x or "[^<]" in x for x in ts)))  # (else `_shaped`'s mode)
    fields = {}
    closed = "(?P<g>" not in tails[-1] and draw(st.booleans())  # (the implicit field's close: no capture)
    for k, tail in enumerate(tails[:-1] if closed else tails):
        field = {"open_pattern": draw(st.sampled_from([r"\s*", r"\s+"])) + tail,
                 "close_pattern": draw(st.sampled_from([r"\s*</e>\s*", "</e>", r"\s*(?=<a>)|\s*</e>"])),
                 "content_args": {"strip": False}}
        if "(?P<g>" in tail:
            field["transform"] = {"g": "{g}", "c": "{content}"}
        fields[f"f{k}"] = field
    if len(fields) < len(tails):
        fields["content"] = {"close_pattern": r"\s*" + tails[-1], "repeats": True}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


def glm45_generation(name: str, sep: str, value: str, calls: int) -> str:
    """A generation in glm-4.5's format: reasoning, `calls` tool calls named `name` (each after `sep`, with
    `sep` before its first value too, and that value `value`), an answer, the end token."""
    call = (f"{sep}<tool_call>{name}\n<arg_key>city</arg_key>{sep}<arg_value>{value}</arg_value>\n"
            f"<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>")
    return "<think>plan it</think>\nLet me look." + call * calls + "\nDone.<|user|>"


# (name, sep, value) for `glm45_generation`: ASCII or not (regex's \s takes U+00A0, re.ASCII's does not), a
# name too long for the tool-call open's `backtrack.SpanBound` span
GLM45_CALLS = [(name, sep, value) for name in ["get_weather", " get_weather ", "wétter", "x" * 120]
               for sep in ["\n", " \xa0", ""] for value in ["Paris", "\u6771\u4eac", '{"a": 1}']]


def compiles(template) -> bool:
    """chatparse refuses only templates the reference cannot run (zero-width open+close loops)."""
    try:
        chatparse.compile_template(template)
    except ValueError as e:
        if "empty string" in str(e):
            return False
        raise
    return True


