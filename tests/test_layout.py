"""The package's rooms and the direction of their imports (docs/internals/layout.md says why).

Rooms, from the bottom up; a room imports only rooms below it (never one above, so there is no cycle):

1. ``_version``      the version string (a leaf)
2. ``templates``     the bundled templates (JSON files and their lookup)
3. ``runtime``       the engines that parse: one folder each, in their own order, bottom up:
                     ``regex`` < ``values`` < ``tables`` < ``stream`` < ``oneshot`` < ``tokens``
4. ``compiler``      template -> tables, tokenizer -> token tables (reads runtime for the shared types)
5. ``export``        a compiled template as a constrained-decoding grammar
6. ``api``           ``chatparse/__init__.py``, ``compiled.py``, ``tokenizer_dir.py``: the public API
7. ``data``          datasets: pyarrow columns, files of generations, the table cache
8. ``integrations``  vLLM, transformers, Ray
9. ``authoring``     checks, drawings and round trips of a template being written
10. ``cli``          the ``chatparse`` command

Besides the order: the runtime imports nothing of chatparse outside ``runtime/``, nor interegular or
transformers, not even lazily; every runtime engine is a folder; the few modules left at an old path are
aliases of the module that moved (``KEPT_PATHS``), nothing else.

Every Import/ImportFrom node anywhere in a module counts (inside functions too), relative imports resolved,
and so do ``importlib.import_module("...")`` / ``__import__("...")`` calls with a literal name.
"""

from __future__ import annotations

import ast
import pathlib

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[1] / "chatparse"
ORDER = ("_version", "templates", "runtime", "compiler", "export", "api", "data", "integrations", "authoring",
         "cli")
ENGINES = ("regex", "values", "tables", "stream", "oneshot", "tokens")  # runtime/'s folders, bottom up
API_MODULES = ("compiled", "tokenizer_dir")  # the top-level modules of the api room (with __init__.py)
# Old paths the documentation names, kept as aliases of the moved module (``sys.modules[__name__] = ...``).
KEPT_PATHS = {
    "chatparse.arrow": "chatparse.data.arrow",
    "chatparse.runtime.extensions": "chatparse.runtime.values.extensions",
    "chatparse.runtime.lean_regions": "chatparse.runtime.oneshot.lean_regions",
    "chatparse.runtime.loader": "chatparse.runtime.tables.loader",
    "chatparse.runtime.stream_kernels": "chatparse.runtime.tokens.kernels",
}
RUNTIME_FORBIDDEN_THIRD_PARTY = ("interegular", "transformers")


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: pathlib.Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve(package: str, module: str | None, level: int) -> str:
    """The absolute name of ``from <level dots><module> import ...`` in a module of `package`."""
    if not level:
        return module or ""
    base = package.split(".")
    base = base[: len(base) + 1 - level] if level <= len(base) else []
    return ".".join(base + ([module] if module else []))


