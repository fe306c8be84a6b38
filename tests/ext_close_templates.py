"""Templates that use the region-level format extensions (not bundled): ``close_json_end`` (a region also closes
where its JSON value ends, so text after a call goes on to the implicit field) and ``on_error`` (per-field
recovery from a value that fails to parse), one per motivating family of tests/data/inexpressible.json
(for on_error: of the sources' malformed-output tests, `RECOVERY_CASES`), with the real example outputs (copied here with their sources, so the tests run in a clean clone) and
the message each must give (its keys in the order the parse stores them, as the reference orders them).

`FAMILIES` maps a name to ``(template, [(case name, prefix, output, tools, message)], source)``, the shape of
tests/ext_templates.py. The templates are the partial templates of inexpressible.json plus the extension keys
(and, where text comes both before and after a call, ``repeats`` + ``join`` on content, which the base format
has). tests/test_extensions_close.py parses each case one-shot, streamed and per token in both dialects;
tests/make_vectors.py writes them (with `EXTRA_CASES`) as the ``ext_*`` vectors for the JavaScript runtime.
"""

from __future__ import annotations

FN_EACH = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}


def call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


LLAMA3_PREFIX = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nFind things.<|eot_id|><|start_header_id|>assistant"
                 "<|end_header_id|>\n\n")

