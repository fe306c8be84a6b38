"""Running the JavaScript runtime (js/chatparse.mjs) from a test: many inputs through one node process, and the
comparison of what it returns with what Python returns.

JavaScript has one number type, a double, so ``1.0`` comes back as ``1`` and an integer beyond 2**53 as the
nearest double; non-finite floats cannot be written as JSON; and a JavaScript object lists its array-index keys
("0", "7") first, ascending, whatever order they were set in (a limit of the JS runtime's plain objects, stated
in docs/other-languages.md). `same_as_js` compares a Python result with a JavaScript one under exactly those differences
and no others (the order of other keys, value types and error text must all agree).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")


def run_js_map(tmp_path: Path, call: str, inputs: list, *, imports: str, tables: bytes | None = None) -> list[dict]:
    """Each input through ``call`` (a JavaScript expression of the input ``x``, and of ``tables`` when a table
    file's bytes are given) in one node process: ``{"ok": value}`` or ``{"error": [exception class, message]}``
    per input, in order. Non-finite numbers come back as their ``String()`` ("NaN", "Infinity")."""
    assert NODE is not None, "node is not installed: the caller skips first"
    args = [str(tmp_path / "inputs.json"), str(tmp_path / "out.json")]
    (tmp_path / "inputs.json").write_text(json.dumps(inputs), encoding="utf-8")
    if tables is not None:
        (tmp_path / "t.cpt").write_bytes(tables)
        args.append(str(tmp_path / "t.cpt"))
    script = (f"import {{ {imports} }} from {json.dumps((ROOT / 'js' / 'chatparse.mjs').as_uri())};\n"
              "import { readFileSync, writeFileSync } from 'node:fs';\n"
              + ("const tables = loadTables(readFileSync(process.argv[4]));\n" if tables is not None else "")
              + "const out = JSON.parse(readFileSync(process.argv[2], 'utf8')).map((x) => {\n"
              f"  try {{ return {{ ok: {call} }}; }} catch (e) {{ return {{ error: [e.pyType ?? e.name, e.message] }}; }}\n"
              "});\n"
              "writeFileSync(process.argv[3], JSON.stringify(out, (k, v) => typeof v === 'number' && "
              "!Number.isFinite(v) ? String(v) : v));\n")
    (tmp_path / "run.mjs").write_text(script, encoding="utf-8")
    proc = subprocess.run([NODE, str(tmp_path / "run.mjs"), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert len(out) == len(inputs)
    return out


def run_py_map(function, inputs: list, errors: tuple = (ValueError, KeyError, TypeError)) -> list[dict]:
    """`run_js_map`'s shape for a Python function: ``{"ok": value}`` or ``{"error": [class, message]}``."""
    out = []
    for x in inputs:
        try:
            out.append({"ok": function(x)})
        except errors as e:
            out.append({"error": [type(e).__name__, str(e)]})
    return out


def js_view(v):
    """A Python value as `run_js_map` writes it: non-finite floats as their JavaScript ``String()``, a dict's
    array-index keys first, ascending."""
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, list):
        return [js_view(x) for x in v]
    if isinstance(v, dict):
        index = sorted((k for k in v if re.fullmatch(r"0|[1-9][0-9]*", k) and int(k) < 2**32 - 1), key=int)
        return {k: js_view(v[k]) for k in index + [k for k in v if k not in index]}
    return v


def same_as_js(py, js) -> bool:
    """Whether a Python result (`run_py_map`'s shape) is what `run_js_map` gave: numbers equal as doubles
    whatever their Python type, bools never equal to numbers, dict keys in the same order (array-index keys
    first), everything else equal and of the same type."""
    a, b = js_view(py), js
    if isinstance(a, (int, float)) and not isinstance(a, bool):
        return isinstance(b, (int, float)) and not isinstance(b, bool) and float(a) == float(b)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(same_as_js, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same_as_js(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b
