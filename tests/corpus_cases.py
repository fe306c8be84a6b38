"""Load the format corpus (`tests/data/corpus.json`) for the bundled-template tests.

The corpus is part of the project (`tests/data/README.md` says where it comes from): `load()` reads it from
there, and nothing else.

Corpus layout: ``[{"family", "source", "template", "cases": [{"prefix", "output", "expected", "tools"?}]}]``
where ``expected`` is exactly what transformers 5.23's `parse_response` returns. Families are long
human-readable titles; `FAMILY_NAMES` maps each bundled template name (`chatparse.templates.names()`) to the
title of the corpus family it was taken from (the slugs are the anchors of `tests/data/FORMATS.md`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"
PATH = DATA / "corpus.json"

# bundled template name -> corpus `family`
FAMILY_NAMES: dict[str, str] = {
    "hermes": "Hermes-2-Pro / Hermes-3 / Qwen2.5-Instruct (JSON in <tool_call>)",
    "qwen3": "Qwen3 / QwQ / Qwen3-2507 (<think> + JSON in <tool_call>)",
    "qwen3_coder": "Qwen3-Coder / Qwen3.5 / Qwen3-Next (XML <function=...><parameter=...>)",
    "deepseek_v3": "DeepSeek-V3 / V3-0324 (function<｜tool▁sep｜>name + ```json fenced args)",
    "deepseek_r1": "DeepSeek-R1 / R1-0528 (reasoning…</think> + V3 tool format)",
    "deepseek_v31": "DeepSeek-V3.1 / V3.1-Terminus (name<｜tool▁sep｜>{json}; thinking toggled by prefix)",
    "deepseek_v32": "DeepSeek-V3.2 / V3.2-Exp (DSML <｜DSML｜invoke> XML)",
    "kimi_k2": "Kimi-K2 / K2-Instruct-0905 / K2-Thinking (functions.NAME:IDX ids)",
    "glm45": "GLM-4.5 / GLM-4.6 (<tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>)",
    "glm47": "GLM-4.7 / GLM-5 (same tags, no newlines; <think>/</think> prefilled)",
    "minimax_m2": "MiniMax-M2 / M2.1 / M2.5 (<minimax:tool_call><invoke name=…><parameter name=…>)",
    "minimax_m1": "MiniMax-M1 / MiniMax-Text-01 (JSON lines inside <tool_calls>)",
    "llama3_json": "Llama 3.1 / 3.2 / 3.3 JSON tool calling ({\"name\":…, \"parameters\":…}, optional "
                   "<|python_tag|>, ';'-separated)",
    "lfm2": "LFM2 / LFM2.5 (Liquid): <|tool_call_start|>[…]<|tool_call_end|> (pythonic by default, JSON accepted)",
    "mistral_pre_v11": "Mistral pre-v11 tokenizers (Mistral-7B-Instruct-v0.3, Mixtral-8x22B, Nemo): "
                       "[TOOL_CALLS] [{…}, …]",
    "mistral_v11": "Mistral v11+ tokenizers (Mistral-Small-3.1/3.2, Magistral, Devstral, Ministral-3): "
                   "[TOOL_CALLS]name[ARGS]{…}; [THINK]…[/THINK]",
    "gpt_oss": "gpt-oss (OpenAI harmony: analysis / commentary to=functions.X / final channels)",
    "cohere": "Cohere Command R7B / Command A / Command A Reasoning "
              "(<|START_ACTION|>[{tool_call_id, tool_name, parameters}]<|END_ACTION|>)",
    "granite3": "IBM Granite 3.0 / 3.1 / 3.2 / 3.3 (<|tool_call|>[…] ; 3.2 'Here is my thought process:' reasoning)",
    "granite_20b_fc": "IBM Granite-20B-FunctionCalling (<function_call> {…} per call, no closing tag)",
    "internlm2": "InternLM2 / InternLM2.5 (<|action_start|><|plugin|>{\"name\", \"parameters\"}<|action_end|>)",
    "jamba": "AI21 Jamba 1.5 / 1.6 / 1.7 (<tool_calls>[…]</tool_calls>)",
    "phi4_mini": "Phi-4-mini (functools[…], no closing tag)",
    "xlam": "Salesforce xLAM-2 (bare JSON list; also ```json fences, [TOOL_CALLS], <tool_call>[…]</tool_call>)",
    "functiongemma": "FunctionGemma (<start_function_call>call:NAME{key:<escape>v<escape>}<end_function_call>)",
    "gemma4": "Gemma 4 (<|tool_call>call:NAME{k:<|\"|>v<|\"|>}<tool_call|>; <|channel>thought\\n…<channel|>)",
    "seed_oss": "ByteDance Seed-OSS-36B (<seed:think>…</seed:think>; <seed:tool_call><function=…><parameter=…>)",
    "hunyuan_a13b": "Tencent Hunyuan-A13B (<think>…</think><answer>…</answer>; <tool_calls>[…]</tool_calls>)",
    "step3": "StepFun Step-3 (<｜tool_call_begin｜><steptml:invoke name=…><steptml:parameter name=…>; "
             "reasoning ends </think>)",
    "ernie45": "Baidu ERNIE-4.5 (-21B-A3B-Thinking / VL): reasoning…</think> + <response>…</response> + "
               "Hermes-style <tool_call>",
    "smollm3": "HuggingFace SmolLM3 (ChatML, <think>, <tool_call>{json}</tool_call>; /no_think prefills empty think)",
    "longcat": "Meituan LongCat-Flash (<longcat_tool_call>{json}</longcat_tool_call>)",
    "gigachat3": "Sber GigaChat 3 (<|message_sep|>\\n\\nfunction call<|role_sep|>\\n{json})",
    "kimi_vl_think": "Moonshot Kimi-VL-Thinking / Kimi-K1.5 (◁think▷…◁/think▷)",
    "granite4": "IBM Granite 4.0 (Hermes-style <tool_call>{json}</tool_call>, <|end_of_text|>)",
    "nemotron_json": "NVIDIA Llama-Nemotron / Nemotron-Nano (<TOOLCALL>[…]</TOOLCALL>, <think>)",
}


@dataclass(frozen=True)
class Case:
    """One corpus case. `id` is ``"<template name>-<index within the family>"``."""

    name: str
    index: int
    prefix: str
    output: str
    expected: dict
    tools: list | None = None
    extra: dict = field(default_factory=dict)  # any further fields the case carries

    @property
    def id(self) -> str:
        return f"{self.name}-{self.index}"


@dataclass(frozen=True)
class Corpus:
    path: Path
    templates: dict[str, dict]  # bundled name -> corpus template
    cases: list[Case]
    unmapped: list[str]  # corpus families that FAMILY_NAMES does not name


@lru_cache(maxsize=1)
def load() -> Corpus:
    """The corpus, read from `tests/data/corpus.json`."""
    data = json.loads(PATH.read_text(encoding="utf-8"))
    by_family = {fam: name for name, fam in FAMILY_NAMES.items()}
    templates: dict[str, dict] = {}
    cases: list[Case] = []
    unmapped: list[str] = []
    for fam in data:
        name = by_family.get(fam["family"])
        if name is None:
            unmapped.append(fam["family"])
            continue
        templates[name] = fam["template"]
        for i, c in enumerate(fam["cases"]):
            extra = {k: v for k, v in c.items() if k not in ("prefix", "output", "expected", "tools")}
            cases.append(Case(name, i, c["prefix"], c["output"], c["expected"], c.get("tools"), extra))
    return Corpus(PATH, templates, cases, unmapped)


# ------------------------------------------------------------------------------------------------ comparing


def strict_equal(a: Any, b: Any) -> bool:
    """Equality that also requires identical types (1 != 1.0 != True), dict key order, and NaN == NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def show(value: Any) -> str:
    """Order-preserving, type-revealing rendering for assertion messages."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)
