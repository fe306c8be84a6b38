"""The vLLM plugin under load through vLLM 0.33.0's real OpenAI server (tests/vllm_load.py says what runs).

* `test_short_load`: 200 streaming requests with tools, 16 at once, over 4 families (qwen3, hermes,
  llama3_json, glm45): every streamed message equals the plugin's one-shot (non-streaming) answer for the same
  output and prompt, and carries its own request's number, and no other.
* `test_leak_check_sees_a_leak`: the same checks flag every response when the engine serves each request
  another request's output (fault injection), so a leak between requests would show.
* `test_full_load` (``-m slow`` only): 5,000 requests, 64 at once, over 6 families; also the resident set
  grows less than 5% from after a warm-up of 200 requests to the end.

vLLM lives in .ci/run's venv; run this file with its python:

    ~/.cache/chatparse/venv-vllm/bin/python -m pytest tests/test_vllm_load.py            # the short run
    ~/.cache/chatparse/venv-vllm/bin/python -m pytest tests/test_vllm_load.py -m slow    # the full run
"""

from __future__ import annotations

import json

import pytest

from deps import need, need_vllm  # noqa: E402

need_vllm("vllm.entrypoints.openai.chat_completion.serving")  # installed only in .ci/run's venv
need("openai", "the client of the served model (a vLLM dependency)")
need("uvicorn", "the server (a vLLM dependency)")

import vllm_load  # noqa: E402


def _failures(report: vllm_load.LoadReport) -> str:
    """What failed: counts per base output, then the first few failures with the request body, the output
    and both answers (enough to reproduce each; the token ids are in the report)."""
    short = [{k: v for k, v in m.items() if k not in ("prompt_ids", "output_ids")} for m in report.mismatches]
    return json.dumps({"summary": report.summary(), "mismatch_sources": report.mismatch_sources,
                       "leak_sources": report.leak_sources, "mismatches": short, "leaks": report.leaks,
                       "errors": report.errors}, indent=1, ensure_ascii=False, default=str)[:20000]


def _problems(report: vllm_load.LoadReport, families) -> list[str]:
    problems = []
    if report.error_count:
        problems.append(f"{report.error_count} requests failed")
    if report.mismatch_count or not report.all_exact:
        problems.append(f"{report.mismatch_count} responses differ from the one-shot answer")
    if report.leak_count or not report.no_leak:
        problems.append(f"{report.total - report.leak_free} responses fail the number check "
                        f"({report.leak_count} carry another request's number)")
    for family in families:
        # the plugin found the family from the model id: no response_template anywhere
        resolution = report.resolutions[family]
        if (resolution["source"], resolution["family"]) != ("model id", family):
            problems.append(f"{family} resolved as {resolution}")
        if not (report.bases[family].get("corpus") and report.bases[family].get("generated")):
            problems.append(f"{family}: base outputs {report.bases[family]}")
    if report.distinct_outputs != report.total:  # every request has an output of its own
        problems.append(f"only {report.distinct_outputs} distinct outputs")
    if report.detokenized_differs:
        problems.append(f"{report.detokenized_differs} outputs detokenized to another text")
    # requests really were concurrent, and generations interleaved inside each engine
    if report.max_in_flight != min(report.concurrency, report.total):
        problems.append(f"at most {report.max_in_flight} requests in flight")
    if not all(n > 1 for n in report.engine_max_active.values()):
        problems.append(f"generations did not interleave: {report.engine_max_active}")
    return problems


def test_short_load():
    families = list(vllm_load.DEFAULT_FAMILIES)
    report = vllm_load.run_load(200, 16, families, warmup=100)
    print(report.summary())
    assert set(report.per_family) == set(families) and sum(report.per_family.values()) == 200
    problems = _problems(report, families)
    assert not problems, "; ".join(problems) + "\n" + _failures(report)


def test_leak_check_sees_a_leak():
    report = vllm_load.run_load(16, 8, ["hermes"], warmup=0, generated=10, swap_outputs=True)
    assert report.error_count == 0, _failures(report)
    # the one-shot answer is computed from what the engine served: it agrees; the numbers do not
    assert report.all_exact, _failures(report)
    assert report.leak_free == 0 and report.leak_count == report.total, _failures(report)
    assert all(leak["foreign"] == [leak["n"] ^ 1] for leak in report.leaks), report.leaks


@pytest.mark.slow
def test_full_load():
    """The full run (about 3 minutes here): with ``-m slow`` only (tests/conftest.py deselects it otherwise)."""
    families = list(vllm_load.FAMILIES)
    report = vllm_load.run_load(5000, 64, families, warmup=200)
    print(report.summary())
    assert len(families) >= 4 and sum(report.per_family.values()) == 5000
    problems = _problems(report, families)
    if not report.rss_growth < 0.05:
        problems.append(f"RSS grew {report.rss_growth * 100:+.2f}% after the warm-up (target < 5%)")
    assert not problems, "; ".join(problems) + "\n" + _failures(report)
