"""Token-mode conformance vectors (issue #40): tests/vectors/*.tok-*.json with their tables files (a token
section for a vocabulary trained by tests/make_vectors.py with the `tokenizers` library).

* the vectors cover every bundled family, both token kinds, every decoding rule of FORMAT.md section 8.2
  (held UTF-8, U+FFFD, ByteFallback runs, first-token texts, strip_start, clean-up), whole-delimiter tokens,
  prompts given as ids, the serving dialect and ids out of range;
* the Python check (`make_vectors.check`) passes them and fails a vector whose events, decoded texts or
  one-shot message were edited;
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import make_vectors as mv
from chatparse import templates
from chatparse.runtime.tables.loader import load

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"


def _token_vectors() -> dict:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in sorted(VECTORS.glob("*.tok-*.json"))}


def test_token_vectors_cover_every_family_and_decoding_rule():
    vecs = _token_vectors()
    names = {v["name"] for v in vecs.values()}
    assert set(templates.names()) <= names
    assert {v["vocab"] for v in vecs.values()} == {"bl", "sp", "uc"}
    metas = {v["vocab"]: load(VECTORS / v["tables"])["tokens"] for v in vecs.values() if v["name"] == "qwen3"}
    assert metas["bl"]["meta"]["kind"] == "bytes" and len(metas["bl"]["delims"])  # whole-delimiter tokens
    assert metas["sp"]["meta"]["kind"] == "pieces" and metas["sp"]["meta"]["strip_start"] == 1
    assert metas["uc"]["meta"]["cleanup"] and len(metas["uc"]["first_ids"])
    cases = [c for v in vecs.values() for c in v["cases"]]
    assert len(cases) > 400
    held = [c for c in cases if any(t == "" and f for t, f in zip(c["texts"], c["feeds"]))]
    assert len(held) > 50  # a feed whose ids released no text (bytes of a split character held)
    assert any("\ufffd" in "".join(c["texts"]) for c in cases)
    assert sum("prefix_ids" in c for c in cases) > 20
    assert sum(c.get("dialect") == "vllm" for c in cases) > 100
    assert any(c["error"] and c["error"]["stage"] == "feed" and c["id"].endswith("out-of-range") for c in cases)
    assert sum("oneshot" in c for c in cases) > 300


def test_python_check_passes_token_vectors_and_fails_edited_ones(tmp_path):
    for name in ("qwen3.tok-bl", "qwen3.tok-sp", "qwen3.tok-uc", "qwen3"):
        for ext in ("json", "cpt"):
            shutil.copy(VECTORS / f"{name}.{ext}", tmp_path)
    n, failures = mv.check(tmp_path)
    assert not failures and n > 20, failures[:5]
    path = tmp_path / "qwen3.tok-sp.json"
    good = path.read_text(encoding="utf-8")
    for edit in _edits(json.loads(good)):
        path.write_text(json.dumps(edit), encoding="utf-8")
        assert mv.check(tmp_path)[1], "an edited vector passed"
    path.write_text(good, encoding="utf-8")


def _edits(vec: dict) -> list:
    """Copies of a token vector with one thing changed: an event's text, a decoded text, a one-shot message."""
    import copy

    out = []
    e = copy.deepcopy(vec)
    c = next(c for c in e["cases"] if any(ev.get("type") == "region_chunk" for f in c["feed_events"] for ev in f))
    ev = next(ev for f in c["feed_events"] for ev in f if ev.get("type") == "region_chunk")
    ev["text"] += "!"
    out.append(e)
    e = copy.deepcopy(vec)
    c = next(c for c in e["cases"] if any(c["texts"]))
    k = next(i for i, t in enumerate(c["texts"]) if t)
    c["texts"][k] = c["texts"][k][:-1]
    out.append(e)
    e = copy.deepcopy(vec)
    c = next(c for c in e["cases"] if "message" in c.get("oneshot", {}))
    c["oneshot"]["message"]["role"] = "user"
    out.append(e)
    return out
