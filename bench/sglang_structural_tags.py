"""Structural tags for tool calls: chatparse's export against SGLang 0.5.23's derivation, on every bundled family.

Run with the Python of the SGLang venv (`.ci/run` makes it at ~/.cache/chatparse/venv-sglang):

    ~/.cache/chatparse/venv-sglang/bin/python -m bench.sglang_structural_tags [--family NAME ...]

writes bench/results/SGLANG_STRUCTURAL_TAGS.md (with ``--family``, prints it instead).

Each family is resolved as the SGLang plugin resolves it (the operator's choice ``$CHATPARSE_RESPONSE_TEMPLATE=
<family>``: the family's serving-grade template; `chatparse.integrations.sglang._model`). Three tags per request:

* **SGLang's**: `sglang.srt.function_call.response_template_structural_tag.tool_call_structural_tag` on SGLang's
  loaded view of that template (the function its template detectors call: `BeamDetector.get_structural_tag`), in
  its most permissive form for a whole message: reasoning optional, the answer allowed instead of calls, framed
  at the message start (`message_start_anchors`).
* **chatparse's**: `chatparse.integrations.sglang.chatparse_structural_tag` (`CompiledTemplate.grammar(tools,
  format="structural_tag")` of the serving-grade template, or of the family's base-format one where the
  serving-grade one uses a format extension, which the export refuses).
* **handed**: what the plugin's detector hands SGLang (`ChatparseToolDetector.get_structural_tag`, automatic
  tool choice, strict tools, at the message start: the tag SGLang installs for a strict request whose prompt
  ends at the start of the assistant message).

Every tag goes the way SGLang sends it to xgrammar (an xgrammar `StructuralTag`, dumped by alias, JSON, SGLang's
`_sanitize_structural_format`) and is compiled by xgrammar; a tag "accepts" an output when xgrammar's matcher
accepts the whole output as a string and can end there (`xgrammar.testing._is_grammar_accept_string`).

**Corpus**: the cases of tests/real_outputs/<family>.json that are well-formed (an ``expected`` message, no
``xfail``/``needs``) and that the served template parses as the source expects; of each, the part the tag
governs (`governed`): the whole output where the prompt leaves it at the message start
(`chatparse.export.grammar.start_mode` is 0), the text after the reasoning's closer where the prompt leaves the
reasoning open (SGLang's reasoner grammar backend lets the reasoning through and starts the grammar at its end
token). Tools: the case's own, else one per called function typed as its expected arguments
(`bench.sglang_families.tools_for`), all strict. Every output the plugin's tag rejects needs a reason
(`why_rejected`), or the report says **unexplained**.

**Constrains calls**: two malformed variants of the first output with a call that the tag accepts (the family's
own corpus first, then other families' outputs its template reads as the source expects, then
`SYNTHESIZED_CALLS`): the call's tool name replaced by one not in the tools (kept only where chatparse's parser
then reads a call of that name: the mutation hit the name), and its JSON arguments broken (the ``:`` after the
first argument's key dropped; kept only where chatparse's parser then no longer reads that call: the family does
read arguments as JSON). A tag constrains calls when it rejects every variant kept.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import logging
import os
import pathlib
import re
import sys
import time
from typing import Any

import xgrammar as xg
from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
from sglang.srt.entrypoints.openai.protocol import Tool
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.function_call.response_template_structural_tag import tool_call_structural_tag
from sglang.srt.parser import response_template as _rt
from xgrammar import StructuralTag

import chatparse
from bench import sglang_families as sf
from chatparse import templates
from chatparse.export.grammar import start_mode
from chatparse.integrations import resolve as resolver
from chatparse.integrations import sglang as plugin
from chatparse.integrations.vllm_template import serving_template

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results" / "SGLANG_STRUCTURAL_TAGS.md"
UNKNOWN = "not_a_listed_tool"


# --------------------------------------------------------------------------------------------------------------
# Families as the plugin resolves them
# --------------------------------------------------------------------------------------------------------------
def families() -> list[str]:
    return list(templates.names())


@contextlib.contextmanager
def _operator_choice(family: str):
    old = os.environ.get(resolver.ENV)
    os.environ[resolver.ENV] = family
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(resolver.ENV, None)
        else:
            os.environ[resolver.ENV] = old


@functools.cache
def tokenizer(family: str) -> sf.Tokenizer:
    """A tokenizer of a local checkpoint (no model id, no chat template, no response_template): the plugin
    serves it with the operator's choice of `family`."""
    return sf.Tokenizer(f"/models/{family}")


