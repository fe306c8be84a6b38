"""RESULTS.md: the machine and command, the targets with PASS/FAIL computed from the measured ratios, and
one table per measurement."""

from __future__ import annotations

import datetime as _dt
import os
import platform
from importlib import metadata
from pathlib import Path

# Section headings, in order (tests check every one is present).
SECTIONS = (
    "## Command and machine",
    "## Targets",
    "## Streaming cost per feed",
    "## One-shot parse throughput",
    "## Compile time",
    "## Memory retained per stream",
    "## Per-token cost",
    "## Runs of possible delimiter starts",
    "## Method",
)


# -- machine -----------------------------------------------------------------------------------------------

def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _mem_total() -> str:
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown"


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _vllm_version_short() -> str:
    from . import vllm_ref

    ref = vllm_ref.load()
    return ref.version if ref is not None else "?"


def _vllm_version() -> str:
    from . import vllm_ref

    ref = vllm_ref.load()
    return (f"{ref.version}: `vllm/parser/chat_parsing` loaded by path from {ref.path}" if ref is not None
            else "not found")


def machine_info() -> dict:
    return {
        "CPU": _cpu_model(),
        "logical CPUs": str(os.cpu_count()),
        "memory": _mem_total(),
        "OS": platform.platform(),
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "chatparse": _version("chatparse"),
        "transformers (reference)": _version("transformers"),
        "vLLM (serving-dialect reference)": _vllm_version(),
        "regex": _version("regex"),
        "numpy": _version("numpy"),
        "interegular": _version("interegular"),
        "matplotlib": _version("matplotlib"),
    }


# -- targets -----------------------------------------------------------------------------------------------

def _fmt_ratio(x: float) -> str:
    return f"{x:.1f}x" if x < 100 else f"{x:.0f}x"


def targets(results: dict, cfg) -> list[dict]:
    """Each target of issues 2 and 5 with its measured value and PASS/FAIL (None: not measured)."""
    out = []
    streaming = results.get("streaming", [])
    st = [r for r in streaming if r["chunk"] == 4 and _dialect(r) == "transformers"]
    if st:
        lo, hi = min(r["length"] for r in st), max(r["length"] for r in st)
        at_hi = [r for r in st if r["length"] == hi]
        worst = min(at_hi, key=lambda r: r["ratio"])
        out.append({
            "target": f"Streaming, 4 characters per feed, at {hi:,} characters: >= 10x the reference",
            "measured": f"min {_fmt_ratio(worst['ratio'])} ({_scen(worst)}); "
                        f"max {_fmt_ratio(max(r['ratio'] for r in at_hi))}",
            "ok": worst["ratio"] >= 10,
        })
        flat = []
        for r in at_hi:
            base = next(x for x in st if x["length"] == lo and _key(x) == _key(r))
            flat.append((_stream_flat(r, base), r))
        growth, r = max(flat, key=lambda x: x[0])
        out.append({
            "target": f"Streaming is flat: chatparse per-feed cost at {hi:,} within 1.5x of the cost at {lo:,} "
                      "(4 characters per feed; within each repetition, the median over them)",
            "measured": f"worst {growth:.2f}x ({_scen(r)})",
            "ok": growth <= 1.5,
        })
    out += _serving_stream_targets([r for r in streaming if _dialect(r) == "vllm"])
    os_ = results.get("oneshot", [])
    small = [r for r in os_ if r["doc"] == "mixed" and r["size"] == cfg.oneshot_small and r["batch"] == 1
             and r["template"] == "compiled"]
    if small:
        worst = min(small, key=lambda r: r["ratio"])
        out.append({
            "target": f"One-shot {cfg.oneshot_small // 1000} KB typical output, compiled template: >= 5x",
            "measured": f"min {_fmt_ratio(worst['ratio'])} ({worst['format']})",
            "ok": worst["ratio"] >= 5,
        })
    dense = [r for r in os_ if r["doc"] == "content" and r["batch"] == 1]
    if dense:
        worst = min(dense, key=lambda r: r["ratio"])
        out.append({
            "target": f"One-shot {cfg.oneshot_large // 1000} KB dense with '<' and newlines: no slower than the "
                      "reference (>= 1x)",
            "measured": f"min {_fmt_ratio(worst['ratio'])} ({worst['format']})",
            "ok": worst["ratio"] >= 1,
        })
    mem = results.get("memory", [])
    if mem:
        worst = max(mem, key=lambda r: r["cp_excess"])
        out.append({
            "target": f"Retained memory per stream <= region bodies + a constant ({cfg.memory_constant // 1024} KiB), "
                      "at every length",
            "measured": f"max excess {_kib(worst['cp_excess'])} ({worst['format']} at {worst['length']:,} chars; "
                        f"reference there: {_kib(worst['ref_excess'])})",
            "ok": worst["cp_excess"] <= cfg.memory_constant,
        })
    out += _token_targets(results.get("tokens"))
    return out


SERVING = 'serving dialect (`dialect="vllm"`)'


def _stream_flat(r: dict, base: dict) -> float:
    """chatparse's per-feed cost at `r`'s length over `base`'s (the shortest): the median of the per-repetition
    ratios where recorded (``cp_flat``), else the ratio of the medians."""
    return r["cp_flat"] if "cp_flat" in r else r["cp_us"] / base["cp_us"]


def _dialect(r: dict) -> str:
    return r.get("dialect", "transformers")


