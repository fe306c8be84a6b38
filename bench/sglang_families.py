"""chatparse's SGLang plugin against SGLang 0.5.23's own detectors, on the real-output corpus.

Run with the Python of the SGLang venv (`.ci/run` makes it at ~/.cache/chatparse/venv-sglang):

    ~/.cache/chatparse/venv-sglang/bin/python -m bench.sglang_families [--family NAME ...]

Every case of tests/real_outputs/<family>.json is parsed as SGLang's OpenAI chat server parses an output
(`serving_chat`): a `ReasoningParser` first (its normal text goes on to the tool parser), then a
`FunctionCallParser` with the request's tools; one-shot (`parse_non_stream` both, as the non-streaming path
does: the tool parser only where `has_tool_call`) and streamed (`parse_stream_chunk` per delta, then
`parse_stream_end`, fixed 3-character deltas). Three sides:

* ``plugin``: ``chatparse`` for both flags, a tokenizer whose config holds NO ``response_template`` (the plugin
  resolves the family's serving-grade template from the model id);
* ``template``: SGLang's ``response_template`` detectors with the family's bundled base-format template in the
  tokenizer config, and ``plugin_same``: the plugin with that same template in the config (the exact
  comparison: same template, SGLang's interpreter against chatparse's);
* ``handwritten``: SGLang's own detectors for the family (`HANDWRITTEN`).

`result` gives (reasoning, normal text, calls) with calls as (name, parsed arguments); `same` compares two
(texts stripped). Prints a Markdown summary of agreements.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import pathlib
from typing import Any

from sglang.srt.entrypoints.openai.protocol import Tool
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser

import chatparse
from chatparse import templates
from chatparse.integrations import sglang as plugin
from chatparse.integrations.vllm_template import serving_template, vllm_view

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "real_outputs"
DELTA = 3

# family -> (SGLang --tool-call-parser, --reasoning-parser, a published model id of the family). Names are those
# of FunctionCallParser.ToolCallParserEnum / ReasoningParser.DetectorMap in sglang 0.5.23.
HANDWRITTEN: dict[str, tuple[str | None, str | None, str]] = {
    "qwen3": ("qwen25", "qwen3", "Qwen/Qwen3-8B"),
    "hermes": ("hermes", None, "NousResearch/Hermes-3-Llama-3.1-8B"),
    "qwen3_coder": ("qwen3_coder", "qwen3", "Qwen/Qwen3-Coder-30B-A3B-Instruct"),
    "smollm3": ("hermes", "qwen3", "HuggingFaceTB/SmolLM3-3B"),
    "deepseek_v3": ("deepseekv3", None, "deepseek-ai/DeepSeek-V3-0324"),
    "deepseek_r1": ("deepseekv3", "deepseek-r1", "deepseek-ai/DeepSeek-R1-0528"),
    "deepseek_v31": ("deepseekv31", "deepseek-v3", "deepseek-ai/DeepSeek-V3.1"),
    "deepseek_v32": ("deepseekv32", "deepseek-v3", "deepseek-ai/DeepSeek-V3.2"),
    "kimi_k2": ("kimi_k2", "kimi_k2", "moonshotai/Kimi-K2-Thinking"),
    "kimi_vl_think": (None, "kimi", "moonshotai/Kimi-VL-A3B-Thinking"),
    "glm45": ("glm45", "glm45", "zai-org/GLM-4.5"),
    "glm47": ("glm47", "glm45", "zai-org/GLM-4.7"),
    "minimax_m2": ("minimax-m2", "qwen3", "MiniMaxAI/MiniMax-M2"),
    "llama3_json": ("llama3", None, "meta-llama/Llama-3.1-8B-Instruct"),
    "lfm2": ("lfm2", None, "LiquidAI/LFM2-1.2B"),
    "mistral_pre_v11": ("mistral", None, "mistralai/Mistral-7B-Instruct-v0.3"),
    "mistral_v11": ("mistral", "mistral", "mistralai/Magistral-Small-2509"),
    "gpt_oss": ("gpt-oss", "gpt-oss", "openai/gpt-oss-20b"),
    "gemma4": ("gemma4", "gemma4", "google/gemma-4-31B-it"),
    "gigachat3": ("gigachat3", None, "ai-sage/GigaChat3-10B-A1.8B"),
    "step3": ("step3", "step3", "stepfun-ai/step3"),
    "internlm2": ("interns1", None, "internlm/internlm2_5-7b-chat"),
    "hunyuan_a13b": ("hunyuan", "hunyuan", "tencent/Hunyuan-A13B-Instruct"),
    "cohere": ("cohere_command4", "cohere_command4", "CohereLabs/command-a-reasoning-08-2025"),
}


# --------------------------------------------------------------------------------------------------------------
# Corpus, tokenizer, tools
# --------------------------------------------------------------------------------------------------------------
@functools.cache
def corpus(family: str) -> tuple[dict, ...]:
    return tuple(json.loads((CORPUS / f"{family}.json").read_text(encoding="utf-8"))["cases"])


def families() -> list[str]:
    return sorted(p.stem for p in CORPUS.glob("*.json"))


def model_id(family: str) -> str:
    return HANDWRITTEN[family][2] if family in HANDWRITTEN else family


class Tokenizer:
    """What the detectors read of a tokenizer: ``name_or_path``, ``init_kwargs`` (a ``response_template``
    only where given) and ``chat_template``. One per (family, template) and process, so the plugin's
    per-model cache is used as a server uses it."""

    def __init__(self, name_or_path: str, response_template: dict | None = None):
        self.name_or_path = name_or_path
        self.init_kwargs = {} if response_template is None else {"response_template": response_template}
        self.chat_template = None
        if response_template is not None:
            self.response_template = response_template


@functools.cache
def plugin_tokenizer(family: str) -> Tokenizer:
    """A tokenizer of the family with no response_template: the plugin resolves it from the model id."""
    return Tokenizer(model_id(family))


def base_view(family: str) -> dict:
    """The family's bundled base-format template as SGLang's loader takes it (reasoning as ``thinking``)."""
    return vllm_view(serving_template(templates.get(family)))


@functools.cache
def template_tokenizer(family: str) -> Tokenizer:
    """A tokenizer whose config holds the family's base-format template (SGLang's view of it)."""
    return Tokenizer(model_id(family), base_view(family))


def _schema(value: Any) -> dict:
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    if isinstance(value, list):
        return {"type": "array"}
    if isinstance(value, dict):
        return {"type": "object"}
    return {}


def tools_for(family: str, case: dict) -> list[Tool]:
    """The case's tools; else one tool per function the output calls (expected calls' names, then those
    chatparse's serving-grade template finds), typed as the expected arguments are."""
    raw = case.get("tools")
    if not raw:
        calls: dict = {}
        for c in (case.get("expected") or {}).get("tool_calls") or ():
            fn = c.get("function", c)
            calls.setdefault(fn["name"], fn.get("arguments"))
        try:
            msg = chatparse.parse_response(case["output"], templates.serving(family), prefix=case.get("prefix", ""))
            for c in msg.get("tool_calls") or ():
                fn = c.get("function", c)
                if isinstance(fn.get("name"), str):
                    calls.setdefault(fn["name"], fn.get("arguments"))
        except Exception:  # noqa: BLE001 - a case the template does not parse still gets the expected calls' tools
            pass
        raw = [{"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {k: _schema(v) for k, v in (args or {}).items()}
            if isinstance(args, dict) else {}}}} for name, args in calls.items()]
    out = []
    for t in raw:
        fn = t.get("function", t)
        out.append(Tool(type="function", function={"name": fn["name"], "parameters": fn.get("parameters") or {}}))
    return out


