"""chatparse's vLLM plugin against vLLM 0.33.0's own hand-written per-model parsers, on the real-output corpus.

Run with the Python of the vLLM venv (vllm==0.33.0 pins transformers<5.21, so it lives apart; `.ci/run` makes
it at ~/.cache/chatparse/venv-vllm):

    ~/.cache/chatparse/venv-vllm/bin/python -m bench.vllm_families [--family NAME ...]

For every bundled family that vLLM 0.33.0 has a hand-written parser for (`HANDWRITTEN`), each case of
tests/real_outputs/<family>.json is parsed twice, as vLLM's OpenAI chat server would parse it:

* ``chatparse``: the parser class vLLM's server builds for ``--enable-auto-tool-choice --tool-call-parser
  chatparse --reasoning-parser chatparse`` (`ParserManager.get_parser` with the tokenizer, after
  `chatparse.integrations.vllm.register`), with a tokenizer whose config holds NO ``response_template``:
  the plugin has to find the family's template itself, from the tokenizer's ``name_or_path`` (a published
  model id of the family). Where the plugin installed here cannot (it predates that resolution), the harness
  says so (`chatparse_construction`) and falls back to handing the plugin the family's bundled template
  explicitly (its serving-grade one where `chatparse.templates.serving` exists), so that the comparison
  still runs; the report names the construction used.
* ``vllm``: the class built for ``--tool-call-parser <theirs> --reasoning-parser <theirs>`` (`HANDWRITTEN`).

Both are then driven as `vllm/entrypoints/openai/chat_completion/serving.py` drives them: one parser per
choice, built as ``cls(tokenizer, request.tools, chat_template_kwargs=..., model_config=None)``;
``adjust_request`` on a parser of its own first (as the renderer does); non-streaming: `set_prompt_token_ids`
then ``parse(output, request, enable_auto_tools=True, model_output_token_ids=ids)`` and
`assemble_chat_message_fields`; streamed: a `ChatStreamProcessor` stepped once per generated token (the text
decoded incrementally as vLLM's detokenizer does, `tokenizers.decoders.DecodeStream`), the prompt's ids
passed on every step and the finish reason on the last, and the deltas joined as an OpenAI client joins
them (`run_case`). Results are compared by `same_message`.

The request (`request_for`): the case's ``tools`` where it has them, else one tool per function the output
calls, typed as the expected call's arguments are (`tools_for`), since vLLM's server returns tool calls only
for a request with tools and tool_choice "auto", and a client sends its tools' schemas; and
``chat_template_kwargs`` {"thinking": x, "enable_thinking": x}, x telling whether the prompt was rendered
with thinking on as far as the case shows (`thinking_of`): several of vLLM's parsers (Qwen3's engine, so
qwen3 / qwen3_coder / seed_oss, DeepSeek-V3.1/3.2, Gemma 4, GLM, Kimi-K2) decide from that request flag, not
from the text, whether the output starts in reasoning, and their default (thinking on, Gemma 4 off) reads
the content of an output with no reasoning as reasoning.

gpt-oss: vLLM's server builds `HarmonyParser` whenever the model's config says ``model_type == "gpt_oss"``,
whatever parser names are given (``is_harmony``); it parses the o200k_harmony token ids and refuses any
reasoning or tool parser but its own stubs (``openai_gptoss`` / ``openai``). The vLLM side of gpt_oss is that
(``is_harmony=True``, the output tokenized by the harmony encoding, as a gpt-oss tokenizer does). The
chatparse side is built as for the other families (``is_harmony=False``: what the plugin gets where the
model's config is not gpt_oss, e.g. a fine-tune with another model_type); `main` also reports what a real
gpt-oss server does with ``--tool-call-parser chatparse`` (HarmonyParser refuses chatparse's parsers).

Prints a Markdown report and writes it to bench/results/VLLM_FAMILIES.md.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import logging
import pathlib
import platform
import subprocess
import time
from collections.abc import Callable
from typing import Any

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers.decoders import DecodeStream
from transformers import PreTrainedTokenizerFast
from vllm.entrypoints.openai.chat_completion.message_assembly import assemble_chat_message_fields
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
from vllm.parser.parser_manager import ParserManager

import chatparse
from chatparse import templates

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "real_outputs"
OUT = pathlib.Path(__file__).resolve().parent / "results" / "VLLM_FAMILIES.md"

# --------------------------------------------------------------------------------------------------------------
# Which of vLLM's parsers parse which family
# --------------------------------------------------------------------------------------------------------------
# family -> (vLLM --tool-call-parser, vLLM --reasoning-parser, a published model id of the family). Names are
# those registered in vllm/tool_parsers/__init__.py and vllm/reasoning/__init__.py of vLLM 0.33.0; each parser
# was read to check that it parses this family's format (the comment says what it is).
HANDWRITTEN: dict[str, tuple[str | None, str | None, str]] = {
    # cohere_melody's "cmd3" preset (Command R7B / A / A Reasoning: START_THINKING / START_ACTION /
    # START_RESPONSE; "cohere_command4" gives the same results on this corpus); vllm/parser/cohere_command.py
    # needs the `cohere_melody` package (not installed by .ci/run: the test skips the family without it)
    "cohere": ("cohere_command3", "cohere_command3", "CohereLabs/command-a-reasoning-08-2025"),
    # the V3 tool format (function<｜tool▁sep｜>NAME + ```json); <think>...</think> with the prompt's <think>
    "deepseek_r1": ("deepseek_v3", "deepseek_r1", "deepseek-ai/DeepSeek-R1-0528"),
    "deepseek_v3": ("deepseek_v3", None, "deepseek-ai/DeepSeek-V3-0324"),
    # NAME<｜tool▁sep｜>{json}; "deepseek_v3" reasoning is V3.1's: thinking from chat_template_kwargs
    "deepseek_v31": ("deepseek_v31", "deepseek_v3", "deepseek-ai/DeepSeek-V3.1"),
    # DSML <｜DSML｜invoke ...> (vllm/parser/deepseek_v32.py, which has no reasoning of its own), V3.1's
    # reasoning toggle
    "deepseek_v32": ("deepseek_v32", "deepseek_v3", "deepseek-ai/DeepSeek-V3.2"),
    "ernie45": ("ernie45", "ernie45", "baidu/ERNIE-4.5-21B-A3B-Thinking"),
    "functiongemma": ("functiongemma", None, "google/functiongemma-270m-it"),
    "gemma4": ("gemma4", "gemma4", "google/gemma-4-31B-it"),
    "gigachat3": ("gigachat3", None, "ai-sage/GigaChat3-10B-A1.8B"),
    # one parser (vllm/parser/glm47_moe.py) for both: the newline after the name is optional there
    "glm45": ("glm45", "glm45", "zai-org/GLM-4.5"),
    "glm47": ("glm47", "glm47", "zai-org/GLM-4.7"),
    # HarmonyParser (is_harmony): see the module docstring
    "gpt_oss": ("openai", "openai_gptoss", "openai/gpt-oss-20b"),
    # vllm/parser/granite.py: <|tool_call|> / <tool_call> + JSON array; "granite" reasoning is Granite 3.2's
    # "Here is my thought process:" / "Here is my response:"
    "granite3": ("granite", "granite", "ibm-granite/granite-3.2-8b-instruct"),
    "granite4": ("granite4", None, "ibm-granite/granite-4.0-h-small"),
    "granite_20b_fc": ("granite-20b-fc", None, "ibm-granite/granite-20b-functioncalling"),
    "hermes": ("hermes", None, "NousResearch/Hermes-3-Llama-3.1-8B"),
    "hunyuan_a13b": ("hunyuan_a13b", "hunyuan_a13b", "tencent/Hunyuan-A13B-Instruct"),
    "internlm2": ("internlm", None, "internlm/internlm2_5-7b-chat"),
    "jamba": ("jamba", None, "ai21labs/AI21-Jamba-Mini-1.7"),
    "kimi_k2": ("kimi_k2", "kimi_k2", "moonshotai/Kimi-K2-Thinking"),
    # pythonic (and JSON) lists in <|tool_call_start|>...<|tool_call_end|>; LFM2 has no reasoning parser
    "lfm2": ("lfm2", None, "LiquidAI/LFM2-1.2B"),
    "llama3_json": ("llama3_json", None, "meta-llama/Llama-3.1-8B-Instruct"),
    # a Hermes subclass with <longcat_tool_call>
    "longcat": ("longcat", None, "meituan-longcat/LongCat-Flash-Chat"),
    "minimax_m2": ("minimax_m2", "minimax_m2", "MiniMaxAI/MiniMax-M2"),
    # vllm/parser/mistral.py; pre-v11 when the vocabulary has no [ARGS] (family_tokenizer leaves it out)
    "mistral_pre_v11": ("mistral", None, "mistralai/Mistral-7B-Instruct-v0.3"),
    "mistral_v11": ("mistral", "mistral", "mistralai/Magistral-Small-2509"),
    "phi4_mini": ("phi4_mini_json", None, "microsoft/Phi-4-mini-instruct"),
    # "qwen3_json" is an alias of hermes; "qwen3" reasoning: vllm/parser/qwen3.py's engine
    "qwen3": ("hermes", "qwen3", "Qwen/Qwen3-8B"),
    "qwen3_coder": ("qwen3_coder", "qwen3", "Qwen/Qwen3-Coder-30B-A3B-Instruct"),
    "seed_oss": ("seed_oss", "seed_oss", "ByteDance-Seed/Seed-OSS-36B-Instruct"),
    # SmolLM3 has no parser of its own: its <tool_call>{json}</tool_call> is Hermes's, and <think> is parsed
    # by the generic deepseek_r1 reasoning parser (what SmolLM3 deployments use)
    "smollm3": ("hermes", "deepseek_r1", "HuggingFaceTB/SmolLM3-3B"),
    "step3": ("step3", "step3", "stepfun-ai/step3"),
    "xlam": ("xlam", None, "Salesforce/Llama-xLAM-2-8b-fc-r"),
}
# Left out, vLLM 0.33.0 having no hand-written parser of the family's format:
# * kimi_vl_think: ◁think▷...◁/think▷ (no reasoning parser reads ◁think▷; no tool calls in the format);
# * minimax_m1: JSON lines in <tool_calls> (vLLM 0.33.0 registers minimax_m2 and minimax_m3 only, whose
#   formats are <minimax:tool_call><invoke ...> and ]<]minimax[>[ XML);
# * nemotron_json: <TOOLCALL>[...]</TOOLCALL> (the llama_nemotron_json parser is gone; nemotron_v3 parses
#   Nemotron V3's <tool_call><function=...> XML, another format).
LEFT_OUT = {
    "kimi_vl_think": "no reasoning parser for ◁think▷ and no tool format",
    "minimax_m1": "no parser for <tool_calls> JSON lines (only minimax_m2 / minimax_m3, other formats)",
    "nemotron_json": "no parser for <TOOLCALL>[...]</TOOLCALL> (nemotron_v3 is V3's XML format)",
}
HARMONY = frozenset({"gpt_oss"})

# Literals each family's tokenizer holds as single added tokens: the family's special tokens that its
# template and vLLM's parser name (vLLM's parsers look several of them up in the vocabulary and refuse a
# tokenizer without them).
_QWEN = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "</tool_call>"]
_DEEPSEEK = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>", "<think>",
             "</think>", "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>",
             "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"]
_LLAMA = ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
          "<|python_tag|>"]
_GLM = ["<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>",
        "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"]
_MISTRAL = ["<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
            "[TOOL_RESULTS]", "[/TOOL_RESULTS]"]
MARKERS: dict[str, list[str]] = {
    "cohere": ["<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|CHATBOT_TOKEN|>", "<|USER_TOKEN|>",
               "<|SYSTEM_TOKEN|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>",
               "<|END_ACTION|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"],
    "deepseek_r1": _DEEPSEEK,
    "deepseek_v3": _DEEPSEEK,
    "deepseek_v31": _DEEPSEEK,
    "deepseek_v32": _DEEPSEEK,
    "ernie45": ["<s>", "</s>", "<think>", "</think>", "<tool_call>", "</tool_call>", "<response>", "</response>"],
    "functiongemma": ["<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>", "<start_function_call>",
                      "<end_function_call>", "<escape>"],
    "gemma4": ["<bos>", "<eos>", "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool_call>",
               "<tool_call|>", "<|tool_response>", "<tool_response|>", '<|"|>'],
    "gigachat3": ["<s>", "</s>", "<|message_sep|>", "<|role_sep|>", "<|function_call|>"],
    "glm45": _GLM,
    "glm47": _GLM,
    "gpt_oss": ["<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>",
                "<|call|>", "<|endoftext|>"],
    "granite3": ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"],
    "granite4": ["<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<tool_call>", "</tool_call>"],
    "granite_20b_fc": ["<|endoftext|>"],
    "hermes": _QWEN,
    "hunyuan_a13b": ["<|startoftext|>", "<|extra_0|>", "<|eos|>", "<think>", "</think>", "<answer>", "</answer>",
                     "<tool_calls>", "</tool_calls>"],
    "internlm2": ["<s>", "</s>", "<|im_start|>", "<|im_end|>", "<|action_start|>", "<|action_end|>",
                  "<|plugin|>", "<|interpreter|>"],
    "jamba": ["<|bos|>", "<|eos|>", "<|bom|>", "<|eom|>", "<tool_calls>", "</tool_calls>"],
    "kimi_k2": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<think>",
                "</think>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
                "<|tool_call_end|>", "<|tool_call_argument_begin|>"],
    "kimi_vl_think": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "◁think▷", "◁/think▷"],
    "lfm2": ["<|startoftext|>", "<|im_start|>", "<|im_end|>", "<|tool_call_start|>", "<|tool_call_end|>",
             "<think>", "</think>"],
    "llama3_json": _LLAMA,
    "longcat": ["<longcat_s>", "</longcat_s>", "<longcat_tool_call>", "</longcat_tool_call>"],
    "minimax_m1": ["<think>", "</think>", "<tool_calls>", "</tool_calls>"],
    "minimax_m2": ["]~!b[", "]~b]", "[e~[", "<think>", "</think>", "<minimax:tool_call>", "</minimax:tool_call>"],
    "mistral_pre_v11": _MISTRAL,
    "mistral_v11": _MISTRAL + ["[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "[SYSTEM_PROMPT]",
                               "[/SYSTEM_PROMPT]"],
    "nemotron_json": _LLAMA + ["<TOOLCALL>", "</TOOLCALL>", "<think>", "</think>"],
    "phi4_mini": ["<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|tool|>", "<|/tool|>",
                  "<|endoftext|>"],
    "qwen3": _QWEN,
    "qwen3_coder": _QWEN,
    "seed_oss": ["<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>",
                 "</seed:tool_call>", "<seed:cot_budget_reflect>", "</seed:cot_budget_reflect>"],
    "smollm3": _QWEN,
    "step3": ["<|BOT|>", "<|EOT|>", "<think>", "</think>", "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>",
              "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"],
    "xlam": _LLAMA + ["<think>", "</think>", "<tool_call>", "</tool_call>", "[TOOL_CALLS]"],
}

for _family, (_tool, _reasoning, _model) in HANDWRITTEN.items():
    assert templates.family_of(_model) == _family, (_family, _model, templates.family_of(_model))


# --------------------------------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------------------------------
@functools.cache
def corpus(family: str) -> tuple[dict, ...]:
    """The cases of tests/real_outputs/<family>.json."""
    return tuple(json.loads((CORPUS / f"{family}.json").read_text(encoding="utf-8"))["cases"])


def is_malformed(case: dict) -> bool:
    return (case.get("xfail") or "").startswith("malformed:")


# --------------------------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------------------------
@functools.cache
def family_tokenizer(family: str) -> PreTrainedTokenizerFast:
    """A real tokenizer for `family`, made here: a byte-level BPE (vocabulary of 1,000) trained on the family's
    corpus outputs and prefixes, the family's special markers (`MARKERS`) as added tokens, ``name_or_path``
    the family's published model id, and no ``response_template`` anywhere. One per process and family."""
    markers = list(dict.fromkeys(MARKERS.get(family, [])))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    texts = [t for case in corpus(family) for t in (case.get("prefix", ""), case["output"]) if t]
    tok.train_from_iterator(texts * 3, trainer=trainer)
    # not "special": every decode keeps them, as vLLM's response-template parsers ask (skip_special_tokens
    # False) and the hand-written ones expect
    tok.add_tokens([AddedToken(m, special=False, normalized=False) for m in markers])
    model_id = HANDWRITTEN[family][2] if family in HANDWRITTEN else family
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False, name_or_path=model_id)
    hf.name_or_path = model_id
    assert "response_template" not in hf.init_kwargs and getattr(hf, "response_template", None) is None
    return hf