def _serving_stream_targets(sv: list) -> list[dict]:
    """The streaming targets applied to the serving-dialect rows: against vLLM's chat_parsing (when it was
    found) and flat."""
    if not sv:
        return []
    out = []
    lo, hi = min(r["length"] for r in sv), max(r["length"] for r in sv)
    at_hi = [r for r in sv if r["length"] == hi]
    chunk = sv[0]["chunk"]
    if all(r["ratio"] == r["ratio"] for r in at_hi):  # NaN: the vLLM reference was not found
        worst = min(at_hi, key=lambda r: r["ratio"])
        out.append({
            "target": f"Streaming, {SERVING}, {chunk} characters per feed, at {hi:,} characters: >= 10x vLLM "
                      f"{_vllm_version_short()}'s `chat_parsing` (the same target as above, against vLLM's copy of "
                      "the interpreter)",
            "measured": f"min {_fmt_ratio(worst['ratio'])} ({_scen(worst)}); "
                        f"max {_fmt_ratio(max(r['ratio'] for r in at_hi))}",
            "ok": worst["ratio"] >= 10,
        })
    flat = []
    for r in at_hi:
        base = next(x for x in sv if x["length"] == lo and _key(x) == _key(r))
        flat.append((_stream_flat(r, base), r))
    growth, r = max(flat, key=lambda x: x[0])
    out.append({
        "target": f"Streaming is flat, {SERVING}: chatparse per-feed cost at {hi:,} within 1.5x of the cost at "
                  f"{lo:,} ({chunk} characters per feed)",
        "measured": f"worst {growth:.2f}x ({_scen(r)})",
        "ok": growth <= 1.5,
    })
    return out


def _targets_of() -> dict:
    from .pertoken import TARGETS

    return TARGETS


PLAIN = "the plain loop (per id one list index and one append; same ids, same run)"


def _one_stream_target(one: list, col: str, label: str, vtag: str) -> dict:
    """One token per call, one stream: chatparse's median per call over the plain loop's (timed by the same
    harness, in the same rotation), at every length, and flat."""
    limit = _targets_of()["per_call"]
    ratio = f"{col}_plain_ratio"
    kinds = list(dict.fromkeys(r["kind"] for r in one))
    lengths = sorted({r["length"] for r in one})
    worst = max(one, key=lambda r: r[ratio])
    flats = [(_flat(one, k, f"{col}_us"), k) for k in kinds]
    growth, fk = max(flats)
    per_kind = "; ".join(f"{_TOKEN_KINDS.get(k, k)} max {max(r[ratio] for r in one if r['kind'] == k):.1f}x"
                         for k in kinds)
    at = (f"at {' and '.join(f'{n:,}' for n in lengths)} tokens" if len(lengths) <= 2 else
          f"at every generation length ({lengths[0]:,} to {lengths[-1]:,} tokens)")
    return {
        "target": f"One token per call, one stream{label} ({vtag}): median per call <= {limit:g}x the time per "
                  f"call of {PLAIN}, one call per id as here, {at}, and flat (chatparse median at the longest "
                  "length within 1.5x of the shortest)",
        "measured": f"worst {worst[ratio]:.1f}x ({_TOKEN_KINDS.get(worst['kind'], worst['kind'])} at "
                    f"{worst['length']:,} tokens: {worst[col + '_us']:.3f} µs against {worst['plain_us']:.3f} µs; "
                    f"{per_kind}); flat: worst {growth:.2f}x ({_TOKEN_KINDS.get(fk, fk)})",
        "ok": worst[ratio] <= limit and growth <= 1.5,
    }


def _whole_target(wh: list, key: str, ratio: str, label: str, vtag: str, call: str) -> dict:
    limit = _targets_of()["whole"]
    top = max(wh, key=lambda r: r["tokens"])
    low = min(wh, key=lambda r: r["tokens"])
    return {
        "target": f"Whole sequence from ids{label} ({call}, a list of ids, {vtag}): at most {limit:g}x the time of "
                  f"{PLAIN} + one join, at {top['tokens']:,} tokens",
        "measured": f"{top[ratio]:.2f}x ({top[key] / 1e6:.1f}M tokens/s against {top['plain_tps'] / 1e6:.1f}M; "
                    f"{low[ratio]:.2f}x at {low['tokens']:,} tokens)",
        "ok": top[ratio] <= limit,
    }


def _streams_target(st: list, key: str, ratio: str, label: str, vtag: str, extra) -> dict:
    limit = _targets_of()["streams"]
    worst = max(st, key=lambda r: r[ratio])
    others = "; ".join(f"{_stream_text(r)} {r[ratio]:.2f}x" for r in st if r is not worst)
    return {
        "target": f"{worst['streams']} streams stepped together{label} (`TokenStreams.step`, events not read, "
                  f"{vtag}): at most {limit:g}x the time of {PLAIN}, one list per stream",
        "measured": f"{worst[ratio]:.2f}x ({_stream_text(worst)}: {worst[key] / 1e6:.1f}M tokens/s against "
                    f"{worst['plain_tps'] / 1e6:.1f}M" + (f"; {others}" if others else "") + f"); {extra(worst)}",
        "ok": worst[ratio] <= limit,
    }


def _serving_token_targets(tk: dict, vtag: str) -> list[dict]:
    """The per-token speed targets applied to chatparse in the serving dialect (the plain loop's figures are
    from the same rotations)."""
    if "vllm" not in tk.get("dialects", []):
        return []
    out = []
    one = [r for r in tk["one_stream"] if r.get("vllm_us", float("nan")) == r.get("vllm_us", float("nan"))]
    if one:
        out.append(_one_stream_target(one, "vllm", f", {SERVING}", vtag))
    wh = tk["whole"]
    if wh and "vllm_ids_tps" in wh[0]:
        out.append(_whole_target(wh, "vllm_ids_tps", "vllm_plain_ratio", f", {SERVING}", vtag,
                                 '`parse_tokens(..., dialect="vllm")`'))
    st = [r for r in tk["streams"] if "vllm_step_tps" in r]
    if st:
        out.append(_streams_target(st, "vllm_step_tps", "vllm_plain_ratio", f", {SERVING}", vtag,
                                   lambda r: f"default dialect in the same runs: {r['step_plain_ratio']:.2f}x"))
    return out


