"""Format extensions (issue #17 item 2): the framework (runtime/values/extensions.py) and the value-level extensions
python_calls, argument_types, key_aliases, as_list and decode_json_strings.

Each extension is checked against a plain-Python statement of its semantics (the ``oracle_*`` functions
below: short, slow, obviously right; the Python-call one is built on ``ast``) with hypothesis-generated inputs,
through `chatparse.parse_response` one-shot and `ResponseParser` streamed in any chunking, in both dialects,
and per token with a tokenizer trained here. The motivating families' real outputs (tests/ext_templates.py)
give the messages peers give. The JavaScript runtime runs the same templates through the ``ext_*`` vectors
(tests/vectors, `node js/run_vectors.mjs`); a test here runs node on them when node is installed.
"""

from __future__ import annotations

import ast
import copy
import json
import random
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
from deps import need, need_program
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import ResponseParser, compile_template, parse_response, templates
from chatparse.compiler.validate import load_template
from chatparse.compiler.writer import dumps
from chatparse.runtime.values.extensions import EXTENSIONS, field_extensions
from chatparse.runtime.tables.loader import loads
from chatparse.runtime.values.pycalls import MAX_DEPTH, parse_python_calls
from corpus_cases import show, strict_equal
from ext_templates import EXTRA_CASES, FAMILIES, VECTORS

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def tagged(field: dict) -> dict:
    """A template with one explicit field ``<c>..</c>`` (the given keys) and an implicit content field."""
    return {"start_anchor": "<s>", "fields": {"v": {"open": "<c>", "close": "</c>", **field}, "content": {}}}


# ============================================================================================== the framework


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_the_reference_refuses_every_extended_template_by_itself(name):
    from transformers.utils.chat_parsing import ResponseParser as Reference

    template = FAMILIES[name][0]
    with pytest.raises(ValueError, match="unknown keys|unknown content parser"):
        Reference(template, prefix="")


def test_templates_without_extensions_keep_their_normal_form():
    """Every bundled template normalizes as before (version 1, no 'extensions'), and so does a template whose
    extension keys hold their defaults: same normal form, same hash, same tables."""
    for name in templates.names():
        spec = load_template(templates.get(name))
        assert spec["version"] == 1 and "extensions" not in spec, name
        assert all(not field_extensions(f) for f in spec["fields"]), name
    base = tagged({"content": "json"})
    defaults = tagged({"content": "json", "as_list": False, "argument_types": "json", "key_aliases": {},
                       "decode_json_strings": []})
    assert load_template(defaults) == load_template(base)
    assert dumps(compile_template(defaults).raw_tables) == dumps(compile_template(base).raw_tables)


def test_an_extended_template_is_version_2_listing_its_extensions():
    t = tagged({"content": "python-calls", "key_aliases": {"a": "b"}, "as_list": True})
    t["fields"]["w"] = {"open": "<w>", "close": "</w>", "argument_types": "schema", "content": "json"}
    spec = load_template(t)
    assert list(spec)[:2] == ["version", "extensions"]
    assert spec["version"] == 2 and spec["extensions"] == ["argument_types", "as_list", "key_aliases", "python_calls"]
    v = spec["fields"][0]
    assert v["content"] == "python-calls" and v["key_aliases"] == {"a": "b"} and v["as_list"] is True
    raw = loads(dumps(compile_template(t).raw_tables))  # the loader accepts what the writer wrote
    assert raw["template"] == spec
    again = chatparse.CompiledTemplate(raw["template"], raw)
    assert again.parse("<c>f(x=1)</c>", prefix="<s>") == {"v": [{"name": "f", "arguments": {"x": 1}}]}


def _with_extensions(names: list) -> bytes:
    t = tagged({"content": "python-calls"})
    compiled = compile_template(t)
    raw = dict(compiled.raw_tables)
    raw["template"] = copy.deepcopy(raw["template"])
    raw["template"]["extensions"] = names
    return dumps(raw)


NOT_SUPPORTED = "table uses format extension 'no_such_extension', which this reader does not support"


