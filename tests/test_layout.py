"""The runtime stands alone: it never imports the compiler, the public API built on it (compiled.py,
response_parser.py, cli.py), authoring, integrations, interegular or transformers - not even lazily inside a
function. Every Import/ImportFrom node anywhere in a runtime module counts, relative imports resolved, and so do
``importlib.import_module("...")`` / ``__import__("...")`` calls with a literal name."""

from __future__ import annotations

import ast
import pathlib

RUNTIME = pathlib.Path(__file__).resolve().parents[1] / "chatparse" / "runtime"
PACKAGE = ("chatparse", "runtime")  # the package of every module under RUNTIME
FORBIDDEN = ("chatparse.compiler", "chatparse.compiled", "chatparse.response_parser", "chatparse.cli",
             "chatparse.authoring", "chatparse.integrations", "interegular", "transformers")


def _resolve(module: str | None, level: int) -> str:
    """The absolute name of ``from <level dots><module> import ...`` in a module of `PACKAGE`."""
    if not level:
        return module or ""
    base = list(PACKAGE[: len(PACKAGE) + 1 - level]) if level <= len(PACKAGE) else []
    return ".".join(base + ([module] if module else []))


def _imports(path: pathlib.Path) -> set[str]:
    """Every module name `path` may import: ``import a.b`` gives a.b; ``from a import b`` gives a and a.b (b may
    be a submodule); relative imports are resolved against `PACKAGE`."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(node.module, node.level)
            names.add(mod)
            names.update(f"{mod}.{a.name}" if mod else a.name for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in ("import_module", "__import__"):
                names.add(node.args[0].value)
    return names


def _forbidden(names: set[str]) -> list[str]:
    return sorted(m for m in names if any(m == f or m.startswith(f + ".") for f in FORBIDDEN))


def test_runtime_modules_import_nothing_above_the_runtime():
    files = sorted(RUNTIME.glob("*.py"))
    assert files, "runtime package not found"
    for path in files:
        bad = _forbidden(_imports(path))
        assert not bad, f"{path.name} imports {bad}"


def test_relative_import_resolution_catches_a_compiler_import(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ..compiler import build\n")
    assert "chatparse.compiler" in _imports(probe)


def test_imports_inside_functions_and_submodule_names_are_followed(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ..compiled import CompiledTemplate\n"
                     "class C:\n    def g(self):\n        from .. import response_parser\n"
                     "        import importlib\n        importlib.import_module('chatparse.cli')\n"
                     "        from chatparse import authoring\n        __import__('transformers')\n"
                     "        from .scanner import Scanner\n")
    assert {m for m in _forbidden(_imports(probe)) if m in FORBIDDEN} == {
        "chatparse.authoring", "chatparse.cli", "chatparse.compiled", "chatparse.response_parser", "transformers"}
    assert "chatparse.runtime.stream.scanner" in _imports(probe)