def _token_targets(tk: dict | None) -> list[dict]:
    """The speed targets of issue 3 (per-token parsing), from the per-token measurements: each a ratio to a
    baseline measured in the same run (`bench.pertoken.TARGETS`; bench/PERF_NOTES.md#bench-targets)."""
    if not tk:
        return []
    out = []
    v = tk["vocabulary"]
    vtag = f"{v['name']}, {v['size']:,} ids"
    if not v["tekken"]:
        vtag += "; not the ~150k-token vocabulary the target names"
    one = tk["one_stream"]
    if one:
        out.append(_one_stream_target(one, "cp", "", vtag))
    wh = tk["whole"]
    if wh:
        out.append(_whole_target(wh, "ids_tps", "ids_plain_ratio", "", vtag, "`parse_tokens`"))
    st = tk["streams"]
    if st:
        out.append(_streams_target(st, "step_tps", "step_plain_ratio", "", vtag,
                                   lambda r: f"reading every stream's events: {r['step_events_tps'] / 1e6:.1f}M"))
    b = tk["build"]
    if b:
        slow = b.get("slowest") or max(b["tables_s"], key=b["tables_s"].get)
        total = b["vocab_s"] + b["tables_s"][slow]
        limit = _targets_of()["build"]
        out.append({
            "target": f"Building the token tables for the vocabulary ({vtag}): at most {limit:g}x the time of "
                      "decoding every id once with the tokenizer (`[tokenizer.decode([i]) for i in range(V)]`, "
                      "same run)",
            "measured": f"{b['ratio']:.2f}x ({total:.2f} s: vocabulary {b['vocab_s']:.2f} s + tables of `{slow}` "
                        f"{b['tables_s'][slow]:.2f} s, the slowest of {len(b['tables_s'])} templates; decoding "
                        f"{b['decode_s']:.2f} s)",
            "ok": b["ratio"] <= limit,
        })
    return out + _serving_token_targets(tk, vtag)


_TOKEN_KINDS = {"reasoning": "prose", "content": "code/HTML"}


def _flat(one: list, kind: str, col: str = "cp_us") -> float:
    """The cost at the longest length over the shortest: the median over repetitions of that ratio within each
    (one pass times both lengths, seconds apart), where recorded; else the ratio of the medians."""
    rows = sorted((r for r in one if r["kind"] == kind and r[col] == r[col]), key=lambda r: r["length"])
    paired = col[:-3] + "_flat" if col.endswith("_us") else None
    if paired and paired in rows[-1]:
        return rows[-1][paired]
    return rows[-1][col] / rows[0][col]


def _us_cell(median: float, mean: float) -> str:
    if median != median:  # nan: not measured
        return "-"
    return f"{median:.3f} ({mean:.2f})" if median < 10 else f"{median:.1f} ({mean:.1f})"


def _stream_text(r: dict) -> str:
    return "plain prose" if r["plain"] else "prose"


def _mtps(x: float) -> str:
    if x != x:  # nan: not measured
        return "-"
    x /= 1e6
    return f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 0.1 else f"{x:.3f}"


def _key(r: dict) -> tuple:
    return r["format"], r["kind"], r.get("text", "unicode"), r["chunk"]


def _scen(r: dict) -> str:
    return f"{r['format']}/{r['kind']}" + (", ASCII text" if r.get("text") == "ascii" else "")


def _region(r: dict) -> str:
    return r["kind"] + (" (ASCII)" if r.get("text") == "ascii" else "")


def _kib(n: float) -> str:
    return f"{n / 1024:,.0f} KiB" if abs(n) >= 10 * 1024 else f"{n / 1024:,.1f} KiB"


def _table(header: list, rows: list) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def _us(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}" if x < 100 else f"{x:.0f}"


def _secs(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.2f} ms"
    return f"{x:.2f} s"


# -- the document ------------------------------------------------------------------------------------------

