"""Tool-argument typing in chatparse's SGLang plugin: SGLang 0.5.23's rule, not chatparse's.

SGLang's copy of the interpreter types tool-call arguments by its own rule (docs/serving-sglang.md, "The dialect",
1): in a union with ``string`` it casts only text that is exactly the JSON of another declared type, ``number``
keeps an exact int, and where the arguments were decoded from JSON a string stays a string wherever the schema
allows one. The plugin parses with chatparse's serving dialect and no tools, then types each closed call with
SGLang's own `_coerce_tool_calls` (`chatparse.integrations.sglang._SGLangTyping`). Here, on calls whose
arguments the two rules type differently:

* SGLang's own interpreter (`sglang.srt.parser.chat_parsing.parse_response`), SGLang's ``response_template``
  detector and the plugin (given the same template, and as served: the template resolved from the model id)
  all give SGLang's typing, one-shot and streamed;
* chatparse's own rule (`chatparse.parse_response` with the tools) gives something else for every argument,
  so the plugin's typing step is what makes the plugin agree.

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so.
"""

from __future__ import annotations

import json
import logging

import pytest
from deps import need_sglang


need_sglang()

from sglang.srt.entrypoints.openai.protocol import Tool  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser.chat_parsing import parse_response as sglang_parse_response  # noqa: E402

import chatparse  # noqa: E402
from bench import sglang_families as sf  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.integrations import sglang as plugin  # noqa: E402

logging.getLogger("sglang").setLevel(logging.CRITICAL)
plugin.register()

PROPERTIES = {
    "union_int": {"type": ["integer", "string"]},
    "union_bool": {"type": ["boolean", "string"]},
    "big": {"type": "number"},
    "json_string": {"type": ["string", "integer"]},
}
ARGUMENTS = {"union_int": "3.0", "union_bool": "1", "big": "12345678901234567891", "json_string": "42"}
# SGLang's rule on these (docs/serving-sglang.md, "The dialect", 1)
SGLANG_TYPED = {"union_int": "3.0", "union_bool": "1", "big": 12345678901234567891, "json_string": "42"}
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": PROPERTIES}}}
PREFIX = "<|im_start|>user\nGo<|im_end|>\n<|im_start|>assistant\n"
OUTPUT = "Calling.\n\n<tool_call>\n" + json.dumps({"name": "f", "arguments": ARGUMENTS}) + "\n</tool_call>"
FAMILY = "hermes"  # JSON-valued calls, bundled and served


def _served(side: str, *, stream: bool) -> list:
    """The call SGLang's tool parser `side` (bench.sglang_families' sides) serves for OUTPUT, as (name, args)."""
    name, _, tokenizer = sf.names_of(side, FAMILY)
    parser = FunctionCallParser([Tool(**TOOL)], name, tokenizer=tokenizer, prefix=PREFIX)
    if not stream:
        _, items = parser.parse_non_stream(OUTPUT)
        return sf._calls(items)
    items = []
    for piece in sf.deltas(OUTPUT, 3, FAMILY):
        items += parser.parse_stream_chunk(piece)[1]
    items += parser.parse_stream_end()[1]
    return sf._calls(items)


def test_sglang_interpreter_types_by_its_rule():
    message = sglang_parse_response(OUTPUT, sf.base_view(FAMILY), prefix=PREFIX, tools=[TOOL])
    assert message["tool_calls"][0]["function"]["arguments"] == SGLANG_TYPED


def test_chatparse_rule_differs_on_every_argument():
    message = chatparse.parse_response(OUTPUT, templates.get(FAMILY), prefix=PREFIX, tools=[TOOL])
    ours = message["tool_calls"][0]["function"]["arguments"]
    assert set(ours) == set(SGLANG_TYPED)
    for key, value in SGLANG_TYPED.items():
        assert ours[key] != value or type(ours[key]) is not type(value), key


@pytest.mark.parametrize("stream", [False, True], ids=["one-shot", "streamed"])
@pytest.mark.parametrize("side", ["template", "plugin_same", "plugin"])
def test_served_arguments_are_sglang_typed(side, stream):
    assert _served(side, stream=stream) == [("f", SGLANG_TYPED)]


def test_plugin_without_sglang_typing_would_differ(monkeypatch):
    """The typing step is what makes the plugin agree: without it, the plugin serves the arguments untyped
    by either rule (as the JSON gave them, all strings), which differs from SGLang's."""
    monkeypatch.setattr(plugin._SGLangTyping, "__call__", lambda self, value: value)
    plugin._models.clear()
    try:
        assert _served("plugin", stream=False) == [("f", ARGUMENTS)] != [("f", SGLANG_TYPED)]
    finally:
        plugin._models.clear()
