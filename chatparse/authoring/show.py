"""Draw the compiled delimiter automata as Graphviz DOT (and SVG through the `dot` program).

One cluster per parser mode - mode 0 watches every explicit open and the implicit field's close, mode ``1+i``
watches field i's close - drawn from the tables the runtime executes (`CompiledTemplate.raw_tables`):

* nodes are DFA states (the dead state 0 is left out: an edge that is not drawn leads to it);
* edges carry the characters that take them, as regex-like classes (``'<'``, ``[a-z]``, ``\\s``, ``[^<]``);
  a dashed ``EOT`` edge is the end-of-text step taken at finalize;
* a double circle is an accepting state, labelled with every delimiter a match of which ends there
  (``tool_calls open``; ``-1`` when the match ends one character back, as ``$`` before a final newline);
* a grey state is *decided*: no further input can change the outcome of the attempt;
* ``start`` arrows mark the start states (``start@0`` when an attempt at offset 0 differs, e.g. for ``^``).
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from .checks import describe_ranges

__all__ = ["to_dot", "to_svg", "GraphvizMissing", "mode_titles"]


class GraphvizMissing(RuntimeError):
    pass


def _q(text: str) -> str:
    """A DOT double-quoted string; real newlines become DOT line breaks."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def mode_titles(compiled) -> list[str]:
    spec = compiled.spec
    fields = spec["fields"]
    pats = compiled.raw_tables["patterns"]
    titles = []
    for mi, mode in enumerate(compiled.raw_tables["modes"]):
        watched = ", ".join(f"{fields[pats[p]['field']]['name']} {pats[p]['kind']}" for p in mode["patterns"])
        if mi == 0:
            where = "outside any explicit region" + (f" (implicit field '{spec['implicit']}')"
                                                     if spec["implicit"] else "")
        else:
            where = f"inside '{fields[mi - 1]['name']}'"
        titles.append(f"mode {mi}: {where}; watches: {watched or 'nothing'}")
    return titles


def to_dot(template: Any, mode: int | None = None) -> str:
    """The automata of `template` (a dict or `CompiledTemplate`) as one DOT digraph, or only mode `mode`."""
    from chatparse.compiled import compile_template

    compiled = compile_template(template)
    raw = compiled.raw_tables
    n_modes = len(raw["modes"])
    if mode is not None and not 0 <= mode < n_modes:
        raise ValueError(f"mode {mode} does not exist: this template has modes 0..{n_modes - 1}")
    class_starts = [int(x) for x in raw["class_starts"]]
    class_ids = [int(x) for x in raw["class_ids"]]
    ends = class_starts[1:] + [0x110000]
    intervals: dict = {}
    for lo, hi, c in zip(class_starts, ends, class_ids):
        intervals.setdefault(c, []).append((lo, hi - 1))
    fields = compiled.spec["fields"]
    pats = raw["patterns"]
    titles = mode_titles(compiled)
    out = ["digraph chatparse {", "  rankdir=LR;", '  node [shape=circle, fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=9];']
    for mi in range(n_modes) if mode is None else [mode]:
        m = raw["modes"][mi]
        trans, acc, term, eot = m["trans"].tolist(), m["acc"].tolist(), m["term"].tolist(), m["eot"].tolist()
        watch = m["patterns"]
        p = f"m{mi}_"
        out.append(f"  subgraph cluster_mode{mi} {{")
        out.append(f"    label={_q(titles[mi])};")
        out.append('    labeljust="l";')
        s0, sn = int(m["start0"]), int(m["startN"])
        if not watch or (s0 == 0 and sn == 0):
            out.append(f"    {p}none [shape=plaintext, label={_q('no delimiter watched: the region runs to the end')}];")
            out.append("  }")
            continue
        for sid in range(1, len(trans)):
            attrs = [f"label={_q(_state_label(sid, acc[sid], watch, pats, fields))}"]
            if any(code >= 0 for code in acc[sid]):
                attrs.append("shape=doublecircle")
            if term[sid]:
                attrs.append('style=filled, fillcolor="#dddddd"')
            out.append(f"    {p}s{sid} [{', '.join(attrs)}];")
        if s0 == sn:
            out.append(f'    {p}start [shape=point, label=""];')
            out.append(f'    {p}start -> {p}s{sn} [label="start"];')
        else:
            if sn:
                out.append(f'    {p}start [shape=point, label=""];')
                out.append(f'    {p}start -> {p}s{sn} [label="start"];')
            if s0:
                out.append(f'    {p}start0 [shape=point, label=""];')
                out.append(f'    {p}start0 -> {p}s{s0} [label="start@0"];')
        for sid in range(1, len(trans)):
            groups: dict = {}
            for c, t in enumerate(trans[sid]):
                if t:
                    groups.setdefault(t, []).append(c)
            for t, classes in sorted(groups.items()):
                ranges = sorted(iv for c in classes for iv in intervals.get(c, []))
                out.append(f"    {p}s{sid} -> {p}s{t} [label={_q(_ranges_label(ranges))}];")
            if eot[sid]:
                out.append(f'    {p}s{sid} -> {p}s{eot[sid]} [label="EOT", style=dashed];')
        out.append("  }")
    out.append("}")
    return "\n".join(out) + "\n"


def _state_label(sid: int, acc_row, watch, pats, fields) -> str:
    parts = [str(sid)]
    for local, code in enumerate(acc_row):
        if code >= 0:
            pat = pats[watch[local]]
            parts.append(f"{fields[pat['field']]['name']} {pat['kind']}" + (" -1" if code == 1 else ""))
    return "\n".join(parts)


def _ranges_label(ranges) -> str:
    from chatparse.compiler.charsets import normalize

    return describe_ranges(normalize(ranges), limit=40)


def to_svg(dot_text: str) -> str:
    """Lay `dot_text` out with Graphviz' `dot`. Raises GraphvizMissing when `dot` is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizMissing("the Graphviz `dot` program is not installed, so SVG cannot be drawn; install it "
                              "with `apt-get install graphviz` (or use --format dot and render the DOT elsewhere)")
    proc = subprocess.run([exe, "-Tsvg"], input=dot_text.encode("utf-8"), capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"dot failed: {proc.stderr.decode('utf-8', 'replace').strip()}")
    return proc.stdout.decode("utf-8")