def write(out: Path, results: dict, cfg, command: str, plots: list[str], elapsed_s: float) -> Path:
    L: list[str] = []
    mode = "quick mode (small sizes, few repetitions: a smoke run, not a verdict)" if cfg.quick else "full run"
    L += ["# chatparse benchmark results", "",
          f"chatparse against the transformers reference (`transformers.utils.chat_parsing`), measured in one "
          f"process, interleaved, medians of repetitions; ratios are reference time / chatparse time "
          f"(> 1: chatparse is faster). {mode.capitalize()}; took {elapsed_s:.0f} s.", "",
          f"Serving-dialect rows (chatparse with `dialect=\"vllm\"`, vLLM 0.33.0's events) are measured beside the "
          f"default ones; their reference is vLLM's own copy of the interpreter: {_serving_status()}.", ""]

    L += [SECTIONS[0], "", f"Command: `{command}` (from the project root)", "",
          f"Date: {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}", ""]
    L += _table(["", ""], [[k, v] for k, v in machine_info().items()]) + [""]

    L += [SECTIONS[1], ""]
    if cfg.quick:
        L += ["> Quick mode: the sizes are far below the targets' sizes, so these verdicts are not meaningful.", ""]
    rows = [[t["target"], t["measured"], "PASS" if t["ok"] else "FAIL"] for t in targets(results, cfg)]
    L += ["Every speed target is a ratio to a baseline measured in the same run (the reference, vLLM's copy of "
          "it, the plain loop over the same token ids, decoding every id once, or chatparse's own cost at a "
          "shorter length), so a slower or busier machine slows both sides; absolute times are printed beside, "
          "never judged. The memory target is in bytes, which no machine's speed changes. The per-token "
          "thresholds and why: bench/PERF_NOTES.md#bench-targets.", ""]
    L += _table(["target (issues 2, 3 and 5)", "measured", "verdict"], rows) + [""]

    st = [r for r in results.get("streaming", []) if _dialect(r) == "transformers"]
    L += [SECTIONS[2], ""]
    if st:
        lengths = sorted({r["length"] for r in st})
        L += [f"Median time per `feed()` call over a window of {st[0]['window_feeds'] * st[0]['chunk']:,} characters "
              "(window_chars / chunk feeds) ending at each generation length; everything before the window is fed "
              f"untimed in {cfg.prefeed_chunk}-character pieces. Each cell: chatparse / reference µs (speed-up). "
              "`flat` = chatparse cost at the longest length / at the shortest, within each repetition (one pass "
              "times every length), the median over the repetitions. Region kinds: the generation is one "
              "long reasoning region, one long answer dense with code/HTML, or one tool call with a long file "
              "argument. The texts hold a few non-ASCII characters (stored by CPython at 2 bytes per character); "
              "`(ASCII)` rows stream the same text with ASCII stand-ins (1 byte per character: the reference's "
              "per-feed buffer copies are half as large there).", ""]
        header = ["format", "region", "chars/feed"] + [f"{L_:,}" for L_ in lengths] + ["flat"]
        rows = []
        keys = list(dict.fromkeys(_key(r) for r in st))
        cells_of = {k: {r["length"]: r for r in st if _key(r) == k} for k in keys}
        for k in keys:
            cells = cells_of[k]
            first = cells[lengths[0]]
            row = [k[0], _region(first), k[3]]
            for L_ in lengths:
                r = cells[L_]
                row.append(f"{_us(r['cp_us'])} / {_us(r['ref_us'])} ({_fmt_ratio(r['ratio'])})")
            row.append(f"{_stream_flat(cells[lengths[-1]], first):.2f}x")
            rows.append(row)
        L += _table(header, rows) + [""]
        L += ["Mean time per feed (µs, chatparse / reference, same windows, 4 characters per feed) - the mean "
              "includes the rare expensive feed (a region closing and its value being parsed, buffer compaction, and "
              "on a shared machine the process being preempted, ~4 ms at a time) that the median hides:", ""]
        rows = [[k[0], _region(cells_of[k][lengths[0]])] +
                [f"{_us(cells_of[k][L_]['cp_mean_us'])} / {_us(cells_of[k][L_]['ref_mean_us'])}" for L_ in lengths]
                for k in keys if k[3] == 4]
        L += _table(["format", "region"] + [f"{L_:,}" for L_ in lengths], rows) + [""]
        L += _serving_stream_section([r for r in results["streaming"] if _dialect(r) == "vllm"], st)
        L += [f"![streaming {p}]({p})" for p in plots if p.startswith("streaming")] + [""]
    else:
        L += ["(not run)", ""]

    os_ = results.get("oneshot", [])
    L += [SECTIONS[3], ""]
    if os_:
        L += ["Whole outputs parsed with pre-compiled templates on both sides (chatparse `CompiledTemplate.parse` / "
              "`parse_batch`; reference `parse_response` with the `ResponseTemplate` from `load_response_template`, "
              "in a loop for batches), except the `dict` row, which passes the template dict on every call. "
              "`typical`: reasoning, an answer with code, tool calls with a long file argument; `dense`: one long "
              "answer dense with '<' and newlines (code/HTML). Time is per call (a batch is one call), the median of "
              "the repetitions; the speed-up is the median of the per-repetition ratios (both sides of a repetition "
              "run back to back, alternating which goes first).", ""]
        rows = []
        for r in os_:
            doc = "dense '<'" if r["doc"] == "content" else "typical"
            rows.append([r["format"], f"{doc}, {r['chars'] // r['batch']:,} chars", r["batch"], r["template"],
                         _secs(r["cp_s"]), _secs(r["ref_s"]), _fmt_ratio(r["ratio"]),
                         f"{r['cp_mbps']:.1f} / {r['ref_mbps']:.2f}", r["reps"]])
        L += _table(["format", "output", "batch", "template", "chatparse", "reference", "speed-up",
                     "MB/s (chatparse / reference)", "reps"], rows) + [""]
        L += [f"![one-shot]({p})" for p in plots if p.startswith("oneshot")] + [""]
    else:
        L += ["(not run)", ""]

    cm = results.get("compile", [])
    L += [SECTIONS[4], ""]
    if cm:
        L += ["chatparse: `load_template` + `build_tables` (the `compile_template` cache bypassed), then loading the "
              "tables into the runtime (`runtime.tables.Tables`); reference: `load_response_template`. The `re` and "
              "`regex` compile caches are purged before every sample. Table size: bytes of the numpy arrays; "
              "states: DFA states over all modes; cmap: the runtime character-class map.", ""]
        rows = [[r["template"], f"{r['cp_compile_ms']:.2f}", f"{r['cp_load_ms']:.2f}", f"{r['table_bytes']:,}",
                 r["states"], f"{r['cmap_bytes']:,}", f"{r['ref_load_ms']:.2f}", f"{r['ratio']:.2f}x"]
                for r in cm]
        L += _table(["template", "chatparse compile ms", "table load ms", "table bytes", "states", "cmap bytes",
                     "reference load ms", "reference / chatparse compile"], rows) + [""]
        tot_cp = sum(r["cp_compile_ms"] + r["cp_load_ms"] for r in cm)
        tot_ref = sum(r["ref_load_ms"] for r in cm)
        L += [f"All {len(cm)} templates: chatparse {tot_cp:.0f} ms (compile + load), reference {tot_ref:.0f} ms. "
              "Compiling happens once per template (`compile_template` caches by canonical JSON).", ""]
        L += [f"![compile]({p})" for p in plots if p.startswith("compile")] + [""]
    else:
        L += ["(not run)", ""]

    mem = results.get("memory", [])
    L += [SECTIONS[5], ""]
    if mem:
        L += [f"One stream of a typical output fed {cfg.memory_chunk} characters at a time; after feeding N characters, "
              "the bytes allocated since just before the parser was created and still alive (tracemalloc, after "
              "gc.collect()). `bodies`: the region bodies seen so far (every region's text as one str, "
              "sys.getsizeof). `excess` = retained - bodies: what the parser keeps beyond the bodies (the "
              "reference keeps its whole buffer).", ""]
        rows = [[r["format"], f"{r['length']:,}", _kib(r["bodies"]), _kib(r["cp_bytes"]), _kib(r["ref_bytes"]),
                 _kib(r["cp_excess"]), _kib(r["ref_excess"])] for r in mem]
        L += _table(["format", "chars fed", "bodies", "chatparse retained", "reference retained",
                     "chatparse excess", "reference excess"], rows) + [""]
        L += [f"![memory]({p})" for p in plots if p.startswith("memory")] + [""]
    else:
        L += ["(not run)", ""]

    L += [SECTIONS[6], ""]
    L += _tokens_section(results.get("tokens"), plots)

    L += [SECTIONS[7], ""]
    L += _runs_section(results.get("runs"))

    L += [SECTIONS[8], "",
          "- Outputs are generated by `bench/scenarios.py` from a seeded RNG following each format's syntax "
          "(tests/data/FORMATS.md and the corpus cases of tests/data/corpus.json): reasoning prose, "
          "code/HTML dense with '<' and newlines (HTML `<t...` tags partially match `<think>`, `<tool_call>`, "
          "`<turn|>`), long tool-call arguments. Before timing, each scenario is parsed by both implementations "
          "and the messages are asserted equal (and of the intended shape); one-shot rows also compare the "
          "results of the timed calls.",
          "- For those checks the reference is fed in 4096-character pieces: its one-shot parse of a long region "
          "runs `regex` partial searches from the region start to the buffer end, which is quadratic (tens of "
          "seconds at 500k characters for `\\s*`-led delimiters); the timed one-shot rows still time its one-shot "
          "`parse_response`.",
          "- Each pair of measurements is interleaved (order alternating per repetition), the cyclic GC is "
          "collected before and disabled during timed regions, medians are reported; a pair whose single "
          f"repetition takes longer than {cfg.pair_budget_s:.0f} s is not repeated (`reps` column).",
          "- Per-feed times are taken around each `feed()` call with `time.perf_counter_ns` (includes ~50-100 ns "
          "of timer overhead on both sides).",
          "- Per-token figures (`bench/pertoken.py`, shared with `python bench/bench_tokens.py`) use one tokenizer: "
          "Mistral's tekken vocabulary when mistral-common is importable, else a byte-level BPE trained at bench "
          "time (the section says which); per-call times there have the timer's own cost subtracted.",
          "- Serving-dialect rows (`dialect=\"vllm\"`): their reference is vLLM 0.33.0's `vllm/parser/chat_parsing` "
          "package, which `bench/vllm_ref.py` loads by file path (from `$CHATPARSE_VLLM_SITE`, an importable `vllm`, "
          "or the venv `.ci/run` makes, `$CHATPARSE_VLLM_VENV` or ~/.cache/chatparse/venv-vllm, or /work/venv-vllm: "
          "vllm pins transformers < 5.21, so it lives in a venv of its own) without importing `vllm` itself; where "
          "it is not found the rows give chatparse alone.", ""]
    path = out / "RESULTS.md"
    path.write_text("\n".join(L), encoding="utf-8")
    return path


