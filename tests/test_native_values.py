"""The native runtime's value layer (issue #40; native/src/values*.c) against the Python reference.

* tests/vectors/values.json (content parsers and tool-argument coercion, the vectors every runtime runs) through
  ``chatparse-vectors``: every case must pass;
* cases made here by the Python reference itself, run through the same runner's "values" kind (its extra case
  kinds: native/tools/vectors_values.c): the python-calls and json-values parsers, the close_json_end tracker
  (fed whole, byte by byte and in 3-byte pieces), and a region's whole value (cp_values_make: unwrap_pattern,
  escaped_json_values, content_fallback, as_list, key_aliases, transforms with transform_each and
  optional_placeholders, decode_json_strings) with tool typing (transformers' coercion and argument_types
  "schema", through cp_values_region, including Python's object sharing where a transform names one dict
  twice); values compared strictly (int is not float, key order), errors by class and message. Hand-picked
  texts plus seeded random mutations of them, random tool calls and random transforms.
* every allocation of 22 value operations failed in turn: MemoryError, no crash, no leak (native/tools/values_oom.c
  under AddressSanitizer);
* the runner fails on edited expectations (so a pass means something).

Builds native/ with CMake into build/native-values (the library and chatparse-vectors).
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from native_build import build_native

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"
BUILD = ROOT / "build" / "native-values"
VECTORS = ROOT / "tests" / "vectors"


def _runner() -> Path:
    build_native(BUILD, ("chatparse-vectors",), options=("-DCMAKE_BUILD_TYPE=RelWithDebInfo",))
    return BUILD / "chatparse-vectors"


@pytest.fixture(scope="module")
def runner() -> Path:
    return _runner()


def _run(runner: Path, cases: list, tmp_path: Path, name: str = "values.json") -> tuple[int, int, list]:
    d = tmp_path / name.replace(".json", "")
    d.mkdir(exist_ok=True)
    (d / name).write_text(json.dumps({"kind": "values", "cases": cases}), encoding="utf-8")
    r = subprocess.run([str(runner), str(d), "--json"], capture_output=True, text=True, timeout=600)
    lines = r.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    fails = [line for line in lines if line.startswith("FAIL ")]
    assert (r.returncode == 0) == (summary["failed"] == 0), r.stdout[-2000:]
    return summary["passed"], summary["total"], fails


# ------------------------------------------------------------------------------------------------ encoding


def encode(v):
    """A value as the vectors hold it: what JSON cannot say as {"$py": ...} (make_vectors.encode)."""
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return {"$py": "float", "v": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return {"$py": "int", "v": str(v)}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        return {k: encode(x) for k, x in v.items()}
    return v


def outcome(case: dict, fn) -> dict:
    try:
        case["expect"] = encode(fn())
    except Exception as e:  # noqa: BLE001 - every exception class is compared
        case["error"] = type(e).__name__
        case["message"] = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
    return case


def mutations(texts: list, n: int, seed: int, alphabet: str) -> list:
    """`n` seeded random edits (a character deleted, inserted, replaced, or a slice duplicated) of `texts`."""
    rnd = random.Random(seed)
    out = []
    for _ in range(n):
        t = rnd.choice(texts)
        for _ in range(rnd.randint(1, 3)):
            k = rnd.randrange(len(t) + 1)
            op = rnd.randrange(4)
            if op == 0 and t:
                t = t[:k] + t[k + 1:]
            elif op == 1:
                t = t[:k] + rnd.choice(alphabet) + t[k:]
            elif op == 2 and t:
                t = t[:k] + rnd.choice(alphabet) + t[k + 1:]
            else:
                j = rnd.randrange(len(t) + 1)
                a, b = min(j, k), max(j, k)
                t = t[:b] + t[a:b] + t[b:]
        out.append(t)
    return out


# ------------------------------------------------------------------------------------------------ cases

PY_CALLS = [
    "", "  \n ", "[]", "[f()]", "f()", "f(a=1)", "[get_weather(city='LA'), search(q=\"x\")]",
    "functions.get_time(tz = 'UTC', fmt=\"%H\")\nother(x=[1, 2.5, -3, +4.0, 1e3, .5, 1., 0x1F, 0o17, 0b101, 1_000])",
    "f(a=True, b=False, c=None, d=true, e=false, f=null)", "f(d={'k': 'v', \"n\": [1, (2, 3), ()], 'k': 2})",
    "f(s='a' \"b\" '''c\nd''' \"\"\"e\r\nf\"\"\")", r"f(s='\x41\u00e9\U0001F600\101\n\t\\\'\"\a\b\f\v\r\q')",
    "f(s='line\\\ncont')", "f(a=-0, b=-0.0, c=- 5, d=(1))", "f(a=1,)", "[f(a=1), g(b=2),]", "f(a=1), g(b=2)",
    "f(a=1),\ng(b=[\n1,\n2])\n", "f(1)", "f(a=1, a=2)", "f(*x)", "f(**k)", "f(a=b)", "f(a=g())", "f(a=1+2)",
    "f(a=f'x')", "f(a=r'x')", "f(a=b'x')", r"f(a='\N{DASH}')", "f(a={1, 2})", "f(a={1: 2})", "f(a=1j)",
    "f(a=1.5J)", "f(a=1) # c", "f(a=1); g()", "[f()] x", "f(a='x)", "f(a='x\ny')", "def(a=1)", "f.class(a=1)",
    "f(if=1)", "f(a=01)", "f(a=1__0)", "f(a=1_)", "f(a=0x)", "f(a=1e)", "f(a=1.2.3)", "f(a='\\x4')",
    "f(a='\\U00110000')", "f(a=" + "[" * 101 + "]" * 101 + ")", "[" + "f(a=" + "(" * 98 + "1" + ")" * 98 + ")]",
    "f(a=" + "9" * 4300 + ")", "f(a=" + "9" * 4301 + ")", "f(a=0x" + "F" * 40 + ")", "f(a=1e999, b=-1e999)",
    "f (a=1)", "f\n(a=1)", "f(a\n=\n1)", "[f\n(a=1)]", "f(a=1) g(b=2)", "ƒ(a=1)", "f(a='é😀\ud800')",
    "f(a=12345678901234567890, b=-9223372036854775808, c=9223372036854775808)",
]

JSON_TEXTS = [
    "", " ", "1", "-0", "1.5", "1.", "1e5", "1e", "1e+", "01", "-", "-I", "NaN", "Infinity", "-Infinity",
    "null", "nullnull", "true", "tru", "false", '"s"', '"a\\"b"', '"\\u00e9\\ud800"', '"\\x"', '"unterminated',
    '"ctrl\x01"', "[]", "[1, 2]", "[1,]", "{}", '{"a": 1}', '{"a": 1, "a": 2, "b": [true, null]}', '{"a" 1}',
    '{a: 1}', '{"a": 1,}', "[1 2]", "  {\"name\": \"f\", \"arguments\": {}}  ", '{"k": "é😀"}\n',
    "12 tail", "12. tail", "[1] tail", '{"a": 1} , {"b": 2}', "1, 2, 3", "1,", ", 1", "1 ,2", "[[[[]]]]",
    "[" * 512 + "]" * 512, "[" * 513 + "]" * 513, "[" * 600, '"' + "[" * 600 + '"', "9" * 4301,
    '[1, "' + "x" * 50 + '"]',
]


PARSER_TEXTS = [
    "42", " 42 ", "+7", "-0", "007", "1_000", "_1", "1__0", "1_", "\u0664\u0662", "\U0001d7d2\U0001d7d0", "\uff13",
    "\u2003 5 \u2003", "\x1c5", "5\x1c", "\x855", "\x7f5", "1e5", "1.5", ".5", "5.", ".", "-.5e-3", "1_0.5", "1._5",
    "inf", "-Infinity", "NaN", "nan ", "+nan", "0x10", "\u0661\u0662.\u0665", "true", "TRUE", "1", "0", "yes", "",
    "   ", "\t\n", "\u0130", "12345678901234567", "1e400", "-1e-400", "9" * 4300, "9" * 4301, "x" * 300,
    '{"a": 1, "a": 2, "b": [1, 2.0, -0.0, 1e2]}', "[NaN, Infinity, -Infinity]", '"\\ud83d\\ude00 \\u00e9 \\n"',
    '"\\ud83d"', '{"x": "tab\there"}', "[1, 2,]", '{"a" 1}', "\ufeff{}", " [ ] ", '{"k": tru}', "01", "-", "1.5e",
    '"unterminated', '{"a": 1} extra', "{name: \"v\", n2: 3}", "{ spaced: 1}", "{\u00fcn\u00ef: 1}",
    '{"k": <s>a "b" c</s>}', '<s>x</s>', '{<s>k</s>: <s>v\u00e9</s>}', '[<s>a</s>, <s>b', "\x01", "a\x02b",
    "name: alice\nage: 30", "a=1;b=2", "k: v: w\n\n  : empty key\nnocolon", "a: 1\r\nb: 2\u2028c: 3",
    "x: \\\"q\\\"", "x: [1, {\"y\": 2}]",
]
PARSER_ARGS = {
    "text": [{}, {"strip": False}, {"strip": 0}, {"strip": []}, {"strip": "no"}, {"strip": None}, {"strip": 0.0}],
    "int": [{}, {"strip": False}],
    "float": [{}, {"strip": False}],
    "bool": [{}, {"strip": False}],
    "json": [{}, {"allow_non_json": True}, {"unquoted_keys": True}, {"string_delims": [["<s>", "</s>"]]},
             {"string_delims": [["<s>", "</s>"]], "unquoted_keys": True, "allow_non_json": True, "strip": False},
             {"string_delims": "ab"}, {"string_delims": None}, {"string_delims": [["", ""]]},
             {"string_delims": [["<", ""]]}, {"string_delims": [["", ">"]]}, {"string_delims": {"<>": 1}},
             {"string_delims": [["<s>", "</s>"], ["[", "]"]], "unquoted_keys": 1}, {"string_delims": [5]},
             {"string_delims": [["a"]]}, {"string_delims": [["a", "b", "c"]]}, {"string_delims": 5},
             {"string_delims": [[1, 2]]}, {"string_delims": [], "allow_non_json": "yes"}, {"string_delims": ""},
             {"string_delims": ["<>"]}, {"string_delims": [{"<": 1, ">": 2}]}],
    "kv-lines": [{}, {"strip": False}, {"line_sep": ";", "kv_sep": "="}, {"kv_sep": ""}, {"line_sep": ""},
                 {"line_sep": None}, {"value_parser": {"name": "int"}}, {"value_parser": {"name": "nope"}},
                 {"value_parser": {"name": "json", "args": {"allow_non_json": True}}}, {"kv_sep": 5},
                 {"line_sep": 5}, {"value_parser": {"name": "python-calls"}}, {"value_parser": {"name": ["x"]}},
                 {"value_parser": {"name": 5}}, {"value_parser": {"name": None}}, {"value_parser": []},
                 {"value_parser": {}}, {"value_parser": {"name": "text", "args": {"strip": False}}},
                 {"value_parser": {"name": "json", "args": []}}, {"value_parser": {"name": "bool"}}],
}


def parser_cases() -> list:
    from chatparse.runtime.values.parsers import parse_content

    texts = PARSER_TEXTS + mutations(PARSER_TEXTS, 400, 3, " :=;\n\"{}[],<>/s.0123456789eE_-+x\u0663\u2003\x01")
    cases = []
    for name, arg_list in PARSER_ARGS.items():
        for args in arg_list:
            for text in texts:
                cases.append(outcome({"parser": name, "args": args, "text": text},
                                     lambda t=text, n=name, a=args: parse_content(t, n, json.loads(json.dumps(a)))))
    for args in [{}, [], None, "x"]:
        for name in ["text", "nope", "xml-inline", "python-calls"]:
            cases.append(outcome({"parser": name, "args": args, "text": "a: 1"},
                                 lambda n=name, a=args: parse_content("a: 1", n, a)))
    return cases


def coerce_cases() -> list:
    from chatparse.runtime.values.coerce import coerce

    raws = ["7", " 7 ", "7.0", "7.5", "1e3", "1_0", "nan", "inf", "-inf", "True", " false ", "1", "0", "null",
            "None", '{"a": 1}', "[1, 2]", "[1,", "\u0663", "x", "", "-0", "-0.0", "1e400", "1e20", "123456789012345678901",
            "9" * 4301, "4.0e22", " NULL", "\u2003true\u2003", '"s"', "2.5e-3", "0x1", "+5", "1.", ".5"]
    types = [["integer"], ["number"], ["boolean"], ["null"], ["object"], ["array"], ["string"], ["integer", "null"],
             ["number", "string"], ["null", "boolean", "integer"], ["unknown"], [], ["array", "object", "number"]]
    return [outcome({"coerce": r, "types": t}, lambda r=r, t=t: coerce(r, tuple(t))) for t in types for r in raws]


def _schema_tools() -> list:
    return [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"}, "s": {"type": "string"},
            "o": {"type": "object"}, "a": {"type": "array"}, "u": {"type": ["integer", "string"]},
            "z": {"anyOf": [{"type": "null"}, {"type": "number"}]}, "m": {"type": "string", "nullable": True},
            "l": {"type": "integer"}}}}},
        {"name": "g", "parameters": {"properties": {"x": {"type": "integer"}}}},
        "not a tool", {"function": {"name": 3}},
    ]


CALL_T = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}


def make_fields() -> list:
    """(field, bodies, captures list, tools or None) for the make cases."""
    xml_args = {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>"}
    kv_json = {"value_parser": {"name": "json"}, "line_sep": "\n", "kv_sep": "="}
    xml_bodies = ["<a>1</a><b>x</b>", "<i>10</i><s>10</s><u>1.50</u><n>3</n><b>TRUE</b><o>{\"k\": 1}</o>",
                  "<a>[{\\\"id\\\": \\\"1\\\"}]</a><b>\\\"[1]\\\"</b><c>a\\nb</c><d>\"[1]\"</d>", "<l>1</l><l>2</l><l>x</l>",
                  "", "no tags", "<a></a>"]
    calls = '[{"name": "f", "arguments": {"i": "7", "n": "2", "s": 5, "b": "true", "l": ["1", 2, "x"], "z": "null", ' \
            '"m": null, "u": "1e3", "o": "{\\"k\\": [1]}", "a": "[1]", "q": "1"}}, ' \
            '{"name": "g", "arguments": {"x": "3.0"}}, {"name": "h", "arguments": {"x": "1"}}, ' \
            '{"name": "f", "arguments": {"i": 1.0, "n": true, "s": null, "b": "0", "l": "-0", "u": 2.5, "z": "1e999", ' \
            '"m": "None", "o": [], "a": {}}}]'
    return [
        ({"name": "content", "content": "text", "content_args": {}}, ["  hi  ", ""], [{}], None),
        ({"name": "r", "content": "json", "content_args": {}, "transform": {"v": "{content}", "c": 1,
                                                                           "deep": ["{content.a.b}"]}},
         ['{"a": {"b": [1]}}', '{"a": 1}', '{"a": {}}', "[1]", "bad"], [{}, {"content": "cap"}], None),
        ({"name": "tool_calls", "content": "json", "content_args": {}, "transform": CALL_T, "transform_each": True},
         [calls, calls[:-1] + ", 5]", '{"name": "f"}', "[1]", "[]", '[{"name": "f", "arguments": {"i": "x"}}]'],
         [{}, {"id": "9"}],
         _schema_tools()),
        ({"name": "tool_calls", "content": "json", "content_args": {}, "transform": CALL_T, "transform_each": True,
          "argument_types": "schema"}, [calls], [{}], _schema_tools()),
        ({"name": "tool_calls", "content": "xml-inline", "content_args": {**xml_args, "value_parser": {"name": "json", "args": {"allow_non_json": True}}, "merge_duplicates": True},
          "transform": {"type": "function", "function": {"name": "f", "arguments": "{content}"}},
          "argument_types": "schema"}, xml_bodies, [{}], _schema_tools()),
        ({"name": "tool_calls", "content": "xml-inline", "content_args": {**xml_args, "value_parser": {"name": "json", "args": {"allow_non_json": True}}, "merge_duplicates": True},
          "transform": {"type": "function", "function": {"name": "f", "arguments": "{content}"}}},
         xml_bodies, [{}], _schema_tools()),
        ({"name": "args", "content": "xml-inline", "content_args": {**xml_args, "value_parser": {"name": "json"}},
          "escaped_json_values": True}, xml_bodies + ["<a>[{\\\"id\\\": 1}]</a><b>\\\"[1]\\\"</b><c>[1]</c><d>\"[1]\"</d>"],
         [{}], None),
        ({"name": "args", "content": "xml-inline", "escaped_json_values": True,
          "content_args": {**xml_args, "value_parser": {"name": "json", "args": {"allow_non_json": True}}}},
         xml_bodies, [{}], None),
        ({"name": "args", "content": "kv-lines", "content_args": kv_json, "escaped_json_values": True},
         ["a=1\nb=[\\\"x\\\"]\nc=\\\"[1]\\\"\nd=[1]", "a=1\nb=[\\\"x\\\"]\nc=\\\"[1]\\\"\nd=a\\nb\ne=oops",
          "x=\"[1]\"", "k"], [{}], None),
        ({"name": "tool_calls", "content": "kv-lines", "argument_types": "schema",
          "content_args": {"value_parser": {"name": "json", "args": {"allow_non_json": True}}},
          "transform": {"type": "function", "function": {"name": "f", "arguments": "{content}"}}},
         ["i: 10\ns: 10\nu: 1.50\nn: 3\nb: TRUE\no: {\"k\": 1}\nz: null\nm: null\nl: 2.0", "s: \"quoted\"\ni: \"5\"",
          "a: [1, 2]\ns: [1, 2]\nu: x"], [{}], _schema_tools()),
        ({"name": "calls", "content": "python-calls", "content_args": {}, "transform": CALL_T, "transform_each": True,
          "as_list": True}, ["[f(i='1'), g(x='2')]", "f(a=1)", "", "f(1)"], [{}], _schema_tools()),
        ({"name": "calls", "content": "json-values", "content_args": {}, "transform": CALL_T, "transform_each": True},
         ['{"name": "f", "arguments": {}}, {"name": "g", "arguments": {"x": "4"}}', "1 2", ""], [{}], _schema_tools()),
        ({"name": "calls", "content": "json", "content_args": {}, "as_list": True,
          "key_aliases": {"parameters": "arguments", "args": "arguments", "fn": "name"},
          "transform": CALL_T, "transform_each": True},
         ['{"fn": "f", "parameters": {"i": "1"}}', '[{"name": "f", "args": {}, "parameters": {}}, 3]',
          '{"name": "f", "arguments": {}, "parameters": 1}', '[{"args": 1, "parameters": 2, "name": "f"}]'],
         [{}], _schema_tools()),
        ({"name": "calls", "content": "json", "content_args": {}, "transform": CALL_T, "transform_each": True,
          "decode_json_strings": ["function.arguments", "function.x.y"]},
         ['[{"name": "f", "arguments": "{\\"i\\": \\"2\\"}"}]', '[{"name": "f", "arguments": "[1]"}]',
          '[{"name": "f", "arguments": "{bad"}]', '[{"name": "f", "arguments": " {} "}]'], [{}], _schema_tools()),
        ({"name": "calls", "content": "json", "content_args": {},
          "transform": {"id": "{id}", "type": "function", "function": {"name": "{name}", "x": "{id.k}"},
                        "l": ["{name}"]}, "optional_placeholders": ["id"]},
         ['{"a": 1}'], [{"name": "f"}, {"name": "f", "id": "7"}, {"name": "f", "id": {"k": 1}}, {}], None),
        ({"name": "calls", "content": "json", "content_args": {},
          "content_fallback": [{"content": "int", "content_args": {}},
                               {"content": "xml-inline", "content_args": xml_args}]},
         ['{"a": 1}', " 42 ", "<k>v</k>", "plain"], [{}], None),
        ({"name": "calls", "content": "json", "content_args": {},
          "content_fallback": [{"content": "kv-lines", "content_args": {"value_parser": {"name": "nope"}}}]},
         ["a: 1", "{}", "nothing"], [{}], None),
        ({"name": "c", "content": "text", "content_args": {},
          "unwrap_pattern": r"<co(?:: [^>]*)?>(?P<keep>.*?)</co: [^>]*>"},
         ["foo <co>bar</co: 0:[1,2]> baz <co: 1>q</co: 2>", "a <co>b", ""], [{}], None),
        ({"name": "c", "content": "json", "content_args": {"string_delims": [["<s>", "</s>"]], "unquoted_keys": True},
          "unwrap_pattern": "x*"}, ['{a: <s>he said "hi"</s>, b: 1}', "{é: 1}", "xx{a:1}x"], [{}], None),
        ({"name": "n", "content": "float", "content_args": {}, "transform": "{content}"}, ["1.5", "x"], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+)(?:=(?P<value>\w*))?;"}},
         ["a=1;b;c=;", ""], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+)(?:=(?P<value>\w*))?;",
                                                                 "value_parser": {"name": "int"}}}, ["a=1;b;"], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+)(?:=(?P<value>\w*))?;",
                                                                 "value_parser": {"name": "text", "args": {"strip": False}}}},
         ["a=1;b;"], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<k>\w+);"}}, ["a;", ""], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+);"}}, ["a;b;a;"], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>\w+)|(?P<value>\d)"}}, ["a", "1"],
         [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {}}, ["a"], [{}], None),
        ({"name": "x", "content": "xml-inline", "content_args": {"tag_pattern": r"(?P<key>a(?P<value>x)*)",
                                                                 "merge_duplicates": 1}}, ["axxa aax"], [{}], None),
        # Python's object sharing: one dict at two places of the output, edited in place by the steps after it
        ({"name": "tool_calls", "content": "json", "content_args": {},
          "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"},
                        "raw": "{arguments}", "again": {"function": {"name": "{name}", "arguments": "{arguments}"}}},
          "transform_each": True, "decode_json_strings": ["function.arguments", "raw.x"]},
         ['[{"name": "f", "arguments": {"i": "1", "x": "{\\"k\\": \\"2\\"}", "l": ["3", 4]}}]',
          '[{"name": "f", "arguments": "{\\"i\\": \\"5\\"}"}]', '[{"name": "g", "arguments": {"x": "6"}}]'],
         [{}], _schema_tools()),
        ({"name": "tool_calls", "content": "json", "content_args": {}, "argument_types": "schema",
          "transform": [{"type": "function", "function": "{content}"}, {"function": "{content}"}, "{content}"],
          "decode_json_strings": ["function.arguments"]},
         ['{"name": "f", "arguments": {"i": "1", "s": 2, "x": {"n": 1}}}', '{"name": "f", "arguments": "{\\"i\\": \\"7\\"}"}'],
         [{}], _schema_tools()),
        ({"name": "tool_calls", "content": "json", "content_args": {}, "transform_each": True,
          "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"},
                        "l": "{arguments.l}", "o": "{arguments.o}"}},
         ['[{"name": "f", "arguments": {"l": ["1", {"a": "2"}, 3], "o": {"k": "3"}, "i": "4", "s": [1, "x"]}}]'],
         [{}], _schema_tools()),
        ({"name": "tool_calls", "content": "json", "content_args": {}, "transform_each": True,
          "argument_types": "schema",
          "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"},
                        "l": "{arguments.l}", "o": "{arguments.o}", "s": "{arguments.s}"}},
         ['[{"name": "f", "arguments": {"l": ["1", {"a": "2"}, 3], "o": {"k": "3"}, "i": "4", "s": [1, "x"]}}]'],
         [{}], _schema_tools()),
        ({"name": "c", "content": "json", "content_args": {},
          "transform": {"whole": "{content}", "part": "{content.a}", "deep": "{content.a.b}"},
          "decode_json_strings": ["whole.a.b.s", "part.b.t", "deep.u"]},
         ['{"a": {"b": {"s": "{\\"x\\": 1}", "t": "{}", "u": "[1]"}}}'], [{}], None),
        ({"name": "c", "content": "text", "content_args": {}, "unwrap_pattern": r"<(?P<kept>b)>"}, ["a<b>c"], [{}], None),
        ({"name": "c", "content": "text", "content_args": {}, "unwrap_pattern": r"\[(?P<keep>\w*)\]|(?P<keep2>x)"},
         ["[a] [] x [b]c"], [{}], None),
        ({"name": "n", "content": "int", "content_args": {}, "transform": ["{content}", "{missing}"]}, ["3"], [{"z": 1}],
         None),
    ]


def random_call_fields(n: int, seed: int) -> list:
    """Seeded random tool calls written as xml-inline tags or kv-lines, with the value parsers and both typing
    rules: what a model writes for a tool with typed parameters."""
    rnd = random.Random(seed)
    keys = ["i", "n", "b", "s", "o", "a", "u", "z", "m", "l", "extra"]
    texts = ["10", "1.50", "true", "TRUE", "null", "None", "x", "[1, 2]", '{"a": 1}', "", "  7 ", "-0", "1e3", "1e999",
             "nan", '"q"', "0", "3.0", "\u0663", "[1,", "{", "\\\"s\\\"", "1_0"]
    parsers = [None, {"name": "json", "args": {"allow_non_json": True}}, {"name": "json"}, {"name": "int"},
               {"name": "text"}, {"name": "float"}]
    xml_args = {"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</(?P=key)>"}
    out = []
    for _ in range(n):
        kv = rnd.random() < 0.5
        args = {} if kv else dict(xml_args)
        vp = rnd.choice(parsers)
        if vp is not None:
            args["value_parser"] = vp
        if not kv and rnd.random() < 0.5:
            args["merge_duplicates"] = True
        field = {"name": "tool_calls", "content": "kv-lines" if kv else "xml-inline", "content_args": args,
                 "transform": {"type": "function", "function": {"name": rnd.choice(["f", "f", "g", "h"]),
                                                                "arguments": "{content}"}}}
        if rnd.random() < 0.6:
            field["argument_types"] = "schema"
        if rnd.random() < 0.2:
            field["escaped_json_values"] = True
        pairs = [(rnd.choice(keys), rnd.choice(texts)) for _ in range(rnd.randint(0, 5))]
        body = "\n".join(f"{k}: {v}" for k, v in pairs) if kv else "".join(f"<{k}>{v}</{k}>" for k, v in pairs)
        out.append((field, [body], [{}], _schema_tools()))
    return out


def random_transform_fields(n: int, seed: int) -> list:
    """Seeded random transforms (nested dicts and lists of constants and placeholders, some optional, with and
    without transform_each) over random JSON bodies and captures: the transform's values, first failing
    placeholder and messages."""
    rnd = random.Random(seed)
    roots = ["content", "name", "arguments", "id", "x", "\u00e9t\u00e9", "content", "missing"]
    keys = ["a", "b", "name", "arguments", "k\u00e9", "1"]
    consts = [1, -2.5, True, None, "text", "{not a placeholder", "{a} b", [], {}, "{}"]

    def placeholder():
        path = [rnd.choice(roots)] + [rnd.choice(keys) for _ in range(rnd.choice([0, 0, 1, 2]))]
        return "{" + ".".join(path) + "}"

    def node(depth):
        r = rnd.random()
        if depth > 2 or r < 0.35:
            return placeholder()
        if r < 0.5:
            return rnd.choice(consts)
        if r < 0.75:
            return {rnd.choice(keys + ["type", "function"]): node(depth + 1) for _ in range(rnd.randint(0, 4))}
        return [node(depth + 1) for _ in range(rnd.randint(0, 3))]

    def jvalue(depth):
        r = rnd.random()
        if depth > 2 or r < 0.3:
            return rnd.choice([1, "s", None, 2.5, True, [1], "x\u00e9"])
        if r < 0.8:
            return {rnd.choice(keys): jvalue(depth + 1) for _ in range(rnd.randint(0, 4))}
        return [jvalue(depth + 1) for _ in range(rnd.randint(0, 3))]

    out = []
    for _ in range(n):
        field = {"name": "f", "content": "json", "content_args": {}, "transform": node(0)}
        each = rnd.random() < 0.4
        if each:
            field["transform_each"] = True
        if rnd.random() < 0.4:
            field["optional_placeholders"] = rnd.sample(roots[1:], rnd.randint(1, 3))
        if rnd.random() < 0.5:
            field["decode_json_strings"] = rnd.sample(["a", "b.a", "name", "arguments", "a.b", "1"], rnd.randint(1, 3))
        body = [jvalue(1) for _ in range(rnd.randint(0, 3))] if each and rnd.random() < 0.8 else jvalue(0)
        captures = {k: rnd.choice(["v", "", "7"]) for k in rnd.sample(roots[1:6], rnd.randint(0, 3))}
        out.append((field, [json.dumps(body)], [captures], None))
    return out


def make_cases() -> list:
    from chatparse.compiler.writer import translate_js
    from chatparse.runtime.values.coerce import tool_params
    from chatparse.runtime.values.schema_typing import schema_typer
    from chatparse.runtime.values.transform import value_maker

    cases = []
    for field, bodies, capture_list, tools in make_fields() + random_call_fields(300, 4) + random_transform_fields(400, 5):
        patterns = {}
        args = field.get("content_args") or {}
        for a in [args] + [e.get("content_args") or {} for e in field.get("content_fallback", [])]:
            if isinstance(a, dict) and isinstance(a.get("tag_pattern"), str):
                patterns[a["tag_pattern"]] = translate_js(a["tag_pattern"])
        if field.get("unwrap_pattern"):
            patterns[field["unwrap_pattern"]] = translate_js(field["unwrap_pattern"])
        for body in bodies:
            for captures in capture_list:
                for with_tools in ([False, True] if tools is not None else [False]):
                    f = json.loads(json.dumps(field))

                    def made(f=f, body=body, captures=captures, with_tools=with_tools):
                        value = value_maker(f)(body, dict(captures))
                        if with_tools:
                            value = schema_typer(f, value_maker)(value, body, dict(captures), tool_params(tools))
                        return value

                    make = {"field": field, "body": body, "captures": captures}
                    if with_tools:
                        make["tools"] = tools
                    cases.append(outcome({"make": make, "regex": patterns}, made))
    return cases


def extension_cases() -> list:
    from chatparse.runtime.values.json_end import JsonEnd
    from chatparse.runtime.values.json_values import parse_json_values
    from chatparse.runtime.values.pycalls import parse_python_calls

    def json_end(text):
        je = JsonEnd(0)
        je.advance(text, 0, len(text))
        je.finish()
        return None if je.dead else je.end

    cases = []
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))  # (encode() walks the 512-deep values json-values accepts)
    try:
        return _extension_cases(cases, json_end, parse_json_values, parse_python_calls)
    finally:
        sys.setrecursionlimit(limit)


def _extension_cases(cases, json_end, parse_json_values, parse_python_calls) -> list:
    py_texts = PY_CALLS + mutations(PY_CALLS[:40], 3000, 1, "()[]{},.=:'\"\\ \n\t_-+0123456789abcxjeE#*é")
    for t in py_texts:
        cases.append(outcome({"python_calls": t}, lambda t=t: parse_python_calls(t)))
    js_texts = JSON_TEXTS + mutations(JSON_TEXTS[:48], 3000, 2, "[]{},:\"\\ \n\t.-+0123456789eEnulltrfaINé\x01")
    for t in js_texts:
        cases.append(outcome({"json_values": t}, lambda t=t: parse_json_values(t)))
        cases.append(outcome({"json_end": t}, lambda t=t: json_end(t)))
    return cases


# ------------------------------------------------------------------------------------------------ tests


def test_values_vectors_all_pass(runner, tmp_path):
    """tests/vectors/values.json, the cases every runtime runs: all 2056 pass in C."""
    cases = json.loads((VECTORS / "values.json").read_text(encoding="utf-8"))["cases"]
    passed, total, fails = _run(runner, cases, tmp_path)
    assert total == len(cases) == 2056
    assert passed == total, "\n".join(fails[:20])


def test_extension_parsers_and_json_end_match_python(runner, tmp_path):
    """python-calls, json-values and close_json_end's tracker: value, or error class and message, as Python's,
    on hand-picked texts and 3000 seeded mutations each; the tracker the same however the text is fed."""
    cases = extension_cases()
    passed, total, fails = _run(runner, cases, tmp_path)
    assert total == len(cases)
    assert passed == total, f"{total - passed} of {total} differ:\n" + "\n".join(fails[:30])


def test_content_parsers_and_coercion_match_python(runner, tmp_path):
    """The base content parsers with many content_args (bad ones too) and coercion: value, or error class and
    message, as Python's, on the vectors' kind of texts plus 400 seeded mutations."""
    cases = parser_cases() + coerce_cases()
    passed, total, fails = _run(runner, cases, tmp_path)
    assert total == len(cases)
    assert passed == total, f"{total - passed} of {total} differ:\n" + "\n".join(fails[:30])


def test_region_values_and_typing_match_python(runner, tmp_path):
    """A region's value (cp_values_make) with every value step, and tool typing (both rules), as Python's."""
    cases = make_cases()
    passed, total, fails = _run(runner, cases, tmp_path)
    assert total == len(cases) > 1000
    assert passed == total, f"{total - passed} of {total} differ:\n" + "\n".join(fails[:30])


def test_allocation_failures_end_in_memory_error(runner, tmp_path):
    """native/tools/values_oom.c: every allocation of 22 value-layer operations failed in turn (malloc, calloc and
    realloc wrapped at link time) ends in MemoryError, with no crash, no other error and no leak (AddressSanitizer
    and LeakSanitizer)."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "values_oom"
    build = subprocess.run([cc, "-std=c11", "-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
                            f"-I{NATIVE / 'src'}", f"-I{NATIVE / 'include'}", str(NATIVE / "tools" / "values_oom.c"),
                            str(BUILD / "libchatparse.a"), "-lpcre2-8", "-lm",
                            "-Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc", "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1"})
    points = [int(m) for m in re.findall(r"(\d+) allocation points", r.stdout)]
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]
    assert len(points) == 22 and sum(points) > 1000, r.stdout


def test_runner_fails_on_edited_expectations(runner, tmp_path):
    """Edited expectations fail: a value, an error class, an error message, an int made a float."""
    cases = json.loads((VECTORS / "values.json").read_text(encoding="utf-8"))["cases"][330:380]
    edited = json.loads(json.dumps(cases))
    ok = [i for i, c in enumerate(edited) if "expect" in c]
    bad = [i for i, c in enumerate(edited) if "error" in c]
    edited[ok[0]]["expect"] = "zzz"
    edited[bad[0]]["error"] = "TypeError" if edited[bad[0]]["error"] != "TypeError" else "ValueError"
    extra = [outcome({"python_calls": "f(1)"}, lambda: 1 / 0), {"python_calls": "f(a=1)", "expect": [
        {"name": "f", "arguments": {"a": 1.0}}]}]
    extra[0]["error"], extra[0]["message"] = "ValueError", "python-calls: wrong words at offset 2"
    passed, total, fails = _run(runner, edited + extra, tmp_path)
    assert total == 52 and passed == 48, fails