def model(family: str):
    """The plugin's `_Model` of the family: its serving-grade template, resolved and compiled as served."""
    with _operator_choice(family):
        return plugin._model(tokenizer(family), None)


def detector(family: str, tools: list[Tool]) -> Any:
    """The plugin's tool detector as SGLang builds it for a request with `tools` (None: no tool-call field)."""
    if "tool_calls" not in model(family).derived.source.fields:
        return None
    with _operator_choice(family):
        return FunctionCallParser(tools, plugin.NAME, tokenizer=tokenizer(family)).detector


def served_template(family: str) -> dict:
    m = model(family)
    return serving_template(m.resolution.template)


# --------------------------------------------------------------------------------------------------------------
# Tags
# --------------------------------------------------------------------------------------------------------------
def strict_tools(family: str, case: dict) -> list[Tool]:
    out = []
    for tool in sf.tools_for(family, case):
        out.append(tool.model_copy(update={"function": tool.function.model_copy(update={"strict": True})}))
    return out


def sglang_tag(family: str, tools: list[Tool], at_start: bool = True) -> dict | None:
    """SGLang's derivation in its most permissive whole-message form (module docstring), or for the output
    after the reasoning (`at_start` False: no reasoning, no message-start framing); None where it derives none
    (or refuses a tool name)."""
    m = model(family)
    source = m.derived.source
    try:
        return tool_call_structural_tag(
            source.fields.get("tool_calls"), [t.model_dump() for t in tools], parallel_tool_calls=True,
            thinking=source.fields.get("thinking") if at_start else None, answer=source.fields.get("content"),
            message_start=m.message_start if at_start else None, grammar_requires_reasoning=False)
    except ValueError:
        return None


