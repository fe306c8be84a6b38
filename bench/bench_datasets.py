"""Datasets of generations: throughput of the dataset paths and the memory of `chatparse parse-file`.

``python -m bench.bench_datasets`` (about 10 minutes with the 1 GB file; ``--big-gb 0`` skips it) measures, on
rows from `bench.datasets_gen` (qwen3 format: reasoning, content, tool calls, ~5% malformed; a short and a
long mix), and writes bench/results/DATASETS.md (``--out`` elsewhere):

* the transformers 5.23 reference, `parse_response` called row by row with its template loaded once
  (`load_response_template`, as every chatparse path uses a template compiled beforehand; a sample; rows it
  raises on are counted as parsed; warmed up on its sample first, as `parse_arrow` is on 2,000 rows), measured
  right before and right after every run of every chatparse path (`Beside`):
  each run's ratio divides by the faster of the two passes beside it, as fast as the host was then (its
  speed drifts by a third over minutes), and a path's figure is its median run by that ratio (three runs of
  each one-worker path);
* `chatparse.data.arrow.parse_arrow` in this process (and `CompiledTemplate.parse` row by row, for scale);
* `chatparse parse-file` JSONL -> Parquet, 1 and 2 workers (a subprocess with its default --batch-size; start-up
  included; the compiled tables come from the disk cache, filled first, as on every run after a template's
  first), and the same command on a one-row file, whose CPU time (interpreter, imports, tables, output
  file) is the start-up that the steady rate leaves out;
* Ray Data `parse_dataset` (``map_batches(ParseBatches, concurrency=1|2)``) on a local
  ``ray.init(num_cpus=2)`` cluster (the cluster's start-up and one first small job, which starts Ray's worker
  processes, excluded and reported apart; the actors' start-up included), and the same job with an identity
  batch class, whose CPU time (Ray's actor processes starting and importing ray.data, scheduling, moving the
  blocks) the per-worker rate leaves out; the parser's actor loading chatparse and its tables stays counted.
  Per worker, two ways: the whole cluster's CPU less the identity job's (the driver, raylet and GCS, which
  also poll for as long as the job runs, included), and the map_batches actor's own process less the
  identity actor's (what one worker of a multi-machine cluster spends: the verdict's figure);
* `datasets` ``with_format("arrow").map(ParseBatches(...), batched=True, batch_size=4096, num_proc=1|2)`` on a
  dataset read from a Parquet file (its Arrow cache files on disk, as `load_dataset` / `from_parquet` give),
  and on one built in memory (``from_dict``, whose map output grows one in-memory buffer);
* peak memory of parse-file over a small and a large JSONL file (``--big-gb``, written to /tmp and deleted
  afterwards): the largest single process (``ru_maxrss``) and the whole process tree, sampled from /proc.

rows/s per worker is rows/s divided by the workers; MB/s counts the UTF-8 bytes of the generated texts. CPU
seconds are those of every process doing the work: this process (``time.process_time``), a command and its
workers (``getrusage`` of the waited-for children), Ray's and `datasets`' worker processes (`TreeCPU`: the
process tree sampled from /proc every 50 ms, processes that start or end during the run included). On a
shared machine rows per CPU-second is the figure the load changes least; wall-clock figures are given too.
Not part of ``python -m bench``.
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.datasets_gen import generations  # noqa: E402

TEMPLATE = "qwen3"  # the rows' format (`bench.datasets_gen`), and the template every side parses them with:
# its base format (`templates.get`), which is what the reference loads. On a command line or wherever a name is
# taken, "qwen3" now means the family's serving-grade template (`templates.by_name`, a different template, about
# six times slower to parse per row on these rows), so the paths that take a name are given TEMPLATE_NAME.
TEMPLATE_NAME = TEMPLATE + ":base"


def _tree_stats(root: int) -> dict:
    """``{pid: fields of /proc/PID/stat after the command name}`` of `root` and all its descendants."""
    children: dict = {}
    stats: dict = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat", "rb") as f:
                stat = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(stat[1]), []).append(int(d))
        stats[int(d)] = stat
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, ()))
        if pid in stats:
            out[pid] = stats[pid]
    return out


def _rss_tree_kb(root: int) -> int:
    """The summed VmRSS of `root` and all its descendants (kB), from /proc."""
    total = 0
    for pid in _tree_stats(root):
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_ticks(root: int) -> dict:
    """``{(pid, start time): utime + stime}`` (clock ticks) of `root` and all its descendants, from /proc."""
    return {(pid, int(stat[19])): int(stat[11]) + int(stat[12]) for pid, stat in _tree_stats(root).items()}


class TreeCPU:
    """``with TreeCPU() as t: ...`` then ``t.seconds``: the CPU seconds this process and all its descendants
    used inside the block, sampled every `every` seconds, so that a process that starts or ends inside it is
    counted (up to its last sample: a process that lives less than `every` may be missed); the sampling
    thread's own CPU time is left out."""

    def __init__(self, root: int | None = None, every: float = 0.05):
        self.root = os.getpid() if root is None else root
        self.every = every
        self.seconds = 0.0
        self.names: dict = {}  # (pid, start time) -> the process's title (Ray's actors set theirs: "ray::...")

    def __enter__(self):
        self.first = _cpu_ticks(self.root)
        self.last = dict(self.first)
        self._name_new()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(self.every):
            self.last.update(_cpu_ticks(self.root))
            self._name_new()
        self._own = time.thread_time()  # (the sampling's own CPU time, left out of the count)

    def _name_new(self) -> None:
        """The current title of every process seen alive (a Ray worker starts as ``ray::IDLE`` and takes its
        actor's title when it becomes one); a process that ended keeps its last."""
        for key in self.last:
            try:
                with open(f"/proc/{key[0]}/cmdline", "rb") as f:
                    self.names[key] = f.read().split(b"\0")[0].decode(errors="replace")
            except OSError:
                self.names.setdefault(key, "?")

    def seconds_of(self, title_prefix: str) -> float:
        """The CPU seconds, inside the block, of the processes whose title starts with `title_prefix`."""
        return sum(v - self.first.get(k, 0) for k, v in self.last.items()
                   if self.names.get(k, "").startswith(title_prefix)) / _TICK

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()
        self.last.update(_cpu_ticks(self.root))
        self.seconds = sum(v - self.first.get(k, 0) for k, v in self.last.items()) / _TICK - self._own
        return False


