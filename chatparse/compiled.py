"""Compiled templates: validate and compile once, parse many times.

`compile_template` is the one entry point from a template dict to runtime tables. Results are cached by the
template's canonical JSON, so passing the same dict to `parse_response` a million times compiles it once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from .runtime.tables import Tables

_CACHE_SIZE = 64
_cache: "OrderedDict[str, CompiledTemplate]" = OrderedDict()
_lock = threading.Lock()


class CompiledTemplate:
    """A response template compiled to tables. Accepted wherever a template dict is."""

    def __init__(self, spec: dict, raw_tables: dict):
        self.spec = spec
        self.raw_tables = raw_tables
        self.tables = Tables(raw_tables)

    @property
    def template(self) -> dict:
        """The normalized template this was compiled from."""
        return self.spec

    def parse(self, text: str, *, prefix: Any = None, tools=None) -> dict:
        return _api().parse_response(text, self, prefix=prefix, tools=tools)

    def parser(self, prefix: Any = None, *, tools=None):
        return _api().ResponseParser(self, prefix=prefix, tools=tools)

    def parse_batch(self, texts: list[str], prefixes: Any = None, *, tools=None) -> list[dict]:
        """Parse many outputs. `prefixes` is one prefix for all, or a list matching `texts` one to one."""
        if prefixes is None:
            raise ValueError('parse_batch requires `prefixes` (a prefix for all items or one per item); '
                             'pass "" to opt out explicitly')
        if isinstance(prefixes, str):
            prefixes = [prefixes] * len(texts)
        elif len(prefixes) != len(texts):
            raise ValueError(f"parse_batch got {len(prefixes)} prefixes for {len(texts)} texts")
        return [self.parse(t, prefix=p, tools=tools) for t, p in zip(texts, prefixes)]

    def __reduce__(self):
        """Pickle through the table format (small, no code objects, validated on load)."""
        from .compiler.writer import compiled_reduce

        return compiled_reduce(self)

    def __repr__(self) -> str:
        names = [f["name"] for f in self.spec["fields"]]
        return f"<CompiledTemplate fields={names}>"


def _api():
    """`chatparse.response_parser` (it imports this module, so it is looked up on first use, then kept)."""
    global _API
    if _API is None:
        from . import response_parser

        _API = response_parser
    return _API


_API = None


def compile_template(template: Any) -> CompiledTemplate:
    """Validate `template` (same rules and errors as transformers) and compile it, cached."""
    if isinstance(template, CompiledTemplate):
        return template
    # Imported here so that loading precompiled tables never imports the compiler.
    from .compiler.build import build_tables
    from .compiler.validate import canonical_json, load_template

    spec = load_template(template)
    key = canonical_json(spec)
    with _lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return hit
    compiled = CompiledTemplate(spec, build_tables(spec))
    with _lock:
        _cache[key] = compiled
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return compiled
