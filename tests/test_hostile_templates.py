"""Hostile templates (issue #19): large counted repetitions, many fields, and the compile limits.

A counted repetition too large to expand (`compiler/regex_ast.py` `COUNT_LIMIT`) is stepped by the tables as
``x+``/``x*`` and decided by `regex`; an attempt is decided once it has read the most a match can span
(`Mode.cap`). Both must leave every answer the reference's: checked here against transformers' interpreter
with counts around the texts' run lengths and any chunking. Timings are in bench/bench_hostile.py, not here.
"""

from __future__ import annotations

import random

import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse.compiler import build, dfa, nfa
from harness import random_chunks, run_chatparse, run_reference

need("transformers.utils.chat_parsing")

COUNTED = [
    "a{70}!", "a{65,80}!", "a{66,70}?b", "(?:ab){40}", "(?:a{9}){9}", "(?:a{100}){2}", "b[ab]{65,67}",
    "(?P<g>a{70,})!", "x(?:a|b){66,70}y", "a{70}(?=b)", "(?:a{80}|b{5})!", "a{70}$",
]


def _template(open_pat: str, close: str | None, implicit: bool):
    f = {"open_pattern": open_pat}
    if close is not None:
        f["close"] = close
    if "(?P<g>" in open_pat:
        f["transform"] = {"g": "{g}", "c": "{content}"}
    fields = {"x": f}
    if implicit:
        fields["content"] = {}
    return {"start_anchor": "<|A|>", "fields": fields}


@st.composite
def counted_cases(draw):
    pat = draw(st.sampled_from(COUNTED))
    close = draw(st.sampled_from(["?", "!", None, "b"]))
    template = _template(pat, close, draw(st.booleans()))
    pieces = []
    for _ in range(draw(st.integers(1, 5))):
        run = draw(st.sampled_from([8, 9, 32, 33, 39, 40, 64, 65, 66, 67, 69, 70, 71, 79, 80, 81, 100, 160, 200]))
        ch = draw(st.sampled_from(["a", "b", "ab"]))
        pieces.append((ch * run)[:run] + draw(st.sampled_from(["", "!", "?", "b", "x", "y", "\n"])))
    return template, "".join(pieces), draw(st.integers(0, 2 ** 16))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(counted_cases())
def test_counted_repetitions_match_the_reference_any_chunking(case):
    template, text, seed = case
    compiled = chatparse.compile_template(template)
    assert not all(p.exact for p in compiled.tables.patterns)  # the new path is the one under test
    ref = run_reference(template, text, seconds=20)
    rng = random.Random(seed)
    assert run_chatparse(template, [text]) == ref
    assert run_chatparse(template, random_chunks(text, rng, 9)) == ref
    assert run_chatparse(template, list(text)) == ref
    if ref[0] == "ok":
        assert chatparse.parse_response(text, template, prefix="") == ref[1]


@pytest.mark.parametrize("pattern", ["a{2000}!", "(?:a{100}){100}"])
def test_issue_cases_match_the_reference(pattern):
    template = _template(pattern, "?", True)
    text = "a" * 11_000 + "!" + "a" * 1_000 + "?" + "a" * 2_000 + "!zz"
    ref = run_reference(template, text, seconds=60)
    assert run_chatparse(template, [text[i:i + 4] for i in range(0, len(text), 4)]) == ref
    assert chatparse.parse_response(text, template, prefix="") == ref[1]


def test_a_capped_attempt_does_not_hold_text():
    """A run longer than any match hands its text out while streaming (it is not held to the end)."""
    parser = chatparse.ResponseParser(_template("a{2000}!", "?", True), prefix="")
    out = "".join(e.get("text", "") for i in range(0, 20_000, 4) for e in parser.feed("a" * 4))
    assert len(out) >= 20_000 - 2_002


def test_many_fields_compile_and_parse():
    template = {"start_anchor": "<|A|>", "fields": {f"f{i}": {"open": f"<f{i}>", "close": f"</f{i}>",
                                                                "optional": True} for i in range(1000)}}
    template["fields"]["content"] = {}
    compiled = chatparse.compile_template(template)
    text = "hi <f999>x</f999> <f7>y</f7>"
    assert compiled.parse(text, prefix="") == run_reference(template, text, seconds=60)[1]


def _one_field(pattern):
    return {"start_anchor": "S", "fields": {"x": {"open_pattern": pattern, "close": "!"}}}


def test_limit_on_fields_names_the_limit():
    t = {"start_anchor": "S", "fields": {f"f{i}": {"open": f"<{i}>"} for i in range(build.MAX_FIELDS + 1)}}
    with pytest.raises(ValueError, match=r"fields, more than the limit of \d+ .*MAX_FIELDS"):
        chatparse.compile_template(t)


def test_limit_on_pattern_length_names_field_delimiter_and_limit():
    with pytest.raises(ValueError, match=r"Field 'x': open_pattern: .*more than the limit .*MAX_PATTERN_LENGTH"):
        chatparse.compile_template(_one_field("a" * (build.MAX_PATTERN_LENGTH + 1)))
    t = {"start_anchor": "S", "fields": {"x": {"open": "<", "close": ["b" * 5000, "c" * 5000]}}}
    with pytest.raises(ValueError, match=r"Field 'x': close: .*MAX_PATTERN_LENGTH"):
        chatparse.compile_template(t)


def test_limit_on_nfa_states_names_field_delimiter_and_limit():
    with pytest.raises(ValueError, match=rf"Field 'x': open_pattern: .*more than {nfa.MAX_NFA_STATES} NFA states"):
        chatparse.compile_template(_one_field("a{64}" * 400))


def test_limit_on_dfa_states_names_field_delimiter_and_limit():
    with pytest.raises(ValueError, match=rf"Field 'x' open_pattern: .*exceeds {dfa.MAX_DFA_STATES} states.*"
                                         "MAX_DFA_STATES"):
        chatparse.compile_template(_one_field("[ab]*a[ab]{20}!"))
