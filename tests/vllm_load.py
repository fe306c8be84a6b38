"""The vLLM plugin under load, through vLLM 0.33.0's real OpenAI chat-completions server (importable helper).

`run_load(total, concurrency, families)` starts one server per family, all in this process, each as
tests/test_vllm_e2e.py starts one: vLLM's `OpenAIServingChat` and `OnlineRenderer` with
``tool_parser="chatparse", reasoning_parser="chatparse"``, its chat-completions router served by uvicorn on
127.0.0.1 (a thread per server), vLLM's `OutputProcessor` detokenizing, and a scripted engine in place of the
model. It then sends `total` streaming chat requests (with tools) spread over the families, at most
`concurrency` at once, read with the real ``openai.AsyncOpenAI`` client, and checks every response.

The model directory of a family is named after a published model id of the family (``<tmp>/Qwen/Qwen3-8B``):
vLLM loads the tokenizer from it, transformers sets its ``name_or_path`` to that path, and the plugin resolves
the bundled family's serving-grade template from it (`chatparse.integrations.resolve`, "model id"); no
``response_template`` is written anywhere (checked, and the resolution is checked after start-up). The
tokenizer is a byte-level BPE trained here with `tokenizers` on the family's corpus outputs and rendered chats,
the family's markers (`bench.vllm_families.MARKERS`) as added tokens and its end-of-turn token as the special
EOS. The chat template is the family's tests/chat_templates/<family>.jinja with one addition at its end: a
``cp_prefill`` variable (a chat-template kwarg of the request) written after the generation prompt, so that a
corpus output whose source prompt pre-writes ``<think>`` (or ``</think>``) gets that prompt from the server.

The outputs. Per family a pool of base outputs: the cases of tests/real_outputs/<family>.json without
``xfail``, and `GENERATED` random assistant turns rendered by the family's chat template
(`chat_roundtrip.random_message` / `render_turn`: reasoning, content, 0-3 calls with arguments of every JSON
type). In every base output, one place per part of the message (reasoning, content, each call's arguments) is
chosen where a word of that part's text can take a suffix (found by parsing: the suffix must land in that part
and change nothing else); request ``n`` gets base ``n``'s output with the suffix ``QZ<n, 6 digits>`` at each of
those places. So every request's output is different, and every part of it carries the request's own number.

The engine (`LoadEngine`, test_vllm_e2e's `ScriptedEngine` with a script per request) finds the request's
number in the rendered prompt (the user message carries ``[[req NNNNNN]]``), feeds that output's token ids one
per step through vLLM's `OutputProcessor`, ``await asyncio.sleep(0)`` between steps (requests interleave: the
report gives the most generations one engine had in flight at once), and records the prompt ids and the text
vLLM detokenized.

Every response is checked twice:

* exact: the streamed message, assembled as a client assembles it (`test_vllm_e2e._assembled`: reasoning,
  content, tool calls by index), equals the plugin's one-shot answer for the same output and prompt, computed
  the way vLLM's non-streaming path computes it: the server's own parser class built by the server's own
  ``OpenAIServingChat._make_parser`` (with the request's chat-template kwargs), ``set_prompt_token_ids`` with
  the prompt ids the engine received, then ``parse(output.text, request, enable_auto_tools=True,
  model_output_token_ids=...)`` with the text vLLM detokenized. Both sides are vLLM's adapter serving raw text
  (no strip on either), so reasoning, content and every call's name and argument string are compared exactly,
  unstripped. Also: every streamed call has an id and type "function", and the finish reason is "tool_calls"
  when there are calls, "stop" otherwise. The one-shot parse runs on the server's event loop (the thread that
  owns vLLM's tokenizer).
* no leak: the ``QZdddddd`` numbers found in the streamed response (reasoning, content, call names and
  arguments) are exactly its own number, once per marked place.

Memory: the resident set (/proc/self/statm, current RSS; `resource.getrusage`'s max RSS only grows) after the
servers start, after a warm-up of `warmup` requests and at the end (both after ``gc.collect()`` with no request
in flight); growth = end / after-warm-up - 1.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import random
import re
import socket
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
for _p in (str(TESTS), str(ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import openai  # noqa: E402
import uvicorn  # noqa: E402
from fastapi import FastAPI  # noqa: E402
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from vllm import AsyncEngineArgs  # noqa: E402
from vllm.config import DeviceConfig, VllmConfig  # noqa: E402
from vllm.entrypoints.openai.chat_completion.api_router import attach_router  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402
from vllm.entrypoints.openai.models.protocol import BaseModelPath  # noqa: E402
from vllm.entrypoints.openai.models.serving import OpenAIServingModels  # noqa: E402
from vllm.renderers import renderer_from_config  # noqa: E402
from vllm.renderers.online_renderer import OnlineRenderer  # noqa: E402
from vllm.v1.engine import EngineCoreOutput, EngineCoreRequest, FinishReason  # noqa: E402
from vllm.v1.engine.output_processor import OutputProcessor  # noqa: E402

import chatparse  # noqa: E402
from chatparse import templates  # noqa: E402
from chatparse.authoring.roundtrip import render  # noqa: E402
from chatparse.integrations import vllm as plugin  # noqa: E402

import chat_roundtrip as cr  # noqa: E402
from bench.vllm_families import MARKERS, tools_for  # noqa: E402
from test_vllm_e2e import ScriptedEngine, _assembled  # noqa: E402

# family -> (a published model id of the family, its end-of-turn token, the end of its generation prompt)
FAMILIES = {
    "qwen3": ("Qwen/Qwen3-8B", "<|im_end|>", "<|im_start|>assistant\n"),
    "hermes": ("NousResearch/Hermes-3-Llama-3.1-8B", "<|im_end|>", "<|im_start|>assistant\n"),
    "llama3_json": ("meta-llama/Llama-3.1-8B-Instruct", "<|eot_id|>",
                    "<|start_header_id|>assistant<|end_header_id|>\n\n"),
    "glm45": ("zai-org/GLM-4.5-Air", "<|user|>", "<|assistant|>"),
    "mistral_v11": ("mistralai/Mistral-Small-3.2-24B-Instruct-2506", "</s>", "[/INST]"),
    "deepseek_v31": ("deepseek-ai/DeepSeek-V3.1-Terminus", "<｜end▁of▁sentence｜>", "<｜Assistant｜>"),
}
DEFAULT_FAMILIES = ("qwen3", "hermes", "llama3_json", "glm45")
# chat-template kwargs a corpus prompt may need besides the family's default (the thinking switches)
KWARG_CHOICES = {"qwen3": ({"enable_thinking": False},), "deepseek_v31": ({"thinking": True},)}
GENERATED = 40  # random turns per family, besides the corpus cases
PREFILL = "cp_prefill"
PREFILL_SUFFIX = "{% if add_generation_prompt and " + PREFILL + " is defined %}{{ " + PREFILL + " }}{% endif %}"
SYSTEM = "You are a helpful assistant."
REQ_TAG = "[[req {:06d}]]"
REQ_RE = re.compile(r"\[\[req (\d{6})\]\]")
NONCE = "QZ{:06d}"
NONCE_RE = re.compile(r"QZ(\d{6})")
PROBE = "QZ999999"  # the suffix placed while choosing the places (no request has this number)
WORD_RE = re.compile(r"(?<![A-Za-z0-9_])[A-Za-z]{3,}(?![A-Za-z0-9_])")
MAX_TRIES = 40  # candidate places tried per part


def rss_bytes() -> int:
    """The current resident set size of this process."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------------------------------------------
