"""Format extensions for calls given as lists (issue #17): the ``json-values`` content parser (format extension
``json_values``: comma-separated JSON values, qwen3's two calls in one ``<tool_call>`` block) and ``flatten``
(a repeated field extended by a region's list: lfm2's blocks of Python calls).

Each is checked against a plain-Python statement of its semantics (the ``oracle_*`` functions: ``re`` cuts
the text into regions, ``json.loads('[' + body + ']')`` reads a run of values, plain list code stores them)
with hypothesis-generated texts, parsed one-shot, streamed in random chunkings and per token (a tokenizer
trained here), in both dialects. The JavaScript runtime runs the qwen3 template of tests/ext_list_templates.py
(json-values, flatten) through the ``ext_json_values`` vector, and `parseJsonValues` is compared with the Python
parser on generated bodies.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deps import need_program
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from chatparse import ResponseParser, compile_template, parse_response
from chatparse.compiler.validate import load_template
from chatparse.runtime.values.json_values import MAX_DEPTH, parse_json_values
from corpus_cases import show, strict_equal
from ext_list_templates import EXTRA_CASES, FAMILIES, VECTORS
from js_support import NODE, run_js_map, run_py_map, same_as_js
from test_extensions_more import assert_every_path, every_path, tokenizer_for

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ============================================================================================== the statement

def lists_template(flatten: bool) -> dict:
    """``<c>..</c>``: json-values, repeated (flattened or not); ``<n>..</n>``: json, repeated, flattened; text
    outside: content, stripped, joined with '|'."""
    calls = {"open": "<c>", "close": "</c>", "repeats": True, "content": "json-values"}
    if flatten:
        calls["flatten"] = True
    return {"defaults": {"role": "assistant"}, "start_anchor": "<A>",
            "fields": {"c": calls, "n": {"open": "<n>", "close": "</n>", "repeats": True, "content": "json",
                                         "flatten": True},
                       "content": {"repeats": True, "join": "|"}}}


def oracle_lists(text: str, flatten: bool) -> tuple:
    """The message of `lists_template(flatten)` for `text`, stated plainly, as `assert_every_path` wants it:
    regions cut by ``re.finditer`` (the text between is content: each non-empty piece stripped - a piece of
    whitespace stays, as an empty string - joined with '|', left out when that is empty, as the reference
    does: ``' <c>0</c>0'`` has content ``'|0'``, ``'<c>0</c>0'`` ``'0'``); a ``<c>`` body's values are ``json.loads('[' + body + ']')`` when that is a non-empty list (else the
    region fails with ValueError); a ``<n>`` body is ``json.loads(body)``. The field's list is extended by a list
    value when the field flattens, else the value is one more element."""
    msg: dict = {"role": "assistant"}
    error = None
    content = []
    pos = 0
    for m in re.finditer(r"<([cn])>(.*?)(?:</\1>|\Z)", text, re.S):
        content.append(text[pos:m.start()])
        pos = m.end()
        tag, body = m.group(1), m.group(2)
        try:
            if tag == "c":
                value = json.loads("[" + body + "]")
                if not value:
                    raise ValueError("no value")
            else:
                value = json.loads(body)
        except ValueError:
            error = error or "ValueError"
            continue
        target = msg.setdefault(tag, [])
        if isinstance(value, list) and (tag == "n" or flatten):
            target.extend(value)
        else:
            target.append(value)
    content.append(text[pos:])
    joined = "|".join(c.strip() for c in content if c)
    if joined:
        msg["content"] = joined
    return {k: v for k, v in msg.items() if v != []}, error


json_scalars = st.one_of(st.integers(-99, 99), st.booleans(), st.none(), st.text("ab,]}\"\\é🌈 ", max_size=4),
                         st.floats(allow_nan=False, allow_infinity=False, width=16))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["name", "arguments", "k,", "é"]), inner, max_size=3)),
    max_leaves=6)
separators = st.sampled_from([",", ", ", " ,\n", "\t,\r", ",,", " ", "", ";"])
# what a body is made of: JSON texts, separators and bits that are not JSON (or only Python's JSON)
pieces = st.one_of(json_values.map(lambda v: json.dumps(v, ensure_ascii=False)), separators,
                   st.sampled_from(["NaN", "Infinity", "-Infinity", "1.", "01", "[1,]", "{bad}", "\"open", " ", "[]", "{}",
                                    "tru", "1e5", "\"a\\\"b\""]))
bodies = st.one_of(
    st.lists(json_values.map(lambda v: json.dumps(v, ensure_ascii=False)), min_size=1, max_size=3).flatmap(
        lambda vs: st.lists(separators, min_size=len(vs) - 1, max_size=len(vs) - 1).map(
            lambda seps: vs[0] + "".join(s + v for s, v in zip(seps, vs[1:])))),
    st.lists(pieces, max_size=5).map("".join))


def _render(parts: list) -> str:
    return "".join(f"<{tag}>{body}</{tag}>" if tag else body for tag, body in parts)


TOKENIZER_CORPUS = ['x <c>{"name": "f", "arguments": {"a": 1}}, {"name": "g"}</c> y <n>[1, 2]</n><n>3</n>']


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["", "c", "c", "n"]), bodies), max_size=4), st.booleans(),
       st.randoms(use_true_random=False))
@example([("", " "), ("c", "0"), ("", "0")], False, random.Random(0))  # a piece of whitespace joins as ''
def test_json_values_and_flatten_equal_the_statement(parts, flatten, rng):
    parts = [(tag, body) for tag, body in parts if "<" not in body]
    text = _render(parts)
    tok = tokenizer_for("lists", TOKENIZER_CORPUS)
    assert_every_path(lists_template(flatten), text, oracle_lists(text, flatten), rng, tok, prefix="<A>")


def test_a_region_value_that_is_not_a_list_is_one_element_and_an_empty_list_adds_nothing():
    t = lists_template(True)
    got = parse_response('<n>[]</n><n>"s"</n><n>[[1], {"a": []}]</n><n>{}</n><c>[], 2</c><c>[]</c>', t, prefix="<A>")
    assert got == {"role": "assistant", "n": ["s", [1], {"a": []}, {}], "c": [[], 2, []]}
    assert parse_response("<n>[]</n>", t, prefix="<A>") == {"role": "assistant"}  # (an empty field is left out)
    t = lists_template(False)
    assert parse_response("<c>1, [2]</c><c>3</c>", t, prefix="<A>")["c"] == [[1, [2]], [3]]


def test_region_close_events_carry_the_region_value_not_the_field_list():
    p = ResponseParser(lists_template(True), prefix="<A>")
    events = p.feed("<n>[1, 2]</n><n>[3]</n>") + p.finalize()[1]
    assert [e["value"] for e in events if e["type"] == "region_close"] == [[1, 2], [3]]


# ============================================================================================== json-values itself

def test_json_values_reads_what_raw_decode_reads():
    assert parse_json_values(' {"a": 1} ,\n[2, "x,]"]\t') == [{"a": 1}, [2, "x,]"]]
    assert parse_json_values('"a", NaN, -Infinity, 1e2, "\\ud83c\\udf08"')[3:] == [100.0, "🌈"]
    assert parse_json_values('{"k": 1, "k": 2, "j": 0}') == [{"k": 2, "j": 0}]
    for body, message in (("", "Expecting value: line 1 column 1 (char 0)"), ("1,", "Expecting value"),
                          ("1 2", "expected ',' or the end of the body at offset 2"),
                          ("1.", "expected ',' or the end of the body at offset 1"),
                          ("🌈, x", "Expecting value: line 1 column 1 (char 0)"),
                          ("1, 🌈", "Expecting value: line 1 column 4 (char 3)"),
                          ("[" * (MAX_DEPTH + 1), f"brackets nested more than {MAX_DEPTH} deep at offset {MAX_DEPTH}"),
                          ("1" * 4301, "Exceeds the limit (4300 digits)")):
        with pytest.raises(ValueError, match=re.escape("json-values: " + message)):
            parse_json_values(body)
    deep = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json_values(deep + ", " + json.dumps("[" * 600)) == [json.loads(deep), "[" * 600]


@SETTINGS
@given(bodies)
def test_json_values_equal_json_loads_of_the_body_in_brackets(body):
    try:
        want = json.loads("[" + body + "]")
    except ValueError:
        want = []
    if want:
        assert strict_equal(parse_json_values(body), want)
    else:
        with pytest.raises(ValueError, match="^json-values: "):
            parse_json_values(body)


def test_json_values_in_javascript_equal_python(tmp_path):
    """`parseJsonValues` (js/chatparse.mjs) against the Python parser on generated bodies: the same value or the
    same error message. One node process for all."""
    need_program("node", "the JavaScript reader")
    collected = []

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(bodies)
    def collect(body):
        collected.append(body)

    collect()
    collected += ["[" * (MAX_DEPTH + 1), '"[[' + "[" * MAX_DEPTH + '", ' + "[" * (MAX_DEPTH + 1), "", " ", "1 2", "🌈"]
    want = run_py_map(parse_json_values, collected, (ValueError,))
    got = run_js_map(tmp_path, "parseJsonValues(x)", collected, imports="parseJsonValues")
    for body, w, g in zip(collected, want, got):
        assert same_as_js(w, g), (body, w, g)


# ============================================================================================== families and vectors

def _family_cases():
    for name, (template, cases, _) in FAMILIES.items():
        for case, prefix, output, tools, message in cases:
            yield pytest.param(name, prefix, output, tools, message, id=f"{name}-{case}")


@pytest.mark.parametrize("name, prefix, output, tools, message", list(_family_cases()))
def test_motivating_outputs_parse_as_the_source_expects_on_every_path(name, prefix, output, tools, message):
    import random

    template = FAMILIES[name][0]
    corpus = [c[1] + c[2] for _, cases, _ in FAMILIES.values() for c in cases]
    tok = tokenizer_for("list_families", corpus)
    for path, got in every_path(template, output, random.Random(name), tok, prefix=prefix, tools=tools):
        assert got[0] == "ok" and strict_equal(got[1], message), (path, show(got), show(message))


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_extra_vector_texts_agree_on_every_path(name):
    """The vector texts (errors included): one-shot, streamed and per token give the same outcome."""
    import random

    template = FAMILIES[name][0]
    tok = tokenizer_for("list_families", [c[1] + c[2] for _, cases, _ in FAMILIES.values() for c in cases])
    for case, prefix, text, tools in EXTRA_CASES[name]:
        got = every_path(template, text, random.Random(case), tok, prefix=prefix, tools=tools)
        for dialect in ("transformers", "vllm"):
            outcomes = [o for path, o in got if path.startswith(dialect) and (dialect == "transformers"
                                                                               or "one-shot" not in path)]
            assert all(o[0] == outcomes[0][0] and (o[0] == "error" and o == outcomes[0] or strict_equal(o[1], outcomes[0][1]))
                       for o in outcomes), (case, dialect, got)


def test_the_vectors_exist_and_pass_in_node(tmp_path):
    """The ext_* vectors of tests/ext_list_templates.py (``python tests/make_vectors.py --only
    ext_json_values,ext_escaped_json_values``) through the JavaScript runtime: the same events and messages as
    Python, in both dialects."""
    files = [ROOT / "tests" / "vectors" / f"ext_{ext}.{x}" for ext in VECTORS for x in ("json", "cpt")]
    assert all(f.exists() for f in files), files
    need_program("node", "the JavaScript reader")
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(tmp_path)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and f"({len(VECTORS)} files)" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]


# ============================================================================================== keys, refusals, docs

def test_keys_are_validated_and_listed():
    spec = load_template(lists_template(True))
    assert spec["version"] == 2 and spec["extensions"] == ["flatten", "json_values"]
    assert load_template(FAMILIES["lfm2_blocks"][0])["extensions"] == ["flatten", "python_calls"]
    plain = {"start_anchor": "<A>", "fields": {"n": {"open": "<n>", "repeats": True, "content": "json"}}}
    off = {"start_anchor": "<A>", "fields": {"n": {"open": "<n>", "repeats": True, "content": "json", "flatten": False}}}
    assert load_template(off) == load_template(plain) and load_template(plain)["version"] == 1  # the default: no use
    for spec, message in (({"open": "<n>", "repeats": True, "flatten": 1}, "'flatten' must be a bool, got int"),
                          ({"open": "<n>", "flatten": True}, "'flatten' needs 'repeats': true and no 'join'"),
                          ({"open": "<n>", "repeats": True, "join": ",", "flatten": True}, "'flatten' needs 'repeats'"),
                          ({"open": "<n>", "content": "json-values", "content_args": {"strip": True}},
                           "'content_args' must be absent or {}")):
        with pytest.raises(ValueError, match=re.escape(f"Field 'n': {message}")):
            load_template({"start_anchor": "<A>", "fields": {"n": spec}})


def test_json_values_is_not_a_nested_value_parser():
    t = {"start_anchor": "<A>", "fields": {"c": {"open": "<c>", "close": "</c>", "content": "xml-inline", "content_args": {
        "tag_pattern": "<(?P<key>a)>(?P<value>.*?)</a>", "value_parser": {"name": "json-values"}}}}}
    with pytest.raises(KeyError):
        parse_response("<c><a>1, 2</a></c>", t, prefix="<A>")


@pytest.mark.parametrize("ext", ["flatten", "json_values"])
def test_refused_by_the_reference_by_grammar_export_and_by_a_reader_without_it(ext, monkeypatch):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    from chatparse.compiler.writer import dumps
    from chatparse.runtime.values import extensions
    from chatparse.runtime.tables.loader import loads

    field = {"content": "json-values"} if ext == "json_values" else {"content": "json", "flatten": True}
    only = {"start_anchor": "<A>", "fields": {"n": {"open": "<n>", "close": "</n>", "repeats": True, **field}}}
    assert load_template(only)["extensions"] == [ext]
    with pytest.raises(ValueError, match="unknown keys" if ext == "flatten" else "unknown content parser"):
        Reference(only, prefix="")
    with pytest.raises(ValueError, match=f"grammar export is not supported for format extension '{ext}'"):
        compile_template(only).grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
    data = dumps(compile_template(only).raw_tables)
    monkeypatch.delitem(extensions.EXTENSIONS, ext)
    with pytest.raises(ValueError, match=f"table uses format extension '{ext}', which this reader does not support"):
        loads(data)


def test_the_javascript_reader_refuses_a_table_with_an_extension_it_lacks(tmp_path):
    """A table listing 'flatten' given to a JS runtime without it (JS_EXTENSIONS entry removed) is refused with the
    reader's message."""
    need_program("node", "the JavaScript reader")
    from chatparse.compiler.writer import dumps

    (tmp_path / "t.cpt").write_bytes(dumps(compile_template(lists_template(True)).raw_tables))
    script = (f"import {{ JS_EXTENSIONS, loadTables }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
              "import { readFileSync } from 'node:fs';\n"
              "const data = readFileSync(process.argv[2]);\n"
              "loadTables(data);\n"
              "delete JS_EXTENSIONS.flatten;\n"
              "try { loadTables(data); console.log('loaded'); } catch (e) { console.log(e.pyType + ': ' + e.message); }\n")
    (tmp_path / "run.mjs").write_text(script)
    out = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(tmp_path / "t.cpt")], capture_output=True, text=True,
                         timeout=60)
    assert "table uses format extension 'flatten', which this reader does not support" in out.stdout, out


