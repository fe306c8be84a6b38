"""The native runtime (libchatparse, issue #40) side by side with the Python runtime, in one run.

    python -m bench.native_runtime [--reps 9] [--lengths 1024,16384,131072] [--window 512] [--streams 256]
                                   [--stream-steps 2048] [--text-chars 1000000] [--native-build DIR]
                                   [--out bench/results/NATIVE_RUNTIME.md] [--json out.json] [--no-profile]

Builds libchatparse (Release, `cmake -S native -B DIR`, default ``build/native-bench-lib``: a build directory of
its own, so that a rebuild of ``build/native`` by someone else cannot pull the library from under the run) and
``native/bench``'s ``chatparse-bench`` against it (``build/native-bench``), writes the qwen3 template's tables
with a token section for Mistral's tekken vocabulary (131,072 ids; `bench.pertoken.load_tokenizer`, as the
per-token bench and tests/token_support.py load it) with `chatparse.compiler.writer.save`, and measures, each
workload on the same tables file, the same ids and the same texts on both sides:

* **per token id**: one id per call, one stream, the windows of `--window` ids ending at each of `--lengths`
  (everything before a window fed untimed, 4096 ids a call; native then feeds no ids, untimed, so that those
  feeds' events are released before the timing, as Python's are): native ``cp_parser_feed_ids_events`` (a parser of
  one shared ``cp_engine``; every call's events made as ``cp_event`` structs - type, field, text - and read,
  as Python's are made as dicts) vs Python ``TokenParser.feed_tokens`` (a parser of the binding loaded from the
  same file), ns per token = the window timed as one loop / its ids, for a ``reasoning`` generation (one long
  reasoning region) and a ``content`` one (one long answer dense with code/HTML) (`bench.pertoken.generation`);
  beside it (not judged) the native JSON API, ``cp_parser_feed_ids`` (each call's events as JSON text, freed);
* **whole sequence from ids**: native ``cp_engine_parse_ids`` vs Python ``parse_tokens`` (`TokenBinding.parse`) on a
  ``turn`` generation of the longest length;
* **one-shot text**: native ``cp_engine_parse_response`` (one ``cp_engine``, built outside the timing) vs Python ``chatparse.parse_response`` with the compiled
  template (the one loaded from the same file), MB/s of UTF-8, on prose (reasoning and an answer, no tool
  call) and on tool-call-heavy text (short reasoning, then hundreds of ``<tool_call>`` JSON calls, small ones
  and file writes);
* **many streams**: B streams stepped together `--stream-steps` ids each: native B parsers of one shared
  ``cp_engine`` fed round-robin one id per call (events made as structs and read) vs Python ``TokenStreams.step`` (numpy rows; events not made, its
  fastest, and events read with ``StepEvents.tolist()``), parsers made and finalized inside the timing;
* **load**: ``cp_tables_load`` of the file's bytes vs Python's loader (``loads`` + the template + the token
  binding, `compiled_from_bytes` + `token_binding`: what a Python server does before its first parse), for the
  tekken file and for the same template's tables over bench/bench_load.py's synthetic 150k-token vocabulary
  (the issue's "150k-token table file").

Diagnostics beside (printed, never judged): the native many-stream run by phase and by the number of live
parsers, and, where ``perf`` is installed, the top symbols of each native workload.

Method (the bench rule of bench/PERF_NOTES.md): every target is a ratio to the Python runtime measured in the
same run; the two sides' repetitions alternate (which goes first alternates too), each ratio is the median of
the per-repetition ratios, and absolute times are printed beside but never judged. Flatness is the cost at the
longest length over the cost at the shortest, within each repetition (one pass of one parser), the median
over repetitions. Before anything is timed, each workload's native message is checked equal to Python's.
The native side runs in a subprocess per repetition (``chatparse-bench``, timing with
``clock_gettime(CLOCK_MONOTONIC)`` inside), so its process start and table load are outside its timings.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import random
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from . import pertoken as P

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = "qwen3"
TARGETS = {"per_token": 10.0, "flat": 1.5}  # native >= 10x Python per token; native long / short <= 1.5x


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- building --------------------------------------------------------------------------------------------------

def build(native_build: Path, bench_build: Path) -> Path:
    """Configure (once) and build libchatparse (Release) and chatparse-bench; the bench binary's path."""
    def run(cmd):
        log("  $ " + " ".join(shlex.quote(str(c)) for c in cmd))
        r = subprocess.run([str(c) for c in cmd], cwd=ROOT, capture_output=True, text=True)
        if r.returncode:
            sys.stderr.write(r.stdout[-4000:] + r.stderr[-4000:])
            raise SystemExit(f"build failed: {' '.join(map(str, cmd))}")

    if not (native_build / "CMakeCache.txt").exists():
        run(["cmake", "-S", "native", "-B", native_build, "-DCMAKE_BUILD_TYPE=Release"])
    cache = (native_build / "CMakeCache.txt").read_text()
    if "CMAKE_BUILD_TYPE:STRING=Release" not in cache:
        raise SystemExit(f"{native_build} is not a Release build (cmake -S native -B {native_build} "
                         "-DCMAKE_BUILD_TYPE=Release)")
    run(["cmake", "--build", native_build, "-j2", "--target", "chatparse"])
    if not (bench_build / "CMakeCache.txt").exists():
        run(["cmake", "-S", "native/bench", "-B", bench_build, f"-DCHATPARSE_BUILD={native_build}"])
    run(["cmake", "--build", bench_build])
    return bench_build / "chatparse-bench"


