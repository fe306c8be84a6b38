"""Datasets of generations (issue #20): `chatparse.data.arrow`, `chatparse parse-file`, Ray Data and `datasets`.

Every path is checked against single-process parsing of the same rows: `CompiledTemplate.parse_batch` (or
`parse_tokens_batch`) over the rows that parse, and, for the rows that raise, the exception's class and
message in the ``error`` column. The rows come from `bench.datasets_gen` (the bundled templates' formats,
reasoning / content / tool calls, about one row in twenty malformed). The Ray and `datasets` tests parse
100,000 rows each in 2 worker processes; they skip, saying why, without ray / datasets.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from deps import need
from hypothesis import given, settings
from hypothesis import strategies as st

pa = need("pyarrow", "the Arrow columns and parse-file; the `data` extra")
pq = need("pyarrow.parquet")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import chatparse  # noqa: E402
from bench.datasets_gen import FAMILIES, generations  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.data.arrow import (  # noqa: E402
    MESSAGE_SCHEMA, compiled_of, error_of, parse_arrow, parse_arrow_tokens, table_bytes, to_messages,
)

BIG = 100_000  # rows in the Ray / datasets runs


def expected(compiled, texts, prefixes, tools=None):
    """What single-process parsing gives per row: the message (from parse_batch over the rows that parse)
    or the error text of the row's exception."""
    out: list = [None] * len(texts)
    good = []
    for i, (t, p) in enumerate(zip(texts, prefixes)):
        try:
            compiled.parse(t, prefix=p, tools=None if tools is None else tools[i])
            good.append(i)
        except Exception as e:  # noqa: BLE001
            out[i] = error_of(e)
    if tools is None:
        msgs = compiled.parse_batch([texts[i] for i in good], [prefixes[i] for i in good])
    else:  # parse_batch takes one tools list for all rows: one call per row's tools
        msgs = [compiled.parse_batch([texts[i]], [prefixes[i]], tools=tools[i])[0] for i in good]
    for i, m in zip(good, msgs):
        out[i] = m
    return out


def same(a, b) -> bool:
    """Equal as JSON data, types included (1 is not 1.0 is not True), key order aside."""
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def rows_of(table, column_prefix=""):
    return to_messages(table, column_prefix=column_prefix)


# ------------------------------------------------------------------------------------------------ parse_arrow
@pytest.mark.parametrize("name", FAMILIES)
def test_parse_arrow_is_parse_batch(name):
    compiled = chatparse.compile_template(templates.get(name))
    prefixes, texts = generations(name, 3000, seed=1)
    want = expected(compiled, texts, prefixes)
    assert sum(isinstance(w, str) for w in want) > 0 or name in ("qwen3_coder", "glm45", "gpt_oss")
    table = pa.table({"prompt": prefixes, "text": texts})
    got = parse_arrow(table, compiled, prefix_column="prompt")
    assert isinstance(got, pa.Table) and got.schema == MESSAGE_SCHEMA
    assert same(rows_of(got), want)
    # a record batch gives a record batch; a table of many chunks, the same rows
    rb = parse_arrow(table.to_batches()[0], f"{name}:base", prefix_column="prompt")
    assert isinstance(rb, pa.RecordBatch) and same(rows_of(rb), want)
    chunked = pa.concat_tables([table.slice(0, 1000), table.slice(1000)])
    assert same(rows_of(parse_arrow(chunked, compiled, prefix_column="prompt")), want)


def test_typed_columns_and_errors():
    prompt = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
    texts = [
        '<think>\nhm\n</think>\n\nSure.<tool_call>\n{"name": "w", "arguments": {"city": "Paris", "n": 1.0}}\n'
        "</tool_call><|im_end|>",
        "Just text<|im_end|>",
        '<tool_call>\n{"name": "w", "arguments": {city: Paris}}\n</tool_call><|im_end|>',
        None,
    ]
    got = parse_arrow(pa.table({"text": pa.array(texts, pa.string())}), "qwen3:base", prefix=prompt)
    rows = got.to_pylist()
    assert rows[0] == {"role": "assistant", "reasoning_content": "hm", "content": "Sure.",
                       "tool_calls": [{"name": "w", "arguments": '{"city": "Paris", "n": 1.0}', "type": "function",
                                       "id": None}], "extra": None, "error": None}
    assert rows[1]["content"] == "Just text" and rows[1]["tool_calls"] is None and rows[1]["reasoning_content"] is None
    assert rows[2]["error"].startswith("ValueError: json parser could not parse region as JSON.")
    assert all(rows[2][k] is None for k in ("role", "content", "tool_calls", "extra"))
    assert rows[3]["error"] == "ValueError: `text_column` 'text' is null in this row"
    with pytest.raises(ValueError, match="could not parse"):  # what the row's own parse raises
        chatparse.parse_response(texts[2], templates.get("qwen3"), prefix=prompt)


