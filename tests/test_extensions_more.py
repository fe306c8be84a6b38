"""Format extensions for the real-output corpus's last `needs:` cases (issue #17): ``optional_placeholders``,
``content_fallback``, ``unwrap_pattern``.

Each is checked against a plain-Python statement of its semantics (the ``oracle_*`` functions: ``re`` cuts the
text into regions, ``json.loads`` parses bodies, plain dict code builds the value) with hypothesis-generated
texts, parsed one-shot, streamed in random chunkings and per token (a tokenizer trained here), in both dialects:
one-shot == streamed == per-token == the statement. The JavaScript runtime runs the same templates through the
``ext_<name>`` vectors (tests/ext_templates.py, tests/make_vectors.py).
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import ResponseParser, compile_template, parse_response
from chatparse.compiler.validate import load_template
from corpus_cases import show, strict_equal
from harness import random_chunks

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
DIALECTS = ("transformers", "vllm")
_TOKENIZERS: dict = {}


def tokenizer_for(key: str, corpus: list):
    """A byte-level BPE trained here on `corpus` (delimiters split across ordinary tokens), once per `key`."""
    if key not in _TOKENIZERS:
        tokenizers = need("tokenizers")
        tok = tokenizers.Tokenizer(tokenizers.models.BPE())
        tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tokenizers.decoders.ByteLevel()
        tok.train_from_iterator(corpus * 3, trainer=tokenizers.trainers.BpeTrainer(
            vocab_size=400, initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
        _TOKENIZERS[key] = tok
    return _TOKENIZERS[key]


def outcome(fn):
    try:
        return ("ok", fn())
    except (ValueError, KeyError, TypeError) as e:
        return ("error", type(e).__name__)


def every_path(template: dict, text: str, rng: random.Random, tok=None, prefix: str = "", tools=None) -> list:
    """The message (or error class) of `text` one-shot, streamed in one feed, in random chunks and per token
    (with `tok`), in both dialects: a list of ``(path, outcome)``."""
    out = []
    for dialect in DIALECTS:
        out.append((f"{dialect} one-shot", outcome(
            lambda: parse_response(text, template, prefix=prefix, tools=tools, dialect=dialect))))
        for n, chunks in enumerate(([text], random_chunks(text, rng, 5), list(text))):
            def streamed():
                p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
                for c in chunks:
                    p.feed(c)
                return p.finalize()[0]
            out.append((f"{dialect} streamed {n}", outcome(streamed)))
        if tok is not None:
            ids = tok.encode(text).ids
            assert tok.decode(ids) == text

            def tokens():
                p = chatparse.bind(template, tok).parser(prefix=prefix, tools=tools, dialect=dialect)
                for i in ids:
                    p.feed_tokens(i)
                return p.finalize()[0]
            out.append((f"{dialect} per token", outcome(tokens)))
    return out


def assert_every_path(template: dict, text: str, want: tuple, rng: random.Random, tok=None, **kw) -> None:
    """`want` is ``(message without the regions that fail, class name of the first failure or None)``: a parse
    that raises gives that class, except streamed in the vllm dialect (a failed region is a region_malformed
    event there, and the message is the rest)."""
    message, error = want
    for path, got in every_path(template, text, rng, tok, **kw):
        if error is not None and not (path.startswith("vllm") and "one-shot" not in path):
            assert got == ("error", error), (path, text, show(got))
        else:
            assert got[0] == "ok" and strict_equal(_sorted(got[1]), _sorted(message)), (path, text, show(got),
                                                                                          show(message))


def _sorted(message: dict) -> dict:
    """The message with its keys in sorted order (the statements do not follow the order fields are stored)."""
    return {k: message[k] for k in sorted(message)}


# ============================================================================================== optional_placeholders

OPT_OPEN = r"<c (?P<name>[a-z]+)(?: id=(?P<id>[a-z0-9]*))?(?: tag=(?P<tag>[a-z]+))?>"
OPT_TRANSFORM = {"id": "{id}", "type": "function", "function": {"name": "{name}", "arguments": "{content}"},
                 "tag": "{tag.x}", "names": ["{name}"]}


def opt_template(optional=("id", "tag"), transform=OPT_TRANSFORM) -> dict:
    calls = {"open_pattern": OPT_OPEN, "close": "</c>", "repeats": True, "content": "json", "transform": transform}
    if optional is not None:
        calls["optional_placeholders"] = list(optional) if isinstance(optional, tuple) else optional
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"tool_calls": calls, "content": {}}}


def oracle_optional(text: str, optional: tuple) -> tuple:
    """The message of `opt_template(optional)` for `text` (prose, then ``<c name[ id=..][ tag=..]>JSON</c>``
    calls), stated plainly, as `assert_every_path` wants it: the transform instantiated by hand in its key
    order, an entry whose placeholder root is a listed group that did not take part left out; an unlisted one
    that did not take part fails the call with the base format's KeyError, and ``{tag.x}`` of a tag that took
    part with its ValueError (a string has no keys)."""
    msg: dict = {"role": "assistant"}
    error = None
    first = text.find("<c ")
    if text[:first if first >= 0 else len(text)].strip():
        msg["content"] = text[:first if first >= 0 else len(text)].strip()
    for m in re.finditer(OPT_OPEN + r"(.*?)</c>", text, re.S):
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        value: dict = {}
        full = {"id": groups.get("id"), "type": "function", "names": [groups["name"]],
                "function": {"name": groups["name"], "arguments": json.loads(m.group(m.lastindex))}}
        failed = None
        for key, root in (("id", "id"), ("type", None), ("function", None), ("tag", "tag"), ("names", None)):
            if root is not None and root not in groups:
                if root in optional:
                    continue
                failed = "KeyError"
            elif key == "tag":
                failed = "ValueError"
            if failed:
                break
            value[key] = full[key]
        if failed:
            error = error or failed
        else:
            msg.setdefault("tool_calls", []).append(value)
    return msg, error


json_args = st.dictionaries(st.sampled_from(["a", "b", "ü"]), st.one_of(st.integers(-5, 5), st.text("xy z", max_size=3),
                                                                        st.none()), max_size=2)
opt_calls = st.lists(st.tuples(st.sampled_from(["f", "get", "zz"]), st.one_of(st.none(), st.text("ab1", max_size=3)),
                               st.booleans(), json_args), max_size=3)


def render_opt(prose: str, calls: list) -> str:
    out = prose
    for name, cid, tag, args in calls:
        out += f"<c {name}" + ("" if cid is None else f" id={cid}") + (" tag=t" if tag else "") + ">"
        out += json.dumps(args, ensure_ascii=False) + "</c>"
    return out


@SETTINGS
@given(st.text("ab <>", max_size=6), opt_calls, st.sampled_from([("id", "tag"), ("id",), ("tag",)]),
       st.randoms(use_true_random=False))
def test_optional_placeholders_equal_the_statement(prose, calls, optional, rng):
    text = render_opt(prose, calls)
    tok = tokenizer_for("opt", [render_opt("ab", [("f", "a1", True, {"a": 1}), ("get", None, False, {})])])
    assert_every_path(opt_template(optional), text, oracle_optional(text, optional), rng, tok)


def test_optional_placeholders_only_leave_out_dict_entries():
    """A listed placeholder in a list, or as the whole transform, raises as in the base format (KeyError, the
    reference's message); element keys of transform_each are in scope before captures."""
    text = "<c f>{}</c>"
    with pytest.raises(KeyError, match="transform placeholder '{id}' is not defined"):
        parse_response(text, opt_template(transform={"ids": ["{id}"]}), prefix="<A>")
    with pytest.raises(KeyError, match="transform placeholder '{id}' is not defined"):
        parse_response(text, opt_template(transform="{id}"), prefix="<A>")
    assert parse_response("<c f id=7>{}</c>", opt_template(transform="{id}"), prefix="<A>")["tool_calls"] == ["7"]
    each = opt_template(transform={"id": "{id}", "n": "{n}"})
    each["fields"]["tool_calls"]["transform_each"] = True
    got = parse_response('<c f>[{"n": 1}, {"n": 2, "id": "e"}]</c><c f id=c>[{"n": 3}]</c>', each, prefix="<A>")
    assert got["tool_calls"] == [[{"n": 1}, {"id": "e", "n": 2}], [{"id": "c", "n": 3}]]


def test_optional_placeholders_key_is_validated_and_listed():
    spec = load_template(opt_template())
    assert spec["version"] == 2 and spec["extensions"] == ["optional_placeholders"]
    assert spec["fields"][0]["optional_placeholders"] == ["id", "tag"]
    assert load_template(opt_template([])) == load_template(opt_template(None))  # the default: not a use
    for bad, message in ((["nope"], "names 'nope', which is not a named group of the field's 'open_pattern'"),
                         ("id", "must be a list of named groups"), (["id", "id"], "lists a name twice"),
                         ([1], "must be a list of named groups")):
        with pytest.raises(ValueError, match=re.escape(f"Field 'tool_calls': 'optional_placeholders' {message}")):
            load_template(opt_template(bad))
    literal = {"start_anchor": "<A>", "fields": {"c": {"open": "<c>", "transform": {"a": "{content}"},
                                                       "optional_placeholders": ["content"]}}}
    with pytest.raises(ValueError, match="not a named group"):
        load_template(literal)


def test_optional_placeholders_refused_by_the_reference_and_by_a_reader_without_it(monkeypatch):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import loads

    with pytest.raises(ValueError, match="unknown keys"):
        Reference(opt_template(), prefix="")
    base = opt_template(None)  # without the key, both give the base format's KeyError
    assert outcome(lambda: parse_response("<c f>{}</c>", base, prefix="<A>")) == ("error", "KeyError")
    with pytest.raises(ValueError, match="grammar export is not supported for format extension 'optional_placeh"):
        compile_template(opt_template()).grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    data = dumps(compile_template(opt_template()).raw_tables)
    monkeypatch.delitem(extensions.EXTENSIONS, "optional_placeholders")
    with pytest.raises(ValueError, match="table uses format extension 'optional_placeholders', which this reader"):
        loads(data)


# ============================================================================================== content_fallback

TAG = r"<p>(?P<key>\w+)=(?P<value>[^<]*)</p>"


def fb_template(fallback) -> dict:
    calls = {"open": "<c>", "close": "</c>", "repeats": True, "content": "json", "content_fallback": fallback}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>", "fields": {"v": calls, "content": {}}}


FALLBACKS = {"int_then_tags": [{"content": "int"}, {"content": "xml-inline", "content_args": {"tag_pattern": TAG}}],
             "int": [{"content": "int"}]}
PLAIN = {"int": int, "xml-inline": lambda body: dict(re.findall(r"<p>(\w+)=([^<]*)</p>", body))}


def oracle_fallback(text: str, fallback: list) -> tuple:
    """The message of `fb_template(fallback)` for `text` (``<c>body</c>`` regions, no text outside), stated
    plainly: each body through ``json.loads``, then each fallback parser (``int``; the tag regex read with
    ``re.findall``) in order, the first that does not raise giving the value; when all raise, the region fails
    with ``json.loads``'s error class (the field's own parser's)."""
    msg: dict = {"role": "assistant"}
    error = None
    for body in re.findall(r"<c>(.*?)</c>", text, re.S):
        parsers = [json.loads] + [PLAIN[entry["content"]] for entry in fallback]
        for parse in parsers:
            try:
                value = parse(body)
            except ValueError:
                continue
            msg.setdefault("v", []).append(value)
            break
        else:
            error = error or "ValueError"
    return msg, error


bodies = st.one_of(
    st.builds(json.dumps, st.one_of(st.integers(-9, 99), st.dictionaries(st.sampled_from("ab"), st.integers(0, 3)),
                                    st.lists(st.booleans(), max_size=2))),
    st.sampled_from([" 1_000 ", "+7", "0x1", "1e3", "nan", "", " ", "{bad}", "tru"]),
    st.lists(st.tuples(st.sampled_from(["a", "k", "ü"]), st.text("xyz1 ", max_size=3)), max_size=2).map(
        lambda kv: " ".join(f"<p>{k}={v}</p>" for k, v in kv)),
    st.text("<p>=a1 {}", max_size=8))


@SETTINGS
@given(st.lists(bodies, max_size=3), st.sampled_from(sorted(FALLBACKS)), st.randoms(use_true_random=False))
def test_content_fallback_equals_the_statement(regions, which, rng):
    text = "".join(f"<c>{b}</c>" for b in regions if "</c>" not in b)
    tok = tokenizer_for("fallback", ["<c><p>a=1</p> {\"a\": 1}</c><c>1_000</c>"])
    want = oracle_fallback(text, FALLBACKS[which])
    if want[1] is not None:  # the error is the field's own parser's, as without the key (not int's)
        failing = next(b for b in re.findall(r"<c>(.*?)</c>", text, re.S)
                       if oracle_fallback(f"<c>{b}</c>", FALLBACKS[which])[1] is not None)
        with pytest.raises(ValueError) as without:
            parse_response(f"<c>{failing}</c>", fb_template([]), prefix="<A>")
        with pytest.raises(ValueError) as e:
            parse_response(text, fb_template(FALLBACKS[which]), prefix="<A>")
        assert (type(e.value), str(e.value)) == (type(without.value), str(without.value))
    assert_every_path(fb_template(FALLBACKS[which]), text, want, rng, tok, prefix="<A>")


def test_content_fallback_key_is_validated_and_listed():
    spec = load_template(fb_template([{"content": "int"}]))
    assert spec["version"] == 2 and spec["extensions"] == ["content_fallback"]
    assert spec["fields"][0]["content_fallback"] == [{"content": "int", "content_args": {}}]
    assert load_template(fb_template([])) == load_template({**fb_template([]), "fields": {
        "v": {"open": "<c>", "close": "</c>", "repeats": True, "content": "json"}, "content": {}}})
    for bad, message in (({"content": "int"}, "must be a list"), ([{"content": "yaml"}], "entry 0 names content "
                         "parser 'yaml'"), ([{"content": "python-calls"}], "entry 0 names content parser 'python-calls'"),
                         ([{"content": "int", "strip": True}], "entry 0 must be a dict with 'content'"),
                         (["int"], "entry 0 must be a dict")):
        with pytest.raises(ValueError, match=re.escape(f"Field 'v': 'content_fallback' {message}")):
            load_template(fb_template(bad))


def test_content_fallback_refused_by_the_reference_and_by_a_reader_without_it(monkeypatch):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import loads

    with pytest.raises(ValueError, match="unknown keys"):
        Reference(fb_template(FALLBACKS["int"]), prefix="")
    data = dumps(compile_template(fb_template(FALLBACKS["int"])).raw_tables)
    monkeypatch.delitem(extensions.EXTENSIONS, "content_fallback")
    with pytest.raises(ValueError, match="table uses format extension 'content_fallback', which this reader"):
        loads(data)


def test_content_fallback_with_on_error_recovers_only_what_every_parser_refuses():
    t = fb_template(FALLBACKS["int"])
    t["fields"]["v"]["on_error"] = "content"
    assert parse_response("<c>1_0</c><c>x</c>", t, prefix="<A>") == {"role": "assistant", "v": [10],
                                                                     "content": "<c>x</c>"}


# ============================================================================================== unwrap_pattern

CITATION = r"<co(?:: [^>]*)?>(?P<keep>.*?)</co: [^>]*>"
REFS = r"\[\d+\]"


def uw_template(pattern) -> dict:
    """Reasoning ``<r>..</r>`` and implicit content, both unwrapped by `pattern`; content joined by '|' around
    ``<t>..</t>`` tool text (which is not unwrapped)."""
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"reasoning_content": {"open": "<r>", "close": "</r>", "unwrap_pattern": pattern},
                       "tool": {"open": "<t>", "close": "</t>"},
                       "content": {"repeats": True, "join": "|", "unwrap_pattern": pattern}}}


