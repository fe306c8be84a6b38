"""MkDocs hook: the benchmark results (bench/results/*.md and their plots) and bench/PERF_NOTES.md are pages
of the site, read from where the benchmarks write them (no copy under docs/ to go stale)."""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"


def on_files(files, config):
    names = [p.relative_to(BENCH).as_posix() for p in sorted((BENCH / "results").glob("*")) if p.suffix in (".md", ".png")]
    for name in ["PERF_NOTES.md", *names]:
        files.append(File(name, src_dir=str(BENCH), dest_dir=config["site_dir"],
                          use_directory_urls=config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    """The benchmarks write raw outputs into their tables (``calls=[["f", ...]], ...``), where ``][`` would read
    as a Markdown reference link: shown as the characters they are."""
    if Path(page.file.abs_src_path).is_relative_to(BENCH):
        return markdown.replace("][", "]\\[")
    return markdown
