"""The other-language examples of the C runtime (native/examples/, issue #40) give Python's answers.

* native/ builds with CMake (build/native-pytest, shared with tests/test_native_loader.py); the C++ example
  (native/examples/cpp, C++17) builds as its own CMake project and the Rust one (native/examples/rust, std
  only) with ``cargo build --offline``, both into build/native-pytest-examples. A skip where CMake, PCRE2
  (libpcre2-dev), a C++ compiler's CMake or cargo is missing; a failure under ``CHATPARSE_REQUIRE_DEPS``
  (tests/deps.py).
* each example streams the output of vector cases and real outputs of several bundled families from the
  family's ``tests/vectors/<family>.cpt``, 3 bytes per feed (and 1 and 7: multi-byte characters split across
  feeds), and native/examples/check_example.py requires, byte for byte, the message of Python's
  ``parse_response`` on the bundled template and the same text, prompt and tools, and each feed's events as
  Python's ``ResponseParser`` gives them for the same bytes;
* token ids (``--ids``): every case of those families' token vectors (tests/vectors/<family>.tok-*.json), 3
  and 1 ids per feed, against Python's ``TokenParser`` and ``parse_tokens`` on the same file, errors included;
* the tables ``chatparse compile`` writes beside a tokenizer directory work the same; corrupted tables are
  refused with the Python loader's message; and the check fails an example whose message is edited.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from deps import need_program
from native_build import build_native

from chatparse import parse_response, templates

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
REAL = ROOT / "tests" / "real_outputs"
EXAMPLES = ROOT / "native" / "examples"
BUILD = ROOT / "build" / "native-pytest-examples"
WHY = "the C runtime's examples (native/examples/)"
FAMILIES = ("qwen3", "hermes", "gpt_oss", "kimi_k2", "mistral_v11", "deepseek_v3", "qwen3_coder", "glm45",
            "step3", "gemma4")
CHUNKS = (3, 1, 7)


def _check_module():
    spec = importlib.util.spec_from_file_location("check_example", EXAMPLES / "check_example.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_example = _check_module()


def _run(cmd: list, **kw) -> None:
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900, **kw)
    assert out.returncode == 0, f"{' '.join(map(str, cmd))}:\n{(out.stdout + out.stderr)[-4000:]}"


@pytest.fixture(scope="module")
def library() -> Path:
    return build_native(ROOT / "build" / "native-pytest", ("chatparse",))


def _build_cpp(library: Path, build: Path, sanitize: bool = False) -> list:
    need_program("c++", WHY)
    build_native(build, ("all",), sanitize=sanitize, source=EXAMPLES / "cpp",
                 options=(f"-DCHATPARSE_BUILD={library}", f"-DPython3_EXECUTABLE={sys.executable}"))
    return [str(build / "stream")]


@pytest.fixture(scope="module")
def cpp_example(library) -> list:
    return _build_cpp(library, BUILD / "cpp")


@pytest.fixture(scope="module")
def rust_example(library) -> list:
    cargo = need_program("cargo", WHY)
    target = BUILD / "rust"
    _run([cargo, "build", "--offline", "--quiet", "--manifest-path", str(EXAMPLES / "rust" / "Cargo.toml")],
         env={**os.environ, "CHATPARSE_LIB_DIR": str(library), "CARGO_TARGET_DIR": str(target)})
    return [str(target / "debug" / "stream")]


@pytest.fixture(params=["cpp", "rust"])
def example(request) -> list:
    return request.getfixturevalue(f"{request.param}_example")


def _cases(family: str) -> list:
    """(id, prompt, text, tools): the family's whole-text vector cases in transformers' dialect, and its real
    outputs that need no template override."""
    vec = json.loads((VECTORS / f"{family}.json").read_text(encoding="utf-8"))
    out = [(c["id"], c["prefix"] or "", "".join(c["feeds"]), c["tools"]) for c in vec["cases"]
           if c["id"].endswith("/0") and "vllm" not in c["id"]]
    real = json.loads((REAL / f"{family}.json").read_text(encoding="utf-8"))
    out += [(c["id"], c.get("prefix") or "", c["output"], c.get("tools")) for c in real["cases"]
            if not c.get("template_overrides")]
    return out


def test_the_cases_split_characters_and_type_tools():
    """What the family tests below cover: non-ASCII text (so small feeds split characters) and declared tools."""
    cases = [c for f in FAMILIES for c in _cases(f)]
    assert len(cases) >= 100
    assert sum(any(ord(ch) > 127 for ch in text) for _, _, text, _ in cases) >= 10
    assert sum(tools is not None for *_, tools in cases) >= 5
    messages = [parse_response(text, templates.get(f), prefix=prompt, tools=tools)
                for f in FAMILIES for _, prompt, text, tools in _cases(f)]
    assert sum("reasoning_content" in m and "tool_calls" in m for m in messages) >= 3


@pytest.mark.parametrize("family", FAMILIES)
def test_example_gives_pythons_events_and_message(example, family):
    tables = VECTORS / f"{family}.cpt"
    problems = []
    for case_id, prompt, text, tools in _cases(family):
        problems += [f"{case_id}: {p}" for p in
                     check_example.check(example, family, tables, prompt, text, tools, CHUNKS)]
    assert not problems, "\n".join(problems[:10])


def _token_cases(family: str) -> list:
    """(tables, id, prompt text or ids, ids, tools, dialect): every case of the family's token vectors (tables
    with a token section for a trained test vocabulary), errors included."""
    out = []
    for path in sorted(VECTORS.glob(f"{family}.tok-*.json")):
        vec = json.loads(path.read_text(encoding="utf-8"))
        for c in vec["cases"]:
            prompt = c["prefix_ids"] if "prefix_ids" in c else c["prefix"]
            out.append((VECTORS / vec["tables"], c["id"], prompt, [i for f in c["feeds"] for i in f], c["tools"],
                        c.get("dialect")))
    return out


def test_the_token_cases_include_errors_and_prompt_ids():
    cases = [c for f in FAMILIES for c in _token_cases(f)]
    assert len(cases) >= 50
    assert sum(isinstance(c[2], list) for c in cases) >= 5
    assert sum(c[5] == "vllm" for c in cases) >= 5
    errors = 0
    for tables, _, prompt, ids, tools, dialect in cases:
        errors += "error" in check_example.python_run_ids(tables, prompt, ids, tools, 3, dialect)
    assert errors >= 3


@pytest.mark.parametrize("family", FAMILIES)
def test_example_fed_token_ids(example, family):
    """Token ids (--ids): cp_parser_new_ids (prompt as text or ids) and cp_parser_feed_ids, 3 and 1 ids per
    feed, against Python's TokenParser and parse_tokens on the same file's token section; where Python raises
    (an id out of range, a missing field), the example exits 1 with the same exception class."""
    problems = []
    for tables, case_id, prompt, ids, tools, dialect in _token_cases(family):
        problems += [f"{tables.name} {case_id}: {p}" for p in
                     check_example.check(example, family, tables, prompt, ids, tools, (3, 1), dialect=dialect)]
    assert not problems, "\n".join(problems[:10])


@pytest.mark.parametrize("family", ("qwen3", "hermes", "gpt_oss", "kimi_k2"))
def test_example_in_vllms_dialect(example, family):
    """vLLM's serving dialect (spans, captures, region_malformed events) through the C API's option."""
    problems = []
    for case_id, prompt, text, tools in _cases(family):
        problems += [f"{case_id}: {p}" for p in
                     check_example.check(example, family, VECTORS / f"{family}.cpt", prompt, text, tools, (3, 1),
                                         dialect="vllm")]
    assert not problems, "\n".join(problems[:10])


def test_tables_written_by_chatparse_compile(example, tmp_path):
    """A bundled template compiled beside a tokenizer directory (`chatparse compile DIR`), the real output of
    the docs' example (reasoning and a tool call) streamed 3 bytes at a time."""
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"response_template": templates.get("qwen3")}),
                                                    encoding="utf-8")
    _run([sys.executable, "-m", "chatparse.cli", "compile", str(tmp_path)])
    prompt = (ROOT / "docs" / "examples" / "prompt.txt").read_text(encoding="utf-8")
    text = (ROOT / "docs" / "examples" / "output.txt").read_text(encoding="utf-8")
    assert not check_example.check(example, "qwen3", tmp_path / "response_template.cpt", prompt, text, None, (3,))


