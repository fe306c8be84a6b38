"""Templates that use the format extensions ``json_values``, ``flatten`` and ``escaped_json_values`` (not
bundled), each with the real-output corpus case that motivates it (copied here with its source, so the tests run in a clean clone)
and the message it must give; the same layout as tests/ext_templates.py.

`FAMILIES` maps a name to ``(template, [(case name, prefix, output, tools, message)], source)``; `EXTRA_CASES`
holds more texts for the conformance vectors (what chatparse does with them is recorded, and the JavaScript
runtime must do the same); `VECTORS` names the family of each extension's vector (``ext_<extension>``,
written by tests/make_vectors.py). tests/test_extensions_lists.py and tests/test_extensions_escaped.py parse
each case on every path.
"""

from __future__ import annotations

FN_EACH = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}
QWEN3_PREFIX = ("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nWhat's the weather?<|im_end|>\n"
                "<|im_start|>assistant\n")
LFM2_PREFIX = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"


def call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


GLM_TAG = (r"<arg_key>(?P<key>.*?)</arg_key>\s*<arg_value>(?P<value>.*?)</arg_value>"
           r"(?=[^<]*(?:<arg_key>|$)|(?:(?!</arg_value>).)*$)")
GLM_PREFIX = "[gMASK]<sop><|system|>\nYou are helpful.<|user|>\nWeather in Beijing?<|assistant|>"
GLM_TOOLS = [{"type": "function", "function": {"name": "todo_write", "description": "Write todos", "parameters": {
    "type": "object", "properties": {"todos": {"type": "array", "description": "The updated todo list"}},
    "required": ["todos"]}}}]
TODOS = [("Check for hard-coded issues in the backend code", "in_progress"),
         ("Check for hard-coded issues in the frontend code", "pending"),
         ("Check for code violating the Single Responsibility Principle", "pending"),
         ("Generate a rectification proposal report", "pending")]

