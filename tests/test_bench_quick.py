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
    assert len(verdicts) == 5 + 4, targets  # issues 2 and 5, then the four speed targets of issue 3
    for what in ("One token per call", "Whole sequence from ids", "256 streams stepped together",
                 "Building the token tables"):
        assert what in targets, what


def test_plots_exist_and_are_linked(quick_run):
    out, path = quick_run
    text = path.read_text(encoding="utf-8")
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+\.png)\)", text)
    expected = {"streaming_smollm3.png", "streaming_qwen3_coder.png", "streaming_gpt_oss.png",
                "streaming_gemma4.png", "streaming_speedup.png", "oneshot.png", "compile.png", "memory.png",
                "tokens.png"}
    assert expected <= set(linked)
    for name in linked:
        png = out / name
        assert png.exists() and png.stat().st_size > 1000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_token_section_has_measurements(quick_run):
    """The per-token section measures the token API (TokenParser / bind / TokenStreams) and says which
    vocabulary it used."""
    import importlib.util
    import os

    _, path = quick_run
    section = path.read_text(encoding="utf-8").split("## Per-token cost", 1)[1].split("\n## ", 1)[0]
    assert "Skipped" not in section and "(not run)" not in section
    for heading in ("### Building the token tables", "### One token per call, one stream",
                    "### Whole sequence from ids", "### 256 streams stepped together"):
        assert heading in section, heading
    assert "Vocabulary: **" in section
    if importlib.util.find_spec("mistral_common") is not None and not os.environ.get("CHATPARSE_BENCH_NO_TEKKEN"):
        # tekken when mistral-common is importable (unless its converter's dependencies are missing)
        assert "tekken_240911" in section or "tekken unavailable" in section
    else:
        assert "trained at bench time" in section
    one = section.split("### One token per call, one stream", 1)[1].split("\n### ", 1)[0]
    rows = [line for line in one.splitlines() if line.startswith("| ") and "feed" in line]
    assert len(rows) >= 3  # chatparse ids, decode + chatparse, decode + reference
    assert re.search(r"\| chatparse `feed_tokens\(id\)` \| \d+\.\d+ \(", one), one
    assert "![per-token cost](tokens.png)" in section
