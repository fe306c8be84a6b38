"""``--tool-call-parser chatparse --reasoning-parser chatparse`` on checkpoints whose tokenizer config holds no
``response_template``: vLLM 0.33.0's own startup check and parser construction (`ParserManager.get_parser` with
the tokenizer, as its server calls it), not a stand-in.

* every bundled family is accepted by a published model id, and by its chat template from a local directory
  whose name says nothing (``/models/ft-7``), with the same two flags, families without a reasoning field and
  gpt_oss included; the parser it builds parses a real output of the family as chatparse's serving-grade
  template does;
* the resolution order (tokenizer config, operator, model id, chat template) and its log line;
* bad input at startup: no template found (the error lists the ways to give one), an unknown family name
  (the error lists the names), an invalid template in the config (the error names the key), a missing file;
* per-request construction reuses the model's state (no template loading or compilation per request).

Runs where vllm==0.33.0 is installed (`.ci/run` runs it in the venv it makes for vLLM); skips elsewhere.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from deps import need_vllm  # noqa: E402

need_vllm("vllm.parser.parser_manager")  # installed only in the venv .ci/run makes

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers  # noqa: E402
from transformers import PreTrainedTokenizerFast  # noqa: E402
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest  # noqa: E402
from vllm.parser import response_template as rt  # noqa: E402
from vllm.parser.parser_manager import ParserManager  # noqa: E402

from chatparse import templates  # noqa: E402
from chatparse.integrations import resolve  # noqa: E402
from chatparse.integrations import vllm as plugin  # noqa: E402
from test_real_outputs import CASES  # noqa: E402
from test_templates_for_model import MODELS  # noqa: E402

CHAT_TEMPLATES = Path(__file__).resolve().parent / "chat_templates"
MODEL_OF = {}
for _model_id, _family in sorted(MODELS.items()):
    MODEL_OF.setdefault(_family, _model_id)


@pytest.fixture(scope="module")
def tokenizer_object():
    """A byte-level BPE trained here on the corpus's outputs (one for every family: the markers are text)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator([c["prefix"] + c["output"] for c in CASES], trainer=trainer)
    return tok


@pytest.fixture(autouse=True)
def _registered(monkeypatch):
    monkeypatch.delenv(resolve.ENV, raising=False)
    plugin.register()


def _tokenizer(tok, name: str, *, chat_template: str | None = None, **config) -> PreTrainedTokenizerFast:
    """A fresh transformers tokenizer (a new object: the plugin's per-model state is keyed by it) named `name`,
    with no response_template unless `config` gives one."""
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, name_or_path=name, clean_up_tokenization_spaces=False,
                                 **config)
    hf.chat_template = chat_template
    return hf


def _parser_cls(tokenizer, model_name: str = "m"):
    """What vLLM's server builds at startup for the two flags: composed and validated by `ParserManager`."""
    return ParserManager.get_parser(tool_parser_name=plugin.NAME, reasoning_parser_name=plugin.NAME,
                                    enable_auto_tools=True, model_name=model_name, tokenizer=tokenizer)


def _one_case(family: str) -> dict:
    """The family's first corpus case whose source expects a message (a real output of the family)."""
    return next(c for c in CASES if c["family"] == family and "expected" in c and not c.get("xfail"))


def _tools(case: dict) -> list:
    """The case's tools, else one schema-less tool per name it calls (vLLM parses no calls for a request
    without tools: its tool choice is then "none")."""
    names = sorted({c["function"]["name"] for c in case.get("expected", {}).get("tool_calls", [])})
    return case.get("tools") or [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}}
                                 for n in names] or None


def _served_answer(parser_cls, tokenizer, case: dict):
    """(reasoning, content, [(name, arguments)]) of vLLM's non-streaming `parse` through the plugin."""
    parser = parser_cls(tokenizer, _tools(case))
    parser.set_prompt_token_ids(tokenizer.encode(case["prefix"], add_special_tokens=False))
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=_tools(case))
    reasoning, content, calls = parser.parse(case["output"], request, enable_auto_tools=True)
    return (reasoning or "").strip(), (content or "").strip(), [
        (c.name, json.loads(c.arguments)) for c in calls or []]


def _expected_answer(case: dict):
    want = case["expected"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in want.get("tool_calls", [])]
    return want.get("reasoning_content", ""), want.get("content", ""), calls