FAMILIES: dict = {
    # ---------------------------------------------------------------------------- json_values (and flatten)
    "qwen3_json_values": (
        # the bundled qwen3 template, its tool-call body read as comma-separated JSON calls; "nums" is made up for
        # the conformance vector (flatten on a json body: a list extends the field, anything else is one element)
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"reasoning_content": {"open_pattern": r"\s*<think>",
                                          "close_pattern": r"\s*</think>\s*|\s*(?=<tool_call>)"},
                    "tool_calls": {"open_pattern": r"\s*<tool_call>", "close_pattern": r"</tool_call>\s*",
                                   "repeats": True, "content": "json-values", "transform_each": True,
                                   "transform": FN_EACH, "flatten": True},
                    "nums": {"open": "<n>", "close": "</n>", "repeats": True, "content": "json", "flatten": True},
                    "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)\s*", "repeats": True,
                                "join": "\n\n"}}},
        [("two_calls_one_block", QWEN3_PREFIX,
          '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_tourist_attractions", '
          '"arguments": {"city": "London"}}</tool_call>', None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}),
                                               call("get_tourist_attractions", {"city": "London"})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py"
        "::TestBaseFormatDetector::test_sequential_tool_index_assignment"),
    # ---------------------------------------------------------------------------- flatten
    "lfm2_blocks": (
        # the bundled lfm2 template with python-calls, one [call, ...] list per block, blocks repeated; "nums" as
        # in qwen3_json_values
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
    # ---------------------------------------------------------------------------- escaped_json_values
    "glm47_escaped": (
        # the bundled glm47 template with escaped JSON values read; "kv" is made up for the conformance vector (a
        # kv-lines field whose json value parser has no allow_non_json: a value it refuses raises, unless escaped)
        {"defaults": {"role": "assistant"}, "start_anchor_pattern": r"<\|assistant\|>(?:\s*</think>)?",
         "fields": {"reasoning_content": {"open_pattern": r"\s*<think>", "close_pattern": r"\s*</think>\s*|\s*(?=<tool_call>)"},
                    "tool_calls": {"open_pattern": r"\s*<tool_call>\s*(?P<name>[^\n<]+?)\s*(?=<arg_key>|</tool_call>|\n)",
                                   "close_pattern": r"\s*</tool_call>\s*", "repeats": True, "content": "xml-inline",
                                   "content_args": {"tag_pattern": GLM_TAG, "value_parser": {
                                       "name": "json", "args": {"allow_non_json": True}}},
                                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
                                   "escaped_json_values": True},
                    "kv": {"open": "<kv>", "close": "</kv>", "content": "kv-lines",
                           "content_args": {"value_parser": {"name": "json"}}, "escaped_json_values": True},
                    "content": {"close_pattern": r"\s*(?:<\|user\|>|<\|observation\|>|<\|endoftext\|>)\s*",
                                "repeats": True, "join": "\n\n"}}},
        [("array_escaped_json_raw", GLM_PREFIX + "</think>",
          "<tool_call>todo_write<arg_key>todos</arg_key><arg_value>[" + ", ".join(
              '{\\"id\\": \\"%d\\", \\"task\\": \\"%s\\", \\"status\\": \\"%s\\"}' % (i + 1, task, status)
              for i, (task, status) in enumerate(TODOS)) + "]</arg_value>\n</tool_call>", GLM_TOOLS,
          {"role": "assistant", "tool_calls": [call("todo_write", {"todos": [
              {"id": str(i + 1), "task": task, "status": status} for i, (task, status) in enumerate(TODOS)]})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py"
        "::TestGlm47MoeDetector::test_array_argument_with_escaped_json (second output, raw string)"),
}

EXTRA_CASES: dict = {
    "qwen3_json_values": [
        ("spacing_and_strings", "", '<tool_call> {"name": "a", "arguments": {"s": "x}, {\\"y"}} ,\n'
         '{"name": "b", "arguments": {}} </tool_call>text<tool_call>{"name": "c", "arguments": {"n": [1, 2.5, null]}}'
         "</tool_call>", None),
        ("missing_comma", "", '<tool_call>{"name": "a", "arguments": {}} {"name": "b", "arguments": {}}</tool_call>',
         None),
        ("array_body", "", '<tool_call>[{"name": "a", "arguments": {}}]</tool_call>', None),
        ("nums", "", "<n>[1, [2]]</n><n>3</n><n>[]</n><n>{\"k\": [4]}</n><n>[NaN, \"é🌈\"]</n>", None),
    ],
    "lfm2_blocks": [
        ("empty_and_many", "", "<|tool_call_start|>[]<|tool_call_end|>a<|tool_call_start|>[f(x=1), g(), h(y=[2])]"
         "<|tool_call_end|>b<|tool_call_start|>f(z=None)<|tool_call_end|>", None),
        ("nums", "", "<n>[1, [2]]</n><n>3</n><n>[]</n><n>{\"k\": [4]}</n><n>[5]</n>", None),
        ("bad_block", "", '<|tool_call_start|>[f(x=1)]<|tool_call_end|><|tool_call_start|>[f(1)]<|tool_call_end|>'
         "<n>[6]</n>", None),
    ],
    "glm47_escaped": [
        ("values", "", "<tool_call>f<arg_key>a</arg_key><arg_value>{\\\"k\\\": [1, \\\"\\u00e9\\\"]}</arg_value>"
         "<arg_key>b</arg_key><arg_value>\\\"q\\\"</arg_value><arg_key>c</arg_key><arg_value>\"[1]\"</arg_value>"
         "<arg_key>e</arg_key><arg_value>a\\nb</arg_value><arg_key>g</arg_key><arg_value>[1, \\\"x</arg_value>"
         "<arg_key>h</arg_key><arg_value>\\\"a\nb\\\"</arg_value></tool_call>", None),
        ("kv_lines", "", "<kv>a: {\\\"x\\\": 1}\nb: 2\nc: \\\"s\\\"\n</kv>", None),
        ("kv_refused", "", "<kv>a: {\\\"x\\\": 1}\nb: nope\n</kv>after", None),
    ],
}

# One conformance vector per extension (tests/vectors/ext_<extension>.json/.cpt): the family whose template and
# texts (its real cases, then EXTRA_CASES) it holds.
VECTORS = {"json_values": "qwen3_json_values", "escaped_json_values": "glm47_escaped"}
# (flatten is in the json_values vector: its template flattens the calls of each block and the "nums" field; the
# vectors' total size is bounded by tests/test_format.py)