def _imports(path: pathlib.Path, package: str | None = None) -> set[str]:
    """Every module name `path` may import: ``import a.b`` gives a.b; ``from a import b`` gives a and a.b (b may
    be a submodule); relative imports are resolved against `package` (by default the file's own)."""
    package = package if package is not None else _package_of(path)
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(package, node.module, node.level)
            names.add(mod)
            names.update(f"{mod}.{a.name}" if mod else a.name for a in node.names if a.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            f = node.func
            called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if called in ("import_module", "__import__"):
                names.add(node.args[0].value)
    return names


def _modules() -> dict[str, pathlib.Path]:
    return {_module_name(p): p for p in sorted(PACKAGE_DIR.rglob("*.py")) if "__pycache__" not in p.parts}


def _room(name: str) -> str | None:
    """The room of module (or imported name) `name`; None outside chatparse."""
    parts = name.split(".")
    if parts[0] != "chatparse":
        return None
    if len(parts) == 1:
        return "api"
    head = parts[1]
    if (PACKAGE_DIR / head).is_dir():
        return head
    if head == "_version":
        return "_version"
    return "api"  # compiled, tokenizer_dir, or a name of the package itself (chatparse.bind, __version__)


def _engine(name: str) -> str | None:
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["chatparse", "runtime"] and parts[2] in ENGINES else None


def _edges():
    """(importer, imported) pairs between modules of chatparse, kept-path aliases left out."""
    for mod, path in _modules().items():
        if mod in KEPT_PATHS:
            continue
        for name in sorted(_imports(path)):
            if _room(name) is not None and name not in KEPT_PATHS:
                yield mod, name


def test_every_runtime_engine_is_a_folder():
    runtime = PACKAGE_DIR / "runtime"
    for engine in ENGINES:
        assert (runtime / engine / "__init__.py").is_file(), f"runtime/{engine}/ is not a package"
    loose = sorted(_module_name(p) for p in runtime.glob("*.py") if p.name != "__init__.py")
    assert loose == sorted(k for k in KEPT_PATHS if k.startswith("chatparse.runtime.")), \
        f"modules directly in runtime/ that are no kept path: {loose}"
    folders = sorted(p.name for p in runtime.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(ENGINES), f"runtime/ holds {folders}; the engines are {ENGINES}"


def test_kept_paths_are_aliases_only():
    """A kept path holds no code: a docstring, imports, and ``sys.modules[__name__] = <the moved module>``."""
    modules = _modules()
    for old, new in KEPT_PATHS.items():
        path = modules[old]
        body = ast.parse(path.read_text()).body
        kinds = [type(n).__name__ for n in body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        assert kinds == ["Import", "ImportFrom", "Assign"], f"{path} is more than an alias: {kinds}"
        assert new in _imports(path), f"{path} does not alias {new}"


def test_runtime_imports_nothing_outside_the_runtime():
    bad = []
    for mod, path in _modules().items():
        if not mod.startswith("chatparse.runtime"):
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            if top in RUNTIME_FORBIDDEN_THIRD_PARTY or (top == "chatparse" and not name.startswith("chatparse.runtime")):
                bad.append(f"{mod} imports {name}")
    assert not bad, "\n".join(sorted(bad))


def test_runtime_engines_import_only_engines_below_them():
    bad = []
    for mod, name in _edges():
        a, b = _engine(mod), _engine(name)
        if a and b and ENGINES.index(b) > ENGINES.index(a):
            bad.append(f"runtime/{a} -> runtime/{b}: {mod} imports {name}")
    assert not bad, "\n".join(sorted(bad))


def test_compiler_imports_nothing_above_it():
    allowed = set(ORDER[: ORDER.index("compiler") + 1])
    bad = [f"{mod} imports {name} ({_room(name)})" for mod, name in _edges()
           if _room(mod) == "compiler" and _room(name) not in allowed]
    assert not bad, "\n".join(sorted(bad))


def test_rooms_import_only_rooms_below_them():
    """Every arrow between rooms points down ORDER, so the rooms form no cycle."""
    modules = _modules()
    rooms = {_room(m) for m in modules if m not in KEPT_PATHS}
    assert rooms <= set(ORDER), f"rooms not in ORDER: {sorted(rooms - set(ORDER))} (place them in the docstring)"
    top_level = sorted(m for m in modules if m.count(".") == 1 and _room(m) == "api" and m not in KEPT_PATHS)
    assert top_level == sorted(f"chatparse.{m}" for m in API_MODULES), f"loose top-level modules: {top_level}"
    bad = []
    for mod, name in _edges():
        a, b = _room(mod), _room(name)
        if ORDER.index(b) > ORDER.index(a):
            bad.append(f"{a} -> {b}: {mod} imports {name}")
    assert not bad, "upward imports:\n" + "\n".join(sorted(bad))


def test_an_upward_import_inside_a_function_is_caught(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from ...compiled import CompiledTemplate\n"
                     "class C:\n    def g(self):\n        from ... import tokenizer_dir\n"
                     "        import importlib\n        importlib.import_module('chatparse.cli')\n"
                     "        __import__('transformers')\n        from ..stream.scanner import Scanner\n")
    names = _imports(probe, package="chatparse.runtime.tables")
    assert {"chatparse.compiled", "chatparse.tokenizer_dir", "chatparse.cli", "transformers",
            "chatparse.runtime.stream.scanner"} <= names
    assert {_room(n) for n in names if _room(n)} == {"api", "cli", "runtime"}
    assert _engine("chatparse.runtime.stream.scanner") == "stream"
    assert _room("chatparse.data.arrow") == "data" and _room("chatparse.__version__") == "api"