def _serving_status() -> str:
    from . import vllm_ref

    ref = vllm_ref.load()
    if ref is not None:
        return (f"vLLM {ref.version}'s `vllm/parser/chat_parsing` package, loaded by file path from `{ref.path}` "
                f"(found by {ref.found_by}; run with this environment's `regex`), so the serving-dialect rows carry "
                "ratios against it")
    return (f"**the vLLM reference was not found** ({vllm_ref.why()}), so "
            "the serving-dialect rows give chatparse alone, without a ratio; set "
            f"`{vllm_ref.ENV}` to a site-packages directory holding vllm==0.33.0")


def _serving_stream_section(sv: list, default: list) -> list[str]:
    if not sv:
        return []
    lengths = sorted({r["length"] for r in sv})
    chunk = sv[0]["chunk"]
    have_ref = all(r["ref_us"] == r["ref_us"] for r in sv)
    L = [f"### Serving dialect (`dialect=\"vllm\"`)", "",
         f"The same texts (non-ASCII), windows and repetitions, {chunk} characters per feed, with chatparse's parser "
         "made with `dialect=\"vllm\"` (events with spans and captures, `region_malformed`, `input_text` kept); "
         + ("each cell: chatparse / vLLM 0.33.0's `chat_parsing` `ResponseParser` µs (speed-up), interleaved as "
            "above. Before timing, both are fed each whole output and their messages, events (chunks merged) and "
            "`input_text` are asserted equal. "
            if have_ref else
            "each cell: chatparse µs alone (the vLLM reference was not found: no ratio). Before timing, its message "
            "is asserted equal to the default dialect's. ")
         + f"`vs default` = this row's chatparse cost at {lengths[-1]:,} / chatparse's in the default dialect on "
         "the same text and chunk size, timed as a third side in the same rotation (the table above times it in "
         "other repetitions).", ""]
    header = ["format", "region"] + [f"{n:,}" for n in lengths] + ["flat", "vs default"]
    rows = []
    base = {(_key(r), r["length"]): r for r in default}
    for k in dict.fromkeys(_key(r) for r in sv):
        cells = {r["length"]: r for r in sv if _key(r) == k}
        first, last = cells[lengths[0]], cells[lengths[-1]]
        row = [k[0], _region(first)]
        for n in lengths:
            r = cells[n]
            row.append(f"{_us(r['cp_us'])} / {_us(r['ref_us'])} ({_fmt_ratio(r['ratio'])})" if have_ref
                       else _us(r["cp_us"]))
        row.append(f"{_stream_flat(last, first):.2f}x")
        d = last.get("default_us") or (base.get((k, lengths[-1])) or {}).get("cp_us")
        row.append(f"{last['cp_us'] / d:.2f}x" if d else "-")
        rows.append(row)
    L += _table(header, rows) + [""]
    took = sum(r.get("elapsed_s", 0) for r in sv)
    if took:
        L += [f"These rows (checks, warm-up and timing) took {took:.1f} s of the run.", ""]
    return L


