"""The bundled templates (`chatparse.templates`) against the format corpus (tests/data).

For each of the corpus's model families and each of its cases (`tests/data/corpus.json`, loaded by
`corpus_cases`):

* the bundled template equals the corpus template (values, types and key order) - except for the families in
  `FIXED_FAMILIES`, whose templates were changed on purpose (issue #17: gaps real outputs fell into, pinned by
  tests/test_template_gaps.py); for those, every corpus case of the family must still give its expected
  message, with chatparse and with the reference, and the template must really differ from the corpus's;
* `chatparse.parse_response(output, template, prefix=...)` returns exactly the expected message;
* streaming: the output fed in several seeded chunkings (whole, 1 character at a time, random small and
  large pieces with empty feeds interleaved) gives exactly the expected message from `finalize()`; the event
  stream (`initial_events` + every `feed` + final events) is well formed - `region_open`, then that region's
  `region_chunk`s, then its `region_close`, never nested or interleaved - and each region's chunk texts join
  to its raw body, and its close value is the region's value, both as the reference reports them for the
  unsplit output;
* the reference (transformers' `parse_response`) returns the expected message too. Where it does not, the
  case is listed in `REFERENCE_GIVES` with what it does return, and that is asserted instead.

Known chatparse failures are `xfail(strict=True)` with the reason (see `XFAIL`), so a fix shows up as XPASS.
"""

from __future__ import annotations

import json
import random
import zlib

import pytest
from deps import need

import corpus_cases as cc
from chatparse import ResponseParser, compile_template, parse_response, templates

CORPUS = cc.load()
CASES = CORPUS.cases

# Known chatparse failures: test kind ("oneshot" / "stream") -> case id -> (reason, expected exception class).
XFAIL: dict[str, dict[str, tuple[str, type]]] = {"oneshot": {}, "stream": {}}

# Cases where the reference does NOT return the corpus's expected message: case id -> what it returns.
# (Empty: transformers 5.23.0 reproduces every expected message of the corpus.)
REFERENCE_GIVES: dict[str, dict] = {}

# Families whose bundled template was changed on purpose from the corpus template: name -> why.
# (The corpus keeps the templates as they were verified; these changes keep every corpus case's message.)
_JOIN = ("content on both sides of a tool call is kept: the implicit content field repeats and joins its "
         "segments with a blank line (a later segment overwrote the earlier one)")
_EOS_WS = "the content close ends in \\s*, so whitespace after the end-of-turn token does not blank the content"
_TOOL_WS = ("the tool-call close ends in \\s*, so whitespace after the end-of-turn token that closes the call "
            "does not blank the content")
_THINK_WS = ("the reasoning open takes the whitespace before it (\\s*<think>), so that whitespace is no content "
             "segment of its own (joined, it would lead the content with a blank line)")
_XML = ("an argument value ends at its closing tag only where the next tag follows (after text without a '<') or "
        "no later closing tag does, so a value holding the tag is whole")