@pytest.mark.parametrize("family", templates.names())
def test_every_family_is_served_by_model_id(tokenizer_object, family):
    tokenizer = _tokenizer(tokenizer_object, MODEL_OF[family])
    assert resolve.config_template(tokenizer) is None
    cls = _parser_cls(tokenizer, MODEL_OF[family])
    assert issubclass(cls, plugin.CompiledResponseTemplateParser)
    model = plugin._model(tokenizer, None)
    assert (model.resolution.source, model.resolution.family) == ("model id", family)
    case = _one_case(family)
    ours = _served_answer(cls, tokenizer, case)
    reasoning, content, calls = _expected_answer(case)
    # the corpus message, as vLLM's adapter serves it (streamed text: stripped here, as the corpus's is)
    assert ours[2] == calls, case["id"]
    assert ours[0] == reasoning or (reasoning and reasoning in ours[0]), case["id"]
    for segment in [s for s in content.split("\n\n") if s.strip()]:
        assert segment.strip() in ours[1], (case["id"], segment, ours[1])


@pytest.mark.parametrize("family", templates.names())
def test_every_family_is_served_by_chat_template_from_a_local_directory(tokenizer_object, family):
    chat_template = (CHAT_TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")
    tokenizer = _tokenizer(tokenizer_object, "/models/ft-7", chat_template=chat_template)
    assert templates.family_of("/models/ft-7") is None
    cls = _parser_cls(tokenizer)
    assert issubclass(cls, plugin.CompiledResponseTemplateParser)
    resolution = plugin._model(tokenizer, None).resolution
    assert (resolution.source, resolution.family) == ("chat template", family)
    assert resolution.template == templates.serving(family)


def test_families_without_reasoning_pass_content_through(tokenizer_object):
    tokenizer = _tokenizer(tokenizer_object, "meta-llama/Llama-3.1-8B-Instruct")
    assert "reasoning_content" not in templates.get("llama3_json")["fields"]
    with pytest.raises(TypeError, match="requires a response_template with a thinking field"):
        rt.validate_tokenizer_response_template(  # vLLM's own check on the same template, unhooked
            plugin._TemplateView(plugin._model(tokenizer, None).view), reasoning_parser="hf", tool_parser=None)
    parser = _parser_cls(tokenizer)(tokenizer)
    assert parser.is_reasoning_end([1, 2, 3]) and parser.reasoning_parser.is_reasoning_end_streaming([1], [1])
    assert parser.count_reasoning_tokens([1, 2, 3]) == 0
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}])
    assert parser.parse("Just an answer.", request, enable_auto_tools=True) == (None, "Just an answer.", None)


def test_gpt_oss_is_served_and_its_reasoning_streams(tokenizer_object):
    tokenizer = _tokenizer(tokenizer_object, "openai/gpt-oss-20b")
    cls = _parser_cls(tokenizer)
    # what vLLM's chat server asks for a gpt-oss checkpoint (model_type gpt_oss): its Harmony parser, unless
    # chatparse is named
    harmony = ParserManager.get_parser(tool_parser_name=plugin.NAME, reasoning_parser_name=plugin.NAME,
                                       enable_auto_tools=True, model_name="m", tokenizer=tokenizer, is_harmony=True)
    assert issubclass(harmony, plugin.CompiledResponseTemplateParser)
    assert ParserManager.get_parser(tool_parser_name="openai", reasoning_parser_name="openai_gptoss",
                                    enable_auto_tools=True, is_harmony=True).__name__ == "HarmonyParser"
    case = next(c for c in CASES if c["family"] == "gpt_oss" and "reasoning_content" in c.get("expected", {}))
    parser = cls(tokenizer, case.get("tools"))
    parser.set_prompt_token_ids(tokenizer.encode(case["prefix"], add_special_tokens=False))
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=case.get("tools"))
    pieces = [case["output"][i:i + 3] for i in range(0, len(case["output"]), 3)]
    reasoning = ""
    for k, piece in enumerate(pieces):
        delta = parser.parse_delta(piece, [], request, finished=k == len(pieces) - 1)
        reasoning += (delta.reasoning or "") if delta is not None else ""
    assert case["expected"]["reasoning_content"].strip() in reasoning


