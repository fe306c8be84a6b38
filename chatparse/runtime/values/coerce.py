"""Tool-argument coercion: cast string tool-call arguments to the types their JSON Schema declares.

Mirrors transformers 5.23.0 (``ResponseParser._coerce_tool_calls``, ``_coerce``, ``_schema_types``):

* only values shaped like a tool call are touched: a dict whose ``function`` is a dict with a string
  ``name`` naming a known tool (with a non-empty ``properties``) and a dict ``arguments``; a list is handled
  element by element;
* only *string* arguments of *declared* keys are cast; already-typed values and undeclared keys stay;
* a list argument for a parameter whose types do not include ``array`` (``merge_duplicates`` output) is
  cast element-wise, leaving non-string elements alone;
* union types are tried in declaration order and the first successful cast wins; a failed cast (and the
  ``string`` type) keeps the raw text.

Callables in ``tools`` are not handled here: the API layer converts them to schemas first.
Only the standard library (and `args`, for the check of `tools`) is imported.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .args import check_tools

__all__ = ["cast_first", "coerce", "coerce_tool_calls", "known_call", "schema_types", "tool_params"]

_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def schema_types(schema: Any) -> tuple:
    """The JSON-Schema type names a parameter schema allows, in declaration order.

    A ``type`` string gives one name, a ``type`` list its string members; ``anyOf`` then ``oneOf``
    branches are flattened recursively; a truthy ``nullable`` adds ``"null"`` if absent (this is how
    ``get_json_schema`` marks ``Optional``). A non-dict schema, or one without types, gives ``()``,
    which means "never cast"."""
    if not isinstance(schema, dict):
        return ()
    declared = schema.get("type")
    names: list = []
    if isinstance(declared, str):
        names.append(declared)
    elif isinstance(declared, list):
        names.extend(name for name in declared if isinstance(name, str))
    for union_key in ("anyOf", "oneOf"):
        for branch in schema.get(union_key) or []:
            names.extend(schema_types(branch))
    if schema.get("nullable") and "null" not in names:
        names.append("null")
    return tuple(names)


def _try_cast(raw: str, type_name: str) -> tuple[bool, Any]:
    """One cast attempt: ``(True, value)`` on success, ``(False, None)`` when ``type_name`` does not
    apply. Raises ``ValueError`` for unparsable text (the caller treats that as "does not apply")."""
    if type_name == "integer":
        try:
            return True, int(raw)
        except ValueError:
            number = float(raw)  # whole numbers written as floats ("3.0") are JSON-Schema integers
            return (True, int(number)) if number.is_integer() else (False, None)
    if type_name == "number":
        number = float(raw)
        if math.isnan(number) or math.isinf(number):
            return False, None  # not valid JSON numbers
        # Text without a fractional point keeps an int ("2" -> 2, "1e3" -> 1000).
        return True, (int(number) if number.is_integer() and "." not in raw else number)
    if type_name == "boolean":
        word = raw.strip().lower()
        return (True, _BOOL_TEXT[word]) if word in _BOOL_TEXT else (False, None)
    if type_name == "null":
        return (True, None) if raw.strip() in ("null", "None") else (False, None)
    if type_name in ("object", "array"):
        decoded = json.loads(raw)
        wanted = dict if type_name == "object" else list
        return (True, decoded) if isinstance(decoded, wanted) else (False, None)
    return False, None  # "string" and unknown type names never cast


def cast_first(raw: str, types: tuple, keep_string: bool = False) -> tuple[bool, Any]:
    """``(True, value)``: ``raw`` cast to the first of ``types`` that accepts it (with `keep_string`,
    ``"string"`` accepts it as it is); ``(False, None)`` when none does.

    ``ValueError`` s from a cast (including ``json.JSONDecodeError``) mean "try the next type"; nothing
    else is swallowed, as in the reference."""
    for type_name in types:
        if keep_string and type_name == "string":
            return True, raw
        try:
            ok, value = _try_cast(raw, type_name)
        except ValueError:
            continue
        if ok:
            return True, value
    return False, None


def coerce(raw: str, types: tuple) -> Any:
    """Cast ``raw`` to the first of ``types`` that accepts it (`cast_first`); return ``raw`` unchanged if none
    does."""
    ok, value = cast_first(raw, types)
    return value if ok else raw


def tool_params(tools: Any) -> dict:
    """Map tool name -> its parameter ``properties`` dict (``{}`` when absent or not a dict).

    Accepts OpenAI-style ``{"type": "function", "function": {...}}`` entries and bare
    ``{"name", "parameters"}`` dicts; entries without a string name, and non-dicts, are skipped.
    A later tool with the same name replaces an earlier one. ``None`` means no tools; anything but a list
    (or tuple) is a TypeError naming `tools`."""
    check_tools(tools)
    params: dict = {}
    for tool in tools or []:
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function", tool)
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        parameters = fn.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, dict) else None
        params[fn["name"]] = properties if isinstance(properties, dict) else {}
    return params


def known_call(value: Any, params: dict) -> tuple | None:
    """``(arguments, properties)`` of `value` when it is a tool call (``{"function": {"name": str, "arguments":
    dict}}``) to a tool of `params` that has properties, else None: what the argument typings edit."""
    fn = value.get("function") if isinstance(value, dict) else None
    if not isinstance(fn, dict):
        return None
    name, arguments = fn.get("name"), fn.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    properties = params.get(name)
    return (arguments, properties) if properties else None


def coerce_tool_calls(value: Any, params: dict) -> Any:
    """Cast the arguments of a tool call (or of each call in a list) in place.

    A dict is edited in place and returned as the same object; anything not shaped like a call to a
    known tool is returned untouched. A list is handled element by element and, exactly like the
    reference, the result is a *new* list holding the same (edited) element objects."""
    if isinstance(value, list):
        return [coerce_tool_calls(item, params) for item in value]
    call = known_call(value, params)
    if call is None:
        return value
    arguments, properties = call
    for key, argument in arguments.items():
        if key not in properties:
            continue
        types = schema_types(properties[key])
        if not types:
            continue
        if isinstance(argument, str):
            arguments[key] = coerce(argument, types)
        elif isinstance(argument, list) and "array" not in types:
            arguments[key] = [coerce(item, types) if isinstance(item, str) else item for item in argument]
    return value
