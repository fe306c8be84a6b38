"""Schema-first typing of tool-call arguments (format extension ``argument_types``; FORMAT.md, "Extensions").

With ``"argument_types": "schema"`` on a field and ``tools=`` given, the arguments of each tool call the
field's value holds are typed by the tool's JSON Schema instead of transformers' rule (runtime/coerce.py,
which casts only *string* arguments and never keeps a string that another declared type accepts). The
calls touched, and the arguments looked at, are exactly those the base coercion looks at (a dict whose
``function`` is a dict with a string ``name`` naming a tool with non-empty ``properties``, and a dict
``arguments``; declared keys only; a list of calls element by element). For one argument whose schema
declares the types ``T`` (`coerce.schema_types`: ``type``, ``anyOf``/``oneOf``, ``nullable``; none: left
alone):

* a string: the types are tried in declaration order; ``"string"`` accepts it as it is (so ``"null"``,
  ``"42"``, ``"true"`` stay strings for a string parameter), every other type casts as the base coercion
  casts it (``integer``, ``number``, ``boolean``, ``null``, ``object``, ``array``); the first that accepts
  wins; when none does, the string stays;
* a list, when ``"array"`` is not in ``T`` (xml-inline's ``merge_duplicates``): each element as a value;
* any other value (one the content parser already typed, e.g. JSON's ``42``): kept when it is of one of
  ``T`` (``string``: str; ``integer``: an int or a whole float, not a bool; ``number``: an int or float, not a
  bool; ``boolean``: bool; ``null``: None; ``object``: dict; ``array``: list); otherwise, when ``"string"``
  is in ``T``, replaced by its JSON text (``json.dumps(value, ensure_ascii=False)``: ``42`` -> ``"42"``,
  ``None`` -> ``"null"``, ``{"a": 1}`` -> ``'{"a": 1}'``); otherwise kept.

Without ``tools=`` nothing is typed, as in the base format. Only the standard library and runtime/coerce.py
are imported.
"""

from __future__ import annotations

import json
from typing import Any

from .coerce import _try_cast, schema_types

__all__ = ["type_tool_calls", "schema_coerce", "fit_value"]


def schema_coerce(raw: str, types: tuple) -> Any:
    """A string argument typed schema-first (the module's first rule)."""
    for type_name in types:
        if type_name == "string":
            return raw
        try:
            ok, value = _try_cast(raw, type_name)
        except ValueError:
            continue
        if ok:
            return value
    return raw


def _is_type(value: Any, type_name: str) -> bool:
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "boolean":
        return isinstance(value, bool)
    if type_name == "null":
        return value is None
    if type_name == "object":
        return isinstance(value, dict)
    if type_name == "array":
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    if type_name == "integer":
        return isinstance(value, int) or isinstance(value, float) and value.is_integer()
    if type_name == "number":
        return isinstance(value, (int, float))
    return False


def fit_value(value: Any, types: tuple) -> Any:
    """A value that is not a string, typed schema-first (the module's last rule)."""
    if isinstance(value, str):
        return schema_coerce(value, types)
    if any(_is_type(value, t) for t in types):
        return value
    if "string" in types:
        return json.dumps(value, ensure_ascii=False)
    return value


def type_tool_calls(value: Any, params: dict) -> Any:
    """`coerce.coerce_tool_calls` with the schema-first rules: the same calls, edited in place the same way
    (a list gives a new list of the same call objects)."""
    if isinstance(value, list):
        return [type_tool_calls(item, params) for item in value]
    fn = value.get("function") if isinstance(value, dict) else None
    if not isinstance(fn, dict):
        return value
    name, arguments = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return value
    properties = params.get(name)
    if not properties:
        return value
    for key, argument in arguments.items():
        if key not in properties:
            continue
        types = schema_types(properties[key])
        if not types:
            continue
        if isinstance(argument, list) and "array" not in types:
            arguments[key] = [fit_value(item, types) for item in argument]
        else:
            arguments[key] = fit_value(argument, types)
    return value