# Model directories
# --------------------------------------------------------------------------------------------------------------
def server_chat_template(family: str) -> str:
    """tests/chat_templates/<family>.jinja, then ``cp_prefill`` after the generation prompt."""
    return cr.chat_template(family) + PREFILL_SUFFIX


def messages_for(n: int) -> list[dict]:
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"{REQ_TAG.format(n)} Help me with a few things, please."}]


def _train_tokenizer(family: str, texts: list[str]) -> PreTrainedTokenizerFast:
    _, eos, _ = FAMILIES[family]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=[eos], show_progress=False)
    tok.train_from_iterator(texts * 2, trainer=trainer)
    # not special: vLLM's detokenizer keeps them (skip_special_tokens drops special ones), as a real checkpoint's
    # reasoning/tool markers are kept
    tok.add_tokens([AddedToken(m, special=False, normalized=False)
                    for m in dict.fromkeys(MARKERS[family]) if m != eos])
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False, eos_token=eos)


def write_model_dir(root: Path, family: str, tokenizer: PreTrainedTokenizerFast) -> Path:
    """``root/<model id>``: the tokenizer (with the server chat template, no response_template) and a tiny
    Qwen2 config.json (no weights: nothing runs the model)."""
    model_id, _, _ = FAMILIES[family]
    path = root / model_id
    path.mkdir(parents=True)
    tokenizer.chat_template = server_chat_template(family)
    tokenizer.save_pretrained(path)
    config = json.loads((path / "tokenizer_config.json").read_text())
    assert "response_template" not in config, config.keys()
    (path / "config.json").write_text(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
        "vocab_size": len(tokenizer), "max_position_embeddings": 65536, "torch_dtype": "float32",
        "eos_token_id": tokenizer.eos_token_id, "tie_word_embeddings": True}))
    return path