class Native:
    def __init__(self, exe: Path, tables: Path):
        self.exe, self.tables = exe, tables

    def __call__(self, *args) -> dict:
        r = subprocess.run([str(self.exe), str(self.tables), *map(str, args)], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"chatparse-bench {' '.join(map(str, args))}: {r.stderr.strip()}")
        return json.loads(r.stdout)


def write_ids(path: Path, ids) -> Path:
    np.ascontiguousarray(np.asarray(ids, dtype="<i8")).tofile(path)
    return path


def paired(num: list, den: list) -> float:
    return P.paired_ratio(num, den)


def alternate(a, b, reps: int) -> tuple[list, list]:
    """`reps` samples of a() and of b(), back to back, which goes first alternating."""
    xa, xb = [], []
    for r in range(reps):
        if r % 2:
            xb.append(b())
            xa.append(a())
        else:
            xa.append(a())
            xb.append(b())
    return xa, xb


# -- texts -----------------------------------------------------------------------------------------------------

def prose_text(chars: int) -> str:
    """Reasoning then an answer, prose only (one word in 200 non-ASCII), no tool call."""
    return P._text("turn", chars, seed=11, tool_call=False, plain=False)


def tool_text(chars: int) -> tuple[str, int]:
    """Short reasoning, then tool calls until `chars`: small calls (a few arguments) and, one in 8, a file write
    (a code/HTML file of 300-1500 characters as a JSON string); the text and the number of calls."""
    from . import scenarios as S

    r = random.Random(12)
    out = ["<think>\n" + P.prose(r, 300) + "\n</think>\n\n"]
    size, n = len(out[0]), 0
    while size < chars:
        name, args = S._tool_args(r, S.fill(r, r.randint(300, 1500), "file")) if r.random() < 0.125 \
            else S._small_call(r)
        call = "<tool_call>\n" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + "\n</tool_call>\n"
        out.append(call)
        size += len(call)
        n += 1
    return "".join(out).rstrip("\n") + P.END, n


# -- the workloads ---------------------------------------------------------------------------------------------

def py_pass(binding, ids, lengths, window):
    """One Python pass: ns per token of each window, timed as one loop (the same method as the native side)."""
    p = binding.parser(prefix="")
    res = P._window_pass(p.feed_tokens, p.feed_tokens, ids, lengths, window, 4096, whole=True)
    p.feed_tokens(ids[lengths[-1]:])
    p.finalize()
    return [r[0] for r in res]


