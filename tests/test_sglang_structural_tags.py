"""The structural tag chatparse's SGLang plugin hands SGLang 0.5.23 for a request's tool calls (issue #39).

`ChatparseToolDetector.get_structural_tag` hands SGLang's own derivation where it derives a call tag, else
chatparse's export (its docstring states the rule; bench/sglang_structural_tags.py measures both sides on every
bundled family and writes bench/results/SGLANG_STRUCTURAL_TAGS.md). Checked here with the real SGLang and the
real xgrammar (no stand-ins), for every bundled family as the plugin resolves it (its serving-grade template):

* the tag the plugin hands over (a strict request with automatic tool choice, at the message start) goes the way
  SGLang sends it (`StructuralTag` dumped by alias, JSON, SGLang's sanitizing), xgrammar compiles it, and its
  matcher accepts every well-formed corpus output the served template parses as its source expects (the part
  of it the grammar governs: after the reasoning where the prompt leaves the reasoning open), except those
  `bench.sglang_structural_tags.why_rejected` explains, which it must reject (so the reasons stay true);
* it rejects malformed calls made from an output it accepts: a tool name not in the tools, and JSON arguments
  made invalid where the family reads arguments as JSON (`check_malformed`);
* SGLang's own request handling (`FunctionCallParser.get_structure_constraint`) installs it for
  ``tool_choice="required"`` and for a named tool, and then parses the output with the plugin
  (`owns_tool_format`); a family without a tag falls back to SGLang's generic JSON constraint;
* the rule's other side: a template SGLang's derivation handles keeps SGLang's tag;
* end to end through SGLang's OpenAI chat serving class (`OpenAIServingChat.handle_request`, on the scripted
  engine of tests/test_sglang_e2e.py): a required tool choice puts the plugin's tag into the request's sampling
  parameters, SGLang's own xgrammar backend (`XGrammarGrammarBackend`, on the served tokenizer) accepts the
  output token by token and refuses it calling an unknown tool, and the served response holds the call.

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so:

    ~/.cache/chatparse/venv-sglang/bin/python -m pytest tests/test_sglang_structural_tags.py
"""

from __future__ import annotations

import json
import logging

import pytest
from deps import need_sglang

need_sglang()
xgrammar = need_sglang("xgrammar")

from sglang.srt.entrypoints.openai.protocol import Tool, ToolChoice  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402

from bench import sglang_structural_tags as st  # noqa: E402
from chatparse.integrations import sglang as plugin  # noqa: E402

logging.getLogger("sglang").setLevel(logging.CRITICAL)
plugin.register()

FAMILIES = st.families()
# Families the plugin hands no call tag for, and why. Each must stay so (the test fails once one gets a tag).
NO_CALL_TAG = {
    "kimi_vl_think": "no tool-call field: the plugin's tool detector passes text through",
    "minimax_m1": "the export refuses it (structural_tag.Unconstrainable): its call closer can match between "
                  "JSON tokens, which a json_schema element does not limit",
    "mistral_v11": "xgrammar 0.2.7 cannot compile chatparse's tag (RuntimeError 'bitset::set' on the opener's "
                   "regex, a negated class with non-ASCII members), so the plugin does not hand it over",
}


def _tools(names=("get_weather",), strict=True) -> list[Tool]:
    return [Tool(type="function", function={
        "name": name, "strict": strict, "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"]}}) for name in names]


def _parser(family: str, tools: list[Tool], tool_choice=None) -> FunctionCallParser:
    with st._operator_choice(family):
        return FunctionCallParser(tools, plugin.NAME, tokenizer=st.tokenizer(family), tool_choice=tool_choice)


def test_every_bundled_family_is_covered():
    assert set(NO_CALL_TAG) <= set(FAMILIES)
    assert len(FAMILIES) >= 36


@pytest.mark.parametrize("family", FAMILIES)
def test_handed_tag_accepts_the_corpus(family):
    used, _ = st.cases(family)
    assert used or family in NO_CALL_TAG, f"{family}: no corpus output to check"
    for case in used:
        tools = st.strict_tools(family, case)
        tag = st.handed_tag(family, tools)
        if tag is None:
            assert family in NO_CALL_TAG, f"{case['id']}: the plugin hands no tag"
            continue
        assert st.compile_error(tag) is None, (case["id"], st.compile_error(tag))
        why = st.why_rejected(family, case)
        accepted = st.accepts(tag, st.governed(family, case))
        if why is None:
            assert accepted, f"{case['id']}: the plugin's tag rejects a well-formed output\n{case['output']!r}"
        else:
            assert not accepted, f"{case['id']} is accepted now: the reason ({why}) is no longer true"


