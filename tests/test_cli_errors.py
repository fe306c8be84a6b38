"""The command line's errors (issue #38): every subcommand reads TEMPLATE the same way (`chatparse.cli.template_arg`:
a bundled name, a template or tokenizer_config JSON, a .cpt table file, a tokenizer directory), and every bad input
ends in one line on stderr, ``chatparse SUBCOMMAND: error: ...``, naming the file, column or option, with a
non-zero exit status and no traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from deps import need

import chatparse.cli as cli
import chatparse.tokenizer_dir as td
from chatparse import templates
from chatparse.cli import main

ROOT = Path(__file__).resolve().parents[1]
SUBCOMMANDS = ("demo", "compile", "check", "show", "parse", "parse-file", "grammar")
QWEN3_PROMPT = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"


@pytest.fixture
def files(tmp_path):
    """Inputs good and bad: f.missing, f.bad (not JSON), f.binary, f.obj (a JSON object), f.out (an output),
    f.cpt and f.dir (qwen3's base template as a table file and as a tokenizer directory)."""
    class F:
        pass

    f = F()
    f.missing = tmp_path / "missing.json"
    f.bad = tmp_path / "bad.json"
    f.bad.write_text('{"tools": [1, 2,]}')
    f.binary = tmp_path / "binary.json"
    f.binary.write_bytes(b"\x89\xff\x00junk")
    f.obj = tmp_path / "obj.json"
    f.obj.write_text('{"not": "a list"}')
    f.out = tmp_path / "out.txt"
    f.out.write_text("hello")
    f.dir = tmp_path / "tok"
    td.save_dir(f.dir, templates.get("qwen3"))
    f.cpt = tmp_path / "qwen3.cpt"
    f.cpt.write_bytes((f.dir / td.TABLES_NAME).read_bytes())
    return f


@pytest.fixture(autouse=True)
def own_process(monkeypatch):
    """parse-file's `_own_process` refuses pandas in the command's process; here that process is pytest's, where
    a refused pandas stays refused for later tests (pyarrow keeps the import error), so it is off. Yields the
    real one, for a test to put back."""
    import chatparse.data.parse_file as pf

    real = pf._own_process
    monkeypatch.setattr(pf, "_own_process", lambda: None)
    yield real
    while pf._NoPandas in sys.meta_path:
        sys.meta_path.remove(pf._NoPandas)


def one_error(capsys, argv, *names, status=2) -> str:
    """Run `main(argv)`: exactly one line on stderr, ``chatparse SUB: error: `` and holding each of `names`."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"chatparse {argv[0]}: error: "), err
    for name in names:
        assert str(name) in lines[0], (name, err)
    assert code == status, err
    return lines[0]


# ------------------------------------------------------------------------------------------- grammar


def test_grammar_tools_file_errors(files, capsys):
    one_error(capsys, ["grammar", "qwen3", "--tools", files.missing], f"--tools {files.missing}: No such file")
    one_error(capsys, ["grammar", "qwen3", "--tools", files.bad], f"--tools {files.bad}: not valid JSON",
              "line 1 column 17")
    one_error(capsys, ["grammar", "qwen3", "--tools", files.binary], f"--tools {files.binary}: not UTF-8 text")
    one_error(capsys, ["grammar", "qwen3", "--tools", files.obj], f"--tools {files.obj}",
              "expected a JSON list of tool schemas, got object")
    files.obj.write_text('[{"type": "function"}]')  # a list, but no tool in it: the file is named
    one_error(capsys, ["grammar", "qwen3", "--tools", files.obj], f"--tools {files.obj}")


def test_grammar_other_errors(files, capsys):
    one_error(capsys, ["grammar", "qwen3", "--prefix-file", files.missing], f"--prefix-file {files.missing}")
    one_error(capsys, ["grammar", "qwen3", "--tool-choice", "{x"], "--tool-choice: not valid JSON")
    one_error(capsys, ["grammar", files.bad], f"{files.bad}: not valid JSON")
    one_error(capsys, ["grammar", "no_such_family"], "'no_such_family'", "bundled templates")


def test_grammar_takes_every_template_form_a_name_as_its_base_format(files, capsys):
    from chatparse.data.arrow import compiled_of

    grammars = []
    for arg in ("qwen3", "qwen3:base", files.dir, files.cpt):
        assert main(["grammar", str(arg)]) == 0
        grammars.append(capsys.readouterr().out)
    assert grammars[0] == grammars[1] and grammars[0].strip()
    # the directory's tokenizer_config.json (written with sorted keys) and its table file hold the fields in
    # name order: the grammar of the loaded tables, its rules numbered by that order
    assert grammars[2] == grammars[3] == compiled_of(str(files.cpt)).grammar(None).text


# ------------------------------------------------------------------------------------------- parse, check, show


def test_every_subcommand_takes_a_table_file(files, capsys):
    """A .cpt file (by its magic bytes, whatever its name) is a TEMPLATE like the others, for every subcommand."""
    renamed = files.cpt.with_name("tables.bin")
    renamed.write_bytes(files.cpt.read_bytes())
    messages = []
    for arg in ("qwen3:base", files.cpt, renamed, files.dir):
        assert main(["parse", str(arg), str(files.out), "--prefix", QWEN3_PROMPT]) == 0
        messages.append(json.loads(capsys.readouterr().out))
    assert messages == [{"role": "assistant", "reasoning_content": "hello"}] * 4
    assert main(["check", str(files.cpt)]) == 0
    assert "0 errors" in capsys.readouterr().out
    assert main(["show", str(files.cpt), "--mode", "0"]) == 0
    assert capsys.readouterr().out.startswith("digraph")


def test_parse_requires_a_prefix(files, capsys):
    """Without a prefix a qwen3 answer's reasoning would come back as content (the prompt ends in <think>)."""
    one_error(capsys, ["parse", "qwen3", files.out], "--prefix-file", '--prefix "" opts out')
    one_error(capsys, ["parse", "qwen3", files.out, "--prefix", "", "--prefix-file", files.out],
              "not allowed with")
    assert main(["parse", "qwen3", str(files.out), "--prefix", ""]) == 0  # opted out: content
    assert json.loads(capsys.readouterr().out) == {"role": "assistant", "content": "hello"}
    prompt = files.out.with_name("prompt.txt")
    prompt.write_text(QWEN3_PROMPT)
    assert main(["parse", "qwen3", str(files.out), "--prefix-file", str(prompt)]) == 0
    assert json.loads(capsys.readouterr().out) == {"role": "assistant", "reasoning_content": "hello"}


def test_parse_errors_name_the_file(files, capsys):
    p = ["--prefix", ""]
    one_error(capsys, ["parse", "qwen3", files.missing, *p], f"FILE {files.missing}: No such file")
    one_error(capsys, ["parse", "qwen3", files.binary, *p], f"FILE {files.binary}: not UTF-8")
    one_error(capsys, ["parse", "qwen3", files.out, "--prefix-file", files.missing], f"--prefix-file {files.missing}")
    one_error(capsys, ["parse", "qwen3", files.out, "--tools", files.binary, *p], f"--tools {files.binary}")
    one_error(capsys, ["parse", files.binary, files.out, *p], f"{files.binary}: not UTF-8 text")
    one_error(capsys, ["parse", files.bad, files.out, *p], f"{files.bad}: not valid JSON", "line 1 column 17")
    files.obj.write_text("[1, 2]")
    one_error(capsys, ["parse", files.obj, files.out, *p], f"{files.obj} holds a JSON list")
    files.obj.write_text('{"fields": {"content": {"nope": 1}}}')
    one_error(capsys, ["parse", files.obj, files.out, *p], f"{files.obj}: ")
    files.obj.write_text('{"chat_template": "{{ x }}"}')  # a tokenizer_config.json without a response template
    one_error(capsys, ["parse", files.obj, files.out, *p], f"{files.obj} has no 'response_template'")
    junk = files.cpt.with_name("junk.cpt")
    junk.write_bytes(b"junk")
    one_error(capsys, ["parse", junk, files.out, *p], f"{junk}: not a valid table file")
    one_error(capsys, ["parse", files.out.parent, files.out, *p], "without tokenizer_config.json")
    one_error(capsys, ["parse", "qwen3", files.out, "--chunk", "0", *p], "--chunk")
    files.out.write_text("<tool_call>{bad json</tool_call>")
    one_error(capsys, ["parse", "hermes:base", files.out, *p], "parsing failed", status=1)


def test_compile_errors_name_the_directory(tmp_path, capsys):
    one_error(capsys, ["compile", tmp_path], tmp_path, "has no tokenizer_config.json")
    one_error(capsys, ["compile", "--check", tmp_path / "nowhere"], tmp_path / "nowhere", "is not a directory")
    (tmp_path / "tokenizer_config.json").write_text('{"response_template": {"fields": 3}}')
    one_error(capsys, ["compile", tmp_path], "fields")


def test_check_and_show_errors(files, capsys):
    one_error(capsys, ["check", "qwen3", "--chat-template", files.missing], f"--chat-template: {files.missing}")
    one_error(capsys, ["check", "qwen3", "--chat-template", files.binary], f"{files.binary}: not UTF-8")
    one_error(capsys, ["check", "qwen3", "--chat-template-kwargs", "[1"], "--chat-template-kwargs: not valid JSON")
    one_error(capsys, ["check", "qwen3", "--chat-template-kwargs", "[1]"], "--chat-template-kwargs")
    one_error(capsys, ["check", files.missing], f"'{files.missing}' is neither")
    one_error(capsys, ["show", "qwen3", "-o", files.out.parent / "no" / "x.dot"], "-o ", "No such file")
    one_error(capsys, ["show", "qwen3", "--mode", "99"], "qwen3: ", "does not exist")


def test_a_missing_extra_is_named(files, capsys, monkeypatch):
    jinja2 = need("jinja2")
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setattr("chatparse.authoring.roundtrip._transformers_render", lambda: None)
    chat = ROOT / "tests" / "chat_templates" / "qwen3.jinja"
    one_error(capsys, ["check", "qwen3", "--chat-template", chat], "pip install 'chatparse[authoring]'")
    monkeypatch.setitem(sys.modules, "jinja2", jinja2)
    monkeypatch.setitem(sys.modules, "transformers", None)
    one_error(capsys, ["check", "qwen3", "--chat-template", chat, "--renderer", "transformers"],
              "pip install 'chatparse[transformers]'")


# ------------------------------------------------------------------------------------------- parse-file


def _jsonl(path: Path, *rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_parse_file_missing_columns_before_any_row(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", {"txt": "a", "prompt": ""}, {"txt": "b", "prompt": ""})
    out = tmp_path / "out.jsonl"
    one_error(capsys, ["parse-file", src, out, "--template", "qwen3", "--prefix", ""],
              "--text-column: no key 'text'", str(src), "['txt', 'prompt']")
    one_error(capsys, ["parse-file", src, out, "--template", "qwen3", "--text-column", "txt",
                       "--prefix-column", "prompt_"], "--prefix-column: no key 'prompt_'")
    assert not out.exists() and not list(tmp_path.glob("*.partial"))


def test_parse_file_template_errors(tmp_path, files, capsys):
    src = _jsonl(tmp_path / "in.jsonl", {"text": "a"})
    out = tmp_path / "out.jsonl"
    one_error(capsys, ["parse-file", src, out, "--template", "nope", "--prefix", ""], "--template 'nope' is neither")
    one_error(capsys, ["parse-file", src, out, "--template", files.binary, "--prefix", ""],
              f"--template {files.binary}: not UTF-8")
    files.obj.write_text('{"fields": {"content": {"nope": 1}}}')
    one_error(capsys, ["parse-file", src, out, "--template", files.obj, "--prefix", ""], f"--template {files.obj}: ")


def test_parse_file_every_row_failed_exits_1(tmp_path, capsys):
    src = _jsonl(tmp_path / "in.jsonl", {"text": "<tool_call>{bad</tool_call>"}, {"text": "<tool_call>{</tool_call>"})
    out = tmp_path / "out.jsonl"
    assert main(["parse-file", str(src), str(out), "--template", "hermes:base", "--prefix", "", "--no-progress"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"chatparse: 2 rows from {src}") and "2 failed" in err[0]  # the summary, then why
    assert err[-1] == "chatparse parse-file: error: every row failed (2 of 2; the summary above says why)"
    assert out.exists()  # the rows and their errors are written
    _jsonl(src, {"text": "<tool_call>{bad</tool_call>"}, {"text": "fine"})
    assert main(["parse-file", str(src), str(out), "--template", "hermes:base", "--prefix", "", "--no-progress"]) == 0
    assert "error:" not in capsys.readouterr().err


def test_parse_file_column_of_mixed_types_is_named(tmp_path, capsys):
    need("pyarrow")
    src = _jsonl(tmp_path / "in.jsonl", {"text": "a", "id": 1}, {"text": "b", "id": 2.5}, {"text": "c", "id": "x"})
    out = tmp_path / "out.parquet"
    one_error(capsys, ["parse-file", src, out, "--template", "qwen3", "--prefix", "", "--no-progress"],
              "input column 'id' mixes types", "str at line 3", "--drop-input")
    assert not out.exists()
    assert main(["parse-file", str(src), str(out), "--template", "qwen3", "--prefix", "", "--no-progress",
                 "--drop-input"]) == 0


def test_parse_file_without_pyarrow_names_the_extra(tmp_path, capsys, monkeypatch, own_process):
    src = _jsonl(tmp_path / "in.jsonl", {"text": "a"})
    monkeypatch.setattr("chatparse.data.parse_file._own_process", own_process)  # (it imports pyarrow: fails at once)
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    one_error(capsys, ["parse-file", src, tmp_path / "out.jsonl", "--template", "qwen3", "--prefix", ""],
              "pyarrow", "pip install 'chatparse[data]'")


# ------------------------------------------------------------------------------------------- the command line


def test_help_lists_every_subcommand(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    registered = cli.build_parser()._subparsers._group_actions[0].choices
    assert set(registered) == set(SUBCOMMANDS)
    for name in SUBCOMMANDS:
        assert f"\n    {name} " in out, name


def test_usage_errors_are_one_line(capsys):
    one_error(capsys, ["parse"], "the following arguments are required: TEMPLATE, FILE", "chatparse parse --help")
    one_error(capsys, ["grammar", "qwen3", "--format", "yaml"], "invalid choice")


def test_an_unexpected_exception_is_one_line(capsys, monkeypatch):
    def boom(args):
        raise RuntimeError("first\nsecond")

    monkeypatch.setattr(cli, "_demo", boom)
    one_error(capsys, ["demo"], "unexpected RuntimeError: first | second", "CHATPARSE_TRACEBACK", status=1)
    monkeypatch.setenv("CHATPARSE_TRACEBACK", "1")
    with pytest.raises(RuntimeError):
        main(["demo"])


# ------------------------------------------------------------------------------------------- in a real process


def _run(*argv, code: str | None = None) -> subprocess.CompletedProcess:
    head = ["-m", "chatparse.cli"] if code is None else ["-c", code]
    return subprocess.run([sys.executable, *head, *map(str, argv)], capture_output=True, text=True, cwd=ROOT,
                          stdin=subprocess.DEVNULL, timeout=120)


@pytest.mark.parametrize("case", ["tools_missing", "tools_binary", "prefix_file_missing", "no_prefix",
                                  "no_pyarrow", "junk_table_file"])
def test_no_traceback_reaches_the_terminal(files, case):
    no_pyarrow = "import sys; sys.modules['pyarrow'] = None; from chatparse.cli import main; sys.exit(main())"
    argv, code, want = {
        "tools_missing": (["grammar", "qwen3", "--tools", files.missing], None, "grammar: error: --tools"),
        "tools_binary": (["grammar", "qwen3", "--tools", files.binary], None, "not UTF-8 text"),
        "prefix_file_missing": (["grammar", "qwen3", "--prefix-file", files.missing], None, "--prefix-file"),
        "no_prefix": (["parse", "qwen3", files.out], None, "parse: error: give --prefix-file"),
        "no_pyarrow": (["parse-file", files.out.with_name("in.jsonl"), files.out.with_name("o.jsonl"), "--template",
                        "qwen3", "--prefix", ""], no_pyarrow, "chatparse[data]"),
        "junk_table_file": (["show", files.binary.with_suffix(".cpt")], None, "not a valid table file"),
    }[case]
    files.binary.with_suffix(".cpt").write_bytes(b"\x89CPT\r\n\x1a\n" + b"\0" * 10)
    _jsonl(files.out.with_name("in.jsonl"), {"text": "a"})
    r = _run(*argv, code=code)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"chatparse {argv[0]}: error: ") and want in r.stderr, r.stderr
    assert r.stdout == ""
