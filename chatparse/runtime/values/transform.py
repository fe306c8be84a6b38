"""Transform templates: reshape a parsed region value (plus regex captures) into its output value.

A transform is a JSON-like template. Dicts and lists are rebuilt recursively (dict keys are never
substituted), non-string leaves pass through unchanged, and a string that is *entirely* one placeholder
``{name}`` or ``{name.key.key}`` is replaced by the looked-up value with its type kept. Any other string
is a literal (the loader has already rejected strings that mix a placeholder with text).

Errors match transformers 5.23.0 and happen at parse time, never at load time:

* an undefined root name raises ``KeyError`` (message lists the names in scope);
* walking a dotted path into a non-dict raises ``ValueError`` ("cannot index into <type>");
* a dotted path naming an absent key raises ``ValueError`` ("is missing key '<key>'");
* ``transform_each`` on a non-list value, or on a list with a non-dict element, raises ``ValueError``.

Only the standard library and ``regex`` are imported.
"""

from __future__ import annotations

from typing import Any, Callable

import regex

from .parsers import content_parser
from .steps import decode_json_strings, steps_maker

__all__ = ["PLACEHOLDER", "compile_transform", "process_value", "value_maker"]

# One placeholder: a word, optionally followed by ``.word`` segments, in braces. ``regex`` gives \w its
# Unicode meaning, like the reference. Shared with the loader's "mixes placeholder and text" check.
PLACEHOLDER = regex.compile(r"\{(\w+(?:\.\w+)*)\}")


def _resolve(path: str, scope: dict) -> Any:
    """Look up a dotted ``path`` in ``scope``; each segment after the root indexes a dict by key."""
    root, *keys = path.split(".")
    if root not in scope:
        raise KeyError(f"transform placeholder '{{{path}}}' is not defined. Available: {sorted(scope)}")
    value = scope[root]
    for key in keys:
        if not isinstance(value, dict):
            raise ValueError(
                f"transform placeholder '{{{path}}}' cannot index into {type(value).__name__} at '{key}'"
            )
        if key not in value:
            raise ValueError(
                f"transform placeholder '{{{path}}}' is missing key '{key}'. Available: {sorted(value)}"
            )
        value = value[key]
    return value


def compile_transform(template: Any) -> Callable[[dict], Any]:
    """A function of the scope that instantiates `template` against it (name -> value), as the module says:
    fresh dicts and lists mirroring the template, looked-up values inserted as they are (not copied), the
    reference's value and exception (class and message, first failing placeholder first), without
    re-examining the template on every call.

    Why: a transform runs once per closed region, and examining the template each time (a placeholder
    regex per string, an isinstance chain per node) costs more than the dict it builds."""
    kind, arg = _part(template)
    if kind == _CALL:
        return arg
    if kind == _NAME:
        return lambda scope: scope[arg] if arg in scope else _resolve(arg, scope)
    return lambda scope: arg


_CONST, _NAME, _CALL = 0, 1, 2


def _part(item: Any) -> tuple[int, Any]:
    """How a template node is built: a constant, a root name looked up in the scope, or a compiled call."""
    if isinstance(item, dict):
        # One frame per dict: its constants and simple names are filled in place, in the template's key
        # order (so the first failing placeholder is the reference's first); only nested parts are calls.
        spec = tuple((key,) + _part(value) for key, value in item.items())

        def build(scope: dict) -> dict:
            out = {}
            for key, kind, arg in spec:
                if kind == _CONST:
                    out[key] = arg
                elif kind == _NAME:
                    out[key] = scope[arg] if arg in scope else _resolve(arg, scope)
                else:
                    out[key] = arg(scope)
            return out

        return _CALL, build
    if isinstance(item, list):
        fns = [compile_transform(value) for value in item]
        return _CALL, lambda scope: [fn(scope) for fn in fns]
    if isinstance(item, str):
        whole = PLACEHOLDER.fullmatch(item)
        if whole is not None:
            path = whole.group(1)
            if "." not in path:
                return _NAME, path
            return _CALL, lambda scope: _resolve(path, scope)
    return _CONST, item


def value_maker(field: dict) -> Callable[[str, dict], Any]:
    """``make(body, captures)``: the value of a closed region of `field`, as `process_value` says, with the
    field's parser options and transform read once (a region's value is made once per region; on short
    bodies reading them again costs as much as the parse).

    ``field`` is one normalized field dict from ``chatparse.compiler.validate.load_template`` (keys
    ``name``, ``content``, ``content_args``, ``transform``, ``transform_each``, and the value-level format
    extension keys ``as_list``, ``key_aliases``, ``decode_json_strings``, applied in the order
    runtime/values/steps.py states); ``captures`` are the named groups of the open match (groups that did not
    participate must already be left out)."""
    parse = content_parser(field["content"], field["content_args"], field.get("escaped_json_values", False))
    if field.get("content_fallback"):  # format extension (runtime/values/content_fallback.py)
        from .content_fallback import with_fallback
        parse = with_fallback(parse, field["content_fallback"])
    if field.get("unwrap_pattern") is not None:  # format extension (runtime/values/unwrap.py): the body first
        from .unwrap import unwrapping
        parse = unwrapping(parse, field["unwrap_pattern"])
    parse = steps_maker(field, parse)
    make = _maker(field, parse)
    paths = field.get("decode_json_strings")
    if paths:
        return lambda body, captures: decode_json_strings(make(body, captures), paths)
    return make