FAMILIES: dict = {
    # ---------------------------------------------------------------------------- close_json_end
    "llama3_json_end": (
        # no closing token: a call ends where its JSON object ends; ';' between calls is taken by the next open
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "fields": {"tool_calls": {"open_pattern": "\\s*;?\\s*(?:<\\|python_tag\\|>)?(?=\\{\\s*\"name\")",
                                   "close_json_end": True, "repeats": True, "content": "json",
                                   "key_aliases": {"arguments": "parameters"},
                                   "transform": {"type": "function", "function": {"name": "{content.name}",
                                                                                  "arguments": "{content.parameters}"}}},
                    "content": {"close_pattern": "\\s*(?:<\\|eot_id\\|>|<\\|eom_id\\|>)", "repeats": True,
                                "join": " "}}},
        [("trailing_prose", LLAMA3_PREFIX,
          '{"name": "searchTool", "parameters": {"query": "test"}} I used {searchTool} for this.', None,
          {"role": "assistant", "tool_calls": [call("searchTool", {"query": "test"})],
           "content": "I used {searchTool} for this."}),
         ("arguments_key_alias", LLAMA3_PREFIX, '{"name": "searchTool", "arguments": {"query": "test"}}', None,
          {"role": "assistant", "tool_calls": [call("searchTool", {"query": "test"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_llama3_json_tool_parser.py; sgl-project/sglang:"
        "test/registered/function_call/test_function_call_parser.py (TestLlama32Detector)"),
    "mistral_pre_v11_json_end": (
        {"defaults": {"role": "assistant"}, "start_anchor": "[/INST]",
         "fields": {"tool_calls": {"open_pattern": "\\s*\\[TOOL_CALLS\\]\\s*", "close_pattern": "\\s*</s>",
                                   "close_json_end": True, "content": "json", "transform_each": True,
                                   "transform": FN_EACH},
                    "content": {"close_pattern": "\\s*</s>"}}},
        [("trailing_data", "<s>[SYSTEM_PROMPT]You are helpful.[/SYSTEM_PROMPT][AVAILABLE_TOOLS][\u2026]"
          "[/AVAILABLE_TOOLS][INST]What's 3.5+4?[/INST]",
          "[TOOL_CALLS] [{\"name\": \"get_current_weather\", \"arguments\":{\"city\": \"Dallas\", \"state\": \"TX\", "
          "\"unit\": \"fahrenheit\"}}]\nextra trailing data", None,
          {"role": "assistant",
           "tool_calls": [call("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})],
           "content": "extra trailing data"})],
        "vllm-project/vllm:tests/tool_parsers/test_mistral_tool_parser.py (pre_v11)"),
    "granite3_json_end": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_of_role|>assistant<|end_of_role|>",
         "fields": {"reasoning_content": {"open": "Here is my thought process:", "close": "Here is my response:"},
                    "tool_calls": {"open_pattern": "\\s*(?:<\\|tool_call\\|>|<tool_call>)\\s*",
                                   "close_pattern": "\\s*<\\|end_of_text\\|>", "close_json_end": True,
                                   "content": "json", "transform_each": True, "transform": FN_EACH},
                    "content": {"close_pattern": "\\s*<\\|end_of_text\\|>", "repeats": True, "join": "\n"}}},
        [("surrounding_text", "<|start_of_role|>user<|end_of_role|>Weather in Tokyo?<|end_of_text|>\n"
          "<|start_of_role|>assistant<|end_of_role|>",
          "Let me check the weather for you.\n<|tool_call|> [{\"name\": \"get_weather\", \"arguments\": "
          "{\"city\": \"Tokyo\"}}]\nI'll get that information.", None,
          {"role": "assistant", "content": "Let me check the weather for you.\nI'll get that information.",
           "tool_calls": [call("get_weather", {"city": "Tokyo"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_granite_tool_parser.py"),
    "phi4_mini_json_end": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|assistant|>",
         "fields": {"tool_calls": {"open_pattern": "\\s*functools(?=\\s*\\[)", "close_pattern": "\\s*<\\|end\\|>",
                                   "close_json_end": True, "content": "json", "transform_each": True,
                                   "transform": FN_EACH},
                    "content": {"close_pattern": "\\s*<\\|end\\|>", "repeats": True, "join": "\n"}}},
        [("surrounding_text", "<|user|>Weather?<|end|><|assistant|>",
          "Let me check the weather for you.\nfunctools[{\"name\": \"get_weather\", \"arguments\": {\"city\": "
          "\"Tokyo\"}}]\nWould you like to know more?", None,
          {"role": "assistant", "content": "Let me check the weather for you.\nWould you like to know more?",
           "tool_calls": [call("get_weather", {"city": "Tokyo"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_phi4mini_tool_parser.py"),
    # ---------------------------------------------------------------------------- on_error
    "hermes_on_error": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"tool_calls": {"open_pattern": "\\s*<tool_call>", "close_pattern": "</tool_call>\\s*",
                                   "repeats": True, "content": "json", "on_error": "content",
                                   "transform": {"type": "function", "function": "{content}"}},
                    "content": {"close_pattern": "\\s*(?:<\\|im_end\\|>|<\\|endoftext\\|>)", "repeats": True,
                                "join": "\n\n"}}},
        [("invalid_json", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat's the weather?"
          "<|im_end|>\n<|im_start|>assistant\n",
          "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}", None,
          {"role": "assistant", "content": "<tool_call>\n{\"name\": \"final_answer\", \"arguments\": {\"trigger\": true}"})],
        "vllm-project/vllm:tests/tool_parsers/test_hermes_tool_parser.py::"
        "test_hermes_parser_non_streaming_tool_call_invalid_json"),
}

# Malformed outputs of the families above, from the sources' tests of what a server returns for them (the
# output kept as content). tests/test_extensions_recovery.py parses each with the family's template plus
# ``"on_error": "content"`` on its tool calls.
RECOVERY_CASES: dict = {
    "granite3_json_end": [
        ("malformed", "<|start_of_role|>user<|end_of_role|>Weather in Tokyo?<|end_of_text|>\n<|start_of_role|>"
         "assistant<|end_of_role|>", "<|tool_call|> [{\"name\": \"func\", \"arguments\": {", None,
         {"role": "assistant", "content": "<|tool_call|> [{\"name\": \"func\", \"arguments\": {"})],
    # vllm-project/vllm:tests/tool_parsers/test_granite_tool_parser.py (malformed_input_outputs)
    "phi4_mini_json_end": [
        ("malformed", "<|user|>Weather?<|end|><|assistant|>", "functools[{\"name\": \"func\", \"arguments\": {",
         None, {"role": "assistant", "content": "functools[{\"name\": \"func\", \"arguments\": {"})],
    # vllm-project/vllm:tests/tool_parsers/test_phi4mini_tool_parser.py (malformed_input_outputs)
    "hermes_on_error": [  # (written here, in the source's format: a bad call between good ones)
        ("between_good_calls", "<|im_start|>assistant\n",
         'Two calls.\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n<tool_call>\n{name: b}\n</tool_call>\n'
         'Done.<|im_end|>', None,
         {"role": "assistant", "content": "Two calls.\n\n<tool_call>\n{name: b}\n</tool_call>\n\nDone.",
          "tool_calls": [{"type": "function", "function": {"name": "a", "arguments": {}}}]})],
}

# The family each extension's conformance vector (``ext_<extension>``, tests/make_vectors.py) is made of.
VECTORS = {"close_json_end": "mistral_pre_v11_json_end", "on_error": "hermes_on_error"}

# More texts for the ext_* conformance vectors (what chatparse does with them is recorded, and the JavaScript
# runtime must do the same): the explicit close winning, strings holding brackets and escapes, a top-level
# number and its look-ahead, bodies that are not JSON (the close never fires). (Kept small: the vectors have a
# size budget; tests/test_extensions_close.py covers the rest in Python, and the JS tracker has a check there.)
EXTRA_CASES: dict = {
    "llama3_json_end": [
        ("two_calls", "", '{"name": "a", "parameters": {"s": "}]\\"{"}}; {"name": "b", "parameters": {}} then text'
         "<|eot_id|>", None),
        ("python_tag", "", 'Sure.<|python_tag|>{"name": "a", "parameters": {"x": [1, 2.5e-3, null, true]}}'
         '<|eom_id|>', None),
        ("unfinished", "", '{"name": "a", "parameters": {"x": 1} trailing', None),
        ("not_json", "", '{"name": "a", "parameters": {x: 1}} more', None),
        ("unicode", "", '{"name": "caf\u00e9", "parameters": {"t": "\u65e5\u672c \U0001F600 \\ud83d\\ude00"}}'
         "\u00e0 bient\u00f4t", None),
    ],
    "mistral_pre_v11_json_end": [
        ("closed", "", '[TOOL_CALLS] [{"name": "f", "arguments": {}}]</s>', None),
        ("close_after_space", "", '[TOOL_CALLS] [{"name": "f", "arguments": {"a": [1, -2.5e-3, true, null]}}]  \n'
         "</s>", None),
        ("escapes_and_brackets", "", '[TOOL_CALLS][{"name": "f", "arguments": {"s": "]}\\"\\\\ \\u00e9\\n[{", '
         '"t": "\u65e5\U0001F600"}}] trailing \u00e9 text', None),
        ("indented", "", '[TOOL_CALLS]\n[\n  {\n    "name": "f",\n    "arguments": {}\n  }\n]\n\nThen this.</s>',
         None),
        ("not_json", "", "[TOOL_CALLS] [{name: 'f'}] tail</s>after", None),
        ("unfinished", "", '[TOOL_CALLS] [{"name": "f", "arguments": {}}', None),
        ("close_inside", "", '[TOOL_CALLS] [{"name": "f", "arguments": {"s": "a </s> b"}}] after', None),
        ("number_then_dot", "", "[TOOL_CALLS] 12.x", None),
    ],
    "hermes_on_error": [
        ("two_bad_one_good", "", 'a <tool_call>[1,</tool_call> b <tool_call>{"name": "f", "arguments": {"x": 1}}'
         '</tool_call><tool_call>{"x": 1} </tool_call>\n c<|im_end|>', None),
        ("transform_and_tools", "", '<tool_call>{"name": "f", "arguments": {"n": "5"}}</tool_call><tool_call>'
         '"just a string"</tool_call>', [{"type": "function", "function": {"name": "f", "parameters": {
             "type": "object", "properties": {"n": {"type": "integer"}}}}}]),
        ("unclosed", "", "text <tool_call>{\"name\": \u00e9", None),
    ],
}
