"""End to end through vLLM 0.33.0's OpenAI server: ``--tool-call-parser chatparse --reasoning-parser chatparse``
streams what ``--tool-call-parser hf --reasoning-parser hf`` streams, read with the real `openai` client.

What is real: vLLM's `ModelConfig`/`VllmConfig` (from a tiny local Qwen2 model directory written here, no
weights), its renderer and `OnlineRenderer` (the chat template turns the request into prompt token ids), its
`OpenAIServingChat` with the parsers chosen by name, its FastAPI chat-completions router served by uvicorn on
127.0.0.1, its `OutputProcessor` (detokenization into `RequestOutput`/`CompletionOutput` deltas), and the
`openai` client reading the server-sent chunks. The tokenizer is a byte-level BPE trained here with `tokenizers`
(qwen3's ``<think>``/``<tool_call>`` tags as added tokens, as in Qwen3's own), with the bundled qwen3 response
template in its tokenizer_config.json, where vLLM's `resolve_response_template` finds it.

What stands in: the model. `ScriptedEngine.generate` feeds the token ids of a scripted qwen3-style output, one
per step, through vLLM's `OutputProcessor`, ending with the end-of-turn token (finish reason "stop"), as vLLM's
engine core would.

vLLM's ``hf`` parser refuses the bundled qwen3 template (its reasoning field is ``reasoning_content``), so its
server gets the same template with the field renamed to ``thinking`` (`plugin.serving_template`); the chatparse
server gets the bundled template itself (README: Serving with vLLM).

Runs where vllm==0.33.0 is installed (`.ci/run` runs it in the venv it makes for vLLM); skips elsewhere.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import pytest

from deps import need, need_vllm  # noqa: E402

need_vllm("vllm.entrypoints.openai.chat_completion.serving")
openai = need("openai", "the client of the served model (a vLLM dependency)")
uvicorn = need("uvicorn", "the server (a vLLM dependency)")

from fastapi import FastAPI  # noqa: E402
from token_support import qwen3_chat_tokenizer  # noqa: E402
from vllm import AsyncEngineArgs  # noqa: E402
from vllm.config import DeviceConfig, VllmConfig  # noqa: E402
from vllm.entrypoints.openai.chat_completion.api_router import attach_router  # noqa: E402
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402
from vllm.entrypoints.openai.models.protocol import BaseModelPath  # noqa: E402
from vllm.entrypoints.openai.models.serving import OpenAIServingModels  # noqa: E402
from vllm.renderers import renderer_from_config  # noqa: E402
from vllm.renderers.online_renderer import OnlineRenderer  # noqa: E402
from vllm.v1.engine import EngineCoreOutput, EngineCoreRequest, FinishReason  # noqa: E402
from vllm.v1.engine.output_processor import OutputProcessor  # noqa: E402

import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.integrations import vllm as plugin  # noqa: E402

OUTPUT = ('<think>\nThe user wants the weather in Paris.\n</think>\n\nSome text <tool_call>\n'
          '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                           "parameters": {"type": "object", "properties": {
                                               "city": {"type": "string"}}, "required": ["city"]}}}]
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _model_dir(path, tokenizer, response_template: dict):
    """A model directory vLLM's ModelConfig reads offline: a tiny Qwen2 config.json (no weights: nothing runs
    the model) and the tokenizer, with `response_template` in its tokenizer_config.json."""
    path.mkdir()
    tokenizer.save_pretrained(path)
    cfg_path = path / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["response_template"] = response_template
    cfg_path.write_text(json.dumps(cfg))
    (path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
        "vocab_size": len(tokenizer), "max_position_embeddings": 512, "torch_dtype": "float32",
        "eos_token_id": tokenizer.eos_token_id, "tie_word_embeddings": True}))
    return str(path)


class ScriptedEngine:
    """The EngineClient surface `OpenAIServingChat` uses, with a scripted model: `generate` feeds `ids` one
    token per step through vLLM's own `OutputProcessor`, which detokenizes them and yields the
    `RequestOutput`s (delta kind, as the streaming request asks) an engine would."""

    errored = False
    is_running = True
    is_stopped = False
    dead_error = RuntimeError("scripted engine: never dead")
    input_processor = None

    def __init__(self, vllm_config: VllmConfig, renderer, ids: list[int]):
        self.vllm_config = vllm_config
        self.model_config = vllm_config.model_config
        self.renderer = renderer
        self.ids = ids
        self.prompts: list[list[int]] = []

    def check_admission(self, n: int = 1, request_id: str | None = None) -> None:
        pass

    async def is_tracing_enabled(self) -> bool:
        return False

    async def abort(self, request_id, internal: bool = False) -> None:
        pass

    async def generate(self, prompt, sampling_params, request_id, **_):
        self.prompts.append(list(prompt["prompt_token_ids"]))
        processor = OutputProcessor(self.renderer.tokenizer, log_stats=False)
        processor.add_request(EngineCoreRequest(
            request_id=request_id, prompt_token_ids=prompt["prompt_token_ids"], mm_features=None,
            sampling_params=sampling_params, pooling_params=None, arrival_time=time.time(), lora_request=None,
            cache_salt=None, data_parallel_rank=None, external_req_id=request_id), prompt=None)
        for k, token in enumerate(self.ids):
            finish = FinishReason.STOP if k == len(self.ids) - 1 else None
            out = EngineCoreOutput(request_id=request_id, new_token_ids=[token], finish_reason=finish)
            for request_output in processor.process_outputs([out]).request_outputs:
                yield request_output
            await asyncio.sleep(0)


class _Server:
    """vLLM's chat-completions router over `OpenAIServingChat` with `parser` as tool-call and reasoning
    parser, served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self, parser: str, model_dir: str, output_ids: list[int]):
        model_config = AsyncEngineArgs(model=model_dir).create_model_config()
        vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
        renderer = renderer_from_config(vllm_config)
        self.engine = ScriptedEngine(vllm_config, renderer, output_ids)
        online_renderer = OnlineRenderer(model_config, renderer, request_logger=None, chat_template=None,
                                         chat_template_content_format="auto", enable_auto_tools=True,
                                         tool_parser=parser, reasoning_parser=parser)
        self.chat = OpenAIServingChat(
            self.engine, OpenAIServingModels(self.engine, [BaseModelPath(name="m", model_path=model_dir)]),
            "assistant", online_renderer=online_renderer, request_logger=None, chat_template=None,
            chat_template_content_format="auto", enable_auto_tools=True, tool_parser=parser,
            reasoning_parser=parser)
        app = FastAPI()
        attach_router(app)
        app.state.openai_serving_chat = self.chat
        app.state.enable_server_load_tracking = False
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def stream(self) -> list:
        client = openai.OpenAI(base_url=self.url, api_key="x", max_retries=0, timeout=30)
        return list(client.chat.completions.create(model="m", messages=MESSAGES, tools=TOOLS, stream=True))