def oracle_unwrap(text: str, pattern: str) -> dict:
    """The message of `uw_template(pattern)` for `text`, stated plainly: ``<r>``/``<t>`` regions cut by
    ``str.find``, text between them is content; reasoning and content bodies rewritten by Python's ``re.sub``
    (each match -> its group ``keep``, or nothing), then stripped; empty values left out."""
    msg: dict = {"role": "assistant"}
    rx = re.compile(pattern, re.S)
    fix = lambda body: rx.sub(lambda m: (m.groupdict().get("keep") or ""), body).strip()  # noqa: E731
    content, i = [], 0
    while True:
        opens = [(text.find(tag, i), tag) for tag in ("<r>", "<t>") if text.find(tag, i) >= 0]
        at, tag = min(opens) if opens else (len(text), None)
        if text[i:at]:
            content.append(fix(text[i:at]))
        if tag is None:
            break
        end = text.find("</" + tag[1:], at)
        body = text[at + 3:end if end >= 0 else len(text)]
        if tag == "<r>":
            msg["reasoning_content"] = fix(body)
        else:
            msg["tool"] = body.strip()
        i = len(text) if end < 0 else end + 4
    if content:
        msg["content"] = "|".join(content)
    return {k: v for k, v in msg.items() if v != ""}


cited = st.lists(st.one_of(st.text("ab <>:", max_size=4), st.sampled_from(["<co>", "</co: 0:[1]>", "<co: 2,1>",
                                                                            "</co: >", "[12]", "[x]", "🌈", "<code>"])),
                 max_size=8).map("".join)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["", "<r>", "<t>"]), cited), max_size=4), st.sampled_from([CITATION, REFS]),
       st.randoms(use_true_random=False))