# --------------------------------------------------------------------------------------------------------------
# Base outputs and their marked places
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Base:
    """One base output of a family: the output (its end-of-turn token left off), the request's tools and
    chat-template kwargs, and the offsets where a request's number goes (one per part: `parts`)."""

    family: str
    source: str  # "corpus:<case id>" or "generated:<kind>"
    output: str
    tools: list
    kwargs: dict
    places: list[int] = field(default_factory=list)
    parts: list[str] = field(default_factory=list)

    def marked(self, n: int) -> str:
        out, nonce = self.output, NONCE.format(n)
        for at in sorted(self.places, reverse=True):
            out = out[:at] + nonce + out[at:]
        return out


def _tail(text: str, marker: str) -> str | None:
    at = text.rfind(marker)
    return None if at < 0 else text[at + len(marker):]


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _parts(message: dict) -> dict[str, list[str]]:
    """The message's parts: name -> the strings a request's number may be placed in."""
    parts = {}
    for key, name in (("reasoning_content", "reasoning"), ("content", "content")):
        if isinstance(message.get(key), str) and message[key]:
            parts[name] = [message[key]]
    for i, call in enumerate(message.get("tool_calls") or []):
        strings = _strings((call.get("function") or {}).get("arguments"))
        if strings:
            parts[f"call {i}"] = strings
    return parts


class _Marker:
    """Chooses a base output's places with chatparse's one-shot parse (serving-grade template)."""

    def __init__(self, family: str):
        self.compiled = chatparse.compile_template(templates.serving(family))

    def parse(self, output: str, prompt: str, tools):
        return chatparse.parse_response(output, self.compiled, prefix=prompt, tools=tools)

    def places(self, output: str, prompt: str, tools) -> tuple[list[int], list[str]]:
        try:
            base = self.parse(output, prompt, tools)
        except Exception:  # noqa: BLE001 - a base chatparse does not parse gets no places (skipped)
            return [], []
        want = json.dumps(base, sort_keys=True, ensure_ascii=False)
        places, names = [], []
        for name, strings in _parts(base).items():
            words = list(dict.fromkeys(m.group() for s in strings for m in WORD_RE.finditer(s)))
            tries = 0
            found = None
            for word in words:
                for m in re.finditer(r"(?<![A-Za-z0-9_])" + re.escape(word) + r"(?![A-Za-z0-9_])", output):
                    if m.end() in places or tries >= MAX_TRIES:
                        continue
                    tries += 1
                    probe = output[:m.end()] + PROBE + output[m.end():]
                    try:
                        got = self.parse(probe, prompt, tools)
                    except Exception:  # noqa: BLE001
                        continue
                    text = json.dumps(got, sort_keys=True, ensure_ascii=False)
                    if text.count(PROBE) == 1 and text.replace(PROBE, "") == want and any(
                            PROBE in s for s in _parts(got).get(name, ())):
                        found = m.end()
                        break
                if found is not None:
                    break
            if found is not None:
                places.append(found)
                names.append(name)
        if places:  # all places at once: each lands where it did alone
            probe = output
            for at in sorted(places, reverse=True):
                probe = probe[:at] + PROBE + probe[at:]
            try:
                text = json.dumps(self.parse(probe, prompt, tools), sort_keys=True, ensure_ascii=False)
            except Exception:  # noqa: BLE001
                return [], []
            if text.count(PROBE) != len(places) or text.replace(PROBE, "") != want:
                return [], []
        return sorted(places), [n for _, n in sorted(zip(places, names))]


