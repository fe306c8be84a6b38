"""A disk cache of compiled tables (table-format bytes), so that `chatparse parse-file` run after run on the
same template skips the compiler (about 0.4 CPU-seconds and a 160 MB process for a bundled template).

`cached_table_bytes(template, make)` returns the bytes from the cache when an entry for `template` is there
and loads (`runtime.loader.compiled_from_bytes` validates it), else ``make()``'s bytes, which it then stores.
The key is the SHA-256 of the template's JSON (its key order kept: a transform's is the output's) with
everything that shapes the tables: the source of chatparse's compiler and runtime, the Python version (its
Unicode tables) and the `regex` version. So an edited compiler, another Python or another template never meets
an old entry; an entry that fails to load (a truncated write, a bit flip) is made again.

Only templates known as JSON data are cached: a bundled template's name, a dict, a JSON file (a response
template or a tokenizer_config.json holding one). Anything else (table bytes or a .cpt file, which need no
compiling; a tokenizer directory) is made by ``make()`` every time.

Where: ``$CHATPARSE_TABLE_CACHE`` if set (an empty value turns the cache off), else
``$XDG_CACHE_HOME/chatparse/tables`` (``~/.cache/chatparse/tables``). A cache that cannot be written (a
read-only home) only means no cache: the bytes are still returned.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["cache_dir", "cache_key", "cached_table_bytes"]

_source_digest: str | None = None


def cache_dir() -> Path | None:
    """The cache directory, or None when ``CHATPARSE_TABLE_CACHE`` is set empty (the cache is off)."""
    env = os.environ.get("CHATPARSE_TABLE_CACHE")
    if env is not None:
        return Path(env) if env else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "chatparse" / "tables"


def _digest_of_code() -> str:
    """SHA-256 over the compiler's and runtime's source files (names and bytes), Python's version and
    `regex`'s: what the table bytes of a template depend on besides the template (a few ms, once)."""
    global _source_digest
    if _source_digest is None:
        import regex

        root = Path(__file__).resolve().parents[1]  # (the chatparse package)
        h = hashlib.sha256(f"{sys.version}\0{regex.__version__}\0".encode())
        for path in sorted(p for d in ("compiler", "runtime") for p in (root / d).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode() + b"\0")
            h.update(path.read_bytes())
        for name in ("_version.py", "compiled.py", "data/table_cache.py"):
            h.update((root / name).read_bytes())
        _source_digest = h.hexdigest()
    return _source_digest


def _template_dict(template: Any):
    """The template as JSON data if it is known as such (module docstring), else None. Never raises: a
    template that is not valid is left to ``make()``, whose error names what is wrong."""
    if isinstance(template, dict):
        return template
    if isinstance(template, os.PathLike):
        template = os.fspath(template)
    if not isinstance(template, str):
        return None
    from .. import templates

    if templates.is_name(template):
        return templates.by_name(template)
    path = Path(template)
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(obj, dict) and "response_template" in obj:
        obj = obj["response_template"]
    return obj if isinstance(obj, dict) else None


def cache_key(template: Any) -> str | None:
    """The cache key of `template` (hex), or None where it is not cached."""
    obj = _template_dict(template)
    if obj is None:
        return None
    try:
        # (key order kept, not sorted: a transform's key order is the order of the output's keys)
        canonical = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(f"{_digest_of_code()}\0{canonical}".encode("utf-8", "surrogatepass")).hexdigest()


def cached_table_bytes(template: Any, make: Callable[[], bytes]) -> bytes:
    """`template`'s table bytes: from the cache when there and loadable, else ``make()``'s (then stored)."""
    folder = cache_dir()
    key = None if folder is None else cache_key(template)
    if key is None:
        return make()
    path = folder / f"{key}.cpt"
    try:
        data = path.read_bytes()
    except OSError:
        data = None
    if data is not None:
        from ..runtime.tables.loader import compiled_from_bytes

        try:
            compiled_from_bytes(data)
            return data
        except Exception:  # noqa: BLE001 - a damaged entry, whatever the loader says: made again below
            pass
    data = make()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        pass  # no cache here; the bytes are still good
    return data