@pytest.mark.parametrize("family", FAMILIES)
def test_handed_tag_rejects_malformed_calls(family):
    results, source = st.check_malformed(family, st.handed_tag)
    if family in NO_CALL_TAG:
        assert not results, f"{family} gets a call tag now: take it out of NO_CALL_TAG ({source})"
        return
    assert results, f"{family}: no output with a call to make malformed calls from"
    assert "unknown name" in results, (family, source)
    assert all(results.values()), f"{family}: a malformed call is accepted ({results}, from {source})"


@pytest.mark.parametrize("family", FAMILIES)
def test_sglang_installs_the_tag_for_forced_calls(family):
    """SGLang's own request handling: for a required or named tool choice the plugin's tag, and its output
    parsed by the plugin (`owns_tool_format`); without a tag, SGLang's generic JSON constraint."""
    tools = _tools(("get_weather", "get_time"))
    for choice in ("required", ToolChoice(function={"name": "get_time"})):
        parser = _parser(family, tools, tool_choice=choice)
        constraint = parser.get_structure_constraint(choice)
        if family in NO_CALL_TAG:
            assert constraint is not None and constraint[0] == "json_schema", constraint
            assert not parser.owns_tool_format()
            continue
        assert constraint is not None and constraint[0] == "structural_tag", (family, constraint)
        wired = st.wire(constraint[1].model_dump(by_alias=True))
        assert st.compile_error(json.loads(wired)) is None
        assert parser.owns_tool_format()
        tag = json.loads(wired)
        # a named choice holds calls to that tool: the other tool's name is not in the tag
        text = json.dumps(tag)
        assert "get_time" in text
        assert ("get_weather" in text) == (choice == "required"), (family, choice)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f not in NO_CALL_TAG])
def test_strict_automatic_choice_gets_the_tag(family):
    """Automatic tool choice is left unconstrained unless a tool is strict; with one, the tag; with
    parallel_tool_calls=False SGLang's own refusal stands (the tag cannot hold one call only)."""
    loose = _parser(family, _tools(strict=False))
    assert loose.get_structure_constraint("auto") is None
    strict = _parser(family, _tools())
    constraint = strict.get_structure_constraint("auto")
    assert constraint is not None and constraint[0] == "structural_tag"
    with pytest.raises(ValueError, match="parallel_tool_calls=False"):
        strict.get_structure_constraint("auto", parallel_tool_calls=False)