def test_a_reader_refuses_a_table_using_an_extension_it_does_not_implement(tmp_path):
    data = _with_extensions(["no_such_extension", "python_calls"])
    with pytest.raises(ValueError) as e:
        loads(data)
    assert str(e.value) == f"chatparse table file: {NOT_SUPPORTED}"
    need_program("node", "the JavaScript reader")
    (tmp_path / "t.cpt").write_bytes(data)
    script = (f"import {{ loadTables }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
              "import { readFileSync } from 'node:fs';\n"
              "try { loadTables(readFileSync(process.argv[2])); console.log('loaded'); }\n"
              "catch (e) { console.log(e.pyType + ': ' + e.message); }\n")
    (tmp_path / "t.mjs").write_text(script)
    out = subprocess.run([NODE, str(tmp_path / "t.mjs"), str(tmp_path / "t.cpt")], capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == f"ValueError: chatparse table file: {NOT_SUPPORTED}", out.stderr


@pytest.mark.parametrize("names, message", [
    (["as_list", "python_calls"], "not in normalized form"),       # lists one the fields do not use
    (["python_calls", "python_calls"], "sorted and distinct|not in normalized form"),
    ([], "'extensions' must be a non-empty list"),
])
def test_a_table_whose_extension_list_is_not_the_fields_is_refused(names, message):
    with pytest.raises(ValueError, match=message):
        loads(_with_extensions(names))


@pytest.mark.parametrize("field, message", [
    ({"argument_types": "strict"}, "Field 'v': 'argument_types' must be \"schema\" or \"json\""),
    ({"key_aliases": ["a"]}, "Field 'v': 'key_aliases' must be a dict"),
    ({"key_aliases": {"a": 1}}, "Field 'v': 'key_aliases' maps 'a' to a int"),
    ({"key_aliases": {"a": "a"}}, "maps 'a' to itself"),
    ({"key_aliases": {"a": "b", "b": "c"}}, "which is itself an alias"),
    ({"as_list": 1}, "Field 'v': 'as_list' must be a bool, got int"),
    ({"decode_json_strings": "arguments"}, "Field 'v': 'decode_json_strings' must be a list"),
    ({"decode_json_strings": ["a..b"]}, "not a dotted key path"),
    ({"decode_json_strings": ["a", "a"]}, "lists a path twice"),
    ({"content": "python-calls", "content_args": {"strip": True}}, "Field 'v': 'content_args' must be absent"),
])
def test_bad_extension_values_are_refused_naming_the_field_and_key(field, message):
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        load_template(tagged(field))
    assert "format extension" in str(e.value)


def test_base_errors_are_unchanged_for_a_template_with_an_unknown_key():
    with pytest.raises(ValueError, match=r"Field 'v': unknown keys \['colse'\]"):
        load_template(tagged({"colse": "x", "as_list": True}))
    with pytest.raises(ValueError, match=r"unknown content parser 'pythonic'.*Available: \['bool', 'float', 'int', "
                                         r"'json', 'kv-lines', 'text', 'xml-inline'\]"):
        load_template(tagged({"content": "pythonic"}))


def test_python_calls_is_not_a_nested_value_parser():
    t = tagged({"content": "xml-inline", "content_args": {"tag_pattern": "<(?P<key>a)>(?P<value>.*?)</a>",
                                                          "value_parser": {"name": "python-calls"}}})
    with pytest.raises(KeyError):
        parse_response("<c><a>f(x=1)</a></c>", t, prefix="<s>")


def test_every_registered_extension_is_documented_and_in_the_js_runtime():
    fmt = (ROOT / "FORMAT.md").read_text(encoding="utf-8")
    readme = (ROOT / "docs" / "format.md").read_text(encoding="utf-8")
    js = (ROOT / "js" / "chatparse.mjs").read_text(encoding="utf-8")
    ours = ["python_calls", "argument_types", "key_aliases", "as_list", "decode_json_strings"]
    for name in ours:
        assert name in EXTENSIONS
        assert f"`{name}`" in fmt, name
        assert f"`{name}`" in readme, name
        assert f"  {name}: {{" in js, name


def test_grammar_export_and_check_on_extended_templates():
    from chatparse.authoring.checks import run_checks

    for name, (template, _, _) in FAMILIES.items():
        compiled = compile_template(template)
        with pytest.raises(ValueError, match="grammar export is not supported for format extension"):
            compiled.grammar([{"type": "function", "function": {"name": "f", "parameters": {}}}])
        run_checks(template)  # `chatparse check` does not crash


# ============================================================================================== families


def _cases():
    for name, (template, cases, _) in FAMILIES.items():
        for case, prefix, output, tools, message in cases:
            yield pytest.param(template, prefix, output, tools, message, id=f"{name}-{case}")


@pytest.mark.parametrize("template, prefix, output, tools, message", list(_cases()))
def test_motivating_family_outputs_parse_as_peers_parse_them(template, prefix, output, tools, message):
    for dialect in ("transformers", "vllm"):
        got = parse_response(output, template, prefix=prefix, tools=tools, dialect=dialect)
        assert strict_equal(got, message), (dialect, show(got))
        for k in (1, 3, 7):
            p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
            for i in range(0, len(output), k):
                p.feed(output[i:i + k])
            assert strict_equal(p.finalize()[0], message), (dialect, k)


def test_without_the_extension_the_reference_and_chatparse_agree_and_differ_from_it():
    """The same family templates with the extension keys removed: chatparse gives the reference's answer,
    which is not what the extension gives (so the extension is what makes the difference)."""
    from harness import run_reference

    checked = 0
    for name, (template, cases, _) in FAMILIES.items():
        base = copy.deepcopy(template)
        for f in base["fields"].values():
            for key in ("argument_types", "key_aliases", "as_list", "decode_json_strings", "optional_placeholders",
                        "content_fallback", "unwrap_pattern"):
                f.pop(key, None)
        if any(f.get("content") == "python-calls" for f in base["fields"].values()):
            continue
        differ = []
        for _, prefix, output, tools, message in cases:
            ref = run_reference(base, output, prefix, tools)
            ours = harness_run(base, output, prefix, tools)
            assert ref[:2] == ours[:2], name
            differ.append(ref[0] == "error" or not strict_equal(ref[1], message))
            checked += 1
        assert any(differ) if name in SOME_CASES_ONLY else all(differ), name
    assert checked >= 5


# Families whose extension changes nothing in one of their cases: optional_placeholders where the group took
# part, content_fallback where the field's own parser takes the body.
SOME_CASES_ONLY = {"mistral_small32_call_id", "deepseek_v32_json_body"}


def harness_run(template, text, prefix, tools):
    from harness import run_chatparse

    return run_chatparse(template, [text], prefix, tools)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_chunk_invariance_and_dialects_on_family_texts(name):
    """Every text of a family (its real cases and the extra vector texts, errors included), in random chunkings:
    the same events (apart from how chunks are cut) and message as one feed, in both dialects; in the vllm
    dialect a region that fails is a region_malformed event and the rest of the message is kept."""
    from harness import normalize, random_chunks

    template, cases, _ = FAMILIES[name]
    texts = [(c[1], c[2], c[3]) for c in cases] + [(c[1], c[2], c[3]) for c in EXTRA_CASES.get(name, [])]
    rng = random.Random(name)
    for prefix, text, tools in texts:
        for dialect in ("transformers", "vllm"):
            whole = _events(template, prefix, tools, dialect, [text])
            for _ in range(4):
                got = _events(template, prefix, tools, dialect, random_chunks(text, rng, 5))
                if whole[0] == "ok":
                    assert got[0] == "ok" and strict_equal(got[1], whole[1]), (text, dialect)
                    assert normalize(got[2]) == normalize(whole[2])
                else:
                    assert got == whole
            if whole[0] == "ok" and not any(e["type"] == "region_malformed" for e in whole[2]):
                one = parse_response(text, template, prefix=prefix, tools=tools, dialect=dialect)
                assert strict_equal(one, whole[1])
            elif whole[0] == "ok":  # parse_response parses it all, then raises the malformed region's error
                bad = next(e for e in whole[2] if e["type"] == "region_malformed")
                with pytest.raises(ValueError, match=re.escape(bad["error"][1])):
                    parse_response(text, template, prefix=prefix, tools=tools, dialect=dialect)


def _events(template, prefix, tools, dialect, chunks):
    try:
        p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
        events = list(p.initial_events)
        for c in chunks:
            events += p.feed(c)
        msg, final = p.finalize()
    except (ValueError, KeyError, TypeError) as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", msg, [_plain(e) for e in events + final])


def _plain(event: dict) -> dict:
    e = dict(event)
    if "error" in e:
        e["error"] = (type(e["error"]).__name__, str(e["error"]))
    return e


def test_a_malformed_python_call_is_a_region_malformed_event_in_the_vllm_dialect():
    template = FAMILIES["olmo3"][0]
    text = "<function_calls>f(1)</function_calls>Done."
    with pytest.raises(ValueError, match="positional argument 1 in the call to 'f'.* at offset 2"):
        parse_response(text, template, prefix="")
    p = ResponseParser(template, prefix="", dialect="vllm")
    events = p.feed(text)
    message, final = p.finalize()
    bad = [e for e in events + final if e["type"] == "region_malformed"]
    assert len(bad) == 1 and bad[0]["field"] == "tool_calls" and isinstance(bad[0]["error"], ValueError)
    assert message == {"role": "assistant", "content": "Done."}


# ------------------------------------------------------------------------------------------ per token


@pytest.fixture(scope="module")
def family_tokenizer():
    """A byte-level BPE trained here on the families' texts (delimiters split across ordinary tokens)."""
    tokenizers = need("tokenizers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = [c[1] + c[2] for _, cases, _ in FAMILIES.values() for c in cases]
    corpus += [c[2] for cases in EXTRA_CASES.values() for c in cases]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(corpus * 3, trainer=trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    assert isinstance(tok, tokenizers.Tokenizer)
    return tok


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_per_token_parsing_gives_the_text_parsers_answer(name, family_tokenizer):
    template, cases, _ = FAMILIES[name]
    binding = chatparse.bind(template, family_tokenizer)
    texts = [(c[1], c[2], c[3]) for c in cases] + [(c[1], c[2], c[3]) for c in EXTRA_CASES.get(name, [])]
    for prefix, text, tools in texts:
        ids = family_tokenizer.encode(text).ids
        full = family_tokenizer.decode(ids)
        for dialect in ("transformers", "vllm"):
            want = _events(template, prefix, tools, dialect, [full])
            try:
                p = binding.parser(prefix=prefix, tools=tools, dialect=dialect)
                for i in ids:
                    p.feed_tokens(i)
                got = ("ok", p.finalize()[0])
            except (ValueError, KeyError, TypeError) as e:
                got = ("error", type(e).__name__, str(e))
            assert got[:2] == want[:2] if got[0] == "ok" else got == want, (text, dialect)
    # many streams stepped together (TokenStreams), one per text of the family that parses
    import numpy as np

    streams = [(p, family_tokenizer.encode(t).ids, tools) for p, t, tools in texts
               if _events(template, p, tools, "vllm", [family_tokenizer.decode(family_tokenizer.encode(t).ids)])[0] == "ok"]
    for prefix in {p for p, _, _ in streams}:
        group = [(ids, tools) for p, ids, tools in streams if p == prefix and tools is None]
        if not group:
            continue
        ts = chatparse.TokenStreams(binding, len(group), prefix=prefix, dialect="vllm")
        for k in range(max(len(ids) for ids, _ in group)):
            active = np.array([k < len(ids) for ids, _ in group])
            ts.step(np.array([ids[k] if k < len(ids) else 0 for ids, _ in group]), active)
        for (ids, _), (message, _) in zip(group, ts.finalize_all()):
            want = _events(template, prefix, None, "vllm", [family_tokenizer.decode(ids)])
            assert strict_equal(message, want[1]), name


# ============================================================================================== python_calls

WS = " \t\f\r\n"
NAMES = {"true": True, "false": False, "null": None}


def oracle_python_calls(body: str) -> list:
    """The python-calls parser, stated with Python's own parser: the body is a list of calls, or calls one per
    line / separated by commas; each call a (dotted) name with keyword arguments whose values are literals
    (true/false/null as JSON's), tuples as lists, dict keys strings. Raises on anything else."""
    text = body.strip(WS)
    if not text:
        return []
    with warnings.catch_warnings():  # (an unknown escape: Python warns, and keeps the backslash)
        warnings.simplefilter("ignore")
        return _oracle_calls(text)


def _oracle_calls(text: str) -> list:
    if text.startswith("["):
        tree = ast.parse(text, mode="eval").body
        assert isinstance(tree, ast.List)
        nodes = tree.elts
    else:
        nodes = []
        for stmt in ast.parse(text).body:
            assert isinstance(stmt, ast.Expr)
            nodes += stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
    return [_oracle_call(n) for n in nodes]


def _oracle_call(node) -> dict:
    assert isinstance(node, ast.Call) and not node.args
    parts, f = [], node.func
    while isinstance(f, ast.Attribute):
        parts.append(f.attr)
        f = f.value
    assert isinstance(f, ast.Name)
    name = ".".join([f.id] + parts[::-1])
    assert name.isascii()
    arguments = {}
    for kw in node.keywords:
        assert kw.arg is not None
        arguments[kw.arg] = _oracle_value(kw.value)
    return {"name": name, "arguments": arguments}


def _oracle_value(node):
    if isinstance(node, ast.Name) and node.id in NAMES:
        return NAMES[node.id]
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_oracle_value(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = _oracle_value(k)
            assert isinstance(key, str)
            out[key] = _oracle_value(v)
        return out
    value = ast.literal_eval(node)
    assert type(value) in (str, int, float, bool, type(None))
    return value


def _oracle_or_error(body: str):
    try:
        return ("ok", oracle_python_calls(body))
    except (SyntaxError, ValueError, AssertionError, TypeError, MemoryError, RecursionError):
        return ("error", None)


def _ours(body: str):
    try:
        return ("ok", parse_python_calls(body))
    except ValueError as e:
        assert "python-calls: " in str(e) and " at offset " in str(e)
        return ("error", None)


identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True).filter(
    lambda s: s not in {"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class",
                        "continue", "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if",
                        "import", "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try",
                        "while", "with", "yield"})
text_values = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8) | \
    st.sampled_from(["", "'", '"', "\\", "\n", "'''", "a\"b'c", "😀", "\u2028"])
scalars = st.none() | st.booleans() | st.integers(-10**30, 10**30) | \
    st.floats(allow_nan=False, allow_infinity=False) | text_values
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(text_values, inner, max_size=3), max_leaves=8)
calls = st.lists(st.tuples(st.lists(identifiers, min_size=1, max_size=3).map(".".join),
                           st.dictionaries(identifiers, values, max_size=4)), max_size=4)


def render_value(v, rng: random.Random) -> str:
    """Python source for `v`, spelled one of the ways a model may spell it."""
    sp = lambda: rng.choice(["", "", " ", "\n", " \t"])  # noqa: E731 - between tokens, inside brackets
    if v is None or isinstance(v, bool):
        return rng.choice([repr(v), {None: "null", True: "true", False: "false"}[v]])
    if isinstance(v, int):
        if v >= 0 and rng.random() < 0.2:
            return hex(v)
        return rng.choice([repr(v), repr(v).replace("-", "- ") if v < 0 else "+" + repr(v)])
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        choice = rng.random()
        if choice < 0.5:
            return repr(v)
        if choice < 0.8 or v.endswith('"') or '"""' in v or "\\" in v or "\r" in v:
            return json.dumps(v, ensure_ascii=False)
        return '"""' + v + '"""'
    if isinstance(v, list):
        items = [sp() + render_value(x, rng) + sp() for x in v]
        if rng.random() < 0.3:  # as a tuple
            return "(" + ",".join(items) + ("," if len(items) == 1 else "") + ")"
        return "[" + ",".join(items) + ("," if items and rng.random() < 0.3 else "") + "]"
    items = [sp() + render_value(k, rng) + sp() + ":" + sp() + render_value(x, rng) + sp() for k, x in v.items()]
    return "{" + ",".join(items) + "}"


def render_calls(cs: list, rng: random.Random) -> str:
    rendered = []
    for name, kwargs in cs:
        args = [f"{k}{rng.choice(['', ' '])}={rng.choice(['', ' '])}{render_value(v, rng)}" for k, v in kwargs.items()]
        rendered.append(f"{name}({', '.join(args)})")
    form = rng.choice(["list", "commas", "lines"]) if rendered else "list"
    if form == "list":
        trailing = rng.choice(["", ","]) if rendered else ""
        return rng.choice(["", " \n"]) + "[" + ", ".join(rendered) + trailing + "]" + rng.choice(["", "\n"])
    if form == "commas":
        return ", ".join(rendered) + rng.choice(["", ","])
    return rng.choice(["\n", "\r\n", " \n\n"]).join(rendered) + rng.choice(["", "\n"])


@SETTINGS
@given(calls, st.randoms(use_true_random=False))
def test_python_calls_equal_the_ast_statement(cs, rng):
    body = render_calls(cs, rng)
    want = [{"name": name, "arguments": kwargs} for name, kwargs in cs]
    got = parse_python_calls(body)
    assert strict_equal(got, want), (body, show(got))
    assert strict_equal(oracle_python_calls(body), want), body


TOKENS = ["f", "g.h", "x", "(", ")", "[", "]", "{", "}", ",", "=", ":", "1", "-", "+", ".5", "1e3", "0x1f", "1_0",
          "07", "1j", "'a'", '"b"', "'''c\nd'''", "'\\x4'", "'\\n'", "True", "None", "null", "nul", "*", "**", "#",
          ";", " ", "\n", "\\", "'", "lambda", "f'x'", "b'x'", "set()", "...", "."]


@SETTINGS
@given(st.lists(st.sampled_from(TOKENS), max_size=14), st.booleans())
def test_python_calls_never_accept_what_python_refuses(tokens, bracketed):
    """Token soup: whatever the parser accepts, the ast statement accepts with the same value; whatever the
    statement refuses, the parser refuses (with a ValueError naming an offset, never another exception)."""
    body = "".join(tokens)
    if bracketed:
        body = "[" + body + "]"
    ours, oracle = _ours(body), _oracle_or_error(body)
    if ours[0] == "ok":
        assert oracle[0] == "ok" and strict_equal(ours[1], oracle[1]), body
    if oracle[0] == "error":
        assert ours[0] == "error", body


@SETTINGS
@given(calls, st.randoms(use_true_random=False), st.integers(0, 10**6), st.sampled_from(TOKENS + ["", "x"]))
def test_python_calls_mutated_are_a_subset_of_python(cs, rng, at, insert):
    body = "[" + render_calls(cs, rng).strip(WS).strip("[]") + "]"
    at %= len(body) + 1
    body = body[:at] + insert + body[at + (1 if rng.random() < 0.5 else 0):]
    ours, oracle = _ours(body), _oracle_or_error(body)
    if ours[0] == "ok":
        assert oracle[0] == "ok" and strict_equal(ours[1], oracle[1]), body
    if oracle[0] == "error":
        assert ours[0] == "error", body


@pytest.mark.parametrize("body, offset, what", [
    ("f(1)", 2, "positional argument 1 in the call to 'f'"),
    ("[f(a=1), g(a=1, 2)]", 16, "positional argument 2 in the call to 'g'"),
    ("f(a=b)", 4, "'b' is not a literal value"),
    ("f(a=g())", 4, "'g' is not a literal value"),
    ("f(a=1+2)", 5, "expected ',' or ')' in the call to 'f'"),
    ("f(a=f'x')", 4, "string prefix 'f' is not supported"),
    ("f(a={1, 2})", 6, "sets are not supported"),
    ("f(a={1: 2})", 5, "dict keys must be strings"),
    ("f(a=1j)", 4, "imaginary numbers are not supported"),
    ("f(a='x)", 4, "unterminated string"),
    ("f(a=1, a=2)", 7, "keyword argument 'a' repeated"),
    ("f(**k)", 2, "*args and **kwargs are not supported"),
    ("f() g()", 4, "expected ',' or a new line after a call"),
    ("f(a='\\N{DASH}')", 5, "\\N{...} escapes are not supported"),
    ("class(a=1)", 0, "a function name 'class' is a Python keyword"),
    ("[f()] x", 6, "unexpected 'x' after the list of calls"),
    ("f(a='😀', b=c)", 11, "'c' is not a literal value"),  # offsets count code points
])
def test_python_call_errors_name_the_offset(body, offset, what):
    with pytest.raises(ValueError) as e:
        parse_python_calls(body)
    assert str(e.value).startswith("python-calls: ") and what in str(e.value), str(e.value)
    assert str(e.value).endswith(f" at offset {offset}"), str(e.value)


def test_python_calls_are_bounded():
    deep = "f(a=" + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + ")"
    parse_python_calls(deep)
    with pytest.raises(ValueError, match=f"brackets nested more than {MAX_DEPTH} deep"):
        parse_python_calls("f(a=" + "[" * MAX_DEPTH + "]" * MAX_DEPTH + ")")
    with pytest.raises(ValueError, match="nested more than"):
        parse_python_calls("f(a=" + "[" * 100_000)
    with pytest.raises(ValueError, match="more than 4300 digits"):
        parse_python_calls("f(a=" + "1" * 4301 + ")")
    # one left-to-right pass: counted (characters read, `_count_reads`), not timed
    def per_char(calls):
        text = "[" + ", ".join(f"f{i}(a='{'x' * 50}', b=[1, 2.5, None], c={{'k': True}})" for i in range(calls)) + "]"
        with _count_reads() as (counted, read):
            assert len(parse_python_calls(counted(text))) == calls
        return read[0] / len(text)
    small, big = per_char(250), per_char(5000)
    assert big <= 3 and big <= small * 1.05, (small, big)  # (about 1.95 each)


class _CountedStr(str):
    """A str that counts, into `read`, the characters read through it: 1 per index, a slice's length, the
    prefix's length for `startswith`."""

    read = [0]

    def __getitem__(self, key):
        out = str.__getitem__(self, key)
        _CountedStr.read[0] += len(out) if isinstance(key, slice) else 1
        return out

    def startswith(self, prefix, *args):
        _CountedStr.read[0] += max(map(len, prefix)) if isinstance(prefix, tuple) else len(prefix)
        return str.startswith(self, prefix, *args)


class _count_reads:
    """Within: (wrap a text so that reads through it count, the count): characters read through the text and
    by the python-calls parser's regexes (each match: the characters it matched, plus one)."""

    def __enter__(self):
        from chatparse.runtime.values import pycalls

        read = _CountedStr.read
        read[0] = 0

        class Counted:
            def __init__(self, rx):
                self.rx = rx

            def match(self, text, pos=0, *args):
                m = self.rx.match(text, pos, *args)
                read[0] += (m.end() - pos if m else 0) + 1
                return m

            def fullmatch(self, text, *args):
                read[0] += len(text) + 1
                return self.rx.fullmatch(text, *args)

        self.saved = {name: getattr(pycalls, name) for name in ("_IDENT", "_NUMBER", "_HEX", "_OCT")}
        for name, rx in self.saved.items():
            setattr(pycalls, name, Counted(rx))
        return _CountedStr, read

    def __exit__(self, *exc):
        from chatparse.runtime.values import pycalls

        for name, rx in self.saved.items():
            setattr(pycalls, name, rx)


# ============================================================================================== argument_types

SCHEMA_TYPES = ["string", "integer", "number", "boolean", "null", "object", "array"]
BOOL = {"true": True, "1": True, "false": False, "0": False}


def oracle_schema_value(value, types: list):
    """One declared argument typed schema-first: a string tries the declared types in order ("string" keeps it,
    the others cast it as transformers casts strings), else stays; a typed value stays when it is of a declared
    type, else becomes its JSON text when "string" is declared, else stays."""
    if isinstance(value, str):
        for t in types:
            if t == "string":
                return value
            try:
                if t == "integer":
                    try:
                        return int(value)
                    except ValueError:
                        if float(value).is_integer():
                            return int(float(value))
                if t == "number":
                    x = float(value)
                    if x == x and x not in (float("inf"), float("-inf")):
                        return int(x) if x.is_integer() and "." not in value else x
                if t == "boolean" and value.strip().lower() in BOOL:
                    return BOOL[value.strip().lower()]
                if t == "null" and value.strip() in ("null", "None"):
                    return None
                if t in ("object", "array"):
                    x = json.loads(value)
                    if isinstance(x, dict if t == "object" else list):
                        return x
            except ValueError:
                pass
        return value
    kinds = {"string": str, "boolean": bool, "null": type(None), "object": dict, "array": list}
    for t in types:
        if t in kinds and type(value) is kinds[t]:
            return value
        if t == "integer" and type(value) in (int, float) and float(value).is_integer():
            return value
        if t == "number" and type(value) in (int, float):
            return value
    return json.dumps(value, ensure_ascii=False) if "string" in types else value


arg_values = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), st.floats(allow_nan=False,
                       allow_infinity=False), st.sampled_from(["null", "None", "42", "-3", "3.0", "2.50", "1e3", "true",
                                                              "True", "0", "", " 7 ", '{"a": 1}', "[1, 2]", "nan", "x"]),
                       st.lists(st.integers(0, 3), max_size=2), st.dictionaries(st.sampled_from("ab"), st.integers(),
                                                                                max_size=2))