def per_token(nat: Native, binding, tok, kind: str, lengths, window: int, reps: int, tmp: Path) -> dict:
    ids = P.generation(tok, max(lengths) + 64, seed=7, kind=kind, at_least=True)
    f = write_ids(tmp / f"pertoken_{kind}.ids", ids)
    want = binding.parse(ids, prefix="")
    got = nat("pertoken", f, window, ",".join(map(str, lengths)), 1, "check")["message"]
    assert got == want, f"per token ({kind}): the native message differs from Python's"
    py_pass(binding, ids, lengths[:1], window)  # warm-up (lazily learned token transitions, first-use caches)
    inner = 3  # native passes per invocation (cheap); their median is the repetition's figure

    json_runs = []

    def native():
        rows = nat("pertoken", f, window, ",".join(map(str, lengths)), inner)["ns_per_token"]
        jrows = nat("pertoken", f, window, ",".join(map(str, lengths)), inner, "json")["ns_per_token"]
        json_runs.append([statistics.median(r[i] for r in jrows) for i in range(len(lengths))])
        return [statistics.median(r[i] for r in rows) for i in range(len(lengths))]

    def python():
        with P.NoGC():
            return py_pass(binding, ids, lengths, window)

    nruns, pruns = alternate(native, python, reps)
    rows = []
    for i, L in enumerate(lengths):
        n_ns = [r[i] for r in nruns]
        p_ns = [r[i] for r in pruns]
        rows.append({"length": L, "native_ns": statistics.median(n_ns), "python_ns": statistics.median(p_ns),
                     "native_json_ns": statistics.median(r[i] for r in json_runs),
                     "ratio_json": paired(p_ns, [r[i] for r in json_runs]),
                     "ratio": paired(p_ns, n_ns),
                     "native_flat": paired(n_ns, [r[0] for r in nruns]),
                     "python_flat": paired(p_ns, [r[0] for r in pruns])})
    return {"kind": kind, "tokens": len(ids), "window": window, "reps": reps, "inner": inner, "rows": rows}


def whole_ids(nat: Native, binding, tok, n: int, reps: int, min_s: float, tmp: Path) -> dict:
    ids = P.generation(tok, n, seed=n, kind="turn")
    f = write_ids(tmp / "whole.ids", ids)
    want = binding.parse(ids, prefix="")
    assert nat("ids", f, 0, "check")["message"] == want, "whole ids: the native message differs from Python's"
    py = P.timed(lambda: binding.parse(ids, prefix=""), min_s)
    nr, pr = alternate(lambda: nat("ids", f, min_s)["s_per_call"], py, reps)
    return {"tokens": len(ids), "reps": reps, "native_s": statistics.median(nr), "python_s": statistics.median(pr),
            "ratio": paired(pr, nr)}


def one_shot(nat: Native, compiled, name: str, text: str, reps: int, min_s: float, tmp: Path,
             calls: int | None = None) -> dict:
    import chatparse

    f = tmp / f"text_{name}.txt"
    f.write_bytes(text.encode("utf-8"))
    want = chatparse.parse_response(text, compiled, prefix="")
    if calls is not None:
        assert len(want.get("tool_calls", [])) == calls, f"{name}: {len(want.get('tool_calls', []))} calls"
    assert nat("text", f, 0, "check")["message"] == want, f"one-shot {name}: the native message differs"
    py = P.timed(lambda: chatparse.parse_response(text, compiled, prefix=""), min_s)
    nr, pr = alternate(lambda: nat("text", f, min_s)["s_per_call"], py, reps)
    mb = len(text.encode("utf-8")) / 1e6
    return {"name": name, "bytes": int(mb * 1e6), "chars": len(text), "tool_calls": len(want.get("tool_calls", [])),
            "reps": reps, "native_mbs": mb / statistics.median(nr), "python_mbs": mb / statistics.median(pr),
            "ratio": paired(pr, nr)}