def test_extra_holds_what_the_typed_columns_cannot():
    template = {"defaults": {"role": "assistant", "model": "m1"}, "start_anchor": "<a>",
                "fields": {"thoughts": {"open": "<t>", "close": "</t>"},
                           "content": {"open": "<j>", "close": "</j>", "content": "json"},
                           "tool_calls": {"open": "<c>", "close": "</c>", "content": "json", "repeats": True}}}
    texts = ['<t>hm</t><j>{"a": [1, 2.5, null, true]}</j>',
             '<c>{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}</c>',
             "<c>[1, 2]</c>", '<j>"text"</j>', "<c>{bad</c>"]
    compiled = chatparse.compile_template(template)
    got = parse_arrow(pa.table({"text": texts}), compiled, prefix="")
    rows = got.to_pylist()
    assert json.loads(rows[0]["extra"]) == {"content": {"a": [1, 2.5, None, True]}, "model": "m1", "thoughts": "hm"}
    assert rows[0]["content"] is None
    assert rows[1]["tool_calls"] == [{"name": "f", "arguments": '{"x": 1}', "type": "function", "id": "c1"}]
    assert json.loads(rows[2]["extra"]) == {"tool_calls": [[1, 2]], "model": "m1"} and rows[2]["tool_calls"] is None
    assert rows[3]["content"] == "text"
    assert rows[4]["error"] and rows[4]["extra"] is None
    assert same(rows_of(got), expected(compiled, texts, [""] * len(texts)))


def test_lone_surrogates_keep_the_batch_and_the_message():
    """A JSON ``\\ud800`` escape gives a string Arrow cannot hold (not UTF-8): JSON text columns escape it,
    a plain string column moves it to ``extra``; the batch never raises and every message comes back exact."""
    texts = ['<tool_call>\n{"name": "f", "arguments": {"a": "\\ud800"}}\n</tool_call>',
             '<think>a</think>b<tool_call>\n{"name": "g", "arguments": {}}\n</tool_call>'
             '<tool_call>\n{"name": "f\\udc00", "arguments": {"a": "\\ud800"}}\n</tool_call>',
             '<tool_call>\n{"name": "g", "arguments": {"x": [1, NaN]}}\n</tool_call>',
             '<tool_call>\n{"name": "h", "arguments": {"b": 1}}\n</tool_call>', "plain"]
    compiled = chatparse.compile_template(templates.get("qwen3"))
    got = parse_arrow(pa.table({"text": texts}), compiled, prefix="")
    rows = got.to_pylist()
    assert rows[0]["tool_calls"][0]["arguments"] == '{"a": "\\ud800"}'  # escaped JSON text, still typed
    assert rows[1]["tool_calls"] is None and json.loads(rows[1]["extra"])["tool_calls"][1]["function"]["name"] \
        == "f\udc00"
    assert rows[3]["tool_calls"][0]["arguments"] == '{"b": 1}'  # the rows after a repaired one keep their calls
    assert same(rows_of(got), expected(compiled, texts, [""] * len(texts)))
    assert rows_of(got)[0]["tool_calls"][0]["function"]["arguments"] == {"a": "\ud800"}


# messages of every shape a template could make: the typed columns' usual one, and what they cannot hold
_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True, width=32),
                       st.sampled_from(["x", "é", "\ud800", "a\udc00b", ""]))
_json = st.recursive(_json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.sampled_from("abc"), inner, max_size=3)),
                     max_leaves=6)
_text = st.one_of(st.sampled_from(["hi", "", "é \n", "\ud800"]), st.none(), st.integers(0, 3),
                  st.lists(_json_leaf, max_size=2))
_function = st.fixed_dictionaries({}, optional={
    "name": st.one_of(st.sampled_from(["f", "g\udc00"]), st.none(), st.integers()), "arguments": _json,
    "extra": _json_leaf})
_call = st.one_of(st.fixed_dictionaries({"function": _function}, optional={
    "type": st.one_of(st.just("function"), st.none(), st.integers()), "id": st.one_of(st.just("c1"), st.none()),
    "index": st.integers(0, 2)}), _json_leaf, st.fixed_dictionaries({}, optional={"type": st.just("function")}))