arg_types = st.lists(st.sampled_from(SCHEMA_TYPES), min_size=0, max_size=3, unique=True)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["p", "q", "r", "s"]), arg_values, max_size=4),
       st.dictionaries(st.sampled_from(["p", "q", "r", "t"]), arg_types, max_size=4))
def test_argument_types_schema_equal_the_statement(arguments, declared):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {k: ({"type": t} if t else {}) for k, t in declared.items()}}}}]
    template = tagged({"content": "json", "transform": {"type": "function", "function": "{content}"},
                       "argument_types": "schema"})
    body = json.dumps({"name": "f", "arguments": arguments})
    got = parse_response(f"<c>{body}</c>", template, prefix="<s>", tools=tools)["v"]["function"]["arguments"]
    want = {}
    for k, v in arguments.items():
        types = declared.get(k)
        if not types or not any(declared.values()):
            want[k] = v
        elif isinstance(v, list) and "array" not in types:
            want[k] = [oracle_schema_value(x, types) for x in v]
        else:
            want[k] = oracle_schema_value(v, types)
    assert strict_equal(got, want), (body, declared, show(got))
    # without tools= nothing is typed, as in the base format
    assert strict_equal(parse_response(f"<c>{body}</c>", template, prefix="<s>")["v"]["function"]["arguments"],
                        arguments)