def test_corrupted_tables_are_refused_with_pythons_message(example):
    for name in ("checksum", "magic", "short", "template_not_json", "mode_dead_state"):
        problems = check_example.check_refused(example, VECTORS / "invalid" / f"{name}.cpt",
                                               ROOT / "docs" / "examples" / "output.txt")
        assert not problems, problems


def test_the_check_fails_an_edited_message(example, tmp_path):
    """check_example.py is not vacuous: an example whose message has one letter changed fails it."""
    wrapper = tmp_path / "edit.py"
    wrapper.write_text("import subprocess, sys\n"
                       "out = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
                       "sys.stdout.write(out.stdout.replace('Paris.\"', 'Pariz.\"'))\n"
                       "sys.exit(out.returncode)\n", encoding="utf-8")
    prompt = (ROOT / "docs" / "examples" / "prompt.txt").read_text(encoding="utf-8")
    text = (ROOT / "docs" / "examples" / "output.txt").read_text(encoding="utf-8")
    problems = check_example.check([sys.executable, str(wrapper), *example], "qwen3", VECTORS / "qwen3.cpt",
                                   prompt, text, None, (3,))
    assert any("message" in p and "Pariz" in p for p in problems), problems


def test_the_c_example_of_the_docs(library, tmp_path):
    """The C example of docs/other-languages.md, compiled against the library as its text says, run on the
    page's tables (`chatparse compile tokenizer` in docs/examples/), prints the output shown under it - which is
    the message Python gives for the same text."""
    page = (ROOT / "docs" / "other-languages.md").read_text(encoding="utf-8")
    m = re.search(r"```c\n(.*?)```\s*```text\n(.*?)```", page, re.S)
    assert m, "no C example followed by its output in docs/other-languages.md"
    work = tmp_path / "work"
    shutil.copytree(ROOT / "docs" / "examples", work)
    _run([sys.executable, "-m", "chatparse.cli", "compile", str(work / "tokenizer")])
    (work / "stream.c").write_text(m.group(1), encoding="utf-8")
    cc = need_program("cc", WHY)
    pcre = subprocess.run(["pkg-config", "--libs", "libpcre2-8"], capture_output=True, text=True).stdout.split()
    _run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", str(ROOT / "native" / "include"), "stream.c",
          str(library / "libchatparse.a"), *pcre, "-lm", "-o", "stream"], cwd=work)
    out = subprocess.run([str(work / "stream")], cwd=work, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == m.group(2)
    message = json.loads(out.stdout.splitlines()[0])
    prompt = (work / "prompt.txt").read_text(encoding="utf-8")
    template = json.loads((work / "tokenizer" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert message == parse_response((work / "output.txt").read_text(encoding="utf-8"),
                                     template["response_template"], prefix=prompt)


@pytest.mark.slow
def test_cpp_example_under_sanitizers():
    """The C++ example and the library built with ASan+UBSan (LeakSanitizer included: the RAII wrappers free all
    the library returns) on every family's cases, 1 and 3 bytes (or ids) per feed. With ``-m slow`` only."""
    library = build_native(ROOT / "build" / "native-asan", ("chatparse",), sanitize=True)
    example = _build_cpp(library, BUILD / "cpp-asan", sanitize=True)
    problems = []
    for family in templates.names():
        for case_id, prompt, text, tools in _cases(family):
            problems += [f"{case_id}: {p}" for p in check_example.check(
                example, family, VECTORS / f"{family}.cpt", prompt, text, tools, (1, 3))]
        for tables, case_id, prompt, ids, tools, dialect in _token_cases(family):
            problems += [f"{tables.name} {case_id}: {p}" for p in check_example.check(
                example, family, tables, prompt, ids, tools, (1, 3), dialect=dialect)]
    assert not problems, "\n".join(problems[:10])