def test_unwrap_pattern_equals_the_statement(parts, pattern, rng):
    text = "".join(tag + body + ("</" + tag[1:] if tag else "") for tag, body in parts)
    if "<r><r>" in text or "<t><t>" in text:
        return
    tok = tokenizer_for("unwrap", ["<r>x <co>a</co: 0:[1]></r>b [1]<t>c</t>"])
    try:
        want = oracle_unwrap(text, pattern)
    except ValueError:
        return
    assert_every_path(uw_template(pattern), text, (want, None), rng, tok, prefix="<A>")


def test_unwrap_pattern_keeps_empty_matches_and_unmatched_markup():
    t = uw_template("x*")
    assert parse_response("axxb", t, prefix="<A>")["content"] == "ab"
    t = uw_template(CITATION)
    assert parse_response("a <co>b </co: x", t, prefix="<A>")["content"] == "a <co>b </co: x"
    assert parse_response("<code>a</code> <co>b</co: 1:[2]>", t, prefix="<A>")["content"] == "<code>a</code> b"


def test_unwrap_pattern_key_is_validated_and_refused_by_readers_without_it(monkeypatch):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import loads

    spec = load_template(uw_template(CITATION))
    assert spec["version"] == 2 and spec["extensions"] == ["unwrap_pattern"]
    with pytest.raises(ValueError, match=re.escape("Field 'reasoning_content': invalid 'unwrap_pattern' regex")):
        load_template(uw_template("(a"))
    with pytest.raises(ValueError, match=re.escape("Field 'reasoning_content': 'unwrap_pattern' must be a non-empty")):
        load_template(uw_template(""))
    with pytest.raises(ValueError, match="unknown keys"):
        Reference(uw_template(CITATION), prefix="")
    data = dumps(compile_template(uw_template(CITATION)).raw_tables)
    monkeypatch.delitem(extensions.EXTENSIONS, "unwrap_pattern")
    with pytest.raises(ValueError, match="table uses format extension 'unwrap_pattern', which this reader"):
        loads(data)


# ============================================================================================== documentation


@pytest.mark.parametrize("name", ["optional_placeholders", "content_fallback", "unwrap_pattern"])
def test_each_new_extension_is_documented_and_in_the_js_runtime(name):
    assert f"#### `{name}`" in (ROOT / "FORMAT.md").read_text(encoding="utf-8")
    assert f"* `{name}`" in (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    assert f"  {name}: {{" in (ROOT / "js" / "chatparse.mjs").read_text(encoding="utf-8")
