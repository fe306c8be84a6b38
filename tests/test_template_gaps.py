"""Gaps of the bundled templates that real model output fell into (issue #17, item 1), one case each.

Each case is model output in the family's documented format - the source is cited with the case - and the
message a user expects from it. For every case:

* `chatparse.parse_response` gives exactly the expected message;
* streaming the output in 1- and 3-character feeds gives it too (`finalize()`);
* transformers' reference (`transformers.utils.chat_parsing.parse_response`) gives it too, so each fix is in the
  base format, with no chatparse extension: the bundled templates stay loadable by the reference.

The template changes these cases pin (FIXED_FAMILIES in tests/test_corpus.py lists them with the reason):

* content on both sides of a tool call - and between two calls - is kept: the implicit content field
  `repeats` and joins its segments with a blank line (`"join": "\\n\\n"`); without it each segment
  overwrote the one before, so only the text after the last call survived;
* whitespace between delimiters is taken by the delimiters, never a content segment of its own: content
  closes, and tool-call closes at the end of the turn, end in `\\s*`; reasoning opens start with it
  (`\\s*<think>`); gemma4's thought and tool-call delimiters take it on their content side. (An empty segment
  overwrote the content before - 'Hello<|im_end|>\\n' gave no content - and joined it adds a blank line);
* gpt-oss's final channel with a `<|constrain|>` in its header (structured output) is content, and so is a
  recipient-less commentary preamble; GigaChat 3.1's `<|function_call|>{json}<|message_sep|>` is a tool call;
  Mistral v11's `[TOOL_CALLS]name[CALL_ID]id[ARGS]{json}` is a tool call (it was left in the content);
* Gemma 4's thought channel opens on `<|channel>` with or without its `thought` label (the label is taken before
  a newline or the channel's close, so 'thoughtful ...' stays reasoning), also when `<|channel>` is doubled; a stray
  `<channel|>` in the content ends a content segment and is dropped; Kimi-K2's reasoning ends where a call
  begins and a call without `<|tool_call_end|>` where the next begins; a `</think>` in Qwen3-Coder's content (after
  a call written inside the reasoning) ends a content segment and is dropped;
* an XML argument value ends at its closing tag only where the next tag follows (after text without a `<`)
  or no later closing tag does, so a value that contains the closing tag itself (code writing code) is kept
  whole, and text between or after the tags still does not move a value's end (`KEPT`).

Every corpus case must also give its message with whitespace before or after its output
(`test_whitespace_around_an_output_changes_nothing`).

The content `join` is refused by vLLM's serving adapter, which never reads the joined value: the vLLM plugin
serves these templates without it (`test_joined_content_is_served_to_vllm_without_join`).
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from deps import need

import corpus_cases as cc
from chatparse import ResponseParser, parse_response, templates


@dataclass(frozen=True)
class Gap:
    id: str
    family: str
    source: str  # where the shape of the output comes from
    prefix: str
    output: str
    expected: dict


def _call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


QWEN_PROMPT = "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"
GLM_PROMPT = "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nWeather in Beijing?<|assistant|>\n<think></think>"
DSV31_PROMPT = "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>Run foo and bar.<｜Assistant｜></think>"
GRANITE_PROMPT = "<|start_of_role|>user<|end_of_role|>Boxes and prices?<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>"
GPT_OSS_PROMPT = "<|start|>user<|message|>Status as JSON, please.<|end|><|start|>assistant"
GIGACHAT_PROMPT = "<s>user<|role_sep|>\nКакая погода в Москве?<|message_sep|>\n\nassistant<|role_sep|>\n"
GEMMA4_PROMPT = "<bos><|turn>user\nWhich option?<turn|>\n<|turn>model\n"
GEMMA4_VLLM = "vllm-project/vllm tests/reasoning/test_gemma4_reasoning_parser.py, test_gemma4_reasoning"
GEMMA4_LLAMACPP = "ggml-org/llama.cpp tests/test-chat.cpp (google-gemma-4-31B-it.jinja)"
SHORT_THEN_B = {"role": "assistant", "reasoning_content": "Short.", "content": "Option B."}
KIMI_PROMPT = "<|im_user|>user<|im_middle|>Weather and time in Paris?<|im_end|><|im_assistant|>assistant<|im_middle|>"

BBOX = {"coordinates": [[23.54, 43.1], [-12.2, 54.3], [4, 5]], "coordinate_type": "latlong"}
STOCK = {"symbol": "AAPL", "start_date": "2021-01-01", "end_date": "2021-12-31"}

GAPS = [
    # ---- text between / after tool calls: only the last segment survived ------------------------------------
    Gap("glm45-text-after-call", "glm45",
        "sgl-project/sglang sgl-router tool-parser tests, glm4_moe test_glm4_complete_parsing",
        GLM_PROMPT,
        "Let me search for that.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "<arg_key>date</arg_key>\n<arg_value>2024-12-25</arg_value>\n</tool_call>\nThe weather will be...",
        {"role": "assistant", "content": "Let me search for that.\n\nThe weather will be...",
         "tool_calls": [_call("get_weather", {"city": "Beijing", "date": "2024-12-25"})]}),
    Gap("glm45-text-between-calls", "glm45",
        "GLM-4.5 chat template (each call rendered as '\\n<tool_call>NAME\\n<arg_key>..'), text between two calls",
        GLM_PROMPT,
        "I'll check Beijing first.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
        "</tool_call>\nNow Shanghai.\n<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Shanghai</arg_value>\n"
        "</tool_call><|observation|>",
        {"role": "assistant", "content": "I'll check Beijing first.\n\nNow Shanghai.",
         "tool_calls": [_call("get_weather", {"city": "Beijing"}), _call("get_weather", {"city": "Shanghai"})]}),
    Gap("deepseek_v31-text-after-calls", "deepseek_v31",
        "vllm-project/vllm tests/tool_use/test_deepseekv31_tool_parser.py, test_extract_tool_calls_with_multiple_tools "
        "(end of sentence token added)",
        DSV31_PROMPT,
        "some prefix text<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>foo<｜tool▁sep｜>{\"x\":1}<｜tool▁call▁end｜>"
        "<｜tool▁call▁begin｜>bar<｜tool▁sep｜>{\"y\":2}<｜tool▁call▁end｜><｜tool▁calls▁end｜> some suffix text"
        "<｜end▁of▁sentence｜>",
        {"role": "assistant", "content": "some prefix text\n\nsome suffix text",
         "tool_calls": [_call("foo", {"x": 1}), _call("bar", {"y": 2})]}),
    Gap("granite4-text-between-calls", "granite4",
        "vllm-project/vllm tests/tool_parsers/test_granite4_tool_parser.py, test_tool_call_parser_complex "
        "(object arguments; end of text token added)",
        GRANITE_PROMPT,
        "Here goes the bbox call: \n<tool_call> " + '{"name": "find_bbox", "arguments": {"coordinates": [[23.54, 43.1], '
        '[-12.2, 54.3], [4, 5]], "coordinate_type": "latlong"}}' + " </tool_call> Now the stock price call: \n "
        "<tool_call> " + '{"name": "get_stock_price", "arguments": {"symbol": "AAPL", "start_date": "2021-01-01", '
        '"end_date": "2021-12-31"}}' + " </tool_call> See? I'm a helpful assistant.<|end_of_text|>",
        {"role": "assistant",
         "content": "Here goes the bbox call:\n\nNow the stock price call:\n\nSee? I'm a helpful assistant.",
         "tool_calls": [_call("find_bbox", BBOX), _call("get_stock_price", STOCK)]}),
    Gap("hermes-text-after-call", "hermes",
        "Hermes/Qwen2.5 chat template (calls as '<tool_call>\\n{json}\\n</tool_call>'); vLLM "
        "tests/tool_parsers/test_hermes_tool_parser.py shapes, prose after the call",
        QWEN_PROMPT,
        "Let me look that up.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
        "</tool_call>\nI'll report back once I have it.<|im_end|>",
        {"role": "assistant", "content": "Let me look that up.\n\nI'll report back once I have it.",
         "tool_calls": [_call("get_weather", {"city": "Paris"})]}),
    Gap("gemma4-text-between-calls", "gemma4",
        "Gemma 4 tool-call syntax (vLLM tests/tool_parsers/test_gemma4_tool_parser.py), text between two calls",
        "<|turn>user\nWeather in London and Paris?<turn|>\n<|turn>model\n",
        "First London.<|tool_call>call:get_weather{location:<|\"|>London<|\"|>}<tool_call|>Then Paris."
        "<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|><|tool_response>",
        {"role": "assistant", "content": "First London.\n\nThen Paris.",
         "tool_calls": [_call("get_weather", {"location": "London"}), _call("get_weather", {"location": "Paris"})]}),
    Gap("minimax_m1-text-after-calls", "minimax_m1",
        "vllm-project/vllm tests/tool_parsers/test_minimax_tool_parser.py shapes (JSON lines in <tool_calls>), "
        "prose after the block",
        "<beginning_of_sentence>user name=user\nWeather?<end_of_sentence>\n<beginning_of_sentence>ai name=MiniMax AI\n",
        "Checking.\n<tool_calls>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Dallas\"}}\n</tool_calls>\n"
        "Done checking.<end_of_sentence>",
        {"role": "assistant", "content": "Checking.\n\nDone checking.",
         "tool_calls": [_call("get_weather", {"city": "Dallas"})]}),
    # ---- whitespace after the end-of-turn token blanked the content ------------------------------------------
    Gap("hermes-newline-after-im-end", "hermes",
        "ChatML renders '<|im_end|>\\n' after every turn; a model stopped on <|endoftext|> (or a stop string) "
        "emits the newline too",
        QWEN_PROMPT, "Hello! How can I help?<|im_end|>\n",
        {"role": "assistant", "content": "Hello! How can I help?"}),
    Gap("qwen3-newline-before-think", "qwen3",
        "Qwen3 output with a newline before <think> (the generation prompt ends in 'assistant\\n')",
        QWEN_PROMPT, "\n<think>\nShort.\n</think>\n\nAnswer.<|im_end|>",
        {"role": "assistant", "reasoning_content": "Short.", "content": "Answer."}),
    Gap("gemma4-whitespace-around-calls", "gemma4",
        "Gemma 4 thought channel and tool call separated by newlines",
        "<|turn>user\nWeather?<turn|>\n<|turn>model\n",
        "<|channel>thought\nNeed it.<channel|>\n<|tool_call>call:get_weather{location:<|\"|>Paris<|\"|>}<tool_call|>\n"
        "\n<|tool_call>call:get_time{}<tool_call|>\nDone.<turn|>",
        {"role": "assistant", "reasoning_content": "Need it.",
         "tool_calls": [_call("get_weather", {"location": "Paris"}), _call("get_time", {})], "content": "Done."}),
    Gap("granite_20b_fc-newline-after-endoftext", "granite_20b_fc",
        "Granite-20B-FunctionCalling call ended by <|endoftext|> and a newline (corpus case 2's output + '\\n')",
        "", "Let me check the weather for you.\n<function_call> {\"name\": \"get_weather\", \"arguments\": "
            "{\"city\": \"Tokyo\"}}<|endoftext|>\n",
        {"role": "assistant", "content": "Let me check the weather for you.",
         "tool_calls": [_call("get_weather", {"city": "Tokyo"})]}),
    # ---- header variants ---------------------------------------------------------------------------------------
    Gap("gpt_oss-final-constrain", "gpt_oss",
        "harmony structured output: '<|channel|>final <|constrain|>json<|message|>' (vLLM's harmony parser tests, "
        "test_constrained_output_segment_recipient_normalized; LM Studio gpt-oss outputs)",
        GPT_OSS_PROMPT,
        "<|channel|>analysis<|message|>Return the status object.<|end|><|start|>assistant<|channel|>final "
        "<|constrain|>json<|message|>{\"status\":\"ok\",\"purpose\":\"parser\"}<|return|>",
        {"role": "assistant", "reasoning_content": "Return the status object.",
         "content": "{\"status\":\"ok\",\"purpose\":\"parser\"}"}),
    Gap("gpt_oss-commentary-preamble", "gpt_oss",
        "harmony preambles: a recipient-less '<|channel|>commentary<|message|>' message before the call "
        "(openai/harmony docs/format.md, preambles; vLLM's harmony parser tests, 'valid-3')",
        GPT_OSS_PROMPT,
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>commentary<|message|>"
        "Checking the weather now.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        "<|constrain|>json<|message|>{\"city\": \"Tokyo\"}<|call|>",
        {"role": "assistant", "reasoning_content": "Need the weather.", "content": "Checking the weather now.",
         "tool_calls": [_call("get_weather", {"city": "Tokyo"})]}),
    Gap("gigachat3-function-call-token", "gigachat3",
        "GigaChat 3.1 chat template (ai-sage/GigaChat3.1-10B-A1.8B, copied in llama.cpp "
        "models/templates/GigaChat3.1-10B-A1.8B.jinja): content + '<|function_call|>' + {json} + '<|message_sep|>'",
        GIGACHAT_PROMPT,
        "Сейчас узнаю.<|function_call|>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Москва\"}}"
        "<|message_sep|>",
        {"role": "assistant", "content": "Сейчас узнаю.",
         "tool_calls": [_call("get_weather", {"city": "Москва"})]}),
    Gap("gigachat3-function-call-token-eos", "gigachat3",
        "GigaChat 3.1 chat template, the call alone, ended by the end of generation",
        GIGACHAT_PROMPT,
        "<|function_call|>{\"name\": \"manage_user_memory\", \"arguments\": {\"action\": \"create\"}}",
        {"role": "assistant", "tool_calls": [_call("manage_user_memory", {"action": "create"})]}),
    Gap("mistral_v11-call-id", "mistral_v11",
        "mistral-common 1.13 InstructTokenizerV11._encode_tool_calls_in_assistant_message: "
        "[TOOL_CALLS]name[CALL_ID]id[ARGS]{json} when the call has an id (the id itself cannot be surfaced: a "
        "placeholder for an optional group raises where it is absent)",
        "<s>[INST]Weather in Paris, and the time?[/INST]",
        "Let me check.[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{\"city\": \"Paris\"}"
        "[TOOL_CALLS]get_time[CALL_ID]f5g6h7i8j[ARGS]{}</s>",
        {"role": "assistant", "content": "Let me check.",
         "tool_calls": [_call("get_weather", {"city": "Paris"}), _call("get_time", {})]}),
    # ---- thought channels and reasoning that real outputs open or close otherwise ------------------------------
    Gap("gemma4-thought-without-label", "gemma4",
        GEMMA4_VLLM + "[reasoning] (a thought channel without the 'thought\\n' label; end of turn added)",
        GEMMA4_PROMPT, "<|channel>Weighing A against B.<channel|>Option B.<turn|>",
        {"role": "assistant", "reasoning_content": "Weighing A against B.", "content": "Option B."}),
    Gap("gemma4-thought-text-starting-like-the-label", "gemma4",
        GEMMA4_VLLM + "[thought_prefix_diverge] ('thought' is the label only before a newline or the channel's "
        "close)",
        GEMMA4_PROMPT, "<|channel>thoughtful weighing first<channel|>Option B.<turn|>",
        {"role": "assistant", "reasoning_content": "thoughtful weighing first", "content": "Option B."}),
    Gap("gemma4-thought-label-without-newline", "gemma4",
        GEMMA4_LLAMACPP + ", empty reasoning (budget=0): the sampler closes the channel right after the label",
        GEMMA4_PROMPT, "<|channel>thought<channel|>Option B.<turn|>",
        {"role": "assistant", "content": "Option B."}),
    Gap("gemma4-stray-channel-close", "gemma4",
        GEMMA4_LLAMACPP + ", edge cases [0]: a stray <channel|> after the answer",
        GEMMA4_PROMPT, "<|channel>thought\nShort.<channel|>Option B.<channel|><turn|>", SHORT_THEN_B),
    Gap("gemma4-doubled-channel-open", "gemma4",
        GEMMA4_LLAMACPP + ", edge cases [3]: <|channel> written twice",
        GEMMA4_PROMPT, "<|channel><|channel>thought\nShort.<channel|>Option B.<turn|>", SHORT_THEN_B),
    Gap("kimi_k2-calls-inside-thinking-without-markers", "kimi_k2",
        "ggml-org/llama.cpp tests/test-chat.cpp (Kimi-K2-Thinking.jinja), call inside thinking block, without "
        "section markers or end markers: the reasoning ends where a call begins, and each call where the next does",
        KIMI_PROMPT,
        "<think>Two lookups.<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{\"city\": "
        "\"Paris\"}<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{\"city\": \"Paris\"}",
        {"role": "assistant", "reasoning_content": "Two lookups.",
         "tool_calls": [{"id": "functions.get_weather:0", **_call("get_weather", {"city": "Paris"})},
                        {"id": "functions.get_time:1", **_call("get_time", {"city": "Paris"})}]}),
    Gap("qwen3_coder-think-close-after-call", "qwen3_coder",
        "vllm-project/vllm tests/reasoning/test_qwen3_tool_call_recovery.py, test_promoted_tool_call_is_parseable_"
        "by_qwen3coder_and_trailing_text_preserved: a call inside <think>, then </think> and text",
        QWEN_PROMPT,
        "<think>Read it first.\n<tool_call>\n<function=read_file>\n<parameter=path>\nREADME.md\n</parameter>\n"
        "</function>\n</tool_call></think>\n\nReading it now.<|im_end|>",
        {"role": "assistant", "reasoning_content": "Read it first.",
         "tool_calls": [_call("read_file", {"path": "README.md"})], "content": "Reading it now."}),
    # ---- a closing tag inside an XML argument value ------------------------------------------------------------
    Gap("qwen3_coder-value-contains-closing-tag", "qwen3_coder",
        "Qwen3-Coder chat template ('<parameter=NAME>\\nVALUE\\n</parameter>\\n'); a file whose text holds the tag",
        QWEN_PROMPT,
        "<tool_call>\n<function=write_file>\n<parameter=path>\nparser.py\n</parameter>\n<parameter=content>\n"
        "END_TAG = \"</parameter>\"\nprint(END_TAG)\n</parameter>\n</function>\n</tool_call><|im_end|>",
        {"role": "assistant", "tool_calls": [_call("write_file", {
            "path": "parser.py", "content": "END_TAG = \"</parameter>\"\nprint(END_TAG)"})]}),
    Gap("seed_oss-value-contains-closing-tag", "seed_oss",
        "Seed-OSS tool-call format (vLLM tests/tool_parsers/test_seed_oss_tool_parser.py shapes)",
        "<seed:bos>user\nFix it.<seed:eos><seed:bos>assistant\n",
        "<seed:tool_call>\n<function=write_file>\n<parameter=content>a = \"</parameter>\"</parameter>\n"
        "<parameter=path>x.py</parameter>\n</function>\n</seed:tool_call><seed:eos>",
        {"role": "assistant", "tool_calls": [_call("write_file", {"content": "a = \"</parameter>\"", "path": "x.py"})]}),
    Gap("glm47-value-contains-closing-tag", "glm47",
        "GLM-4.7 tool-call format ('<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>')",
        "[gMASK]<sop><|user|>Write the file.<|assistant|></think>",
        "<tool_call>write_file<arg_key>content</arg_key><arg_value>x = \"</arg_value>\"</arg_value>"
        "<arg_key>path</arg_key><arg_value>t.py</arg_value></tool_call>",
        {"role": "assistant", "tool_calls": [_call("write_file", {"content": "x = \"</arg_value>\"", "path": "t.py"})]}),
]

# Outputs the corpus templates already parsed right and the fixes must keep: an argument value's end is found
# with what follows its closing tag, so text the model wrote between or after the tags must not move it.
KEPT = [
    Gap("qwen3_coder-text-after-last-parameter", "qwen3_coder",
        "Qwen3-Coder tool-call format with a stray line before </function>",
        QWEN_PROMPT,
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\nI think that's it.\n</function>\n</tool_call>",
        {"role": "assistant", "tool_calls": [_call("f", {"a": 1})]}),
    Gap("qwen3_coder-text-between-parameters", "qwen3_coder",
        "Qwen3-Coder tool-call format with a stray line between two parameters",
        QWEN_PROMPT,
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\nnote\n<parameter=b>\n2\n</parameter>\n</function>\n"
        "</tool_call>",
        {"role": "assistant", "tool_calls": [_call("f", {"a": 1, "b": 2})]}),
    Gap("glm45-text-between-arguments", "glm45",
        "GLM-4.5 tool-call format with a stray line between two arguments",
        GLM_PROMPT,
        "<tool_call>f\n<arg_key>a</arg_key>\n<arg_value>1</arg_value>\nstray\n<arg_key>b</arg_key>\n"
        "<arg_value>two</arg_value>\n</tool_call>",
        {"role": "assistant", "tool_calls": [_call("f", {"a": 1, "b": "two"})]}),
]


def _params():
    return [pytest.param(g, id=g.id) for g in GAPS + KEPT]


def _show(got, want) -> str:
    return f"\n  expected: {cc.show(want)}\n  got:      {cc.show(got)}"


@pytest.mark.parametrize("gap", _params())
def test_chatparse_parses_the_gap(gap: Gap):
    got = parse_response(gap.output, templates.get(gap.family), prefix=gap.prefix)
    assert cc.strict_equal(got, gap.expected), f"{gap.id} ({gap.source}){_show(got, gap.expected)}"


@pytest.mark.parametrize("gap", _params())
@pytest.mark.parametrize("size", [1, 3])
def test_chatparse_streams_the_gap(gap: Gap, size: int):
    parser = ResponseParser(templates.get(gap.family), prefix=gap.prefix)
    for i in range(0, len(gap.output), size):
        parser.feed(gap.output[i:i + size])
    got, _ = parser.finalize()
    assert cc.strict_equal(got, gap.expected), f"{gap.id}, {size}-character feeds{_show(got, gap.expected)}"


@pytest.mark.parametrize("gap", _params())
def test_reference_parses_the_gap(gap: Gap):
    ref = need("transformers.utils.chat_parsing")
    got = ref.parse_response(gap.output, templates.get(gap.family), prefix=gap.prefix)
    assert cc.strict_equal(got, gap.expected), f"reference, {gap.id}{_show(got, gap.expected)}"


def test_gap_families_are_listed_as_changed():
    """A family whose template these cases pin is listed in tests/test_corpus.py as deliberately changed, so its
    corpus test compares the corpus's cases, not the template text (which no longer equals the corpus's)."""
    import test_corpus

    covered = {g.family for g in GAPS}
    reasons = test_corpus.FIXED_FAMILIES
    assert covered <= set(reasons), f"gap cases for families not listed as changed: {covered - set(reasons)}"


def test_joined_content_is_served_to_vllm_without_join():
    """vLLM 0.33.0 refuses `join` on the content field; its adapter builds the served content from the content
    chunks, so the plugin hands it the template without the content's `repeats`/`join` (and nothing else
    changes). The bundled template itself is not modified."""
    from chatparse.integrations.vllm_template import serving_template

    for name in templates.names():
        template = templates.get(name)
        served = serving_template(template)
        assert template == templates.get(name), f"{name}: serving_template changed its input"
        content = template["fields"].get("content", {})
        assert "join" not in served["fields"].get("content", {}), name
        if "join" in content:
            assert served["fields"]["content"] == {k: v for k, v in content.items() if k not in ("join", "repeats")}
        others = {k: v for k, v in template["fields"].items() if k not in ("content", "reasoning_content")}
        assert {k: v for k, v in served["fields"].items() if k not in ("content", "thinking")} == others, name


def _corpus_cases():
    return [pytest.param(case, id=case.id) for case in cc.load().cases]


@pytest.mark.parametrize("case", _corpus_cases())
def test_whitespace_around_an_output_changes_nothing(case):
    """Every corpus case gives its expected message (values and key order) also with whitespace before or after
    its output: no delimiter leaves whitespace to the content field as a segment of its own, which a joined
    content would turn into a blank line and an overwriting one into a blank content."""
    template = templates.get(case.name)
    for label, output in (("before", "\n" + case.output), ("after", case.output + "\n"),
                          ("both", " \n" + case.output + " \n ")):
        got = parse_response(output, template, prefix=case.prefix, tools=case.tools)
        assert cc.strict_equal(got, case.expected), f"{case.id}, whitespace {label}{_show(got, case.expected)}"
