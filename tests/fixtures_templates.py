"""Fixture response templates, prompts and generations for tests/test_behaviours.py.

Written from the response-parsing spec (shared/seeds/000_*.txt: SmolLM3, Qwen3 xml-inline, gpt-oss, Cohere
examples), the format corpus (tests/data/corpus.json: gemma4, ERNIE, Qwen3, Cohere, gpt-oss) and the
descriptions in tests/data/BEHAVIOURS.md (ERNIE's zero-width `(?:^|<think>\\s*)` open, the "inkling"
multi-block format). Every template is a plain dict; tests deep-copy before use.

Each entry of ``FIXTURES`` is ``(template, prefix, generation, expected_message)``; the expected messages
were written by hand from the spec and are also checked against transformers 5.23.0 by the tests.
"""

from __future__ import annotations

import copy

# ----------------------------------------------------------------------------------------- SmolLM3 (seed)
# The seed's SmolLM template, with regex closes so the whitespace around the think block stays out.
SMOLLM = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}
SMOLLM_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
)
SMOLLM_TOOL_TEXT = (
    "<think>\nI should greet the user\n</think>\n\n"
    '<tool_call>{"name": "greet_user", "arguments": {"greeting": "Hi!"}}</tool_call><|im_end|>'
)
SMOLLM_TOOL_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "I should greet the user",
    "tool_calls": [{"type": "function", "function": {"name": "greet_user", "arguments": {"greeting": "Hi!"}}}],
}
# No tool call and no <|im_end|>: the implicit content runs to end of stream.
SMOLLM_PLAIN_TEXT = "<think>\nThe user said hi.\n</think>\n\nHello! How can I help you today?"
SMOLLM_PLAIN_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "The user said hi.",
    "content": "Hello! How can I help you today?",
}

# ------------------------------------------------------------------------------------ Qwen3 xml-inline (seed)
QWEN3 = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r"<parameter=(?P<key>\w+)>\s*(?P<value>.*?)\s*</parameter>",
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": "<|im_end|>"},
    },
}
QWEN3_PROMPT = (
    "<|im_start|>system\nYou can call tools.<|im_end|>\n"
    "<|im_start|>user\nWhat's the weather and set an alarm.<|im_end|>\n<|im_start|>assistant\n"
)
QWEN3_TEXT = (
    "<think>\nTwo tools are needed.\n</think>\n\n"
    "<tool_call>\n<function=get_weather>\n"
    "<parameter=locations>\n[{\"country\": \"France\", \"city\": \"Paris\"}]\n</parameter>\n"
    "<parameter=unit>\ncelsius\n</parameter>\n"
    "<parameter=detailed>\ntrue\n</parameter>\n"
    "</function>\n</tool_call>\n"
    "<tool_call>\n<function=set_alarm>\n"
    "<parameter=hour>\n7\n</parameter>\n"
    "<parameter=label>\nwake up\n</parameter>\n"
    "<parameter=price>\n1.50\n</parameter>\n"
    "<parameter=code>\n007\n</parameter>\n"
    "</function>\n</tool_call><|im_end|>"
)
QWEN3_EXPECTED = {
    "role": "assistant",
    "thinking": "Two tools are needed.",
    "tool_calls": [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "arguments": {"locations": [{"country": "France", "city": "Paris"}], "unit": "celsius", "detailed": True},
            },
        },
        {
            "type": "function",
            "function": {"name": "set_alarm", "arguments": {"hour": 7, "label": "wake up", "price": 1.5, "code": "007"}},
        },
    ],
}
# The chat template pre-wrote "<think>\n": the prefix lands inside the thinking region.
QWEN3_THINK_PROMPT = QWEN3_PROMPT + "<think>\n"
QWEN3_THINK_TEXT = "Let me think...</think>\n\nIt is sunny.<|im_end|>"
QWEN3_THINK_EXPECTED = {"role": "assistant", "thinking": "Let me think...", "content": "It is sunny."}

