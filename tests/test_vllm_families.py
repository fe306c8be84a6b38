"""chatparse's vLLM plugin against vLLM 0.33.0's own hand-written parsers, family by family.

For every family of `bench.vllm_families.HANDWRITTEN` (the bundled families vLLM 0.33.0 has a hand-written tool
or reasoning parser for), every case of tests/real_outputs/<family>.json is served twice, as vLLM's chat
server serves it, one-shot and streamed one token per delta: by ``--tool-call-parser chatparse
--reasoning-parser chatparse`` (the plugin, with a tokenizer whose config holds no response_template: the plugin
finds the family's template from the tokenizer's name) and by the family's own vLLM parsers. The two messages
must be the same (`bench.vllm_families.same_message`: text stripped, calls by name and parsed arguments), except
for the cases of `KNOWN_DIFFERENCES` (strict xfails), each with the reason: what each side returns, which is
right and why, and whether a template key would make chatparse return vLLM's answer.

A hypothesis test generates well-formed outputs (reasoning, content, then 0-3 calls with random JSON arguments)
in the formats of qwen3 (hermes + qwen3), hermes, glm47, deepseek_v31 and kimi_k2, on which the two must agree.
(Text after or between calls is left out: one-shot, several of vLLM's parsers drop the text after the calls,
see the KNOWN_DIFFERENCES of deepseek_v31-vllm-multiple-with-suffix and longcat-vllm-surrounding-text.)

vLLM lives in .ci/run's venv (vllm==0.33.0 pins transformers<5.21); run this file with its python:

    ~/.cache/chatparse/venv-vllm/bin/python -m pytest tests/test_vllm_families.py

The cohere family needs vLLM's optional `cohere_melody` package (its cases skip without it).
"""

from __future__ import annotations

import functools
import json
import logging

import pytest

from deps import need, need_vllm  # noqa: E402

need_vllm("vllm.parser.parser_manager")  # installed only in .ci/run's venv (~/.cache/chatparse/venv-vllm)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bench import vllm_families as vf  # noqa: E402

logging.getLogger("vllm").setLevel(logging.CRITICAL)  # vLLM's parsers log every malformed call with a traceback

# --------------------------------------------------------------------------------------------------------------
# Why the two differ. Keys: a case id (both one-shot and streamed differ) or "<case id>@one-shot" /
# "<case id>@streamed" (only that one). "chatparse" below is the plugin as served (its serving-grade template
# through vLLM's response-template adapter).
# --------------------------------------------------------------------------------------------------------------
_PROMPT_BLIND = (
    "vLLM's {parser} reasoning parser does not read the prompt: with no reasoning closer in the output it serves "
    "everything before one as reasoning (it assumes the chat template opened it), here the whole output, its "
    "tool-call markup included, so the calls are lost. This prompt opens no reasoning: chatparse, which reads "
    "the prompt, serves content and calls, as the source expects. chatparse is right; vLLM's reading holds only "
    "for a model that always reasons. No template key should make chatparse read reasoning the prompt never "
    "opened.")
PROMPT_BLIND_STEP3 = _PROMPT_BLIND.format(parser="step3") + (
    " (vLLM's step3 tool parser alone would not parse most of these either: it needs 'function<｜tool_sep｜>' "
    "before each <steptml:invoke>, which these outputs, from vLLM's own tests, mostly lack.)")
PROMPT_BLIND_R1 = _PROMPT_BLIND.format(parser="deepseek_r1 (SmolLM3's)")
PROMPT_BLIND_MINIMAX = _PROMPT_BLIND.format(parser="minimax_m2")
ERNIE_IMPLICIT_END = (
    "ERNIE's prompt pre-writes <think> and the output goes straight to <tool_call>: chatparse's ernie45 template "
    "ends reasoning at <tool_call> (its reasoning close_pattern's lookahead) and serves the calls; vLLM's ernie45 "
    "reasoning parser has no such end, so the calls stay inside reasoning, unparsed. chatparse is right (the "
    "source expects the calls).")
_STREAM_GATED = (
    "Streamed, vLLM's DelegatingParser hands deltas to the tool parser only once the reasoning parser reports "
    "reasoning over; {parser}'s reasoning parser never does for an output without reasoning ({why}), so every "
    "delta goes out as content and the calls are never parsed, while one-shot (not gated) parses them. vLLM is "
    "wrong (its streamed and one-shot answers differ); chatparse streams the calls.")