def run_measured(argv: list) -> dict:
    """Run `argv` (a child process); its wall time, the peak summed RSS of its process tree (sampled every
    50 ms), and from a fresh wrapper process's getrusage: the largest single descendant's peak RSS and the
    CPU seconds of the whole tree."""
    wrapper = ("import resource, subprocess, sys, json; r = subprocess.run(sys.argv[1:]); "
               "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
               "print(json.dumps([r.returncode, u.ru_maxrss, u.ru_utime + u.ru_stime]))")
    started = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", wrapper, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=ROOT)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _rss_tree_kb(p.pid))
            done.wait(0.05)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    out, err = p.communicate()
    done.set()
    t.join()
    secs = time.perf_counter() - started
    code, maxrss, cpu = json.loads(out.strip().splitlines()[-1])
    if code != 0:
        raise RuntimeError(f"{argv} failed ({code}):\n{err[-3000:]}")
    return {"seconds": secs, "cpu": cpu, "tree_mb": peak / 1024, "max_process_mb": maxrss / 1024, "stderr": err}


def write_jsonl(path: Path, prefixes, texts, target_bytes: int | None = None) -> tuple[int, int]:
    """Rows {"id", "prompt", "text"} to `path`; repeated (with new ids) until `target_bytes` if given.
    Returns (rows, bytes)."""
    lines = [json.dumps({"prompt": p, "text": t}, ensure_ascii=False)[1:] for p, t in zip(prefixes, texts)]
    n = size = 0
    with open(path, "w", encoding="utf-8") as f:
        while True:
            for line in lines:
                s = f'{{"id": {n}, {line}\n'
                f.write(s)
                n += 1
                size += len(s.encode("utf-8"))
                if target_bytes is not None and size >= target_bytes:
                    return n, size
            if target_bytes is None:
                return n, size


def _rate(secs: float | None, texts, workers: int, cpu: float | None = None) -> dict:
    """A run's figures (`secs` None: a CPU-time figure only, wall-clock ones left out)."""
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    return {"rows": len(texts), "seconds": secs, "rows_s": secs and len(texts) / secs,
            "mb_s": secs and mb / secs, "rows_s_worker": secs and len(texts) / secs / workers, "cpu": cpu,
            "rows_cpu_s": None if not cpu or cpu <= 0 else len(texts) / cpu, "load": os.getloadavg()[0],
            "workers": workers}


def _best(runs: list) -> dict:
    """The run with the least CPU time (the one the machine's other work disturbed least)."""
    return min(runs, key=lambda r: r["cpu"] if r["cpu"] else r["seconds"])


def _timed(fn, texts, workers=1, repeat=1) -> dict:
    """The best of `repeat` runs of fn() (this process's CPU time, with its wall time)."""
    runs = []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        runs.append(_rate(time.perf_counter() - t0, texts, workers, time.process_time() - c0))
    return _best(runs)