def _strip_eos(output: str, eos: str) -> str:
    output = output.rstrip()
    return output[: -len(eos)] if output.endswith(eos) else output


def family_bases(family: str, *, generated: int = GENERATED, seed: int = 0) -> tuple[list[Base], dict]:
    """(the family's usable base outputs, counts of what was left out and why)."""
    _, eos, gen_marker = FAMILIES[family]
    ct = server_chat_template(family)
    caps = cr.CAPS[family]
    marker = _Marker(family)
    skipped: Counter = Counter()

    def prompt_for(tools, kwargs):
        return render(ct, messages_for(0), tools=tools, add_generation_prompt=True, **kwargs)

    # the generation prompt's end under each choice of kwargs (the request's own text does not reach it)
    choices = [dict(caps.render_kwargs)] + [dict(k) for k in KWARG_CHOICES.get(family, ())] + [{}]
    choice_tails = []
    for kwargs in choices:
        tail = _tail(prompt_for(None, kwargs), gen_marker)
        assert tail is not None, (family, kwargs)
        choice_tails.append((kwargs, tail))
    # the server chat template renders what the family's own does
    plain = render(cr.chat_template(family), messages_for(0), tools=None, add_generation_prompt=True,
                   **caps.render_kwargs)
    assert plain == prompt_for(None, caps.render_kwargs), family

    bases = []
    for case in json.loads((TESTS / "real_outputs" / f"{family}.json").read_text(encoding="utf-8"))["cases"]:
        if case.get("xfail"):
            continue
        case_tail = _tail(case.get("prefix", ""), gen_marker)
        fit = None
        if case_tail is not None:
            fits = [(k, t) for k, t in choice_tails if case_tail.startswith(t)]
            if fits:
                kwargs, tail = max(fits, key=lambda kt: len(kt[1]))
                fit = dict(kwargs)
                if case_tail[len(tail):]:
                    fit[PREFILL] = case_tail[len(tail):]
        if fit is None:
            skipped["corpus: prompt end not reachable"] += 1
            continue
        tools = tools_for(family, case)
        output = _strip_eos(case["output"], eos)
        places, parts = marker.places(output, prompt_for(tools, fit), tools)
        if not places:
            skipped["corpus: no place for a number"] += 1
            continue
        bases.append(Base(family, f"corpus:{case['id']}", output, tools, fit, places, parts))
    rng = random.Random(f"vllm-load-{family}-{seed}")
    default_tools = tools_for(family, {"output": ""})
    for _ in range(generated):
        sample = cr.random_message(rng, caps)
        _, turn = cr.render_turn(family, sample)
        tools = sample.tools or default_tools
        kwargs = dict(caps.render_kwargs)
        output = _strip_eos(turn, eos)
        places, parts = marker.places(output, prompt_for(tools, kwargs), tools)
        if not places:
            skipped["generated: no place for a number"] += 1
            continue
        bases.append(Base(family, f"generated:{sample.kind or 'text'}", output, tools, kwargs, places, parts))
    return bases, dict(skipped)