PROBE_TOOLS = [Tool(type="function", function={
    "name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}})]


def probe(family: str) -> dict[str, str]:
    """Whether each side makes a call tag for one strict tool (``tool_choice="required"``), independent of the
    corpus: "yes", or why not."""
    m = model(family)
    if "tool_calls" not in m.derived.source.fields:
        return {"sglang": "no tool-call field", "chatparse": "no tool-call field"}
    out = {}
    tag = plugin.sglang_structural_tag(m, [t.model_dump() for t in PROBE_TOOLS], tool_choice="required")
    out["sglang"] = "yes" if tag is not None else "derives none"
    # SGLang's derivation on the family's base-format template too (what SGLang's own `response_template`
    # detector would read from a tokenizer config holding it)
    try:
        base = _rt._derive_serving_templates(sf.base_view(family)).source
        tag = tool_call_structural_tag(base.fields.get("tool_calls"), [t.model_dump() for t in PROBE_TOOLS],
                                       parallel_tool_calls=True)
        out["sglang_base"] = "yes" if tag is not None else "derives none"
    except ValueError as exc:
        out["sglang_base"] = f"refused ({str(exc)[:60]})"
    compiled = plugin._tag_template(m)
    if compiled is None:
        out["chatparse"] = "no template without a format extension"
    else:
        from chatparse.export.structural_tag import Unconstrainable

        try:
            text = compiled.grammar([t.model_dump() for t in PROBE_TOOLS], tool_choice="required",
                                    format="structural_tag").text
            error = compile_error(json.loads(text))
            out["chatparse"] = "yes" if error is None else f"xgrammar refuses it ({error[:60]})"
            if error is None:  # the plugin's cost for a tool list it has not seen (export + xgrammar check)
                fresh = [dict(t.model_dump(), function=dict(t.model_dump()["function"], name=f"tool_{time.time_ns()}"))
                         for t in PROBE_TOOLS]
                t0 = time.perf_counter()
                plugin.chatparse_structural_tag(m, fresh, tool_choice="required")
                out["ms"] = f"{(time.perf_counter() - t0) * 1e3:.0f}"
        except Unconstrainable as exc:
            out["chatparse"] = f"export refuses it (Unconstrainable: {str(exc)[:80]})"
    return out


def chatparse_tag(family: str, tools: list[Tool]) -> dict | None:
    return plugin.chatparse_structural_tag(model(family), [t.model_dump() for t in tools], tool_choice="auto")


def handed_tag(family: str, tools: list[Tool]) -> dict | None:
    """What the plugin hands SGLang for a strict automatic request at the message start (as a dict)."""
    det = detector(family, tools)
    if det is None:
        return None
    tag = det.get_structural_tag(tools=tools, tool_choice="auto", thinking_mode=True, message_start=True)
    return None if tag is None else tag.model_dump(by_alias=True)


def wire(tag: dict) -> str:
    """The tag as SGLang hands it to xgrammar: a `StructuralTag` dumped by alias, JSON, sanitized as
    `XGrammarGrammarBackend.dispatch_structural_tag` does."""
    data = StructuralTag.model_validate(tag).model_dump(by_alias=True)
    fmt = data.get("format")
    if isinstance(fmt, dict):
        XGrammarGrammarBackend._sanitize_structural_format(fmt)
    return json.dumps(data)


@functools.lru_cache(maxsize=512)
def _compiled(key: str) -> Any:
    """xgrammar's compiled grammar of a wired tag (`GrammarCompiler.compile_structural_tag`, SGLang's call,
    on an empty vocabulary: outputs are matched as strings), or the exception compiling raised."""
    try:
        return xg.GrammarCompiler(xg.TokenizerInfo([]), cache_enabled=False).compile_structural_tag(key)
    except Exception as exc:  # noqa: BLE001 - recorded: the tag does not compile
        return exc


def compile_error(tag: dict) -> str | None:
    """None where xgrammar compiles the tag, else its error."""
    compiled = _compiled(wire(tag))
    return f"{type(compiled).__name__}: {compiled}" if isinstance(compiled, Exception) else None


def compiles(tag: dict) -> bool:
    return compile_error(tag) is None


def accepts(tag: dict, text: str) -> bool:
    """Whether xgrammar's matcher accepts `text` as a whole output of `tag` and can end there."""
    compiled = _compiled(wire(tag))
    if isinstance(compiled, Exception):
        return False
    matcher = xg.GrammarMatcher(compiled, terminate_without_stop_token=True)
    return bool(matcher.accept_string(text)) and matcher.is_terminated()


# --------------------------------------------------------------------------------------------------------------
# Corpus
# --------------------------------------------------------------------------------------------------------------
def _calls(message: dict) -> list[tuple]:
    out = []
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    for call in calls if isinstance(calls, list) else ():
        fn = call.get("function", call) if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out.append((fn.get("name"), fn.get("arguments")))
    return out


def parse(family: str, case: dict, output: str | None = None) -> dict | None:
    """The served template's message for the output (None where it raises)."""
    try:
        return chatparse.parse_response(case["output"] if output is None else output, served_template(family),
                                        prefix=case.get("prefix", ""))
    except Exception:  # noqa: BLE001 - a malformed output may raise
        return None


def classify(family: str, case: dict) -> str | None:
    """None for a corpus case the comparison uses, else why it is left out."""
    if "expected" not in case:
        return "expects an error"
    if case.get("xfail") or case.get("needs"):
        return "xfail/needs: the bundled template does not parse it as the source expects"
    message = parse(family, case)
    if message is None or not sf.same(_norm(message), _norm(case["expected"])):
        return "the serving-grade template does not parse it as the source expects"
    if governed(family, case) is None:
        return "its prompt leaves a region other than the reasoning open, or the reasoning never closes"
    return None


def governed(family: str, case: dict) -> str | None:
    """The part of the output the tag governs: all of it where the prompt leaves it at the message start;
    where the prompt leaves the reasoning open, what follows the reasoning's closer (SGLang's reasoner grammar
    backend lets the reasoning through and starts the grammar at its end token); None otherwise."""
    compiled = chatparse.compile_template(served_template(family))
    prefix = case.get("prefix") or None
    if start_mode(compiled, prefix) == 0:
        return case["output"]
    parser = chatparse.ResponseParser(compiled, prefix=prefix or "", dialect="vllm")
    opened = [e["field"] for e in parser.initial_events if e["type"] == "region_open"]
    if opened[-1:] != ["thinking"]:
        return None
    start = parser.input_length
    for event in parser.feed(case["output"]) + parser.finalize()[1]:
        if event["type"] == "region_close" and event["field"] == "thinking":
            return case["output"][event["end"] - start:] if event["end"] > event["start"] else None
    return None


def _norm(message: dict) -> tuple:
    if not isinstance(message, dict):
        return (repr(message), "", [])
    return ((message.get("reasoning_content") or message.get("thinking") or ""),
            (message.get("content") or ""), [(n, a) for n, a in _calls(message)])


def cases(family: str) -> tuple[list[dict], dict[str, str]]:
    """(the cases used, {case id: why left out})."""
    used, out = [], {}
    for case in sf.corpus(family):
        why = classify(family, case)
        if why is None:
            used.append(case)
        else:
            out[case["id"]] = why
    return used, out


# --------------------------------------------------------------------------------------------------------------
# Malformed calls
# --------------------------------------------------------------------------------------------------------------
def malformed(family: str, case: dict) -> dict[str, str | None]:
    """{'unknown name': output, 'broken JSON': output}: each None where it does not apply (module docstring)."""
    out: dict[str, str | None] = {"unknown name": None, "broken JSON": None}
    calls = _calls(case["expected"])
    if not calls:
        return out
    name, arguments = calls[0]
    text = governed(family, case)
    head = case["output"][:len(case["output"]) - len(text)]  # the reasoning SGLang's reasoner backend owns
    for m in re.finditer(re.escape(name), text):
        candidate = text[:m.start()] + UNKNOWN + text[m.end():]
        message = parse(family, case, head + candidate)
        if message is not None and any(n == UNKNOWN for n, _ in _calls(message)):
            out["unknown name"] = candidate
            break
    if isinstance(arguments, dict) and arguments:
        key = next(iter(arguments))
        m = re.search(re.escape(json.dumps(key)) + r"(\s*):", text)
        if m is not None:
            candidate = text[:m.end() - 1] + " " + text[m.end():]
            message = parse(family, case, head + candidate)
            if message is None or (name, arguments) not in _calls(message):
                out["broken JSON"] = candidate
    return out


# --------------------------------------------------------------------------------------------------------------
# One family
# --------------------------------------------------------------------------------------------------------------
SIDES = ("sglang", "chatparse", "handed")
_TAGS = {"sglang": sglang_tag, "chatparse": chatparse_tag, "handed": handed_tag}


def call_outputs(family: str):
    """Corpus outputs with a call that the family's served template reads as the source expects: its own cases
    used, then (borrowed) other families' cases it reads so, at the message start (prefix ``""``): a family
    whose own corpus has no such output is still tested with calls of its format."""
    used, _ = cases(family)
    for case in used:
        if _calls(case["expected"]):
            yield case
    for other in families():
        if other == family:
            continue
        for case in sf.corpus(other):
            if "expected" not in case or case.get("xfail") or case.get("needs") or not _calls(case["expected"]):
                continue
            borrowed = dict(case, prefix="", family_of_case=other)
            message = parse(family, borrowed)
            if message is not None and sf.same(_norm(message), _norm(case["expected"])):
                yield borrowed
    made = synthesized(family)
    if made is not None:
        yield made


# Calls written in a family's format where its corpus has none that its tag accepts (gpt_oss's corpus has no
# call; functiongemma's calls are in its JSON dialect, which the tag does not write): the strict-JSON form the
# tag writes and the served template reads as a call.
SYNTHESIZED_CALLS = {
    "gpt_oss": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    "functiongemma": '<start_function_call>call:get_weather{"city": "Paris"}<end_function_call>',
}


def synthesized(family: str) -> dict | None:
    """`SYNTHESIZED_CALLS[family]` as a case whose expected message is the served template's (None where that
    reads no call)."""
    text = SYNTHESIZED_CALLS.get(family)
    if text is None:
        return None
    case = {"id": f"{family}-synthesized-call", "prefix": "", "output": text}
    message = parse(family, case)
    return dict(case, expected=message) if message is not None and _calls(message) else None


# Real outputs the plugin's tag rejects on purpose (case id -> why), besides those `why_rejected` explains by rule.
REJECTED_ON_PURPOSE = {
    "gpt_oss-vllm-truncated-final-header": "the output ends inside an opener ('<|channel|>final' with no "
                                           "'<|message|>'): structural-tag text may not hold an opener's literal",
    "kimi_k2-llamacpp-calls-inside-thinking-no-markers": "the first call has no <|tool_call_end|>: it ends at the "
                                                         "zero-width close before the next <|tool_call_begin|>, "
                                                         "and the tag offers a call without its end only as the "
                                                         "output's last item",
}
DIALECT = {"gemma4": "unquoted keys and <|\"|> strings", "functiongemma": "unquoted keys and <escape> strings"}


def why_rejected(family: str, case: dict) -> str | None:
    """Why the plugin's tag may reject a well-formed corpus output of `family` (None: it must accept it)."""
    if case["id"] in REJECTED_ON_PURPOSE:
        return REJECTED_ON_PURPOSE[case["id"]]
    calls = _calls(case["expected"])
    if family in DIALECT and any(args for _, args in calls):
        return f"arguments in the model's JSON dialect ({DIALECT[family]}): the tag writes strict JSON, which the " \
               "served template also reads"
    if any(not isinstance(args, dict) for _, args in calls):
        return "arguments written as a JSON string, not an object: the tag holds arguments to the tool's " \
               "parameters, an object"
    field = model(family).derived.source.fields.get("tool_calls")
    value_parser = ((field.content_args or {}).get("value_parser") or {}) if field is not None else {}
    if field is not None and field.content == "xml-inline" and value_parser.get("name") == "json" and any(
            isinstance(v, str) and v[:1] and (v[0].isdigit() or v[0].isspace() or v[0] in "[{-")
            for _, args in calls for v in args.values()):
        return "an xml-inline string value, read as JSON, that begins like a JSON value (a digit, whitespace, '[', " \
               "'{'): the export leaves such values out, as the parser would read them as JSON (a subset: " \
               "chatparse/export/structural_tag.py, `_Tag.string_text`)"
    return None


def check_malformed(family: str, tag_of) -> tuple[dict[str, bool], str | None]:
    """({variant: rejected}, the case they were made from) for the first output of `call_outputs` whose tag
    (`tag_of(family, tools)`) accepts it and that gives a malformed variant; ({}, None) where none does."""
    for case in call_outputs(family):
        tools = strict_tools(case.get("family_of_case", family), case)
        tag = tag_of(family, tools)
        if tag is None or not compiles(tag) or not accepts(tag, governed(family, case)):
            continue
        variants = {k: v for k, v in malformed(family, case).items() if v is not None}
        if variants:
            return {kind: not accepts(tag, bad) for kind, bad in variants.items()}, case["id"]
    return {}, None


def measure(family: str) -> dict:
    used, left_out = cases(family)
    m = model(family)
    row: dict[str, Any] = {"family": family, "tools": "tool_calls" in m.derived.source.fields,
                           "cases": len(used), "left_out": left_out, "source": _tag_source(family),
                           "probe": probe(family)}
    for side in SIDES:
        got = {"tag": 0, "call_tag": 0, "compiles": True, "accepted": [], "rejected": [], "malformed": {}}
        for case in used:
            tools = strict_tools(family, case)
            at_start = governed(family, case) == case["output"]
            tag = _TAGS[side](family, tools) if side != "sglang" else sglang_tag(family, tools, at_start)
            if tag is None:
                continue
            got["tag"] += 1
            got["call_tag"] += bool(tools)
            if not compiles(tag):
                got["compiles"] = False
                got["rejected"].append(case["id"])
                continue
            (got["accepted"] if accepts(tag, governed(family, case)) else got["rejected"]).append(case["id"])
        if row["tools"]:
            got["malformed"], got["malformed_case"] = check_malformed(family, _TAGS[side])
        got["constrains"] = bool(got["malformed"]) and all(got["malformed"].values())
        row[side] = got
    return row


def _tag_source(family: str) -> str:
    """Which template chatparse's tag is exported from."""
    compiled = plugin._tag_template(model(family))
    if compiled is None:
        return "none"
    served = chatparse.compile_template(served_template(family))
    return "serving-grade" if compiled is served else "base-format"


# --------------------------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------------------------
def _cell(row: dict, side: str) -> str:
    got = row[side]
    if not got["tag"]:
        return "no tag"
    parts = [f"{len(got['accepted'])}/{row['cases']}"]
    if got["tag"] < row["cases"]:
        parts.append(f"(tag for {got['tag']})")
    if not got["compiles"]:
        parts.append("**does not compile**")
    return " ".join(parts)


def _constrains(row: dict, side: str) -> str:
    got = row[side]
    if not got["malformed"]:
        return "-" if row["probe"].get(side, row["probe"]["chatparse"]) != "yes" else "not tested (no accepted call)"
    checks = ", ".join(f"{k}: {'rejected' if v else '**accepted**'}" for k, v in got["malformed"].items())
    return ("yes" if got["constrains"] else "**no**") + f" ({checks}; from `{got['malformed_case']}`)"


def report(rows: list[dict], seconds: float) -> str:
    lines = [
        "# Structural tags in SGLang 0.5.23: chatparse's export against SGLang's derivation",
        "",
        "Made by `~/.cache/chatparse/venv-sglang/bin/python -m bench.sglang_structural_tags` (sglang 0.5.23, "
        f"xgrammar {_xgrammar_version()}; {seconds:.0f} s). How each column is measured: the module docstring "
        "of bench/sglang_structural_tags.py.",
        "",
        "Per family, as the plugin resolves it (the serving-grade template): whether each side makes a call tag "
        "for one strict tool (*call tag*); the corpus outputs used (well-formed, parsed by the served template as "
        "the source expects; where the prompt leaves the reasoning open, the text after its closer, which is what "
        "SGLang's grammar governs) and how many each side's tag accepts (with the case's tools, strict; a tag "
        "made without calls where a case has no tools); whether the tag rejects malformed calls made from an "
        "accepted output (an unknown tool name; JSON arguments with a key's `:` dropped, where the family reads "
        "arguments as JSON); which tag the plugin hands SGLang; and what chatparse's tag costs the plugin for a "
        "tool list it has not seen (one strict tool: the export and xgrammar's compile check, once per template, "
        "tool list and choice, then cached; the template itself is compiled once per model, before).",
        "",
        "| family | SGLang: call tag | SGLang: accepts | SGLang: constrains calls | chatparse: call tag (from) "
        "| chatparse: accepts | chatparse: constrains calls | plugin hands (accepts) | ms per new tool list |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        handed = row["handed"]
        if row["probe"]["sglang"] == "yes":
            hands = "SGLang's"
        elif row["probe"]["chatparse"] == "yes":
            hands = "chatparse's"
        else:
            hands = "none for calls" if handed["tag"] else "none"
        hands += f" ({len(handed['accepted'])}/{row['cases']})" if handed["tag"] else ""
        source = f" ({row['source']})" if row["probe"]["chatparse"] == "yes" else ""
        lines.append(f"| {row['family']} | {row['probe']['sglang']} | {_cell(row, 'sglang')} | "
                     f"{_constrains(row, 'sglang')} | {row['probe']['chatparse']}{source} | "
                     f"{_cell(row, 'chatparse')} | {_constrains(row, 'chatparse')} | {hands} | "
                     f"{row['probe'].get('ms', '-')} |")
    lines += ["", "## Summary", ""] + _summary(rows) + ["", "## Outputs a tag rejects", ""]
    for row in rows:
        for side in SIDES:
            if row[side]["rejected"]:
                lines.append(f"* {row['family']}, {side}: " + ", ".join(f"`{c}`" for c in row[side]["rejected"]))
    lines += ["", "Why the plugin's tag rejects them (`why_rejected`):", ""]
    whys: dict[str, list[str]] = {}
    for row in rows:
        for cid in row["handed"]["rejected"]:
            case = next(c for c in sf.corpus(row["family"]) if c["id"] == cid)
            whys.setdefault(why_rejected(row["family"], case) or "**unexplained**", []).append(cid)
    for why, ids in sorted(whys.items()):
        lines.append(f"* {why} ({len(ids)}): " + ", ".join(f"`{c}`" for c in ids))
    lines += ["", "## Corpus cases left out", ""]
    reasons: dict[str, list[str]] = {}
    for row in rows:
        for cid, why in row["left_out"].items():
            reasons.setdefault(why, []).append(cid)
    for why, ids in sorted(reasons.items()):
        lines.append(f"* {why} ({len(ids)}): " + ", ".join(f"`{c}`" for c in ids))
    return "\n".join(lines) + "\n"


def _summary(rows: list[dict]) -> list[str]:
    with_tools = [r for r in rows if r["tools"]]
    total = sum(r["cases"] for r in rows)
    out = [f"* {len(rows)} bundled families, {len(with_tools)} with a tool-call field; {total} corpus outputs used."]
    for side, label in (("sglang", "SGLang's derivation"), ("chatparse", "chatparse's export"),
                        ("handed", "The plugin's hand-over")):
        key = "chatparse" if side == "handed" else side
        tagged = [r for r in with_tools if r["probe"][key] == "yes"]
        constraining = [r for r in tagged if r[side]["constrains"]]
        untested = [r["family"] for r in tagged if not r[side]["malformed"]]
        accepted = sum(len(r[side]["accepted"]) for r in rows)
        line = (f"* {label}: a call tag for {len(tagged)} of the {len(with_tools)} families; rejects the malformed "
                f"calls in {len(constraining)} of them")
        if untested:
            line += f" ({len(untested)} not tested: no corpus output with a call it accepts: {', '.join(untested)})"
        out.append(line + f"; accepts {accepted} of the {total} corpus outputs.")
    base = [r["family"] for r in with_tools if r["probe"].get("sglang_base") == "yes"]
    out.append(f"* SGLang's derivation on the base-format templates instead (SGLang's own `response_template` "
               f"detector with the bundled template in the tokenizer config): a call tag for {len(base)} of the "
               f"{len(with_tools)} families" + (f" ({', '.join(base)})." if base else "."))
    no_tag = [f"{r['family']} ({r['probe']['chatparse']})" for r in with_tools if r["probe"]["chatparse"] != "yes"]
    if no_tag:
        out.append(f"* No chatparse call tag: {'; '.join(no_tag)}.")
    base = [r["family"] for r in rows if r["source"] == "base-format" and r["probe"]["chatparse"] == "yes"]
    if base:
        out.append("* chatparse's tag is exported from the base-format template where the serving-grade one uses "
                   f"a format extension (the export refuses extensions): {', '.join(base)}. Under the tag the "
                   "model writes the base format, which the served template reads too.")
    out.append("* Every corpus output the plugin's tag rejects has its reason below (`why_rejected`): arguments in a "
               "model's JSON dialect or as a JSON string, xml-inline string values that begin like JSON, and two "
               "outputs that end or close a call where the tag cannot.")
    out.append("* Rule (`ChatparseToolDetector.get_structural_tag`): SGLang's derivation where it derives a call "
               "tag, else chatparse's export (where it exports and xgrammar compiles it). SGLang's derives none for "
               "any bundled family: it needs literal call closers (the bundled templates' delimiters are patterns "
               "with `\\s*`), the function named by the opener, and JSON arguments without `content_args` or "
               "xml-inline ones.")
    return out


def _xgrammar_version() -> str:
    from importlib.metadata import version

    return version("xgrammar")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--family", action="append", help="only these families (prints, does not write)")
    args = ap.parse_args(argv)
    logging.getLogger("sglang").setLevel(logging.CRITICAL)
    plugin.register()
    t0 = time.time()
    rows = [measure(f) for f in (args.family or families())]
    text = report(rows, time.time() - t0)
    if args.family:
        sys.stdout.write(text)
    else:
        OUT.write_text(text, encoding="utf-8")
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
