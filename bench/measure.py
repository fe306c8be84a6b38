"""Measurements: chatparse and the transformers reference timed side by side in one process.

Rules every measurement here follows:

* the two implementations run the same work on the same scenario (`bench.scenarios`), **interleaved**
  (chatparse then reference on even repetitions, reference then chatparse on odd ones), several repetitions,
  and the **median** of each side is kept; the ratio quoted is reference / chatparse (> 1: chatparse faster);
* templates are compiled before timing on both sides (chatparse: `compile_template`; reference:
  `load_response_template`), except in the compile-time measurement itself;
* the cyclic garbage collector is collected before and disabled during timed regions;
* a pair of measurements that is very slow (the reference's one-shot parse of long outputs can take tens of
  seconds) stops repeating after `Config.pair_budget_s`; the repetition count actually used is recorded.

Each function returns plain records (lists of dicts) that `bench.report` and `bench.plots` turn into the
results table and figures.
"""

from __future__ import annotations

import gc
import statistics
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from typing import Callable

from . import scenarios as S
from .pertoken import NoGC as _NoGC  # one definition of the GC guard and the sampler
from .pertoken import paired_ratio
from .pertoken import timed as _timed
from .pertoken import windows as _windows

ns = time.perf_counter_ns


@dataclass
class Config:
    quick: bool = False
    formats: tuple = S.FORMATS
    stream_kinds: tuple = S.STREAM_KINDS
    chunk_sizes: tuple = (1, 4, 16)
    stream_lengths: tuple = (15_000, 60_000, 250_000, 500_000)
    window_chars: int = 4096  # a window of window_chars // chunk feeds ends at each length
    prefeed_chunk: int = 1024  # untimed feeding before a window
    stream_reps: int = 5
    stream_ascii: bool = True  # also stream an ASCII-only copy of each text (4 characters per feed)
    # the serving dialect (chatparse dialect="vllm" against vLLM 0.33.0's chat_parsing, `bench.vllm_ref`):
    # streaming rows at 4 characters per feed, and per-token sides in the per-token section
    serving: bool = True
    serving_chunk: int = 4
    oneshot_small: int = 4_000
    oneshot_large: int = 500_000
    batch_small: int = 64
    batch_large: int = 4
    oneshot_reps: int = 15  # (a row whose pair would overrun `pair_budget_s` stops earlier: the long outputs)
    token_whole_reps: int = 7  # whole sequences from ids (`pertoken.whole`)
    min_timed_s: float = 0.02  # each timed sample of a fast parse loops until at least this long
    pair_budget_s: float = 30.0
    memory_lengths: tuple = (15_000, 30_000, 60_000, 125_000, 250_000, 500_000)
    memory_chunk: int = 4
    memory_constant: int = 64 * 1024  # target: retained - bodies <= this, at every length
    compile_templates: tuple | None = None  # None: every bundled template
    compile_reps: int = 5
    # per-token cost (bench.pertoken): template, generation lengths in tokens, timed tokens per length, ...
    token_template: str = "qwen3"
    token_lengths: tuple = (1_024, 4_096, 16_384, 65_536, 131_072)
    token_window: int = 1024
    token_kinds: tuple = ("reasoning", "content")
    token_reps: int = 5
    token_streams: int = 256
    token_stream_steps: int = 2048
    token_stream_reps: int = 3
    token_build_reps: int = 5
    token_build_templates: tuple = ("qwen3",) + S.FORMATS
    token_tekken: bool = True  # tekken (mistral-common) when importable, else a byte-level BPE trained here
    # runs of possible delimiter starts (`runs`): spaces in the reasoning, the reference only up to its limits
    runs_template: str = "qwen3"
    runs_lengths: tuple = (1_000, 4_000, 16_000, 64_000)
    runs_ref_stream: int = 1_000  # the reference's streamed cost grows with the cube of the run here
    runs_ref_oneshot: int = 4_000
    runs_reps: int = 3
    progress: Callable[[str], None] = field(default=lambda msg: print(msg, file=sys.stderr, flush=True))

    @classmethod
    def quick_mode(cls, **kw) -> "Config":
        base = dict(
            quick=True, stream_lengths=(4_000, 16_000), window_chars=1024, stream_reps=2,
            oneshot_small=4_000, oneshot_large=64_000, batch_small=8, batch_large=2, oneshot_reps=3,
            token_whole_reps=3, min_timed_s=0.005, pair_budget_s=3.0, memory_lengths=(4_000, 8_000, 16_000), compile_templates=S.FORMATS,
            compile_reps=2, token_lengths=(1_024, 4_096), token_window=256, token_reps=2, token_stream_steps=256,
            token_stream_reps=2, token_build_reps=1, runs_lengths=(500, 2_000), runs_ref_stream=500,
            runs_ref_oneshot=2_000, runs_reps=2,
        )
        base.update(kw)
        return cls(**base)