def reference_template():
    """The reference's template, loaded once (`load_response_template`): what a user of the reference parsing
    many rows does, as every chatparse path here uses a template compiled beforehand. Passing the template dict
    on every row would make `parse_response` load it again per row (1.4-2.3x the time on short rows)."""
    from transformers.utils.chat_parsing.response_templates import load_response_template

    from chatparse import templates

    return load_response_template(templates.get(TEMPLATE))


def bench_reference(prefixes, texts, repeat: int = 3, template=None) -> dict:
    from transformers.utils.chat_parsing import parse_response

    template = reference_template() if template is None else template

    def run():
        for p, t in zip(prefixes, texts):
            try:
                parse_response(t, template, prefix=p)
            except Exception:  # noqa: BLE001 - a failed row counts as parsed, as in chatparse's error column
                pass

    return _timed(run, texts, repeat=repeat)


class Beside:
    """The reference on its sample, measured again right before and right after each chatparse measurement
    (`around`), so that every ratio divides by the reference as fast as the host was then. The host's speed
    drifts over minutes: on 2026-12-03 the reference gave 7,596 rows per CPU-second in one run and 10,427 in
    another, the same rows; a ratio over a reference measured minutes apart moved with that drift. `passes`
    keeps every measurement, for the reference's own row (the best of them)."""

    def __init__(self, prefixes, texts):
        self.sample = prefixes, texts
        self.passes: list = []
        self.template = reference_template()  # loaded once, as chatparse's tables are compiled once
        # warm-up, untimed (first calls: lazy imports, the regex caches), as `bench_inprocess` warms parse_arrow
        bench_reference(prefixes[:2000], texts[:2000], repeat=1, template=self.template)

    def once(self) -> dict:
        x = bench_reference(*self.sample, repeat=1, template=self.template)
        self.passes.append(x)
        return x

    def around(self, measures: list) -> tuple[int, dict]:
        """Run each of `measures` (callables returning a `_rate` dict), with a reference pass before the first,
        between each two and after the last. Each run is paired with the faster of the two passes beside it
        (``"reference"``), and the run whose ratio (rows per CPU-second over its reference's) is the median
        is returned with its index (of an even number, the lower of the two middle ones). The host's speed
        moves within seconds too (the same parse_arrow call took 1.39 and 2.11 CPU-s in two runs that
        afternoon), so a single pair's ratio moves with it, and the best run and the best pass, each alone,
        can come from different speeds: the median of paired ratios is the figure the drift moves least."""
        refs, runs = [self.once()], []
        for m in measures:
            runs.append(m())
            refs.append(self.once())
        for k, run in enumerate(runs):
            run["reference"] = _best([refs[k], refs[k + 1]])
        order = sorted(range(len(runs)), key=lambda k: _cpu_ratio(runs[k]))
        k = order[(len(order) - 1) // 2]
        return k, runs[k]


def _cpu_ratio(x: dict) -> float:
    """Rows per CPU-second over the reference's (nan where a difference of CPU times came out <= 0: runs too
    small to tell)."""
    return x["rows_cpu_s"] / x["reference"]["rows_cpu_s"] if x["rows_cpu_s"] else float("nan")


def bench_inprocess(prefixes, texts, beside: Beside) -> dict:
    import pyarrow as pa

    import chatparse
    from chatparse import templates
    from chatparse.data.arrow import parse_arrow

    compiled = chatparse.compile_template(templates.get(TEMPLATE))
    table = pa.table({"prompt": prefixes, "text": texts})
    parse_arrow(table.slice(0, 2000), compiled, prefix_column="prompt")  # warm-up

    def rowwise():
        for p, t in zip(prefixes, texts):
            try:
                compiled.parse(t, prefix=p)
            except Exception:  # noqa: BLE001
                pass

    def arrow():
        parse_arrow(table, compiled, prefix_column="prompt")

    return {"parse_arrow": beside.around([partial(_timed, arrow, texts)] * 3)[1],
            "parse": beside.around([partial(_timed, rowwise, texts)] * 3)[1]}


def bench_cli(path: Path, texts, workers: int, tmp: Path, beside: Beside) -> dict:
    """parse-file on `path` with its default --batch-size (start-up included), and its steady rate: the CPU time
    less that of the same command on one row alone, the file's first that parses (start-up: interpreter,
    imports, tables, workers, output file; a file whose every row fails makes the command exit with an error)."""
    def command(src: Path) -> dict:
        out = tmp / f"out_{workers}.parquet"
        r = run_measured([sys.executable, "-m", "chatparse.cli", "parse-file", str(src), str(out), "--template",
                          TEMPLATE_NAME, "--prefix-column", "prompt", "--workers", str(workers), "--no-progress"])
        out.unlink()
        return r

    import chatparse
    from chatparse import templates

    compiled = chatparse.compile_template(templates.get(TEMPLATE))
    one = tmp / "one.jsonl"
    with open(path, "rb") as f:
        for line in f:
            row = json.loads(line)
            try:
                compiled.parse(row["text"], prefix=row["prompt"])
            except ValueError:
                continue
            one.write_bytes(line)
            break
    startup = min((command(one) for _ in range(2)), key=lambda r: r["cpu"])
    runs: list = []

    def whole() -> dict:
        runs.append(command(path))
        return _rate(runs[-1]["seconds"], texts, workers, runs[-1]["cpu"])

    k, res = beside.around([whole] * 3)
    r = runs[k]
    res.update(tree_mb=r["tree_mb"], max_process_mb=r["max_process_mb"], startup_cpu=startup["cpu"],
               startup_seconds=startup["seconds"])
    # the command's own summary: its rate from the first batch on (process start and compiling excluded)
    m = re.search(r" in ([0-9.]+) s \(", r["stderr"])
    res["steady"] = _rate(float(m.group(1)), texts, workers, r["cpu"] - startup["cpu"])
    res["steady"]["reference"] = res["reference"]
    return res


class Identity:
    """A `map_batches` class that returns its batch: what a Ray Data job costs without the parser."""

    def __call__(self, batch):
        return batch


def bench_ray(mixes: dict, concurrencies, besides: dict, repeat: int = 3) -> dict:
    """`parse_dataset` (map_batches(ParseBatches), zero-copy Arrow batches of 4096 rows) per mix and
    concurrency, the actors' start-up included, wall time and the CPU time of the whole cluster (`TreeCPU`:
    driver, raylet, GCS, workers); and for one actor the same job with `Identity` (same blocks, batches),
    whose CPU time is Ray's own: the per-worker rate is rows per CPU-second of the difference. First one small run
    (2,000 rows, concurrency 2) on the fresh cluster, timed on its own as ``("first", 2)``: it starts Ray's
    worker processes, as any first job on a cluster does. Of `repeat` runs each, the median by the ratio to the
    reference beside it (`Beside.around`); of the identity job, the best."""
    import pyarrow as pa
    import ray

    from chatparse.integrations.ray import parse_dataset

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    out: dict = {}
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        prefixes, texts = next(iter(mixes.values()))
        started = time.perf_counter()
        few = parse_dataset(ray.data.from_arrow(pa.table({"prompt": prefixes[:2000], "text": texts[:2000]})),
                            TEMPLATE_NAME, prefix_column="prompt", concurrency=2)
        assert sum(b.num_rows for b in ray.get(few.to_arrow_refs())) == 2000
        out[("first", 2)] = _rate(time.perf_counter() - started, texts[:2000], 2)
        for mix, (prefixes, texts) in mixes.items():
            table = pa.table({"prompt": prefixes, "text": texts})
            step = max(1, len(texts) // 10)
            blocks = [table.slice(i, step) for i in range(0, table.num_rows, step)]

            def job(c, identity):
                ds = ray.data.from_arrow(blocks)
                time.sleep(1)  # (what the last job left running settles first)
                started = time.perf_counter()
                with TreeCPU() as cpu:
                    if identity:
                        parsed = ds.map_batches(Identity, batch_format="pyarrow", batch_size=4096,
                                                zero_copy_batch=True, concurrency=c)
                    else:
                        parsed = parse_dataset(ds, TEMPLATE_NAME, prefix_column="prompt", concurrency=c)
                    n = sum(b.num_rows for b in ray.get(parsed.to_arrow_refs()))
                assert n == len(texts)
                out = _rate(time.perf_counter() - started, texts, c, cpu.seconds)
                out["actors_cpu"] = cpu.seconds_of("ray::MapWorker(")  # (the map_batches actors' processes)
                return out

            for c in concurrencies:
                best = besides[mix].around([partial(job, c, False)] * repeat)[1]
                if c == 1:  # (with 2 actors Ray's own start-up, twice as large, varies more than the parse)
                    idle = _best([job(c, True) for _ in range(repeat)])
                    best["identity"] = idle
                    best["worker"] = _rate(None, texts, c, best["cpu"] - idle["cpu"])
                    best["actor"] = _rate(None, texts, c, best["actors_cpu"] - idle["actors_cpu"])
                    best["worker"]["reference"] = best["actor"]["reference"] = best["reference"]
                out[(mix, c)] = best
    finally:
        ray.shutdown()
    return out


def bench_datasets(prefixes, texts, procs, tmp: Path, beside: Beside) -> dict:
    """``map(ParseBatches, batched=True, batch_size=4096, num_proc=N)`` on the arrow-formatted dataset read
    from a Parquet file (``("disk", N)``), and built in memory (``("memory", 1)``); CPU time of this process
    and its workers (`TreeCPU`)."""
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    from chatparse.integrations.ray import ParseBatches

    datasets.disable_progress_bars()
    src = tmp / "datasets_in.parquet"
    pq.write_table(pa.table({"prompt": prefixes, "text": texts}), src)
    sets = {"disk": datasets.Dataset.from_parquet(str(src), cache_dir=str(tmp / "hf_cache")).with_format("arrow"),
            "memory": datasets.Dataset.from_dict({"prompt": prefixes, "text": texts}).with_format("arrow")}
    fn = ParseBatches(TEMPLATE_NAME, prefix_column="prompt")
    out = {}
    for where, n in [("disk", p) for p in procs] + [("memory", 1)]:
        def run(where=where, n=n) -> dict:
            started = time.perf_counter()
            with TreeCPU() as cpu:
                res = sets[where].map(fn, batched=True, batch_size=4096, num_proc=None if n == 1 else n,
                                      load_from_cache_file=False)
            assert res.num_rows == len(texts)
            rate = _rate(time.perf_counter() - started, texts, n, cpu.seconds)
            res.cleanup_cache_files()
            return rate

        out[(where, n)] = beside.around([run] * (3 if n == 1 else 1))[1]
    src.unlink()
    return out


def main(argv=None) -> Path:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_datasets", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000, help="short rows for the throughput runs (default 100000)")
    ap.add_argument("--long-rows", type=int, default=20_000, help="long rows for the throughput runs (default 20000)")
    ap.add_argument("--reference-rows", type=int, default=5_000,
                    help="short rows for the reference (default 5000; a fifth of that of long rows)")
    ap.add_argument("--big-gb", type=float, default=1.0, help="size of the large JSONL file (0: skip)")
    ap.add_argument("--big-workers", type=int, default=2, help="workers for the large file (default 2)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "DATASETS.md")
    args = ap.parse_args(argv)

    def say(msg):
        print(msg, file=sys.stderr, flush=True)

    # chatparse byte-compiled, as `pip install` leaves a wheel (and left transformers, Ray and the rest): from
    # an editable install, or with PYTHONDONTWRITEBYTECODE set, every new process (each Ray actor, each
    # parse-file run) compiled its modules from source again, about 0.09 CPU-s that the figures counting
    # start-up charged to chatparse
    compileall.compile_dir(ROOT / "chatparse", quiet=1)
    when = datetime.datetime.now(datetime.timezone.utc)
    mixes = {"short": generations(TEMPLATE, args.rows, seed=0),
             "long": generations(TEMPLATE, args.long_rows, seed=0, length="long")}
    ref_rows = {"short": args.reference_rows, "long": max(1, args.reference_rows // 5)}
    res: dict = {"mixes": {}, "load": [os.getloadavg()[0]]}
    # parse-file reads the compiled tables from the disk cache (chatparse/data/table_cache.py) after its first
    # run on a template: fill it, so that every run below starts as every run after the first does
    from chatparse.data.parse_file import _tables_of

    _tables_of(TEMPLATE_NAME)
    with tempfile.TemporaryDirectory(prefix="chatparse-bench-", dir="/tmp") as tmp_name:
        tmp = Path(tmp_name)
        besides = {mix: Beside(prefixes[:ref_rows[mix]], texts[:ref_rows[mix]])
                   for mix, (prefixes, texts) in mixes.items()}
        for mix, (prefixes, texts) in mixes.items():
            r: dict = {}
            beside = besides[mix]
            say(f"{mix}: in process (the reference beside each path) ...")
            r.update(bench_inprocess(prefixes, texts, beside))
            src = tmp / f"{mix}.jsonl"
            _, size = write_jsonl(src, prefixes, texts)
            r["file_mb"] = size / 1e6
            for w in (1, 2):
                say(f"{mix}: parse-file, {w} worker(s) ...")
                r[f"cli_{w}"] = bench_cli(src, texts, w, tmp, beside)
            src.unlink()
            try:
                say(f"{mix}: datasets ...")
                for (where, w), x in bench_datasets(prefixes, texts, (1, 2), tmp, beside).items():
                    r[f"datasets_{w}" if where == "disk" else "datasets_memory"] = x
            except ImportError as e:
                r["datasets_skipped"] = str(e)
            res["mixes"][mix] = r
        try:
            say("Ray Data ...")
            for (mix, w), x in bench_ray(mixes, (1, 2), besides).items():
                if mix == "first":
                    res["ray_first"] = x
                else:
                    res["mixes"][mix][f"ray_{w}"] = x
        except ImportError as e:
            res["ray_skipped"] = str(e)
        for mix, beside in besides.items():  # the reference's own row: the fastest of all its passes
            res["mixes"][mix]["reference"] = _best(beside.passes)
            res["mixes"][mix]["reference"]["passes"] = len(beside.passes)
        if args.big_gb > 0:
            prefixes, texts = mixes["short"]
            big = tmp / "big.jsonl"
            say(f"writing a {args.big_gb} GB JSONL file ...")
            big_rows, big_size = write_jsonl(big, prefixes, texts, int(args.big_gb * 1e9))
            say(f"parse-file on {big_size / 1e9:.2f} GB ({big_rows} rows), {args.big_workers} worker(s) ...")
            out = tmp / "big.parquet"
            argv = [sys.executable, "-m", "chatparse.cli", "parse-file", str(big), str(out), "--template",
                    TEMPLATE_NAME, "--prefix-column", "prompt", "--workers", str(args.big_workers), "--no-progress"]
            r = run_measured(argv)
            res["big"] = {"rows": big_rows, "bytes": big_size, "seconds": r["seconds"], "cpu": r["cpu"],
                          "tree_mb": r["tree_mb"], "max_process_mb": r["max_process_mb"],
                          "workers": args.big_workers, "out_mb": out.stat().st_size / 1e6,
                          "summary": [x for x in r["stderr"].splitlines() if x.startswith("chatparse:")]}
            res["big_command"] = " ".join(["chatparse", *argv[3:]]).replace(str(tmp), "/tmp/chatparse-bench-XXXX")
    res["load"].append(os.getloadavg()[0])
    text = report(res, when, args)
    args.out.with_suffix(".json").write_text(json.dumps(res, indent=1, default=str), encoding="utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text, encoding="utf-8")
    print(text)
    return args.out


def report(res: dict, when, args) -> str:
    import pyarrow
    import transformers

    def versions():
        out = [f"transformers {transformers.__version__}", f"pyarrow {pyarrow.__version__}"]
        for mod in ("ray", "datasets"):
            try:
                out.append(f"{mod} {__import__(mod).__version__}")
            except ImportError:
                pass
        return ", ".join(out)

    cmd = "python -m bench.bench_datasets" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in (("rows", args.rows), ("long_rows", args.long_rows),
                                                     ("reference_rows", args.reference_rows), ("big_gb", args.big_gb))
        if v != ap_defaults[k])
    lines = [
        "# Datasets of generations: throughput and memory",
        "",
        f"Run: {when:%Y-%m-%d %H:%M} UTC, `{cmd}`, {os.cpu_count()}-core {platform.machine()} "
        f"(`{_cpu_name()}`), CPython {platform.python_version()}, {versions()}. The 1-minute load average was "
        f"{res['load'][0]:.1f} at the start, {res['load'][1]:.1f} at the end ({os.cpu_count()} cores), and at the "
        "end of each measurement in the table's last column. Wall-clock figures, "
        "above all the 2-worker ones, depend on that load; rows per CPU-second (of every process doing the "
        "work) much less, so the verdicts below are read off them, with the wall-clock ones stated beside. One "
        "run's figures: of each chatparse path, the median of its runs (three for one worker) by the ratio to the "
        "reference measured beside that run.",
        "",
        "Rows: qwen3-format generations from `bench/datasets_gen.py` (reasoning, content, 0-3 tool calls, about 5% "
        "malformed: their error is recorded), parsed by every side with the qwen3 base-format template "
        f"(`templates.get(\"qwen3\")`, `--template {TEMPLATE_NAME}`: the template the reference loads; plain "
        "`qwen3` on a command line is now the serving-grade template, another one). *short*: the tests' rows, "
        "~300 bytes of generated text; *long*: "
        "100-1500 words of reasoning and 20-400 of content, ~3.5 KB. MB/s counts the generated texts' UTF-8 bytes. "
        "'vs reference' is rows/s per worker, or rows per CPU-second, over the reference's (row by row in one "
        "process, its template loaded once with `load_response_template` and passed to every call, warmed up on "
        "its sample first; same mix) as measured right before and right after that run (the faster of the two passes): "
        "the host's speed drifts by a third over minutes, and a ratio over a reference measured minutes apart "
        "moved with it. The reference's own row, for scale, is the fastest of all its passes "
        f"({' and '.join(str(r['reference']['passes']) for r in res['mixes'].values())}, short and long).",
        "",
        "chatparse is byte-compiled first, as `pip install` leaves a package (and left the reference's). "
        "What each CPU figure counts: in-process paths, this process; `parse-file`, the command and its workers "
        "(everything from the interpreter's start), and *steady*, that less the same command's CPU on a one-row "
        "file (start-up: interpreter, imports, loading the tables, starting workers, opening the output); Ray "
        "Data, every process of the local cluster during the job (driver, raylet, GCS, workers: Ray's own work "
        "included), and *per worker*, that less the same job with an identity batch class (Ray starting the "
        "actor's process and importing ray.data into it, scheduling, moving blocks), so that the parser's actor "
        "importing chatparse and loading its tables stays counted, and *the parsing actor's own process*, the "
        "CPU of the map_batches actor's process (title `ray::MapWorker(...)`) less the identity actor's: what "
        "one worker spends, without the driver, raylet and GCS, shared by a cluster's workers and busy for as "
        "long as the job runs (the Ray verdict's figure); `datasets`, this process and its workers.",
    ]
    for mix, r in res["mixes"].items():
        ref = r["reference"]

        def row(name, x, workers=None):
            workers = x.get("workers", 1) if workers is None else workers
            cells = [name, str(workers), f"{x['rows']:,}"]
            if x["seconds"] is not None:
                cells += [f"{x['seconds']:.1f}", f"{x['rows_s']:,.0f}", f"{x['rows_s_worker']:,.0f}"]
            else:
                cells += ["-"] * 3
            if x.get("rows_cpu_s"):
                cells += [f"{x['cpu']:.2f}", f"{x['rows_cpu_s']:,.0f}"]
            else:
                cells += ["-"] * 2
            beside = x.get("reference", ref)
            if x["seconds"] is not None:
                cells += [f"{x['mb_s']:.2f}", f"{x['rows_s_worker'] / beside['rows_s']:.1f}x"]
            else:
                cells += ["-"] * 2
            cells.append(f"{x['rows_cpu_s'] / beside['rows_cpu_s']:.1f}x" if x.get("rows_cpu_s") else "-")
            cells.append(f"{x['load']:.1f}")
            return "| " + " | ".join(cells) + " |"

        lines += ["", f"## {mix} rows ({r['file_mb']:.0f} MB as JSONL)", "",
                  "| path | workers | rows | seconds | rows/s | rows/s per worker | CPU s | rows per CPU-s | MB/s | "
                  "vs reference (per worker, wall) | vs reference (per CPU-s) | load |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|",
                  row("transformers `parse_response`, row by row, template loaded once (reference)", ref),
                  row("`CompiledTemplate.parse`, row by row", r["parse"]),
                  row("`chatparse.data.arrow.parse_arrow` (one table)", r["parse_arrow"])]
        for w in (1, 2):
            x = r[f"cli_{w}"]
            lines.append(row("`chatparse parse-file` JSONL -> Parquet (start-up included, tables from the cache)", x))
            lines.append(row(f"`chatparse parse-file`, steady (wall: its summary's rate; CPU: less the start-up, "
                             f"{x['startup_cpu']:.2f} CPU s)", x["steady"], w))
        for w in (1, 2):
            if f"ray_{w}" in r:
                x = r[f"ray_{w}"]
                lines.append(row("Ray Data `parse_dataset` = `map_batches(ParseBatches)` (the whole cluster, actors' "
                                 "start-up included)", x))
                if "worker" in x:
                    lines.append(row(f"Ray Data, per worker (less the same job with an identity class: "
                                     f"{x['identity']['cpu']:.2f} CPU s, {x['identity']['seconds']:.1f} s)",
                                     x["worker"], w))
                if "actor" in x:
                    lines.append(row(f"Ray Data, the parsing actor's own process ({x['actors_cpu']:.2f} CPU s), less "
                                     f"the identity actor's ({x['identity']['actors_cpu']:.2f} CPU s)", x["actor"], w))
        for key, name in (("datasets_1", "`datasets` `.map(ParseBatches, batched=True, num_proc=N)`, from Parquet"),
                          ("datasets_2", "`datasets` `.map(ParseBatches, batched=True, num_proc=N)`, from Parquet"),
                          ("datasets_memory", "`datasets` `.map(...)`, in memory (`from_dict`)")):
            if key in r:
                lines.append(row(name, r[key]))
        for key in ("datasets_skipped",):
            if key in r:
                lines.append(f"\n{key}: {r[key]}")
    if "ray_skipped" in res:
        lines.append(f"\nRay skipped: {res['ray_skipped']}")
    if "ray_first" in res:
        x = res["ray_first"]
        lines += ["", f"Ray Data rows are measured after one small job on the fresh cluster (2,000 short rows, "
                  f"concurrency 2: {x['seconds']:.1f} s, starting Ray's worker processes, as any first job on a "
                  "cluster does); each measured job still starts its own actors, which load the tables."]
    lines += ["", "## Memory of `parse-file`", "",
              "Peak RSS: the largest single process (getrusage), and the process tree (parent and workers summed, "
              "sampled from /proc every 50 ms). The template's tables come from the disk cache; without it (a "
              "template's first run) they are compiled in a short-lived process of their own (about 160 MB, "
              "before parsing starts), which the parsing processes never grow by.", "",
              "| input | workers | rows | seconds | rows/s | largest process | process tree |", "|---|---|---|---|---|---|---|"]
    for mix, r in res["mixes"].items():
        for w in (1, 2):
            x = r[f"cli_{w}"]
            lines.append(f"| {r['file_mb']:.0f} MB JSONL ({mix}) | {w} | {x['rows']:,} | {x['seconds']:.1f} | "
                         f"{x['rows_s']:,.0f} | {x['max_process_mb']:.0f} MB | {x['tree_mb']:.0f} MB |")
    if "big" in res:
        b = res["big"]
        lines.append(f"| {b['bytes'] / 1e9:.2f} GB JSONL (short) | {b['workers']} | {b['rows']:,} | {b['seconds']:.1f} | "
                     f"{b['rows'] / b['seconds']:,.0f} | {b['max_process_mb']:.0f} MB | {b['tree_mb']:.0f} MB |")
        lines += ["", f"The large file: `{res['big_command']}` (the input written to /tmp by the script, deleted "
                  f"afterwards; output {b['out_mb']:.0f} MB of Parquet; {b['cpu']:.0f} CPU-seconds in all, "
                  f"{b['rows'] / b['cpu']:,.0f} rows per CPU-second). Its summary line: "
                  f"`{' '.join(b['summary'])[:300]}`"]
    lines += ["", "## Against the issue's targets", ""] + verdicts(res)
    return "\n".join(lines) + "\n"


def verdicts(res: dict) -> list:
    """Issue #20's targets, read off this run: one worker >= 5x the reference row by row, per CPU-second (the
    figure a shared machine disturbs least; parse-file at its steady rate, Ray's parsing actor, `datasets` from
    Parquet), the wall-clock and start-up-included figures stated beside; and a 1 GB JSONL file parsed with
    < 500 MB RSS."""
    out = []
    for mix, r in res["mixes"].items():
        per_cpu, wall = [], []
        for key, name, pick in (("parse_arrow", "parse_arrow", None), ("cli_1", "parse-file", "steady"),
                                ("ray_1", "Ray Data", "actor"), ("datasets_1", "datasets", None)):
            if key not in r:
                continue
            x = r[key][pick] if pick else r[key]
            per_cpu.append((name, _cpu_ratio(x)))
            wall.append(f"{name} {r[key]['rows_s_worker'] / r[key]['reference']['rows_s']:.1f}x")
        extra = []
        if "cli_1" in r:
            extra.append(f"parse-file with its start-up {_cpu_ratio(r['cli_1']):.1f}x")
        if "ray_1" in r:
            extra.append(f"Ray Data's whole cluster {_cpu_ratio(r['ray_1']):.1f}x")
            if "worker" in r["ray_1"]:
                extra.append(f"Ray Data's whole cluster less the identity job {_cpu_ratio(r['ray_1']['worker']):.1f}x")
        if "datasets_memory" in r:
            extra.append(f"datasets in memory {_cpu_ratio(r['datasets_memory']):.1f}x")
        met = all(v >= 5 for _, v in per_cpu)
        out.append(f"* One worker, {mix} rows, per CPU-second: "
                   + ", ".join(f"{name} {v:.1f}x" for name, v in per_cpu)
                   + f" the reference's: {'met' if met else 'not met'} (target 5x). Also per CPU-second: "
                   + ", ".join(extra) + f". Wall clock, rows/s per worker: {', '.join(wall)}.")
    if "big" in res:
        b = res["big"]
        out.append(f"* {b['bytes'] / 1e9:.2f} GB JSONL with {b['workers']} workers: peak RSS {b['max_process_mb']:.0f} MB "
                   f"for the largest process, {b['tree_mb']:.0f} MB for the whole process tree: "
                   f"{'met' if b['tree_mb'] < 500 else 'not met'} (target < 500 MB).")
    return out


ap_defaults = {"rows": 100_000, "long_rows": 20_000, "reference_rows": 5_000, "big_gb": 1.0}


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


if __name__ == "__main__":
    main()