_OPENERS = ("<think>", "<|channel>", "<seed:think>", "[THINK]", "<|START_THINKING|>", "◁think▷",
            "<|channel|>analysis")


def thinking_of(case: dict) -> bool:
    """Whether the prompt was rendered with reasoning on as far as the case shows (force_reasoning for the
    hand-written reasoning detectors that cannot see the prompt)."""
    prefix = (case.get("prefix") or "").rstrip()
    return prefix.endswith(_OPENERS)


# --------------------------------------------------------------------------------------------------------------
# Running a side
# --------------------------------------------------------------------------------------------------------------
def names_of(side: str, family: str) -> tuple[str | None, str | None, Any]:
    """(tool parser name, reasoning parser name, tokenizer) of a side."""
    if side == "plugin":
        return plugin.NAME, plugin.NAME, plugin_tokenizer(family)
    # a template without a tool-call field: no tool parser (SGLang's response_template one refuses it)
    tools = "tool_calls" in templates.get(family)["fields"]
    if side == "plugin_same":
        return plugin.NAME if tools else None, plugin.NAME, template_tokenizer(family)
    if side == "template":
        return "response_template" if tools else None, "response_template", template_tokenizer(family)
    tool, reasoning, _ = HANDWRITTEN[family]
    return tool, reasoning, None


