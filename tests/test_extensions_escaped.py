"""Format extension ``escaped_json_values`` (issue #17): GLM-4.5/4.7 sometimes write an argument's JSON with
escaped quotes, ``<arg_value>[{\\"id\\": \\"1\\"}]</arg_value>``, which SGLang reads as the inside of a JSON
string literal and then as JSON; with ``"escaped_json_values": true`` an xml-inline or kv-lines value that the
json value parser does not read as JSON (it raises, or keeps the text) is read the same way.

Checked against a plain-Python statement (``oracle_escaped``: ``re`` finds the tags and lines, ``json.loads``
reads each value, then ``json.loads(json.loads('"' + text + '"'))``) with hypothesis-generated texts, parsed
one-shot, streamed in random chunkings and per token, in both dialects; the JavaScript runtime runs the
``ext_escaped_json_values`` vector (tests/ext_list_templates.py ``glm47_escaped``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deps import need_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse import compile_template, parse_response
from chatparse.compiler.validate import load_template
from corpus_cases import show, strict_equal
from ext_list_templates import FAMILIES
from js_support import NODE, run_js_map, run_py_map, same_as_js
from test_extensions_more import assert_every_path, every_path, tokenizer_for

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TAG = r"<p (?P<key>\w+)>(?P<value>.*?)</p>"


def esc_template(on: bool = True) -> dict:
    """``<x>..</x>``: xml-inline ``<p key>value</p>`` tags, json value parser with allow_non_json; ``<k>..</k>``:
    kv-lines, json value parser without it (a value it refuses fails the region); text outside: content."""
    x = {"open": "<x>", "close": "</x>", "repeats": True, "content": "xml-inline",
         "content_args": {"tag_pattern": TAG, "value_parser": {"name": "json", "args": {"allow_non_json": True}}}}
    k = {"open": "<k>", "close": "</k>", "repeats": True, "content": "kv-lines",
         "content_args": {"value_parser": {"name": "json"}}}
    if on:
        x["escaped_json_values"] = k["escaped_json_values"] = True
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"x": x, "k": k, "content": {"repeats": True, "join": "|"}}}


def _unescaped(text: str):
    inner = json.loads('"' + text + '"')  # (raises ValueError when `text` is not a string literal's inside)
    return json.loads(inner)


def oracle_escaped(text: str, on: bool = True) -> tuple:
    """The message of `esc_template(on)` for `text`, stated plainly, as `assert_every_path` wants it. A value's
    text `t` is read by ``json.loads``; with the extension, where that fails or gives a string, ``json.loads(
    json.loads('"' + t + '"'))`` wins when both steps read. Otherwise an xml-inline value that is no JSON is
    ``t.strip()``, and a kv-lines value that is no JSON fails the region (ValueError)."""
    msg: dict = {"role": "assistant"}
    error = None
    content, pos = [], 0
    for m in re.finditer(r"<([xk])>(.*?)(?:</\1>|\Z)", text, re.S):
        content.append(text[pos:m.start()].strip())
        pos = m.end()
        tag, body = m.groups()
        if tag == "x":
            items = [(g.group("key"), g.group("value")) for g in re.finditer(TAG, body, re.S)]
        else:
            items = [tuple(part.strip() for part in line.strip().split(":", 1)) for line in body.split("\n")
                     if line.strip() and ":" in line.strip()]
        value, failed = {}, False
        for key, t in items:
            try:
                v = json.loads(t)
                ok = True
            except ValueError:
                ok = False
            if on and (not ok or isinstance(v, str)):
                try:
                    v, ok = _unescaped(t), True
                except ValueError:
                    pass
            if not ok:
                if tag == "k":
                    failed = True
                    break
                v = t.strip()
            value[key] = v
        if failed:
            error = error or "ValueError"
            continue
        msg.setdefault(tag, []).append(value)
    content.append(text[pos:].strip())
    content = [c for c in content if c]
    if content:
        msg["content"] = "|".join(content)
    return msg, error


json_values = st.recursive(
    st.one_of(st.integers(-9, 99), st.booleans(), st.none(), st.text('ab"\\é/ \n', max_size=4)),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["k", "é"]), inner, max_size=2)),
    max_leaves=4)
# a value's text: JSON, JSON escaped as a model escapes it (a JSON string's inside), or bits of neither
value_texts = st.one_of(
    json_values.map(json.dumps),
    json_values.map(lambda v: json.dumps(json.dumps(v))[1:-1]),
    json_values.map(lambda v: json.dumps(json.dumps(v, ensure_ascii=False), ensure_ascii=False)[1:-1]),
    st.lists(st.sampled_from(['\\"', "\\", "\\n", "\\u00e9", "\\ud83c", '"', "[", "{", "1", "x", " ", "\t", "]"]),
             max_size=6).map("".join))


def _render(regions: list) -> str:
    out = []
    for tag, items in regions:
        if tag == "x":
            out.append("<x>" + " ".join(f"<p {k}>{v}</p>" for k, v in items) + "</x>")
        elif tag == "k":
            out.append("<k>" + "\n".join(f"{k}: {v}" for k, v in items) + "</k>")
        else:
            out.append(tag)
    return "".join(out)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["x", "k", "text "]),
                          st.lists(st.tuples(st.sampled_from(["a", "b", "é"]), value_texts), max_size=3)), max_size=3),
       st.booleans(), st.randoms(use_true_random=False))
def test_escaped_json_values_equal_the_statement(regions, on, rng):
    regions = [(tag, [(k, v) for k, v in items if "<" not in v and ">" not in v and (tag != "k" or "\n" not in v)])
               for tag, items in regions]
    text = _render(regions)
    tok = tokenizer_for("escaped", ['<x><p a>[{\\"k\\": \\"v\\"}]</p> <p b>"s"</p></x><k>a: {\\"x\\": 1}\nb: 2</k>'])
    assert_every_path(esc_template(on), text, oracle_escaped(text, on), rng, tok, prefix="<A>")


def test_only_text_that_is_not_json_changes():
    t = esc_template()
    got = parse_response('<x><p a>"[1]"</p><p b> [1] </p><p c>[\\"s\\"]</p><p d>"\\"x\\""</p><p e>\\"[1]\\"</p></x>',
                         t, prefix="<A>")
    assert got["x"] == [{"a": "[1]", "b": [1], "c": ["s"], "d": '"x"', "e": "[1]"}]
    # the inside of a string literal that is not JSON, or no string literal at all: the value parser's outcome
    got = parse_response("<x><p a>\\q</p><p b>a\\nb</p><p c>x\n\\\"</p></x>", t, prefix="<A>")
    assert got["x"] == [{"a": "\\q", "b": "a\\nb", "c": 'x\n\\"'}]


def test_a_string_nested_deeper_than_512_stays_text():
    t = esc_template()
    ok = "[" * 512 + '"s"' + "]" * 512
    deep = "[" * 513 + '"s"' + "]" * 513
    got = parse_response(f"<x><p a>{json.dumps(ok)[1:-1]} </p><p b>{json.dumps(deep)[1:-1]} </p></x>", t, prefix="<A>")
    assert got["x"][0]["a"] == json.loads(ok)
    assert got["x"][0]["b"] == json.dumps(deep)[1:-1]  # (the escaped text, as the value parser kept it)


# ============================================================================================== family and vector

def test_the_glm47_output_parses_as_sglang_parses_it_on_every_path():
    import random

    template, cases, _ = FAMILIES["glm47_escaped"]
    (_, prefix, output, tools, message), = cases
    tok = tokenizer_for("glm_escaped", [prefix + output])
    for path, got in every_path(template, output, random.Random(0), tok, prefix=prefix, tools=tools):
        assert got[0] == "ok" and strict_equal(got[1], message), (path, show(got))
    base = {**template, "fields": {**template["fields"], "tool_calls": {
        k: v for k, v in template["fields"]["tool_calls"].items() if k != "escaped_json_values"}}}
    del base["fields"]["kv"]
    from transformers.utils.chat_parsing import parse_response as reference  # without the key: the reference's text

    assert reference(output, base, prefix=prefix, tools=tools) == parse_response(output, base, prefix=prefix, tools=tools)
    assert isinstance(parse_response(output, base, prefix=prefix)["tool_calls"][0]["function"]["arguments"]["todos"], str)


def test_the_vector_exists_and_passes_in_node(tmp_path):
    files = [ROOT / "tests" / "vectors" / f"ext_escaped_json_values.{x}" for x in ("json", "cpt")]
    assert all(f.exists() for f in files)
    need_program("node", "the JavaScript reader")
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and "(1 files)" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


# ============================================================================================== keys, refusals, docs

def test_key_is_validated_and_listed():
    spec = load_template(esc_template())
    assert spec["version"] == 2 and spec["extensions"] == ["escaped_json_values"]
    assert load_template(esc_template(False))["version"] == 1
    off = esc_template(False)
    off["fields"]["x"]["escaped_json_values"] = False
    assert load_template(off) == load_template(esc_template(False))
    for field, message in (({"content": "json"}, "needs 'content' xml-inline or kv-lines"),
                           ({"content": "kv-lines"}, "with a 'value_parser' named 'json'"),
                           ({"content": "kv-lines", "content_args": {"value_parser": {"name": "text"}}}, "named 'json'"),
                           ({"content": "kv-lines", "content_args": {"value_parser": {"name": "json"}},
                             "escaped_json_values": "yes"}, "'escaped_json_values' must be a bool, got str")):
        spec = {"start_anchor": "<A>", "fields": {"v": {"open": "<v>", "escaped_json_values": True, **field}}}
        with pytest.raises(ValueError, match=re.escape("Field 'v': ") + ".*" + re.escape(message)):
            load_template(spec)


def test_refused_by_the_reference_by_grammar_export_and_by_a_reader_without_it(monkeypatch):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import loads

    with pytest.raises(ValueError, match="unknown keys"):
        Reference(esc_template(), prefix="")
    with pytest.raises(ValueError, match="grammar export is not supported for format extension 'escaped_json_values'"):
        compile_template(esc_template()).grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    data = dumps(compile_template(esc_template()).raw_tables)
    monkeypatch.delitem(extensions.EXTENSIONS, "escaped_json_values")
    with pytest.raises(ValueError, match="table uses format extension 'escaped_json_values', which this reader"):
        loads(data)


def test_documented_and_in_the_js_runtime():
    assert "#### `escaped_json_values`" in (ROOT / "FORMAT.md").read_text(encoding="utf-8")
    assert "* `escaped_json_values`" in (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    assert "  escaped_json_values: {" in (ROOT / "js" / "chatparse.mjs").read_text(encoding="utf-8")


def test_javascript_equals_python_on_generated_texts(tmp_path):
    """The compiled `esc_template` in the JavaScript runtime (`loadTables`, `parseResponse`) against Python's
    `parse_response` on generated texts: the same message (numbers compared as JavaScript holds them) or the same
    exception class and text. One node process for all."""
    need_program("node", "the JavaScript reader")
    from chatparse.compiler.writer import dumps

    texts = []

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.lists(st.tuples(st.sampled_from(["x", "k", "text "]),
                              st.lists(st.tuples(st.sampled_from(["a", "b"]), value_texts), max_size=3)), max_size=3))
    def collect(regions):
        texts.append(_render([(tag, [(k, v) for k, v in items if "<" not in v and ">" not in v
                                     and (tag != "k" or "\n" not in v)]) for tag, items in regions]))

    collect()
    want = run_py_map(lambda text: parse_response(text, esc_template(), prefix="<A>"), texts)
    got = run_js_map(tmp_path, "parseResponse(x, tables, { prefix: '<A>' })", texts,
                     imports="loadTables, parseResponse", tables=dumps(compile_template(esc_template()).raw_tables))
    assert len(texts) >= 100
    for text, w, g in zip(texts, want, got):
        assert same_as_js(w, g), (text, w, g)