# ------------------------------------------------------------------------------------------- gpt-oss (seed)
GPT_OSS = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|start|>assistant",
    "fields": {
        "reasoning_content": {"open": "<|channel|>analysis<|message|>", "close": "<|end|>"},
        "tool_calls": {
            "open_pattern": r"<\|channel\|>commentary to=functions\.(?P<name>\w+).*?<\|message\|>",
            "close": "<|call|>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"open": "<|channel|>final<|message|>", "close": "<|end|>"},
    },
}
GPT_OSS_PROMPT = (
    "<|start|>system<|message|>You are ChatGPT.\nReasoning: medium<|end|>"
    "<|start|>user<|message|>What is 1+1?<|end|>"
    "<|start|>assistant<|channel|>final<|message|>An earlier answer.<|end|>"
    "<|start|>user<|message|>And the weather in San Francisco?<|end|><|start|>assistant"
)
GPT_OSS_NO_TOOL_TEXT = (
    "<|channel|>analysis<|message|>User asks a simple sum; answer is 2.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>2"
)
GPT_OSS_NO_TOOL_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "User asks a simple sum; answer is 2.",
    "content": "2",
}
# The channel header crosses " <|constrain|>json"; the call has no <|call|> (end of stream closes it).
GPT_OSS_TOOL_TEXT = (
    "<|channel|>analysis<|message|>Need to use function get_current_weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_current_weather <|constrain|>json<|message|>"
    '{\n  "location": "San Francisco, CA",\n  "unit": "fahrenheit"\n}'
)
GPT_OSS_TOOL_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "Need to use function get_current_weather.",
    "tool_calls": [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "arguments": {"location": "San Francisco, CA", "unit": "fahrenheit"},
            },
        }
    ],
}

# -------------------------------------------------------------------------------------- Cohere (seed/corpus)
COHERE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
    "fields": {
        "reasoning_content": {"open": "<|START_THINKING|>", "close": "<|END_THINKING|>"},
        "tool_calls": {
            "open": "<|START_ACTION|>",
            "close": "<|END_ACTION|>",
            "content": "json",
            "transform_each": True,
            "transform": {"type": "function", "function": {"name": "{tool_name}", "arguments": "{parameters}"}},
        },
        "content": {"open": "<|START_RESPONSE|>", "close": "<|END_RESPONSE|>"},
    },
}
COHERE_PROMPT = (
    "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Find the weather and search news<|END_OF_TURN_TOKEN|>"
    "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
)
COHERE_ACTION_BODY = (
    '\n[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Toronto"}},\n'
    '    {"tool_call_id": "1", "tool_name": "search", "parameters": {"query": "news", "limit": 3}}\n]\n'
)
COHERE_TEXT = (
    "<|START_THINKING|>I should call a tool.<|END_THINKING|>"
    "<|START_ACTION|>" + COHERE_ACTION_BODY + "<|END_ACTION|><|END_OF_TURN_TOKEN|>"
)
COHERE_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "I should call a tool.",
    "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Toronto"}}},
        {"type": "function", "function": {"name": "search", "arguments": {"query": "news", "limit": 3}}},
    ],
}

# ------------------------------------------------------------------------------------------ ERNIE (spec)
# Thinking opens at byte 0 through the zero-width `^` alternative; there is no implicit field, so whatever
# lies outside the explicit regions (the "\n\n" between blocks, the trailing "\n</s>") is dropped.
ERNIE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"open_pattern": r"(?:^|<think>\s*)", "close_pattern": r"\s*</think>"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"open": "<response>\n", "close_pattern": r"\n?</response>"},
    },
}
ERNIE_PROMPT = "<|im_start|>user\nWeather in Beijing?<|im_end|>\n<|im_start|>assistant\n"
ERNIE_TOOL_TEXT = (
    "The user wants the weather in Beijing, so I call the tool.\n</think>\n\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Beijing", "unit": "c"}}\n</tool_call>\n</s>'
)
ERNIE_TOOL_EXPECTED = {
    "role": "assistant",
    "thinking": "The user wants the weather in Beijing, so I call the tool.",
    "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"location": "Beijing", "unit": "c"}}}
    ],
}
ERNIE_NO_TOOL_TEXT = "A greeting is enough.\n</think>\n\n<response>\nHello there!\n</response>\n</s>"
ERNIE_NO_TOOL_EXPECTED = {"role": "assistant", "thinking": "A greeting is enough.", "content": "Hello there!"}
# Streaming fixture: starts with a literal <think>, which the zero-width `^` alternative keeps (R4).
ERNIE_STREAM_TEXT = "<think>some deliberation here</think>\n\n<response>\nThe answer.\n</response>\n</s>"
ERNIE_STREAM_EXPECTED = {
    "role": "assistant",
    "thinking": "<think>some deliberation here",
    "content": "The answer.",
}

