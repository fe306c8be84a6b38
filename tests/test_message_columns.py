"""The native message columns (`chatparse.data._message_columns`, issue #20) against their Python spelling.

`chatparse.data.arrow._typed_arrays` builds a batch's message columns with the native module where it is built and
takes the batch, else with its Python spelling (C-level passes of `map`). Both must give the same arrays for
any batch the native module takes, and the module must take the usual batch; a call's arguments' JSON text
must be ``json.dumps(value, ensure_ascii=False, allow_nan=False)`` exactly. Without the module (an install
with no C compiler) the tests that need it skip, saying so; ``CHATPARSE_REQUIRE_NATIVE=1`` (set by .ci/run)
makes its absence a failure.
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from deps import need
from hypothesis import given, settings
from hypothesis import strategies as st

pa = need("pyarrow", "the Arrow columns; the `data` extra")

from chatparse.data import arrow  # noqa: E402

native = pytest.mark.skipif(not arrow.NATIVE, reason="chatparse.data._message_columns is not built (no C compiler "
                            "when chatparse was installed); the Python spelling is tested by tests/test_datasets.py")


def test_native_module_is_built_where_required():
    """Built wherever chatparse was installed with a C compiler; required to be where CHATPARSE_REQUIRE_NATIVE=1."""
    if not arrow.NATIVE and os.environ.get("CHATPARSE_REQUIRE_NATIVE") != "1":
        pytest.skip("not built: no C compiler when chatparse was installed (CHATPARSE_REQUIRE_NATIVE is not set)")
    assert arrow.NATIVE, "pip install did not build chatparse.data._message_columns"


def python_arrays(messages, errors):
    with pytest.MonkeyPatch.context() as m:
        m.setattr(arrow, "_use_native", False)
        return arrow._typed_arrays(messages, errors)


def arguments_text(value):
    """The native module's JSON text of `value` as a call's arguments, or None where it declines."""
    message = {"tool_calls": [{"function": {"name": "f", "arguments": value}}]}
    got = arrow._native_columns([message], [None], arrow._ARGS_JSON)
    if got is None:
        return None
    _valid, offsets, data, _nulls = got[6]
    assert len(offsets) == 8
    return data.decode("utf-8")


def dumps_or_none(value):
    """json.dumps as the columns use it, or None where it raises or its text is not UTF-8 (a lone surrogate)."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        text.encode("utf-8")
    except (TypeError, ValueError, RecursionError):
        return None
    return text


_chars = st.characters(codec="utf-8") | st.sampled_from('"\\\b\f\n\r\t\x00\x1f\x7f\u2028é東😀')
_leaf = (st.none() | st.booleans() | st.integers() | st.integers(-(10 ** 30), 10 ** 30) | st.floats()
         | st.text(_chars, max_size=8) | st.sampled_from(["\ud800", "a\udc00"]))
_key = st.text(_chars, max_size=4) | st.integers(-3, 3) | st.floats(allow_nan=False) | st.booleans() | st.none()
_value = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
                      | st.dictionaries(_key, inner, max_size=4), max_leaves=20)


@native
@settings(max_examples=1500, deadline=None)
@given(value=_value)
def test_arguments_text_is_json_dumps(value):
    """Every JSON value, odd ones among them (non-str keys, tuples, NaN and infinities, big ints, control
    characters, lone surrogates), gets json.dumps' own text, or the batch is declined where json.dumps
    raises or its text is not UTF-8 (the Python spelling then takes the batch and keeps the value exactly)."""
    assert arguments_text(value) == dumps_or_none(value)


@native
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), [1.5, float("nan")],
                                   {"a": {"b": [float("inf")]}}, 10 ** 5000, {1: 2, "a": None}, (1, "x"),
                                   {"s": {1, 2}}, b"bytes", 1e300, -0.0, 5e-324, 1e16, 123456789.0, True],
                         ids=lambda v: type(v).__name__)
def test_arguments_text_edge_values(value):
    assert arguments_text(value) == dumps_or_none(value)


@native
def test_deep_arguments_go_to_the_python_encoder():
    """Nesting past the module's depth limit (200) is handed whole to the Python encoder: the same text;
    nesting where that raises RecursionError declines the batch."""
    deep = 0
    for _ in range(300):
        deep = [deep]
    assert arguments_text(deep) == json.dumps(deep)
    deeper = 0
    for _ in range(sys.getrecursionlimit() * 2):
        deeper = {"a": deeper}
    assert arguments_text(deeper) is None


@native
def test_subclasses_go_to_the_python_encoder():
    class Str(str):
        pass

    class Dict(dict):
        pass

    for value in ({"a": Str("x")}, Dict(a=1), [Str("é")], {Str("k"): 1}):
        assert arguments_text(value) == json.dumps(value, ensure_ascii=False)