def oracle_typed_text(text: str, types: list):
    """An xml-inline argument whose value parser is json (allow_non_json): typed schema-first from the text the
    model wrote; when no declared type accepts the text, the value parser's guess (the base parser's value)."""
    guess = json_guess(text)
    if isinstance(guess, str):
        return oracle_schema_value(guess, types)
    for t in types:
        typed = oracle_schema_value(text, [t])
        if t == "string" or typed is not text:
            return typed
    return guess


def json_guess(text: str):
    from chatparse.runtime.values.parsers import parse_content

    return parse_content(text, "json", {"allow_non_json": True})


texts = st.sampled_from(["null", "None", "42", "-0", "1.50", "1e3", "042", "true", "True", " 7", '{"a": 1}', "[1]",
                         "x", "", "3.0", "NaN", "-1.5e-3", '"q"', "2.5e1"]) | st.text("0123456789.-eE xn", max_size=5)


@SETTINGS
@given(st.dictionaries(st.sampled_from(["p", "q", "r", "s"]), texts, max_size=4),
       st.dictionaries(st.sampled_from(["p", "q", "r", "t"]), arg_types, max_size=4))
def test_argument_types_type_the_text_the_model_wrote(arguments, declared):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {k: ({"type": t} if t else {}) for k, t in declared.items()}}}}]
    template = tagged({"content": "xml-inline", "argument_types": "schema",
                       "content_args": {"tag_pattern": "<(?P<key>[a-z])>(?P<value>.*?)</[a-z]>",
                                        "value_parser": {"name": "json", "args": {"allow_non_json": True}}},
                       "transform": {"type": "function", "function": {"name": "f", "arguments": "{content}"}}})
    body = "".join(f"<{k}>{v}</{k}>" for k, v in arguments.items())
    got = parse_response(f"<c>{body}</c>", template, prefix="<s>", tools=tools)["v"]["function"]["arguments"]
    want = {}
    for k, text in arguments.items():
        types = declared.get(k)
        want[k] = oracle_typed_text(text, types) if types and any(declared.values()) else json_guess(text)
    assert strict_equal(got, want), (body, declared, show(got))