# --------------------------------------------------------------------------------------------------------------
# The engine and the servers
# --------------------------------------------------------------------------------------------------------------
class LoadEngine(ScriptedEngine):
    """test_vllm_e2e's `ScriptedEngine` with one script per request: the output of the request whose number
    the prompt carries (`scripts`: number -> token ids, the end-of-turn id last)."""

    def __init__(self, vllm_config: VllmConfig, renderer, scripts: dict[int, list[int]], *,
                 swap_outputs: bool = False):
        super().__init__(vllm_config, renderer, [])
        self.scripts = scripts
        self.swap_outputs = swap_outputs
        self.records: dict[int, tuple[list[int], str, list[int]]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self.active = 0
        self.max_active = 0
        self.steps = 0

    async def generate(self, prompt, sampling_params, request_id, **_):
        self.loop = asyncio.get_running_loop()
        prompt_ids = list(prompt["prompt_token_ids"])
        text = prompt.get("prompt") if isinstance(prompt, dict) else None
        found = REQ_RE.search(text if isinstance(text, str) else self.renderer.tokenizer.decode(prompt_ids))
        n = int(found.group(1))
        ids = self.scripts[n ^ 1 if self.swap_outputs else n]
        processor = OutputProcessor(self.renderer.tokenizer, log_stats=False)
        processor.add_request(EngineCoreRequest(
            request_id=request_id, prompt_token_ids=prompt_ids, mm_features=None,
            sampling_params=sampling_params, pooling_params=None, arrival_time=time.time(), lora_request=None,
            cache_salt=None, data_parallel_rank=None, external_req_id=request_id), prompt=None)
        pieces: list[str] = []
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            for k, token in enumerate(ids):
                finish = FinishReason.STOP if k == len(ids) - 1 else None
                out = EngineCoreOutput(request_id=request_id, new_token_ids=[token], finish_reason=finish)
                for request_output in processor.process_outputs([out]).request_outputs:
                    pieces.extend(o.text for o in request_output.outputs)
                    if finish is not None:
                        self.records[n] = (prompt_ids, "".join(pieces), list(ids))
                    yield request_output
                self.steps += 1
                await asyncio.sleep(0)
        finally:
            self.active -= 1


class LoadServer:
    """One family's server: vLLM's chat-completions router over `OpenAIServingChat` with chatparse as
    tool-call and reasoning parser, served by uvicorn on 127.0.0.1 in a thread (as test_vllm_e2e's
    `_Server`, over a `LoadEngine`)."""

    def __init__(self, family: str, model_dir: Path, scripts: dict[int, list[int]], *,
                 swap_outputs: bool = False):
        self.family = family
        model_config = AsyncEngineArgs(model=str(model_dir)).create_model_config()
        vllm_config = VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))
        renderer = renderer_from_config(vllm_config)
        self.engine = LoadEngine(vllm_config, renderer, scripts, swap_outputs=swap_outputs)
        online_renderer = OnlineRenderer(model_config, renderer, request_logger=None, chat_template=None,
                                         chat_template_content_format="auto", enable_auto_tools=True,
                                         tool_parser=plugin.NAME, reasoning_parser=plugin.NAME)
        self.chat = OpenAIServingChat(
            self.engine, OpenAIServingModels(self.engine, [BaseModelPath(name="m", model_path=str(model_dir))]),
            "assistant", online_renderer=online_renderer, request_logger=None, chat_template=None,
            chat_template_content_format="auto", enable_auto_tools=True, tool_parser=plugin.NAME,
            reasoning_parser=plugin.NAME)
        app = FastAPI()
        attach_router(app)
        app.state.openai_serving_chat = self.chat
        app.state.enable_server_load_tracking = False
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", backlog=1024))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name=f"vllm-load-{family}")

    @property
    def resolution(self):
        return plugin._model(self.chat.renderer.tokenizer, None).resolution

    def __enter__(self):
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert self.thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()

    def one_shot(self, body: dict, prompt_ids: list[int], text: str, ids: list[int]):
        """vLLM's non-streaming answer for this output: the server's parser, built as the server builds it,
        its `parse` called as the non-streaming path calls it (run on the server's loop)."""
        chat = self.chat
        request = ChatCompletionRequest.model_validate({**body, "stream": False})
        parser = chat._make_parser(request, chat.renderer.tokenizer, chat._effective_chat_template_kwargs(request))
        parser.set_prompt_token_ids(prompt_ids)
        reasoning, content, calls = parser.parse(text, request, enable_auto_tools=chat.enable_auto_tools,
                                                 model_output_token_ids=ids)
        return {"reasoning": reasoning or "", "content": content or "",
                "tool_calls": [(c.name, c.arguments) for c in calls or []]}


# --------------------------------------------------------------------------------------------------------------
# The load
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Planned:
    n: int
    family: str
    base: Base
    output: str
    body: dict


