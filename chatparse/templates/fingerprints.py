"""The bundled family of a checkpoint, recognised from its Jinja chat template (the twin of `family_of`, which
goes by the model's name).

    >>> family_of_chat_template(open("/models/ft-7/chat_template.jinja").read())  # doctest: +SKIP
    'qwen3'

What it guarantees: a family is returned only when every marker of one of its rows in `FINGERPRINTS` occurs in
the template (and none of that row's excluded markers does); the first such row wins, so rows are ordered most
specific first. The markers of a row are literal text a template writes for that family's turns: the
assistant header (or turn tokens) its response template's start anchor finds in the prompt, and the tokens that
open its tool calls (or its reasoning, or a tool list only that family writes). When no row matches, the answer
is None rather than a guess.

Why substring markers: they are fast (one pass over a few kilobytes), need no Jinja environment, and execute
nothing of a template that may come from an untrusted checkpoint. Jinja comments (``{# ... #}``) are removed
first: they are never rendered, so a marker that occurs only in a comment says nothing about the output.
Markers are matched in the template's source, not its rendering, so a row names text as templates spell it
(``<|im_start|>assistant`` rather than the rendered ``<|im_start|>assistant\\n``).

What it does not do: a fine-tune that kept its base model's chat template but was trained to write another
output format is not told apart from its base (no chat template can show that), and a template that leaves the
calls inside the message text (rendering no call markers) is recognised only through the tool list or turn
tokens its row names.

Families whose markers overlap, and how the table tells them apart (most specific first):

* ``qwen3_coder`` / ``smollm3`` / ``qwen3`` / ``hermes``: all ChatML with ``<tool_call>``. XML calls
  (``<function=``) are ``qwen3_coder``; SmolLM3's metadata block (``Reasoning Mode:``) is ``smollm3``; JSON calls
  with ``<think>`` reasoning are ``qwen3``; without ``<think>`` they are ``hermes``.
* ``glm47`` / ``glm45``: the same tags (their bundled response templates are identical); GLM-4.7 tells the
  model to write ``{function-name}<arg_key>`` with no newline between name and first key, GLM-4.5/4.6 with one.
* ``deepseek_v32`` (DSML markup), ``deepseek_r1`` (fenced ```` ```json ```` arguments and ``</think>``),
  ``deepseek_v3`` (fenced arguments, no reasoning), ``deepseek_v31`` (bare arguments: no fence).
* ``granite3`` (``<|tool_call|>``) / ``granite4`` (``<tool_call>``); ``mistral_v11`` (``[TOOL_CALLS]NAME[ARGS]``)
  / ``mistral_pre_v11`` (``[TOOL_CALLS]`` with a JSON list); ``kimi_vl_think`` (``◁think▷``) / ``kimi_k2``
  (``<|tool_call_begin|>``); ``nemotron_json`` / ``xlam`` / ``llama3_json``: all Llama-3 headers, told apart by
  ``<TOOLCALL>``, xLAM's calling instructions, and Llama's ``"parameters"`` key.
"""

from __future__ import annotations

import re

__all__ = ["FINGERPRINTS", "family_of_chat_template", "family_of_chat_templates"]

