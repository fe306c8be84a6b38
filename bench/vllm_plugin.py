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
  alone, fed the same deltas, versus building the same content delta, vLLM's way and the plugin's);
* `is_reasoning_end` on a 32k-token prompt, `is_reasoning_end_streaming` and `count_reasoning_tokens` per call
  while the model reasons, at the same lengths.

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
    """About `n` characters and 40,000 more: a short reasoning, content with a tool call, then one long content
    answer: the deltas timed after `n` are the same kind of work (content prose) at every length, in a region
    as long as the output (vLLM's cost per delta grows with it)."""
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    return prose(rng, 500) + "\n</think>\n\n" + prose(rng, 500) + call + prose(rng, n + 40_000)


def reasoning_text(n: int, rng: random.Random) -> str:
    """`n` characters of reasoning, never closed: what reasoning-end detection runs over while a model thinks."""
    return prose(rng, n)


def tokenizer() -> PreTrainedTokenizerFast:
    rng = random.Random(0)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_start|>",
                                             "<|im_end|>"], show_progress=False)
    tok.train_from_iterator([output_text(4000, rng)[:8000] for _ in range(50)] + [PROMPT], trainer=tr)
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


def build_cost(count: int = 2000) -> tuple[float, float]:
    """Median µs of building one content `DeltaMessage`: vLLM's way (`_DeltaBuilder.build`, validated) and the
    plugin's (`vllm_delta.content_delta`, the same object built without validation), timed alternately."""
    from chatparse.integrations.vllm_delta import content_delta

    theirs, ours = [], []
    clock = time.perf_counter_ns
    for k in range(count):
        b = rt._DeltaBuilder()
        b.content.append("word ")
        t0 = clock()
        b.build()
        t1 = clock()
        content_delta("word ")
        theirs.append(t1 - t0)
        ours.append(clock() - t1)
    return statistics.median(theirs) / 1000, statistics.median(ours) / 1000


def parse_only(tok, template: dict, ds, prompt_ids, start: int, count: int) -> float:
    """Median µs per delta of the plugin's parser alone (a `TokenParser` in the serving dialect, as the plugin
    makes it, fed the same ids): the parsing share of `parse_delta`."""
    compiled, binding = plugin._binding(tok, rt._serving_template(tok, plugin.serving_template(template)))
    parser = binding.parser(prefix=rt._decode(tok, prompt_ids), dialect="vllm")
    for k in range(0, start, 100):
        parser.feed_tokens([i for _, ids in ds[k:min(k + 100, start)] for i in ids])
    times = []
    clock = time.perf_counter_ns
    for _, ids in ds[start:start + count]:
        one = ids[0] if len(ids) == 1 else ids
        t0 = clock()
        parser.feed_tokens(one)
        times.append(clock() - t0)
    return statistics.median(times) / 1000


def reasoning_end_streaming(name: str, tok, template: dict, ids: list[int], start: int, calls: int) -> float:
    """Median µs of `is_reasoning_end_streaming(all ids so far, new id)` for the calls after `start` ids, as
    vLLM's structured-output manager makes them once per generated token while the model reasons (the
    earlier calls made untimed, 100 ids at a time, on the plugin: its parser continues over them)."""
    if name == plugin.NAME:
        r = plugin.ChatparseReasoningParser(tok, response_template=template)
        for k in range(100, start, 100):
            r.is_reasoning_end_streaming(ids[:k], ids[k - 100:k])
    else:
        r = rt.ResponseTemplateReasoningParser(tok, response_template=plugin.serving_template(template))
    times = []
    clock = time.perf_counter_ns
    for k in range(start, start + calls):
        so_far, new = ids[:k + 1], ids[k:k + 1]  # (the caller's lists, not timed)
        t0 = clock()
        ended = r.is_reasoning_end_streaming(so_far, new)
        times.append(clock() - t0)
        assert not ended
    return statistics.median(times) / 1000