GRANITE_STREAM_GATED = _STREAM_GATED.format(
    parser="granite", why="it ends only at 'Here is my response:'")
HUNYUAN_STREAM_GATED = _STREAM_GATED.format(
    parser="hunyuan_a13b", why="it reports the end only once <answer> is open")
PHI4_NO_STREAMING = (
    "vLLM's phi4_mini_json parser does not stream: its extract_tool_calls_streaming returns None for every "
    "delta, so a streamed response is empty (text and calls lost). vLLM is wrong.")
HERMES_STRING_ARGUMENTS = (
    "The call's arguments are a JSON string holding the object: vLLM's hermes parser serves the string as the "
    "arguments value (a client's json.loads gives a str, not an object); chatparse's serving-grade hermes template "
    "decodes it (tool_calls.decode_json_strings), as the source expects. chatparse is right; dropping "
    "decode_json_strings from hermes' serving overrides would match vLLM.")
XLAM_STREAM_ARGS = (
    "Streamed, vLLM's xlam parser sends arguments that join to invalid JSON ('{{...', or the object twice) and "
    "leaks the call's markup into content; one-shot it agrees with chatparse. vLLM is wrong.")

KNOWN_DIFFERENCES: dict[str, str] = {
    # ---- cohere
    "cohere-vllm-citations": (
        "vLLM (cohere_melody) strips the citation markup <co>...</co: N:[..]> from reasoning and content; the "
        "plugin serves it. chatparse's serving-grade cohere template has the unwrap_pattern that strips it, but "
        "vLLM's adapter serves the regions' raw text chunks (the plugin's _CompiledStream routes region_chunk "
        "events), never the message values unwrap_pattern rewrites, so the key has no effect in vLLM. vLLM is "
        "right (the source expects the markup stripped); fixing it takes the plugin (unwrap the served chunks), "
        "not the template."),
    # ---- deepseek_v3 / v31 / v32
    "deepseek_v3-vllm-malformed-0": (
        "Malformed (the JSON arguments lack their '}'): vLLM serves a call whose arguments are that broken text "
        "(invalid JSON on the wire); chatparse keeps the block as content (serving-grade tool_calls.on_error: "
        "content), as the source expects. chatparse is right."),
    "deepseek_v3-vllm-malformed-1": (
        "Malformed (<｜tool▁calls▁begin｜> with no <｜tool▁call▁begin｜>): vLLM one-shot returns nothing at all "
        "and streamed strips the two markers and streams the rest as content; chatparse keeps the text verbatim "
        "as content, as the source expects. chatparse is right (vLLM loses the text, and disagrees with itself)."),
    "deepseek_v31-vllm-missing-call-markers": (
        "Malformed (no <｜tool▁call▁begin｜>): vLLM one-shot returns nothing and streamed strips the section "
        "markers and streams the rest; chatparse keeps the text verbatim as content, as the source expects. "
        "chatparse is right."),
    "deepseek_v31-vllm-cut-off-block": (
        "Generation cut off after '<｜tool▁calls▁begin｜>get_weather': vLLM one-shot drops the block, streamed "
        "drops only the marker ('...up.get_weather'); chatparse keeps it verbatim, as the source expects. "
        "chatparse is right."),
    "deepseek_v31-vllm-multiple-with-suffix@one-shot": (
        "Text on both sides of the calls. One-shot vLLM drops the text after them (the source test expects that; "
        "the bundled template keeps it on purpose, corpus xfail 'gap:': dropping it would lose text the chat "
        "template renders); streamed vLLM keeps both, as chatparse does one-shot and streamed. vLLM disagrees "
        "with itself; chatparse keeps the model's text."),
    "deepseek_v32-sglang-json-body": (
        "An invoke whose body is a JSON object instead of DSML parameters: vLLM's deepseek_v32 parser serves the "
        "calls with empty arguments {} (arguments silently lost); chatparse's serving-grade template parses the "
        "JSON body (tool_calls.content_fallback), as the source expects. chatparse is right."),
    # ---- ernie45
    "ernie45-vllm-tool-single": ERNIE_IMPLICIT_END,
    "ernie45-vllm-tool-multiple": ERNIE_IMPLICIT_END,
    "ernie45-transformers-real-no-tools@streamed": (
        "Streamed, vLLM's ernie45 parser serves the trailing '</s>' as content (one-shot strips it); chatparse "
        "ends content at </s> (content close_pattern). chatparse is right; a live server stops at the EOS token "
        "before any parser sees it, so only a parser fed the text with </s> meets this."),
    # ---- functiongemma
    "functiongemma-vllm-two-arguments@streamed": (
        "Streamed, vLLM's functiongemma parser sends argument pieces that join to invalid JSON "
        "('{\"location\": \"San Francisco\"} \"unit\": \"celsius\"}': it closes the object after the first key); "
        "one-shot it agrees. vLLM is wrong."),
    "functiongemma-vllm-streamed-keys-without-comma@streamed": (
        "Malformed (no comma between keys). Streamed, vLLM's argument pieces join to invalid JSON (the object "
        "closed after each key); chatparse parses both keys (serving content_fallback), as the source expects. "
        "chatparse is right."),
    "functiongemma-vllm-streamed-three-keys-without-comma@streamed": (
        "Malformed (no commas between keys). Streamed, vLLM's argument pieces join to invalid JSON; chatparse "
        "parses the three keys, as the source expects. chatparse is right."),
    # ---- gemma4
    "gemma4-vllm-incomplete": (
        "Malformed (generation cut off inside the call's first value): vLLM serves a call get_weather(location="
        "'London') completed from the truncated text; chatparse keeps the text as content (serving "
        "tool_calls.on_error: content), as the source expects. chatparse is right (vLLM invents a call the model "
        "did not finish)."),
    "gemma4-vllm-streamed-text-after-call@one-shot": (
        "One-shot vLLM drops the text after the call ('<div>'); streamed it keeps it, as chatparse does both ways "
        "and the source expects. vLLM is wrong (its modes disagree)."),
    "gemma4-transformers-real-tool-call@streamed": (
        "Streamed, vLLM serves the '<|tool_response>' the model writes after its call as content (one-shot drops "
        "it); chatparse ends content there (content close_pattern). chatparse is right."),
    # ---- gigachat3
    "gigachat3-sglang-invalid-json@streamed": (
        "Malformed (arguments '{invalid json}'). Streamed, vLLM serves a call whose arguments are that invalid "
        "JSON; one-shot it keeps the text as content, as chatparse does both ways (serving on_error: content). "
        "chatparse is right."),
    # ---- glm45 / glm47
    "glm45-sglang-array-escaped-json-raw": (
        "Malformed (the model wrote a literal backslash-n after the name and backslash-escaped JSON in the value): "
        "vLLM drops the call altogether (no call, no content); chatparse's serving-grade glm45 template reads it "
        "(open_pattern and tag_pattern accept the literal \\n, tool_calls.escaped_json_values), as the source "
        "expects. chatparse is right."),
    "glm47-sglang-array-escaped-json-raw": (
        "Malformed (backslash-escaped JSON array as the value): vLLM serves the escaped text as a string "
        "argument; chatparse decodes it to the array (serving tool_calls.escaped_json_values), as the source "
        "expects. chatparse is right; dropping escaped_json_values from glm47's serving overrides would match vLLM."),
    # ---- granite3
    "granite3-vllm-single-tool-call@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-parallel-tool-calls@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-various-data-types@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-empty-arguments@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-escaped-strings@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-string-prefix@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-arguments-before-name@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-parallel-one-delta@streamed": GRANITE_STREAM_GATED,
    "granite3-vllm-surrounding-text": (
        "One-shot vLLM's granite parser drops the text after the call ('I'll get that information.'), which "
        "chatparse keeps (the source expects it). Streamed: " + GRANITE_STREAM_GATED),
    "granite3-vllm-malformed-0@one-shot": (
        "Malformed (cut off inside the arguments): one-shot vLLM serves a call whose arguments are '{' (invalid "
        "JSON); chatparse keeps the text as content (serving on_error: content), as the source expects (and as "
        "vLLM streamed does, by way of the gating above). chatparse is right."),
    # ---- granite4
    # ---- granite_20b_fc
    "granite_20b_fc-vllm-empty-arguments@streamed": (
        "Streamed, vLLM's granite-20b-fc parser sends the empty arguments as '' (not JSON); one-shot it sends "
        "'{}'. vLLM is wrong."),
    "granite_20b_fc-vllm-surrounding-text@streamed": (
        "Streamed, vLLM's granite-20b-fc parser finds a call only at the start of the output: after text it "
        "streams the call's markup as content; one-shot it parses it, as chatparse does. vLLM is wrong."),
    "granite_20b_fc-vllm-malformed-0@streamed": (
        "Malformed (cut off inside the arguments): streamed vLLM serves a call 'func' with arguments '' (not "
        "JSON); one-shot it keeps the text, as chatparse does (serving on_error: content). chatparse is right."),
    # ---- hermes
    "hermes-vllm-invalid-json@streamed": (
        "Malformed (the call's JSON lacks its last '}' and </tool_call>): streamed vLLM serves a call from it "
        "(its partial-JSON streaming completes the object); one-shot it keeps the text as content, as chatparse "
        "does (serving on_error: content) and the source expects. chatparse is right."),
    "hermes-vllm-serialized-arguments": HERMES_STRING_ARGUMENTS,
    "hermes-vllm-string-arguments-0": HERMES_STRING_ARGUMENTS,
    # ---- hunyuan_a13b
    "hunyuan_a13b-vllm-single@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-multiple@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-content-before@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-nested@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-streamed-answer-close@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-non-ascii@streamed": HUNYUAN_STREAM_GATED,
    "hunyuan_a13b-vllm-empty-args-first@streamed": HUNYUAN_STREAM_GATED,
    # ---- internlm2
    "internlm2-vllm-empty-arguments@streamed": (
        "Streamed, vLLM's internlm parser sends the empty parameters as '' (not JSON); one-shot '{}'. vLLM is "
        "wrong."),
    "internlm2-vllm-malformed-0": (
        "Malformed ('not json' as the call): one-shot vLLM's internlm parser raises JSONDecodeError (the request "
        "fails); streamed it drops the text. chatparse keeps it as content (serving on_error: content), as the "
        "source expects. chatparse is right."),
    # ---- kimi_k2
    "kimi_k2-llamacpp-calls-inside-thinking-no-markers": (
        "Calls written inside <think> with no </think> and no section marker: vLLM's kimi_k2 parser keeps them as "
        "reasoning text; chatparse's template ends reasoning at <|tool_call_begin|> (reasoning close_pattern's "
        "lookahead) and serves the calls, as the source (llama.cpp) expects. chatparse is right."),
    "kimi_k2-llamacpp-real-execute-command": (
        "A real Kimi-K2 call with no <|tool_calls_section_begin|> (and no end markers): vLLM's kimi_k2 parser "
        "needs the section marker and serves the call's markup as content; chatparse's template makes the "
        "section marker optional and serves the call, as the source (llama.cpp) expects. chatparse is right."),
    # ---- lfm2
    **{f"lfm2-sglang-json-{k}": (
        "A JSON call in <|tool_call_start|>...<|tool_call_end|>: vLLM's lfm2 parser parses only pythonic lists, "
        "so one-shot it serves the block as content and streamed it drops the block altogether (nothing "
        "served); chatparse's serving-grade lfm2 template parses pythonic calls with a JSON fallback "
        "(content_fallback, key_aliases), as the source expects. chatparse is right.")
       for k in ("simple", "two-calls", "parameters-key", "bare-object", "text-before")},
    "lfm2-sglang-two-blocks": (
        "Two <|tool_call_start|> blocks with text between: vLLM's lfm2 parser parses only the first; one-shot it "
        "drops the rest (text and second call), streamed it serves them as content. chatparse serves both calls "
        "and the text, as the source expects. chatparse is right."),
    "lfm2-sglang-empty-block@one-shot": (
        "Malformed (an empty <|tool_call_start|><|tool_call_end|>): one-shot vLLM serves the two markers as "
        "content; chatparse serves nothing (an empty call list), as the source expects and vLLM streamed does. "
        "chatparse is right."),
    # ---- llama3_json
    "llama3_json-sglang-trailing-text": (
        "Text after a bare JSON call: vLLM's llama3_json parser drops it (and streamed sends the empty "
        "parameters as '', not JSON); chatparse serves it as content, as the source expects. chatparse is "
        "right."),
    "llama3_json-sglang-python-tag-after-text": (
        "Text, then <|python_tag|> and a call: one-shot vLLM drops the text; streamed it finds a call only at the "
        "start of the output and serves everything as content. chatparse serves the text and the call, as the "
        "source expects. chatparse is right."),
    "llama3_json-sglang-separator@streamed": (
        "Two calls separated by ';': streamed, vLLM's llama3_json parser serves only the first (one-shot both, as "
        "chatparse). vLLM is wrong."),
    "llama3_json-sglang-python-tag-separator@streamed": (
        "Two calls each after <|python_tag|>: streamed, vLLM serves only the first, with arguments '' (not JSON); "
        "one-shot both, as chatparse. vLLM is wrong."),
    "llama3_json-sglang-invalid-then-valid@streamed": (
        "Malformed (a truncated call, then a whole one). Neither gives the source's answer (the second call): "
        "one-shot both serve the whole text as content (the serving-grade template's on_error: content; the broken "
        "call's region never closes, so both calls are one region); streamed, vLLM serves a call whose arguments "
        "are '' (not JSON)."),
    # ---- longcat
    "longcat-vllm-surrounding-text": (
        "Text on both sides of a call: vLLM's longcat (Hermes) parser drops the text after the call; chatparse "
        "keeps both, joined by a blank line as the corpus expects (the source leaves the content unasserted). "
        "chatparse is right: the text after the call is the model's answer."),
    "longcat-vllm-malformed-0@streamed": (
        "Malformed (cut off inside the arguments): streamed vLLM serves a call 'func' with arguments '{' (invalid "
        "JSON); one-shot it keeps the text, as chatparse does (serving on_error: content). chatparse is right."),
    "longcat-vllm-malformed-1@streamed": (
        "Malformed ('invalid json' after <longcat_tool_call>): streamed vLLM drops it (content 'Some text with'); "
        "one-shot it keeps the text, as chatparse does. chatparse is right."),
    # ---- minimax_m2
    "minimax_m2-vllm-plain-content": PROMPT_BLIND_MINIMAX,
    "minimax_m2-vllm-content-before-call": PROMPT_BLIND_MINIMAX,
    # ---- mistral_v11
    "mistral_v11-llamacpp-call-marker-in-reasoning": (
        "[TOOL_CALLS] written inside [THINK]...[/THINK]: vLLM's mistral parser takes it as a call (reasoning cut "
        "there, a second call; streamed, the first call's arguments run on to '... and more[/THINK]', invalid "
        "JSON); chatparse keeps it in reasoning and serves the one call after [/THINK], as the source (llama.cpp) "
        "expects. chatparse is right."),
    "mistral_v11-llamacpp-small32-call-id": (
        "Mistral-Small-3.2 writes [CALL_ID]<id> between the name and [ARGS]: vLLM's mistral parser serves "
        "'special_function[CALL_ID]123456789' as the function name; chatparse's template reads the name and skips "
        "the id. chatparse is right."),
    # ---- phi4_mini
    **{f"phi4_mini-vllm-{k}@streamed": PHI4_NO_STREAMING
       for k in ("no-tool-calls", "single-tool-call", "parallel-tool-calls", "empty-arguments", "escaped-strings",
                 "malformed-0")},
    "phi4_mini-vllm-various-data-types": (
        "One-shot, vLLM's phi4_mini_json regex functools\\[(.*?)\\] stops at the first ']' (inside the arguments' "
        "array), the JSON fails and vLLM serves nothing: no call, no content. Streamed: " + PHI4_NO_STREAMING
        + " chatparse serves the call, as the source expects."),
    "phi4_mini-vllm-surrounding-text": (
        "One-shot, vLLM's phi4_mini_json parser drops all text once it finds a call (content None); chatparse "
        "keeps the text before and after, as the source expects. Streamed: " + PHI4_NO_STREAMING),
    # ---- qwen3
    "qwen3-sglang-two-calls-one-block": (
        "Malformed (two JSON objects, comma-separated, in one <tool_call>): one-shot vLLM's hermes parser fails "
        "the JSON and serves the block as content; streamed it serves one call whose arguments run on over the "
        "second object (invalid JSON). chatparse's serving-grade template serves both calls, as the source "
        "(SGLang) expects. chatparse is right."),
    # ---- qwen3_coder
    "qwen3_coder-vllm-call-inside-think-trailing-text@one-shot": (
        "A call inside <think>, then </think> and text: one-shot vLLM drops the text after </think>; streamed it "
        "keeps it, as chatparse does both ways and the source expects. vLLM is wrong (its modes disagree)."),
    # ---- seed_oss
    "seed_oss-vllm-budget-unlimited": (
        "The model quotes the call format inside its reasoning (<seed:tool_call>...</seed:tool_call> in "
        "<seed:think>): vLLM's seed_oss parser (Qwen3's engine, a tool-call opener ends reasoning) takes the quote "
        "as a real call: reasoning cut there, the call served twice, and streamed the rest of the reasoning served "
        "as content. chatparse ends reasoning only at </seed:think> and serves the one real call, as the source "
        "expects. chatparse is right."),
    # ---- smollm3
    "smollm3-transformers-call-no-thinking": PROMPT_BLIND_R1,
    "smollm3-model-card-xml-tools": PROMPT_BLIND_R1,
    # ---- step3
    **{f"step3-vllm-{k}": PROMPT_BLIND_STEP3
       for k in ("no-tool-calls", "single", "parallel", "various-untyped", "empty-arguments", "escaped-strings",
                 "whitespace-preserved-0", "whitespace-preserved-1", "whitespace-preserved-2")},
    "step3-vllm-surrounding-text": PROMPT_BLIND_STEP3,
    # ---- xlam
    "xlam-vllm-think-tag": (
        "<think>...</think> before the call list: vLLM has no reasoning parser for xLAM (none registered), so its "
        "xlam parser serves '<think>...</think>' as content (and, streamed, arguments beginning '{{', invalid "
        "JSON); chatparse's xlam template has a reasoning field and serves it as reasoning, as the source's "
        "message does once reasoning is parsed. chatparse is right."),
    **{f"xlam-vllm-{k}@streamed": XLAM_STREAM_ARGS
       for k in ("parallel", "list-structure", "json-code-block", "tool-calls-tag", "tool-call-xml-tags")},
}