class _HarmonyIds:
    """The o200k_harmony encoding as `run_case` uses a tokenizer: encode and incremental decode."""

    def __init__(self) -> None:
        from vllm.entrypoints.openai.parser.harmony_utils import get_encoding

        self.encoding = get_encoding()

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode(text, allowed_special="all"))

    def deltas(self, ids: list[int]) -> list[tuple[str, list[int]]]:
        out, sent = [], ""
        for k in range(len(ids)):
            text = self.encoding.decode(ids[:k + 1])
            if text.endswith("\ufffd"):  # a character's bytes not all there yet: vLLM holds it
                out.append(("", [ids[k]]))
                continue
            out.append((text[len(sent):], [ids[k]]))
            sent = text
        assert sent == self.encoding.decode(ids)
        return out


@functools.cache
def harmony_ids() -> _HarmonyIds:
    return _HarmonyIds()


def encode(tok: Any, text: str) -> list[int]:
    ids = tok.encode(text, add_special_tokens=False)
    assert tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False) == text, text[:80]
    return list(ids)


def deltas(tok: Any, ids: list[int]) -> list[tuple[str, list[int]]]:
    """One token per delta, the text as vLLM's detokenizer hands it out: `tokenizers`' incremental
    `DecodeStream` (what vLLM's fast detokenizer steps), which holds a character until its bytes are
    complete (as bench/vllm_plugin.py's `deltas`)."""
    stream = DecodeStream(skip_special_tokens=False)
    return [(stream.step(tok._tokenizer, i) or "", [i]) for i in ids]