def count_per_call(name: str, tok, template: dict, prompt_ids, gen: list[int], start: int, calls: int) -> float:
    """Median µs of `count_reasoning_tokens(generated ids so far)` for the calls after `start` ids, as vLLM's
    chat serving makes them once per delta with continuous usage stats (earlier calls untimed, 100 ids at a
    time); the counts of both are asserted equal by the caller's loop in `main`."""
    p = make_parser(name, tok, plugin.serving_template(template) if name == "hf" else template)
    p.set_prompt_token_ids(prompt_ids)
    for k in range(100, start, 100):
        p.count_reasoning_tokens(tuple(gen[:k]))
    times = []
    clock = time.perf_counter_ns
    counts = []
    for k in range(start, start + calls):
        ids = tuple(gen[:k + 1])  # (the caller's tuple, not timed)
        t0 = clock()
        counts.append(p.count_reasoning_tokens(ids))
        times.append(clock() - t0)
    return statistics.median(times) / 1000, counts


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
        ids = tok.encode(output_text(n, rng), add_special_tokens=False)
        ds = deltas(tok, ids)
        shown = 0
        start = 0
        while start < len(ds) and shown < n:
            shown += len(ds[start][0])
            start += 1
        chars = sum(len(t) for t, _ in ds[start:start + count]) / count
        theirs = per_delta("hf", tok, served, ds, prompt_ids, start, count)
        ours = per_delta(plugin.NAME, tok, template, ds, prompt_ids, start, count)
        parse = parse_only(tok, template, ds, prompt_ids, start, count)
        rows.append((n, chars, theirs, ours, parse))
    build = build_cost()

    # reasoning: the end check on a long prompt, the streaming check and the count per call
    long_prompt = tok.encode(PROMPT + reasoning_text(140_000, rng), add_special_tokens=False)[:32_768]
    ire = {}
    for name in ("hf", plugin.NAME):
        r = (rt.ResponseTemplateReasoningParser(tok, response_template=served) if name == "hf"
             else plugin.ChatparseReasoningParser(tok, response_template=template))
        answers = set()
        t0 = time.perf_counter()
        for _ in range(3):
            answers.add(r.is_reasoning_end(long_prompt))
        ire[name] = (time.perf_counter() - t0) / 3
        assert answers == {False}
    thinking = prompt_ids + tok.encode(reasoning_text(220_000, rng), add_special_tokens=False)
    gen = tok.encode(output_text(220_000, rng), add_special_tokens=False)
    calls_at = [(n, len(tok.encode(reasoning_text(n, random.Random(2)), add_special_tokens=False)))
                for n in lengths]
    stream_rows, count_rows = [], []
    for n, k in calls_at:
        few = 5 if n >= 20_000 else 50  # vLLM re-parses everything on each call
        theirs = reasoning_end_streaming("hf", tok, template, thinking, len(prompt_ids) + k, few)
        ours = reasoning_end_streaming(plugin.NAME, tok, template, thinking, len(prompt_ids) + k, 500)
        stream_rows.append((n, theirs, ours))
        theirs_c, vc = count_per_call("hf", tok, template, prompt_ids, gen, k, few)
        ours_c, oc = count_per_call(plugin.NAME, tok, template, prompt_ids, gen, k, 500)
        assert vc == oc[:len(vc)], (vc, oc[:len(vc)])
        count_rows.append((n, theirs_c, ours_c))

    lines = ["# vLLM's response-template parser vs chatparse's plugin, per delta",
             "",
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, `python -m bench.vllm_plugin"
             f"{' --quick' if args.quick else ''}`, {platform.processor() or platform.machine()}, "
             f"CPython {platform.python_version()}, vllm {plugin.vllm.__version__}; qwen3 template, one token "
             f"per delta, byte-level BPE of {tok.vocab_size} tokens trained here; median of {count} deltas "
             "after the given length, in content prose (a short reasoning, content with a tool call, then one long "
             "answer).",
             "",
             "| generated characters | chars per delta | vLLM `hf` µs/delta | chatparse µs/delta | speed-up "
             "| chatparse's parser alone µs/delta |",
             "|---|---|---|---|---|---|"]
    for n, chars, theirs, ours, parse in rows:
        lines.append(f"| {n:,} | {chars:.1f} | {theirs:.2f} | {ours:.2f} | {theirs / ours:.1f}x | {parse:.2f} |")
    lines += ["",
              f"Where the plugin's cost goes (at {rows[-1][0]:,} characters): the parser "
              f"{rows[-1][4]:.2f} µs, building the `DeltaMessage` {build[1]:.2f} µs (one content string, "
              f"`vllm_delta.content_delta`, without validation; vLLM's `_DeltaBuilder.build` of the same "
              f"takes {build[0]:.2f} µs), and the rest, "
              f"{max(0.0, rows[-1][3] - rows[-1][4] - build[1]):.2f} µs, vLLM's request plumbing around it "
              "(`parse_delta`'s own steps).",
              f"chatparse's cost at {rows[-1][0]:,} characters is {rows[-1][3] / rows[0][3]:.2f}x its cost at "
              f"{rows[0][0]:,}.",
              "",
              "## Reasoning",
              "",
              f"`is_reasoning_end` on a {len(long_prompt):,}-token prompt ending inside the reasoning (mean of 3): "
              f"vLLM {ire['hf'] * 1000:.1f} ms, chatparse {ire[plugin.NAME] * 1000:.1f} ms "
              f"({ire['hf'] / ire[plugin.NAME]:.1f}x).",
              "",
              "Per call, while the model reasons (qwen3's closer is a pattern, so vLLM's "
              "`is_reasoning_end_streaming` re-parses prompt and output on every call), and "
              "`count_reasoning_tokens` per call (continuous usage stats; median µs; vLLM timed on 5 calls "
              "from 20k on, 50 before, chatparse on 500):",
              "",
              "| generated characters | vLLM end check µs/call | chatparse µs/call | speed-up | vLLM count µs/call "
              "| chatparse µs/call | speed-up |",
              "|---|---|---|---|---|---|---|"]
    for (n, t1, o1), (_, t2, o2) in zip(stream_rows, count_rows):
        lines.append(f"| {n:,} | {t1:,.1f} | {o1:.1f} | {t1 / o1:,.0f}x | {t2:,.1f} | {o2:.1f} | {t2 / o2:,.0f}x |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