def _assembled(chunks) -> dict:
    """The streamed message: reasoning, content and tool calls joined over the chunks as a client joins them
    (tool-call pieces by index), plus which delta field carried reasoning and the finish reason."""
    out = {"reasoning": "", "content": "", "tool_calls": {}, "fields": set(), "finish_reason": None,
           "reasoning_chunks": 0}
    for chunk in chunks:
        for choice in chunk.choices:
            delta = choice.delta
            extra = delta.model_extra or {}
            out["fields"] |= {k for k, v in extra.items() if v is not None}
            if extra.get("reasoning"):
                out["reasoning"] += extra["reasoning"]
                out["reasoning_chunks"] += 1
            out["content"] += delta.content or ""
            for tc in delta.tool_calls or []:
                call = out["tool_calls"].setdefault(tc.index, {"id": None, "type": None, "name": "",
                                                               "arguments": ""})
                call["id"] = call["id"] or tc.id
                call["type"] = call["type"] or tc.type
                if tc.function is not None:
                    call["name"] += tc.function.name or ""
                    call["arguments"] += tc.function.arguments or ""
            out["finish_reason"] = choice.finish_reason or out["finish_reason"]
    out["tool_calls"] = [out["tool_calls"][i] for i in sorted(out["tool_calls"])]
    return out


def _without_ids(message: dict) -> dict:
    return {**message, "tool_calls": [{k: v for k, v in c.items() if k != "id"} for c in message["tool_calls"]]}


def test_openai_stream_through_vllm_server_matches_hf_parser(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    plugin.register()
    tokenizer = qwen3_chat_tokenizer([OUTPUT, "hello world, the weather in Paris is sunny", CHAT_TEMPLATE],
                                     CHAT_TEMPLATE)
    template = templates.get("qwen3")
    output_ids = tokenizer.encode(OUTPUT, add_special_tokens=False) + [tokenizer.eos_token_id]
    assert tokenizer.convert_tokens_to_ids("<think>") in output_ids  # the tags are single tokens, as in Qwen3

    got = {}
    for parser, response_template in (("chatparse", template), ("hf", plugin.serving_template(template))):
        with _Server(parser, _model_dir(tmp_path / parser, tokenizer, response_template), output_ids) as server:
            if parser == "chatparse":  # the served parser reads the generated token ids through the tables
                assert server.chat.parser_cls(server.chat.renderer.tokenizer, None)._binding is not None
            got[parser] = _assembled(server.stream())
            prompt_ids = server.engine.prompts[-1]

    ours, vllms = got["chatparse"], got["hf"]
    # vLLM's serving layer puts reasoning in `delta.reasoning` (not `reasoning_content`), for both parsers
    assert ours["fields"] == vllms["fields"] == {"reasoning"}
    assert ours["reasoning_chunks"] > 1  # streamed as it was generated, not at the end
    for call in ours["tool_calls"] + vllms["tool_calls"]:
        assert call["id"]  # vLLM's own ids (random: compared only for presence)
    assert _without_ids(ours) == _without_ids(vllms)
    assert ours["finish_reason"] == "tool_calls"

    # The message chatparse gives for the whole output after the prompt the server rendered. A text field's
    # value is stripped there (the format's `text` content); the server streams the text as generated, so
    # the reasoning keeps the newline after <think>.
    prefix = tokenizer.decode(prompt_ids)
    assert prefix == tokenizer.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    message = chatparse.parse_response(OUTPUT, template, prefix=prefix, tools=TOOLS)
    assert ours["reasoning"] == "\n" + message["reasoning_content"]
    assert ours["content"] == message["content"]
    assert [{"type": c["type"], "function": {"name": c["name"], "arguments": json.loads(c["arguments"])}}
            for c in ours["tool_calls"]] == message["tool_calls"]
    assert message == {"role": "assistant", "reasoning_content": "The user wants the weather in Paris.",
                       "content": "Some text", "tool_calls": [
                           {"type": "function",
                            "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