# --------------------------------------------------------------------------------------------------------------
# The two parsers
# --------------------------------------------------------------------------------------------------------------
def vllm_parser_cls(family: str, tok: Any = None) -> type:
    """The parser class vLLM's server builds for the family's hand-written parsers (`HANDWRITTEN`)."""
    tool, reasoning, model = HANDWRITTEN[family]
    return ParserManager.get_parser(tool_parser_name=tool, reasoning_parser_name=reasoning,
                                    enable_auto_tools=True, model_name=model,
                                    tokenizer=tok if tok is not None else family_tokenizer(family),
                                    is_harmony=family in HARMONY)


# family -> how the chatparse side was built: "server" (exactly as vLLM's server) or the fallback's reason
chatparse_construction: dict[str, str] = {}


def _served_template(family: str) -> dict:
    serving = getattr(templates, "serving", None)
    return serving(family) if serving is not None else templates.get(family)


def chatparse_parser_cls(family: str, tok: Any = None) -> Callable:
    """The parser class vLLM's server builds for ``--tool-call-parser chatparse --reasoning-parser chatparse``
    with the family's tokenizer (no response_template in it): `ParserManager.get_parser` after `register`.

    Where the plugin refuses that tokenizer (a plugin that does not yet resolve the family's template from
    ``name_or_path``), the class is built as the server would without the tokenizer check and handed the
    family's bundled template explicitly (``response_template=``, its serving-grade one where the package
    has `templates.serving`); `chatparse_construction` records which."""
    from chatparse.integrations import vllm as plugin

    plugin.register()
    tok = tok if tok is not None else family_tokenizer(family)
    model = HANDWRITTEN[family][2] if family in HANDWRITTEN else family
    kwargs = dict(tool_parser_name=plugin.NAME, reasoning_parser_name=plugin.NAME, enable_auto_tools=True,
                  model_name=model)
    try:
        cls = ParserManager.get_parser(tokenizer=tok, **kwargs)
        chatparse_construction[family] = "server"
        return cls
    except TypeError as exc:
        reason = str(exc).split(": ", 1)[-1][:160]
    cls = ParserManager.get_parser(tokenizer=None, **kwargs)
    template = _served_template(family)
    what = "serving" if hasattr(templates, "serving") else "get"
    chatparse_construction[family] = f"fallback: response_template=templates.{what}({family!r}) ({reason})"
    return functools.partial(cls, response_template=template)


