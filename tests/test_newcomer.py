"""What a newcomer runs into first (issue #19, "Newcomer friction"): the command line and the API answer a
wrong argument with an error that names it, pipes and file modes behave like any Unix tool's, and a
tokenizer directory whose tables are stale says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deps import need, needs_program

import chatparse
import chatparse.tokenizer_dir as td
from chatparse import templates
from chatparse.cli import main

ROOT = Path(__file__).resolve().parents[1]
QWEN3 = templates.get("qwen3")


# ------------------------------------------------------------------------------------------- command line


def test_demo_into_a_closed_pipe_ends_quietly():
    """``chatparse demo | head -2``: no BrokenPipeError traceback, the exit status of a SIGPIPE death."""
    proc = subprocess.Popen([sys.executable, "-m", "chatparse.cli", "demo", "--delay", "0.02"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = [proc.stdout.readline() for _ in range(2)]
    proc.stdout.close()  # what `head -2` does after two lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141, err
    assert first[0].startswith(b"# streaming") and first[1].startswith(b"{")
    assert err == "", err


@pytest.mark.parametrize("argv, message", [
    (["demo", "--chunk", "0"], "argument --chunk: must be at least 1, got 0"),
    (["demo", "--chunk", "-3"], "argument --chunk: must be at least 1, got -3"),
    (["demo", "--chunk", "four"], "argument --chunk: expected a whole number, got 'four'"),
    (["demo", "--delay", "-1"], "argument --delay: must be 0 or more seconds, got -1"),
    (["demo", "--delay", "nan"], "argument --delay: must be 0 or more seconds, got nan"),
])
def test_demo_refuses_bad_chunk_and_delay(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_demo_with_a_large_chunk_prints_the_message(capsys):
    assert main(["demo", "--chunk", "1000"]) == 0
    assert '"name": "greet_user"' in capsys.readouterr().out


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"chatparse {chatparse.__version__}"


def test_parse_tools_file_errors_name_the_file(tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("hello")
    bad = tmp_path / "tools.json"
    bad.write_text("{not json")
    assert main(["parse", "qwen3", str(out), "--prefix", "", "--tools", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--tools {bad}: not valid JSON" in err, err
    bad.write_text('{"name": "get_weather"}')
    assert main(["parse", "qwen3", str(out), "--prefix", "", "--tools", str(bad)]) == 2
    assert f"--tools {bad}: expected a JSON list of tool schemas, got object" in capsys.readouterr().err
    bad.write_text('[{"name": "get_weather"}]')
    assert main(["parse", "qwen3", str(out), "--prefix", "", "--tools", str(bad)]) == 0
    assert json.loads(capsys.readouterr().out) == {"role": "assistant", "content": "hello"}


def test_check_with_thinking_off_reports_no_false_errors(capsys):
    """qwen3's chat template with ``enable_thinking: false`` pre-writes an empty reasoning block in the
    generation prompt: turns with reasoning cannot follow it, and are checked without their reasoning."""
    need("jinja2")
    chat = ROOT / "tests" / "chat_templates" / "qwen3.jinja"
    code = main(["check", "qwen3", "--chat-template", str(chat), "--chat-template-kwargs",
                 '{"enable_thinking": false}'])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "error" not in out.replace("0 errors", ""), out
    assert "the generation prompt already holds the reasoning block" in out
    for name in ("answer", "tool_calls", "tool_calls_only", "plain_answer", "second_turn"):
        assert f"  {name}: ok" in out, out
    # thinking on: the scenarios keep their reasoning, and there is no such note
    assert main(["check", "qwen3", "--chat-template", str(chat)]) == 0
    assert "already holds the reasoning block" not in capsys.readouterr().out


# ------------------------------------------------------------------------------------------- tokenizer directories


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_tables_file_mode_follows_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = td.save_dir(tmp_path / "tok", QWEN3)
        assert _mode(path) == mode
        assert _mode(tmp_path / "tok" / td.CONFIG_NAME) == mode  # (written like any file: the reference)
        assert not [p.name for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp file left
        path.chmod(0o600)
        assert _mode(td.compile_dir(tmp_path / "tok")) == mode  # a rewrite takes the umask's mode again
    finally:
        os.umask(old)


def _stale_dir(tmp_path: Path) -> Path:
    d = tmp_path / "tok"
    td.save_dir(d, QWEN3)
    cfg = json.loads((d / td.CONFIG_NAME).read_text())
    cfg["response_template"] = templates.get("smollm3")
    (d / td.CONFIG_NAME).write_text(json.dumps(cfg))
    return d


def test_parse_and_check_on_a_stale_directory_say_so(tmp_path, capsys):
    out = tmp_path / "out.txt"
    out.write_text("hello")
    d = tmp_path / "fresh"
    td.save_dir(d, QWEN3)
    assert main(["parse", str(d), str(out), "--prefix", ""]) == 0
    assert capsys.readouterr().err == ""
    assert main(["check", str(d)]) == 0
    assert capsys.readouterr().err == ""
    stale = _stale_dir(tmp_path)
    for argv in (["parse", str(stale), str(out), "--prefix", ""], ["check", str(stale)]):
        assert main(argv) == 0
        err = capsys.readouterr().err
        assert err.startswith(f"warning: {stale / td.TABLES_NAME} was compiled for a different response_template"), err
        assert f"chatparse compile {stale}" in err
    (stale / td.TABLES_NAME).write_bytes(b"junk")
    assert main(["parse", str(stale), str(out), "--prefix", ""]) == 0
    assert f"warning: {stale / td.TABLES_NAME} cannot be used: chatparse table file:" in capsys.readouterr().err
    assert td.stale_tables(tmp_path / "fresh") is None


def test_compile_check_on_a_directory_that_is_no_tokenizer_directory(tmp_path, capsys):
    assert main(["compile", "--check", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"chatparse compile: error: {tmp_path} has no {td.CONFIG_NAME}: not a tokenizer directory"
    assert main(["compile", "--check", str(tmp_path / "nowhere")]) == 2
    assert "is not a directory: not a tokenizer directory" in capsys.readouterr().err
    assert main(["compile", str(tmp_path)]) == 2
    assert "not a tokenizer directory" in capsys.readouterr().err
    # a real one that is out of date is still "stale", with exit status 1
    stale = _stale_dir(tmp_path)
    assert main(["compile", "--check", str(stale)]) == 1
    assert capsys.readouterr().err.startswith("stale: ")


# ------------------------------------------------------------------------------------------- API arguments


def _reference():
    return need("transformers.utils.chat_parsing")


@pytest.mark.parametrize("call, argument", [
    (lambda: chatparse.parse_response(b"<think>a</think>b", QWEN3, prefix=""), "parse_response() argument 'text'"),
    (lambda: chatparse.parse_response(None, QWEN3, prefix=""), "parse_response() argument 'text'"),
    (lambda: chatparse.parse_response("b", QWEN3, prefix=b"x"), "parse_response() argument 'prefix'"),
    (lambda: chatparse.ResponseParser(QWEN3, prefix=b"x"), "ResponseParser() argument 'prefix'"),
    (lambda: chatparse.compile_template(QWEN3).parse(b"b", prefix=""), "argument 'text'"),
])
def test_text_arguments_must_be_str(call, argument):
    with pytest.raises(TypeError, match=r"must be a str, not (bytes|NoneType)") as e:
        call()
    assert argument in str(e.value)
    if "bytes" in str(e.value):
        assert "decode" in str(e.value)


def test_reference_raises_the_same_class_for_bytes():
    ref = _reference()
    with pytest.raises(TypeError):
        ref.parse_response(b"<think>a</think>b", QWEN3, prefix="")
    with pytest.raises(TypeError):
        ref.parse_response("b", QWEN3, prefix=b"x")


def test_feed_none_or_bytes_is_a_type_error_and_the_parser_goes_on():
    parser = chatparse.ResponseParser(QWEN3, prefix="")
    for bad in (None, b"<think>"):
        with pytest.raises(TypeError, match=r"^feed\(\) argument 'text' must be a str, not "):
            parser.feed(bad)
    assert parser.feed("") == []
    parser.feed("<think>a</think>b")
    assert parser.finalize()[0] == {"role": "assistant", "reasoning_content": "a", "content": "b"}


@pytest.mark.parametrize("tools", [{"name": "get_weather", "parameters": {}}, {}, "get_weather"])
def test_tools_must_be_a_list(tools):
    calls = [lambda: chatparse.parse_response("b", QWEN3, prefix="", tools=tools),
             lambda: chatparse.ResponseParser(QWEN3, prefix="", tools=tools),
             lambda: chatparse.compile_template(QWEN3).parse("b", prefix="", tools=tools)]
    for call in calls:
        with pytest.raises(TypeError, match=r"^`tools` must be a list of tool schemas \(dicts\) or functions, not "):
            call()
    if isinstance(tools, dict):
        with pytest.raises(TypeError, match=r"wrap one tool in a list: tools=\[tool\]"):
            calls[0]()
    # a list (or tuple) is fine, as is None
    for ok in ([tools] if isinstance(tools, dict) else [], (), None):
        assert chatparse.parse_response("b", QWEN3, prefix="", tools=ok) == {"role": "assistant", "content": "b"}


# ------------------------------------------------------------------------------------------- per token id


def _tokenizer():
    tokenizers = need("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tr = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                             special_tokens=["<think>", "</think>", "<|im_end|>"], show_progress=False)
    tok.train_from_iterator(["hello world, the answer is here"] * 10, trainer=tr)
    return tok


def test_bind_takes_a_tokenizer_json_path_or_directory(tmp_path):
    tok = _tokenizer()
    tok.save(str(tmp_path / "tokenizer.json"))
    tok.save(str(tmp_path / "other.json"))
    ids = tok.encode("<think>hi</think>the answer<|im_end|>").ids
    want = chatparse.parse_tokens(ids, chatparse.bind(QWEN3, tok), prefix_ids=[])
    assert want == {"role": "assistant", "reasoning_content": "hi", "content": "the answer"}
    for arg in (str(tmp_path / "tokenizer.json"), tmp_path / "other.json", tmp_path, str(tmp_path)):
        b = chatparse.bind(QWEN3, arg)
        assert chatparse.parse_tokens(ids, b, prefix_ids=[]) == want
    assert chatparse.bind(QWEN3, tmp_path / "other.json") is chatparse.bind(QWEN3, str(tmp_path / "other.json"))
    with pytest.raises(FileNotFoundError, match="missing.json does not exist"):
        chatparse.bind(QWEN3, tmp_path / "missing.json")
    (tmp_path / "sub").mkdir()
    with pytest.raises(FileNotFoundError, match="sub has no tokenizer.json"):
        chatparse.bind(QWEN3, tmp_path / "sub")
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match="bad.json cannot be read as a tokenizer"):
        chatparse.bind(QWEN3, tmp_path / "bad.json")


def test_token_binding_and_streams_repr():
    b = chatparse.bind(QWEN3, _tokenizer())
    size = b.vocab.size
    assert repr(b) == f"<TokenBinding fields=['reasoning_content', 'tool_calls', 'content'] vocab={size} ids " \
                      "(bytes, Tokenizer)>"
    s = chatparse.TokenStreams(b, 3, prefix="")
    assert repr(s) == (f"<TokenStreams 3 streams (3 open) fields=['reasoning_content', 'tool_calls', 'content'] "
                       f"vocab={size} ids dialect='transformers'>")
    s.finalize(1)
    assert "(2 open)" in repr(s)
    assert "dialect='vllm'" in repr(chatparse.TokenStreams(b, 1, prefix="", dialect="vllm"))


def test_token_tools_must_be_a_list():
    b = chatparse.bind(QWEN3, _tokenizer())
    with pytest.raises(TypeError, match=r"^`tools` must be a list"):
        b.parser(prefix="", tools={"name": "f"})
    with pytest.raises(TypeError, match=r"^`tools` must be a list"):
        chatparse.parse_tokens([1, 2], b, prefix_ids=[], tools={"name": "f"})


# ------------------------------------------------------------------------------------------- CI install


def test_test_extra_installs_what_the_tekken_tests_import():
    tomllib = need("tomllib")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["test"]
    names = {r.split(">")[0].split("=")[0].split("[")[0].strip() for r in extra}
    # jsonschema: mistral-common imports it; tiktoken and pydantic-extra-types: transformers' tekken converter
    assert {"jsonschema", "tiktoken", "pydantic-extra-types"} <= names, extra
    assert "mistral-common" not in names, "its numpy<2.4 pin would downgrade numpy: .ci/run installs it --no-deps"


def test_ci_installs_mistral_common_without_resolving_its_numpy_pin():
    """pip warns about mistral-common's numpy < 2.4 only when it resolves an install touching something
    mistral-common depends on while mistral-common is installed; .ci/run installs those first (the test extra
    holds them) and mistral-common after them, with --no-deps (which resolves nothing)."""
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if "pip install" in ln]
    mistral = next(i for i, ln in enumerate(lines) if "mistral-common" in ln)
    assert "--no-deps" in lines[mistral]
    deps = next(i for i, ln in enumerate(lines) if '".[test]"' in ln)
    assert deps < mistral
    later = [ln for ln in lines[mistral + 1:] if "VLLM_VENV" not in ln]
    assert all(not any(d in ln for d in ("tiktoken", "pydantic", "jsonschema", "numpy", "requests", "pillow"))
               for ln in later), later


@needs_program("bash", "the README's shell commands")
def test_ci_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(ROOT / ".ci" / "run")]).returncode == 0


def test_tables_for_the_template_with_keys_in_another_order_are_stale(tmp_path):
    """Tables compiled for the same template with a transform's keys in another order (same template hash)
    would give the output keys in the old order: the directory's tables are stale, and loading it rebuilds."""
    hermes = templates.get("hermes")
    d = tmp_path / "tok"
    td.save_dir(d, hermes)
    cfg = json.loads((d / td.CONFIG_NAME).read_text())
    transform = cfg["response_template"]["fields"]["tool_calls"]["transform"]
    cfg["response_template"]["fields"]["tool_calls"]["transform"] = dict(reversed(list(transform.items())))
    (d / td.CONFIG_NAME).write_text(json.dumps(cfg))
    assert "keys in another order" in td.stale_tables(d)
    text = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    got = td.load_dir(d).parse(text, prefix="")["tool_calls"][0]
    assert list(got) == list(reversed(list(transform))) == list(
        chatparse.parse_response(text, cfg["response_template"], prefix="")["tool_calls"][0])