# -- the two implementations behind one interface ----------------------------------------------------------

class Impl:
    """A compiled template of one implementation: `parser(prefix)`, `parse(text, prefix)`, `parse_many`."""

    name = ""

    def parser(self, prefix: str):
        raise NotImplementedError

    def parse(self, text: str, prefix: str) -> dict:
        raise NotImplementedError

    def parse_many(self, texts: list, prefixes: list) -> list:
        raise NotImplementedError


class Chatparse(Impl):
    name = "chatparse"

    def __init__(self, template: dict):
        import chatparse

        self.ct = chatparse.compile_template(template)

    def parser(self, prefix):
        return self.ct.parser(prefix)

    def parse(self, text, prefix):
        return self.ct.parse(text, prefix=prefix)

    def parse_many(self, texts, prefixes):
        return self.ct.parse_batch(texts, prefixes)


class Reference(Impl):
    name = "reference"

    def __init__(self, template: dict):
        from transformers.utils.chat_parsing import ResponseParser, parse_response
        from transformers.utils.chat_parsing.response_templates import load_response_template

        self._rp, self._parse = ResponseParser, parse_response
        self.rt = load_response_template(template)

    def parser(self, prefix):
        return self._rp(self.rt, prefix)

    def parse(self, text, prefix):
        return self._parse(text, self.rt, prefix=prefix)

    def parse_many(self, texts, prefixes):
        # the reference has no batch API: a loop is what a user would write
        return [self._parse(t, self.rt, prefix=p) for t, p in zip(texts, prefixes)]


class ChatparseDialect(Chatparse):
    """chatparse with the events of one dialect (``dialect="vllm"``: vLLM 0.33.0's serving dialect)."""

    def __init__(self, template: dict, dialect: str):
        super().__init__(template)
        self.dialect = dialect
        self.name = f"chatparse ({dialect} dialect)"

    def parser(self, prefix):
        return self.ct.parser(prefix, dialect=self.dialect)

    def parse(self, text, prefix):
        return self.ct.parse(text, prefix=prefix, dialect=self.dialect)

    def parse_many(self, texts, prefixes):
        return [self.parse(t, p) for t, p in zip(texts, prefixes)]


class Vllm(Impl):
    """vLLM 0.33.0's copy of the interpreter (`bench.vllm_ref`), with its template loaded once."""

    name = "vllm"

    def __init__(self, template: dict, ref):
        self.ref = ref
        self.rt = ref.load_template(template)

    def parser(self, prefix):
        return self.ref.parser(self.rt, prefix)

    def parse(self, text, prefix):
        return self.ref.parse(text, self.rt, prefix)

    def parse_many(self, texts, prefixes):
        return [self.parse(t, p) for t, p in zip(texts, prefixes)]


def serving_impls(fmt: str) -> tuple[Impl, Impl | None]:
    """chatparse in the "vllm" dialect and vLLM's chat_parsing (None when `bench.vllm_ref` finds none)."""
    from chatparse import templates

    from . import vllm_ref

    ref = vllm_ref.load()
    return ChatparseDialect(templates.get(fmt), "vllm"), (Vllm(templates.get(fmt), ref) if ref else None)


