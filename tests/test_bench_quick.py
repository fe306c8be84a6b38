"""The benchmark suite's quick mode runs end to end (so bench/ cannot rot).

No timing assertions: benchmarks are never timed tests. This only checks that `python -m bench --quick`
writes RESULTS.md with every section, a verdict for every target, and the plots it links.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("matplotlib")
pytest.importorskip("transformers.utils.chat_parsing")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench.__main__ import main

    out = tmp_path_factory.mktemp("bench")
    path = main(["--quick", "--quiet", "--out", str(out)])
    return out, path


def test_results_has_every_section(quick_run):
    from bench.report import SECTIONS

    out, path = quick_run
    assert path == out / "RESULTS.md"
    text = path.read_text(encoding="utf-8")
    for heading in SECTIONS:
        assert heading in text, heading
    assert "python -m bench --quick" in text
    assert "CPU" in text and "Python" in text and "transformers" in text


def test_every_target_has_a_verdict(quick_run):
    _, path = quick_run
    text = path.read_text(encoding="utf-8")
    targets = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    verdicts = re.findall(r"\| (PASS|FAIL) \|", targets)
    assert len(verdicts) == 5, targets


def test_plots_exist_and_are_linked(quick_run):
    out, path = quick_run
    text = path.read_text(encoding="utf-8")
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    expected = {"streaming_smollm3.png", "streaming_qwen3_coder.png", "streaming_gpt_oss.png",
                "streaming_gemma4.png", "streaming_speedup.png", "oneshot.png", "compile.png", "memory.png"}
    assert expected <= set(linked)
    for name in linked:
        png = out / name
        assert png.exists() and png.stat().st_size > 1000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_token_section_says_why_it_is_skipped(quick_run):
    import chatparse

    _, path = quick_run
    section = path.read_text(encoding="utf-8").split("## Per-token cost", 1)[1].split("\n## ", 1)[0]
    if not hasattr(chatparse.ResponseParser, "feed_tokens"):
        assert "no token-level API yet" in section
