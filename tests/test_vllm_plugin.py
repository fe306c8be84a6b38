"""chatparse's vLLM plugin against vLLM 0.33.0's own response-template parser.

Claim under test: `CompiledResponseTemplateParser`, selected by the name ``chatparse`` through vLLM's own
parser manager, returns the same `DeltaMessage`s as vLLM's `ResponseTemplateParser` (selected as ``hf``) for
the same real requests (`ChatCompletionRequest` with tools, tool_choice, include_reasoning) and the same token
streams of a real tokenizer (trained here with `tokenizers`), split into deltas in many ways (reasoning-end detection and reasoning-token counting:
tests/test_vllm_reasoning.py). Tool-call ids are made deterministic in both
(vLLM's ``kimi_k2`` id type) so that they can be compared.

Runs where vllm==0.33.0 is installed (`.ci/run` runs it in the venv it makes for vLLM); skips elsewhere.
"""

from __future__ import annotations

import json
import random

import pytest

from deps import need_vllm  # noqa: E402

need_vllm("vllm.parser.response_template")  # installed only in the venv .ci/run makes

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402
from vllm.parser.response_template import _decode  # noqa: E402

from chatparse import compile_template, templates  # noqa: E402
from chatparse.integrations import vllm as plugin  # noqa: E402

FAMILIES = ["qwen3", "qwen3_coder", "hermes", "gpt_oss", "gemma4", "deepseek_v31", "kimi_k2", "glm45"]

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
                                      "parameters": {"type": "object", "properties": {
                                          "city": {"type": "string"}, "days": {"type": "integer"},
                                          "metric": {"type": "boolean"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "number"}}}}},
]


def _outputs():
    """Per family: (prompt, generations) written in the family's format from its bundled template's corpus
    cases where there are some, else from the samples below."""
    import corpus_cases

    out: dict = {f: [] for f in FAMILIES}
    for c in corpus_cases.load().cases:
        if c.name in out and len(out[c.name]) < 6:
            out[c.name].append((c.prefix, c.output))
    return out


OUTPUTS = _outputs()


def _training_text():
    rng = random.Random(0)
    words = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "東京", "😀", "café", "\n", "  ",
             '{"city": "Paris"}', "get_weather", "search", "<", ">", "/", "=", '"', ":", "{", "}"]
    texts = [p + o for outs in OUTPUTS.values() for p, o in outs] * 3
    for _ in range(300):
        texts.append("".join(rng.choice(words) + rng.choice([" ", "", "\n"]) for _ in range(20)))
    return texts


@pytest.fixture(scope="module")
def tokenizer():
    return trained_tokenizer()