@dataclass
class LoadReport:
    total: int
    concurrency: int
    families: list[str]
    warmup: int
    model_ids: dict = field(default_factory=dict)
    resolutions: dict = field(default_factory=dict)
    bases: dict = field(default_factory=dict)  # family -> {"corpus": k, "generated": k}
    skipped: dict = field(default_factory=dict)  # family -> {reason: count}
    per_family: dict = field(default_factory=dict)  # family -> requests sent
    per_family_tokens: dict = field(default_factory=dict)  # family -> output tokens streamed
    distinct_outputs: int = 0
    exact: int = 0
    leak_free: int = 0
    mismatches: list = field(default_factory=list)  # the first few, with everything to reproduce them
    mismatch_count: int = 0
    mismatch_sources: dict = field(default_factory=dict)  # base output ("corpus:<case id>", ...) -> count
    leaks: list = field(default_factory=list)
    leak_count: int = 0
    leak_sources: dict = field(default_factory=dict)  # base output -> responses that failed the number check
    errors: list = field(default_factory=list)
    error_count: int = 0
    detokenized_differs: int = 0  # outputs whose detokenized text is not the scripted text (vLLM's side)
    max_in_flight: int = 0  # requests open at the client at once
    engine_max_active: dict = field(default_factory=dict)  # family -> generations in flight at once
    setup_seconds: float = 0.0
    wall_seconds: float = 0.0  # the requests, warm-up included
    warmup_seconds: float = 0.0
    rss_start: int = 0  # after the servers started, before any request
    rss_warm: int = 0  # after the warm-up
    rss_end: int = 0

    @property
    def completed(self) -> int:
        return self.total - self.error_count

    @property
    def all_exact(self) -> bool:
        return self.exact == self.total

    @property
    def no_leak(self) -> bool:
        return self.leak_free == self.total and self.leak_count == 0

    @property
    def requests_per_second(self) -> float:
        return self.total / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def rss_growth(self) -> float:
        """RSS growth after the warm-up, as a fraction (0.01 = 1%)."""
        return self.rss_end / self.rss_warm - 1 if self.rss_warm else float("nan")

    def as_dict(self) -> dict:
        out = asdict(self)
        out.update(completed=self.completed, all_exact=self.all_exact, no_leak=self.no_leak,
                   requests_per_second=self.requests_per_second, rss_growth=self.rss_growth)
        return out

    def summary(self) -> str:
        mib = 1024 * 1024
        return (f"{self.total} requests ({', '.join(f'{f} {c}' for f, c in self.per_family.items())}), "
                f"concurrency {self.concurrency}: {self.wall_seconds:.1f} s, {self.requests_per_second:.1f} req/s; "
                f"exact {self.exact}/{self.total}, leak-free {self.leak_free}/{self.total}, "
                f"errors {self.error_count}; RSS start {self.rss_start / mib:.1f} MiB, after {self.warmup} "
                f"warm-up {self.rss_warm / mib:.1f} MiB, end {self.rss_end / mib:.1f} MiB "
                f"(growth {self.rss_growth * 100:+.2f}%)")


def plan(total: int, families: list[str], bases: dict[str, list[Base]], seed: int = 0) -> list[Planned]:
    """`total` requests, round-robin over `families`; request n takes a base of its family (cycling through a
    seeded shuffle of the pool) marked with n."""
    rng = random.Random(f"vllm-load-plan-{seed}")
    order = {f: rng.sample(range(len(bases[f])), len(bases[f])) for f in families}
    out = []
    for n in range(total):
        family = families[n % len(families)]
        k = n // len(families)
        base = bases[family][order[family][k % len(order[family])]]
        body = {"model": "m", "messages": messages_for(n), "tools": base.tools, "stream": True}
        if base.kwargs:
            body["chat_template_kwargs"] = dict(base.kwargs)
        out.append(Planned(n, family, base, base.marked(n), body))
    return out


def _streamed(chunks) -> dict:
    a = _assembled(chunks)
    return {"reasoning": a["reasoning"], "content": a["content"],
            "tool_calls": [(c["name"], c["arguments"]) for c in a["tool_calls"]],
            "ids_types": [(bool(c["id"]), c["type"]) for c in a["tool_calls"]],
            "finish_reason": a["finish_reason"]}


def _numbers(message: dict) -> list[int]:
    text = message["reasoning"] + "\x00" + message["content"] + "\x00" + "\x00".join(
        n + "\x00" + a for n, a in message["tool_calls"])
    return [int(x) for x in NONCE_RE.findall(text)]


MAX_KEPT = 5  # mismatches / leaks / errors kept in full in the report