def impls(fmt: str) -> tuple[Impl, Impl]:
    from chatparse import templates

    return Chatparse(templates.get(fmt)), Reference(templates.get(fmt))


def reference_streamed(ref: Reference, sc: S.Scenario, step: int = 4096) -> dict:
    """The reference's message for `sc`, fed in `step`-character pieces.

    The reference's one-shot parse runs `regex` partial searches from the start of an undecided region to the
    end of the buffer, which is quadratic in the region length (tens of seconds at 500k characters for
    templates whose delimiters start with ``\\s*``); fed in pieces it does the same work incrementally."""
    p = ref.parser(sc.prefix)
    out = sc.output
    for i in range(0, len(out), step):
        p.feed(out[i:i + step])
    return p.finalize()[0]


def check(sc: S.Scenario, cp: Impl, ref: Impl, ref_message: dict | None = None) -> None:
    """Assert chatparse and the reference give the same message for `sc` (and the shape `sc` intends)."""
    ours = cp.parse(sc.output, sc.prefix)
    theirs = ref_message if ref_message is not None else reference_streamed(ref, sc)
    if ours != theirs:
        diff = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        raise AssertionError(f"{sc.name}: chatparse and the reference disagree on {diff}")
    exp = sc.expect
    assert ("reasoning_content" in ours) == exp["reasoning_content"], f"{sc.name}: reasoning_content"
    assert ("content" in ours) == exp["content"], f"{sc.name}: content"
    assert len(ours.get("tool_calls", [])) == exp["tool_calls"], f"{sc.name}: number of tool calls"


def _normalized(events: list) -> list:
    """Events with adjacent chunks of one field merged and an error as (class name, message): the form in
    which chatparse and vLLM must agree whatever the chunking (as tests/test_vllm_dialect.py compares)."""
    out: list = []
    for ev in events:
        ev = dict(ev)
        if "error" in ev:
            ev["error"] = (type(ev["error"]).__name__, str(ev["error"]))
        if (ev["type"] == "region_chunk" and out and out[-1]["type"] == "region_chunk"
                and out[-1]["field"] == ev["field"]):
            out[-1] = {**out[-1], "text": out[-1]["text"] + ev["text"]}
        else:
            out.append(ev)
    return out


def _all_events(impl: Impl, sc: S.Scenario, step: int) -> tuple:
    p = impl.parser(sc.prefix)
    events = list(p.initial_events)
    out = sc.output
    for i in range(0, len(out), step):
        events += p.feed(out[i:i + step])
    message, final = p.finalize()
    return message, _normalized(events + final), p.input_text


def check_serving(sc: S.Scenario, cpv: Impl, vref: Impl | None, default_message: dict, step: int = 4096) -> None:
    """chatparse in the "vllm" dialect gives the default dialect's message for `sc`; with vLLM's copy at hand,
    also vLLM's message, events (spans and captures included; chunks merged) and `input_text`. vLLM is fed in
    `step`-character pieces, as `reference_streamed` feeds the transformers reference (fed 500k characters at
    once it spends tens of seconds in partial searches of ``\\s*``-led delimiters), chatparse in one piece (its
    events do not depend on the chunking)."""
    ours = cpv.parse(sc.output, sc.prefix)
    if ours != default_message:
        raise AssertionError(f"{sc.name}: the vllm dialect gives another message than the default")
    if vref is None:
        return
    mine = _all_events(cpv, sc, len(sc.output))
    theirs = _all_events(vref, sc, step)
    for what, a, b in zip(("message", "events", "input_text"), mine, theirs):
        if a != b:
            raise AssertionError(f"{sc.name}: chatparse (vllm dialect) and vLLM's chat_parsing disagree on the {what}")
    if ours != theirs[0]:
        raise AssertionError(f"{sc.name}: parse_response (vllm dialect) and vLLM's streamed message disagree")


