"""`templates.family_of_chat_template`: from a checkpoint's Jinja chat template to its bundled family.

Three sets of templates: the project's own (tests/chat_templates/<family>.jinja: each must give its family); the
chat templates model authors publish, as llama.cpp keeps them in models/templates and llama-cpp-python's source
distribution ships them (read from the folder CHATPARSE_PUBLISHED_CHAT_TEMPLATES names; their text is not kept
in this repository, only the expected family of each file); and hand-made adversarial ones.

The expected family of a published template is the bundled family whose response template parses what that
template renders: its start anchor finds the template's generation prompt (with a prompt as `prefix`, an anchor
that is not found makes the whole prompt part of the reply), and its tool-call and reasoning delimiters are the
ones the template writes. None when no bundled response template does; the comment says why.
"""

from __future__ import annotations

import os
import pathlib

import pytest
from deps import need_folder

from chatparse import templates
from chatparse.templates import fingerprints
from chatparse.templates.fingerprints import FINGERPRINTS, family_of_chat_template, family_of_chat_templates

PROJECT_TEMPLATES = pathlib.Path(__file__).resolve().parent / "chat_templates"
ENV = "CHATPARSE_PUBLISHED_CHAT_TEMPLATES"
SDIST = "llama-cpp-python==0.3.36"
HOW = (f'{ENV} must name the models/templates folder of {SDIST}\'s source distribution: '
       f'pip download --no-deps --no-binary :all: "{SDIST}" -d DIR, then tar -xzf '
       f'DIR/llama_cpp_python-0.3.36.tar.gz llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates')