async def _run_requests(planned: list[Planned], servers: dict[str, LoadServer], clients: dict,
                        concurrency: int, report: LoadReport) -> None:
    sem = asyncio.Semaphore(concurrency)
    in_flight = 0

    async def one(p: Planned) -> None:
        nonlocal in_flight
        async with sem:
            in_flight += 1
            report.max_in_flight = max(report.max_in_flight, in_flight)
            server = servers[p.family]
            try:
                extra = {"chat_template_kwargs": p.body["chat_template_kwargs"]} \
                    if "chat_template_kwargs" in p.body else None
                stream = await clients[p.family].chat.completions.create(
                    model="m", messages=p.body["messages"], tools=p.body["tools"], stream=True, extra_body=extra)
                chunks = [chunk async for chunk in stream]
            except Exception as exc:  # noqa: BLE001 - counted and kept: a failed request is a failure
                report.error_count += 1
                if len(report.errors) < MAX_KEPT:
                    report.errors.append({"n": p.n, "family": p.family, "error": f"{type(exc).__name__}: {exc}"})
                return
            finally:
                in_flight -= 1
        got = _streamed(chunks)
        prompt_ids, text, ids = server.engine.records.pop(p.n)
        if text != p.output:
            report.detokenized_differs += 1
        want = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(
            _call(server.one_shot, p.body, prompt_ids, text, ids), server.engine.loop))
        report.per_family_tokens[p.family] = report.per_family_tokens.get(p.family, 0) + len(ids)
        finish = "tool_calls" if want["tool_calls"] else "stop"
        same = (got["reasoning"], got["content"], got["tool_calls"]) == (
            want["reasoning"], want["content"], want["tool_calls"]) and got["finish_reason"] == finish and all(
            has_id and kind == "function" for has_id, kind in got["ids_types"])
        if same:
            report.exact += 1
        else:
            report.mismatch_count += 1
            report.mismatch_sources[p.base.source] = report.mismatch_sources.get(p.base.source, 0) + 1
            if len(report.mismatches) < MAX_KEPT:
                report.mismatches.append({"n": p.n, "family": p.family, "source": p.base.source,
                                          "body": p.body, "output": p.output, "detokenized": text,
                                          "prompt_ids": prompt_ids, "output_ids": ids,
                                          "streamed": got, "one_shot": want, "finish_expected": finish})
        numbers = _numbers(got)
        if numbers == [p.n] * len(p.base.places) and _numbers(want) == numbers:
            report.leak_free += 1
        else:
            report.leak_sources[p.base.source] = report.leak_sources.get(p.base.source, 0) + 1
            foreign = sorted(set(numbers) - {p.n})
            if foreign:
                report.leak_count += 1
            if len(report.leaks) < MAX_KEPT:
                report.leaks.append({"n": p.n, "family": p.family, "source": p.base.source,
                                     "numbers_streamed": numbers, "numbers_one_shot": _numbers(want),
                                     "places": len(p.base.places), "foreign": foreign})

    await asyncio.gather(*(one(p) for p in planned))


async def _call(fn, *args):
    return fn(*args)


def setup_families(root: Path, families: list[str], *, generated: int = GENERATED, seed: int = 0):
    """(model dirs, tokenizers, bases, skipped) for `families` under `root`."""
    dirs, tokenizers, bases, skipped = {}, {}, {}, {}
    for family in families:
        bases[family], skipped[family] = family_bases(family, generated=generated, seed=seed)
        assert bases[family], f"{family}: no usable base output"
        texts = [t for b in bases[family] for t in (b.output,)]
        texts += [json.loads((TESTS / "real_outputs" / f"{family}.json").read_text(encoding="utf-8"))["about"]]
        texts += [render(server_chat_template(family), messages_for(0), tools=b.tools, add_generation_prompt=True,
                         **b.kwargs) for b in bases[family][:8]]
        tokenizers[family] = _train_tokenizer(family, texts)
        dirs[family] = write_model_dir(root, family, tokenizers[family])
    return dirs, tokenizers, bases, skipped


