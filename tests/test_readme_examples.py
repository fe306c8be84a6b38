"""README examples run as written and print what the README says they print."""

from __future__ import annotations

import contextlib
import io
import pathlib
import re

README = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()


def _example_after(heading: str) -> tuple[str, str]:
    """The ```python block after `heading` and the ```text block right after it."""
    rest = README[README.index(heading):]
    m = re.search(r"```python\n(.*?)```\s*```text\n(.*?)```", rest, re.S)
    assert m, f"no python + text example after {heading!r}"
    return m.group(1), m.group(2)


def test_malformed_tool_call_recovery_example():
    code, expected = _example_after("Recovering from a malformed tool call")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == expected