def _parser_class(parser_cls: Callable) -> type:
    return parser_cls.func if isinstance(parser_cls, functools.partial) else parser_cls


# --------------------------------------------------------------------------------------------------------------
# The request
# --------------------------------------------------------------------------------------------------------------
_REASONING_OPENERS = ("<think>", "<|channel>", "<seed:think>", "[THINK]", "<|START_THINKING|>", "◁think▷",
                      "Here is my thought process:", "<|channel|>analysis")
_REASONING_CLOSERS = ("</think>", "<channel|>", "</seed:think>", "[/THINK]", "<|END_THINKING|>", "◁/think▷",
                      "Here is my response:")


def thinking_of(case: dict) -> bool:
    """Whether the case's prompt was rendered with thinking on, as far as the case shows: False where the prefix
    ends with a closed reasoning (e.g. ``<think>\n\n</think>``); True where the prefix ends with a reasoning
    opener, holds Gemma 4's ``<|think|>`` switch, or the output or the expected message has reasoning; else
    False (an output with no reasoning at all is taken as the answer to a request with thinking off, the flag
    under which vLLM's flag-reading parsers read it as content)."""
    prefix = (case.get("prefix") or "").rstrip()
    if prefix.endswith(_REASONING_CLOSERS):
        return False
    if prefix.endswith(_REASONING_OPENERS) or "<|think|>" in prefix:
        return True
    output = case["output"]
    if any(m in output for m in _REASONING_OPENERS + _REASONING_CLOSERS):
        return True
    return bool((case.get("expected") or {}).get("reasoning_content"))