def test_argument_types_keep_string_parameters_as_text_in_xml_values():
    template, cases, _ = FAMILIES["deepseek_v32_schema"]
    _, prefix, output, tools, message = cases[0]
    base = copy.deepcopy(template)
    del base["fields"]["tool_calls"]["argument_types"]
    assert parse_response(output, base, prefix=prefix, tools=tools)["tool_calls"][0]["function"]["arguments"] == \
        {"zip": "02139", "code": 10}  # the reference's JSON guess
    assert parse_response(output, template, prefix=prefix, tools=tools) == message


# ============================================================================================== key_aliases, as_list, decode_json_strings


def oracle_steps(value, as_list: bool, aliases: dict, paths: list):
    """as_list, then key_aliases (each alias key, in the value's order, renamed in place when its canonical key is
    absent), on
    the parsed value or each dict element of a list; decode_json_strings after (no transform here)."""
    if as_list and not isinstance(value, list):
        value = [value]

    def rename(d: dict) -> dict:
        for key in list(d):
            canonical = aliases.get(key)
            if canonical is not None and canonical not in d:
                d = {(canonical if k == key else k): v for k, v in d.items()}
        return d

    if isinstance(value, dict):
        value = rename(value)
    elif isinstance(value, list):
        value = [rename(v) if isinstance(v, dict) else v for v in value]
    for d in value if isinstance(value, list) else [value]:
        if not isinstance(d, dict):
            continue
        for path in paths:
            *head, last = path.split(".")
            holder = d
            for k in head:
                holder = holder.get(k) if isinstance(holder, dict) else None
            if isinstance(holder, dict) and isinstance(holder.get(last), str):
                try:
                    decoded = json.loads(holder[last])
                except ValueError:
                    continue
                if isinstance(decoded, dict):
                    holder[last] = decoded
    return value


