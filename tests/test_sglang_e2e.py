"""End to end through SGLang 0.5.23's OpenAI chat serving class: ``--tool-call-parser chatparse
--reasoning-parser chatparse`` serves a qwen3 checkpoint that has no ``response_template`` (the template
resolved from its chat template), and, with the bundled qwen3 template in the tokenizer config, streams chunk
for chunk what ``response_template`` for both streams with that same template.

The layer: `sglang.srt.entrypoints.openai.serving_chat.OpenAIServingChat.handle_request`, the code behind
``/v1/chat/completions``, called directly, one level below SGLang's HTTP server (which this test does not start:
launching it starts SGLang's scheduler and model processes; whether they start on this CPU-only machine was
not tried). What is real: SGLang's `ServerArgs`
(``device="cpu"``) published as the process's config (`runtime_context.publish`), its `ModelConfig` read from
a tiny qwen3 model directory written here (config.json, no weights), its tokenizer loader (`get_tokenizer`), its
`TemplateManager` (the chat template from the tokenizer), its `OpenAIServingChat` with the parsers chosen by
name, its request conversion (the chat template renders the prompt), its streaming and non-streaming response
builders, and the `openai` package's `ChatCompletionChunk` / `ChatCompletion` types reading what it returns.
The tokenizer is a byte-level BPE trained here with qwen3's ChatML, ``<think>`` and ``<tool_call>`` tokens, and
qwen3's published chat template (tests/chat_templates/qwen3.jinja), from which the plugin resolves the family.

What stands in: `ScriptedEngine`, for SGLang's `TokenizerManager` and what is behind it (scheduler, model,
detokenizer): `generate_request` yields the decoded text of a scripted qwen3 output one token id more at each
step (SGLang's default, non-incremental stream output), then stops with the end-of-turn token.

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import pathlib
from types import SimpleNamespace

import pytest
from deps import need_sglang


need_sglang()

from openai.types.chat import ChatCompletion, ChatCompletionChunk  # noqa: E402
from sglang.srt.configs.model_config import ModelConfig  # noqa: E402
from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest  # noqa: E402
from sglang.srt.entrypoints.openai.serving_chat import OpenAIServingChat  # noqa: E402
from sglang.srt.parser.template_manager import TemplateManager  # noqa: E402
from sglang.srt.runtime_context import publish  # noqa: E402
from sglang.srt.server_args import ServerArgs  # noqa: E402
from sglang.srt.utils.hf_transformers_utils import get_tokenizer  # noqa: E402
from token_support import qwen3_chat_tokenizer  # noqa: E402

from chatparse import templates  # noqa: E402
from chatparse.integrations import sglang as plugin  # noqa: E402
from chatparse.integrations.vllm_template import serving_template, vllm_view  # noqa: E402

logging.getLogger("sglang").setLevel(logging.ERROR)

CHAT_TEMPLATE = (pathlib.Path(__file__).resolve().parent / "chat_templates" / "qwen3.jinja").read_text(encoding="utf-8")
OUTPUT = ("<think>\nThe user wants the weather in Paris.\n</think>\n\nSome text <tool_call>\n"
          '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}, "required": ["city"]}}}]


def _model_dir(path: pathlib.Path, response_template: dict | None) -> str:
    """A model directory SGLang's ModelConfig and tokenizer loader read offline: a tiny qwen3 config.json (no
    weights: nothing runs the model) and the tokenizer, with `response_template` in its tokenizer_config.json
    where given. The directory's name names no family, so the plugin finds qwen3 by the chat template."""
    path.mkdir()
    tokenizer = qwen3_chat_tokenizer([OUTPUT, "hello world, the weather in Paris is sunny"], CHAT_TEMPLATE)
    tokenizer.save_pretrained(path)
    if response_template is not None:
        cfg_path = path / "tokenizer_config.json"
        cfg = json.loads(cfg_path.read_text())
        cfg["response_template"] = response_template
        cfg_path.write_text(json.dumps(cfg))
    (path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 64, "head_dim": 16,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
        "vocab_size": len(tokenizer), "max_position_embeddings": 512, "torch_dtype": "float32",
        "eos_token_id": tokenizer.eos_token_id, "tie_word_embeddings": True}))
    return str(path)


class ScriptedEngine:
    """Stands in for SGLang's TokenizerManager and what is behind it (scheduler, model, detokenizer): what
    OpenAIServingChat reads of it, and `generate_request`, which streams OUTPUT's token ids one more per step
    as the decoded text so far, finishing with the end-of-turn token (a request not streamed gets the last
    step only, as SGLang's does)."""

    def __init__(self, server_args: ServerArgs):
        self.server_args = server_args
        self.model_path = server_args.model_path
        self.served_model_name = "m"
        self.model_config = ModelConfig.from_server_args(server_args)
        self.tokenizer = get_tokenizer(server_args.model_path)
        self.processor = None
        self.request_logger = SimpleNamespace(log_requests=False, log_requests_level=0)
        self.prompts: list = []

    def config_value(self, name: str):
        return getattr(self.server_args, name)

    def create_abort_task(self, request):
        return None

    async def generate_request(self, request, raw_request):
        self.prompts.append(request.input_ids if request.input_ids is not None else request.text)
        ids = self.tokenizer.encode(OUTPUT, add_special_tokens=False)
        for i in range(1 if request.stream else len(ids), len(ids) + 1):  # not streamed: the whole output
            last = i == len(ids)
            yield {"text": self.tokenizer.decode(ids[:i]), "output_ids": ids[:i], "meta_info": {
                "id": "req-1", "prompt_tokens": 8, "completion_tokens": i, "weight_version": "default",
                "finish_reason": {"type": "stop", "matched": self.tokenizer.eos_token_id} if last else None}}


