"""The benchmark suite's quick mode runs end to end (so bench/ cannot rot).

No timing assertions: benchmarks are never timed tests. This only checks that `python -m bench --quick`
writes RESULTS.md with every section, a verdict for every target (the serving dialect's included), the
serving-dialect rows (against vLLM's chat_parsing where `bench.vllm_ref` finds it, chatparse alone where it
does not), and the plots it links.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from deps import need

ROOT = Path(__file__).resolve().parents[1]

need("matplotlib")
need("transformers.utils.chat_parsing")


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


def _vllm_found() -> bool:
    from bench import vllm_ref

    return vllm_ref.load() is not None


def test_every_target_has_a_verdict(quick_run):
    _, path = quick_run
    text = path.read_text(encoding="utf-8")
    targets = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    verdicts = re.findall(r"\| (PASS|FAIL) \|", targets)
    # issues 2 and 5, the four speed targets of issue 3, then the serving dialect's: streaming flat, the three
    # per-token speed targets, and (where vLLM's chat_parsing was found) streaming >= 10x vLLM
    assert len(verdicts) == 5 + 4 + 4 + _vllm_found(), targets
    for what in ("One token per call", "Whole sequence from ids", "256 streams stepped together",
                 "Building the token tables"):
        assert what in targets, what
    serving = [line for line in targets.splitlines() if 'serving dialect (`dialect="vllm"`)' in line]
    assert len(serving) == 4 + _vllm_found(), targets
    for what in ("Streaming is flat, serving dialect", "One token per call, one stream, serving dialect",
                 "Whole sequence from ids, serving dialect", "256 streams stepped together, serving dialect"):
        assert sum(what in line for line in serving) == 1, what
    assert any("'s `chat_parsing` (the same target as above" in line for line in serving) == _vllm_found()


def test_serving_dialect_rows(quick_run):
    """Streaming and per-token rows for dialect="vllm" beside the default ones, with ratios against vLLM's
    chat_parsing where it was found, and RESULTS.md saying which."""
    _, path = quick_run
    text = path.read_text(encoding="utf-8")
    if _vllm_found():
        assert "loaded by file path from" in text and "was not found" not in text
    else:
        assert "the vLLM reference was not found" in text
    streaming = text.split("## Streaming cost per feed", 1)[1].split("\n## ", 1)[0]
    serving = streaming.split('### Serving dialect (`dialect="vllm"`)', 1)[1]
    rows = [line for line in serving.splitlines() if re.match(r"\| (smollm3|qwen3_coder|gpt_oss|gemma4) \|", line)]
    assert len(rows) == 4 * 3, serving  # every format x region kind, 4 characters per feed
    cell = r"\d+\.\d+ / \d+\.?\d* \(\d+\.?\d*x\)" if _vllm_found() else r"\d+\.\d+"
    for row in rows:
        assert re.match(r"\| \w+ \| \w+ \| " + cell + r" \| " + cell + r" \| \d+\.\d+x \| \d+\.\d+x \|$", row), row
    tokens = text.split("## Per-token cost", 1)[1].split("\n## ", 1)[0]
    serving = tokens.split('### Serving dialect (`dialect="vllm"`)', 1)[1]
    assert re.search(r'\| chatparse `feed_tokens\(id\)`, dialect="vllm" \| \d+\.\d+ \(', serving), serving
    assert ("| decode + vLLM `feed` |" in serving) == _vllm_found()
    # the serving dialect's whole-sequence rows are at the default rows' lengths (the same generations), which
    # depend on the vocabulary: tekken where mistral-common is installed, else a BPE trained by the bench
    default = tokens.split("### Whole sequence from ids", 1)[1].split("\n### ", 1)[0]
    lengths = re.findall(r"^\| (\d[\d,]*) \| ", default, re.M)
    assert len(lengths) == 2, default
    for n in lengths:
        assert re.search(rf"\| {n} \| \d+\.\d+ \| \d+\.\d+ \| ", serving), (n, serving)
    assert re.search(r"\| prose \| 256 \| \d+\.\d+ \| \d+\.\d+ \|", serving), serving


def test_serving_rows_without_vllm(tmp_path, monkeypatch):
    """Where vLLM's chat_parsing is not found, the serving-dialect rows are chatparse alone (no ratio, no
    target against vLLM) and RESULTS.md says the reference was not found; nothing fails."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from bench import measure, report, vllm_ref

    monkeypatch.setenv(vllm_ref.ENV, "none")
    monkeypatch.setattr(vllm_ref, "_state", {})
    assert vllm_ref.load() is None
    cfg = measure.Config.quick_mode(formats=("gemma4",), stream_kinds=("content",), chunk_sizes=(4,),
                                    stream_ascii=False, stream_lengths=(2_000, 4_000), stream_reps=1, progress=print)
    records = measure.streaming(cfg)
    serving = [r for r in records if r["dialect"] == "vllm"]
    assert len(serving) == 2 and all(r["ref_us"] != r["ref_us"] and r["cp_us"] > 0 for r in serving)
    path = report.write(tmp_path, {"streaming": records}, cfg, "python -m bench --quick", [], 1.0)
    text = path.read_text(encoding="utf-8")
    assert "the vLLM reference was not found" in text and "CHATPARSE_VLLM_SITE=none" in text
    targets = text.split("## Targets", 1)[1].split("\n## ", 1)[0]
    assert "Streaming is flat, serving dialect" in targets and "`chat_parsing` (the same target" not in targets
    assert re.search(r"\| gemma4 \| content \| \d+\.\d+ \| \d+\.\d+ \| \d+\.\d+x \| \d+\.\d+x \|", text), text


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