def _parsers(side: str, family: str, case: dict, *, stream: bool):
    tool_name, reasoning_name, tok = names_of(side, family)
    prefix = case.get("prefix", "")
    tools = tools_for(family, case)
    rp = None
    if reasoning_name is not None:
        force = thinking_of(case) if side == "handwritten" else None
        rp = ReasoningParser(reasoning_name, stream_reasoning=stream, force_reasoning=force, tokenizer=tok,
                             tool_call_parser_active=tool_name is not None, prefix=prefix)
    fp = FunctionCallParser(tools, tool_name, tokenizer=tok, prefix=prefix) if tool_name is not None else None
    return rp, fp


def _calls(items) -> list:
    """ToolCallItems merged per tool_index (name, concatenated parameters), as a client joins them, then
    each as (name, parsed arguments or the text)."""
    merged: dict = {}
    for it in items:
        slot = merged.setdefault(it.tool_index, ["", ""])
        slot[0] = it.name or slot[0]
        slot[1] += it.parameters or ""
    out = []
    for name, params in merged.values():
        try:
            args = json.loads(params) if params else {}
        except ValueError:
            args = params
        out.append((name, args))
    return out


def one_shot(side: str, family: str, case: dict) -> tuple:
    """(reasoning, normal text, calls) as SGLang's non-streaming chat path returns them."""
    rp, fp = _parsers(side, family, case, stream=False)
    text, reasoning = case["output"], ""
    if rp is not None:
        reasoning, text = rp.parse_non_stream(text)
        reasoning, text = reasoning or "", text or ""
    calls = []
    if fp is not None and fp.has_tool_call(text):
        text, items = fp.parse_non_stream(text)
        calls = _calls(items)
    return reasoning, text, calls


