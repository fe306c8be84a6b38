"""`templates.for_model` / `family_of`: from a model's id or tokenizer config to its bundled family (issue #17).

The ids below are the models each family's section of tests/data/FORMATS.md names (Hugging Face ids as
published); each must map to that family, and ids of no bundled family to None / KeyError."""

from __future__ import annotations

import json

import pytest

from chatparse import templates
from chatparse.templates import _MODEL_FAMILIES

MODELS = {
    "NousResearch/Hermes-3-Llama-3.1-8B": "hermes", "Qwen/Qwen2.5-7B-Instruct": "hermes",
    "Qwen/Qwen3-8B": "qwen3", "Qwen/QwQ-32B": "qwen3", "Qwen/Qwen3-235B-A22B-Instruct-2507": "qwen3",
    "Qwen/Qwen3-Coder-30B-A3B-Instruct": "qwen3_coder", "Qwen/Qwen3-Next-80B-A3B-Instruct": "qwen3_coder",
    "deepseek-ai/DeepSeek-V3-0324": "deepseek_v3", "deepseek-ai/DeepSeek-R1-0528": "deepseek_r1",
    "deepseek-ai/DeepSeek-V3.1-Terminus": "deepseek_v31", "deepseek-ai/DeepSeek-V3.2-Exp": "deepseek_v32",
    "moonshotai/Kimi-K2-Instruct-0905": "kimi_k2", "moonshotai/Kimi-K2-Thinking": "kimi_k2",
    "moonshotai/Kimi-VL-A3B-Thinking-2506": "kimi_vl_think",
    "zai-org/GLM-4.5-Air": "glm45", "zai-org/GLM-4.6": "glm45", "zai-org/GLM-4.7": "glm47",
    "MiniMaxAI/MiniMax-M2": "minimax_m2", "MiniMaxAI/MiniMax-M1-80k": "minimax_m1",
    "meta-llama/Llama-3.1-8B-Instruct": "llama3_json", "meta-llama/Llama-3.3-70B-Instruct": "llama3_json",
    "LiquidAI/LFM2-1.2B": "lfm2",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistral_pre_v11", "mistralai/Mixtral-8x22B-Instruct-v0.1":
        "mistral_pre_v11", "mistralai/Mistral-Nemo-Instruct-2407": "mistral_pre_v11",
    "mistralai/Mistral-Small-3.2-24B-Instruct-2506": "mistral_v11", "mistralai/Magistral-Small-2509":
        "mistral_v11", "mistralai/Devstral-Small-2507": "mistral_v11",
    "openai/gpt-oss-20b": "gpt_oss", "openai/gpt-oss-120b": "gpt_oss",
    "CohereLabs/c4ai-command-r7b-12-2024": "cohere", "CohereLabs/command-a-reasoning-08-2025": "cohere",
    "ibm-granite/granite-3.3-8b-instruct": "granite3", "ibm-granite/granite-20b-functioncalling":
        "granite_20b_fc", "ibm-granite/granite-4.0-h-small": "granite4",
    "internlm/internlm2_5-7b-chat": "internlm2", "ai21labs/AI21-Jamba-Mini-1.7": "jamba",
    "microsoft/Phi-4-mini-instruct": "phi4_mini", "google/functiongemma-270m-it": "functiongemma",
    "google/gemma-4-27b-it": "gemma4", "ByteDance-Seed/Seed-OSS-36B-Instruct": "seed_oss",
    "tencent/Hunyuan-A13B-Instruct": "hunyuan_a13b", "stepfun-ai/step3": "step3",
    "baidu/ERNIE-4.5-21B-A3B-Thinking": "ernie45", "HuggingFaceTB/SmolLM3-3B": "smollm3",
    "meituan-longcat/LongCat-Flash-Chat": "longcat", "ai-sage/GigaChat3-10B-A1.8B": "gigachat3",
    "nvidia/Llama-3.3-Nemotron-Super-49B-v1.5": "nemotron_json", "Salesforce/Llama-xLAM-2-8b-fc-r": "xlam",
    "Salesforce/xLAM-2-32b-fc-r": "xlam",
}


@pytest.mark.parametrize("model,family", sorted(MODELS.items()))
def test_model_ids_map_to_their_family(model, family):
    assert templates.family_of(model) == family
    assert templates.for_model(model) == templates.serving(family)  # "parse this model's output": serving-grade
    assert templates.for_model(model, base=True) == templates.get(family)


def test_every_family_in_the_table_is_bundled_and_every_bundled_family_is_reachable():
    assert {f for _, f in _MODEL_FAMILIES} <= set(templates.names())
    assert set(MODELS.values()) == set(templates.names())


def test_unknown_models_are_not_guessed():
    assert templates.family_of("acme/SuperModel-7B") is None
    with pytest.raises(KeyError, match="acme/SuperModel-7B"):
        templates.for_model("acme/SuperModel-7B")
    with pytest.raises(TypeError, match="model"):
        templates.family_of(None)


def test_a_config_with_its_own_response_template_wins(tmp_path):
    own = {"fields": {"content": {}}}
    assert templates.for_model({"name_or_path": "Qwen/Qwen3-8B", "response_template": own}) == own
    assert templates.for_model({"name_or_path": "Qwen/Qwen3-8B"}) == templates.serving("qwen3")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"name_or_path": "openai/gpt-oss-20b"}))
    assert templates.for_model(str(tmp_path)) == templates.serving("gpt_oss")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"response_template": own}))
    assert templates.for_model(str(tmp_path)) == own


def test_a_tokenizer_object_is_read_for_its_template_and_name():
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.BPE()), name_or_path="zai-org/GLM-4.5")
    assert templates.for_model(tok) == templates.serving("glm45")