def many_streams(nat: Native, binding, tok, B: int, steps: int, reps: int, tmp: Path) -> dict:
    seqs = [P.generation(tok, steps + 64, seed=1000 + k, tool_call=False, at_least=True)[:steps] for k in range(B)]
    steps = min(map(len, seqs))
    mat = np.array([s[:steps] for s in seqs], dtype=np.int64).T.copy()  # (steps, B)
    f = write_ids(tmp / "streams.ids", mat.reshape(-1))
    want = P.step_streams(binding, mat, None)
    want = [m for m, *_ in want] if want and isinstance(want[0], tuple) else want
    assert nat("streams", f, B, 0, "check")["message"] == want, "streams: the native messages differ from Python's"
    assert P.step_streams(binding, mat, True) == want

    def clocked(fn):
        def sample():
            with P.NoGC():
                t = time.perf_counter()
                fn()
                return time.perf_counter() - t
        return sample

    phases = []

    def native():
        r = nat("streams", f, B, 0)
        phases.append((r["last_new_s"], r["last_feed_s"], r["last_finalize_s"]))
        return r["s_per_call"]

    # a diagnostic: native ns per fed id with 1, 16 and B live parsers (the first B' columns), one run each
    scaling = {}
    for b in sorted({1, 16, B}):
        if b <= B:
            fb = write_ids(tmp / f"streams_{b}.ids", mat[:, :b].reshape(-1))
            r = nat("streams", fb, b, 0.3 if b < B else 0)
            scaling[b] = r["last_feed_s"] / (b * steps) * 1e9

    fns = [native, clocked(lambda: P.step_streams(binding, mat, None)),
           clocked(lambda: P.step_streams(binding, mat, True))]
    runs = P.rotated(fns, reps)
    total = B * steps
    return {"streams": B, "steps": steps, "reps": len(runs[0]),
            "native_tps": total / statistics.median(runs[0]), "python_tps": total / statistics.median(runs[1]),
            "python_events_tps": total / statistics.median(runs[2]),
            "ratio": paired(runs[1], runs[0]), "ratio_events": paired(runs[2], runs[0]),
            "native_phases_s": [statistics.median(p[k] for p in phases) for k in range(3)],
            "native_feed_ns_by_live_parsers": scaling}


def synthetic_tables(tmp: Path) -> Path:
    """The qwen3 tables with a token section for bench_load's synthetic 150k-token byte-level vocabulary (the
    issue's "150k-token table file": `bench.bench_load.synthetic_vocab`)."""
    import chatparse
    from chatparse import templates
    from chatparse.compiler import writer

    from .bench_load import synthetic_vocab

    path = tmp / f"{TEMPLATE}_synthetic150k.cpt"
    compiled = chatparse.compile_template(templates.get(TEMPLATE))
    writer.save(compiled, path, tokens=chatparse.bind(compiled, synthetic_vocab()))
    return path


def load(nat: Native, path: Path, reps: int, min_s: float, label: str) -> dict:
    from chatparse.runtime.tables.loader import compiled_from_bytes, loads
    from chatparse.runtime.tokens.binding import token_binding

    data = path.read_bytes()
    py_full = P.timed(lambda: token_binding(compiled_from_bytes(data)), min_s)
    py_loads = P.timed(lambda: loads(data), min_s)
    fns = [lambda: nat("load", min_s)["s_per_call"], py_full, py_loads]
    runs = P.rotated(fns, reps)
    return {"label": label, "bytes": len(data), "reps": len(runs[0]), "native_s": statistics.median(runs[0]),
            "python_s": statistics.median(runs[1]), "python_loads_s": statistics.median(runs[2]),
            "ratio": paired(runs[1], runs[0]), "ratio_loads": paired(runs[2], runs[0])}