@functools.cache
def markers(family: str) -> tuple[str, ...]:
    """The family's special tokens (bench/vllm_families.py's `MARKERS`, read from its source: that module
    imports vLLM), longest first."""
    import ast

    tree = ast.parse((ROOT / "bench" / "vllm_families.py").read_text(encoding="utf-8"))
    scope: dict = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(
            node, "target", None) if isinstance(node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and node.value is not None:
            name = target.id
            if name == "MARKERS" or (name.startswith("_") and name[1:].isupper()):
                try:
                    scope[name] = eval(compile(ast.Expression(node.value), "vllm_families", "eval"), {}, scope)
                except Exception:  # noqa: BLE001 - not a constant
                    pass
    return tuple(sorted(set(scope.get("MARKERS", {}).get(family, ())), key=len, reverse=True))


def deltas(text: str, size: int = DELTA, family: str | None = None) -> list[str]:
    """The output as a server streams it: each of the family's special tokens as one delta (as its tokenizer
    gives it), the text between them in `size`-character pieces."""
    out: list[str] = []
    marks = markers(family) if family else ()
    i = start = 0
    while i <= len(text):
        hit = next((m for m in marks if text.startswith(m, i)), None) if i < len(text) else None
        if hit is not None or i == len(text):
            out += [text[k:min(k + size, i)] for k in range(start, i, size)]
            if hit is None:
                break
            out.append(hit)
            i = start = i + len(hit)
        else:
            i += 1
    return out


def streamed(side: str, family: str, case: dict, size: int = DELTA) -> list[tuple]:
    """Per delta (the last: the end of stream), (reasoning, normal text, calls) as SGLang's streaming chat
    path gets them from the two parsers."""
    rp, fp = _parsers(side, family, case, stream=True)
    return stream_steps(rp, fp, deltas(case["output"], size, family))


def stream_steps(rp, fp, pieces: list[str]) -> list[tuple]:
    """`pieces` through SGLang's streaming chat step - the reasoning parser `rp`, then the tool parser `fp` on
    its normal text (either may be None) - then the end of stream: per step, (reasoning, normal text, calls)."""
    out = []
    for piece in pieces + [None]:
        reasoning, text = "", piece or ""
        if rp is not None:
            r, t = rp.parse_stream_end() if piece is None else rp.parse_stream_chunk(piece)
            reasoning, text = r or "", t or ""
        items: list = []
        if fp is not None:
            if text:
                text, items = fp.parse_stream_chunk(text)
                items = list(items)
            if piece is None:
                end_text, end_items = fp.parse_stream_end()
                text += end_text or ""
                items += list(end_items)
        out.append((reasoning, text, [it.model_dump() for it in items]))
    return out


def joined(seq: list[tuple]) -> tuple:
    """A streamed sequence as a client joins it: (reasoning, normal text, calls)."""
    from sglang.srt.function_call.core_types import ToolCallItem

    reasoning = "".join(r for r, _, _ in seq)
    text = "".join(t for _, t, _ in seq)
    items = [ToolCallItem(**c) for _, _, cs in seq for c in cs]
    return reasoning, text, _calls(items)


def same(a: tuple, b: tuple) -> bool:
    """Two results alike: texts equal once stripped, the same calls (names and parsed arguments)."""
    return a[0].strip() == b[0].strip() and a[1].strip() == b[1].strip() and a[2] == b[2]


def run(side: str, family: str, case: dict, *, mode: str):
    """A side's answer, or ("error", repr) where it raised."""
    try:
        return one_shot(side, family, case) if mode == "one-shot" else streamed(side, family, case)
    except Exception as exc:  # noqa: BLE001 - reported as the side's answer
        return ("error", f"{type(exc).__name__}: {exc}"[:300])


# --------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------
def compare(family_list: list[str]) -> dict:
    out: dict = {}
    for family in family_list:
        row = {"cases": 0, "same_template_one": 0, "same_template_stream": 0, "same_template_joined": 0,
               "handwritten_one": 0, "handwritten_stream": 0, "diffs": []}
        for case in corpus(family):
            row["cases"] += 1
            a, b = run("plugin_same", family, case, mode="one-shot"), run("template", family, case, mode="one-shot")
            row["same_template_one"] += a == b
            sa, sb = run("plugin_same", family, case, mode="stream"), run("template", family, case, mode="stream")
            row["same_template_stream"] += sa == sb
            row["same_template_joined"] += (sa == sb) or (isinstance(sa, list) and isinstance(sb, list)
                                                          and joined(sa) == joined(sb))
            if a != b or sa != sb:
                row["diffs"].append((case["id"], "template", a, b))
            if family in HANDWRITTEN:
                p, h = run("plugin", family, case, mode="one-shot"), run("handwritten", family, case, mode="one-shot")
                ok = p[0] != "error" and h[0] != "error" and same(p, h)
                row["handwritten_one"] += ok
                sp, sh = run("plugin", family, case, mode="stream"), run("handwritten", family, case, mode="stream")
                ok2 = isinstance(sp, list) and isinstance(sh, list) and same(joined(sp), joined(sh))
                row["handwritten_stream"] += ok2
                if not ok:
                    row["diffs"].append((case["id"], "handwritten one-shot", p, h))
                if not ok2:
                    row["diffs"].append((case["id"], "handwritten streamed", sf_joined(sp), sf_joined(sh)))
        out[family] = row
    return out


def sf_joined(seq):
    return joined(seq) if isinstance(seq, list) else seq


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--family", action="append")
    ap.add_argument("--diffs", action="store_true")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)
    plugin.register()
    fams = args.family or families()
    rows = compare(fams)
    print("| family | cases | = template one-shot | = template streamed (deltas) | = template streamed (joined) | "
          "= hand-written one-shot | = hand-written streamed |")
    print("|---|---|---|---|---|---|---|")
    for f, r in rows.items():
        hw = (f"{r['handwritten_one']}", f"{r['handwritten_stream']}") if f in HANDWRITTEN else ("-", "-")
        print(f"| {f} | {r['cases']} | {r['same_template_one']} | {r['same_template_stream']} | "
              f"{r['same_template_joined']} | {hw[0]} | {hw[1]} |")
    if args.diffs:
        for f, r in rows.items():
            for cid, kind, a, b in r["diffs"]:
                print(f"\n{cid} [{kind}]\n  plugin: {a!r}\n  sglang: {b!r}"[:1500])


if __name__ == "__main__":
    main()


def expected_of(case: dict) -> tuple | None:
    """The source's expected message as (reasoning, content, calls), None where the case expects an error."""
    exp = case.get("expected")
    if exp is None:
        return None
    calls = []
    for c in exp.get("tool_calls") or ():
        fn = c.get("function", c)
        calls.append((fn.get("name"), fn.get("arguments")))
    return exp.get("reasoning_content") or "", exp.get("content") or "", calls