@native
def test_bad_arguments():
    with pytest.raises(TypeError):
        arrow._native_columns((), [], arrow._ARGS_JSON)
    with pytest.raises(ValueError, match="2 messages but 1 errors"):
        arrow._native_columns([{}, {}], [None], arrow._ARGS_JSON)

    def boom(value):
        raise KeyError("not a JSON error")

    with pytest.raises(KeyError):  # (an error other than json's own propagates: nothing is swallowed)
        arrow._native_columns([{"tool_calls": [{"function": {"name": "f", "arguments": (1,)}}]}], [None], boom)


_text = st.text(_chars, max_size=6) | st.sampled_from(["\ud800"]) | st.none() | st.integers(0, 2)
_call = st.fixed_dictionaries({"function": st.fixed_dictionaries(
    {"name": _text, "arguments": _value}, optional={"other": st.just(1)})},
    optional={"type": _text, "id": _text, "index": st.just(0)}) | _leaf
_message = st.fixed_dictionaries({}, optional={
    "role": _text, "reasoning_content": _text, "content": _text,
    "tool_calls": st.lists(_call, max_size=3) | _leaf, "model": st.just("m")})
_usual_text = st.text(_chars, max_size=6)
_usual_arguments = st.dictionaries(st.text(_chars, max_size=3), st.integers() | st.text(_chars, max_size=3)
                                   | st.floats(allow_nan=False, allow_infinity=False), max_size=3)
_usual_call = st.fixed_dictionaries(
    {"function": st.fixed_dictionaries({"name": _usual_text, "arguments": _usual_arguments})},
    optional={"type": st.just("function"), "id": _usual_text})
_usual = st.fixed_dictionaries({"role": st.just("assistant")}, optional={
    "reasoning_content": _usual_text, "content": _usual_text, "tool_calls": st.lists(_usual_call, max_size=3)})


_MISFITS = [  # calls the struct cannot hold: their row's whole list goes to `extra`
    "x", None, [], {}, {"function": "f"}, {"type": "function"}, {"function": {"name": "f"}},
    {"function": {"name": 1, "arguments": {}}}, {"function": {"name": "f", "arguments": {}, "x": 1}},
    {"function": {"name": "f", "argu<x>ments": {}}}, {"type": None, "function": {"name": "f", "arguments": 1}},
    {"id": 3, "function": {"name": "f", "arguments": 1}}, {"index": 0, "function": {"name": "f", "arguments": 1}},
    {"function": {"name": "f", "arguments": float("nan")}, "extra": 1}]


def _with_misfit(message, misfit, at):
    calls = list(message.get("tool_calls", []))
    calls.insert(min(at, len(calls)), misfit)
    return {**message, "tool_calls": calls}


@native
@settings(max_examples=400, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from(["usual", "usual", "any", "error", "misfit"]), _usual, _message,
                               st.sampled_from(_MISFITS), st.integers(0, 3)), max_size=60))
def test_native_arrays_are_the_python_spellings(rows):
    """For any batch the native module takes, its arrays equal the Python spelling's (types, values, nulls);
    it takes every batch of usual messages (string texts, well-formed calls, JSON arguments), failed rows,
    and rows whose list holds a call of another shape (that list in ``extra``); what it declines, the Python
    spelling builds as before."""
    messages = [{} if kind == "error" else usual if kind == "usual" else odd if kind == "any"
                else _with_misfit(usual, misfit, at) for kind, usual, odd, misfit, at in rows]
    errors = ["ValueError: bad row" if row[0] == "error" else None for row in rows]
    got = arrow._native_arrays(messages, errors)
    want = python_arrays(messages, errors)
    if all(row[0] != "any" for row in rows):
        assert got is not None
    if got is None:
        return
    assert want is not None
    for g, w, f in zip(got, want, arrow.MESSAGE_SCHEMA):
        g.validate(full=True)
        assert g.type == w.type == f.type and g.equals(w), f.name
        assert g.null_count == w.null_count


@native
def test_parse_arrow_uses_the_native_columns(monkeypatch):
    """`parse_arrow` on generated rows gives the same table with the native columns and without them."""
    from bench.datasets_gen import generations

    prefixes, texts = generations("qwen3", 3000, seed=5)
    table = pa.table({"prompt": prefixes, "text": texts})
    calls = []
    real = arrow._native_columns
    monkeypatch.setattr(arrow, "_native_columns", lambda *a: calls.append(1) or real(*a))
    got = arrow.parse_arrow(table, "qwen3", prefix_column="prompt")
    assert calls  # (the native module built the batches' columns)
    monkeypatch.setattr(arrow, "_use_native", False)
    assert got.equals(arrow.parse_arrow(table, "qwen3", prefix_column="prompt"))