def run_load(total: int, concurrency: int, families=DEFAULT_FAMILIES, *, warmup: int = 200, seed: int = 0,
             generated: int = GENERATED, workdir: str | os.PathLike | None = None,
             swap_outputs: bool = False) -> LoadReport:
    """Send `total` streaming chat requests (with tools) spread over `families`, at most `concurrency` at once,
    through one vLLM OpenAI server per family (see the module docstring), and check every response.

    `swap_outputs` is fault injection, to show that the leak check sees a leak: each engine serves request
    ``n`` the output of request ``n ^ 1`` (one family, an even `total`), so every response carries another
    request's number."""
    families = list(families)
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        raise ValueError(f"no load setup for {unknown}; known: {sorted(FAMILIES)}")
    if swap_outputs and (len(families) != 1 or total % 2):
        raise ValueError("swap_outputs takes one family and an even total (request n ^ 1 is on the same server)")
    report = LoadReport(total, concurrency, families, min(warmup, total))
    saved_env = {k: os.environ.get(k) for k in ("HF_HUB_OFFLINE", "CHATPARSE_RESPONSE_TEMPLATE")}
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.pop("CHATPARSE_RESPONSE_TEMPLATE", None)  # the model id must decide
    quiet = [logging.getLogger(name) for name in ("vllm", "uvicorn", "uvicorn.error", "httpx")]
    levels = [lg.level for lg in quiet]
    for lg in quiet:
        lg.setLevel(logging.WARNING)
    plugin.register()
    t0 = time.perf_counter()
    tmp = tempfile.TemporaryDirectory(prefix="vllm-load-", dir=workdir)
    try:
        dirs, tokenizers, bases, report.skipped = setup_families(Path(tmp.name), families, generated=generated,
                                                                 seed=seed)
        report.model_ids = {f: FAMILIES[f][0] for f in families}
        report.bases = {f: dict(Counter(b.source.split(":")[0] for b in bases[f])) for f in families}
        planned = plan(total, families, bases, seed)
        report.per_family = dict(Counter(p.family for p in planned))
        report.distinct_outputs = len({p.output for p in planned})
        scripts: dict[str, dict[int, list[int]]] = {f: {} for f in families}
        for p in planned:
            tok = tokenizers[p.family]
            ids = tok.encode(p.output, add_special_tokens=False)
            assert tok.decode(ids) == p.output, (p.family, p.base.source)
            scripts[p.family][p.n] = ids + [tok.eos_token_id]
        servers = {f: LoadServer(f, dirs[f], scripts[f], swap_outputs=swap_outputs) for f in families}
        for f, server in servers.items():
            res = server.resolution
            report.resolutions[f] = {"source": res.source, "family": res.family, "reason": res.reason}
        with _started(list(servers.values())):
            report.setup_seconds = time.perf_counter() - t0
            gc.collect()
            report.rss_start = rss_bytes()
            warm, rest = planned[:report.warmup], planned[report.warmup:]

            async def main():
                clients = {f: openai.AsyncOpenAI(base_url=s.url, api_key="x", max_retries=0, timeout=300)
                           for f, s in servers.items()}
                try:
                    start = time.perf_counter()
                    await _run_requests(warm, servers, clients, concurrency, report)
                    report.warmup_seconds = time.perf_counter() - start
                    gc.collect()
                    report.rss_warm = rss_bytes()
                    await _run_requests(rest, servers, clients, concurrency, report)
                    report.wall_seconds = time.perf_counter() - start
                    gc.collect()
                    report.rss_end = rss_bytes()
                finally:
                    for c in clients.values():
                        await c.close()

            asyncio.run(main())
            report.engine_max_active = {f: s.engine.max_active for f, s in servers.items()}
            if not report.error_count:  # every record was taken by its check
                assert not any(s.engine.records for s in servers.values())
    finally:
        tmp.cleanup()
        for lg, level in zip(quiet, levels):
            lg.setLevel(level)
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return report


class _started:
    """Enter every server (stopping those started if one fails), exit them all."""

    def __init__(self, servers: list[LoadServer]):
        self.servers = servers
        self.entered: list[LoadServer] = []

    def __enter__(self):
        try:
            for s in self.servers:
                s.__enter__()
                self.entered.append(s)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for s in reversed(self.entered):
            s.__exit__(*exc)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="the vLLM plugin under load (see the module docstring)")
    ap.add_argument("--total", type=int, default=200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--families", nargs="+", default=list(DEFAULT_FAMILIES))
    ap.add_argument("--warmup", type=int, default=200)
    args = ap.parse_args()
    r = run_load(args.total, args.concurrency, args.families, warmup=args.warmup)
    print(r.summary())
    print(json.dumps({k: v for k, v in r.as_dict().items() if k in ("mismatches", "leaks", "errors")},
                     indent=1, ensure_ascii=False)[:20000])
