"""Templates that use the value-level format extensions (not bundled), one per motivating family of
tests/data/inexpressible.json, with that file's real example outputs (copied here, with their sources,
so the tests run in a clean clone) and the message each must give.

`FAMILIES` maps a name to ``(template, [(case name, prefix, output, tools, message)], source)``;
`VECTORS` names the family each extension's conformance vector (``ext_<extension>``) is made of. The templates
are the partial templates of inexpressible.json (or, where it has none, written from the family's format) plus
the extension keys. tests/test_extensions_values.py parses each case one-shot, streamed and per token in both
dialects; tests/make_vectors.py writes them as the ``ext_*`` vectors for the JavaScript runtime.
"""

from __future__ import annotations

import copy

# Cohere Command's citation markup (cmd3 `<co>`, older `<co: 0,1>`), its cited text kept (unwrap_pattern)
CITATION = r"<co(?:: [^>]*)?>(?P<keep>.*?)</co: [^>]*>"
FN_EACH = {"type": "function", "function": {"name": "{name}", "arguments": "{arguments}"}}


def call(name: str, arguments: dict) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


REGISTER_USER = {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": None,
                 "passed_test": True, "aliases": ["John", "Johnny"]}

FAMILIES: dict = {
    # ---------------------------------------------------------------------------- python_calls
    "lfm2_pythonic": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"reasoning_content": {"open": "<think>", "close_pattern": r"\s*</think>\s*"},
                    "tool_calls": {"open_pattern": r"\s*<\|tool_call_start\|>", "close_pattern": r"<\|tool_call_end\|>\s*",
                                   "content": "python-calls", "transform_each": True, "transform": FN_EACH},
                    "content": {"close_pattern": r"\s*<\|im_end\|>"}}},
        [("pythonic_multi", "<|im_start|>assistant\n",
          '<|tool_call_start|>[get_weather(city="Paris"), search(query="restaurants")]<|tool_call_end|>', None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "Paris"}),
                                               call("search", {"query": "restaurants"})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py (TestLfm2Detector)"),
    "llama4_pythonic": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|header_start|>assistant<|header_end|>\n\n",
         "fields": {"tool_calls": {"open_pattern": r"\s*(?:<\|python_start\|>\s*)?(?=\[\s*[A-Za-z_][A-Za-z0-9_.]*\s*\()",
                                   "close_pattern": r"\s*<\|python_end\|>\s*|\s*(?=<\|eot\|>|<\|eom\|>)",
                                   "content": "python-calls", "transform_each": True, "transform": FN_EACH},
                    "content": {"close_pattern": r"\s*(?:<\|eot\|>|<\|eom\|>)"}}},
        [("simple", "", "[get_weather(city='LA', metric='C')]", None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "LA", "metric": "C"})]}),
         ("more_types", "", "[register_user(name='Doe', age=9, address={'city': 'LA', 'state': 'CA'}, role=None, "
          "passed_test=True, aliases=['John', 'Johnny'])]", None,
          {"role": "assistant", "tool_calls": [call("register_user", {
              "name": "Doe", "age": 9, "address": {"city": "LA", "state": "CA"}, "role": None, "passed_test": True,
              "aliases": ["John", "Johnny"]})]}),
         ("python_tag_parallel", "", "<|python_start|>[get_weather(city='LA', metric='C'), register_user(name='Doe', "
          "age=9)]", None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "LA", "metric": "C"}),
                                               call("register_user", {"name": "Doe", "age": 9})]}),
         ("large_steps", "", "<|python_start|>[get_weather(city='LA', metric='C'), get_weather(), "
          "do_something_cool(steps=[])]<|python_end|>", None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "LA", "metric": "C"}),
                                               call("get_weather", {}), call("do_something_cool", {"steps": []})]})],
        "vllm-project/vllm:tests/tool_parsers/test_llama4_pythonic_tool_parser.py"),
    "llama32_pythonic": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "fields": {"tool_calls": {"open_pattern": r"\s*(?=\[\s*[A-Za-z_][A-Za-z0-9_.]*\s*\()",
                                   "content": "python-calls", "transform_each": True, "transform": FN_EACH},
                    "content": {"close_pattern": r"\s*<\|eot_id\|>"}}},
        [("text_before", "", "This is some text before [get_weather(location='London')]", None,
          {"role": "assistant", "content": "This is some text before",
           "tool_calls": [call("get_weather", {"location": "London"})]}),
         ("nested_brackets", "", "[get_weather(location='Paris', data=[10, 20]), search(query='test', "
          "filters=['a', 'b'])]", None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"location": "Paris", "data": [10, 20]}),
                                               call("search", {"query": "test", "filters": ["a", "b"]})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py (TestPythonicDetector)"),
    "olmo3": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"tool_calls": {"open": "<function_calls>", "close": "</function_calls>",
                                   "content": "python-calls", "transform_each": True, "transform": FN_EACH},
                    "content": {"close_pattern": r"\s*<\|im_end\|>"}}},
        [("parallel", "", "<function_calls>get_weather(city='San Francisco', metric='celsius')\nregister_user("
          "name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, passed_test=True, "
          "aliases=['John', 'Johnny'])</function_calls>", None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"city": "San Francisco", "metric": "celsius"}),
                                               call("register_user", REGISTER_USER)]}),
         ("json_literals", "", "<function_calls>register_user(name='John Doe', age=37, address={'city': "
          "'San Francisco', 'state': 'CA'}, role=null, passed_test=true, aliases=['John', 'Johnny'])</function_calls>",
          None, {"role": "assistant", "tool_calls": [call("register_user", REGISTER_USER)]})],
        "vllm-project/vllm:tests/tool_parsers/test_olmo3_tool_parser.py"),
    # ---------------------------------------------------------------------------- argument_types
    "deepseek_v32_schema": (
        {"defaults": {"role": "assistant"}, "start_anchor_pattern": "<｜Assistant｜>(?:</think>)?",
         "fields": {"reasoning_content": {"open": "<think>", "close_pattern": r"\s*</think>\s*"},
                    "tool_calls": {"open_pattern": "\\s*(?:<｜DSML｜function_calls>\\s*)?<｜DSML｜invoke name=\"(?P<name>[^\"]+)\">",
                                   "close_pattern": "</｜DSML｜invoke>\\s*", "repeats": True, "content": "xml-inline",
                                   "content_args": {"tag_pattern": "<｜DSML｜parameter name=\"(?P<key>[^\"]+)\" "
                                                                   "string=\"(?:true|false)\">(?P<value>.*?)</｜DSML｜parameter>",
                                                    "value_parser": {"name": "json", "args": {"allow_non_json": True}}},
                                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
                                   "argument_types": "schema"},
                    "content": {"close_pattern": "\\s*(?:</｜DSML｜function_calls>|<｜end▁of▁sentence｜>)\\s*"}}},
        [("string_true_numeric_text", "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>What's the weather in Tokyo?"
          "<｜Assistant｜></think>",
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="lookup">\n<｜DSML｜parameter name="zip" string="true">02139'
          '</｜DSML｜parameter>\n<｜DSML｜parameter name="code" string="true">10</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
          '</｜DSML｜function_calls>',
          [{"type": "function", "function": {"name": "lookup", "parameters": {
              "type": "object", "properties": {"zip": {"type": "string"}, "code": {"type": "string"}}}}}],
          {"role": "assistant", "tool_calls": [call("lookup", {"zip": "02139", "code": "10"})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py (TestDeepSeekV32Detector)"),
    # ---------------------------------------------------------------------------- key_aliases
    "llama3_json_aliases": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "fields": {"tool_calls": {"open_pattern": "\\s*(?:<\\|python_tag\\|>)?(?=\\{\\s*\"name\")",
                                   "close_pattern": "(?<=\\})\\s*(?:;\\s*|(?=<\\|python_tag\\|>|<\\|eot_id\\|>|<\\|eom_id\\|>|\\{\\s*\"name\"))",
                                   "repeats": True, "content": "json", "key_aliases": {"arguments": "parameters"},
                                   "transform": {"type": "function", "function": {"name": "{content.name}",
                                                                                  "arguments": "{content.parameters}"}}},
                    "content": {"close_pattern": "\\s*(?:<\\|eot_id\\|>|<\\|eom_id\\|>)"}}},
        [("arguments_key_alias", "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython"
          "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nFind things.<|eot_id|><|start_header_id|>assistant"
          "<|end_header_id|>\n\n", '{"name": "searchTool", "arguments": {"query": "test"}}', None,
          {"role": "assistant", "tool_calls": [call("searchTool", {"query": "test"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_llama3_json_tool_parser.py"),
    # ---------------------------------------------------------------------------- as_list + decode_json_strings
    "nemotron_json_lists": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_header_id|>assistant<|end_header_id|>\n\n",
         "fields": {"reasoning_content": {"open": "<think>", "close_pattern": r"\s*</think>\s*|\s*(?=<TOOLCALL>)"},
                    "tool_calls": {"open_pattern": r"\s*<TOOLCALL>", "close_pattern": r"</TOOLCALL>\s*", "content": "json",
                                   "transform_each": True, "transform": FN_EACH, "as_list": True,
                                   "decode_json_strings": ["function.arguments"]},
                    "content": {"close_pattern": r"\s*<\|eot_id\|>"}}},
        [("bare_object", "<|start_header_id|>user<|end_header_id|>\n\nWeather in Tokyo?<|eot_id|><|start_header_id|>"
          "assistant<|end_header_id|>\n\n", '<TOOLCALL>{"name": "lookup", "arguments": {"query": "vllm"}}</TOOLCALL>',
          None, {"role": "assistant", "tool_calls": [call("lookup", {"query": "vllm"})]}),
         ("string_arguments", "<|start_header_id|>user<|end_header_id|>\n\nWeather in Tokyo?<|eot_id|>"
          "<|start_header_id|>assistant<|end_header_id|>\n\n",
          '<TOOLCALL>[{"name": "run_query", "arguments": "{\\"sql\\": \\"select 1\\"}"}]</TOOLCALL>', None,
          {"role": "assistant", "tool_calls": [call("run_query", {"sql": "select 1"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_nemotron_json_tool_parser.py"),
    # ---------------------------------------------------------------------------- decode_json_strings
    "granite4_json_strings": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|start_of_role|>assistant<|end_of_role|>",
         "fields": {"tool_calls": {"open_pattern": r"\s*<tool_call>", "close_pattern": r"</tool_call>\s*",
                                   "repeats": True, "content": "json",
                                   "transform": {"type": "function", "function": "{content}"},
                                   "decode_json_strings": ["function.arguments"]},
                    "content": {"close_pattern": r"\s*<\|end_of_text\|>"}}},
        [("string_arguments", "<|start_of_role|>assistant<|end_of_role|>",
          '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
          None, {"role": "assistant", "tool_calls": [call("get_db_config", {"param": "max_connections"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_hermes_tool_parser.py (granite4 config)"),
    "hermes_json_strings": (
        {"defaults": {"role": "assistant"}, "start_anchor": "<|im_start|>assistant\n",
         "fields": {"tool_calls": {"open_pattern": r"\s*<tool_call>", "close_pattern": r"</tool_call>\s*",
                                   "repeats": True, "content": "json",
                                   "transform": {"type": "function", "function": "{content}"},
                                   "decode_json_strings": ["function.arguments"]},
                    "content": {"close_pattern": r"\s*(?:<\|im_end\|>|<\|endoftext\|>)"}}},
        [("serialized_string_arguments", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n"
          "What's the weather?<|im_end|>\n<|im_start|>assistant\n",
          '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
          None, {"role": "assistant", "tool_calls": [call("get_db_config", {"param": "max_connections"})]})],
        "vllm-project/vllm:tests/tool_parsers/test_hermes_tool_parser.py"),
    # ---------------------------------------------------------------------------- optional_placeholders
    "mistral_small32_call_id": (
        # the bundled mistral_v11 template with the [CALL_ID] value captured, and "id" left out where it is absent
        {"defaults": {"role": "assistant"}, "start_anchor": "[/INST]",
         "fields": {"reasoning_content": {"open_pattern": r"\s*\[THINK\]", "close": "[/THINK]"},
                    "tool_calls": {"open_pattern": r"\s*\[TOOL_CALLS\](?P<name>[^\[{\s]+)\s*(?:\[CALL_ID\]"
                                                   r"(?P<id>[^\[{\s]*))?(?:\[ARGS\])?(?=\s*\{)",
                                   "close_pattern": r"\s*(?=\[TOOL_CALLS\])|\s*</s>\s*", "repeats": True,
                                   "content": "json", "optional_placeholders": ["id"],
                                   "transform": {"id": "{id}", "type": "function",
                                                 "function": {"name": "{name}", "arguments": "{content}"}}},
                    "content": {"close_pattern": r"\s*</s>\s*"}}},
        [("call_id", "<s>[INST]Hey there![/INST]", '[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}',
          None, {"role": "assistant", "tool_calls": [{"id": "123456789", **call("special_function", {"arg1": 1})}]}),
         ("no_call_id", "<s>[INST]Hey there![/INST]", '[TOOL_CALLS]special_function[ARGS]{"arg1":1}', None,
          {"role": "assistant", "tool_calls": [call("special_function", {"arg1": 1})]})],
        "ggml-org/llama.cpp:tests/test-chat.cpp::test_template_output_peg_parsers "
        "(models/templates/Mistral-Small-3.2-24B-Instruct-2506.jinja, Mistral-Nemo / Magistral)"),
    # ---------------------------------------------------------------------------- content_fallback
    "deepseek_v32_json_body": (
        None,  # (deepseek_v32_schema's template with its parsers swapped: `_json_body_template` below)
        [("json_body", "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>What's the weather in Tokyo?<｜Assistant｜></think>",
          "I'll help you with information about San Francisco and get its favorite tourist spot for you.\n\n        "
          "<｜DSML｜function_calls>\n            <｜DSML｜invoke name=\"get_favorite_tourist_spot\">\n            {\n"
          "                \"city\": \"San Francisco\"\n            }\n        </｜DSML｜invoke>\n            "
          "<｜DSML｜invoke name=\"search\">\n            {\n                \"query\": \"WebNav benchmark\",\n"
          "                \"topn\": 10,\n                \"source\": \"web\"\n            }\n        "
          "</｜DSML｜invoke>\n        </｜DSML｜function_calls>\n        ", None,
          {"role": "assistant", "content": "I'll help you with information about San Francisco and get its favorite "
           "tourist spot for you.", "tool_calls": [call("get_favorite_tourist_spot", {"city": "San Francisco"}),
                                                   call("search", {"query": "WebNav benchmark", "topn": 10,
                                                                   "source": "web"})]}),
         ("xml_body", "<｜Assistant｜></think>",
          '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="location" string="true">'
          'Tokyo</｜DSML｜parameter>\n<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
          '</｜DSML｜function_calls>', None,
          {"role": "assistant", "tool_calls": [call("get_weather", {"location": "Tokyo", "days": 3})]})],
        "sgl-project/sglang:test/registered/function_call/test_function_call_parser.py (TestDeepSeekV32Detector)"),
    # ---------------------------------------------------------------------------- unwrap_pattern
    "cohere_citations": (
        # the bundled cohere template with the citation markup unwrapped in reasoning and content
        {"defaults": {"role": "assistant"}, "start_anchor": "<|CHATBOT_TOKEN|>",
         "fields": {"reasoning_content": {"open": "<|START_THINKING|>", "close": "<|END_THINKING|>",
                                          "unwrap_pattern": CITATION},
                    "tool_calls": {"open": "<|START_ACTION|>", "close": "<|END_ACTION|>", "content": "json",
                                   "transform_each": True,
                                   "transform": {"id": "{tool_call_id}", "type": "function",
                                                 "function": {"name": "{tool_name}", "arguments": "{parameters}"}}},
                    "content": {"open": ["<|START_RESPONSE|>", "<|START_TEXT|>"], "close": ["<|END_RESPONSE|>",
                                                                                             "<|END_TEXT|>"],
                                "unwrap_pattern": CITATION}}},
        [(f"citations_{tag.lower()}", "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Search please<|END_OF_TURN_TOKEN|>"
          "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
          "<|START_THINKING|>This is a rainbow <co>emoji: 🌈</co: 0:[1]><|END_THINKING|>\n"
          f"<|START_{tag}|>foo <co>bar</co: 0:[1,2],1:[3,4]><|END_{tag}|>", None,
          {"role": "assistant", "reasoning_content": "This is a rainbow emoji: 🌈", "content": "foo bar"})
         for tag in ("RESPONSE", "TEXT")],
        "vllm-project/vllm:tests/tool_parsers/test_cohere_command_tool_parser.py (citations_no_tool_calls, cmd3/cmd4)"),
}



def _json_body_template() -> dict:
    """deepseek_v32 (deepseek_v32_schema's template, without schema typing) with "json" first and its xml-inline
    parser as the fallback; "score" is made up for the conformance vector (a body that neither int nor float
    takes fails with int's error)."""
    template = copy.deepcopy(FAMILIES["deepseek_v32_schema"][0])
    calls = template["fields"]["tool_calls"]
    del calls["argument_types"]
    calls["content_fallback"] = [{"content": calls.pop("content"), "content_args": calls.pop("content_args")}]
    calls["content"] = "json"
    content = template["fields"].pop("content")
    template["fields"]["score"] = {"open": "<score>", "close": "</score>", "content": "int",
                                   "content_fallback": [{"content": "float"}]}
    template["fields"]["content"] = content
    return template


FAMILIES["deepseek_v32_json_body"] = (_json_body_template(),) + FAMILIES["deepseek_v32_json_body"][1:]

# More texts for the ext_* conformance vectors (what chatparse does with them is recorded, and the JavaScript
# runtime must do the same): escapes, number forms, errors (a failed region: raised, or region_malformed in
# the vllm dialect), typing rules, alias conflicts, strings that are not JSON objects.
SCHEMA_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
    "o": {"type": "object"}, "a": {"type": "array"}, "z": {"type": "null"}, "u": {"type": ["string", "integer"]},
    "v": {"type": ["integer", "string"]}, "m": {"anyOf": [{"type": "null"}, {"type": "string"}]}}}}}]

EXTRA_CASES: dict = {
    "olmo3": [
        ("escapes", "", "<function_calls>f(s='a\\'b\\x41\\u00e9\\U0001F600\\n\\t\\q', t=\"\"\"x\ny\"\"\", c='ab' \"cd\")"
         "</function_calls>", None),
        ("numbers", "", "<function_calls>f(a=-0, b=-0.0, c=0x1F, d=0o17, e=0b101, f=1_000, g=1.5e3, h=.5, i=5., "
         "j=+7, k=1e400, l=(1,), m=(), n=(2), o={'k': (1, [2, {}])})</function_calls>", None),
        ("bare_commas", "", "<function_calls>a.b.c(x=1), d(), \ne(y=[1,\n2],)\n</function_calls>tail", None),
        ("positional", "", "<function_calls>f(1, a=2)</function_calls>after", None),
        ("name_value", "", "<function_calls>f(a=b)</function_calls>after", None),
        ("unterminated", "", "<function_calls>f(a='x)</function_calls>", None),
        ("empty", "", "<function_calls>  </function_calls>text", None),
        ("list_form", "", "<function_calls>[get_weather(city='LA', metric='C'), get_weather(), "
         "do_something_cool(steps=[])]</function_calls>", None),
    ],
    "deepseek_v32_schema": [
        ("typing", "<｜Assistant｜></think>",
         "".join(f'<｜DSML｜parameter name="{k}" string="false">{v}</｜DSML｜parameter>' for k, v in [
             ("s", "null"), ("i", "3.0"), ("n", "2.50"), ("b", "True"), ("o", '{"x": 1}'), ("a", "[1]"), ("z", "None"),
             ("u", "42"), ("v", "42"), ("m", "null"), ("w", "7")]).join(['<｜DSML｜invoke name="f">', "</｜DSML｜invoke>"]),
         SCHEMA_TOOLS),
        ("typed_values_to_text", "<｜Assistant｜></think>",
         "".join(f'<｜DSML｜parameter name="s" string="false">{v}</｜DSML｜parameter>' for v in ['{"a": [1, 2.5, null]}'])
         .join(['<｜DSML｜invoke name="f">', "</｜DSML｜invoke>"]), SCHEMA_TOOLS),
        ("texts", "<｜Assistant｜></think>",
         "".join(f'<｜DSML｜parameter name="{k}" string="false">{v}</｜DSML｜parameter>' for k, v in [
             ("s", "1.50"), ("u", "1e3"), ("v", "042"), ("i", "3.0"), ("n", "-0"), ("m", "null"), ("s", " 7")])
         .join(['<｜DSML｜invoke name="f">', "</｜DSML｜invoke>"]), SCHEMA_TOOLS),
        ("no_tools", "<｜Assistant｜></think>",
         '<｜DSML｜invoke name="f"><｜DSML｜parameter name="s" string="true">10</｜DSML｜parameter></｜DSML｜invoke>', None),
    ],
    "llama3_json_aliases": [
        ("both_keys", "", '{"name": "t", "arguments": {"q": 1}, "parameters": {"q": 2}}', None),
        ("canonical", "", '{"parameters": {"q": 2}, "name": "t"}', None),
    ],
    "mistral_small32_call_id": [
        ("mixed", "", '[TOOL_CALLS]a[CALL_ID]x1[ARGS]{"k": [1]}[TOOL_CALLS]b[ARGS]{}[TOOL_CALLS]c[CALL_ID][ARGS]{"z": null}'
         "</s>", None),
        ("bad_json", "", "[TOOL_CALLS]a[CALL_ID]x1[ARGS]{bad}[TOOL_CALLS]b[ARGS]{}", None),
    ],
    "deepseek_v32_json_body": [
        ("mixed_bodies", "", '<｜DSML｜invoke name="a">[1, 2]</｜DSML｜invoke><｜DSML｜invoke name="b">  </｜DSML｜invoke>'
         '<｜DSML｜invoke name="c">{bad <｜DSML｜parameter name="k" string="true">v</｜DSML｜parameter></｜DSML｜invoke>', None),
        ("scores", "", "<score> 7 </score><score>2.5e1</score><score>1_0</score>", None),
        ("score_fails", "", "<score>seven</score>after", None),
    ],
    "cohere_citations": [
        ("unpaired_and_nested", "", "<|START_RESPONSE|>a <co: 1>b</co: 1> <co>c <code>d</code> e</co: 0:[1]> "
         "<co>never closed 😀<|END_RESPONSE|>", None),
        ("empty_keep_and_astral", "", "<|START_THINKING|><co></co: 0:[1]>x𝔘<co: 2>𝔘</co: 2>\n<|END_THINKING|>", None),
    ],
    "nemotron_json_lists": [
        ("not_objects", "", '<TOOLCALL>[{"name": "a", "arguments": "[1, 2]"}, {"name": "b", "arguments": "nope"}, '
         '{"name": "c", "arguments": "{\\"x\\": {\\"y\\": \\"{}\\"}}"}]</TOOLCALL>', None),
        ("scalar", "", "<TOOLCALL>42</TOOLCALL>", None),
    ],
}


# One conformance vector per extension (tests/vectors/ext_<extension>.json/.cpt): the family whose template
# and texts (its real cases, then EXTRA_CASES) it holds. (as_list's template also decodes JSON strings.)
VECTORS = {"python_calls": "olmo3", "argument_types": "deepseek_v32_schema", "key_aliases": "llama3_json_aliases",
           "as_list": "nemotron_json_lists", "decode_json_strings": "granite4_json_strings",
           "optional_placeholders": "mistral_small32_call_id", "content_fallback": "deepseek_v32_json_body",
           "unwrap_pattern": "cohere_citations"}