def profile(nat: Native, args: list, top: int = 8) -> list | None:
    """The top self-time symbols of one chatparse-bench run under `perf record` (None without perf): where the
    native time goes. The process loads the tables first, so the loader's symbols show in every profile."""
    import shutil
    import tempfile

    if not shutil.which("perf"):
        return None
    with tempfile.TemporaryDirectory() as d:
        data = os.path.join(d, "perf.data")
        r = subprocess.run(["perf", "record", "-q", "-F", "2999", "-o", data, "--", str(nat.exe), str(nat.tables),
                            *map(str, args)], capture_output=True, text=True)
        if r.returncode:
            return None
        r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "--sort", "symbol", "-g",
                            "none"], capture_output=True, text=True)
    out = []
    for line in r.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0].endswith("%") and parts[1] == "[.]":
            out.append((float(parts[0][:-1]), parts[2]))
        if len(out) == top:
            break
    return out or None


SYMBOL_NOTES = {"compress": "SHA-256 (table load)", "check_tokens": "token-section checks (table load)",
                "_int_free": "libc free", "_int_malloc": "libc malloc", "cfree@GLIBC_2.2.5": "libc free",
                "malloc_consolidate": "libc malloc", "__libc_calloc": "libc calloc",
                "cp_buf_putc": "JSON writing", "dump_string": "JSON writing", "dump_value": "JSON writing"}


# -- the report ------------------------------------------------------------------------------------------------