def prepare() -> None:
    """Import both implementations, then move every object alive so far out of the collector's sight
    (`gc.freeze`): transformers imports a lot, and collecting it again before every timed region would cost
    more than most measurements."""
    import chatparse  # noqa: F401
    import chatparse.templates  # noqa: F401
    import transformers.utils.chat_parsing  # noqa: F401

    from . import vllm_ref

    vllm_ref.load()  # the serving dialect's reference, when found (never raises)
    gc.collect()
    gc.freeze()


def release() -> None:
    """Undo `prepare` (matters when the suite runs inside another process, e.g. a test)."""
    gc.unfreeze()


def _interleaved(cp_fn, ref_fn, reps: int, budget_s: float):
    """Run the pair `reps` times, alternating which goes first; medians of both and the count used."""
    a, b = [], []
    t0 = time.perf_counter()
    for i in range(reps):
        if i % 2 == 0:
            a.append(cp_fn())
            b.append(ref_fn())
        else:
            b.append(ref_fn())
            a.append(cp_fn())
        spent = time.perf_counter() - t0
        if spent * (i + 2) / (i + 1) > budget_s:  # the next repetition would overrun the budget
            break
    return a, b


# -- streaming ---------------------------------------------------------------------------------------------

def _stream_pass(impl: Impl, sc: S.Scenario, lengths, chunk: int, window: int, prefeed: int) -> list:
    """One stream: feed untimed up to each window, then time every feed of the window.

    Returns, per length, (median ns per feed, mean ns per feed) over the window's feeds."""
    out = sc.output
    p = impl.parser(sc.prefix)
    res = []
    for L, start in zip(lengths, _windows(p.feed, out, lengths, window, prefeed)):
        chunks = [out[i:min(i + chunk, L)] for i in range(start, L, chunk)]
        times = [0] * len(chunks)
        feed = p.feed
        with _NoGC():
            for i, c in enumerate(chunks):
                t = ns()
                feed(c)
                times[i] = ns() - t
        res.append((statistics.median(times), sum(times) / len(times)))
    return res


def streaming(cfg: Config) -> list:
    """Per-feed cost for each format x region kind x chunk size, at each generation length; plus, with
    `stream_ascii`, the same text with ASCII stand-ins at 4 characters per feed (the reference copies half
    the bytes per feed there, so it is the harder case for the speed-up)."""
    records = []
    top = max(cfg.stream_lengths)
    for fmt in cfg.formats:
        cp, ref = impls(fmt)
        cpv, vref = serving_impls(fmt) if cfg.serving else (None, None)
        for kind in cfg.stream_kinds:
            variants = [(S.make(fmt, kind, top), cfg.chunk_sizes)]
            if cfg.stream_ascii:
                variants.append((S.make(fmt, kind, top, ascii=True), (4,)))
            for vi, (sc, chunks) in enumerate(variants):
                check(sc, cp, ref)
                assert len(sc.output) >= top
                # warm-up: one short stream on each side (first-use caches, lazy imports)
                for impl in (cp, ref):
                    _stream_pass(impl, sc, [min(cfg.stream_lengths)], 4, min(cfg.window_chars, 1024),
                                 cfg.prefeed_chunk)
                for chunk in chunks:
                    records += _stream_records(cfg, cp, ref, sc, chunk)
                if cpv is not None and vi == 0:  # the serving dialect: the same text, 4 characters per feed
                    records += _serving_records(cfg, cp, cpv, vref, sc)
    return records


def _serving_records(cfg: Config, cp: Impl, cpv: Impl, vref: Impl | None, sc: S.Scenario) -> list:
    t0 = time.perf_counter()
    check_serving(sc, cpv, vref, cp.parse(sc.output, sc.prefix))
    for impl in (cpv, vref) if vref is not None else (cpv,):
        _stream_pass(impl, sc, [min(cfg.stream_lengths)], 4, min(cfg.window_chars, 1024), cfg.prefeed_chunk)
    records = _stream_records(cfg, cpv, vref, sc, cfg.serving_chunk, dialect="vllm", base=cp)
    for r in records:
        r["elapsed_s"] = (time.perf_counter() - t0) / len(records)
    return records