def _schema(value: Any) -> dict:
    """The JSON schema a client's tool definition would give a parameter with this value."""
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        kinds = {json.dumps(_schema(v), sort_keys=True) for v in value}
        return {"type": "array", **({"items": json.loads(kinds.pop())} if len(kinds) == 1 else {})}
    return {"type": "object", "properties": {k: _schema(v) for k, v in value.items()}}


def _tool(name: str, *calls: Any) -> dict:
    """A tool named `name` whose parameters type the arguments of every one of `calls` (dicts)."""
    properties: dict = {}
    for arguments in calls:
        if isinstance(arguments, dict):
            for key, value in arguments.items():
                properties.setdefault(key, _schema(value))
    parameters = {"type": "object", "properties": properties} if properties else {"type": "object"}
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def tools_for(family: str, case: dict) -> list[dict]:
    """The case's tools; else one tool per function the output calls (the expected calls' names, then those
    chatparse's bundled template finds), its parameters typed as the expected call's arguments are (the
    schema a client would send: vLLM's engine parsers leave an argument the schema does not type a string)."""
    if case.get("tools"):
        return case["tools"]
    calls: dict[str, list] = {}
    for c in (case.get("expected") or {}).get("tool_calls") or ():
        calls.setdefault(c["function"]["name"], []).append(c["function"].get("arguments"))
    try:
        msg = chatparse.parse_response(case["output"], _served_template(family), prefix=case.get("prefix", ""))
        for c in msg.get("tool_calls") or ():
            if isinstance(c.get("function"), dict) and isinstance(c["function"].get("name"), str):
                calls.setdefault(c["function"]["name"], [])
    except Exception:  # noqa: BLE001 - only a source of names
        pass
    return [_tool(n, *a) for n, a in calls.items() if n] or [_tool("get_weather")]