FIXED_FAMILIES: dict[str, str] = {
    **{name: _JOIN for name in ("deepseek_v3", "minimax_m1")},
    **{name: f"{_JOIN}; {_THINK_WS}" for name in ("deepseek_r1", "deepseek_v31", "step3")},
    "kimi_k2": (f"{_JOIN}; {_THINK_WS}; the reasoning also ends where a call begins, and a call without "
                "<|tool_call_end|> where the next begins (calls inside the reasoning without section markers)"),
    **{name: f"{_JOIN}; {_EOS_WS}" for name in ("functiongemma", "granite4", "hermes", "internlm2", "longcat")},
    "jamba": (f"{_JOIN}; {_EOS_WS}; the start anchor is Jamba's generation prompt <|bom|><|assistant|> (the corpus's "
              "is Granite's <|start_of_role|>assistant<|end_of_role|>: a Jamba prompt came back as content)"),
    **{name: f"{_JOIN}; {_EOS_WS}; {_THINK_WS}" for name in ("lfm2", "nemotron_json", "qwen3", "smollm3")},
    **{name: f"{_EOS_WS}; {_TOOL_WS}" for name in ("granite_20b_fc", "mistral_pre_v11", "phi4_mini", "xlam")},
    "granite3": f"{_EOS_WS}; {_TOOL_WS}; {_THINK_WS}",
    "kimi_vl_think": f"{_EOS_WS}; {_THINK_WS}",
    "llama3_json": _EOS_WS,
    "mistral_v11": (f"a call with an id, [TOOL_CALLS]name[CALL_ID]id[ARGS]{{json}}, is a tool call; {_EOS_WS}; "
                    f"{_TOOL_WS}; {_THINK_WS}"),
    "deepseek_v32": f"{_JOIN}; {_THINK_WS}; {_XML}",
    "ernie45": ("content segments around a tool call or a <response> marker join with a blank line, not glued "
                f"(join ''); {_THINK_WS}"),
    "hunyuan_a13b": ("content segments around a tool call or an <answer> marker join with a blank line, not glued "
                     f"(join ''); {_THINK_WS}"),
    "gemma4": (f"{_JOIN}; the content close is a pattern ending in \\s* (was a literal list), and the reasoning and "
               "tool-call delimiters take the whitespace on their content side, so whitespace between them is no "
               "content segment; the thought channel opens on one or more <|channel> with or without its 'thought' "
               "label, and a stray <channel|> ends a content segment"),
    "glm45": f"{_JOIN}; {_EOS_WS}; {_XML}",
    "glm47": f"{_JOIN}; {_EOS_WS}; {_XML}",
    "qwen3_coder": (f"{_JOIN}; {_EOS_WS}; {_THINK_WS}; {_XML}; a </think> in the content (after a call written "
                    "inside the reasoning) ends a content segment"),
    "seed_oss": f"{_JOIN}; {_EOS_WS}; {_THINK_WS}; {_XML}",
    "minimax_m2": f"{_XML} (content keeps join '': a stray </think> inside the answer must glue, corpus case 2)",
    "gpt_oss": ("content opens on a final channel whose header holds <|constrain|> (structured output), and on a "
                "recipient-less commentary preamble; content messages join with a blank line"),
    "gigachat3": (f"GigaChat 3.1's <|function_call|>{{json}}<|message_sep|> is a tool call (open and close); "
                  f"{_EOS_WS}"),
}

FIXED_SIZES = (1, 2, 3, 7)  # fixed-width chunkings ("1-char" feeds one character at a time)
N_RANDOM_SMALL = 6  # random chunkings with pieces of 1..7 characters
N_RANDOM_LARGE = 2  # random chunkings with pieces up to a third of the output


def _params(kind: str | None = None):
    out = []
    for case in CASES:
        known = XFAIL.get(kind, {}).get(case.id) if kind else None
        marks = [pytest.mark.xfail(strict=True, reason=known[0], raises=known[1])] if known else []
        out.append(pytest.param(case, id=case.id, marks=marks))
    return out


def _family_params():
    return [pytest.param(name, id=name) for name in sorted(CORPUS.templates)]


_compiled: dict[str, object] = {}


def _compiled_template(name: str):
    if name not in _compiled:
        _compiled[name] = compile_template(templates.get(name))
    return _compiled[name]


def _mismatch(what: str, case: cc.Case, got, want, extra: str = "") -> str:
    return (f"{what} [{case.id}]{extra}\n  prefix:   {case.prefix[-120:]!r}\n  output:   {case.output!r}\n"
            f"  expected: {cc.show(want)}\n  got:      {cc.show(got)}")


# --------------------------------------------------------------------------------------- templates package


def test_corpus_families_all_bundled():
    assert not CORPUS.unmapped, f"corpus families with no bundled template name: {CORPUS.unmapped}"
    assert sorted(CORPUS.templates) == templates.names()


def test_names_sorted_and_match_family_table():
    names = templates.names()
    assert names == sorted(names) and len(names) == len(set(names))
    assert names == sorted(cc.FAMILY_NAMES)


