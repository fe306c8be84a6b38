"""Templates that use the list format extensions ``json_values`` and ``flatten`` (not bundled), each with the
real-output corpus case that motivates it (copied here with its source, so the tests run in a clean clone)
and the message it must give; the same layout as tests/ext_templates.py.

`FAMILIES` maps a name to ``(template, [(case name, prefix, output, tools, message)], source)``; `EXTRA_CASES`
holds more texts for the conformance vectors (what chatparse does with them is recorded, and the JavaScript
runtime must do the same); `VECTORS` names the family of each extension's vector (``ext_<extension>``,
written by tests/make_vectors.py). tests/test_extensions_lists.py parses each case on every path.
"""

from __future__ import annotations

FN_EACH = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}
QWEN3_PREFIX = ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat's the weather?<|im_end|>\n"
                "<|im_start|>assistant\n")
LFM2_PREFIX = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"


def call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


FAMILIES: dict = {
    # ---------------------------------------------------------------------------- json_values (and flatten)
    "qwen3_json_values": (
        # the bundled qwen3 template, its tool-call body read as comma-separated JSON calls
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"reasoning_content": {"open_pattern": r"\s*<think>",
                                          "close_pattern": r"\s*</think>\s*|\s*(?=<tool_call>)"},
                    "tool_calls": {"open_pattern": r"\s*<tool_call>", "close_pattern": r"</tool_call>\s*",
                                   "repeats": True, "content": "json-values", "transform_each": True,
                                   "transform": FN_EACH, "flatten": True},
                    "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)\s*", "repeats": True,
                                "join": "\n\n"}}},
        [("two_calls_one_block", QWEN3_PREFIX,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_tourist_attractions", '
          '"arguments": {"city": "London"}}</tool_call>', None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}),
                                               call("get_tourist_attractions", {"city": "London"})]}),
         ("one_call", QWEN3_PREFIX,
          'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>', None,
          {"role": "assistant", "content": "Let me check.", "tool_calls": [call("get_weather", {"city": "Paris"})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py"
        "::TestBaseFormatDetector::test_sequential_tool_index_assignment"),
    # ---------------------------------------------------------------------------- flatten
    "lfm2_blocks": (
        # the bundled lfm2 template with python-calls, one [call, ...] list per block, blocks repeated; "nums" is
        # made up for the conformance vector (a json body: a list extends, anything else is one element)
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"reasoning_content": {"open_pattern": r"\s*<think>", "close_pattern": r"\s*</think>\s*"},
                    "tool_calls": {"open_pattern": r"\s*<\|tool_call_start\|>", "close_pattern": r"<\|tool_call_end\|>\s*",
                                   "repeats": True, "content": "python-calls", "transform_each": True,
                                   "transform": FN_EACH, "flatten": True},
                    "nums": {"open": "<n>", "close": "</n>", "repeats": True, "content": "json", "flatten": True},
                    "content": {"close_pattern": r"\s*<\|im_end\|>\s*", "repeats": True, "join": "\n\n"}}},
        [("two_blocks", LFM2_PREFIX,
          '<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|> Some text '
          '<|tool_call_start|>[search(query="food")]<|tool_call_end|>', None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}), call("search", {"query": "food"})],
           "content": "Some text"})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py"
        "::TestLfm2Detector::test_detect_and_parse_multiple_blocks"),
}

EXTRA_CASES: dict = {
    "qwen3_json_values": [
        ("spacing_and_strings", "", '<tool_call> {"name": "a", "arguments": {"s": "x}, {\\"y"}} ,\n'
         '{"name": "b", "arguments": {}} </tool_call>text<tool_call>{"name": "c", "arguments": {"n": [1, 2.5, null]}}'
         "</tool_call>", None),
        ("literals", "", '<tool_call>{"name": "a", "arguments": {"x": NaN, "y": -Infinity, "z": "é🌈"}}</tool_call>',
         None),
        ("trailing_comma", "", '<tool_call>{"name": "a", "arguments": {}},</tool_call>after', None),
        ("missing_comma", "", '<tool_call>{"name": "a", "arguments": {}} {"name": "b", "arguments": {}}</tool_call>',
         None),
        ("empty_block", "", "<tool_call> </tool_call>x", None),
        ("array_body", "", '<tool_call>[{"name": "a", "arguments": {}}]</tool_call>', None),
        ("bad_value", "", '<tool_call>{"name": "a", "arguments": {}}, {bad}</tool_call>', None),
    ],
    "lfm2_blocks": [
        ("empty_and_many", "", "<|tool_call_start|>[]<|tool_call_end|>a<|tool_call_start|>[f(x=1), g(), h(y=[2])]"
         "<|tool_call_end|>b<|tool_call_start|>f(z=None)<|tool_call_end|>", None),
        ("nums", "", "<n>[1, [2]]</n><n>3</n><n>[]</n><n>{\"k\": [4]}</n><n>[5]</n>", None),
        ("bad_block", "", '<|tool_call_start|>[f(x=1)]<|tool_call_end|><|tool_call_start|>[f(1)]<|tool_call_end|>'
         "<n>[6]</n>", None),
    ],
}

# One conformance vector per extension (tests/vectors/ext_<extension>.json/.cpt): the family whose template and
# texts (its real cases, then EXTRA_CASES) it holds.
VECTORS = {"json_values": "qwen3_json_values", "flatten": "lfm2_blocks"}
