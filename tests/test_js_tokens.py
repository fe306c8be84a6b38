"""Token-mode conformance vectors (issue #40): tests/vectors/*.tok-*.json with their tables files (a token
section for a vocabulary trained by tests/make_vectors.py with the `tokenizers` library), in Python and in the
JavaScript runtime.

* the vectors cover every bundled family, both token kinds, every decoding rule of FORMAT.md section 8.2
  (held UTF-8, U+FFFD, ByteFallback runs, first-token texts, strip_start, clean-up), whole-delimiter tokens,
  prompts given as ids, the serving dialect and ids out of range;
* the Python check (`make_vectors.check`) passes them and fails a vector whose events, decoded texts or
  one-shot message were edited;
* the JavaScript token engine (js/chatparse.mjs `TokenParser`, `TokenDecoder`, `parseTokens`) passes every
  token-mode case through `node js/run_vectors.mjs`, fails the edited ones, equals Python on fresh random
  token vectors (`make_vectors.fuzz_tokens`), and refuses the files Python's token binding refuses, with the
  same messages.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
from deps import needs_program

import make_vectors as mv
from chatparse import templates
from chatparse.runtime.tables.loader import load

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
NODE = shutil.which("node")


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
    # the clean-up changes the decoded text somewhere (a space before punctuation taken out)
    from chatparse import CompiledTemplate
    from chatparse.runtime.tokens import token_binding

    changed = 0
    for v in vecs.values():
        if v["vocab"] != "uc":
            continue
        raw = load(VECTORS / v["tables"])
        vocab = token_binding(CompiledTemplate(raw["template"], raw)).vocab
        for c in v["cases"]:
            text = "".join(c["texts"])
            vocab.cleanup = False
            changed += text != vocab.decode([i for f in c["feeds"] for i in f if i < vocab.size])
            vocab.cleanup = True
    assert changed >= 5


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


# ------------------------------------------------------------------------------------------ the JavaScript engine


def _run_js(directory: Path) -> tuple[dict, str]:
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(directory), "--json"], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1]), out.stdout[-3000:] + out.stderr[-2000:]


def _token_dir(tmp_path: Path) -> tuple[Path, int]:
    d = tmp_path / "tok"
    d.mkdir()
    n = 0
    for p in VECTORS.glob("*.tok-*"):
        shutil.copy(p, d)
        if p.suffix == ".json":
            n += len(json.loads(p.read_text(encoding="utf-8"))["cases"])
    return d, n


@needs_program("node", "the JavaScript runtime")
def test_js_runs_every_token_vector(tmp_path):
    d, n = _token_dir(tmp_path)
    summary, out = _run_js(d)
    assert summary["failed"] == 0 and summary["passed"] == n and n > 400, out


@needs_program("node", "the JavaScript runtime")
def test_js_fails_edited_token_vectors(tmp_path):
    d, n = _token_dir(tmp_path)
    path = d / "qwen3.tok-sp.json"
    edits = _edits(json.loads(path.read_text(encoding="utf-8")))
    for k, edit in enumerate(edits):
        path.write_text(json.dumps(edit), encoding="utf-8")
        summary, out = _run_js(d)
        assert summary["failed"] == 1, (k, out)


@needs_program("node", "the JavaScript runtime")
def test_js_token_random_differential(tmp_path):
    """Random ids (a case's encoding with characters split into byte tokens and random tokens inserted, or pure
    random ids), fed in random runs, either dialect, the prompt as text or ids: JS equals Python's TokenParser."""
    seed = random.randrange(10**6)
    n = mv.fuzz_tokens(tmp_path, per_template=12, seed=seed)
    n_py, failures = mv.check(tmp_path)
    assert not failures and n_py == n, failures[:3]
    summary, out = _run_js(tmp_path)
    assert summary["failed"] == 0 and summary["passed"] == n, (
        f"reproduce: python -c 'import sys; sys.path[:0] = [\"tests\"]; import make_vectors as mv; from pathlib import Path; "
        f"mv.fuzz_tokens(Path(\"/tmp/fz\"), 12, {seed})' && node js/run_vectors.mjs /tmp/fz\n" + out)