def request_for(family: str, case: dict, *, thinking_flag: bool = True) -> ChatCompletionRequest:
    """The chat request the case's output answers (see the module docstring); with ``thinking_flag=False``, no
    chat_template_kwargs (each parser's default)."""
    tools = tools_for(family, case)
    extra = {}
    if thinking_flag:
        thinking = thinking_of(case)
        extra["chat_template_kwargs"] = {"thinking": thinking, "enable_thinking": thinking}
    return ChatCompletionRequest(model=HANDWRITTEN.get(family, ("", "", family))[2],
                                 messages=[{"role": "user", "content": "hi"}], tools=tools, **extra)


# --------------------------------------------------------------------------------------------------------------
# One case through one parser
# --------------------------------------------------------------------------------------------------------------
def _args(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # kept as the raw text: it compares equal only to the same raw text


def run_case(parser_cls: Callable, tok: Any, case: dict, *, streamed: bool, request=None,
             family: str | None = None) -> dict:
    """`case` through a fresh parser of `parser_cls` as vLLM's chat server runs one choice: a normalized
    ``{"reasoning", "content", "tool_calls": [(name, arguments parsed)]}``, or ``{"error": "Type: msg"}``
    where the parser (or its adjust_request) raises.

    `request` defaults to `request_for(family, case)`. The prompt is the case's prefix, tokenized with `tok`
    and given as the prompt's token ids (`set_prompt_token_ids` / ``prompt_token_ids``). Streamed: the output
    tokenized with `tok` (HarmonyParser: with the o200k_harmony encoding, the ids a gpt-oss tokenizer gives),
    one token per delta, the text decoded incrementally; the deltas are joined as an OpenAI client joins them
    (reasoning and content concatenated, tool calls by index: name and arguments concatenated) and the
    arguments parsed with json.loads at the end."""
    if request is None:
        request = request_for(family, case)
    request = request.model_copy(deep=True)
    cls = _parser_class(parser_cls)
    harmony = cls.__name__ == "HarmonyParser" or any(b.__name__ == "HarmonyParser" for b in cls.__mro__)
    prefix, output = case.get("prefix", ""), case["output"]
    # the harness's own steps raise: a failure here is no parser's result
    if harmony:
        hids = harmony_ids()
        prompt_ids, ids = hids.encode(prefix), hids.encode(output)
        steps = hids.deltas(ids)
    else:
        prompt_ids, ids = encode(tok, prefix), encode(tok, output)
        steps = deltas(tok, ids)
    assert "".join(text for text, _ in steps) == output, "the deltas do not spell the output"
    ctk = request.build_chat_params(None, "auto").chat_template_kwargs
    try:
        make = functools.partial(parser_cls, tok, request.tools, chat_template_kwargs=ctk, model_config=None)
        # the renderer's adjust_request, on a parser of its own
        adjuster = make()
        if prompt_ids:
            adjuster.set_prompt_token_ids(prompt_ids)
        request = adjuster.adjust_request(request)
        parser = make()
        if not streamed:
            parser.set_prompt_token_ids(prompt_ids)
            reasoning, content, calls = parser.parse(output, request, enable_auto_tools=True,
                                                     model_output_token_ids=ids)
            fields = assemble_chat_message_fields(request, reasoning, content, calls, enable_auto_tools=True,
                                                  parser_cls=cls)
            return {"reasoning": fields.reasoning or "", "content": fields.content or "",
                    "tool_calls": [(c.function.name, _args(c.function.arguments)) for c in fields.tool_calls]}
        processor = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=cls)
        if not steps:
            steps = [("", [])]
        reasoning, content, joined = [], [], {}
        for k, (text, delta_ids) in enumerate(steps):
            last = k == len(steps) - 1
            delta, _ = processor.step(text, delta_ids, "stop" if last else None, prompt_ids)
            if delta is None:
                continue
            if delta.reasoning:
                reasoning.append(delta.reasoning)
            if delta.content:
                content.append(delta.content)
            for tc in delta.tool_calls or ():
                slot = joined.setdefault(tc.index, {"name": "", "arguments": ""})
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
        return {"reasoning": "".join(reasoning), "content": "".join(content),
                "tool_calls": [(s["name"], _args(s["arguments"])) for _, s in sorted(joined.items())]}
    except Exception as exc:  # noqa: BLE001 - an exception is a result, reported as such
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def expected_result(case: dict) -> dict:
    """The case's expected message in `run_case`'s form."""
    exp = case.get("expected") or {}
    return {"reasoning": exp.get("reasoning_content") or "", "content": exp.get("content") or "",
            "tool_calls": [(c["function"]["name"], _args(c["function"]["arguments"]))
                           for c in exp.get("tool_calls") or ()]}


def _text(value) -> str:
    """A text field as compared: None as "", runs of whitespace as one space, none at the ends."""
    return " ".join((value or "").split())


