"""Schema-first typing of tool-call arguments (format extension ``argument_types``; FORMAT.md, "Extensions").

With ``"argument_types": "schema"`` on a field and ``tools=`` given, the arguments of each tool call the
field's value holds are typed by the tool's JSON Schema, in the schema's declaration order, instead of
transformers' rule (runtime/values/coerce.py: only *string* arguments are cast, and a string is never kept while
another declared type accepts it). The calls touched, and the arguments looked at, are exactly those the
base coercion looks at (a dict whose ``function`` is a dict with a string ``name`` naming a tool with
non-empty ``properties``, and a dict ``arguments``; declared keys only; a list of calls element by element).

An argument's *text*: when the field's content parser is ``xml-inline`` or ``kv-lines`` with a
``value_parser``, the region is also made without the value parser (same steps, same transform; see
`schema_typer`), and where that gives a call at the same place with the same argument keys in the same order,
the text of an argument is its value there: the characters the model wrote, before the value parser
guessed a type. Otherwise an argument has no text. For one argument whose schema declares the types ``T``
(`coerce.schema_types`: ``type``, ``anyOf``/``oneOf``, ``nullable``; none: left alone):

* a string ``s``: the types of ``T`` in order; ``"string"`` accepts ``s`` as it is (so ``"null"``, ``"42"``,
  ``"true"`` stay strings for a string parameter); ``integer``, ``number``, ``boolean``, ``null``,
  ``object``, ``array`` cast ``s`` as the base coercion casts strings; the first that accepts wins; when
  none does, ``s`` stays;
* another value ``v`` with a text ``t`` (a string): the same, on ``t`` (``"string"`` gives ``t``: the JSON
  guess ``10`` of the text ``10`` becomes ``"10"``, of ``1.50`` becomes ``"1.50"``); when no type accepts
  ``t``, ``v`` stays;
* another value ``v`` without a text: kept when it is of one of ``T`` (``integer``: an int or a whole float,
  not a bool; ``number``: an int or float, not a bool; ``boolean``, ``null``, ``object``, ``array``,
  ``string`` as in JSON); otherwise, when ``"string"`` is in ``T``, replaced by its JSON text
  (``json.dumps(v, ensure_ascii=False)``); otherwise kept;
* a list, when ``"array"`` is not in ``T`` and its text is not one string (``merge_duplicates`` gathers a
  repeated parameter into a list): each element as above (with the text at the same index of the text list,
  when there is one of the same length).

Without ``tools=`` nothing is typed, as in the base format. Only the standard library and runtime modules
below it are imported.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from .coerce import cast_first, coerce_tool_calls, known_call, schema_types

__all__ = ["schema_typer", "type_tool_calls", "schema_coerce", "fit_value"]


def schema_coerce(raw: str, types: tuple, fallback: Any = None) -> Any:
    """A text typed schema-first: ``"string"`` keeps it, the other types cast it; when none accepts it, the
    text itself (`fallback` None) or `fallback`'s value (a one-element tuple)."""
    ok, value = cast_first(raw, types, keep_string=True)
    if ok:
        return value
    return raw if fallback is None else fallback[0]


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


def fit_value(value: Any, types: tuple, text: Any = None) -> Any:
    """One argument typed schema-first (the module's rules), `text` its text or None."""
    if isinstance(value, str):
        return schema_coerce(value, types)
    if isinstance(text, str):
        return schema_coerce(text, types, (value,))
    if any(_is_type(value, t) for t in types):
        return value
    if "string" in types:
        return json.dumps(value, ensure_ascii=False)
    return value


def _call_texts(value: Any, texts: Any) -> Any:
    """The text arguments dict for the call `value` from its twin `texts`, or None where they do not line up."""
    fn = texts.get("function") if isinstance(texts, dict) else None
    args = fn.get("arguments") if isinstance(fn, dict) else None
    if not isinstance(args, dict) or list(args) != list(value["function"]["arguments"]):
        return None
    return args


def type_tool_calls(value: Any, params: dict, texts: Any = None) -> Any:
    """`coerce.coerce_tool_calls` with the schema-first rules: the same calls, edited in place the same way
    (a list gives a new list of the same call objects). `texts` is the value made without the value parser
    (the arguments' texts), or None."""
    if isinstance(value, list):
        if not isinstance(texts, list) or len(texts) != len(value):
            return [type_tool_calls(item, params) for item in value]
        return [type_tool_calls(item, params, t) for item, t in zip(value, texts)]
    call = known_call(value, params)
    if call is None:
        return value
    arguments, properties = call
    arg_texts = _call_texts(value, texts) or {}
    for key, argument in arguments.items():
        if key not in properties:
            continue
        types = schema_types(properties[key])
        if not types:
            continue
        text = arg_texts.get(key)
        if isinstance(argument, list) and "array" not in types and not isinstance(text, str):
            each = text if isinstance(text, list) and len(text) == len(argument) else [None] * len(argument)
            arguments[key] = [fit_value(item, types, t) for item, t in zip(argument, each)]
        else:
            arguments[key] = fit_value(argument, types, text)
    return value


def text_field(field: dict) -> dict | None:
    """`field` without its value parser (the twin that gives the arguments' texts), or None when the field's
    content parser has none (``xml-inline`` / ``kv-lines`` with a ``value_parser``)."""
    args = field.get("content_args")
    if field.get("content") not in ("xml-inline", "kv-lines") or type(args) is not dict \
            or args.get("value_parser") is None:
        return None
    return {**field, "content_args": {k: v for k, v in args.items() if k != "value_parser"}}


def schema_typer(field: dict, maker: Callable[[dict], Callable[[str, dict], Any]]) -> Callable:
    """``typer(value, body, captures, params)``: the region's value typed as the field says - the base
    coercion, or with ``"argument_types": "schema"`` the rules above, where `maker` (`transform.value_maker`)
    builds the twin that gives the texts. A twin that fails on the body gives no texts."""
    if field.get("argument_types") != "schema":
        return lambda value, body, captures, params: coerce_tool_calls(value, params)
    twin = text_field(field)
    if twin is None:
        return lambda value, body, captures, params: type_tool_calls(value, params)
    make = maker(twin)

    def typer(value: Any, body: str, captures: dict, params: dict) -> Any:
        try:
            texts = make(body, captures)
        except (ValueError, KeyError, TypeError, RecursionError):
            texts = None
        return type_tool_calls(value, params, texts)

    return typer