_message = st.fixed_dictionaries({}, optional={"role": _text, "reasoning_content": _text, "content": _text,
                                               "tool_calls": st.one_of(st.lists(_call, max_size=3), _json_leaf,
                                                                       st.tuples(_call)),
                                               "model": _json_leaf})
_usual = st.fixed_dictionaries({"role": st.just("assistant")}, optional={
    "content": st.text(max_size=5), "reasoning_content": st.text(max_size=5),
    "tool_calls": st.lists(st.fixed_dictionaries({"type": st.just("function"), "function": st.fixed_dictionaries(
        {"name": st.text(max_size=3), "arguments": st.dictionaries(st.text(max_size=2), st.integers(), max_size=2)})}),
        max_size=3)})


_ONE_CALL = {"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}
_MUTATIONS = [  # one thing the typed columns cannot hold, in an otherwise usual message
    lambda m: {**m, "model": "m1"}, lambda m: {**m, "content": None}, lambda m: {**m, "reasoning_content": 3},
    lambda m: {**m, "role": ["a"]}, lambda m: {**m, "tool_calls": (_ONE_CALL,)}, lambda m: {**m, "tool_calls": {}},
    lambda m: {**m, "tool_calls": None}, lambda m: {**m, "tool_calls": [_ONE_CALL, "x"]},
    lambda m: {**m, "tool_calls": [{**_ONE_CALL, "index": 0}]},
    lambda m: {**m, "tool_calls": [{**_ONE_CALL, "id": None}]},
    lambda m: {**m, "tool_calls": [{**_ONE_CALL, "type": 1}]}, lambda m: {**m, "tool_calls": [{"type": "function"}]},
    lambda m: {**m, "tool_calls": [{**_ONE_CALL, "function": "f"}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": 1, "arguments": {}}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f", "other": {}}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f", "arguments": {}, "other": 1}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f"}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f", "arguments": float("nan")}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f", "arguments": "\ud800"}}]},
    lambda m: {**m, "tool_calls": [{"function": {"name": "f\udc00", "arguments": 1}}]},
    lambda m: {**m, "content": "a\ud800"},
]
# a dict call with a dict function, with up to two of its keys dropped, renamed, set to another value or added
_CALL_EDITS = [("type", None), ("type", 2), ("id", None), ("id", 3), ("index", 0), ("name", None), ("name", 1),
               ("arguments", None), ("other", 1), ("-type", None), ("-id", None), ("-name", None),
               ("-arguments", None), ("~arguments", "other")]


def _edited_call(edits) -> dict:
    call, function = {"type": "function", "id": "c1"}, {"name": "f", "arguments": {}}
    for key, value in edits:
        target = function if key.lstrip("-~") in ("name", "arguments", "other") else call
        if key.startswith("-"):
            target.pop(key[1:], None)
        elif key.startswith("~"):  # (renamed)
            if key[1:] in target:
                target[value] = target.pop(key[1:])
        else:
            target[key] = value
    return {**call, "function": function}


_ONE_CALL_SHAPES = st.lists(st.sampled_from(_CALL_EDITS), max_size=2).map(_edited_call)
_nearly = st.tuples(_usual, st.sampled_from(_MUTATIONS)).map(lambda mf: mf[1](mf[0]))


@settings(max_examples=400, deadline=None)
@given(rows=st.lists(st.one_of(st.tuples(st.just("usual"), _usual), st.tuples(st.just("usual"), _usual),
                               st.tuples(st.just("usual"), _usual), st.tuples(st.just("any"), _message),
                               st.tuples(st.just("any"), _nearly), st.just(("error", None))), max_size=150))
def test_columns_built_by_column_are_those_built_row_by_row(rows):
    """`parse_arrow` builds a batch's columns column by column (`_typed_arrays`) when every message fits
    them exactly, else halves the batch down to 32 rows built row by row (`_Columns`): both give the same
    arrays, for messages of any shape (other keys, None values, non-string texts, calls of other shapes,
    NaN and lone surrogates), failed rows among them; a batch of usual messages goes column by column."""
    from chatparse.data.arrow import _FAILED, _Columns, _message_parts

    messages = [_FAILED if kind == "error" else m for kind, m in rows]
    errors = ["ValueError: bad row" if kind == "error" else None for kind, _ in rows]
    cols = _Columns()
    for m, e in zip(messages, errors):
        cols.add(m) if e is None else cols.fail(e)
    want = cols.arrays()
    parts: list = []
    _message_parts(messages, errors, parts)
    got = [pa.concat_arrays(c) for c in zip(*parts)] if parts else want
    for g, w, f in zip(got, want, MESSAGE_SCHEMA):
        assert g.type == w.type == f.type and g.equals(w), f.name
    back = to_messages(pa.Table.from_arrays(got, schema=MESSAGE_SCHEMA))
    assert same(back, [e if e is not None else m for m, e in zip(messages, errors)])
    if all(kind != "any" for kind, _ in rows):
        assert len(parts) == 1  # the usual messages all go the column-by-column way