def _maker(field: dict, parse: Callable[[str], Any]) -> Callable[[str, dict], Any]:
    """`value_maker` before the steps that follow the transform: `parse`, then the field's transform."""
    template = field.get("transform")
    if template is None:
        return lambda body, captures: parse(body)
    optional = field.get("optional_placeholders")  # format extension (runtime/values/optional_placeholders.py)
    if optional:
        from .optional_placeholders import compile_optional_transform
        fn = compile_optional_transform(template, optional)
    else:
        fn = compile_transform(template)
    if not field.get("transform_each", False):
        direct = None if optional else _direct_maker(template, parse, fn)
        if direct is not None:
            return direct

        def make(body: str, captures: dict) -> Any:
            value = parse(body)
            if not captures:
                return fn({"content": value})
            return fn({**captures, "content": value})
        return make
    name = field["name"]

    def make_each(body: str, captures: dict) -> list:
        value = parse(body)
        if not isinstance(value, list):
            raise ValueError(
                f"Field '{name}': transform_each requires the parsed content to be a list, "
                f"got {type(value).__name__}."
            )
        results = []
        for element in value:
            if not isinstance(element, dict):
                raise ValueError(
                    f"Field '{name}': transform_each requires each list element to be a dict, "
                    f"got {type(element).__name__}."
                )
            results.append(fn({**captures, **element}))
        return results

    return make_each


_DIRECT_NODES = 64  # template nodes beyond which `_direct_maker` leaves a transform to the closures


class _NotDirect(Exception):
    pass


def _direct_maker(template: Any, parse: Callable[[str], Any], fn: Callable[[dict], Any]):
    """``make(body, captures)`` for a transform without ``transform_each`` as one generated function, or None
    where the template has a dotted placeholder or more than `_DIRECT_NODES` nodes (`compile_transform`'s
    closures build those).

    It returns what ``fn({**captures, "content": parse(body)})`` returns, and raises what that raises: the
    template becomes one nested dict/list display, so a tool call's value costs one frame instead of one per
    dict plus a scope dict (a third of the closures' time on gpt-oss's ``{"type": "function", "function":
    {...}}``). Evaluation runs in the template's order, as the closures do. A placeholder missing from the
    captures raises KeyError inside the display only; then `fn` itself runs, with the reference's message.

    Safe for templates from untrusted repositories: the generated source holds only names generated here
    (``c0``, ``c1``, ...); every key, constant and placeholder name of the template is a value in the
    function's namespace, never source text."""
    consts: dict = {}
    nodes = [0]

    def name_of(value: Any) -> str:
        key = f"c{len(consts)}"
        consts[key] = value
        return key

    def expr(node: Any) -> str:
        nodes[0] += 1
        if nodes[0] > _DIRECT_NODES:
            raise _NotDirect
        if isinstance(node, dict):
            return "{" + ", ".join(f"{name_of(k)}: {expr(v)}" for k, v in node.items()) + "}"
        if isinstance(node, list):
            return "[" + ", ".join(expr(v) for v in node) + "]"
        if isinstance(node, str):
            whole = PLACEHOLDER.fullmatch(node)
            if whole is not None:
                path = whole.group(1)
                if "." in path:
                    raise _NotDirect
                return "content" if path == "content" else f"captures[{name_of(path)}]"
        return name_of(node)

    try:
        body = expr(template)
    except _NotDirect:
        return None
    source = ("def make(body, captures):\n"
              "    content = parse(body)\n"
              "    try:\n"
              f"        return {body}\n"
              "    except KeyError:\n"
              "        return fn({**captures, 'content': content})\n")
    namespace = {"parse": parse, "fn": fn, **consts}
    exec(compile(source, "<chatparse transform>", "exec"), namespace)  # noqa: S102 - generated names only
    return namespace["make"]


def process_value(body: str, field: dict, captures: dict) -> Any:
    """Parse a closed region's raw ``body`` and apply the field's transform (`value_maker` once).

    Without a transform the parsed value is returned. With ``transform_each`` the parsed value must be a
    list of dicts and the transform is applied to each element with the element's keys in scope (they
    shadow captures of the same name); ``content`` is not in scope then. Otherwise the scope is the
    captures plus ``content`` (which shadows a capture called ``content``)."""
    return value_maker(field)(body, captures)