def _norm(result: dict) -> tuple:
    if "error" in result:
        return ("error", result["error"])
    return (_text(result.get("reasoning")), _text(result.get("content")),
            [(n, json.dumps(a, sort_keys=True, ensure_ascii=False)) for n, a in result.get("tool_calls") or ()])


def same_message(a: dict, b: dict) -> bool:
    """Whether two `run_case` results are the same message to a client.

    Reasoning and content are compared with every run of whitespace as one space and none at the ends
    (`_text`): servers differ in the whitespace around markup (vLLM's per-model parsers keep the model's own
    between a text and a tool call, chatparse's templates join the text on both sides of a call with their
    ``join``, a blank line), and clients strip; the words and their order must be the same, so text glued
    together where the model wrote a space is a difference. None and "" are the same (no text); tool calls are compared in order by (name,
    arguments as parsed JSON values: key order and JSON spacing do not matter, 1 and 1.0 are equal as in
    Python, a string and the number it spells are not); tool-call ids are ignored (vLLM makes random ones).
    Two errors are the same only with the same exception type and message; an error never equals a
    message."""
    na, nb = _norm(a), _norm(b)
    if na[0] == "error" or nb[0] == "error":
        return na == nb
    if na[:2] != nb[:2] or len(na[2]) != len(nb[2]):
        return False
    return all(x[0] == y[0] and json.loads(x[1]) == json.loads(y[1]) for x, y in zip(na[2], nb[2]))


# --------------------------------------------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------------------------------------------
def compare_family(family: str, *, thinking_flag: bool = True) -> list[dict]:
    """One row per case and mode: the case, whether it is malformed, both results and whether they agree."""
    tok = family_tokenizer(family)
    ours, theirs = chatparse_parser_cls(family, tok), vllm_parser_cls(family, tok)
    rows = []
    for case in corpus(family):
        request = request_for(family, case, thinking_flag=thinking_flag)
        for streamed in (False, True):
            a = run_case(ours, tok, case, streamed=streamed, request=request)
            b = run_case(theirs, tok, case, streamed=streamed, request=request)
            rows.append({"family": family, "id": case["id"], "malformed": is_malformed(case),
                         "streamed": streamed, "chatparse": a, "vllm": b, "same": same_message(a, b),
                         "chatparse_ok": same_message(a, expected_result(case)),
                         "vllm_ok": same_message(b, expected_result(case)), "output": case["output"]})
    return rows


def harmony_refusal() -> str:
    """What vLLM's server does for a gpt-oss model (is_harmony) given ``--tool-call-parser chatparse
    --reasoning-parser chatparse``."""
    from chatparse.integrations import vllm as plugin

    plugin.register()
    tok = family_tokenizer("gpt_oss")
    try:
        cls = ParserManager.get_parser(tool_parser_name=plugin.NAME, reasoning_parser_name=plugin.NAME,
                                       enable_auto_tools=True, model_name=HANDWRITTEN["gpt_oss"][2],
                                       is_harmony=True, tokenizer=tok)
        cls(tok, [_tool("get_weather")])
        return "accepted"
    except Exception as exc:  # noqa: BLE001
        return f"{type(exc).__name__}: {str(exc)[:200]}"


def _short(text: str, n: int = 90) -> str:
    r = repr(text)
    return r if len(r) <= n else r[:n - 3] + "..."


def _result_text(result: dict) -> str:
    if "error" in result:
        return "error " + result["error"]
    parts = []
    if (result.get("reasoning") or "").strip():
        parts.append(f"reasoning={_short(result['reasoning'].strip(), 70)}")
    if (result.get("content") or "").strip():
        parts.append(f"content={_short(result['content'].strip(), 70)}")
    if result.get("tool_calls"):
        parts.append("calls=" + json.dumps(result["tool_calls"], ensure_ascii=False)[:160])
    return ", ".join(parts) or "(empty)"


def _commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "chatparse"],
                               capture_output=True, text=True, check=True).stdout.strip()
        if not dirty:
            return head[:100]
        diff = subprocess.run(["git", "-C", str(ROOT), "diff", "HEAD", "--", "chatparse"], capture_output=True,
                              check=True).stdout
        new = sorted(line[3:] for line in dirty.splitlines() if line.startswith("??"))
        digest = hashlib.sha1(diff + "".join(new).encode()).hexdigest()[:10]
        return (head[:100] + f" plus uncommitted changes in chatparse/ (diff sha1 {digest}"
                + (f"; new: {', '.join(new)}" if new else "") + ")")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _counts(rows: list[dict], family: str) -> list[tuple[int, int]]:
    fr = [r for r in rows if r["family"] == family]
    return [(sum(r["same"] for r in sel), len(sel))
            for sel in ([r for r in fr if r["malformed"] == m and r["streamed"] == s]
                        for m in (False, True) for s in (False, True))]