MODES = ("one-shot", "streamed")
CASES = [(family, case) for family in sorted(vf.HANDWRITTEN) for case in vf.corpus(family)]


def known(case_id: str, mode: str) -> str | None:
    return KNOWN_DIFFERENCES.get(case_id) or KNOWN_DIFFERENCES.get(f"{case_id}@{mode}")


@functools.cache
def _sides(family: str):
    tok = vf.family_tokenizer(family)
    try:
        theirs = vf.vllm_parser_cls(family, tok)
    except (ImportError, TypeError) as exc:
        if "cohere_melody" in repr(exc) or "cohere_melody" in repr(exc.__cause__):
            need("cohere_melody", "vLLM's cohere parser imports it (.ci/run installs it in the vLLM venv)")
        raise
    return tok, vf.chatparse_parser_cls(family, tok), theirs


def test_known_differences_name_corpus_cases():
    ids = {case["id"] for _, case in CASES}
    for key in KNOWN_DIFFERENCES:
        case_id, _, mode = key.partition("@")
        assert case_id in ids, key
        assert mode in ("", *MODES), key


@pytest.mark.parametrize("family", sorted(vf.HANDWRITTEN))
def test_plugin_serves_without_response_template(family):
    """The chatparse side is the class vLLM's server builds from ``--tool-call-parser chatparse
    --reasoning-parser chatparse`` and a tokenizer whose config holds no response_template (the plugin resolves
    the family's template from the tokenizer's name), not the harness's explicit-template fallback."""
    _sides(family)
    assert vf.chatparse_construction[family] == "server", vf.chatparse_construction[family]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("family", "case"), CASES, ids=[case["id"] for _, case in CASES])