# ---------------------------------------------------------------------------------------- gemma4 (corpus)
GEMMA4 = {
    "defaults": {"role": "assistant"},
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
    "fields": {
        "reasoning_content": {"open": "<|channel>thought\n", "close": "<channel|>"},
        "tool_calls": {
            "open_pattern": r"<\|tool_call>call:(?P<name>[\w.\-]+)",
            "close": "<tool_call|>",
            "repeats": True,
            "content": "json",
            "content_args": {"unquoted_keys": True, "string_delims": [['<|"|>', '<|"|>']]},
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "content": {"close": ["<turn|>", "<|tool_response>", "<eos>"]},
    },
}
GEMMA4_TEXT = '<|tool_call>call:get_weather{location:<|"|>London<|"|>}<tool_call|><|tool_response>'
GEMMA4_EXPECTED = {
    "role": "assistant",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"location": "London"}}}],
}
GEMMA4_COMPLEX_TEXT = (
    '<|channel>thought\nThe user wants a trip plan.<channel|>'
    '<|tool_call>call:plan_trip{destination:<|"|>Paris, France<|"|>,refundable:true,budget:null,nights:3,'
    'hotel:{name:<|"|>Le Petit<|"|>,stars:4},sights:[<|"|>Louvre<|"|>,<|"|>Eiffel Tower<|"|>]}<tool_call|>'
    '<|tool_response>'
)
GEMMA4_COMPLEX_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "The user wants a trip plan.",
    "tool_calls": [
        {
            "type": "function",
            "function": {
                "name": "plan_trip",
                "arguments": {
                    "destination": "Paris, France",
                    "refundable": True,
                    "budget": None,
                    "nights": 3,
                    "hotel": {"name": "Le Petit", "stars": 4},
                    "sights": ["Louvre", "Eiffel Tower"],
                },
            },
        }
    ],
}

# ----------------------------------------------------------------------------------------- inkling (spec)
# Multi-block messages: every block may start with an optional <|message_model|> header and an author name;
# thinking/text keep their whitespace (strip: False) and are joined with "".
_INKLING_HEAD = r"(?:<\|message_model\|>)?[^<]*"
INKLING = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|message_model|>",
    "fields": {
        "reasoning_content": {
            "open_pattern": _INKLING_HEAD + r"<\|content_thinking\|>",
            "close": "<|content_end|>",
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "content": {
            "open_pattern": _INKLING_HEAD + r"<\|content_text\|>",
            "close": "<|content_end|>",
            "repeats": True,
            "join": "",
            "content_args": {"strip": False},
        },
        "tool_calls": {
            "open_pattern": _INKLING_HEAD + r"<\|content_tool_call\|>",
            "close": "<|content_end|>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{content.name}", "arguments": "{content.args}"}},
        },
    },
}
INKLING_PROMPT = (
    "<|message_user|><|content_text|>What's the weather in Tokyo?<|content_end|>\n\n<|message_model|>"
)
INKLING_TEXT = (
    "<|content_thinking|>Consider the weather.<|content_end|>\n\n"
    "<|message_model|>get_weather<|content_thinking|> Tokyo, probably.<|content_end|>\n\n"
    '<|message_model|><|content_tool_call|>{"name": "get_weather", "args": {"city": "Tokyo"}}<|content_end|>\n\n'
    "<|message_model|><|content_text|>Checking now.<|content_end|><|content_model_end_sampling|>"
)
INKLING_EXPECTED = {
    "role": "assistant",
    "reasoning_content": "Consider the weather. Tokyo, probably.",
    "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Tokyo"}}}],
    "content": "Checking now.",
}

# --------------------------------------------------------------------------------------- the fixture table
FIXTURES = {
    "cohere": (COHERE, COHERE_PROMPT, COHERE_TEXT, COHERE_EXPECTED),
    "ernie": (ERNIE, ERNIE_PROMPT, ERNIE_STREAM_TEXT, ERNIE_STREAM_EXPECTED),
    "ernie_tool": (ERNIE, ERNIE_PROMPT, ERNIE_TOOL_TEXT, ERNIE_TOOL_EXPECTED),
    "gpt_oss": (GPT_OSS, GPT_OSS_PROMPT, GPT_OSS_NO_TOOL_TEXT, GPT_OSS_NO_TOOL_EXPECTED),
    "gpt_oss_tool": (GPT_OSS, GPT_OSS_PROMPT, GPT_OSS_TOOL_TEXT, GPT_OSS_TOOL_EXPECTED),
    "smollm": (SMOLLM, SMOLLM_PROMPT, SMOLLM_TOOL_TEXT, SMOLLM_TOOL_EXPECTED),
    "qwen3": (QWEN3, QWEN3_PROMPT, QWEN3_TEXT, QWEN3_EXPECTED),
    "gemma4": (GEMMA4, "", GEMMA4_COMPLEX_TEXT, GEMMA4_COMPLEX_EXPECTED),
    "inkling": (INKLING, INKLING_PROMPT, INKLING_TEXT, INKLING_EXPECTED),
}


def fixture(name: str):
    """A deep copy of one fixture: (template, prefix, text, expected)."""
    return copy.deepcopy(FIXTURES[name])