# Each row: (family, markers that must all occur, markers that must not occur). First match wins.
FINGERPRINTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    # ChatML (<|im_start|>assistant) families
    ("qwen3_coder", ("<|im_start|>assistant", "<tool_call>", "<function="), ()),
    ("internlm2", ("<|im_start|>assistant", "<|action_start|><|plugin|>"), ()),
    ("lfm2", ("<|im_start|>assistant", "<|tool_call_start|>"), ()),
    # LFM2 templates that list the tools but leave the calls inside the message text: LFM2's tool preamble
    ("lfm2", ("<|im_start|>assistant", "List of tools: "), ()),
    ("smollm3", ("<|im_start|>assistant", "<think>", "Reasoning Mode: "), ()),
    ("qwen3", ("<|im_start|>assistant", "<tool_call>", "<think>"), ()),
    ("hermes", ("<|im_start|>assistant", "<tool_call>"), ()),
    # DeepSeek (<｜Assistant｜>)
    ("deepseek_v32", ("<｜Assistant｜>", "｜DSML｜", "function_calls>"), ()),
    ("deepseek_v31", ("<｜Assistant｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>"), ("```json",)),
    ("deepseek_r1", ("<｜Assistant｜>", "<｜tool▁call▁begin｜>", "```json", "</think>"), ()),
    ("deepseek_v3", ("<｜Assistant｜>", "<｜tool▁call▁begin｜>", "```json"), ()),
    # GLM ([gMASK]<sop> ... <|assistant|>)
    ("glm47", ("[gMASK]<sop>", "<|assistant|>", "<tool_call>", "<arg_key>", "{function-name}<arg_key>"), ()),
    ("glm45", ("[gMASK]<sop>", "<|assistant|>", "<tool_call>", "<arg_key>"), ()),
    # Kimi (<|im_assistant|>)
    ("kimi_vl_think", ("<|im_assistant|>", "◁think▷"), ()),
    ("kimi_k2", ("<|im_assistant|>", "<|tool_call_begin|>"), ()),
    # Llama 3 headers
    ("nemotron_json", ("<|start_header_id|>assistant<|end_header_id|>", "<TOOLCALL>"), ()),
    ("xlam", ("<|start_header_id|>assistant<|end_header_id|>", "make calls in a single JSON array"), ()),
    ("llama3_json",
     ("<|start_header_id|>assistant<|end_header_id|>", "Environment: ipython", '"parameters": '), ()),
    # Mistral ([INST] ... [/INST])
    ("mistral_v11", ("[INST]", "[/INST]", "[TOOL_CALLS]", "[ARGS]"), ()),
    ("mistral_pre_v11", ("[INST]", "[/INST]", "[TOOL_CALLS]"), ()),
    # one family each
    ("gpt_oss", ("<|start|>assistant", "<|channel|>", "<|call|>"), ()),
    ("cohere", ("<|CHATBOT_TOKEN|>", "<|START_ACTION|>"), ()),
    ("gemma4", ("<|turn>model", "<|tool_call>call:"), ()),
    ("functiongemma", ("<start_of_turn>model", "<start_function_call>"), ()),
    ("granite3", ("<|start_of_role|>assistant", "<|tool_call|>"), ()),
    ("granite4", ("<|start_of_role|>assistant", "<tool_call>"), ()),
    ("granite_20b_fc", ("ASSISTANT:", "<function_call>"), ()),
    ("longcat", ("ASSISTANT:", "<longcat_tool_call>"), ()),
    ("seed_oss", ("<seed:bos>", "<seed:tool_call>", "<function="), ()),
    ("step3", ("<|BOT|>assistant", "<steptml:invoke"), ()),
    ("minimax_m2", ("]~b]ai", "<minimax:tool_call>", "<invoke name="), ()),
    # the bundled minimax_m1 template's start anchor is "ai name=MiniMax AI\n": a template writing another name
    # would have its whole prompt parsed as the reply
    ("minimax_m1", ("<beginning_of_sentence>", "ai name=MiniMax AI", "<tool_calls>"), ()),
    ("hunyuan_a13b", ("<|extra_0|>", "<tool_calls>"), ()),
    ("jamba", ("<|bom|>", "<|assistant|>", "<tool_calls>"), ()),
    ("phi4_mini", ("<|assistant|>", "functools["), ()),
    ("gigachat3", ("<|role_sep|>", "<|message_sep|>"), ()),
    ("ernie45", ("Assistant: ", "<response>", "<tool_call>"), ()),
)

_COMMENT = re.compile(r"\{#.*?#\}", re.DOTALL)


def family_of_chat_template(chat_template: str) -> str | None:
    """The bundled family whose response template reads what `chat_template` (Jinja source) writes, or None.

    The first row of `FINGERPRINTS` whose markers all occur in the template outside Jinja comments, and whose
    excluded markers do not, gives the family; no row, no family. Raises `TypeError` for a non-str."""
    if not isinstance(chat_template, str):
        raise TypeError(f"chat_template must be the template's Jinja source (str), "
                        f"got {type(chat_template).__name__}")
    text = _COMMENT.sub("", chat_template)
    for family, markers, excluded in FINGERPRINTS:
        if all(m in text for m in markers) and not any(m in text for m in excluded):
            return family
    return None


def family_of_chat_templates(value) -> str | None:
    """`family_of_chat_template` for a tokenizer config's ``chat_template`` as it is stored: a str, or Hugging
    Face's list of named templates (``[{"name": "default", "template": ...}, {"name": "tool_use", ...}]``).

    Of a list, the ``tool_use`` and ``default`` templates are read (others, such as ``rag``, are not): the family
    is the one they give, or the one of them gives when the other gives None; when they give two different
    families, None (they disagree, so neither is taken). Raises `TypeError` for anything else, or a list entry
    without a str ``name`` and ``template``."""
    if isinstance(value, str):
        return family_of_chat_template(value)
    if not isinstance(value, list):
        raise TypeError(f"chat_template must be a str or a list of {{'name', 'template'}} dicts, "
                        f"got {type(value).__name__}")
    found = set()
    for entry in value:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                and isinstance(entry.get("template"), str)):
            raise TypeError(f"each chat_template entry must be a dict with str 'name' and 'template', "
                            f"got {entry!r}")
        if entry["name"] in ("default", "tool_use"):
            found.add(family_of_chat_template(entry["template"]))
    found.discard(None)
    return found.pop() if len(found) == 1 else None