def test_get_returns_deep_copy():
    a = templates.get("hermes")
    a["fields"]["content"]["close_pattern"] = "changed"
    a["defaults"]["role"] = "changed"
    b = templates.get("hermes")
    assert b["fields"]["content"]["close_pattern"] != "changed" and b["defaults"]["role"] == "assistant"
    assert templates.get("hermes") is not templates.get("hermes")


def test_get_unknown_name_lists_available():
    with pytest.raises(KeyError) as info:
        templates.get("no-such-family")
    msg = str(info.value)
    assert "no-such-family" in msg
    assert all(name in msg for name in templates.names())


def test_every_bundled_template_compiles_or_is_known_failure():
    """Each bundled template compiles in chatparse, apart from known failures listed in XFAIL."""
    failures = {}
    for name in templates.names():
        try:
            compile_template(templates.get(name))
        except Exception as err:  # noqa: BLE001
            failures[name] = f"{type(err).__name__}: {err}"
    known = {case_id.rsplit("-", 1)[0] for case_id in XFAIL["oneshot"]}
    assert set(failures) <= known, f"unexpected compile failures: {failures}"


@pytest.mark.parametrize("name", _family_params())
def test_bundled_template_equals_corpus(name):
    bundled = templates.get(name)
    corpus = CORPUS.templates[name]
    if name in FIXED_FAMILIES:
        _check_fixed_family(name, bundled, corpus)
        return
    assert cc.strict_equal(bundled, corpus), f"{name}: bundled {cc.show(bundled)}\n!= corpus {cc.show(corpus)}"
    # key order too, at every level (strict_equal checks it; the serialised form makes a diff readable)
    assert json.dumps(bundled, ensure_ascii=False) == json.dumps(corpus, ensure_ascii=False)


def test_fixed_families_are_bundled_names():
    assert set(FIXED_FAMILIES) <= set(templates.names()), set(FIXED_FAMILIES) - set(templates.names())


def _check_fixed_family(name: str, bundled: dict, corpus: dict) -> None:
    """A deliberately changed template: it differs from the corpus's, and gives every corpus case of its family
    the expected message, one-shot in chatparse and in the reference (the cases' own tests stream them too)."""
    assert not cc.strict_equal(bundled, corpus), f"{name} equals the corpus template again: drop it from FIXED_FAMILIES"
    cases = [case for case in CASES if case.name == name]
    assert cases, f"no corpus cases for {name}"
    ref = need("transformers.utils.chat_parsing")
    for case in cases:
        for who, parse in (("chatparse", parse_response), ("reference", ref.parse_response)):
            got = parse(case.output, templates.get(name), prefix=case.prefix, tools=case.tools)
            want = case.expected if who == "chatparse" else REFERENCE_GIVES.get(case.id, case.expected)
            assert cc.strict_equal(got, want), _mismatch(f"{who} with the changed {name} template "
                                                         f"({FIXED_FAMILIES[name]})", case, got, want)


# ------------------------------------------------------------------------------------------------ one-shot


@pytest.mark.parametrize("case", _params("oneshot"))
def test_oneshot(case: cc.Case):
    got = parse_response(case.output, templates.get(case.name), prefix=case.prefix, tools=case.tools)
    assert cc.strict_equal(got, case.expected), _mismatch("chatparse parse_response", case, got, case.expected)


# ----------------------------------------------------------------------------------------------- streaming