keys = st.sampled_from(["a", "b", "c", "d"])
json_leaf = st.none() | st.booleans() | st.integers(-100, 100) | st.sampled_from(["x", "{}", '{"k": 1}', "[1]", "{bad"])
json_values = st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=4),
                           max_leaves=10)
dicts = st.dictionaries(keys, json_values, max_size=4)


@SETTINGS
@given(json_values | dicts | st.lists(dicts, max_size=3), st.booleans(),
       st.dictionaries(st.sampled_from(["a", "b"]), st.sampled_from(["c", "d"]), max_size=2),
       st.lists(st.sampled_from(["a", "c", "c.a", "d.b", "a.a.a"]), max_size=3, unique=True))
def test_value_steps_equal_the_statement(value, as_list, aliases, paths):
    field = {"content": "json", "as_list": as_list, "key_aliases": aliases, "decode_json_strings": paths}
    body = json.dumps(value)
    want = oracle_steps(json.loads(body), as_list, aliases, paths)
    message = {"content": "text", "v": want} if want not in (None, "", [], {}) else {"content": "text"}
    for dialect in ("transformers", "vllm"):  # (an empty value leaves the field out, as in the base format)
        got = parse_response(f"text<c>{body}</c>", tagged(field), prefix="<s>", dialect=dialect)
        assert strict_equal(got, message), (body, show(got))


