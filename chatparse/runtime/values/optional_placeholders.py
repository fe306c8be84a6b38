"""Transforms whose entries may be left out: the runtime of the ``optional_placeholders`` format extension.

A field with ``"optional_placeholders": ["id", ...]`` (FORMAT.md, "Extensions") names named groups of its
``open_pattern`` that may not take part in a match (Mistral-Small-3.2 writes ``[CALL_ID]id`` before ``[ARGS]``,
other Mistral v11 models do not). In the base format a placeholder of such a group raises ``KeyError`` (the
name is not in the transform's scope). With the key, when the transform is instantiated:

* a **dict entry** whose value is exactly one placeholder ``{g}`` or ``{g.k...}`` whose root ``g`` is listed
  and not in the scope (its group did not take part, and, with ``transform_each``, the element has no key
  ``g`` either) is left out of the dict; the other entries keep their order;
* everything else is the base transform: a listed placeholder that is in the scope is substituted as usual;
  one that is a list element or the whole transform raises as in the base format; other placeholders,
  constants and errors are unchanged.

Only the standard library (and the base transform) is used.
"""

from __future__ import annotations

from typing import Any, Callable

from .transform import PLACEHOLDER, compile_transform

__all__ = ["compile_optional_transform", "optional_root"]


def optional_root(node: Any, names: frozenset) -> str | None:
    """The root name of `node` when it is exactly one placeholder whose root is in `names`, else None."""
    if isinstance(node, str):
        whole = PLACEHOLDER.fullmatch(node)
        if whole is not None:
            root = whole.group(1).split(".", 1)[0]
            if root in names:
                return root
    return None


def compile_optional_transform(template: Any, names: list) -> Callable[[dict], Any]:
    """A function of the scope instantiating `template` as `transform.compile_transform` does, except that a
    dict entry holding one placeholder of a name in `names` that is not in the scope is left out."""
    optional = frozenset(names)

    def build(node: Any) -> Callable[[dict], Any]:
        if isinstance(node, dict):
            parts = [(key, build(value), optional_root(value, optional)) for key, value in node.items()]

            def make_dict(scope: dict) -> dict:
                return {key: fn(scope) for key, fn, root in parts if root is None or root in scope}
            return make_dict
        if isinstance(node, list):
            items = [build(value) for value in node]
            return lambda scope: [fn(scope) for fn in items]
        return compile_transform(node)

    return build(template)
