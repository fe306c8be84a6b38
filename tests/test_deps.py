"""tests/deps.py: a missing dependency skips, and fails where CHATPARSE_REQUIRE_DEPS says it must be there
(.ci/run); vLLM is required only with CHATPARSE_REQUIRE_DEPS=vllm (the venv .ci/run makes for it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

BODY = f"""
import sys
sys.path.insert(0, {str(TESTS)!r})
from deps import need, need_program, need_vllm

def test_module():
    need("chatparse_no_such_module", "a module no one installs")

def test_program():
    need_program("chatparse-no-such-program", "a program no one installs")

def test_present():
    assert need("json").dumps(1) == "1"
"""


def _run(tmp_path: Path, body: str, mode: str | None) -> str:
    (tmp_path / "test_it.py").write_text(body, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "CHATPARSE_REQUIRE_DEPS"}
    if mode is not None:
        env["CHATPARSE_REQUIRE_DEPS"] = mode
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "test_it.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def test_missing_skips_naming_the_line_that_asked(tmp_path):
    out = _run(tmp_path, BODY, None)
    assert "1 passed, 2 skipped" in out, out
    assert "test_it.py:7: chatparse_no_such_module is not installed, needed for a module no one installs" in out, out
    assert "test_it.py:10: chatparse-no-such-program is not installed, needed for a program no one installs" in out, out


@pytest.mark.parametrize("mode", ["1", "vllm"])
def test_missing_fails_where_required(tmp_path, mode):
    out = _run(tmp_path, BODY, mode)
    assert "2 failed, 1 passed" in out, out
    assert f"CHATPARSE_REQUIRE_DEPS={mode} (set by .ci/run) requires it" in out, out


def test_vllm_is_required_only_in_its_venv(tmp_path):
    body = BODY.split("def test_module")[0] + 'need_vllm("vllm.parser")\n\ndef test_x():\n    pass\n'
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed here: this checks the Python where it is not")
    assert "1 skipped" in _run(tmp_path, body, "1")
    out = _run(tmp_path, body, "vllm")
    assert "1 error" in out and "needs vLLM 0.33.0" in out, out
