"""Every code block of the documentation runs as written, and prints what the page says it prints.

The pages: README.md, docs/**/*.md and FORMAT.md (the site includes it as docs/table-format.md). Each fenced
block is one of:

* code that runs: ``python`` (exec'd in a fresh namespace), ``bash`` / ``sh`` / ``console`` (``bash -eu``:
  no ``pipefail``, as a reader's shell, so that ``| head`` may end its writer early), ``js`` (``node --input-type=module``). Each runs in a temporary directory holding a copy of
  docs/examples/ (the files the examples name: rollouts.jsonl, tools.json, ...) and a link ``js`` to the
  JavaScript runtime, with this checkout first on ``PYTHONPATH`` (so the ``chatparse`` command runs it). When a
  ``text`` block follows the code block (nothing but blank lines between), the code's standard output must
  equal it;
* data, not code: ``text``, ``json``, ``lark`` or no language (a layout diagram, an output shown, a JSON
  shape);
* anything else fails `test_every_block_is_known`: a block in a new language needs a rule here first.

A comment on the line right before a block changes what is done with it (``<!-- docs-test: KIND[: ARG] -->``):

* ``continues``: the block runs after the previous code block of the page, in its namespace and directory
  (a page's example in steps);
* ``needs: MODULE[, MODULE]``: runs where those modules import, else is a pytest skip naming them;
* ``skip: REASON``: not run here. Each one is listed in `NOT_RUN` below with its reason; the count is
  checked, so a new one is a deliberate change of this file, never a silent skip;
* ``run-by: tests/FILE.py::TEST``: run by that test (which needs something set up around it, as a Ray
  cluster); that test must exist and read the block's page.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples"
PAGES = [ROOT / "README.md", ROOT / "FORMAT.md", *sorted((ROOT / "docs").rglob("*.md"))]

RUN_LANGS = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "console": "shell",
             "js": "node", "javascript": "node", "c": "c"}
DATA_LANGS = {"text", "json", "lark", ""}
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<kind>[\w-]+)\s*(?::\s*(?P<arg>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)[^`]*$")

# The blocks not run here, by page: each needs what no test machine has (a GPU server, a model's weights)
# or is a command the test suite cannot run inside itself. The reason is the block's marker.
NOT_RUN = {
    "README.md": [
        "installs packages into the environment the tests run in",
        "the suite's own command: .ci/run runs exactly this",
        "needs vLLM 0.33.0 and the model's weights (tests/test_vllm_e2e.py serves the plugin through vLLM's "
        "OpenAI server on a scripted engine)",
        "needs SGLang 0.5.23 and the model's weights (tests/test_sglang_e2e.py serves the plugin through SGLang's "
        "OpenAI serving code on a scripted engine)",
    ],
    "FORMAT.md": [
        "a fragment (its prompt, stream and render are the caller's): docs/other-languages.md runs the same calls",
    ],
    "docs/install.md": [
        "installs packages into the environment the tests run in",
        "the suite's own command: .ci/run runs exactly this",
        "builds a 9 GB venv: .ci/run makes it and runs these tests in it",
        "installs packages into the environment the tests run in",
    ],
    "docs/other-languages.md": [
        "builds native/ with CMake into build/; tests/test_native_examples.py builds it the same way",
    ],
    "docs/serving.md": [
        "needs vLLM 0.33.0 and the model's weights (tests/test_vllm_e2e.py serves the plugin through vLLM's "
        "OpenAI server on a scripted engine)",
        "needs vLLM 0.33.0: tests/test_vllm_plugin.py::test_plugin_loads_the_serving_tables_beside_the_tokenizer "
        "runs it in the vLLM venv",
    ],
}


try:  # tests/deps.py: a skip where something is missing, a failure where CI says it must be there
    from deps import need as _need, need_program as _need_program
except ImportError:  # pragma: no cover - the same, as plain skips
    def _need(module: str, why: str):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed, needed for {why}")

    def _need_program(name: str, why: str):
        return shutil.which(name) or pytest.skip(f"{name} is not installed, needed for {why}")


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    marker: tuple[str, str] | None = None
    output: str | None = None  # the text block right after it, if any

    @property
    def kind(self) -> str:
        return RUN_LANGS.get(self.lang, "data" if self.lang in DATA_LANGS else "unknown")

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass
class Chain:
    """A code block and the ``continues`` blocks after it: run in one namespace and one directory."""

    blocks: list[Block] = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.blocks[0].id


def parse_page(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    blocks, i, pending, pending_line = [], 0, None, -1
    while i < len(lines):
        m = MARKER.match(lines[i])
        if m:
            assert pending is None, f"{page}:{pending_line + 1}: a docs-test marker with no block after it"
            pending, pending_line = (m["kind"], m["arg"] or ""), i
            i += 1
            continue
        f = FENCE.match(lines[i])
        if not f:
            if lines[i].strip() and pending is not None:
                raise AssertionError(f"{page}:{pending_line + 1}: a docs-test marker must be right before a block")
            i += 1
            continue
        indent, fence = len(f["indent"]), f["fence"]
        body, j = [], i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence) and lines[j].strip() == fence[0] * len(lines[j].strip())):
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        assert j < len(lines), f"{page}:{i + 1}: a code block that is never closed"
        blocks.append(Block(page, i + 1, f["lang"].lower(), "\n".join(body) + "\n", pending))
        pending = None
        i = j + 1
    assert pending is None, f"{page}:{pending_line + 1}: a docs-test marker with no block after it"
    # a text block right after a code block is that block's output
    text = path.read_text(encoding="utf-8").splitlines()
    for a, b in zip(blocks, blocks[1:]):
        if a.kind in ("python", "shell", "node") and b.lang == "text" and b.marker is None:
            end_a = a.line + a.code.count("\n")  # the closing fence of a, 0-based index
            if all(not s.strip() for s in text[end_a + 1:b.line - 1]):
                a.output = b.code
    return blocks


ALL_BLOCKS = [b for p in PAGES for b in parse_page(p)]


def chains() -> list[Chain]:
    out: list[Chain] = []
    last: dict[str, Chain] = {}
    for b in ALL_BLOCKS:
        if b.kind not in ("python", "shell", "node"):
            continue
        if b.marker and b.marker[0] == "continues":
            assert b.page in last, f"{b.id}: 'continues' with no code block before it on the page"
            last[b.page].blocks.append(b)
            continue
        chain = Chain([b])
        out.append(chain)
        last[b.page] = chain
    return out


CHAINS = chains()


def test_the_pages_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"README.md", "FORMAT.md", "docs/index.md", "docs/table-format.md"} <= names
    assert sum(1 for c in CHAINS for _ in c.blocks) >= 30


def test_every_block_is_known():
    unknown = [f"{b.id} ({b.lang!r})" for b in ALL_BLOCKS if b.kind == "unknown"]
    assert not unknown, "code blocks in a language this test does not run: " + ", ".join(unknown)
    kinds = {"continues", "needs", "skip", "run-by"}
    bad = [f"{b.id}: {b.marker}" for b in ALL_BLOCKS if b.marker and b.marker[0] not in kinds]
    assert not bad, bad
    # C needs the library built (CMake, PCRE2): a C block names the test that builds and runs it
    c_alone = [b.id for b in ALL_BLOCKS if b.kind == "c" and not (b.marker and b.marker[0] == "run-by")]
    assert not c_alone, f"C blocks not run by a test (docs-test: run-by): {c_alone}"
    on_data = [b.id for b in ALL_BLOCKS if b.marker and b.kind == "data"]
    assert not on_data, f"docs-test markers on blocks that are not code: {on_data}"


def test_blocks_not_run_are_marked_and_counted():
    """Every block not run here carries a reason, and the list of them is this file's NOT_RUN: a block
    marked ``skip`` anywhere else fails here."""
    found: dict[str, list[str]] = {}
    for b in ALL_BLOCKS:
        if b.marker and b.marker[0] == "skip":
            assert b.marker[1], f"{b.id}: 'skip' needs a reason"
            found.setdefault(b.page, []).append(b.marker[1])
    assert found == NOT_RUN
    total = sum(len(c.blocks) for c in CHAINS)
    not_run = sum(map(len, NOT_RUN.values()))
    run_by = sum(1 for b in ALL_BLOCKS if b.marker and b.marker[0] == "run-by")
    print(f"{total} code blocks: {total - not_run - run_by} run here, {run_by} run by another test, "
          f"{not_run} not run")


def test_blocks_run_by_another_test_are_run_there():
    for b in ALL_BLOCKS:
        if b.marker and b.marker[0] == "run-by":
            file, _, name = b.marker[1].partition("::")
            source = (ROOT / file).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{b.id}: no test {b.marker[1]}"
            assert Path(b.page).name in source, f"{b.id}: {file} does not read {b.page}"


def _workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    shutil.copytree(EXAMPLES, work)
    (work / "js").symlink_to(ROOT / "js", target_is_directory=True)
    return work


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("CHATPARSE_TRACEBACK", None)
    return env


def _run(block: Block, work: Path, namespace: dict) -> str:
    if block.kind == "python":
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block.code, block.id, "exec"), namespace)
        return out.getvalue()
    if block.kind == "shell":
        code = "\n".join(s[2:] if s.startswith("$ ") else s for s in block.code.splitlines()) + "\n"
        r = subprocess.run(["bash", "-eu", "-c", code], cwd=work, env=_env(), capture_output=True,
                           text=True, timeout=600)
        assert r.returncode == 0, f"{block.id} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        return r.stdout
    node = _need_program("node", f"the example at {block.id}")
    r = subprocess.run([node, "--input-type=module", "-e", block.code], cwd=work, env=_env(), capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"{block.id} exited {r.returncode}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


def _not_run_here(chain: Chain) -> bool:
    head = chain.blocks[0]
    return bool(head.marker and head.marker[0] in ("skip", "run-by"))


def test_no_block_continues_one_not_run_here():
    bad = [c.blocks[1].id for c in CHAINS if _not_run_here(c) and len(c.blocks) > 1]
    assert not bad, f"blocks that continue one not run here: {bad}"


# Blocks not run here are not pytest skips (they would count as skips of every run of the suite): they are
# counted and listed by test_blocks_not_run_are_marked_and_counted instead.
@pytest.mark.parametrize("chain", [c for c in CHAINS if not _not_run_here(c)], ids=lambda c: c.id)
def test_block_runs_as_written(chain: Chain, tmp_path, monkeypatch):
    for b in chain.blocks:
        if b.marker and b.marker[0] == "needs":
            for module in (m.strip() for m in b.marker[1].split(",")):
                _need(module, f"the example at {b.id}")
    work = _workdir(tmp_path)
    monkeypatch.chdir(work)
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict = {"__name__": "__main__"}
    for b in chain.blocks:
        printed = _run(b, work, namespace)
        if b.output is not None:
            assert _sizes_elided(printed) == _sizes_elided(b.output), f"{b.id} printed other than the page shows"


def _sizes_elided(text: str) -> str:
    """`text` with the byte counts `chatparse compile` prints (``(13920 bytes``) made one placeholder: a table
    file's size depends on the installed `regex` release's Unicode data (the JavaScript translation of ``\\w``
    spells out its classes; regex 2026.12.2 makes the documented file 14280 bytes, 2026.5.9 13920), and the
    examples are about the commands, not that number. Everything else is compared as printed."""
    return re.sub(r"\((\d+) bytes", "(N bytes", text)


def example_after(page: str, after: str) -> tuple[str, str]:
    """The first ```python block after the text `after` on `page` (a path from the repository's root) and
    the ```text block right after it, for the tests that run a documented example in a setting of their own."""
    text = (ROOT / page).read_text(encoding="utf-8")
    rest = text[text.index(after):]
    m = re.search(r"```python\n(.*?)```\s*```text\n(.*?)```", rest, re.S)
    assert m, f"no python + text example after {after!r} in {page}"
    return m.group(1), m.group(2)