@FEW
@given(dicts | st.lists(dicts, max_size=3), st.data())
def test_value_steps_with_transform_each_and_chunking(value, data):
    """With transform_each: as_list lets a bare dict through, aliases apply to each element before the
    transform, decoding applies to each transformed element; any chunking gives the one-shot answer."""
    field = {"content": "json", "as_list": True, "key_aliases": {"b": "a"}, "transform_each": True,
             "transform": {"k": "{a}", "rest": {"c": "{c}"}}, "decode_json_strings": ["k", "rest.c"]}
    text = f"pre<c>{json.dumps(value)}</c>post"
    elements = oracle_steps(json.loads(json.dumps(value)), True, {"b": "a"}, [])
    if all("a" in e and "c" in e for e in elements):
        want = oracle_steps([{"k": e["a"], "rest": {"c": e["c"]}} for e in elements], False, {}, ["k", "rest.c"])
        whole = ("ok", {"content": "post", "v": want} if want else {"content": "post"})
    else:
        whole = ("error", "KeyError")  # an element without a key the transform names, as in the base format
    cuts = data.draw(st.lists(st.integers(1, len(text) - 1), max_size=6))
    from harness import run_chatparse, split

    for chunks in ([text], split(text, cuts)):
        got = run_chatparse(tagged(field), chunks, "<s>")
        assert got[0] == whole[0] and (got[0] == "error" or strict_equal(got[1], whole[1])), (text, show(got))


def test_an_alias_never_drops_a_key():
    t = tagged({"content": "json", "key_aliases": {"parameters": "arguments", "args": "arguments"}})
    both = parse_response('<c>{"parameters": 1, "arguments": 2, "args": 3}</c>', t, prefix="<s>")["v"]
    assert both == {"parameters": 1, "arguments": 2, "args": 3}
    first = parse_response('<c>{"args": 3, "name": "f", "parameters": 1}</c>', t, prefix="<s>")["v"]
    assert list(first.items()) == [("arguments", 3), ("name", "f"), ("parameters", 1)]  # the first in the value
    swapped = tagged({"content": "json", "key_aliases": {"args": "arguments", "parameters": "arguments"}})
    assert parse_response('<c>{"args": 3, "name": "f", "parameters": 1}</c>', swapped, prefix="<s>")["v"] == first


def test_extension_vectors_pass_in_node(tmp_path):
    """The ext_* vectors (written by `python tests/make_vectors.py --only ...`) through the JavaScript
    runtime: the same events and messages as Python, in both dialects."""
    need_program("node", "the JavaScript reader")
    files = sorted((ROOT / "tests" / "vectors").glob("ext_*"))
    import ext_close_templates  # (the region-level extensions: close_json_end, ...)

    names = [*VECTORS, *getattr(ext_close_templates, "VECTORS", {})]
    assert {f"ext_{e}.{x}" for e in names for x in ("json", "cpt")} <= {f.name for f in files}
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(tmp_path), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]


