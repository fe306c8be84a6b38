"""The runtime stands alone: it never imports the compiler, interegular or transformers."""

from __future__ import annotations

import ast
import pathlib

RUNTIME = pathlib.Path(__file__).resolve().parents[1] / "chatparse" / "runtime"
FORBIDDEN = ("chatparse.compiler", "interegular", "transformers")


def _imports(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:  # relative: resolve against chatparse.runtime
                base = ["chatparse", "runtime"][: 3 - node.level] if node.level <= 2 else []
                mod = ".".join(base + ([mod] if mod else []))
            names.add(mod)
    return names


def test_runtime_modules_do_not_import_compiler_interegular_or_transformers():
    files = sorted(RUNTIME.glob("*.py"))
    assert files, "runtime package not found"
    for path in files:
        bad = [m for m in _imports(path) if any(m == f or m.startswith(f + ".") for f in FORBIDDEN)]
        assert not bad, f"{path.name} imports {bad}"


def test_relative_import_resolution_catches_a_compiler_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..compiler import build\n")
    assert "chatparse.compiler" in _imports(probe)