def trained_tokenizer():
    """A byte-level BPE trained here, as a transformers fast tokenizer (what vLLM wraps for HF models)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1200, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_training_text(), trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


def _parser(name: str, tokenizer, template: dict, *, joins: bool = False):
    """The unified parser vLLM's parser manager composes for `--tool-call-parser NAME --reasoning-parser NAME`,
    constructed as vLLM's serving layer constructs it, with deterministic tool-call ids. The plugin's
    parser without `joins` leaves out the one thing it streams that vLLM's adapter does not (the field's
    join between the texts of two regions, `test_text_around_a_call_is_joined_not_glued`), so that the
    rest is compared delta for delta."""
    if name == plugin.NAME:
        plugin.register()
    cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name, enable_auto_tools=True)
    parser = cls(tokenizer, TOOLS, response_template=template)
    parser._stream_state.tool_call_id_type = "kimi_k2"
    if name == plugin.NAME:
        assert parser._binding is not None  # deltas go through the token tables
        if not joins:
            parser._joins = {}
    return parser


def _request(**kw):
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": TOOLS}
    return ChatCompletionRequest(**{**base, **kw})


def _deltas(tokenizer, ids, rng):
    """The generation split into deltas as vLLM's detokenizer hands them out: (text, ids) per delta, the text
    being what decode shows so far minus a trailing incomplete character (`rng` None: one token per delta)."""
    if rng is None:
        cuts = range(1, len(ids) + 1)
    else:
        cuts = sorted({rng.randint(1, len(ids)) for _ in range(rng.randint(0, len(ids)))} | {len(ids)})
    out, prev, shown = [], 0, ""
    for c in cuts:
        text = _decode(tokenizer, ids[:c])
        if c < len(ids):
            text = text.rstrip("\ufffd")
        out.append((text[len(shown):] if text.startswith(shown) else "", ids[prev:c]))
        shown = text if text.startswith(shown) else shown
        prev = c
    return out


def _stream(parser, request, prompt_ids, deltas):
    got = []
    for k, (text, ids) in enumerate(deltas):
        d = parser.parse_delta(text, list(ids), request, prompt_token_ids=prompt_ids, finished=k == len(deltas) - 1)
        got.append(None if d is None else d.model_dump(exclude_none=True))
    return got


def _merged(deltas):
    """Deltas joined field by field (reasoning, content, tool calls), for comparing where only the split of
    the same text into deltas differs."""
    out = {"reasoning": "", "content": "", "tool_calls": []}
    for d in deltas:
        if d:
            out["reasoning"] += d.get("reasoning", "")
            out["content"] += d.get("content", "")
            out["tool_calls"] += d.get("tool_calls", [])
    return out


def _ahead(ours: dict, theirs: dict) -> bool:
    """`ours` holds everything `theirs` holds (text fields extend it, tool calls continue its list)."""
    return (ours["reasoning"].startswith(theirs["reasoning"]) and ours["content"].startswith(theirs["content"])
            and ours["tool_calls"][:len(theirs["tool_calls"])] == theirs["tool_calls"])


def _vllm_events(served: dict, prompt: str, texts: list) -> list:
    """The delimiters vLLM's own interpreter (`vllm.parser.chat_parsing`) commits when fed `texts` after
    `prompt`: (type, field, start, end) of every event but the chunks."""
    from vllm.parser.chat_parsing.response_parser import ResponseParser

    p = ResponseParser(served, prefix=prompt)
    events = [e for t in texts for e in p.feed(t)] + p.finalize()[1]
    return [(e["type"], e.get("field"), e.get("start"), e.get("end")) for e in events if e["type"] != "region_chunk"]


REQUESTS = [dict(), dict(tool_choice="none"), dict(include_reasoning=False), dict(tool_choice="auto")]


@pytest.mark.parametrize("family", FAMILIES)
def test_deltas_match_vllm(tokenizer, family):
    template = templates.get(family)
    served = plugin.serving_template(template)
    try:
        _parser("hf", tokenizer, served)
    except (TypeError, ValueError):  # vLLM cannot serve it (gpt_oss: `join` on reasoning): the plugin can
        return _check_served_without_vllm(tokenizer, family, template)
    cases = OUTPUTS[family]
    assert cases, f"no corpus outputs for {family} in tests/data/corpus.json"
    rng = random.Random(family)
    compared = exact = split_dependent = 0
    regex_decided = not all(p.exact for p in compile_template(template).tables.patterns)
    for prefix, output in cases:
        prompt_ids = tokenizer.encode(prefix, add_special_tokens=False)
        ids = tokenizer.encode(output, add_special_tokens=False)
        for kw in REQUESTS:
            for _ in range(4):
                deltas = _deltas(tokenizer, ids, rng)
                want = _stream(_parser("hf", tokenizer, served), _request(**kw), prompt_ids, deltas)
                got = _stream(_parser(plugin.NAME, tokenizer, template), _request(**kw), prompt_ids, deltas)
                exact += got == want
                if got != want:
                    # The one sanctioned difference: vLLM's own answer depends on the split. Its interpreter,
                    # fed these deltas, commits delimiters other than for the whole output in one delta (glm45:
                    # `regex`'s partial search takes the tool-call open one character short when a delta ends
                    # inside the lookahead; README: Serving with vLLM). Then at every delta one holds what the
                    # other holds, and the end is the same: vLLM's own answer for the whole output in one
                    # delta (chatparse's does not depend on the split).
                    prompt = _decode(tokenizer, prompt_ids)
                    assert _vllm_events(served, prompt, [t for t, _ in deltas]) != _vllm_events(
                        served, prompt, [_decode(tokenizer, ids)]), (deltas, got, want)
                    split_dependent += 1
                    for k in range(len(deltas)):
                        ours, theirs = _merged(got[:k + 1]), _merged(want[:k + 1])
                        assert regex_decided and (_ahead(ours, theirs) or _ahead(theirs, ours)), (k, got, want)
                    assert _merged(got) == _merged(want) == _merged(
                        _stream(_parser("hf", tokenizer, served), _request(**kw), prompt_ids,
                                [(_decode(tokenizer, ids), ids)]))
                compared += 1
            one = _parser("hf", tokenizer, served).parse(_decode(tokenizer, ids), _request(**kw))
            mine = _parser(plugin.NAME, tokenizer, template).parse(_decode(tokenizer, ids), _request(**kw))
            assert mine == one
    assert compared
    assert exact + split_dependent == compared
    print(f"{family}: {exact} of {compared} delta streams identical to vLLM's, delta for delta; "
          f"{split_dependent} where vLLM's own events depend on the split")


def _check_served_without_vllm(tokenizer, family: str, template: dict) -> None:
    """A family vLLM's own adapter refuses (gpt_oss: its reasoning field is joined): the plugin serves it,
    streamed deltas do not depend on the split, and they give chatparse's own message (reasoning segments
    concatenated as streamed, content and tool calls as `parse_response` gives them)."""
    cases = OUTPUTS[family]
    assert cases, f"no corpus outputs for {family} in tests/data/corpus.json"
    rng = random.Random(family)
    for prefix, output in cases:
        prompt_ids = tokenizer.encode(prefix, add_special_tokens=False)
        ids = tokenizer.encode(output, add_special_tokens=False)
        whole = _merged(_stream(_parser(plugin.NAME, tokenizer, template), _request(), prompt_ids,
                                [(_decode(tokenizer, ids), ids)]))
        for _ in range(4):
            got = _stream(_parser(plugin.NAME, tokenizer, template), _request(), prompt_ids,
                          _deltas(tokenizer, ids, rng))
            assert _merged(got) == whole
        message = compile_template(template).parse(_decode(tokenizer, ids), prefix=_decode(tokenizer, prompt_ids))
        def served_args(a):
            return a if isinstance(a, str) else json.dumps(a, ensure_ascii=False)

        assert [(c["function"]["name"], c["function"]["arguments"]) for c in whole["tool_calls"]] == [
            (c["function"]["name"], served_args(c["function"]["arguments"])) for c in message.get("tool_calls", [])]
        for key, field, sep in (("content", "content", "\n\n"), ("reasoning", "reasoning_content", "\n")):
            segments = [seg.strip() for seg in (message.get(field) or "").split(sep) if seg.strip()]
            rest = whole[key]
            for seg in segments:  # each segment of the message, in order, in what was streamed
                assert seg in rest, (key, seg, whole[key])
                rest = rest[rest.index(seg) + len(seg):]


def test_text_around_a_call_is_joined_not_glued(tokenizer):
    """vLLM's adapter concatenates the content regions' chunks, so where the delimiters take the whitespace
    around a call the words run together; the plugin streams the content field's join between them, as the
    message joins them (the per-model parsers keep the model's own whitespace there)."""
    template = templates.get("qwen3")
    served = plugin.serving_template(template)
    text = 'A <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call> B'
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    ids = tokenizer.encode(text, add_special_tokens=False)
    hf = _merged(_stream(_parser("hf", tokenizer, served), _request(), prompt_ids, [(text, ids)]))
    assert hf["content"] == "AB"
    for deltas in ([(text, ids)], _deltas(tokenizer, ids, random.Random(3))):
        ours = _merged(_stream(_parser(plugin.NAME, tokenizer, template, joins=True), _request(), prompt_ids, deltas))
        assert ours["content"] == "A\n\nB" and ours["tool_calls"] == hf["tool_calls"]
    assert chatparse_message(text, template)["content"] == "A\n\nB"


def test_the_inert_path_streams_what_the_routed_path_streams(tokenizer, monkeypatch):
    """One token per delta, most text tokens take the plugin's inert path (`TokenParser.feed_inert`), outside
    vLLM's routing. It must stream exactly what those tokens give through `feed_tokens` and the routing
    (`feed_inert` refusing every token), a text field's join between its regions included (gpt_oss's two
    analysis messages: the join goes before "Second", not after "thought"). On the corpus outputs of every
    bundled family with a join, as they are and with whitespace runs added after newlines and tags."""
    import corpus_cases
    from chatparse.integrations.vllm_template import text_joins
    from chatparse.runtime.tokens.parser import TokenParser

    rng = random.Random(11)
    real = TokenParser.feed_inert
    inert = []
    seen: dict = {}
    compared = 0
    for case in corpus_cases.load().cases:
        template = templates.get(case.name) if case.name in templates.names() else None
        if template is None or not text_joins(template) or seen.get(case.name, 0) >= 8:
            continue
        seen[case.name] = seen.get(case.name, 0) + 1
        for spaced in (False, True):
            out = case.output if not spaced else "".join(
                ch + (rng.choice([" ", "\n", "  \n"]) if ch in "\n>" and rng.random() < 0.5 else "")
                for ch in case.output)
            deltas = _deltas(tokenizer, tokenizer.encode(out, add_special_tokens=False), None)
            prompt_ids = tokenizer.encode(case.prefix, add_special_tokens=False)
            streams = []
            for feed_inert in (lambda self, i: inert.append(real(self, i)) or inert[-1], lambda self, i: None):
                monkeypatch.setattr(TokenParser, "feed_inert", feed_inert)
                try:
                    streams.append(_stream(_parser(plugin.NAME, tokenizer, template, joins=True), _request(),
                                           prompt_ids, deltas))
                except (TypeError, ValueError) as exc:  # (a malformed output refused: the same either way)
                    streams.append(type(exc))
            assert streams[0] == streams[1], (case.name, out)
            compared += 1
    assert compared > 100 and sum(t is not None for t in inert) > 2000  # (the inert path carried most text)


def chatparse_message(text: str, template: dict) -> dict:
    return compile_template(template).parse(text, prefix="<|im_start|>assistant\n")


def test_plugin_registers_by_name_through_vllm_loader(monkeypatch):
    """vLLM's own plugin loader finds the entry point and registers the parsers."""
    from vllm.plugins import load_general_plugins
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    import vllm.plugins

    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    load_general_plugins()
    assert ToolParserManager.get_tool_parser("chatparse") is plugin.ChatparseToolParser
    assert ReasoningParserManager.get_reasoning_parser("chatparse") is plugin.ChatparseReasoningParser


def test_reasoning_content_templates_are_served(tokenizer):
    """vLLM refuses a template whose reasoning field is `reasoning_content` at startup; the plugin serves it
    as `thinking`, with the answer vLLM gives the renamed template."""
    template = templates.get("qwen3")
    assert "reasoning_content" in template["fields"]
    with pytest.raises(ValueError, match="unsupported semantic fields"):
        _parser("hf", tokenizer, template)
    served = plugin.serving_template(template)
    text = "<think>\nplan</think>\n\nok"
    a = _parser("hf", tokenizer, served).parse(text, _request())
    b = _parser(plugin.NAME, tokenizer, template).parse(text, _request())
    assert a == b and a[0] == "\nplan"



def test_serving_variant_is_vllms_streaming_template():
    """`serving_variant` (no vLLM import: what `chatparse compile DIR --vllm` compiles) is the template vLLM's
    adapter parses with, for every bundled template vLLM serves once the reasoning field is renamed."""
    from chatparse.integrations.vllm_template import serving_variant

    load_response_template = plugin._rt.load_response_template

    served = 0
    for name in templates.names():
        template = templates.get(name)
        try:
            theirs = plugin._rt._serving_template(None, plugin.serving_template(template))
        except (TypeError, ValueError):
            continue
        ours = load_response_template(serving_variant(template))
        assert compile_template(ours).spec == compile_template(theirs).spec, name
        served += 1
    assert served >= 8


def test_plugin_loads_the_serving_tables_beside_the_tokenizer(tmp_path, caplog):
    """``chatparse compile DIR --vllm`` writes response_template.vllm.cpt; a parser for a tokenizer loaded
    from DIR takes its tables and token tables from it (no compile, no bind), and parses as one that
    compiled them; a stale file (another template) is not used, with a warning."""
    import json
    import subprocess
    import sys

    tok = trained_tokenizer()
    tok.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["response_template"] = templates.get("qwen3")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    run = subprocess.run([sys.executable, "-c", "import sys; from chatparse.cli import main; sys.exit(main())",
                          "compile", str(tmp_path), "--vllm"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "response_template.vllm.cpt").is_file()
    loaded = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    parser = _parser(plugin.NAME, loaded, None)
    assert "tokens" in parser._compiled.raw_tables  # from the file: a compiled template carries none
    reference = _parser(plugin.NAME, tokenizer=trained_tokenizer(), template=templates.get("qwen3"))
    prompt = "<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n"
    output = ('<think>\nNeed the weather.\n</think>\n\nLet me check. <tool_call>\n{"name": "get_weather", '
              '"arguments": {"city": "Paris"}}\n</tool_call><|im_end|>')
    ids = loaded.encode(output, add_special_tokens=False)
    pids = loaded.encode(prompt, add_special_tokens=False)
    deltas = [(_decode(loaded, [i]), [i]) for i in ids]
    assert _stream(parser, _request(), pids, deltas) == _stream(reference, _request(), pids, deltas)
    # another template in the config: the file is stale, not used
    config["response_template"] = templates.get("hermes")
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    other = PreTrainedTokenizerFast.from_pretrained(tmp_path)
    with caplog.at_level("WARNING", logger="chatparse"):
        stale = _parser(plugin.NAME, other, None)
    assert "template hash mismatch" in caplog.text
    assert "tokens" not in stale._compiled.raw_tables


# --------------------------------------------------------------------------------------------------------------
# Text deltas built without validation (`vllm_delta`)
# --------------------------------------------------------------------------------------------------------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from vllm.entrypoints.generate.base.protocol import DeltaMessage  # noqa: E402

from chatparse.integrations import vllm_delta  # noqa: E402


def test_the_direct_text_deltas_are_in_use_with_the_tested_pydantic():
    """With the pydantic that vLLM 0.33.0 installs, the import-time check accepts the direct construction (else
    the plugin silently runs the slower validated one, which is correct but loses its per-delta speed)."""
    assert vllm_delta.FAST
    assert vllm_delta.content_delta is not vllm_delta._VALIDATED[0]


@settings(max_examples=300, deadline=None)
@given(content=st.none() | st.text(), reasoning=st.none() | st.text())
def test_text_deltas_equal_vllms_validated_ones(content, reasoning):
    """Every text delta the plugin builds equals the one vLLM's ``DeltaMessage(...)`` validates from the same
    fields, compared as the server uses it: equality, both JSON forms, the fields set, a copy, and one
    attribute assigned afterwards (as vLLM's stream processor assigns ``tool_calls``)."""
    given_ = {name: value for name, value in (("reasoning", reasoning), ("content", content)) if value is not None}
    built = [vllm_delta.text_delta(content, reasoning)]
    if reasoning is None and content is not None:
        built.append(vllm_delta.content_delta(content))
    if content is None and reasoning is not None:
        built.append(vllm_delta.reasoning_delta(reasoning))
    for got in built:
        expected = DeltaMessage(**given_)
        assert type(got) is DeltaMessage and got == expected
        assert got.model_dump_json(exclude_unset=True) == expected.model_dump_json(exclude_unset=True)
        assert got.model_dump_json() == expected.model_dump_json() and got.model_fields_set == expected.model_fields_set
        assert got.model_copy(deep=True) == expected.model_copy(deep=True)
        got.tool_calls, expected.tool_calls = [], []
        assert got.model_fields_set == expected.model_fields_set and got == expected