def _serve(model_dir: str, parser: str, engine_cls=None) -> tuple[OpenAIServingChat, ScriptedEngine]:
    args = ServerArgs(model_path=model_dir, tool_call_parser=parser, reasoning_parser=parser, device="cpu")
    publish(args, role="test")
    engine = (engine_cls or ScriptedEngine)(args)
    manager = TemplateManager()
    manager.initialize_templates(engine, model_dir)
    return OpenAIServingChat(engine, manager), engine


def _request(chat: OpenAIServingChat, *, stream: bool):
    return serve_request(chat, ChatCompletionRequest(model="m", messages=MESSAGES, tools=TOOLS, stream=stream))


def serve_request(chat: OpenAIServingChat, request: ChatCompletionRequest):
    """`request` through SGLang's chat serving class, read as the `openai` client reads it: a ChatCompletion,
    or the ChatCompletionChunks of the stream."""

    async def run():
        response = await chat.handle_request(request, None)
        if not request.stream:  # SGLang's ChatCompletionResponse, which its HTTP route serializes as JSON
            assert not hasattr(response, "body"), response.body  # an error response
            return ChatCompletion.model_validate_json(response.model_dump_json())
        assert type(response).__name__ == "StreamingResponse", response.body
        chunks = []
        async for piece in response.body_iterator:
            for line in (piece.decode() if isinstance(piece, bytes) else piece).splitlines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(ChatCompletionChunk.model_validate_json(line[len("data: "):]))
        return chunks

    return asyncio.run(run())


def _deltas(chunks: list) -> list:
    """Each chunk's choice as (reasoning, content, calls as (index, name, arguments), finish reason); the
    random call ids left out."""
    out = []
    for chunk in chunks:
        (choice,) = chunk.choices
        d = choice.delta
        calls = [(c.index, c.function.name if c.function else None, c.function.arguments if c.function else None)
                 for c in d.tool_calls or ()]
        out.append((getattr(d, "reasoning_content", None), d.content, calls, choice.finish_reason))
    return out


def _joined(deltas: list) -> tuple:
    reasoning = "".join(r or "" for r, _, _, _ in deltas)
    content = "".join(c or "" for _, c, _, _ in deltas)
    calls: dict = {}
    for _, _, cs, _ in deltas:
        for index, name, arguments in cs:
            slot = calls.setdefault(index, ["", ""])
            slot[0] = name or slot[0]
            slot[1] += arguments or ""
    return reasoning, content, [(n, json.loads(a)) for n, a in calls.values()], deltas[-1][3]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    plugin.register()
    root = tmp_path_factory.mktemp("sglang_e2e")
    plain = _model_dir(root / "ft-checkpoint", None)
    # the bundled qwen3 template (base format), as SGLang's loader takes it (SGLang's interpreter drops the call
    # of this output as malformed under the serving-grade template's view)
    view = vllm_view(serving_template(templates.get("qwen3")))
    with_template = _model_dir(root / "with-template", view)
    plugin._models.clear()
    out = {}
    for name, model_dir, parser in (("chatparse", plain, plugin.NAME),
                                    ("chatparse, same template", with_template, plugin.NAME),
                                    ("response_template", with_template, "response_template")):
        chat, engine = _serve(model_dir, parser)
        out[name] = {"stream": _deltas(_request(chat, stream=True)), "one-shot": _request(chat, stream=False),
                     "engine": engine}
    return out


def test_plugin_serves_a_checkpoint_without_response_template(servers):
    reasoning, content, calls, finish = _joined(servers["chatparse"]["stream"])
    assert reasoning.strip() == "The user wants the weather in Paris."
    assert content.strip() == "Some text"
    assert calls == [("get_weather", {"city": "Paris"})]
    assert finish == "tool_calls"
    (choice,) = servers["chatparse"]["one-shot"].choices
    message = choice.message
    assert message.reasoning_content.strip() == "The user wants the weather in Paris."
    assert message.content.strip() == "Some text"
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == calls
    assert choice.finish_reason == "tool_calls"


def test_the_prompt_is_rendered_by_the_chat_template(servers):
    engine = servers["chatparse"]["engine"]
    prompt = engine.prompts[0]
    text = engine.tokenizer.decode(prompt) if isinstance(prompt, list) else prompt
    assert text.endswith("<|im_start|>assistant\n") and "Weather in Paris?" in text


def _message(completion) -> tuple:
    (choice,) = completion.choices
    m = choice.message
    return (m.reasoning_content, m.content, [(c.function.name, c.function.arguments) for c in m.tool_calls or ()],
            choice.finish_reason)


def test_streams_what_sglang_response_template_streams(servers):
    """The same template in the tokenizer config: chunk for chunk what SGLang's own detectors stream."""
    ours, theirs = servers["chatparse, same template"]["stream"], servers["response_template"]["stream"]
    assert ours == theirs
    assert _joined(theirs)[2] == [("get_weather", {"city": "Paris"})]


def test_answers_what_sglang_response_template_answers(servers):
    ours = _message(servers["chatparse, same template"]["one-shot"])
    assert ours == _message(servers["response_template"]["one-shot"])
    assert ours[2] == [("get_weather", '{"city": "Paris"}')]


def test_resolved_template_serves_what_the_bundled_one_does(servers):
    """Resolved from the chat template (the serving-grade qwen3 template) and given the bundled one in the
    config, the plugin serves the same message, streamed and not."""
    assert _joined(servers["chatparse"]["stream"]) == _joined(servers["chatparse, same template"]["stream"])
    assert _message(servers["chatparse"]["one-shot"]) == _message(servers["chatparse, same template"]["one-shot"])