PUBLISHED = {
    "Apertus-8B-Instruct.jinja": None,  # <|assistant_start|>, calls in <|tools_prefix|>: no bundled family
    "Apriel-1.6-15b-Thinker-fixed.jinja": None,  # <|begin_assistant|>, [BEGIN FINAL RESPONSE]
    "Bielik-11B-v3.0-Instruct.jinja": "qwen3",  # ChatML, <think>, JSON in <tool_call>
    "ByteDance-Seed-OSS.jinja": "seed_oss",
    "Cohere2MoE.jinja": "cohere",
    "CohereForAI-c4ai-command-r-plus-tool_use.jinja": None,  # "Action: ```json" calls, not <|START_ACTION|>
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "cohere",
    "GLM-4.6.jinja": "glm45",
    "GLM-4.7-Flash.jinja": "glm47",
    "GigaChat3-10B-A1.8B.jinja": "gigachat3",
    "GigaChat3.1-10B-A1.8B.jinja": "gigachat3",  # <|function_call|>, which gigachat3 also reads
    "HuggingFaceTB-SmolLM3-3B.jinja": "smollm3",  # renders no calls; its reasoning is SmolLM3's
    "Kimi-K2-Instruct.jinja": "kimi_k2",
    "Kimi-K2-Thinking.jinja": "kimi_k2",
    "Kimi-K3.jinja": None,  # <|open|>message ... XTML markup: no bundled family
    "LFM2-8B-A1B.jinja": "lfm2",  # calls stay in the text; LFM2's tool list
    "LFM2.5-8B-A1B.jinja": "lfm2",  # <|tool_call_start|>[f(a=1)]<|tool_call_end|> (pythonic list inside)
    "LFM2.5-Instruct.jinja": "lfm2",  # calls stay in the text; LFM2's "List of tools: [...]"
    "MiMo-VL.jinja": "hermes",  # ChatML, JSON in <tool_call>, no <think> in the template
    "MiniMax-M1.jinja": None,  # prompt ends "ai name=assistant": the bundled anchor is "ai name=MiniMax AI"
    "MiniMax-M2.jinja": "minimax_m2",
    "MiniMax-M3.jinja": None,  # <mm:think>, ]<]minimax[>[<tool_call>: not M2's markup
    "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral_v11",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3_coder",  # ChatML, <tool_call><function=...>
    "NVIDIA-Nemotron-Nano-v2.jinja": None,  # <SPECIAL_11>Assistant turns: nemotron_json's anchor is Llama 3's
    "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": "hermes",
    "NousResearch-Hermes-3-Llama-3.1-8B-tool_use.jinja": "hermes",
    "Qwen-QwQ-32B.jinja": "qwen3",
    "Qwen-Qwen2.5-7B-Instruct.jinja": "hermes",
    "Qwen-Qwen3-0.6B.jinja": "qwen3",
    "Qwen3-Coder.jinja": "qwen3_coder",
    "Qwen3.5-4B.jinja": "qwen3_coder",
    "Reka-Edge.jinja": None,  # "assistant: " ... <sep> turns
    "Spark2.5.jinja": None,  # GLM-style calls, but <|Bot|> ... <｜end▁of▁sentence｜> turns
    "StepFun3.5-Flash.jinja": "qwen3_coder",  # ChatML, <tool_call><function=...> (not step3's <|BOT|> markup)
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v31",
    "deepseek-ai-DeepSeek-V3.2.jinja": "deepseek_v32",
    "deepseek-ai-DeepSeek-V4-Flash-0731.jinja": None,  # <｜DSML｜tool_calls>: deepseek_v32 keeps it as text
    "deepseek-ai-DeepSeek-V4.jinja": None,  # the same
    "fireworks-ai-llama-3-firefunction-v2.jinja": None,  # Llama 3 turns with functools[...]
    "google-gemma-2-2b-it.jinja": None,  # no tool calls, no reasoning
    "google-gemma-4-31B-it-interleaved.jinja": "gemma4",
    "google-gemma-4-31B-it.jinja": "gemma4",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite3",  # <|tool_call|>
    "ibm-granite-granite-4.0.jinja": "granite4",
    "ibm-granite-granite-4.1.jinja": "granite4",
    "inclusionai-ling-3.0-flash.jinja": None,  # GLM-style calls in <role>ASSISTANT</role> ... <|role_end|>
    "llama-cpp-deepseek-r1.jinja": "deepseek_r1",
    "llama-cpp-rwkv-world.jinja": None,  # "Assistant:" turns, no tool calls
    "meetkai-functionary-medium-v3.1.jinja": None,  # <function=NAME>{json}</function> in Llama 3 turns
    "meetkai-functionary-medium-v3.2.jinja": None,  # >>>NAME\n{json}
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3_json",
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3_json",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3_json",
    "microsoft-Phi-3.5-mini-instruct.jinja": None,  # no tool calls (phi4_mini is told by its functools[)
    "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral_v11",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral_pre_v11",
    "moonshotai-Kimi-K2.jinja": "kimi_k2",
    "muse-glimmer.jinja": None,  # <|start|>assistant to=... with <atem:function_calls>, no <|channel|>
    "openai-gpt-oss-120b.jinja": "gpt_oss",
    "openbmb-MiniCPM5-1B.jinja": None,  # ChatML with <function name=...><param ...> calls
    "poolside-Laguna-S-2.1.jinja": None,  # GLM-style calls in <assistant> ... </assistant> turns
    "poolside-Laguna-XS-2.1.jinja": None,  # the same
    "poolside-Laguna-XS.2.jinja": None,  # the same
    "tencent-Hy3.jinja": None,  # <｜hy_Assistant...｜> turns (hunyuan_a13b's anchor is <|extra_0|>)
    "unsloth-Apriel-1.5.jinja": None,  # <|assistant|> turns with <tool_calls>[...]</tool_calls>
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral_v11",
    "upstage-Solar-Open-100B.jinja": None,  # <|begin|>assistant<|tool_calls|> markup
}


@pytest.fixture(scope="module")
def published() -> pathlib.Path:
    return need_folder(ENV, HOW)