def report(rows: list[dict], families: list[str], seconds: float, default_rows: list[dict] | None = None) -> str:
    import vllm

    lines = ["# chatparse's vLLM plugin against vLLM's hand-written parsers", "",
             f"vllm {vllm.__version__}, chatparse at {_commit()}; Python {platform.python_version()}; "
             f"{len(families)} families, {seconds:.0f} s. Made by `python -m bench.vllm_families` "
             "(bench/vllm_families.py says how).", "",
             "A cell is `same / cases`: the cases where chatparse's plugin (`--tool-call-parser chatparse "
             "--reasoning-parser chatparse`) returns the message vLLM's own parsers return (`same_message`: "
             "text with whitespace runs as one space, calls by name and parsed arguments). Well-formed: cases whose xfail is not "
             "`malformed:`. `= expected`: the cases where that side gives the corpus's expected message.", "",
             "| family | vLLM parsers | well-formed: one-shot | streamed | malformed: one-shot | streamed "
             "| chatparse = expected | vLLM = expected |",
             "|---|---|---|---|---|---|---|---|"]
    totals = [0] * 12
    for family in families:
        fr = [r for r in rows if r["family"] == family]
        tool, reasoning, _ = HANDWRITTEN[family]
        cells = []
        for malformed in (False, True):
            for streamed in (False, True):
                sel = [r for r in fr if r["malformed"] == malformed and r["streamed"] == streamed]
                cells.append((sum(r["same"] for r in sel), len(sel)))
        one = [r for r in fr if not r["streamed"]]
        ok = [(sum(r["chatparse_ok"] for r in one), len(one)), (sum(r["vllm_ok"] for r in one), len(one))]
        for k, (s, n) in enumerate(cells + ok):
            totals[2 * k] += s
            totals[2 * k + 1] += n
        parsers = f"{tool or '-'} / {reasoning or '-'}" + (" (harmony)" if family in HARMONY else "")
        lines.append(f"| {family} | {parsers} | " + " | ".join(
            ("—" if n == 0 else f"{s}/{n}") for s, n in cells + ok) + " |")
    lines.append("| **total** | | " + " | ".join(f"**{totals[2 * k]}/{totals[2 * k + 1]}**" for k in range(6))
                 + " |")
    if default_rows is not None:
        changed = [f for f in families if _counts(default_rows, f) != _counts(rows, f)]
        lines += ["", "## With the request's default flags", "",
                  "The same cases sent with no chat_template_kwargs (each parser's default thinking flag) instead "
                  "of the flag the case shows (`thinking_of`). Families whose counts change:", ""]
        if changed:
            lines += ["| family | well-formed: one-shot | streamed | malformed: one-shot | streamed |",
                      "|---|---|---|---|---|"]
            for family in changed:
                lines.append(f"| {family} | " + " | ".join(
                    ("—" if n == 0 else f"{s}/{n}") for s, n in _counts(default_rows, family)) + " |")
        else:
            lines.append("none.")
    lines += ["", "## How the chatparse side was built", ""]
    ways = {chatparse_construction.get(family, "?") for family in families}
    if ways == {"server"}:
        lines.append("Every family: as vLLM's server builds it (`ParserManager.get_parser` with the tokenizer, which "
                     "holds no response_template; the plugin resolved the family's template from its name).")
    else:
        for family in families:
            lines.append(f"* {family}: {chatparse_construction.get(family, '?')}")
    if "gpt_oss" in families:
        lines += ["", f"A gpt-oss model (vLLM's server passes is_harmony=True) with `--tool-call-parser chatparse "
                      f"--reasoning-parser chatparse`: {harmony_refusal()}"]
    lines += ["", "## Left out", ""] + [f"* {f}: {why}" for f, why in LEFT_OUT.items()]
    lines += ["", "## Every difference", "",
              "| family | case | mode | malformed | output | chatparse | vLLM |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["same"]:
            continue
        cell = lambda s: s.replace("|", "\\|").replace("\n", "\\n")  # noqa: E731
        lines.append(f"| {r['family']} | {r['id']} | {'streamed' if r['streamed'] else 'one-shot'} | "
                     f"{'yes' if r['malformed'] else ''} | {cell(_short(r['output']))} | "
                     f"{cell(_result_text(r['chatparse']))} | {cell(_result_text(r['vllm']))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", action="append", help="only these families (repeatable)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not write " + OUT.name)
    args = ap.parse_args(argv)
    logging.getLogger("vllm").setLevel(logging.CRITICAL)  # parsers log every malformed call with a traceback
    families = args.family or [f for f in templates.names() if f in HANDWRITTEN]
    t0 = time.perf_counter()
    rows, default_rows = [], []
    for family in families:
        rows += compare_family(family)
        default_rows += compare_family(family, thinking_flag=False)
    text = report(rows, families, time.perf_counter() - t0, default_rows)
    print(text)
    if not args.no_write:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