@pytest.mark.parametrize("name", ["json_values", "flatten"])
def test_documented_and_in_the_js_runtime(name):
    assert f"#### `{name}`" in (ROOT / "FORMAT.md").read_text(encoding="utf-8")
    assert f"* `{name}`" in (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    assert f"  {name}: {{" in (ROOT / "js" / "chatparse.mjs").read_text(encoding="utf-8")


def test_check_and_grammar_export_on_the_family_templates():
    """`chatparse check` runs on each template of tests/ext_list_templates.py, and grammar export refuses them."""
    from chatparse.authoring.checks import run_checks

    for name, (template, _, _) in FAMILIES.items():
        run_checks(template)
        with pytest.raises(ValueError, match="grammar export is not supported for format extension"):
            compile_template(template).grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])


@pytest.mark.parametrize("flatten", [True, False])
def test_javascript_equals_python_on_generated_texts(flatten, tmp_path):
    """`lists_template` compiled, in the JavaScript runtime (`loadTables`, `parseResponse`), against Python's
    `parse_response` on generated texts: the same message (numbers as JavaScript holds them; NaN/Infinity as
    text) or the same exception class and text. One node process for all."""
    need_program("node", "the JavaScript reader")
    from chatparse.compiler.writer import dumps

    texts = []

    @settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.lists(st.tuples(st.sampled_from(["", "c", "c", "n"]), bodies), max_size=4))
    def collect(parts):
        texts.append(_render([(tag, body) for tag, body in parts if "<" not in body]))

    collect()
    template = lists_template(flatten)
    want = run_py_map(lambda text: parse_response(text, template, prefix="<A>"), texts)
    got = run_js_map(tmp_path, "parseResponse(x, tables, { prefix: '<A>' })", texts,
                     imports="loadTables, parseResponse", tables=dumps(compile_template(template).raw_tables))
    assert sum("ok" in w for w in want) >= 30 and sum("error" in w for w in want) >= 30
    for text, w, g in zip(texts, want, got):
        assert same_as_js(w, g), (text, w, g)