@settings(max_examples=1000, deadline=None)
@given(calls=st.lists(st.one_of(_call, _ONE_CALL_SHAPES), max_size=6))
def test_call_fit_flags_are_call_fits(calls):
    """The per-call flags `_typed_arrays` computes by C-level passes, where a batch's calls are all dicts
    with dict functions, are `_call_fits` of each call (keys, None values, types, the function's two keys)."""
    from chatparse.data.arrow import _call_columns, _call_fit_flags, _call_fits

    columns = _call_columns(calls)
    if columns is None:
        assert not all(type(c) is dict and type(c.get("function")) is dict for c in calls)
        return
    assert list(_call_fit_flags(calls, *columns)) == list(map(_call_fits, calls))


@pytest.mark.parametrize("odd", [{"role": "assistant", "model": "m1"}, {"role": "assistant", "content": None},
                                 {"tool_calls": [{"function": {"name": "f", "argu<x>ments": {}}}]}])
def test_one_odd_message_costs_its_own_row(odd):
    """A message the typed columns cannot hold (another key, a None text) goes row by row alone: the rows
    before and after it stay column by column, one part each, instead of halving the batch around it level
    by level (which re-checked each half and built about ten parts). One whose only oddity is a call of
    another shape (about one generation in 2,000 of bench/datasets_gen.py's mix) does not even leave the
    column-by-column way: its list goes to ``extra`` there. Either way the arrays are those built row by
    row."""
    from chatparse.data.arrow import _Columns, _message_parts

    usual = {"role": "assistant", "content": "hi", "tool_calls": [_ONE_CALL]}
    messages = [usual] * 700 + [odd] + [usual] * 323
    errors = [None] * len(messages)
    parts: list = []
    _message_parts(messages, errors, parts)
    # a call of another shape does not even leave the column-by-column way (its list goes to `extra` there)
    assert [len(p[0]) for p in parts] == ([1024] if "tool_calls" in odd else [700, 1, 323])
    cols = _Columns()
    for m in messages:
        cols.add(m)
    for g, w in zip((pa.concat_arrays(c) for c in zip(*parts)), cols.arrays()):
        assert g.equals(w)


def test_shared_prefix_keep_columns_and_column_prefix():
    prefixes, texts = generations("hermes", 500, seed=2)
    shared = prefixes[0]
    table = pa.table({"id": list(range(500)), "text": texts, "content": ["x"] * 500})
    with pytest.raises(ValueError, match=r"already has column\(s\) \['content'\].*column_prefix"):
        parse_arrow(table, "hermes:base", prefix=shared, keep_columns=True)
    got = parse_arrow(table, "hermes:base", prefix=shared, keep_columns=True, column_prefix="parsed_")
    assert got.column_names[:3] == ["id", "text", "content"]
    assert got.column_names[3:] == ["parsed_" + n for n in MESSAGE_SCHEMA.names]
    want = expected(chatparse.compile_template(templates.get("hermes")), texts, [shared] * 500)
    assert same(rows_of(got, "parsed_"), want)


def test_tools_column_per_row():
    compiled = chatparse.compile_template(templates.get("qwen3_coder"))
    prefixes, texts = generations("qwen3_coder", 400, seed=3)
    schema = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "integer"}, "limit": {"type": "number"},
                                         "query": {"type": "object"}}}}}
    tools = [[schema] if i % 2 else None for i in range(400)]
    tools = [[{**schema, "function": {**schema["function"], "name": n}} for n in
              ("get_weather", "search", "read_file", "calculator", "book_flight", "lookup_user")]
             if i % 2 else None for i in range(400)]
    want = expected(compiled, texts, prefixes, tools)
    assert not same(want, expected(compiled, texts, prefixes))  # the schemas do change some rows
    col = pa.array([None if t is None else json.dumps(t) for t in tools], pa.string())
    got = parse_arrow(pa.table({"p": prefixes, "text": texts, "tools": col}), compiled, prefix_column="p",
                      tools_column="tools")
    assert same(rows_of(got), want)
    bad = pa.table({"text": ["x", "y"], "tools": ["[]", "{not json"]})
    rows = parse_arrow(bad, compiled, prefix="", tools_column="tools").to_pylist()
    assert rows[0]["error"] is None and rows[1]["error"].startswith("ValueError: `tools_column` 'tools': row 1:")


