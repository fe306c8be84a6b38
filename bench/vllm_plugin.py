"""vLLM's response-template parser against chatparse's plugin, per delta, in one process.

Run with the Python of the vLLM venv (vllm==0.33.0 pins transformers<5.21, so it lives apart; `.ci/run` makes
it at ~/.cache/chatparse/venv-vllm):

    ~/.cache/chatparse/venv-vllm/bin/python -m bench.vllm_plugin [--quick]

What it measures, on a qwen3-style output (reasoning, content, tool calls, prose) tokenized by a byte-level BPE
trained here, fed one token per delta to `parse_delta` of vLLM's `ResponseTemplateParser` (``hf``) and of
`CompiledResponseTemplateParser` (``chatparse``), both composed by vLLM's own parser manager:

* the cost of the next 2,000 deltas once 2k, 20k and 200k characters have been generated (median of the
  per-delta times, after the earlier deltas were fed untimed, 100 tokens per delta), and the ratio;
* how that splits between parsing and building the `DeltaMessage` vLLM must return (the parser's stream
  alone, fed the same deltas, versus `_DeltaBuilder.build` on the same content);
* `is_reasoning_end` on a 32k-token prompt (the plugin still uses vLLM's own, see README).

Prints a Markdown table and writes it to bench/results/VLLM_PLUGIN.md.
"""

from __future__ import annotations

import argparse
import pathlib
import platform
import random
import statistics
import time

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers.decoders import DecodeStream
from transformers import PreTrainedTokenizerFast
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser import response_template as rt
from vllm.parser.parser_manager import ParserManager

from chatparse import templates
from chatparse.integrations import vllm as plugin

OUT = pathlib.Path(__file__).resolve().parent / "results" / "VLLM_PLUGIN.md"
PROMPT = "<|im_start|>user\nWhat is the weather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n"
WORDS = ["the", "weather", "in", "Paris", "is", "sunny", "today", "and", "we", "should", "check", "tool",
         "results", "before", "answering", "carefully", "because", "users", "care", "about", "details"]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]


def prose(rng: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        w = rng.choice(WORDS) + rng.choice([" ", " ", " ", ", ", ".\n"])
        out.append(w)
        size += len(w)
    return "".join(out)[:n]


def output_text(n: int, rng: random.Random) -> str:
    """About `n` characters: reasoning, then content, then a tool call, then more content."""
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    third = max(1, n // 3)
    return prose(rng, third) + "\n</think>\n\n" + prose(rng, third) + call + prose(rng, n - 2 * third)


def tokenizer() -> PreTrainedTokenizerFast:
    rng = random.Random(0)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>",
                                             "<|im_end|>"], show_progress=False)
    tok.train_from_iterator([output_text(4000, rng) for _ in range(50)] + [PROMPT], trainer=tr)
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


def make_parser(name: str, tok, template: dict):
    if name == plugin.NAME:
        plugin.register()
    cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True)
    return cls(tok, TOOLS, response_template=template)


def deltas(tok, ids: list[int]) -> list[tuple[str, list[int]]]:
    """One token per delta, the text as vLLM's detokenizer hands it out: `tokenizers`' incremental
    `DecodeStream` (what vLLM's fast detokenizer steps), which holds a character until its bytes are
    complete."""
    stream = DecodeStream(skip_special_tokens=False)
    out = [(stream.step(tok._tokenizer, i) or "", [i]) for i in ids]
    assert "".join(t for t, _ in out) == rt._decode(tok, ids)
    return out


def per_delta(name: str, tok, template: dict, ds, prompt_ids, start: int, count: int) -> float:
    """Median µs of `parse_delta` over deltas [start, start + count), the earlier ones fed untimed."""
    p = make_parser(name, tok, template)
    req = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=TOOLS)
    # the earlier deltas untimed, 100 at a time: vLLM's cost per delta grows with the output, so one token at
    # a time up to 200k characters would take minutes (the parsers end in the same state either way)
    for k in range(0, start, 100):
        part = ds[k:min(k + 100, start)]
        p.parse_delta("".join(t for t, _ in part), [i for _, ids in part for i in ids], req,
                      prompt_token_ids=prompt_ids, finished=False)
    times = []
    clock = time.perf_counter_ns
    for text, ids in ds[start:start + count]:
        t0 = clock()
        p.parse_delta(text, ids, req, prompt_token_ids=prompt_ids, finished=False)
        times.append(clock() - t0)
    return statistics.median(times) / 1000


def build_cost(count: int = 2000) -> float:
    """Median µs of building one content `DeltaMessage` (what every non-empty delta costs either way)."""
    times = []
    clock = time.perf_counter_ns
    for k in range(count):
        b = rt._DeltaBuilder()
        b.content.append("word ")
        t0 = clock()
        b.build()
        times.append(clock() - t0)
    return statistics.median(times) / 1000


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2k and 20k only, fewer deltas")
    args = ap.parse_args(argv)
    tok = tokenizer()
    template = templates.get("qwen3")
    served = plugin.serving_template(template)
    prompt_ids = tok.encode(PROMPT, add_special_tokens=False)
    lengths = [2_000, 20_000] if args.quick else [2_000, 20_000, 200_000]
    count = 500 if args.quick else 2_000
    rng = random.Random(1)
    rows = []
    for n in lengths:
        ids = tok.encode(output_text(n + 40_000, rng), add_special_tokens=False)
        ds = deltas(tok, ids)
        shown = 0
        start = 0
        while start < len(ds) and shown < n:
            shown += len(ds[start][0])
            start += 1
        chars = sum(len(t) for t, _ in ds[start:start + count]) / count
        theirs = per_delta("hf", tok, served, ds, prompt_ids, start, count)
        ours = per_delta(plugin.NAME, tok, template, ds, prompt_ids, start, count)
        rows.append((n, chars, theirs, ours))
    build = build_cost()
    long_prompt = tok.encode(PROMPT + output_text(130_000, rng)[:-200], add_special_tokens=False)[:32_768]
    p = make_parser("hf", tok, served)
    t0 = time.perf_counter()
    p.is_reasoning_end(long_prompt)
    ire = time.perf_counter() - t0

    lines = [f"# vLLM's response-template parser vs chatparse's plugin, per delta",
             "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `python -m bench.vllm_plugin"
             f"{' --quick' if args.quick else ''}`, {platform.processor() or platform.machine()}, "
             f"CPython {platform.python_version()}, vllm {plugin.vllm.__version__}; qwen3 template, one token "
             f"per delta, byte-level BPE of {tok.vocab_size} tokens trained here; median of {count} deltas "
             "after the given length.",
             "",
             "| generated characters | chars per delta | vLLM `hf` µs/delta | chatparse µs/delta | speed-up |",
             "|---|---|---|---|---|"]
    for n, chars, theirs, ours in rows:
        lines.append(f"| {n:,} | {chars:.1f} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.1f}x |")
    lines += ["",
              f"Building the `DeltaMessage` (vLLM's `_DeltaBuilder.build`, one content string): {build:.2f} µs "
              "of each non-empty delta, in both.",
              f"chatparse's cost at {rows[-1][0]:,} characters is {rows[-1][3] / rows[0][3]:.2f}x its cost at "
              f"{rows[0][0]:,}.",
              f"`is_reasoning_end` on a {len(long_prompt):,}-token prompt (vLLM's, which the plugin still uses): "
              f"{ire * 1000:.1f} ms.",
              ""]
    text = "\n".join(lines)
    print(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