@pytest.mark.parametrize("family", templates.names())
def test_each_project_chat_template_is_recognised_as_its_family(family):
    text = (PROJECT_TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")
    assert family_of_chat_template(text) == family


def test_the_fingerprint_table_covers_exactly_the_bundled_families():
    assert {family for family, _, _ in FINGERPRINTS} == set(templates.names())
    assert set(PUBLISHED.values()) - {None} <= set(templates.names())
    assert templates.family_of_chat_template is family_of_chat_template
    assert "family_of_chat_template" in templates.__all__


@pytest.mark.parametrize("row", range(len(FINGERPRINTS)))
def test_each_row_is_reachable_and_honours_its_exclusions(row):
    """A row's markers alone give its family (so no earlier row shadows it); inside a comment they give None;
    with one of its excluded markers added they no longer give that family."""
    family, markers, excluded = FINGERPRINTS[row]
    assert family_of_chat_template("\n".join(markers)) == family
    assert family_of_chat_template("{#- " + "\n".join(markers) + " -#}") is None
    for marker in excluded:
        assert family_of_chat_template("\n".join(markers + (marker,))) != family


def test_the_published_folder_holds_exactly_the_listed_templates(published):
    """A new llama-cpp-python version that adds, drops or renames a template fails here until the table says
    what each one should give."""
    assert sorted(p.name for p in published.glob("*.jinja")) == sorted(PUBLISHED)


def _published_params():
    """One test per published template where the folder is given (CI); one, which skips, where it is not."""
    if not os.environ.get(ENV):
        return [pytest.param(None, None, id="folder-not-given")]
    return [pytest.param(name, family, id=name) for name, family in sorted(PUBLISHED.items())]


@pytest.mark.parametrize("name,family", _published_params())
def test_published_chat_templates_give_their_family_or_none(published, name, family):
    path = published / name
    if not path.is_file():
        pytest.fail(f"{name} is listed but not in {published}")
    assert family_of_chat_template(path.read_text(encoding="utf-8")) == family


def test_nothing_is_recognised_in_text_without_markers_or_of_the_wrong_type():
    assert family_of_chat_template("") is None
    assert family_of_chat_template("{{ messages[0].content }}") is None
    assert family_of_chat_template("<|im_start|>assistant\n") is None  # a turn header alone is no family
    for value in (None, b"<|im_start|>assistant <tool_call>", ["<tool_call>"], 3):
        with pytest.raises(TypeError, match="chat_template"):
            family_of_chat_template(value)


def test_markers_only_in_jinja_comments_do_not_count():
    """Comments are never rendered: a marker that occurs only in one says nothing about the model's output."""
    hermes = (PROJECT_TEMPLATES / "hermes.jinja").read_text(encoding="utf-8")
    qwen3 = (PROJECT_TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8")
    # hermes with a comment mentioning <think> (which would make it qwen3) stays hermes
    assert family_of_chat_template("{# like Qwen3 but without <think> #}\n" + hermes) == "hermes"
    assert family_of_chat_template(hermes + "{#-\n<think>\n-#}") == "hermes"
    # a plain ChatML template whose only tool markup is in a comment has no family
    plain = "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}" \
            "<|im_start|>assistant\n"
    assert family_of_chat_template(plain) is None
    assert family_of_chat_template("{# calls: <tool_call>{...}</tool_call> <think> #}" + plain) is None
    # the markers outside the comment still count
    assert family_of_chat_template(qwen3 + "{# <function= #}") == "qwen3"


def test_a_tokenizer_configs_list_of_named_templates():
    hermes = (PROJECT_TEMPLATES / "hermes.jinja").read_text(encoding="utf-8")
    qwen3 = (PROJECT_TEMPLATES / "qwen3.jinja").read_text(encoding="utf-8")
    plain = "<|im_start|>assistant\n{{ messages[-1].content }}"
    entries = [{"name": "default", "template": plain}, {"name": "tool_use", "template": hermes}]
    assert family_of_chat_templates(entries) == "hermes"  # the tool-use template shows the calls
    assert family_of_chat_templates([{"name": "default", "template": qwen3}]) == "qwen3"
    assert family_of_chat_templates([{"name": "default", "template": qwen3},
                                     {"name": "tool_use", "template": qwen3}]) == "qwen3"
    # two families disagree: None, not a guess
    assert family_of_chat_templates([{"name": "default", "template": qwen3},
                                     {"name": "tool_use", "template": hermes}]) is None
    # templates of other names (rag, ...) are not read
    assert family_of_chat_templates([{"name": "rag", "template": hermes}]) is None
    assert family_of_chat_templates([]) is None
    assert family_of_chat_templates(hermes) == "hermes"  # a str is one template
    for bad in (None, {"default": hermes}, [{"name": "default"}], [("default", hermes)]):
        with pytest.raises(TypeError, match="chat_template"):
            family_of_chat_templates(bad)
    assert fingerprints.family_of_chat_templates is family_of_chat_templates