def test_arguments_name_what_is_wrong():
    table = pa.table({"text": ["a"], "n": [1]})
    with pytest.raises(KeyError, match=r"`text_column`: no column 'txt' in the input \(its columns: \['text', 'n'\]\)"):
        parse_arrow(table, "qwen3:base", text_column="txt", prefix="")
    with pytest.raises(TypeError, match="`prefix_column`: column 'n' must hold strings, it holds int64"):
        parse_arrow(table, "qwen3:base", prefix_column="n")
    with pytest.raises(ValueError, match="requires `prefix`"):
        parse_arrow(table, "qwen3:base")
    with pytest.raises(ValueError, match="`template`: 'nope' is neither a bundled template"):
        parse_arrow(table, "nope", prefix="")
    with pytest.raises(TypeError, match="pyarrow Table or RecordBatch"):
        parse_arrow({"text": ["a"]}, "qwen3:base", prefix="")


def test_template_forms_and_table_bytes(tmp_path):
    data = table_bytes("qwen3:base")
    assert isinstance(data, bytes) and b"response_template" not in data[:4]
    from_bytes = compiled_of(data)
    assert from_bytes.spec == chatparse.compile_template(templates.get("qwen3")).spec
    path = tmp_path / "tokenizer_config.json"
    path.write_text(json.dumps({"response_template": templates.get("qwen3")}))
    assert compiled_of(path).spec == from_bytes.spec
    with pytest.raises(ValueError, match="not valid table-format bytes"):
        compiled_of(b"garbage")


# ------------------------------------------------------------------------------------------------ token ids
def test_parse_arrow_tokens_is_parse_tokens_batch():
    tokenizers = need("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    prefixes, texts = generations("qwen3", 1500, seed=4)
    specials = ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts[:500], trainer=trainers.BpeTrainer(
        vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=specials,
        show_progress=False))
    binding = chatparse.bind(templates.get("qwen3"), tok)
    ids = [tok.encode(t).ids for t in texts]
    pids = [tok.encode(p).ids for p in prefixes]
    want: list = []
    for i in range(len(ids)):
        try:
            want.append(chatparse.parse_tokens_batch([ids[i]], binding, prefix_ids=[pids[i]])[0])
        except Exception as e:  # noqa: BLE001
            want.append(error_of(e))
    assert sum(isinstance(w, str) for w in want) > 10
    table = pa.table({"ids": pa.array(ids, pa.list_(pa.int32())), "pids": pa.array(pids, pa.list_(pa.int64())),
                      "prompt": prefixes})
    got = parse_arrow_tokens(table, binding, prefix_ids_column="pids")
    assert same(rows_of(got), want)
    by_text = parse_arrow_tokens(table, binding, prefix_column="prompt")
    assert same(rows_of(by_text), rows_of(parse_arrow(pa.table({"text": [binding.decode(x) for x in ids],
                                                                 "p": prefixes}), "qwen3:base", prefix_column="p")))
    with pytest.raises(TypeError, match="`ids_column`: column 'prompt' must be a list of integers"):
        parse_arrow_tokens(table, binding, ids_column="prompt", prefix="")
    big = pa.table({"ids": pa.array([[0, 10 ** 6]], pa.list_(pa.int64()))})
    assert parse_arrow_tokens(big, binding, prefix="").column("error")[0].as_py() is not None


# ------------------------------------------------------------------------------------------------ parse-file
@pytest.fixture(scope="module")
def file_rows():
    prefixes, texts = generations("qwen3", 6000, seed=5)
    compiled = chatparse.compile_template(templates.get("qwen3"))
    return prefixes, texts, expected(compiled, texts, prefixes)


def _write_input(path: Path, prefixes, texts, extra_lines=()):
    if path.suffix == ".jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for i, (p, t) in enumerate(zip(prefixes, texts)):
                f.write(json.dumps({"id": i, "prompt": p, "text": t}, ensure_ascii=False) + "\n")
            for line in extra_lines:
                f.write(line + "\n")
    else:
        pq.write_table(pa.table({"id": list(range(len(texts))), "prompt": prefixes, "text": texts}), path,
                       row_group_size=2500)


def _read_output(path: Path) -> list:
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return pq.read_table(path).to_pylist()


def _messages(rows) -> list:
    """Output rows back to messages / error texts (as `to_messages` does for a table)."""
    table = pa.Table.from_pylist([{k: r[k] for k in MESSAGE_SCHEMA.names} for r in rows], schema=MESSAGE_SCHEMA)
    return to_messages(table)