def _stream_records(cfg: Config, cp: Impl, ref: Impl | None, sc: S.Scenario, chunk: int,
                    dialect: str = "transformers", base: Impl | None = None) -> list:
    """Records of one scenario and chunk size. ``dialect`` tags them ("vllm": the serving-dialect rows, whose
    reference is vLLM's chat_parsing); without a reference (`ref` None) chatparse runs alone and the
    reference columns are NaN. `base` (chatparse in the default dialect) joins the same rotation, so that
    ``default_us`` compares the dialects within one set of repetitions."""
    cfg.progress(f"  streaming {sc.fmt}/{sc.kind} ({sc.text}) chunk={chunk}"
                 + ("" if dialect == "transformers" else f", {dialect} dialect"))
    window = min(cfg.window_chars, min(cfg.stream_lengths) // 2)
    window -= window % chunk

    def run(impl):
        return lambda: _stream_pass(impl, sc, cfg.stream_lengths, chunk, window, cfg.prefeed_chunk)

    c = None
    if base is not None:
        from .pertoken import rotated

        sides = [run(cp), run(base)] + ([run(ref)] if ref is not None else [])
        a, c, *rest = rotated(sides, cfg.stream_reps, cfg.pair_budget_s * 4)
        b = rest[0] if rest else None
    elif ref is not None:
        a, b = _interleaved(run(cp), run(ref), cfg.stream_reps, cfg.pair_budget_s * 4)
    else:
        a, b = [run(cp)() for _ in range(cfg.stream_reps)], None
    nan = float("nan")
    records = []
    for li, L in enumerate(cfg.stream_lengths):
        cpm = statistics.median(r[li][0] for r in a) / 1e3
        refm = statistics.median(r[li][0] for r in b) / 1e3 if b else nan
        records.append({
            "format": sc.fmt, "kind": sc.kind, "text": sc.text, "chunk": chunk, "length": L,
            "window_feeds": window // chunk, "cp_us": cpm, "ref_us": refm,
            "cp_mean_us": statistics.median(r[li][1] for r in a) / 1e3,
            "ref_mean_us": statistics.median(r[li][1] for r in b) / 1e3 if b else nan,
            "ratio": refm / cpm, "reps": len(a), "dialect": dialect,
            # `flat`: this length's median per feed over the shortest's, within each repetition (one pass times
            # both, seconds apart), the median over the repetitions: a load spike moves one repetition
            "cp_flat": paired_ratio([r[li][0] for r in a], [r[0][0] for r in a]),
        })
        if c is not None:
            records[-1]["default_us"] = statistics.median(r[li][0] for r in c) / 1e3
    return records


# -- one-shot ----------------------------------------------------------------------------------------------



def oneshot(cfg: Config) -> list:
    """Whole-output parses with compiled templates: typical (mixed) outputs, short and long, single and
    batched, and a long answer dense with '<' and newlines; plus the dict-template path for the short one."""
    import chatparse

    records = []
    small, large = cfg.oneshot_small, cfg.oneshot_large
    rows = [
        ("mixed", small, 1, "compiled"),
        ("mixed", small, cfg.batch_small, "compiled"),
        ("mixed", small, 1, "dict"),
        ("mixed", large, 1, "compiled"),
        ("mixed", large, cfg.batch_large, "compiled"),
        ("content", large, 1, "compiled"),
    ]
    for fmt in cfg.formats:
        cp, ref = impls(fmt)
        tpl = S.make(fmt, "mixed", small).template()
        for kind, size, batch, how in rows:
            cfg.progress(f"  one-shot {fmt}/{kind} {size} x{batch} ({how})")
            scs = [S.make(fmt, kind, size, variant=v) for v in range(batch)]
            texts, prefixes = [s.output for s in scs], [s.prefix for s in scs]
            chars = sum(map(len, texts))
            # correctness first (and the results of the timed calls are compared too)
            ours = cp.parse_many(texts, prefixes) if batch > 1 else [cp.parse(texts[0], prefixes[0])]
            for s, m in zip(scs[:2], ours[:2]):
                check(s, cp, ref, reference_streamed(ref, s))
            if batch > 1:
                cp_fn = lambda: cp.parse_many(texts, prefixes)  # noqa: E731
                ref_fn = lambda: ref.parse_many(texts, prefixes)  # noqa: E731
            elif how == "dict":
                cp_fn = lambda: chatparse.parse_response(texts[0], tpl, prefix=prefixes[0])  # noqa: E731
                from transformers.utils.chat_parsing import parse_response as _rp

                ref_fn = lambda: _rp(texts[0], tpl, prefix=prefixes[0])  # noqa: E731
            else:
                cp_fn = lambda: cp.parse(texts[0], prefixes[0])  # noqa: E731
                ref_fn = lambda: ref.parse(texts[0], prefixes[0])  # noqa: E731
            got = {}

            def keep(name, fn):
                def call():
                    got[name] = fn()
                return call

            a, b = _interleaved(_timed(keep("cp", cp_fn), cfg.min_timed_s), _timed(keep("ref", ref_fn), cfg.min_timed_s),
                                cfg.oneshot_reps, cfg.pair_budget_s)
            if got["cp"] != got["ref"]:
                raise AssertionError(f"one-shot {fmt}/{kind}/{size}: chatparse and the reference disagree")
            cpt, reft = statistics.median(a), statistics.median(b)
            records.append({
                "format": fmt, "doc": kind, "size": size, "chars": chars, "batch": batch, "template": how,
                # the target's ratio: the median of the per-repetition ratios (both sides of a repetition ran
                # back to back, so the machine's drift moves both), not the ratio of the two medians
                "cp_s": cpt, "ref_s": reft, "ratio": paired_ratio(b, a),
                "cp_mbps": chars / cpt / 1e6, "ref_mbps": chars / reft / 1e6, "reps": len(a),
            })
    return records


# -- runs of possible delimiter starts ---------------------------------------------------------------------

def _run_text(spaces: int) -> str:
    return "<think>Let me think.\n" + " " * spaces + "\nSo it is 4.</think>\n\nThe answer is 4.<|im_end|>"


def runs(cfg: Config) -> list:
    """A reasoning that holds a run of spaces, where the reasoning close of `cfg.runs_template`
    (``\\s*</think>\\s*|\\s*(?=<tool_call>)`` for qwen3) could start at every space: the time to stream the
    whole output in 4-character feeds, and to parse it one-shot. The reference re-searches its buffer from
    every space on each feed, so its cost grows with a power of the run; it runs only up to
    `runs_ref_stream` / `runs_ref_oneshot` spaces (None beyond)."""
    cp, ref = impls(cfg.runs_template)
    records = []
    warm = _run_text(10)  # the same warm-up for both sides (first calls: lazy imports, regex caches)
    for impl in (cp, ref):
        p = impl.parser("")
        for i in range(0, len(warm), 4):
            p.feed(warm[i:i + 4])
        assert p.finalize()[0] == impl.parse(warm, "")
    for n in cfg.runs_lengths:
        cfg.progress(f"  runs {cfg.runs_template} {n:,} spaces")
        text = _run_text(n)

        def stream(impl):
            def run():
                p = impl.parser("")
                for i in range(0, len(text), 4):
                    p.feed(text[i:i + 4])
                return p.finalize()[0]
            return run

        def oneshot_of(impl):
            return lambda: impl.parse(text, "")

        want = cp.parse(text, "")
        assert stream(cp)() == want and want.get("content") == "The answer is 4."
        rec = {"template": cfg.runs_template, "spaces": n, "chars": len(text)}
        sides = (("stream", stream, cfg.runs_ref_stream), ("oneshot", oneshot_of, cfg.runs_ref_oneshot))
        for key, fn_of, limit in sides:
            samples = []
            for _ in range(cfg.runs_reps):
                with _NoGC():
                    t = time.perf_counter()
                    fn_of(cp)()
                    samples.append(time.perf_counter() - t)
            rec[f"cp_{key}_s"] = statistics.median(samples)
            rec[f"ref_{key}_s"] = None
            if n <= limit:
                with _NoGC():
                    t = time.perf_counter()
                    got = fn_of(ref)()
                    rec[f"ref_{key}_s"] = time.perf_counter() - t
                if got != want:
                    raise AssertionError(f"runs {n}: chatparse and the reference disagree ({key})")
        records.append(rec)
    return records


# -- compile -----------------------------------------------------------------------------------------------

def _table_stats(raw) -> tuple[int, int]:
    """(bytes of numpy arrays in the raw tables, total DFA states over all modes)."""
    import numpy as np

    total = 0
    stack = [raw]
    while stack:
        x = stack.pop()
        if isinstance(x, np.ndarray):
            total += x.nbytes
        elif isinstance(x, dict):
            stack.extend(v for k, v in x.items() if k != "template")
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    states = 0
    for m in raw.get("modes", []) if isinstance(raw, dict) else []:
        trans = m.get("trans") if isinstance(m, dict) else None
        if trans is not None:
            states += int(np.asarray(trans).shape[0])
    return total, states


def compile_times(cfg: Config) -> list:
    """Per template: chatparse validation + table build (cache bypassed), table load, table size; the
    reference's `load_response_template`. Both `re`/`regex` compile caches are purged before every sample."""
    import re

    import regex
    from chatparse import templates
    from chatparse.compiler.build import build_tables
    from chatparse.compiler.validate import load_template
    from chatparse.runtime.tables.layout import Tables
    from transformers.utils.chat_parsing.response_templates import load_response_template

    names = list(cfg.compile_templates) if cfg.compile_templates else templates.names()
    records = []
    cfg.progress(f"  compile: {len(names)} templates")
    for name in names:
        tpl = templates.get(name)
        raw_box = {}

        def purged(fn):
            def sample():
                re.purge()
                regex.purge()
                with _NoGC():
                    t = time.perf_counter()
                    fn()
                    return time.perf_counter() - t
            return sample

        def build():
            raw_box["raw"] = build_tables(load_template(tpl))

        a, b = _interleaved(purged(build), purged(lambda: load_response_template(tpl)), cfg.compile_reps,
                            cfg.pair_budget_s)
        raw = raw_box["raw"]
        loads = [purged(lambda: Tables(raw))() for _ in range(cfg.compile_reps)]
        size, states = _table_stats(raw)
        tables = Tables(raw)
        cmap = getattr(tables, "cmap", None)
        cpt, reft = statistics.median(a), statistics.median(b)
        records.append({
            "template": name, "cp_compile_ms": cpt * 1e3, "cp_load_ms": statistics.median(loads) * 1e3,
            "table_bytes": size, "states": states, "cmap_bytes": len(cmap) * getattr(cmap, "itemsize", 1)
            if cmap is not None else 0,
            "ref_load_ms": reft * 1e3, "ratio": reft / cpt, "reps": len(a),
        })
    return records


# -- memory ------------------------------------------------------------------------------------------------

def _bodies(cp: Impl, sc: S.Scenario, lengths, chunk: int) -> dict:
    """Bytes of the region bodies seen after feeding each length: every region instance's text (what its
    region_chunk events concatenate to) as one `str`, measured with sys.getsizeof."""
    p = cp.parser(sc.prefix)
    out = sc.output
    regions: list[list[str]] = []
    open_ = False

    def take(events):
        nonlocal open_
        for e in events:
            if e["type"] == "region_open":
                regions.append([])
                open_ = True
            elif e["type"] == "region_chunk":
                if not open_:
                    regions.append([])
                    open_ = True
                regions[-1].append(e["text"])
            elif e["type"] == "region_close":
                open_ = False

    take(p.initial_events)
    res, pos = {}, 0
    for L in lengths:
        while pos < L:
            take(p.feed(out[pos:min(pos + chunk, L)]))
            pos = min(pos + chunk, L)
        res[L] = sum(sys.getsizeof("".join(r)) for r in regions)
    return res


def _retained(impl: Impl, sc: S.Scenario, lengths, chunk: int) -> dict:
    """Bytes allocated (tracemalloc) and still alive after feeding each length, for one stream, counted from
    just before the parser is created."""
    out = sc.output
    res = {}
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        p = impl.parser(sc.prefix)
        pos = 0
        for L in lengths:
            while pos < L:
                nxt = min(pos + chunk, L)
                p.feed(out[pos:nxt])
                pos = nxt
            gc.collect()
            res[L] = tracemalloc.get_traced_memory()[0] - base
        del p
    finally:
        tracemalloc.stop()
    return res


def memory(cfg: Config) -> list:
    """Retained bytes per stream against generation length, fed in `memory_chunk`-character pieces."""
    records = []
    top = max(cfg.memory_lengths)
    for fmt in cfg.formats:
        cfg.progress(f"  memory {fmt}")
        cp, ref = impls(fmt)
        sc = S.make(fmt, "mixed", top)
        lengths = [min(L, len(sc.output)) for L in cfg.memory_lengths]
        check(sc, cp, ref)
        cp.parse(sc.output, sc.prefix)  # warm every lazy cache outside the traced region
        bodies = _bodies(cp, sc, lengths, cfg.memory_chunk)
        r_cp = _retained(cp, sc, lengths, cfg.memory_chunk)
        r_ref = _retained(ref, sc, lengths, cfg.memory_chunk)
        for L, nominal in zip(lengths, cfg.memory_lengths):
            records.append({
                "format": fmt, "length": L, "nominal": nominal, "bodies": bodies[L],
                "cp_bytes": r_cp[L], "ref_bytes": r_ref[L],
                "cp_excess": r_cp[L] - bodies[L], "ref_excess": r_ref[L] - bodies[L],
            })
    return records


# -- tokens ------------------------------------------------------------------------------------------------

def tokens(cfg: Config) -> dict:
    """Per-token cost (issue 3), measured by `bench.pertoken` (shared with ``python bench/bench_tokens.py``):
    token-table build time, one token per call in one stream against generation length, whole sequences from
    ids, and `token_streams` streams stepped together; chatparse from token ids against decoding each token with
    the tokenizer and feeding the text to chatparse and to the reference."""
    from . import pertoken as P

    vocab = P.load_tokenizer(allow_tekken=cfg.token_tekken, log=cfg.progress)
    cfg.progress(f"  per-token vocabulary: {vocab.name} ({vocab.load_s:.1f} s to load)")
    templates = tuple(dict.fromkeys((cfg.token_template,) + tuple(cfg.token_build_templates)))
    build = P.build_times(vocab.tok, templates, cfg.token_build_reps)
    sides = P.Sides(vocab, cfg.token_template)
    dialects = ("vllm",) if cfg.serving else ()
    one = []
    for kind in cfg.token_kinds:
        one += P.one_stream(sides, kind, cfg.token_lengths, cfg.token_window, cfg.token_reps,
                            budget_s=cfg.pair_budget_s * 4, progress=cfg.progress, dialects=dialects)
    whole = P.whole(sides, cfg.token_lengths, cfg.token_whole_reps, cfg.min_timed_s, budget_s=cfg.pair_budget_s,
                    progress=cfg.progress, dialects=dialects)
    streams = [P.streams(sides, cfg.token_streams, cfg.token_stream_steps, plain, cfg.token_stream_reps,
                         budget_s=cfg.pair_budget_s * 2, progress=cfg.progress, dialects=dialects)
               for plain in (False, True)]
    return {
        "dialects": list(dialects), "vllm_reference": sides.vllm_parser is not None,
        "vocabulary": {"name": vocab.name, "source": vocab.source, "tekken": vocab.tekken, "load_s": vocab.load_s,
                       "size": build["size"], "not_utf8_alone": build["not_utf8_alone"]},
        "template": cfg.token_template, "build": build,
        "delimiters_as_tokens": [d for d in P.SPECIALS if vocab.tok.token_to_id(d) is not None],
        "one_stream": one, "whole": whole, "streams": streams,
        "timer_overhead_ns": P.timer_overhead_ns(),
    }
