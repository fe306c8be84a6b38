"""No false rejection by the grammar export (issue #18) on real model outputs: every case of the real-output
corpus (tests/real_outputs/, see tests/test_real_outputs.py) that the bundled template parses as its source
expects is accepted token by token by both exports - llguidance with the Lark grammar and xgrammar with the
structural tag - with the case's tools (or, when it has none, tools made from its expected calls: each name
with a permissive schema for the arguments), then EOS.

Skipped: cases marked ``xfail`` or ``needs`` (the template does not parse them as expected) and cases
expecting an error. A case listed in LARK_REFUSED / TAG_REFUSED is refused on purpose (the reason says why)
and must stay refused, so the list stays true. A family the structural tag refuses
(`structural_tag.Unconstrainable`) must be refused with its reason.

Grammars are cached per family, tools and prompt, so the module takes a few seconds (most of it training the
test tokenizer, shared with tests/test_grammar.py).
"""

from __future__ import annotations

import json
import sys
from functools import lru_cache
from pathlib import Path

import pytest

from deps import need  # noqa: E402

need("tokenizers", "the test tokenizer is trained with `tokenizers`")
need("llguidance", "the Lark grammar export, checked with the real engine")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import grammar_engines as ge  # noqa: E402
from chatparse import compile_template, parse_response, templates  # noqa: E402
from chatparse.export.structural_tag import Unconstrainable  # noqa: E402
from test_real_outputs import CASES, same  # noqa: E402

# Families whose models write a JSON dialect the parser reads (content_args unquoted_keys / string_delims:
# `{city:<|"|>Paris<|"|>}`): the Lark grammar writes it too (`grammar_dialect`), the structural tag only
# strict JSON, which the parser also reads.
DIALECT = {"gemma4": "unquoted keys and <|\"|> strings", "functiongemma": "unquoted keys and <escape> strings"}


def _dialect_refused() -> dict[str, str]:
    """Cases whose calls have arguments written in their family's JSON dialect."""
    out = {}
    for case in CASES:
        calls = (case.get("expected") or {}).get("tool_calls") or []
        if case["family"] in DIALECT and any((c.get("function") or {}).get("arguments") for c in calls):
            out[case["id"]] = f"arguments in the model's JSON dialect ({DIALECT[case['family']]}): the " \
                              "structural tag writes strict JSON"
    return out


# Real outputs a grammar refuses on purpose (case id -> why). Each must still be refused.
LARK_REFUSED: dict[str, str] = {
    "minimax_m1-vllm-multiple": "the second call is opened by the opener's lookbehind alternative "
                                "(?<=\\}\\n)(?=\\{\"), which a grammar cannot check and does not offer",
}
TAG_REFUSED: dict[str, str] = {
    **LARK_REFUSED,
    **_dialect_refused(),
    "gpt_oss-vllm-truncated-final-header": "the output ends inside an opener ('<|channel|>final' with no "
                                           "'<|message|>'): structural-tag text may not hold an opener's literal",
    "kimi_k2-llamacpp-calls-inside-thinking-no-markers": "the first call has no <|tool_call_end|>: it ends at the "
                                                         "zero-width close before the next <|tool_call_begin|>, and "
                                                         "the structural tag offers a call without its end only as "
                                                         "the output's last item",
}
# Refused by the Lark grammar only (the structural tag accepts it).
LARK_REFUSED["gemma4-vllm-reasoning-label-diverges"] = (
    "a label-less thought starting like the optional 'thought' label ('<|channel>thou' + 's'): llguidance's lexer "
    "takes 'thou' into the opener's lexeme as the label's start and cannot give it back to the reasoning")
# Families whose structural tag the export refuses, and (a part of) the reason it gives.
TAG_UNCONSTRAINABLE = {"minimax_m1": "can match between JSON tokens"}


def tools_for(case: dict) -> list[dict]:
    """The case's own tools, else one per expected call's name with a permissive schema: any object when
    the arguments are an object, any JSON value otherwise."""
    if "tools" in case:
        return case["tools"]
    out: dict[str, dict] = {}
    for call in case["expected"].get("tool_calls") or []:
        fn = call.get("function") or {}
        schema = {"type": "object"} if isinstance(fn.get("arguments"), dict) else {}
        out.setdefault(fn["name"], {"type": "function", "function": {"name": fn["name"], "parameters": schema}})
    return list(out.values())


def _checked_cases() -> list:
    out = []
    for case in CASES:
        if case.get("xfail") or case.get("needs") or "expected" not in case:
            continue
        out.append(pytest.param(case, id=case["id"]))
    return out


@lru_cache(maxsize=None)
def _grammar(family: str, tools_json: str, prefix: str, fmt: str) -> str:
    compiled = compile_template(templates.get(family))
    return compiled.grammar(json.loads(tools_json), prefix=prefix, format=fmt).text


def _parses_as_expected(case: dict) -> bool:
    kwargs = {"prefix": case["prefix"]}
    if "tools" in case:
        kwargs["tools"] = case["tools"]
    return same(parse_response(case["output"], templates.get(case["family"]), **kwargs), case["expected"])


@pytest.mark.parametrize("case", _checked_cases())
def test_lark_accepts_real_output(case):
    assert _parses_as_expected(case), "the bundled template no longer parses this case (see test_real_outputs)"
    text = _grammar(case["family"], json.dumps(tools_for(case)), case["prefix"], "lark")
    ok, why = ge.accepts(text, case["output"])
    if case["id"] in LARK_REFUSED:
        assert not ok, f"now accepted, drop it from LARK_REFUSED: {LARK_REFUSED[case['id']]}"
    else:
        assert ok, why


@pytest.mark.parametrize("case", _checked_cases())
def test_structural_tag_accepts_real_output(case):
    need("xgrammar", "the structural-tag grammar export, checked with the real engine")
    tools = tools_for(case)
    if case["family"] in TAG_UNCONSTRAINABLE and tools:
        with pytest.raises(Unconstrainable, match=TAG_UNCONSTRAINABLE[case["family"]]):
            _grammar(case["family"], json.dumps(tools), case["prefix"], "structural_tag")
        return
    text = _grammar(case["family"], json.dumps(tools), case["prefix"], "structural_tag")
    ok, why = ge.xg_accepts(text, case["output"])
    if case["id"] in TAG_REFUSED:
        assert not ok, f"now accepted, drop it from TAG_REFUSED: {TAG_REFUSED[case['id']]}"
    else:
        assert ok, why