def _t(header, rows) -> list:
    return (["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            + ["| " + " | ".join(str(c) for c in r) + " |" for r in rows])


def _x(v: float) -> str:
    return f"{v:.2f}x" if v < 10 else f"{v:.1f}x"


def report(res: dict, cmd: str, started: str, elapsed: float) -> str:
    from .report import machine_info

    pt = res["per_token"]
    worst_ratio = min(r["ratio"] for p in pt for r in p["rows"])
    worst_flat = max(p["rows"][-1]["native_flat"] for p in pt)
    longest = pt[0]["rows"][-1]["length"]
    shortest = pt[0]["rows"][0]["length"]
    L = ["# The native runtime (libchatparse) side by side with the Python runtime", "",
         "Written by `python -m bench.native_runtime` (bench/native_runtime.py; its docstring gives the method). "
         "Every target is a ratio to the Python runtime measured in the same run, the two sides' repetitions "
         "alternating; absolute times are printed beside, never judged (this machine's speed varies about 2x "
         "from hour to hour, and other benchmarks may run beside this one).", "",
         "## Command and machine", "",
         f"`{cmd}`, started {started}, {elapsed / 60:.1f} min.", ""]
    mi = machine_info()
    mi = {k: mi[k] for k in ("CPU", "logical CPUs", "memory", "OS", "Python", "chatparse", "numpy")}
    mi["libchatparse"] = f"{res['native_version']} (Release, {res['native_build']}, {res['cc']}; {res['native_src']})"
    mi["load average at start"] = f"{res['load_average']} (1, 5, 15 min)"
    mi["tables"] = (f"{TEMPLATE} template with a token section for {res['vocab']} ({res['vocab_size']:,} ids; "
                    f"{res['tables_bytes']:,} bytes), for every workload; the load section also loads the same template's "
                    "tables for a synthetic 150k-token vocabulary")
    mi["vocabulary"] = res["vocab_source"]
    L += _t(["", ""], list(mi.items())) + [""]

    L += ["## Targets", ""]
    rows = [["per token id: native at least 10x faster than Python (`feed_tokens`, one id per call), at every "
             "length, both generations", f">= {TARGETS['per_token']:.0f}x", f"{_x(worst_ratio)} (lowest)",
             "PASS" if worst_ratio >= TARGETS["per_token"] else "FAIL"],
            [f"per token id: native cost does not grow with the length generated ({longest:,} / {shortest:,} "
             "ids)", f"<= {TARGETS['flat']}x", f"{worst_flat:.2f}x (highest)",
             "PASS" if worst_flat <= TARGETS["flat"] else "FAIL"]]
    L += _t(["target", "threshold", "measured", "verdict"], rows) + [""]

    L += ["## Per token id, one stream", "",
          "ns per token: a window of the ids ending at each length, one id per call, timed as one loop (native: "
          "`cp_parser_feed_ids_events` on a parser of a shared `cp_engine`, each call's events made as `cp_event` "
          "structs - type, field, text; an engine-built event also its value - and read; Python: "
          "`TokenParser.feed_tokens`, its events made as dicts); median over repetitions. *flat*: this length's "
          "cost over the shortest's, in the same pass. *native JSON API*: `cp_parser_feed_ids`, the same events "
          "written as JSON text and freed by the caller (not judged; Python / it in the last column).", ""]
    rows = []
    for p in pt:
        for r in p["rows"]:
            rows.append([p["kind"], f"{r['length']:,}", f"{r['native_ns']:.0f}", f"{r['python_ns']:.0f}",
                         _x(r["ratio"]), f"{r['native_flat']:.2f}", f"{r['python_flat']:.2f}",
                         f"{r['native_json_ns']:.0f}", _x(r["ratio_json"])])
    L += _t(["generation", "length (ids)", "native ns/token", "Python ns/token", "Python / native",
             "native flat", "Python flat", "native JSON API ns/token", "Python / JSON API"], rows)
    L += ["", f"Window {pt[0]['window']} ids; {pt[0]['reps']} repetitions per side (native: each the median of "
          f"{pt[0]['inner']} passes in one process). Generations: `reasoning` = one long reasoning region of prose, "
          "`content` = short reasoning then one long answer dense with code/HTML (`bench.pertoken.generation`).", ""]

    w = res["whole"]
    L += ["## Whole sequence from ids", "",
          f"`cp_engine_parse_ids` vs `parse_tokens` on a `turn` generation of {w['tokens']:,} ids ({w['reps']} "
          "repetitions each).", ""]
    L += _t(["", "native", "Python", "Python / native"],
            [["M ids/s", f"{w['tokens'] / w['native_s'] / 1e6:.2f}", f"{w['tokens'] / w['python_s'] / 1e6:.2f}",
              _x(w["ratio"])]]) + [""]

    L += ["## One-shot text", "",
          "`cp_engine_parse_response` (one `cp_engine`, built before the timing) vs `chatparse.parse_response` "
          "(compiled template, loaded from the same file), MB/s of UTF-8.", ""]
    L += _t(["text", "size", "tool calls", "native MB/s", "Python MB/s", "Python / native"],
            [[o["name"], f"{o['bytes'] / 1e6:.2f} MB", o["tool_calls"], f"{o['native_mbs']:.1f}",
              f"{o['python_mbs']:.1f}", _x(o["ratio"])] for o in res["one_shot"]]) + [""]

    s = res["streams"]
    L += ["## Many streams", "",
          f"{s['streams']} streams x {s['steps']:,} ids, stepped together (native: {s['streams']} parsers of "
          "one shared `cp_engine` (`cp_engine_parser_ids`) fed round-robin, one id per call, events made as "
          "structs (`cp_parser_feed_ids_events`) and read; Python: `TokenStreams.step` on numpy rows), "
          f"parsers made and finalized inside the timing; {s['reps']} repetitions.", ""]
    L += _t(["", "M ids/s", "Python / native"],
            [["native", f"{s['native_tps'] / 1e6:.2f}", ""],
             ["Python TokenStreams, events not made", f"{s['python_tps'] / 1e6:.2f}", _x(s["ratio"])],
             ["Python TokenStreams, events read", f"{s['python_events_tps'] / 1e6:.2f}",
              _x(s["ratio_events"])]]) + [""]
    ph = s["native_phases_s"]
    L += [f"Native run by phase (median of the repetitions' last runs): making the {s['streams']} parsers "
          f"{ph[0] * 1e3:.0f} ms, feeding {ph[1] * 1e3:.0f} ms ({ph[1] / (s['streams'] * s['steps']) * 1e9:.0f} ns "
          f"per id), finalizing {ph[2] * 1e3:.0f} ms. Diagnostic: native feed cost per id by the number of live "
          "parsers (the first columns of the same ids, one run each): "
          + ", ".join(f"{b} parser{'s' if b > 1 else ''} {ns:.0f} ns" for b, ns in
                      s["native_feed_ns_by_live_parsers"].items()) + ".", ""]

    L += ["## Loading the table file", "",
          "The qwen3 tables with a token section, from bytes in memory: `cp_tables_load` (validated, ready to "
          "parse) vs Python's loader, to a token binding ready to parse (`token_binding(compiled_from_bytes("
          "data))`: what a `TokenParser` needs), and Python's `loads` alone (validation and arrays), for the "
          "synthetic 150k-token vocabulary of bench/bench_load.py (the issue's \"150k-token table file\") and "
          "for tekken.", ""]
    rows = []
    for ld in res["load"]:
        rows.append([ld["label"], f"{ld['bytes'] / 1e6:.2f} MB", f"{ld['native_s'] * 1e3:.1f} ms",
                     f"{ld['python_s'] * 1e3:.1f} ms", _x(ld["ratio"]), f"{ld['python_loads_s'] * 1e3:.1f} ms",
                     _x(ld["ratio_loads"])])
    L += _t(["tables", "file", "native `cp_tables_load`", "Python to a token binding", "Python / native",
             "Python `loads` only", "`loads` / native"], rows)
    L += ["", f"{res['load'][0]['reps']} repetitions, rotated.", ""]
    prof = {k: v for k, v in (res.get("profiles") or {}).items() if v}
    if prof:
        L += ["## Where the native time goes", "",
              "Top self-time symbols of one `chatparse-bench` run per workload under `perf record` (sampled, "
              "whole process: the table load is in every profile; informative, not judged).", ""]
        for name, syms in prof.items():
            L += [f"* **{name}**: " + ", ".join(
                f"`{sym}` {pct:.0f}%" + (f" ({SYMBOL_NOTES[sym]})" if sym in SYMBOL_NOTES else "")
                for pct, sym in syms)]
        L += [""]
    return "\n".join(L) + "\n"


# -- main ------------------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.native_runtime", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--lengths", default="1024,16384,131072")
    ap.add_argument("--window", type=int, default=512)
    ap.add_argument("--streams", type=int, default=256)
    ap.add_argument("--stream-steps", type=int, default=2048)
    ap.add_argument("--text-chars", type=int, default=1_000_000)
    ap.add_argument("--min-s", type=float, default=0.3, help="least seconds per timed sample (loops)")
    ap.add_argument("--native-build", default="build/native-bench-lib")
    ap.add_argument("--bench-build", default="build/native-bench")
    ap.add_argument("--out", default="bench/results/NATIVE_RUNTIME.md")
    ap.add_argument("--json")
    ap.add_argument("--no-profile", action="store_true", help="skip the perf profiles of the native side")
    args = ap.parse_args(argv)
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t0 = time.perf_counter()
    cmd = "python -m bench.native_runtime" + "".join(" " + shlex.quote(a) for a in (argv or sys.argv[1:]))
    lengths = sorted(int(x) for x in args.lengths.split(","))
    P.logging_off()

    log("building libchatparse and chatparse-bench")
    nb, bb = ROOT / args.native_build, ROOT / args.bench_build
    exe = build(nb, bb)
    tmp = bb / "data"
    tmp.mkdir(exist_ok=True)

    import chatparse
    from chatparse import templates
    from chatparse.compiler import writer
    from chatparse.runtime.tables.loader import compiled_from_bytes
    from chatparse.runtime.tokens.binding import token_binding

    vocab = P.load_tokenizer()
    if not vocab.tekken:
        log("# tekken is not available: the figures are for a trained vocabulary, not the issue's table file")
    log(f"vocabulary: {vocab.name} (loaded in {vocab.load_s:.1f} s); writing the tables")
    compiled = chatparse.compile_template(templates.get(TEMPLATE))
    tables = tmp / f"{TEMPLATE}_{vocab.name.split()[0]}.cpt"
    writer.save(compiled, tables, tokens=chatparse.bind(compiled, vocab.tok))
    # the Python side runs the tables of the same file
    loaded = compiled_from_bytes(tables.read_bytes())
    binding = token_binding(loaded)
    nat = Native(exe, tables)
    cc = "?"
    try:
        cc = next(line.split("=", 1)[1] for line in (nb / "CMakeCache.txt").read_text().splitlines()
                  if line.startswith("CMAKE_C_COMPILER:"))
        cc = subprocess.run([cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    except Exception:  # noqa: BLE001 - informative only
        pass
    def git(*a):
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = [x for x in git("status", "--porcelain", "--", "native/src", "native/include").splitlines() if x]
    src = f"native/src at {git('log', '-1', '--format=%h', '--', 'native/src', 'native/include')}" + (
        f" plus uncommitted edits to {len(dirty)} files (built from the working tree)" if dirty else "")
    res = {"native_src": src, "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
           "native_version": nat("load", 0)["version"], "native_build": args.native_build, "cc": cc,
           "vocab": vocab.name, "vocab_source": vocab.source, "vocab_size": binding.vocab.size,
           "tables_bytes": tables.stat().st_size}

    res["per_token"] = []
    for kind in ("reasoning", "content"):
        log(f"per token, {kind}: windows of {args.window} ending at {lengths}")
        res["per_token"].append(per_token(nat, binding, vocab.tok, kind, lengths, args.window, args.reps, tmp))
        for r in res["per_token"][-1]["rows"]:
            log(f"  {r['length']:>7}: native {r['native_ns']:.0f} ns, Python {r['python_ns']:.0f} ns, "
                f"{r['ratio']:.2f}x, native flat {r['native_flat']:.2f}")
    log("whole sequence from ids")
    res["whole"] = whole_ids(nat, binding, vocab.tok, max(lengths), max(3, args.reps // 2), args.min_s, tmp)
    log(f"  {res['whole']['ratio']:.2f}x")
    res["one_shot"] = []
    text, calls = tool_text(args.text_chars)
    for name, t, c in (("prose", prose_text(args.text_chars), None), ("tool-call-heavy", text, calls)):
        log(f"one-shot text: {name}")
        res["one_shot"].append(one_shot(nat, loaded, name, t, max(3, args.reps // 2), args.min_s, tmp, c))
        log(f"  native {res['one_shot'][-1]['native_mbs']:.1f} MB/s, Python "
            f"{res['one_shot'][-1]['python_mbs']:.1f} MB/s, {res['one_shot'][-1]['ratio']:.2f}x")
    log(f"{args.streams} streams x {args.stream_steps}")
    res["streams"] = many_streams(nat, binding, vocab.tok, args.streams, args.stream_steps, max(3, args.reps // 2),
                                  tmp)
    log(f"  {res['streams']['ratio']:.2f}x (events read: {res['streams']['ratio_events']:.2f}x)")
    res["load"] = []
    for label, path in (("synthetic 150k-token vocabulary (`bench.bench_load.synthetic_vocab`)",
                         synthetic_tables(tmp)),
                        (f"{vocab.name} ({res['vocab_size']:,} ids)", tables)):
        log(f"loading the table file: {label}")
        res["load"].append(load(Native(exe, path), path, max(3, args.reps // 2), args.min_s, label))
        log(f"  {res['load'][-1]['ratio']:.2f}x")

    if not args.no_profile:
        log("profiles (perf)")
        d = tmp
        longest = max(lengths)
        res["profiles"] = {
            f"per token id, reasoning, the {longest // 2:,} ids before {longest:,} one per call, x10 (pertoken)":
                profile(nat, ["pertoken", d / "pertoken_reasoning.ids", longest // 2, longest, 10]),
            "one-shot prose (text)": profile(nat, ["text", d / "text_prose.txt", 2]),
            "one-shot tool-call-heavy (text)": profile(nat, ["text", d / "text_tool-call-heavy.txt", 2]),
            f"{args.streams} streams (streams)": profile(nat, ["streams", d / "streams.ids", args.streams, 0]),
            "table load (load)": profile(nat, ["load", 2]),
        }
    md = report(res, cmd, started, time.perf_counter() - t0)
    out = ROOT / args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(md)
    log(f"wrote {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2, default=str))
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