def _runs_section(runs: list | None) -> list[str]:
    if not runs:
        return ["(not run)", ""]
    L = [f"`{runs[0]['template']}` output whose reasoning holds a run of spaces (its reasoning close "
         "`\\s*</think>\\s*|\\s*(?=<tool_call>)` could start at every one). Whole output, streamed in "
         "4-character feeds and parsed one-shot; one reference run per cell, chatparse the median of a few. The "
         "reference's cost grows with a power of the run, so it is run only at the shorter runs (`-`: not run).",
         ""]
    rows = []
    for r in runs:
        def cell(key):
            cp, ref = r[f"cp_{key}_s"], r[f"ref_{key}_s"]
            if ref is None:
                return f"{_secs(cp)} / -"
            return f"{_secs(cp)} / {_secs(ref)} ({_fmt_ratio(ref / cp)})"
        rows.append([f"{r['spaces']:,}", f"{r['chars']:,}", cell("stream"), cell("oneshot")])
    L += _table(["spaces", "chars", "streamed, chatparse / reference", "one-shot, chatparse / reference"], rows)
    return L + [""]


def _tokens_section(tk: dict | None, plots: list[str]) -> list[str]:
    if not tk:
        return ["(not run)", ""]
    L: list[str] = []
    v = tk["vocabulary"]
    single = tk.get("delimiters_as_tokens", [])
    L += [f"Vocabulary: **{v['name']}** - {v['source']}: {v['size']:,} ids, {v['not_utf8_alone']:,} of them not "
          f"valid UTF-8 on their own (loaded in {v['load_s']:.1f} s, not counted below). Template: "
          f"`{tk['template']}` (ChatML, `<think>`, `<tool_call>` JSON, `<|im_end|>`); "
          + (f"its delimiters {', '.join(f'`{d}`' for d in single)} are single tokens of this vocabulary, the others "
             "are split across ordinary tokens." if single else
             "none of its delimiters is a single token of this vocabulary: they are split across ordinary tokens."),
          "", "Measured by `bench/pertoken.py` (also `python bench/bench_tokens.py`). Before timing, the messages of "
          "`parse_tokens(ids)`, of `feed_tokens` one id at a time (and of `TokenStreams`), of "
          "`chatparse.parse_response(tokenizer.decode(ids))` and of the reference on the decoded text are "
          "asserted equal. The decode-each-token sides are the baselines a generation loop would otherwise run; "
          "they are not always right (a character split across tokens decodes to U+FFFD pieces: see the last "
          "column of the streams table). The *plain loop* side parses nothing: per id it does one list index into "
          "the vocabulary's token texts (each id decoded once beforehand) and one list append (then a join), in "
          "the same rotation as the other sides. It is the yardstick of the speed targets, which are ratios to "
          "it (bench/PERF_NOTES.md#bench-targets); its absolute times are printed for scale.", ""]

    b = tk["build"]
    if b:
        L += ["### Building the token tables", "",
              f"From cold caches, median of {b['reps']}: the vocabulary (`chatparse.compiler.tokens.vocab_for`: every "
              f"token's bytes and text, and the bind-time self-check), once per tokenizer: **{b['vocab_s']:.2f} s**; "
              "then the per-mode tables (`tables_for`), once per template x tokenizer (transitions of pending "
              "delimiter attempts are learned lazily while parsing and not included). The baseline, in the same "
              "repetitions: every id decoded once with the tokenizer (`tokenizer.decode([i])` for each id, what "
              f"the plain loop's table costs): **{b['decode_s']:.2f} s**. Last column: vocabulary + tables over "
              "it (for the slowest template, the median of the per-repetition ratios, is the target's figure).", ""]
        rows = [[f"`{n}`", f"{t:.3f}", f"{b['vocab_s'] + t:.2f}", ", ".join(f"{x:,}" for x in b["inert_per_mode"][n]),
                 f"{(b['vocab_s'] + t) / b['decode_s']:.2f}x"] for n, t in b["tables_s"].items()]
        L += _table(["template", "tables s", "vocabulary + tables s", "inert tokens per mode",
                     "vs decoding every id"], rows) + [""]

    one = tk["one_stream"]
    if one:
        kinds = list(dict.fromkeys(r["kind"] for r in one))
        lengths = sorted({r["length"] for r in one})
        L += ["### One token per call, one stream", "",
              f"One stream per side; a window of the last {one[0]['window']:,} tokens before each generation length "
              f"is timed call by call (everything before it is fed untimed, {one[0]['prefeed']:,} tokens per call). "
              "Each cell: median µs per call (mean in brackets: the mean includes the rare tokens that run the "
              f"character engine), minus the timer's own cost ({tk['timer_overhead_ns']:.0f} ns, the median of "
              "back-to-back `perf_counter_ns` reads); medians over repetitions with the sides interleaved. Sides: "
              "chatparse `TokenParser.feed_tokens(id)`; `tokenizer.decode([id])` + "
              "`chatparse.ResponseParser.feed(text)`; `tokenizer.decode([id])` + the reference "
              "`ResponseParser.feed(text)`; the plain loop, one call per id as `feed_tokens(id)` is "
              "(`append(texts[id])`), its window timed as one loop (every call costs the same, about two timer "
              "reads: timed call by call, the subtracted timer would be most of its figure), so its cell is the "
              "mean per call. `flat` = the time at the longest length / at the shortest, within each repetition (one "
              "pass times both), the median over the repetitions. Texts: "
              "*prose*: the generation is one long reasoning region of prose with line breaks (one word in 200 has "
              "characters split across tokens); *code/HTML*: short reasoning, then one long answer dense with '<' "
              "and newlines (the suite's code/HTML pieces).", ""]
        header = ["text", "side"] + [f"{n:,} tokens" for n in lengths] + ["flat"]
        rows = []
        for k in kinds:
            recs = {r["length"]: r for r in one if r["kind"] == k}
            for ci, (col, label) in enumerate((("cp", "chatparse `feed_tokens(id)`"),
                                               ("text", "decode + chatparse `feed`"),
                                               ("ref", "decode + reference `feed`"),
                                               ("plain", "plain loop (`append(texts[id])`)"))):
                cells = [_us_cell(recs[n][col + "_us"], recs[n][col + "_mean_us"]) for n in lengths]
                last, first = recs[lengths[-1]], recs[lengths[0]]
                fl = last.get(col + "_flat", last[col + "_us"] / first[col + "_us"])
                rows.append([_TOKEN_KINDS.get(k, k) if ci == 0 else "", label] + cells + [f"{fl:.2f}x"])
            rows.append(["", "speed-up vs decode + reference (median)"]
                        + [_fmt_ratio(recs[n]["ref_us"] / recs[n]["cp_us"]) if recs[n]["ref_us"] == recs[n]["ref_us"]
                           else "-" for n in lengths] + [""])
            rows.append(["", f"chatparse / plain loop (target <= {_targets_of()['per_call']:g}x)"]
                        + [f"{recs[n]['cp_plain_ratio']:.2f}x" for n in lengths] + [""])
        L += _table(header, rows) + [""]
        L += [f"![per-token cost]({p})" for p in plots if p.startswith("tokens")] + [""]

    wh = tk["whole"]
    if wh:
        L += ["### Whole sequence from ids", "",
              "One-shot parse of a complete generation (reasoning, then an answer, half the tokens each, then a tool "
              "call), in M tokens/s (median of repetitions, each looping for at least the one-shot section's "
              "minimum time): chatparse `parse_tokens` from a list of ids and from a numpy array; "
              "`tokenizer.decode(ids)` + `chatparse.parse_response` (compiled template); `tokenizer.decode(ids)` + "
              "the reference `parse_response` (with the `ResponseTemplate` from `load_response_template`); the plain "
              "loop over the list of ids and one join. `/ plain` = `parse_tokens` (list)'s time over the plain "
              "loop's, the median of the per-repetition ratios (the target reads it at the longest generation). The "
              "references' sides rotate apart, right after the others, and stop repeating once a repetition would "
              "overrun the pair budget (their parse is quadratic: seconds per call at the longest lengths).", ""]
        rows = [[f"{r['tokens']:,}", f"{r['chars']:,}", _mtps(r["ids_tps"]), _mtps(r["numpy_tps"]),
                 _mtps(r["decode_parse_tps"]), _mtps(r["ref_tps"]),
                 _fmt_ratio(r["ids_tps"] / r["ref_tps"]) if r["ref_tps"] == r["ref_tps"] else "-",
                 _mtps(r["plain_tps"]), f"{r['ids_plain_ratio']:.2f}x", f"{r['reps']} ({r.get('ref_reps', '-')})"]
                for r in wh]
        L += _table(["tokens", "chars", "parse_tokens (list)", "parse_tokens (numpy)", "decode + parse_response",
                     "decode + reference", "speed-up vs reference", "plain loop", "/ plain",
                     "reps (of the references)"], rows) + [""]

    st = tk["streams"]
    if st:
        B = st[0]["streams"]
        L += [f"### {B} streams stepped together", "",
              f"{B} different generations (reasoning, then an answer; no tool call), advanced one token per stream per "
              "step, in M tokens/s (all streams' tokens / wall time, including creating the parsers and finalizing "
              "every stream; median of repetitions, sides interleaved). `TokenStreams.step(ids)` (numpy over the "
              "batch; per-stream events built only when read), the same reading every stream's events "
              f"(`StepEvents.tolist()`), {B} `TokenParser.feed_tokens` in a Python loop, {B} `tokenizer.decode([id])` "
              f"+ `chatparse.ResponseParser.feed`, {B} `decode` + reference `ResponseParser.feed` (first "
              f"{st[0]['ref_steps']} steps only), and the plain loop over the same ids (per step and stream one list "
              "index and one append to the stream's list, then one join per stream); `/ plain` = the "
              "`TokenStreams.step` run's time over the plain loop's, the median of the per-repetition ratios (the "
              "target's figure). *prose*: with line breaks and characters split across tokens; "
              "*plain prose*: neither. The last column counts the streams whose message from decode-each-token + "
              "`feed` differs from the message of the whole decode (a character split across tokens decodes to "
              "U+FFFD pieces).", ""]
        rows = [[_stream_text(r), f"{r['steps']:,}", _mtps(r["step_tps"]), _mtps(r["step_events_tps"]),
                 _mtps(r["loop_tps"]), _mtps(r["text_loop_tps"]), _mtps(r["ref_loop_tps"]), _mtps(r["plain_tps"]),
                 f"{r['step_plain_ratio']:.2f}x", f"{r['decode_each_token_wrong']} of {r['streams']}", r["reps"]]
                for r in st]
        L += _table(["text", "steps", "TokenStreams.step", "step + read events", "loop feed_tokens",
                     "loop decode + chatparse", "loop decode + reference", "plain loop", "/ plain",
                     "wrong messages (decode per token)", "reps"], rows) + [""]
    return L + _serving_token_section(tk)