def test_resolution_order_and_log(tokenizer_object, monkeypatch, tmp_path, caplog):
    own = templates.get("hermes")
    # the tokenizer config's own template wins over the model id
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B", response_template=own)
    assert plugin._model(tokenizer, None).resolution.source == "tokenizer config"
    # the operator's choice wins over the model id; ":base" gives the base-format template
    monkeypatch.setenv(resolve.ENV, "hermes:base")
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B")
    log = logging.getLogger("vllm.chatparse")  # vLLM's logging config may stop it from reaching the root
    log.addHandler(caplog.handler)
    try:
        with caplog.at_level(logging.INFO, logger="vllm.chatparse"):
            _parser_cls(tokenizer)
    finally:
        log.removeHandler(caplog.handler)
    resolution = plugin._model(tokenizer, None).resolution
    assert (resolution.source, resolution.family, resolution.template) == ("operator", "hermes", own)
    assert any("hermes:base" in r.getMessage() for r in caplog.records)
    # a template file, a tokenizer_config.json and a .cpt file
    (tmp_path / "t.json").write_text(json.dumps(own))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"response_template": own}))
    from chatparse import compile_template
    from chatparse.compiler.writer import dumps

    (tmp_path / "t.cpt").write_bytes(dumps(compile_template(own).raw_tables))
    for path in ("t.json", "tokenizer_config.json", "t.cpt"):
        monkeypatch.setenv(resolve.ENV, str(tmp_path / path))
        tokenizer = _tokenizer(tokenizer_object, "/models/ft-7")
        _parser_cls(tokenizer)
        assert plugin._model(tokenizer, None).resolution.source == "operator"


def test_nothing_found_is_a_startup_error_listing_the_ways(tokenizer_object):
    tokenizer = _tokenizer(tokenizer_object, "/models/ft-7", chat_template="{{ messages }}")
    with pytest.raises(TypeError) as err:
        _parser_cls(tokenizer)
    message = str(err.value)
    assert "--tool-call-parser chatparse" in message and resolve.ENV in message
    assert "response_template" in message and "qwen3" in message


def test_unknown_family_name_lists_the_names(tokenizer_object, monkeypatch):
    monkeypatch.setenv(resolve.ENV, "qwen9")
    with pytest.raises(TypeError, match=r"qwen9.*neither a bundled family \(cohere, .*xlam"):
        _parser_cls(_tokenizer(tokenizer_object, "Qwen/Qwen3-8B"))


def test_missing_or_bad_files_are_named(tokenizer_object, monkeypatch, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"name_or_path": "x"}))
    (tmp_path / "bad.cpt").write_bytes(b"\x89PNG not a table file at all")
    for path, match in ((tmp_path / "missing.json", "nor an existing file"), (tmp_path / "bad.json", "not a readable JSON"),
                        (tmp_path / "other.json", "holds neither"), (tmp_path / "bad.cpt", "not a readable table")):
        monkeypatch.setenv(resolve.ENV, str(path))
        with pytest.raises(TypeError, match=match) as err:
            _parser_cls(_tokenizer(tokenizer_object, "Qwen/Qwen3-8B"))
        assert resolve.ENV in str(err.value)


@pytest.mark.parametrize("bad,match", [
    ({"fields": {"content": {"open": 3}}}, "'response_template'"),
    ("not a template", "key 'response_template' must be a JSON object"),
])
def test_invalid_template_in_the_config_names_the_key(tokenizer_object, bad, match):
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B", response_template=bad)
    with pytest.raises(TypeError, match=match):
        _parser_cls(tokenizer)


def test_per_request_construction_reuses_the_models_state(tokenizer_object, monkeypatch):
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B")
    cls = _parser_cls(tokenizer)
    cls(tokenizer)
    calls = []
    monkeypatch.setattr(rt, "load_response_template", lambda *a, **k: calls.append("vllm load"))
    monkeypatch.setattr(plugin, "compile_template", lambda *a, **k: calls.append("compile"))
    monkeypatch.setattr(plugin, "resolve", lambda *a, **k: calls.append("resolve"))
    for _ in range(3):
        assert cls(tokenizer).response_template is plugin._model(tokenizer, None).loaded
    assert calls == []


@pytest.mark.parametrize("output,want", [
    ("<think>Still thinking", ("Still thinking", None, None)),
    ('<tool_call>\n{"name": "f", "arguments": {"a": 1}}', (None, None, [("f", {"a": 1})])),
])
def test_last_delta_with_a_hidden_stop_token(tokenizer_object, output, want):
    """vLLM's last delta of a generation carries the stop token's id with its text left out: the stream ends
    as the one-shot parse of the text does (a region left open keeps no ``<|im_end|>``, a call cut off at the
    end is still served)."""
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B", eos_token="<|im_end|>")
    cls = _parser_cls(tokenizer)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools)
    prompt_ids = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    parser = cls(tokenizer, tools)
    parser.set_prompt_token_ids(prompt_ids)
    one_shot = parser.parse(output, request, enable_auto_tools=True)
    assert (one_shot[0], one_shot[1], one_shot[2] and [(c.name, json.loads(c.arguments)) for c in one_shot[2]]) == want
    parser = cls(tokenizer, tools)
    reasoning, content, calls = "", "", []
    steps = [(tokenizer.decode([i]), [i]) for i in tokenizer.encode(output, add_special_tokens=False)]
    steps.append(("", [tokenizer.convert_tokens_to_ids("<|im_end|>")]))
    for k, (text, ids) in enumerate(steps):
        delta = parser.parse_delta(text, ids, request, prompt_token_ids=prompt_ids, finished=k == len(steps) - 1)
        if delta is not None:
            reasoning += delta.reasoning or ""
            content += delta.content or ""
            calls += [(c.function.name, json.loads(c.function.arguments)) for c in delta.tool_calls or ()]
    assert (reasoning or None, content or None, calls or None) == want


