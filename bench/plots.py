"""Figures (PNG, matplotlib's headless Agg backend) drawn from the records of `bench.measure`.

Every function takes records and an output directory and returns the file names it wrote.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from .pertoken import TARGETS as TOKEN_TARGETS  # noqa: E402
from .scenarios import FORMAT_LABELS  # noqa: E402

CP_STYLE = {"linestyle": "-", "marker": "o"}
REF_STYLE = {"linestyle": "--", "marker": "x"}
CHUNK_COLORS = {1: "tab:blue", 4: "tab:orange", 16: "tab:green"}


def _length_axis(ax, lengths) -> None:
    """Log x axis with one plain tick per measured length (15k, 60k, 250k, ...)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(lengths))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1000:.0f}k" if x >= 1000 else f"{x:.0f}"))
    ax.xaxis.set_minor_formatter(NullFormatter())


def _plain_y(ax) -> None:
    """Log y axis labelled 0.5, 1, 2, 10 ... instead of powers of ten."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig, out: Path, name: str) -> str:
    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    return name


def streaming(records: list, out: Path) -> list[str]:
    """Per format: one panel per region kind, median per-feed cost against generation length (log-log),
    solid = chatparse, dashed = reference, one colour per chunk size."""
    names = []
    serving = [r for r in records if r.get("dialect", "transformers") != "transformers"]
    records = [r for r in records if r.get("dialect", "transformers") == "transformers"]
    formats = list(dict.fromkeys(r["format"] for r in records))
    for fmt in formats:
        rows = [r for r in records if r["format"] == fmt]
        kinds = list(dict.fromkeys(r["kind"] for r in rows))
        fig, axes = plt.subplots(1, len(kinds), figsize=(4.6 * len(kinds), 4), squeeze=False, sharey=True)
        for ax, kind in zip(axes[0], kinds):
            series = dict.fromkeys((r["chunk"], r.get("text", "unicode")) for r in rows if r["kind"] == kind)
            for chunk, text in sorted(series):
                pts = sorted((r["length"], r["cp_us"], r["ref_us"]) for r in rows
                             if r["kind"] == kind and r["chunk"] == chunk and r.get("text", "unicode") == text)
                xs = [p[0] for p in pts]
                ascii_ = text == "ascii"
                color = "tab:red" if ascii_ else CHUNK_COLORS.get(chunk)
                tag = f"{chunk} ch/feed" + (", ASCII" if ascii_ else "")
                ax.plot(xs, [p[1] for p in pts], color=color, label=f"chatparse, {tag}", **CP_STYLE)
                ax.plot(xs, [p[2] for p in pts], color=color, label=f"reference, {tag}", **REF_STYLE)
            # the serving dialect (dialect="vllm") beside them, against vLLM's chat_parsing where it was found
            pts = sorted((r["length"], r["cp_us"], r["ref_us"]) for r in serving
                         if r["format"] == fmt and r["kind"] == kind)
            if pts:
                xs = [p[0] for p in pts]
                tag = f"{serving[0]['chunk']} ch/feed"
                ax.plot(xs, [p[1] for p in pts], color="tab:purple", label=f"chatparse vllm dialect, {tag}",
                        linestyle=":", marker="s")
                if all(p[2] == p[2] for p in pts):
                    ax.plot(xs, [p[2] for p in pts], color="tab:purple", label=f"vLLM chat_parsing, {tag}",
                            **REF_STYLE)
            _length_axis(ax, [r["length"] for r in rows])
            _plain_y(ax)
            ax.set_title(f"{kind} region")
            ax.set_xlabel("generation length (characters)")
            ax.grid(True, which="both", alpha=0.3)
        axes[0][0].set_ylabel("median time per feed (µs)")
        axes[0][-1].legend(fontsize=7)
        fig.suptitle(f"Streaming cost per feed - {FORMAT_LABELS.get(fmt, fmt)}")
        names.append(_save(fig, out, f"streaming_{fmt}.png"))
    # summary: the 4-character speed-up of every scenario against length
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for fmt in formats:
        keys = dict.fromkeys((r["kind"], r.get("text", "unicode")) for r in records if r["format"] == fmt)
        for kind, text in keys:
            pts = sorted((r["length"], r["ratio"]) for r in records if r["format"] == fmt and r["kind"] == kind
                         and r.get("text", "unicode") == text and r["chunk"] == 4)
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                        linestyle=":" if text == "ascii" else "-",
                        label=f"{fmt}/{kind}" + (" ASCII" if text == "ascii" else ""))
    ax.axhline(10, color="red", linestyle=":", label="target 10x")
    _length_axis(ax, [r["length"] for r in records])
    _plain_y(ax)
    ax.set_xlabel("generation length (characters)")
    ax.set_ylabel("reference / chatparse, per 4-character feed")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, ncol=2)
    ax.set_title("Streaming speed-up (4 characters per feed)")
    names.append(_save(fig, out, "streaming_speedup.png"))
    return names


def oneshot(records: list, out: Path) -> list[str]:
    """Speed-up (reference / chatparse) of every one-shot row, grouped by format (log scale)."""
    formats = list(dict.fromkeys(r["format"] for r in records))
    labels = list(dict.fromkeys(_oneshot_label(r) for r in records))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(formats) * len(labels) / 3), 4.5))
    width = 0.8 / max(1, len(labels))
    for li, label in enumerate(labels):
        xs, ys = [], []
        for fi, fmt in enumerate(formats):
            for r in records:
                if r["format"] == fmt and _oneshot_label(r) == label:
                    xs.append(fi + li * width)
                    ys.append(r["ratio"])
        ax.bar(xs, ys, width=width, label=label)
    ax.axhline(1, color="black", linewidth=0.8)
    ax.axhline(5, color="red", linestyle=":", label="target 5x (4 KB)")
    ax.set_yscale("log")
    ax.set_xticks([fi + 0.4 - width / 2 for fi in range(len(formats))])
    ax.set_xticklabels(formats)
    ax.set_ylabel("reference time / chatparse time")
    ax.set_title("One-shot parse speed-up")
    ax.legend(fontsize=7)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    return [_save(fig, out, "oneshot.png")]


def _oneshot_label(r: dict) -> str:
    size = f"{r['size'] // 1000} KB"
    doc = "dense '<'" if r["doc"] == "content" else "typical"
    batch = f", batch {r['batch']}" if r["batch"] > 1 else ""
    how = ", dict template" if r["template"] == "dict" else ""
    return f"{size} {doc}{batch}{how}"


def compile_times(records: list, out: Path) -> list[str]:
    """Horizontal bars per template: chatparse compile, chatparse table load, reference load (log ms)."""
    recs = sorted(records, key=lambda r: r["template"])
    fig, ax = plt.subplots(figsize=(8, max(3, 0.28 * len(recs) + 1)))
    ys = range(len(recs))
    h = 0.27
    ax.barh([y - h for y in ys], [r["cp_compile_ms"] for r in recs], height=h, label="chatparse compile")
    ax.barh(list(ys), [r["cp_load_ms"] for r in recs], height=h, label="chatparse table load")
    ax.barh([y + h for y in ys], [r["ref_load_ms"] for r in recs], height=h, label="reference load_response_template")
    ax.set_yticks(list(ys))
    ax.set_yticklabels([r["template"] for r in recs], fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("milliseconds (median)")
    ax.invert_yaxis()
    ax.legend(fontsize=7)
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.set_title("Template compile / load time")
    return [_save(fig, out, "compile.png")]


def memory(records: list, out: Path) -> list[str]:
    """Per format: retained bytes per stream against generation length, with the region bodies."""
    formats = list(dict.fromkeys(r["format"] for r in records))
    fig, axes = plt.subplots(1, len(formats), figsize=(4.2 * len(formats), 4), squeeze=False)
    for ax, fmt in zip(axes[0], formats):
        rows = sorted((r for r in records if r["format"] == fmt), key=lambda r: r["length"])
        xs = [r["length"] for r in rows]
        ax.plot(xs, [max(1, r["cp_bytes"]) / 1024 for r in rows], label="chatparse", **CP_STYLE)
        ax.plot(xs, [max(1, r["ref_bytes"]) / 1024 for r in rows], label="reference", **REF_STYLE)
        ax.plot(xs, [max(1, r["bodies"]) / 1024 for r in rows], color="gray", linestyle=":", label="region bodies")
        _length_axis(ax, xs)
        _plain_y(ax)
        ax.set_title(FORMAT_LABELS.get(fmt, fmt), fontsize=9)
        ax.set_xlabel("characters fed")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("retained KiB per stream (tracemalloc)")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Memory retained per stream")
    return [_save(fig, out, "memory.png")]


TOKEN_SIDES = (("cp", "chatparse feed_tokens(id)", "tab:blue", CP_STYLE),
               ("text", "decode + chatparse feed(text)", "tab:green", REF_STYLE),
               ("ref", "decode + reference feed(text)", "tab:red", REF_STYLE))


SERVING_TOKEN_SIDES = (("vllm", 'chatparse feed_tokens(id), dialect="vllm"', "tab:purple",
                        {"linestyle": ":", "marker": "s"}),
                       ("vllm_ref", "decode + vLLM chat_parsing feed(text)", "tab:purple", REF_STYLE))


def tokens(result: dict, out: Path) -> list[str]:
    """Per-token cost, one stream: median µs per call against generation length (log-log), one panel per
    text, one line per side."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    one = result.get("one_stream") or []
    if not one:
        return []
    kinds = list(dict.fromkeys(r["kind"] for r in one))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5 * len(kinds), 4), squeeze=False, sharey=True)
    titles = {"reasoning": "prose (one long reasoning region)", "content": "code/HTML answer (dense '<', newlines)"}
    for ax, kind in zip(axes[0], kinds):
        rows = sorted((r for r in one if r["kind"] == kind), key=lambda r: r["length"])
        xs = [r["length"] for r in rows]
        for col, label, color, style in TOKEN_SIDES:
            ys = [r[col + "_us"] for r in rows]
            if all(y == y for y in ys):
                ax.plot(xs, ys, color=color, label=label, **style)
        for col, label, color, style in SERVING_TOKEN_SIDES:  # measured at the shortest and longest lengths
            pts = [(r["length"], r[col + "_us"]) for r in rows if r.get(col + "_us", float("nan")) == r.get(col + "_us")]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], color=color, label=label, **style)
        plain = [r.get("plain_us", float("nan")) for r in rows]
        if all(y == y and y > 0 for y in plain):  # the targets' baseline, measured in the same rotation
            ax.plot(xs, plain, color="gray", linestyle="-", marker=".", label="plain loop: append(texts[id])")
            limit = TOKEN_TARGETS["per_call"]
            ax.plot(xs, [limit * y for y in plain], color="gray", linestyle=":",
                    label=f"target: {limit:g}x the plain loop")
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(xs))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x / 1024:.0f}k" if x >= 1024 else f"{x:.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        _plain_y(ax)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        ax.set_title(titles.get(kind, kind), fontsize=9)
        ax.set_xlabel("generation length (tokens)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("median µs per token (one stream)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"Per-token cost - {result['vocabulary']['name']} ({result['vocabulary']['size']:,} ids)")
    return [_save(fig, out, "tokens.png")]
