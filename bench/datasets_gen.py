"""Synthetic generations for the dataset paths (tests/test_datasets.py, bench/bench_datasets.py).

`generations(name, n, seed, length)` returns ``(prefixes, texts)``: `n` chat prompts and model outputs written in the
format of the bundled template `name` (one of `FAMILIES`), mixing reasoning, content and tool calls, with
about one row in eight malformed on purpose: JSON arguments that do not parse, outputs cut at a random
character, delimiters without their partner, stray delimiters, empty outputs, non-ASCII text. What a row
parses to is whatever the parser says; the generator only makes the rows realistic and varied.
Deterministic for a given seed.
"""

from __future__ import annotations

import json
import random

WORDS = ("the weather is mild today so we can go outside and check the map for a route to the museum "
         "I should call the tool first then answer the user with a short summary of what it returns "
         "Paris Tokyo Zürich São Paulo 東京 naïve café — “quoted” 42 3.14 {braces} [brackets] <angle>").split()
TOOLS = ("get_weather", "search", "read_file", "calculator", "book_flight", "lookup_user")
KEYS = ("city", "query", "path", "expression", "date", "user_id", "unit", "limit")


def _sentence(rng: random.Random, lo: int = 3, hi: int = 40) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(lo, hi))]
    text = " ".join(words)
    if rng.random() < 0.2:
        text = text.replace(" ", "\n", rng.randint(1, 3))
    return text


def _args(rng: random.Random) -> dict:
    out = {}
    for k in rng.sample(KEYS, rng.randint(0, 3)):
        r = rng.random()
        out[k] = (rng.randint(-5, 500) if r < 0.25 else round(rng.uniform(-1, 1), 3) if r < 0.35
                  else [rng.choice(WORDS) for _ in range(2)] if r < 0.45 else _sentence(rng, 1, 4))
    return out


def _bad_json(rng: random.Random, args: dict) -> str:
    text = json.dumps(args, ensure_ascii=False)
    kind = rng.randrange(3)
    if kind == 0:
        return text.replace('"', "", 2) if '"' in text else "{oops: 1}"
    if kind == 1:
        return text[: max(1, len(text) // 2)]
    return text + "}"


def _call_json(rng: random.Random, bad: bool) -> tuple[str, str]:
    name, args = rng.choice(TOOLS), _args(rng)
    body = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    if bad:
        body = _bad_json(rng, {"name": name, "arguments": args})
    return name, body


# -- one writer per family: (prefix, output) from the parts --------------------------------------------------
def _qwen_like(rng, think_open: bool, reasoning, content, calls, bad, *, think: bool = True, coder=False):
    prefix = f"<|im_start|>user\n{_sentence(rng, 2, 8)}<|im_end|>\n<|im_start|>assistant\n"
    out = ""
    if think and reasoning is not None:
        if think_open:
            prefix += "<think>\n"
            out += f"{reasoning}\n</think>\n\n"
        else:
            out += f"<think>\n{reasoning}\n</think>\n\n"
    if content is not None:
        out += content + ("\n\n" if calls else "")
    for i in range(calls):
        if coder:
            name, args = rng.choice(TOOLS), _args(rng)
            params = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n"
                             for k, v in args.items())
            if bad and i == 0:
                params = params.replace("</parameter>", "", 1) or "<parameter=x"
            out += f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>\n"
        else:
            out += f"<tool_call>\n{_call_json(rng, bad and i == 0)[1]}\n</tool_call>\n"
    return prefix, out + "<|im_end|>"


def _qwen3(rng, *parts):
    return _qwen_like(rng, rng.random() < 0.3, *parts)


def _hermes(rng, *parts):
    return _qwen_like(rng, False, *parts, think=False)


def _qwen3_coder(rng, *parts):
    return _qwen_like(rng, False, *parts, coder=True)


def _mistral_v11(rng, reasoning, content, calls, bad):
    prefix = f"[SYSTEM_PROMPT]You are helpful.[/SYSTEM_PROMPT][INST]{_sentence(rng, 2, 8)}[/INST]"
    out = f"[THINK]{reasoning}[/THINK]" if reasoning is not None else ""
    out += content or ""
    for i in range(calls):
        name, args = rng.choice(TOOLS), _args(rng)
        body = _bad_json(rng, args) if bad and i == 0 else json.dumps(args, ensure_ascii=False)
        out += f"[TOOL_CALLS]{name}[ARGS]{body}"
    return prefix, out + "</s>"


def _glm45(rng, reasoning, content, calls, bad):
    prefix = f"[gMASK]<sop><|user|>\n{_sentence(rng, 2, 8)}<|assistant|>"
    out = f"\n<think>{reasoning}</think>\n" if reasoning is not None else ""
    out += content or ""
    for i in range(calls):
        name, args = rng.choice(TOOLS), _args(rng)
        kv = "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{v if isinstance(v, str) else json.dumps(v)}"
                     f"</arg_value>\n" for k, v in args.items())
        if bad and i == 0:
            kv = kv.replace("</arg_value>", "", 1) + "<arg_value>"
        out += f"<tool_call>{name}\n{kv}</tool_call>"
    return prefix, out