def test_tool_dicts_give_what_vllms_conversion_gives_argument_typing():
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionToolsParam

    from chatparse.runtime.values.coerce import tool_params

    raw = [{"type": "function", "function": {"name": "f", "description": None, "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": ["string", "null"]}}}}},
           {"type": "function", "function": {"name": "g"}}]
    tools = [ChatCompletionToolsParam(**t) for t in raw]
    assert tool_params(plugin._tool_dicts(tools)) == tool_params(rt._as_tool_dicts(tools))
    assert plugin._tool_dicts(tools) == [{"type": "function", "function": {"name": "f", "parameters": raw[0]["function"][
        "parameters"]}}, {"type": "function", "function": {"name": "g", "parameters": None}}]
    assert plugin._tool_dicts(None) == rt._as_tool_dicts(None) == []


def test_prompt_decoded_by_the_tables_is_vllms_decode():
    """The plugin decodes the prompt with the token tables (`set_prompt_token_ids`, `TokenBinding.prompt_text`);
    for every family's tokenizer and corpus prompt that is vLLM's own `_decode` of the ids, cut after its last
    start anchor where the anchor is literal (all a parser's state depends on), an end of it with the same cut
    where the anchor is a pattern, and after a long conversation before it too."""
    from bench import vllm_families as vf

    for family in sorted(vf.HANDWRITTEN):
        if family in vf.HARMONY:
            continue
        tok = vf.family_tokenizer(family)
        parser = _parser_cls(tok)(tok)
        tables = parser._compiled.tables
        for case in vf.corpus(family):
            for earlier in ("", case["prefix"] + case["output"] + " tout à fait 😀\n" * 40):
                ids = tok.encode(earlier + case["prefix"], add_special_tokens=False)
                parser.set_prompt_token_ids(ids)
                whole = rt._decode(tok, ids)
                if tables.anchor_literals is None:  # (a pattern: an end of the decode, cut by the parser)
                    assert whole.endswith(parser._prefix), (family, case["id"], bool(earlier))
                else:
                    assert parser._prefix == tables.cut_prefix(whole, log=False), (family, case["id"], bool(earlier))
                assert tables.cut_prefix(parser._prefix, log=False) == tables.cut_prefix(whole, log=False)