def _serving_token_section(tk: dict) -> list[str]:
    if "vllm" not in tk.get("dialects", []):
        return []
    have_ref = tk.get("vllm_reference", False)
    L = ['### Serving dialect (`dialect="vllm"`)', "",
         "The per-token paths with vLLM 0.33.0's events (`binding.parser(prefix=..., dialect=\"vllm\")`, "
         "`parse_tokens(ids, binding, prefix=..., dialect=\"vllm\")`, `binding.streams(n, prefix=..., "
         "dialect=\"vllm\")`), timed as extra sides in the same rotations as the default rows above (so the "
         "default figures quoted here come from the same runs). Before timing, their messages are asserted equal "
         "to the default dialect's and to `chatparse.parse_response(text, dialect=\"vllm\")`"
         + (", and to vLLM's `chat_parsing` on the decoded text." if have_ref else
            "; the vLLM reference was not found, so there is no vLLM column.")]
    L += [""]
    one = [r for r in tk["one_stream"] if r.get("vllm_us", float("nan")) == r.get("vllm_us", float("nan"))]
    if one:
        lengths = sorted({r["length"] for r in one})
        L += ["One token per call, one stream (median µs per call, mean in brackets, timer cost subtracted; at the "
              "shortest and longest generation lengths):", ""]
        header = ["text", "side"] + [f"{n:,} tokens" for n in lengths] + ["flat"]
        sides = [("vllm", 'chatparse `feed_tokens(id)`, dialect="vllm"'),
                 ("cp", "chatparse `feed_tokens(id)`, default (same runs)"),
                 ("plain", "plain loop (same runs)")]
        if have_ref:
            sides.append(("vllm_ref", "decode + vLLM `feed`"))
        rows = []
        for k in dict.fromkeys(r["kind"] for r in one):
            recs = {r["length"]: r for r in one if r["kind"] == k}
            for ci, (col, label) in enumerate(sides):
                cells = [_us_cell(recs[n][col + "_us"], recs[n][col + "_mean_us"]) for n in lengths]
                last, first = recs[lengths[-1]], recs[lengths[0]]
                fl = last.get(col + "_flat", last[col + "_us"] / first[col + "_us"])
                rows.append([_TOKEN_KINDS.get(k, k) if ci == 0 else "", label] + cells + [f"{fl:.2f}x"])
            if have_ref:
                rows.append(["", "speed-up vs decode + vLLM (median)"]
                            + [_fmt_ratio(recs[n]["vllm_ref_us"] / recs[n]["vllm_us"]) for n in lengths] + [""])
            rows.append(["", f'dialect="vllm" / plain loop (target <= {_targets_of()["per_call"]:g}x)']
                        + [f"{recs[n]['vllm_plain_ratio']:.2f}x" for n in lengths] + [""])
        L += _table(header, rows) + [""]
    wh = [r for r in tk["whole"] if "vllm_ids_tps" in r]
    if wh:
        L += ["Whole sequence from ids, M tokens/s (median):", ""]
        rows = [[f"{r['tokens']:,}", _mtps(r["vllm_ids_tps"]), _mtps(r["ids_tps"]), _mtps(r["vllm_ref_tps"]),
                 _fmt_ratio(r["vllm_ids_tps"] / r["vllm_ref_tps"]) if r["vllm_ref_tps"] == r["vllm_ref_tps"] else "-",
                 _mtps(r["plain_tps"]), f"{r['vllm_plain_ratio']:.2f}x"]
                for r in wh]
        L += _table(["tokens", 'parse_tokens (list), dialect="vllm"', "parse_tokens (list), default (same runs)",
                     "decode + vLLM parse_response", "speed-up vs vLLM", "plain loop (same runs)", "/ plain"],
                    rows) + [""]
    st = [r for r in tk["streams"] if "vllm_step_tps" in r]
    if st:
        L += [f"{st[0]['streams']} streams stepped together, events not read, M tokens/s (median):", ""]
        rows = [[_stream_text(r), f"{r['steps']:,}", _mtps(r["vllm_step_tps"]), _mtps(r["step_tps"]),
                 _mtps(r["plain_tps"]), f"{r['vllm_plain_ratio']:.2f}x", r["reps"]] for r in st]
        L += _table(["text", "steps", 'TokenStreams.step, dialect="vllm"', "TokenStreams.step, default (same runs)",
                     "plain loop (same runs)", "/ plain", "reps"], rows) + [""]
    return L


def command_line(argv: list[str]) -> str:
    return " ".join(["python", "-m", "bench", *argv])
