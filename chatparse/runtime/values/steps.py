"""Value steps of format extensions around a field's transform: ``as_list`` and ``key_aliases`` before it,
``decode_json_strings`` after it (FORMAT.md, "Extensions"; registered in runtime/values/extensions.py).

A region's value is made in this order (`steps_maker` wraps `transform.value_maker`'s parse and result):

1. the content parser parses the body;
2. ``as_list``: a parsed value that is not a list becomes ``[value]`` (so ``transform_each`` takes a bare
   ``{...}`` as well as ``[{...}]``);
3. ``key_aliases``: in the parsed value if it is a dict, else in each dict element of a list, an alias key is
   renamed to its canonical key, in place (the key keeps its position), when the canonical key is absent;
   when the canonical key is already there the alias is left as it is (nothing is dropped). Of two aliases
   of one canonical key, the one that comes first in the value is renamed and the other stays (the order of
   ``key_aliases`` in the template does not matter: templates equal up to key order compile alike);
4. the transform (``transform_each`` per element);
5. ``decode_json_strings``: for each listed dotted path, in the value if it is a dict, else in each dict
   element of a list: when the path leads through dicts to a string, and that string is one JSON document
   (Python's ``json.loads``) whose value is an object, the string is replaced by that object. Anything else
   (a missing key, a non-dict on the way, a string that is not JSON or holds no object) is left unchanged;
6. tool-argument typing (runtime/stream/parser.py, with ``tools=``).

Errors of the base format (``transform_each`` on a non-list, ...) are raised as before; these steps never
raise on a value. Only the standard library is imported.
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["VALUE_STEP_KEYS", "wrap_list", "rename_aliases", "decode_json_strings", "steps_maker"]

#: the field keys of these steps: a field with any of them makes its value through `transform.value_maker`
VALUE_STEP_KEYS = frozenset({"as_list", "key_aliases", "decode_json_strings", "content_fallback",
                             "unwrap_pattern", "escaped_json_values"})


def wrap_list(value: Any) -> list:
    """``value`` if it is a list, else ``[value]``."""
    return value if isinstance(value, list) else [value]


def _renamed(d: dict, aliases: dict) -> dict:
    rename: dict = {}
    for key in d:  # in the dict's order: of two aliases of one canonical key, the first in the value wins
        canonical = aliases.get(key)
        if canonical is not None and canonical not in d and canonical not in rename.values():
            rename[key] = canonical
    if not rename:
        return d
    return {rename.get(k, k): v for k, v in d.items()}


def rename_aliases(value: Any, aliases: dict) -> Any:
    """`value` with its alias keys renamed (the module's step 3): a new dict for a dict, a new list of
    renamed dict elements for a list, anything else unchanged."""
    if isinstance(value, dict):
        return _renamed(value, aliases)
    if isinstance(value, list):
        return [_renamed(v, aliases) if isinstance(v, dict) else v for v in value]
    return value


def _decode_path(d: dict, keys: list) -> None:
    for key in keys[:-1]:
        d = d.get(key)
        if not isinstance(d, dict):
            return
    last = keys[-1]
    text = d.get(last)
    if not isinstance(text, str):
        return
    try:
        decoded = json.loads(text)
    except (ValueError, RecursionError):
        return
    if isinstance(decoded, dict):
        d[last] = decoded


def decode_json_strings(value: Any, paths: list) -> Any:
    """`value` with the JSON-object strings at `paths` decoded in place (the module's step 5); returned."""
    split = [p.split(".") for p in paths]
    for d in (value if isinstance(value, list) else [value]):
        if isinstance(d, dict):
            for keys in split:
                _decode_path(d, keys)
    return value


def steps_maker(field: dict, parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """`parse` followed by the field's steps 2 and 3 (``as_list``, ``key_aliases``); `parse` itself when the
    field has neither."""
    as_list = field.get("as_list", False)
    aliases = field.get("key_aliases")
    if not as_list and not aliases:
        return parse
    if not aliases:
        return lambda body: wrap_list(parse(body))
    if not as_list:
        return lambda body: rename_aliases(parse(body), aliases)
    return lambda body: rename_aliases(wrap_list(parse(body)), aliases)