def test_plugin_matches_handwritten(family, case, mode, request):
    reason = known(case["id"], mode)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, reason=reason))
    tok, ours, theirs = _sides(family)
    req = vf.request_for(family, case)
    a = vf.run_case(ours, tok, case, streamed=mode == "streamed", request=req)
    b = vf.run_case(theirs, tok, case, streamed=mode == "streamed", request=req)
    assert vf.same_message(a, b), f"{case['output']!r}\nchatparse: {a}\nvLLM:      {b}"


# --------------------------------------------------------------------------------------------------------------
# Generated outputs
# --------------------------------------------------------------------------------------------------------------
# Text without the formats' markup characters (generated text never spells a delimiter), arguments of any
# JSON shape; names unique per tool.
_TEXT = st.text(alphabet=st.characters(blacklist_characters="<>[]{}|`", blacklist_categories=("Cs", "Cc")),
                max_size=30)
_WORDS = st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs", "Cc")),
                 max_size=12)
_KEY = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                    st.floats(allow_nan=False, allow_infinity=False, width=32), _WORDS)
_VALUE = st.recursive(_SCALAR, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(_KEY, c, max_size=3)),
                      max_leaves=6)
_CALLS = st.lists(st.tuples(_KEY, st.dictionaries(_KEY, _VALUE, max_size=4)), max_size=3)