def _chunkings(case: cc.Case) -> list[tuple[str, list[str]]]:
    text = case.output
    out = [("whole", [text])]
    out += [(f"{n}-char", [text[i:i + n] for i in range(0, len(text), n)]) for n in FIXED_SIZES]
    for k in range(N_RANDOM_SMALL + N_RANDOM_LARGE):
        rng = random.Random(zlib.crc32(f"{case.id}:{k}".encode()))
        top = 7 if k < N_RANDOM_SMALL else max(1, len(text) // 3)
        chunks, i = [], 0
        while i < len(text):
            n = rng.randint(1, top)
            chunks.append(text[i:i + n])
            i += n
            if rng.random() < 0.1:
                chunks.append("")  # an empty feed must be a no-op
        out.append((f"random{k}(seed={case.id}:{k},max={top})", chunks))
    return out


def _regions(events: list[dict], where: str) -> list[tuple[str, str, object]]:
    """Check the event stream is well formed; return its regions as (field, joined chunk texts, close value)."""
    regions = []
    current = None  # (field, [texts])
    for n, ev in enumerate(events):
        kind = ev.get("type")
        at = f"{where}: event #{n} {ev!r}"
        if kind == "region_open":
            assert current is None, f"{at} opens while region {current[0]!r} is still open"
            assert isinstance(ev.get("field"), str), at
            current = (ev["field"], [])
        elif kind == "region_chunk":
            assert current is not None, f"{at} outside any region"
            assert ev["field"] == current[0], f"{at} inside region {current[0]!r}"
            assert isinstance(ev.get("text"), str) and ev["text"], f"{at}: chunk text must be a non-empty str"
            current[1].append(ev["text"])
        elif kind == "region_close":
            assert current is not None, f"{at} closes with no region open"
            assert ev["field"] == current[0], f"{at} closes region {current[0]!r}"
            assert "value" in ev, at
            regions.append((current[0], "".join(current[1]), ev["value"]))
            current = None
        else:
            raise AssertionError(f"{at}: unknown event type")
    assert current is None, f"{where}: region {current[0]!r} never closed"
    return regions


_reference_regions: dict[str, list] = {}


def _reference_bodies(case: cc.Case) -> list[tuple[str, str, object]]:
    """Regions of the reference parser fed the unsplit output (its `parse_response` path)."""
    if case.id not in _reference_regions:
        from transformers.utils.chat_parsing import ResponseParser as RefParser

        ref = RefParser(templates.get(case.name), prefix=case.prefix, tools=case.tools)
        events = list(ref.initial_events)
        events += ref.feed(case.output)
        _, final = ref.finalize()
        _reference_regions[case.id] = _regions(events + final, "reference")
    return _reference_regions[case.id]


@pytest.mark.parametrize("case", _params("stream"))
def test_streaming(case: cc.Case):
    need("transformers.utils.chat_parsing")
    want_regions = _reference_bodies(case)
    compiled = _compiled_template(case.name)
    for label, chunks in _chunkings(case):
        where = f"chatparse stream {label}"
        parser = ResponseParser(compiled, prefix=case.prefix, tools=case.tools)
        events = list(parser.initial_events)
        for chunk in chunks:
            events += parser.feed(chunk)
        message, final = parser.finalize()
        extra = "" if label == "whole" or label.endswith("-char") else f" chunks={chunks!r}"
        assert cc.strict_equal(message, case.expected), _mismatch(where, case, message, case.expected, extra)
        got_regions = _regions(events + final, where)
        got_bodies = [(f, body) for f, body, _ in got_regions]
        want_bodies = [(f, body) for f, body, _ in want_regions]
        assert got_bodies == want_bodies, _mismatch(f"{where}: region bodies", case, got_bodies, want_bodies, extra)
        got_values = [v for _, _, v in got_regions]
        want_values = [v for _, _, v in want_regions]
        assert cc.strict_equal(got_values, want_values), _mismatch(
            f"{where}: region_close values", case, got_values, want_values, extra)


# ---------------------------------------------------------------------------------------------- reference


@pytest.mark.parametrize("case", _params())
def test_reference(case: cc.Case):
    ref = need("transformers.utils.chat_parsing")
    got = ref.parse_response(case.output, templates.get(case.name), prefix=case.prefix, tools=case.tools)
    want = REFERENCE_GIVES.get(case.id, case.expected)
    assert cc.strict_equal(got, want), _mismatch("reference parse_response", case, got, want)
    if case.id in REFERENCE_GIVES:
        assert not cc.strict_equal(got, case.expected), f"{case.id}: reference now matches; drop REFERENCE_GIVES"