def test_no_tools_no_call_tag():
    """Without tools nothing can be required: no tag, and SGLang is not told the output is in the template's
    format; without calls allowed, chatparse's tag holds no call."""
    detector = _parser("qwen3", []).detector
    assert detector.get_structural_tag(tools=[], tool_choice="required") is None
    assert not detector.supports_structural_tag()
    tag = detector.get_structural_tag(tools=_tools(), tool_choice="none").model_dump(by_alias=True)
    assert st.accepts(tag, "Just an answer.")
    assert not st.accepts(tag, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>')


# A template SGLang's derivation handles: literal call delimiters, the function named by the opener, JSON
# arguments.
DERIVABLE = {
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {"open_pattern": "<function=(?P<name>[A-Za-z_][A-Za-z0-9_]*)>", "close": "</function>",
                       "repeats": True, "content": "json",
                       "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}},
        "content": {},
    }
}


def test_sglang_keeps_its_own_tag_where_it_derives_one():
    from sglang.srt.function_call.response_template_structural_tag import tool_call_structural_tag

    tokenizer = st.sf.Tokenizer("/models/derivable", DERIVABLE)
    detector = FunctionCallParser(_tools(), plugin.NAME, tokenizer=tokenizer).detector
    model = plugin._model(tokenizer, None)
    tools = [t.model_dump() for t in _tools()]
    theirs = tool_call_structural_tag(model.derived.source.fields["tool_calls"], tools, parallel_tool_calls=True,
                                      grammar_requires_reasoning=True)
    assert theirs is not None
    handed = detector.get_structural_tag(tools=_tools(), tool_choice="required")
    assert handed.model_dump(by_alias=True) == type(handed).model_validate(theirs).model_dump(by_alias=True)
    mine = plugin.chatparse_structural_tag(model, tools, tool_choice="required")
    assert mine is not None and mine != theirs  # chatparse's exists too: the rule chose SGLang's
    good = '<function=get_weather>{"city": "Paris"}</function>'
    assert st.accepts(handed.model_dump(by_alias=True), good)
    assert not st.accepts(handed.model_dump(by_alias=True), good.replace("get_weather", st.UNKNOWN))


# ---- end to end: SGLang's OpenAI chat serving class, tests/test_sglang_e2e.py's scripted engine
@pytest.fixture(scope="module")
def served(tmp_path_factory):
    import test_sglang_e2e as e2e
    from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest

    class RecordingEngine(e2e.ScriptedEngine):
        def __init__(self, server_args):
            super().__init__(server_args)
            self.sampling_params: list = []

        async def generate_request(self, request, raw_request):
            self.sampling_params.append(dict(request.sampling_params or {}))
            async for out in super().generate_request(request, raw_request):
                yield out

    model_dir = e2e._model_dir(tmp_path_factory.mktemp("sglang_tags") / "ft-checkpoint", None)
    chat, engine = e2e._serve(model_dir, plugin.NAME, RecordingEngine)
    out = {"engine": engine, "output": e2e.OUTPUT}
    for stream in (False, True):
        request = ChatCompletionRequest(model="m", messages=e2e.MESSAGES, tools=e2e.TOOLS, tool_choice="required",
                                        stream=stream)
        out["stream" if stream else "response"] = e2e.serve_request(chat, request)
    return out


def test_served_required_choice_gets_the_plugins_tag(served):
    one_shot, streamed = served["engine"].sampling_params
    assert one_shot.get("structural_tag") == streamed.get("structural_tag")
    assert "structural_tag" in one_shot, one_shot
    tag = json.loads(one_shot["structural_tag"])
    assert st.compile_error(tag) is None
    # the tag SGLang installed accepts the scripted output and is the plugin's (its call opener, its tool)
    assert st.accepts(tag, served["output"])
    assert not st.accepts(tag, served["output"].replace("get_weather", st.UNKNOWN))
    assert "<tool_call>" in json.dumps(tag) and "get_weather" in json.dumps(tag)


def test_served_required_choice_answers_with_the_call(served):
    """Under chatparse's tag, the plugin's parser reads the call (SGLang's interpreter on the serving-grade
    view drops it: `sglang_holds_calls`), one-shot and streamed."""
    import test_sglang_e2e as e2e

    (choice,) = served["response"].choices
    calls = [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or ()]
    assert calls == [("get_weather", {"city": "Paris"})]
    assert choice.finish_reason == "tool_calls"
    reasoning, content, streamed_calls, finish = e2e._joined(e2e._deltas(served["stream"]))
    assert streamed_calls == calls and finish == "tool_calls"
    assert reasoning.strip() == choice.message.reasoning_content.strip()
    assert content.strip() == choice.message.content.strip()


def _feed(grammar, ids: list[int]) -> bool:
    """Feed token ids to SGLang's grammar object; False at the first it refuses."""
    for token in ids:
        try:
            grammar.accept_token(token)
        except ValueError:
            return False
    return True


def test_served_tag_in_sglangs_xgrammar_backend(served):
    """The tag SGLang installed, compiled by SGLang's own xgrammar backend on the served model's tokenizer:
    the scripted output's token ids are accepted one by one, then the end-of-turn token ends it; the same output
    calling a tool not in the request is refused at a token."""
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    tokenizer = served["engine"].tokenizer
    eos = tokenizer.eos_token_id
    backend = XGrammarGrammarBackend(tokenizer, vocab_size=len(tokenizer), model_eos_token_ids=[eos])
    key = served["engine"].sampling_params[0]["structural_tag"]
    grammar = backend.dispatch_structural_tag(key)
    assert type(grammar).__name__ == "XGrammarGrammar", grammar  # not SGLang's InvalidGrammarObject
    assert _feed(grammar, tokenizer.encode(served["output"], add_special_tokens=False))
    assert not grammar.is_terminated()
    assert _feed(grammar, [eos]) and grammar.is_terminated()
    bad = backend.dispatch_structural_tag(key)
    assert not _feed(bad, tokenizer.encode(served["output"].replace("get_weather", st.UNKNOWN),
                                           add_special_tokens=False))