@needs_program("node", "the JavaScript runtime")
def test_js_refuses_what_the_python_token_binding_refuses(tmp_path):
    """The checks that need the compiled tables (FORMAT.md section 8.4, last paragraph: a whole-delimiter row
    whose token is no delimiter, an inert token in a mode without a prefilter): Python's token_binding and
    JS's TokenParser refuse the same files with the same messages, and take the intact ones."""
    from test_format_tokens import _arr, _edit, _poke, _token_arrays

    from chatparse import CompiledTemplate, bind
    from chatparse.compiler.writer import dumps
    from chatparse.runtime.tables.loader import loads
    from chatparse.runtime.tokens import token_binding

    good = (VECTORS / "qwen3.tok-bl.cpt").read_bytes()

    def not_a_delimiter(blob, meta):  # the last row's token becomes a later one-byte token that is no delimiter
        arrs = _token_arrays(meta, blob)
        m, i, _ = arrs["delims"][-1].tolist()
        ok = ((arrs["flags"] & 2) != 0) & (np.diff(arrs["offsets"].astype(np.int64)) == 1) & (arrs["inert"][m] == 0)
        j = int(np.flatnonzero(ok & (np.arange(len(ok)) > i))[0])
        _poke("delims", j, len(arrs["delims"]) * 3 - 2)(blob, meta)

    spec = {"start_anchor": "<a>",
            "fields": {"content": {}, "reasoning_content": {"open": "<think>", "close_pattern": r"x*"}}}
    b = bind(spec, mv.token_tokenizers()["bl"][0])
    no_pf = [m for m, mode in enumerate(b.compiled.tables.modes) if mode.first_re is None][0]
    plain = dumps(b.compiled.raw_tables, tokens=b)

    def set_inert(blob, meta):
        a = _arr(meta, "tokens.inert")
        arrs = _token_arrays(meta, blob)
        i = int(np.flatnonzero((arrs["flags"] & 2) != 0)[66])
        blob[a["offset"] + no_pf * a["shape"][1] + i] = 1

    files = {"good": good, "plain": plain, "delim": _edit(good, blob_fn=not_a_delimiter),
             "inert": _edit(plain, blob_fn=set_inert)}
    want = {}
    for name, data in files.items():
        (tmp_path / f"{name}.cpt").write_bytes(data)
        try:
            r = loads(data)
            token_binding(CompiledTemplate(r["template"], r))
            want[name] = "ok"
        except ValueError as e:
            want[name] = str(e)
    assert want["good"] == want["plain"] == "ok"
    assert "not a whole delimiter" in want["delim"] and "no prefilter" in want["inert"]
    script = f"""
import fs from "node:fs";
const t = await import({json.dumps(str(ROOT / 'js' / 'chatparse.mjs'))});
const res = {{}};
for (const name of {json.dumps(sorted(files))}) {{
  let tables;
  try {{ tables = t.loadTables(fs.readFileSync({json.dumps(str(tmp_path))} + "/" + name + ".cpt")); }}
  catch (e) {{ res[name] = "load: " + e.message; continue; }}
  try {{ new t.TokenParser(tables, ""); res[name] = "ok"; }}
  catch (e) {{ res[name] = e.pyType === "ValueError" ? e.message : String(e); }}
}}
console.log(JSON.stringify(res));"""
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == want


@needs_program("node", "the JavaScript runtime")
def test_js_fast_path_is_taken_and_agrees():
    """The vectors exercise the JS fast path (inert tokens handed out without the character engine): on a
    qwen3 generation fed one id per call, most calls take it, and the events equal the vector's."""
    vec = json.loads((VECTORS / "qwen3.tok-bl.json").read_text(encoding="utf-8"))
    case = next(c for c in vec["cases"] if c["id"].endswith("/split1"))
    script = f"""
import fs from "node:fs";
const t = await import({json.dumps(str(ROOT / 'js' / 'chatparse.mjs'))});
const tables = t.loadTables(fs.readFileSync({json.dumps(str(VECTORS / vec['tables']))}));
const c = {json.dumps(case)};
const p = new t.TokenParser(tables, c.prefix);
let fast = 0;
const events = [];
for (const f of c.feeds) {{ if (p.fast >= 0) fast++; events.push(p.feedTokens(f[0])); }}
console.log(JSON.stringify({{fast, n: c.feeds.length, same: JSON.stringify(events) === JSON.stringify(c.feed_events)}}));"""
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["same"] and got["fast"] > got["n"] // 4, got