@pytest.mark.parametrize("src_ext,dst_ext,workers", [(".jsonl", ".jsonl", 1), (".jsonl", ".parquet", 2),
                                                      (".parquet", ".parquet", 1), (".parquet", ".jsonl", 2)])
def test_parse_file_is_parse_batch(tmp_path, file_rows, src_ext, dst_ext, workers):
    prefixes, texts, want = file_rows
    src, dst = tmp_path / f"in{src_ext}", tmp_path / f"out{dst_ext}"
    _write_input(src, prefixes, texts)
    r = subprocess.run([sys.executable, "-m", "chatparse.cli", "parse-file", str(src), str(dst), "--template",
                        "qwen3:base", "--prefix-column", "prompt", "--workers", str(workers), "--batch-size", "700"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    rows = _read_output(dst)
    assert [row["id"] for row in rows] == list(range(len(texts)))  # input order, input columns kept
    assert all(row["text"] == t for row, t in zip(rows, texts))
    assert same(_messages(rows), want)
    failed = sum(isinstance(w, str) for w in want)
    assert f"6000 rows from {src} to {dst}" in r.stderr and f"; {failed} failed:" in r.stderr
    assert "rows/s" in r.stderr
    assert not (tmp_path / f"out{dst_ext}.partial").exists()


@pytest.mark.parametrize("rows_bound,bytes_bound", [(2000, 1 << 30), (1 << 30, 1)])
def test_parse_file_row_groups(tmp_path, file_rows, monkeypatch, rows_bound, bytes_bound):
    """Parquet output: batches held until a row group reaches its rows or its bytes bound (and the last one at
    the end), whatever the batch size; the rows are the same."""
    from chatparse.data.parse_file import _jsonl_batches, _Writer, parse_file

    monkeypatch.setattr(_Writer, "ROW_GROUP_ROWS", rows_bound)
    monkeypatch.setattr(_Writer, "ROW_GROUP_BYTES", bytes_bound)
    prefixes, texts, want = file_rows
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.parquet"
    _write_input(src, prefixes, texts)
    parse_file(src, dst, "qwen3:base", prefix_column="prompt", batch_size=700, progress=False)
    groups, held = [], 0
    for _, chunk, _ in _jsonl_batches(src, 700):  # (batches end at 700 lines or at about 2 MB)
        held += chunk.count(b"\n")
        if held >= rows_bound or bytes_bound == 1:
            groups.append(held)
            held = 0
    groups += [held] if held else []
    assert len(groups) > 1 and (bytes_bound == 1 or max(groups) >= 2000)
    meta = pq.ParquetFile(dst).metadata
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == groups
    rows = _read_output(dst)
    assert [row["id"] for row in rows] == list(range(len(texts)))
    assert same(_messages(rows), want)


def test_parse_file_bad_lines_and_errors(tmp_path, file_rows):
    from chatparse.cli import main

    prefixes, texts, want = file_rows
    src = tmp_path / "in.jsonl"
    _write_input(src, prefixes[:50], texts[:50], ['not json', '[1, 2]', '{"id": 99, "prompt": 3, "text": "x"}', "",
                                                 '{"id": 100, "prompt": ""}'])
    dst = tmp_path / "out.jsonl"
    assert main(["parse-file", str(src), str(dst), "--template", "qwen3:base", "--prefix-column", "prompt",
                 "--no-progress", "--drop-input"]) == 0
    rows = _read_output(dst)
    assert len(rows) == 54 and set(rows[0]) == set(MESSAGE_SCHEMA.names)
    assert same(_messages(rows[:50]), want[:50])
    assert rows[50]["error"].startswith("JSONDecodeError: line 51: ")
    assert rows[51]["error"] == "ValueError: line 52: expected a JSON object, got list"
    assert rows[52]["error"] == "TypeError: line 53: --prefix-column 'prompt' holds a int, not a string"
    assert rows[53]["error"] == "ValueError: `text_column` 'text' is null in this row"  # line 55 (54 is blank)
    # errors name the file, the column, the argument; nothing is written
    out = tmp_path / "x.parquet"
    for argv, msg in [
        ([str(src), str(out), "--template", "qwen3:base"], "--prefix-column"),
        ([str(tmp_path / "none.jsonl"), str(out), "--template", "qwen3:base", "--prefix", ""], "IN: "),
        ([str(src), str(tmp_path / "x.csv"), "--template", "qwen3:base", "--prefix", ""], "OUT: "),
        ([str(src), str(out), "--template", "nope", "--prefix", ""], "--template 'nope' is neither"),
        ([str(src), str(out), "--template", "qwen3:base", "--prefix", "", "--workers", "0"], "--workers"),
    ]:
        r = subprocess.run([sys.executable, "-m", "chatparse.cli", "parse-file", *argv], capture_output=True,
                           text=True, cwd=ROOT, timeout=60)
        assert r.returncode == 2 and msg in r.stderr, (argv, r.stderr)
    clash = tmp_path / "clash.jsonl"
    clash.write_text('{"text": "a", "content": "x"}\n')
    r = subprocess.run([sys.executable, "-m", "chatparse.cli", "parse-file", str(clash), str(out), "--template",
                        "qwen3:base", "--prefix", ""], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "already has column(s) ['content']" in r.stderr, r.stderr
    pq.write_table(pa.table({"txt": ["a"]}), tmp_path / "in.parquet")
    r = subprocess.run([sys.executable, "-m", "chatparse.cli", "parse-file", str(tmp_path / "in.parquet"), str(out),
                        "--template", "qwen3:base", "--prefix", ""], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 2 and "--text-column: no column 'text'" in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("block", [1, 7, 64, 1 << 20])
def test_jsonl_batches_cut_at_line_ends(tmp_path, monkeypatch, block):
    """parse-file reads JSONL in blocks: every batch is whole lines, a line longer than a block is read on,
    and the batches' line numbers and bytes add up to the file. Every batch but the last is full: --batch-size
    lines, or fewer only where the line that ends it takes its bytes to the block size (never cut short at
    the end of a block read)."""
    import gzip
    import random

    from chatparse.data import parse_file as pf

    monkeypatch.setattr(pf, "BATCH_BYTES", block)
    rng = random.Random(block)
    for trial in range(60):
        lines = [b"x" * rng.choice([0, 1, 5, 50, 300]) for _ in range(rng.randint(0, 40))]
        data = b"\n".join(lines) + (b"\n" if rng.random() < 0.5 else b"")
        path = tmp_path / ("in.jsonl.gz" if trial % 4 == 0 else "in.jsonl")
        with (gzip.open(path, "wb") if trial % 4 == 0 else open(path, "wb")) as f:
            f.write(data)
        batch_size = rng.choice([1, 3, 1000])
        got = list(pf._jsonl_batches(path, batch_size))
        assert b"".join(chunk for _, chunk, _ in got) == data
        line = 1
        for i, (kind, chunk, first) in enumerate(got):
            n = chunk.count(b"\n") + (not chunk.endswith(b"\n"))
            assert kind == "jsonl" and first == line and 1 <= n <= batch_size
            assert chunk.endswith(b"\n") or i == len(got) - 1
            if i < len(got) - 1:
                before_last = len(chunk) - len(chunk[:-1].rsplit(b"\n", 1)[-1]) - 1  # bytes before its last line
                assert n == batch_size or before_last < block <= len(chunk)
            line += n


@pytest.mark.parametrize("width,want_rows", [(5000, 12), (10, 700)])
def test_parquet_batches_bounded_in_bytes(tmp_path, monkeypatch, width, want_rows):
    """Parquet input is read in batches of --batch-size rows, or fewer where rows are long, so that a batch
    holds about BATCH_BYTES (as JSONL batches do): every row once, in order, in batches of the same size."""
    from chatparse.data import parse_file as pf

    monkeypatch.setattr(pf, "BATCH_BYTES", 64_000)
    path = tmp_path / "in.parquet"
    texts = [f"{i:05d}" + "y" * width for i in range(1500)]
    pq.write_table(pa.table({"text": texts, "id": list(range(1500))}), path, row_group_size=400)
    got = list(pf._parquet_batches(path, 700, None, ipc=False))
    assert [first for _, _, first in got] == list(range(0, 1500, want_rows))
    assert {t.num_rows for _, t, _ in got[:-1]} == {want_rows}
    assert sum((t.column("text").to_pylist() for _, t, _ in got), []) == texts


# ------------------------------------------------------------------------------------------------ at scale
@pytest.fixture(scope="module")
def big_rows():
    """The input table and what single-process parsing gives, as columns: `parse_arrow` in this process,
    checked here against parse_batch row for row, so that the workers' columns are compared as Arrow data."""
    prefixes, texts = generations("qwen3", BIG, seed=6)
    compiled = chatparse.compile_template(templates.get("qwen3"))
    want = expected(compiled, texts, prefixes)
    assert sum(isinstance(w, str) for w in want) > 1000  # malformed rows included
    table = pa.table({"id": pa.array(range(BIG), pa.int64()), "prompt": prefixes, "text": texts})
    columns = parse_arrow(table, compiled, prefix_column="prompt")
    assert same(to_messages(columns), want)
    return table, columns


def _same_columns(out, columns) -> None:
    got = out.select(MESSAGE_SCHEMA.names).combine_chunks()
    assert got.schema == MESSAGE_SCHEMA
    if not got.equals(columns.combine_chunks()):  # say which row differs
        for i, (a, b) in enumerate(zip(got.to_pylist(), columns.to_pylist())):
            assert a == b, f"row {i}"


@pytest.fixture(scope="module")
def ray_module():
    """ray, or a skip saying why (before `big_rows` is built: these fixtures come first in the tests)."""
    ray = need("ray", "chatparse.integrations.ray; the `ray` extra")
    need("ray.data", "Ray Data; the `ray` extra")
    return ray


@pytest.fixture(scope="module")
def datasets_module():
    return need("datasets", "Dataset.map with ParseBatches; the `datasets` extra")


def test_ray_data_is_parse_batch(ray_module, big_rows):
    ray = ray_module
    from chatparse.integrations.ray import ParseBatches, parse_dataset

    table, columns = big_rows
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ds = ray.data.from_arrow([table.slice(i, 20_000) for i in range(0, BIG, 20_000)])
        parsed = ds.map_batches(ParseBatches, fn_constructor_kwargs=ParseBatches.kwargs("qwen3:base",
                                                                                        prefix_column="prompt"),
                                batch_format="pyarrow", batch_size=5000, concurrency=2)
        out = pa.concat_tables(ray.get(parsed.to_arrow_refs())).sort_by("id")
        # parse_dataset: the same call, made for you
        few = parse_dataset(ray.data.from_arrow(table.slice(0, 3000)), "qwen3:base", prefix_column="prompt", concurrency=1)
        few = pa.concat_tables(ray.get(few.to_arrow_refs())).sort_by("id")
        # the example of docs/datasets.md, in the same local cluster (it does not start one itself)
        code, expected_out = _docs_example("docs/datasets.md", "On Ray")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/datasets.md", "exec"), {})
    finally:
        ray.shutdown()
    assert printed.getvalue() == expected_out
    assert out.column_names == ["id", "prompt", "text", *MESSAGE_SCHEMA.names]
    assert out.column("id").to_pylist() == list(range(BIG))
    _same_columns(out, columns)
    _same_columns(few, columns.slice(0, 3000))


def _docs_example(page: str, heading: str) -> tuple[str, str]:
    """The ```python block after `heading` in `page` and the ```text block right after it."""
    readme = (ROOT / page).read_text(encoding="utf-8")
    rest = readme[readme.index(heading):]
    m = re.search(r"```python\n(.*?)```\s*```text\n(.*?)```", rest, re.S)
    assert m, f"no python + text example after {heading!r}"
    return m.group(1), m.group(2)


def test_datasets_map_is_parse_batch(datasets_module, big_rows):
    datasets = datasets_module
    from chatparse.integrations.ray import ParseBatches

    table, columns = big_rows
    datasets.disable_progress_bars()
    ds = datasets.Dataset(table)
    fn = ParseBatches("qwen3:base", prefix_column="prompt")
    out = ds.with_format("arrow").map(fn, batched=True, batch_size=5000, num_proc=2, load_from_cache_file=False)
    assert out.column_names == ["id", "prompt", "text", *MESSAGE_SCHEMA.names]
    got = out.with_format("arrow")[:]
    assert got.column("id").to_pylist() == list(range(BIG))
    _same_columns(got, columns)
    # datasets' default (Python) format: the same rows
    small = datasets.Dataset(table.slice(0, 3000))
    out2 = small.map(fn, batched=True, batch_size=700, num_proc=2, load_from_cache_file=False)
    _same_columns(out2.with_format("arrow")[:], columns.slice(0, 3000))


def test_parse_batches_pickles_as_table_bytes():
    import pickle

    from chatparse.integrations.ray import ParseBatches

    fn = ParseBatches("qwen3", prefix="")
    state = fn.__getstate__()
    assert state["tables"] == table_bytes("qwen3")
    data = pickle.dumps(fn)
    assert b"CompiledTemplate" not in data and b"chatparse.compiled" not in data
    again = pickle.loads(data)
    texts = ["<think>a</think>b<|im_end|>"]
    assert again(pa.table({"text": texts})).to_pylist() == fn(pa.table({"text": texts})).to_pylist()
    assert again({"text": texts}).column("content").to_pylist() == ["b"]
    with pytest.raises(TypeError, match="unknown option"):
        ParseBatches.kwargs("qwen3:base", prefix_col="p")
