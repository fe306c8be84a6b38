"""Compiled templates: validate and compile once, parse many times.

`compile_template` is the one entry point from a template dict to runtime tables. Results are cached by the
template's canonical JSON, so passing the same dict to `parse_response` a million times compiles it once.
The same dict object passed again unchanged (compared strictly with a copy taken when it was compiled) skips
even the validation and the canonical JSON, which cost about as much as a short parse.
"""

from __future__ import annotations

import json

import threading
from collections import OrderedDict
from copy import deepcopy
from typing import Any

from .runtime.tables.template import RuntimeTemplate, register_template_class
from .template_objects import is_template_object, to_template_dict

_CACHE_SIZE = 64
_cache: "OrderedDict[str, CompiledTemplate]" = OrderedDict()
_lock = threading.Lock()
# id(template) -> (the template object, a copy of its content or None, its compiled template): `_remember`
_by_id: dict[int, tuple[Any, Any, "CompiledTemplate"]] = {}


class CompiledTemplate(RuntimeTemplate):
    """A response template compiled to tables. Accepted wherever a template dict is.

    The data (``spec``, ``raw_tables``, ``tables``, ``template``) is the runtime's `RuntimeTemplate`; this adds
    the public API's parse methods and pickling through the table format."""

    def parse(self, text: str, *, prefix: Any = None, tools=None, dialect=None, malformed=None) -> dict:
        """`chatparse.parse_response` with this template (``dialect``/``malformed`` as there)."""
        if dialect is None and malformed is None:
            return (_API or _api()).parse_compiled(self, text, prefix, tools)
        return _api().parse_response(text, self, prefix=prefix, tools=tools, dialect=dialect, malformed=malformed)

    def parser(self, prefix: Any = None, *, tools=None, dialect=None, offsets=None, malformed=None):
        """`chatparse.ResponseParser` with this template (``dialect``, ``offsets``, ``malformed`` as there)."""
        return _api().ResponseParser(self, prefix=prefix, tools=tools, dialect=dialect, offsets=offsets,
                                     malformed=malformed)

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

    def grammar(self, tools=None, *, tool_choice="auto", format="lark", prefix=None):
        """This template's outputs as a constrained-decoding grammar (`chatparse.compiler.grammar.export`):
        ``format="lark"`` (llguidance) or ``"structural_tag"`` (xgrammar, as vLLM passes it); tool calls
        limited to ``tools`` and their JSON Schemas, ``tool_choice`` "none"/"auto"/"required"/a tool name;
        ``prefix`` (the prompt) sets the region the output starts in. Returns an `ExportedGrammar`
        (``.text``, ``.approximated``)."""
        from .compiler.grammar import export

        return export(self, tools, tool_choice=tool_choice, format=format, prefix=prefix)

    def __reduce__(self):
        """Pickle through the table format (small, no code objects, validated on load)."""
        from .compiler.writer import compiled_reduce

        return compiled_reduce(self)

    @staticmethod
    def convert_tools(tools) -> list:
        """transformers' conversion of Python tools to JSON schemas (for bindings built from token tables)."""
        return _api()._tool_schemas(tools)


register_template_class(CompiledTemplate)  # what the runtime's loader builds (`compiled_from_bytes`)


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
    if isinstance(template, RuntimeTemplate):
        if isinstance(template, CompiledTemplate):
            return template
        return CompiledTemplate(template.spec, template.raw_tables)
    if is_template_object(template):  # vLLM's (or transformers') pre-loaded ResponseTemplate
        template = to_template_dict(template)
    seen = _by_id.get(id(template))
    if seen is not None and seen[0] is template and seen[1] is not None and _same(template, seen[1]):
        return seen[2]
    # Imported here so that loading precompiled tables never imports the compiler.
    from .compiler.build import build_tables
    from .compiler.validate import load_template

    spec = load_template(template)
    # Keyed by the spec with its key order (not `canonical_json`, which sorts keys): the order of a transform's
    # keys is the order of the output's, so two templates differing only in it compile apart
    key = json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
    with _lock:
        compiled = _cache.get(key)
        if compiled is not None:
            _cache.move_to_end(key)
    if compiled is None:
        compiled = CompiledTemplate(spec, build_tables(spec))
        with _lock:
            _cache[key] = compiled
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)
    _remember(template, compiled)
    return compiled


def _remember(template: Any, compiled: "CompiledTemplate") -> None:
    """Keep `template` (so its id stays its own). The second time the same object is compiled, keep a copy of
    its content too, when that content is plain JSON data `_same` can compare: from then on an unchanged
    object skips validation. (Copying at the first sighting would slow down callers that build a new dict
    for every call.)"""
    seen = _by_id.get(id(template))
    snapshot = None
    if seen is not None and seen[0] is template:
        try:
            snapshot = deepcopy(template)
        except Exception:  # noqa: BLE001 - content that cannot be copied is simply not remembered
            snapshot = None
        if snapshot is not None and not _same(template, snapshot):
            snapshot = None
    with _lock:
        if len(_by_id) >= _CACHE_SIZE:
            _by_id.clear()
        _by_id[id(template)] = (template, snapshot, compiled)


def _same(a: Any, b: Any) -> bool:
    """`a` and `b` are the same JSON data: same types (True is not 1, a tuple is not a list), same values,
    same key order. Anything else is never the same."""
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if len(a) != len(b):
            return False
        for (ka, va), (kb, vb) in zip(a.items(), b.items()):
            if type(ka) is not str or type(kb) is not str or ka != kb or not _same(va, vb):
                return False
        return True
    if t is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if t is str or t is int or t is bool or t is float or a is None:
        return a == b
    return False