def _gpt_oss(rng, reasoning, content, calls, bad):
    prefix = f"<|start|>user<|message|>{_sentence(rng, 2, 8)}<|end|><|start|>assistant"
    out = f"<|channel|>analysis<|message|>{reasoning}<|end|><|start|>assistant" if reasoning is not None else ""
    for i in range(calls):
        name, args = rng.choice(TOOLS), _args(rng)
        body = _bad_json(rng, args) if bad and i == 0 else json.dumps(args, ensure_ascii=False)
        out += f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>{body}<|call|>"
        if i + 1 < calls or content is not None:
            out += "<|start|>assistant"
    if content is not None:
        out += f"<|channel|>final<|message|>{content}<|return|>"
    return prefix, out


def _deepseek_r1(rng, reasoning, content, calls, bad):
    prefix = f"<｜begin▁of▁sentence｜>You are helpful.<｜User｜>{_sentence(rng, 2, 8)}<｜Assistant｜>"
    out = ""
    if reasoning is not None:
        if rng.random() < 0.5:
            prefix += "<think>\n"
            out += f"{reasoning}</think>"
        else:
            out += f"<think>{reasoning}</think>"
    out += content or ""
    if calls:
        out += "<｜tool▁calls▁begin｜>"
        for i in range(calls):
            name, args = rng.choice(TOOLS), _args(rng)
            body = _bad_json(rng, args) if bad and i == 0 else json.dumps(args, ensure_ascii=False)
            out += f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{body}\n```<｜tool▁call▁end｜>"
        out += "<｜tool▁calls▁end｜>"
    return prefix, out + "<｜end▁of▁sentence｜>"


WRITERS = {"qwen3": _qwen3, "hermes": _hermes, "qwen3_coder": _qwen3_coder, "mistral_v11": _mistral_v11,
           "glm45": _glm45, "gpt_oss": _gpt_oss, "deepseek_r1": _deepseek_r1}
FAMILIES = tuple(WRITERS)
# stray delimiters a malformed row may carry, per family
STRAYS = {
    "qwen3": ("<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"),
    "hermes": ("<tool_call>", "</tool_call>", "<|im_end|>"),
    "qwen3_coder": ("<tool_call>", "<function=x>", "</function>", "<parameter=", "</tool_call>"),
    "mistral_v11": ("[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]", "</s>"),
    "glm45": ("<think>", "</think>", "<tool_call>", "<arg_key>", "</arg_value>", "</tool_call>"),
    "gpt_oss": ("<|channel|>", "<|message|>", "<|end|>", "<|call|>", "<|start|>assistant"),
    "deepseek_r1": ("</think>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "```json\n", "<｜end▁of▁sentence｜>"),
}


# words of reasoning and of content: short (the tests' rows, ~450 bytes) or long (~6 KB, closer to the
# reasoning traces of RL rollouts and distillation sets)
LENGTHS = {"short": ((3, 40), (1, 60)), "long": ((100, 1500), (20, 400))}


def generation(name: str, rng: random.Random, length: str = "short") -> tuple[str, str]:
    """One (prefix, output) pair in the format of the bundled template `name`."""
    writer = WRITERS[name]
    (r_lo, r_hi), (c_lo, c_hi) = LENGTHS[length]
    r = rng.random()
    reasoning = _sentence(rng, r_lo, r_hi) if rng.random() < 0.6 else None
    content = _sentence(rng, c_lo, c_hi) if rng.random() < 0.7 else None
    calls = rng.choice((0, 0, 1, 1, 2, 3))
    bad = r < 0.06 and calls > 0
    prefix, out = writer(rng, reasoning, content, calls, bad)
    if 0.06 <= r < 0.09:  # cut anywhere
        out = out[: rng.randint(0, len(out))]
    elif 0.09 <= r < 0.11:  # a stray delimiter somewhere
        i = rng.randint(0, len(out))
        out = out[:i] + rng.choice(STRAYS[name]) + out[i:]
    elif 0.11 <= r < 0.12:
        out = rng.choice(("", " ", "\n\n", "\x00\ud7ff", STRAYS[name][0] * 3))
    elif 0.12 <= r < 0.125:  # an output that repeats the prompt's tail
        out = prefix[-20:] + out
    return prefix, out


def generations(name: str, n: int, seed: int = 0, length: str = "short") -> tuple[list[str], list[str]]:
    """`n` (prefix, output) rows for the bundled template `name`, as two lists (`length`: see `LENGTHS`)."""
    rng = random.Random(f"{name}:{seed}" + ("" if length == "short" else f":{length}"))
    prefixes, texts = [], []
    for _ in range(n):
        p, t = generation(name, rng, length)
        prefixes.append(p)
        texts.append(t)
    return prefixes, texts