def _generated(family: str, reasoning: str | None, content: str, calls: list) -> dict:
    """A case in `family`'s format: reasoning (None: none), content, then the calls."""
    if family in ("qwen3", "hermes"):
        prefix = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        out = f"<think>\n{reasoning}\n</think>\n\n" if reasoning is not None else ""
        out += content + "".join("\n<tool_call>\n" + json.dumps({"name": n, "arguments": a}, ensure_ascii=False)
                                 + "\n</tool_call>" for n, a in calls)
    elif family == "deepseek_v31":
        prefix = "<｜User｜>hi<｜Assistant｜>" + ("<think>" if reasoning is not None else "</think>")
        out = (f"{reasoning}</think>" if reasoning is not None else "") + content
        if calls:
            out += "<｜tool▁calls▁begin｜>" + "".join(
                f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{json.dumps(a, ensure_ascii=False)}<｜tool▁call▁end｜>"
                for n, a in calls) + "<｜tool▁calls▁end｜>"
    elif family == "kimi_k2":
        prefix = "<|im_user|>user<|im_middle|>hi<|im_end|><|im_assistant|>assistant<|im_middle|>"
        out = (f"<think>{reasoning}</think>" if reasoning is not None else "") + content
        if calls:
            out += "<|tool_calls_section_begin|>" + "".join(
                f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>"
                f"{json.dumps(a, ensure_ascii=False)}<|tool_call_end|>" for i, (n, a) in enumerate(calls)) \
                + "<|tool_calls_section_end|>"
    elif family == "glm47":
        prefix = "<|user|>hi<|assistant|><think>"
        out = f"{reasoning or ''}</think>{content}" + "".join(
            f"<tool_call>{n}" + "".join(
                f"<arg_key>{k}</arg_key><arg_value>"
                f"{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</arg_value>"
                for k, v in a.items()) + "</tool_call>" for n, a in calls)
    else:
        raise KeyError(family)
    expected = {"role": "assistant"}
    if reasoning:
        expected["reasoning_content"] = reasoning
    if calls:
        expected["tool_calls"] = [{"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]
    return {"id": "generated", "prefix": prefix, "output": out, "expected": expected}


@pytest.mark.parametrize("family", ["qwen3", "hermes", "glm47", "deepseek_v31", "kimi_k2"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(reasoning=st.one_of(st.none(), _TEXT), content=_TEXT, calls=_CALLS, streamed=st.booleans())
def test_generated_outputs_agree(family, reasoning, content, calls, streamed):
    if family == "hermes":
        reasoning = None  # Hermes-2-Pro / Hermes-3 / Qwen2.5 do not reason (no reasoning parser on vLLM's side)
    tok, ours, theirs = _sides(family)
    case = _generated(family, reasoning, content, calls)
    req = vf.request_for(family, case)
    a = vf.run_case(ours, tok, case, streamed=streamed, request=req)
    b = vf.run_case(theirs, tok, case, streamed=streamed, request=req)
    assert vf.same_message(a, b), f"{case['output']!r}\nchatparse: {a}\nvLLM:      {b}"