def test_the_readme_example_runs_as_written():
    from harness import readme_example

    printed, shown = readme_example("## Extensions to the format")
    assert printed == shown


def test_python_calls_in_javascript_equal_python(tmp_path):
    """The JS parser (`parsePythonCalls`) against the Python one on generated bodies - valid ones in every
    spelling, token soup, mutated calls: the same value (numbers compared as JavaScript holds them) or the same
    error message, offset included. One node process for all."""
    need_program("node", "the JavaScript reader")
    rng = random.Random(17)
    bodies = []

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(calls, st.randoms(use_true_random=False), st.lists(st.sampled_from(TOKENS), max_size=12),
           st.integers(0, 10**6), st.sampled_from(TOKENS + [""]))
    def collect(cs, r, soup, at, insert):
        body = render_calls(cs, r)
        bodies.append(body)
        bodies.append("".join(soup))
        at %= len(body) + 1
        bodies.append(body[:at] + insert + body[at + rng.randint(0, 1):])

    collect()
    results = []
    for body in bodies:
        try:
            results.append({"ok": parse_python_calls(body)})
        except ValueError as e:
            results.append({"error": str(e)})
    (tmp_path / "bodies.json").write_text(json.dumps(bodies), encoding="utf-8")
    script = (f"import {{ parsePythonCalls }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
              "import { readFileSync, writeFileSync } from 'node:fs';\n"
              "const out = JSON.parse(readFileSync(process.argv[2], 'utf8')).map((b) => {\n"
              "  try { return { ok: parsePythonCalls(b) }; } catch (e) { return { error: e.message, type: e.pyType }; }\n"
              "});\n"
              "writeFileSync(process.argv[3], JSON.stringify(out, (k, v) => typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));\n")
    (tmp_path / "run.mjs").write_text(script)
    proc = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(tmp_path / "bodies.json"), str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    js = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert len(js) == len(bodies)
    for body, want, got in zip(bodies, results, js):
        if "error" in want:
            assert got == {"error": want["error"], "type": "ValueError"}, body
        else:
            assert "ok" in got and _as_js(want["ok"]) == _as_js(got["ok"]), (body, got)
    assert sum("ok" in r for r in results) > len(bodies) // 3  # enough bodies parse


def _as_js(v):
    """A value as JavaScript holds it: every number a float (non-finite ones as their String()); a dict's
    array-index keys ("9") first, ascending, as a JavaScript object lists them (a limit of the JS runtime's
    plain objects, for every content parser alike)."""
    if isinstance(v, list):
        return [_as_js(x) for x in v]
    if isinstance(v, dict):
        index = [k for k in v if re.fullmatch(r"0|[1-9][0-9]*", k) and int(k) < 2**32 - 1]
        order = sorted(index, key=int) + [k for k in v if k not in index]
        return [(k, _as_js(v[k])) for k in order]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        f = float(v)
        return f if f == f and abs(f) != float("inf") else str(f).replace("inf", "Infinity")
    if isinstance(v, str) and v in ("Infinity", "-Infinity"):
        return v
    return v


def test_json_text_of_argument_types_in_javascript_equals_python(tmp_path):
    """``argument_types``' JSON text of a typed value (a string parameter given a number, list, dict...): the JS
    runtime's `pyJsonDumps` is Python's ``json.dumps(v, ensure_ascii=False)`` (floats in Python's repr), for
    every value JavaScript can tell apart (no whole floats: JavaScript reads ``1.0`` as ``1``)."""
    need_program("node", "the JavaScript reader")
    floats = st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not x.is_integer())
    leaves = st.none() | st.booleans() | st.integers(-2**53, 2**53) | floats | \
        st.sampled_from([1e-5, 1.5e-7, 1e16 + 2, 123456789.125, 0.0001, 5e-324, 1.7976931348623157e308]).filter(
            lambda x: not x.is_integer()) | st.text(max_size=6)
    json_like = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3),
                                                                                                  inner, max_size=3),
                             max_leaves=8)
    values = []

    @settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(json_like)
    def collect(v):
        values.append(v)

    collect()
    values += [1e-5, 0.0001, 1.5e16, 2.5e-300, [1e22 + 0.5], {"a": -1e-7}, "\x00\x1f\x7f\u2028\"\\"]
    (tmp_path / "values.json").write_text(json.dumps(values, ensure_ascii=False), encoding="utf-8")
    script = (f"import {{ pyJsonDumps }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
              "import { readFileSync, writeFileSync } from 'node:fs';\n"
              "writeFileSync(process.argv[3], JSON.stringify(JSON.parse(readFileSync(process.argv[2], 'utf8')).map(pyJsonDumps)));\n")
    (tmp_path / "run.mjs").write_text(script)
    proc = subprocess.run([NODE, str(tmp_path / "run.mjs"), str(tmp_path / "values.json"), str(tmp_path / "out.json")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    got = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    checked = 0
    for v, text in zip(values, got):
        if _js_cannot_hold(v):
            continue
        assert text == json.dumps(v, ensure_ascii=False), v
        checked += 1
    assert checked > len(values) // 2


def _js_cannot_hold(v) -> bool:
    """A whole float (JavaScript has no 1.0), or a dict key that is an array index ("6": a JavaScript object
    lists such keys first, whatever the order they came in - a limit of the JS runtime's plain objects)."""
    if isinstance(v, float):
        return v.is_integer()
    if isinstance(v, list):
        return any(_js_cannot_hold(x) for x in v)
    if isinstance(v, dict):
        return any(re.fullmatch(r"0|[1-9][0-9]*", k) and int(k) < 2**32 - 1 for k in v) or \
            any(_js_cannot_hold(x) for x in v.values())
    return False