def test_a_kept_first_step_streams_what_stepping_streams(tokenizer_object, monkeypatch):
    """The stream's state after a request's first delta is kept per prototype and request settings
    (`_CompiledStream._first`): later requests whose first delta has the same ids start from it. Each of them
    streams, delta by delta, what it streams with nothing kept, whatever tools it has (a kept state is forked
    with the request's own tools, so argument typing is its own), interleaved with other requests; a hit steps
    no parser, and the kept state is left as it was."""
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B")
    cls = _parser_cls(tokenizer)
    typed = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    prompt_ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
                                  add_special_tokens=False)
    outputs = ['<think>plan A</think>Sure.<tool_call>\n{"name": "f", "arguments": {"a": "1"}}\n</tool_call>',
               '<tool_call>\n{"name": "f", "arguments": {"a": "2"}}\n</tool_call>',
               'Hello there, no call.', 'Hello <tool_call>\n{"name": "f", "arguments": {"a": "3"}}\n</tool_call>',
               '<think>\n\n</think>\n\nDone.']

    def steps(text, per=1):
        ids = tokenizer.encode(text, add_special_tokens=False)
        return [(tokenizer.decode(ids[k:k + per]), ids[k:k + per]) for k in range(0, len(ids), per)]

    def shown(d):
        return None if d is None else (d.content, d.reasoning, [(c.index, c.function.name, c.function.arguments)
                                                               for c in d.tool_calls or ()])

    def run(pairs):
        """Stream each (output, tools, ids per delta) as its own request, the requests interleaved delta by delta."""
        runs = [(cls(tokenizer, tools), ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}],
                                                               tools=tools), steps(text, per))
                for text, tools, per in pairs]
        got = [[] for _ in runs]
        for k in range(max(len(r[2]) for r in runs)):
            for j, (parser, request, ss) in enumerate(runs):
                if k < len(ss):
                    t, i = ss[k]
                    got[j].append(shown(parser.parse_delta(t, i, request, prompt_token_ids=prompt_ids,
                                                           finished=k == len(ss) - 1)))
        return got

    model = plugin._model(tokenizer, None)
    untyped = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "string"}}}}}]
    cases = [(text, tools, per) for text in outputs for tools in (typed, untyped) for per in (1, 2)]
    alone = []
    for case in cases:
        model.first_steps.clear()
        alone += run([case])
    calls = [[c for d in deltas if d for c in d[2]] for deltas in alone]
    assert calls[4] == [(0, "f", '{"a": 2}')] and calls[6] == [(0, "f", '{"a": "2"}')]
    model.first_steps.clear()
    assert run(cases) == alone  # (the first request of each first delta keeps it; the others start from it)
    kept = [entry for _, firsts in model.first_steps.values() for entry in firsts.values()]
    assert len(kept) >= 4
    before = [(p.input_text, p._core.scanner.end, dict(p._core.output)) for p, *_ in kept]
    fed = []
    real = type(kept[0][0]).feed_tokens
    monkeypatch.setattr(type(kept[0][0]), "feed_tokens", lambda self, ids: fed.append(self) or real(self, ids))
    assert run(cases[::-1]) == alone[::-1]
    assert not any(any(p is k[0] for k in kept) for p in fed)  # (a kept state is forked, never fed)
    assert [(p.input_text, p._core.scanner.end, dict(p._core.output)) for p, *_ in kept] == before


def test_requests_forked_from_one_prototype_do_not_see_each_others_events(tokenizer_object, monkeypatch):
    """The per-model prototype (the token parser after the prompt's cut prefix, `_stream_parser`) is forked per
    request: two requests interleaved delta by delta stream what each streams alone, the second request builds
    no parser of its own, and the prototype is left as it was."""
    tokenizer = _tokenizer(tokenizer_object, "Qwen/Qwen3-8B")
    cls = _parser_cls(tokenizer)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer"}}}}}]
    request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "hi"}], tools=tools)
    prompt_ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
                                  add_special_tokens=False)
    outputs = ['<think>plan A</think>Sure.<tool_call>\n{"name": "f", "arguments": {"a": "1"}}\n</tool_call>',
               'No call here, just <b>text</b> and more text.']

    def steps(text):
        return [(tokenizer.decode([i]), [i]) for i in tokenizer.encode(text, add_special_tokens=False)]

    def merged(deltas):
        out = {"reasoning": "", "content": "", "tool_calls": []}
        for d in deltas:
            if d is not None:
                out["reasoning"] += d.reasoning or ""
                out["content"] += d.content or ""
                out["tool_calls"] += [(c.function.name, c.function.arguments) for c in d.tool_calls or ()]
        return out

    model = plugin._model(tokenizer, None)
    alone = []
    for text in outputs:
        model.prototypes.clear()
        parser, ss = cls(tokenizer, tools), steps(text)
        alone.append(merged([parser.parse_delta(t, i, request, prompt_token_ids=prompt_ids, finished=k == len(ss) - 1)
                             for k, (t, i) in enumerate(ss)]))
    assert alone[0]["tool_calls"] == [("f", '{"a": 1}')] and alone[1]["content"] == outputs[1]
    assert len(model.prototypes) == 1
    proto = next(iter(model.prototypes.values()))
    before = (proto.input_text, proto.input_length, proto._core.output, proto._core.scanner.end)
    built = []
    real = model.binding.parser
    monkeypatch.setattr(model.binding, "parser", lambda *a, **k: built.append(1) or real(*a, **k))
    parsers = [cls(tokenizer, tools), cls(tokenizer, tools)]
    runs = [steps(t) for t in outputs]
    got = [[], []]
    for k in range(max(map(len, runs))):
        for j in (0, 1):
            if k < len(runs[j]):
                t, i = runs[j][k]
                got[j].append(parsers[j].parse_delta(t, i, request, prompt_token_ids=prompt_ids,
                                                     finished=k == len(runs[j]) - 1))
    assert [merged(g) for g in got] == alone
    assert built == [] and len(model.prototypes) == 1
    assert (proto.input_text, proto.input_length, proto._core.output, proto._core.scanner.end) == before
