"""Format extensions: the registry of what a template may use beyond transformers' response-template format.

Each extension is opted into by a new *field key* (``"key_aliases": {...}``) or a new ``content`` parser name
(``"content": "python-calls"``). transformers refuses both (``unknown keys [...]``, ``unknown content
parser``), so a template that uses an extension is refused by the reference by itself; chatparse accepts it and
marks it, so that a reader which does not implement it refuses it too:

* `load_template` (runtime/tables/validate.py) checks each extension key with ``Extension.check`` (errors name the
  field, the key and the extension) and, when any field uses an extension, writes the normalized template with
  ``"version": 2`` and ``"extensions": [sorted names]`` right after it. A template that uses none normalizes
  exactly as before (``"version": 1``, no ``"extensions"``), so its tables, vectors and hash are unchanged.
  A key whose value is its default (``"as_list": false``) is dropped from the normalized field, so it does
  not make a template extended.
* Readers (runtime/tables/validate.py `check_normalized`, used by runtime/tables/loader.py; ``checkTemplate`` in
  js/chatparse.mjs) accept version 2 only when every listed name is in their own set of implemented
  extensions, and otherwise raise `unsupported` 's error:
  ``ValueError: table uses format extension 'NAME', which this reader does not support``.

To add an extension (one entry each, in `EXTENSIONS` below):

    "my_ext": Extension("my_ext", "one line saying what it does", keys=("my_key",), check=_check_my_key)

``check(scope, key, value)`` validates the raw template value of one key (``scope`` is ``"Field 'x'"``) and
returns its normalized, JSON-serializable value, or `OMIT` when the value is the key's default (then the key
is left out and does not count as a use). It raises ValueError with a message naming ``scope`` and ``key``
(`fail` builds it). The key's semantics live in the runtime module that implements it; the registry only
says who opts in and how the key is validated. Then implement it in js/chatparse.mjs and add the name to
``JS_EXTENSIONS`` there.

Only the standard library is imported (the runtime stands alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Extension", "EXTENSIONS", "OMIT", "field_keys", "content_names", "field_extensions",
           "check_field_keys", "unsupported", "check_supported", "fail"]


class _Omit:
    """The value `Extension.check` returns when a key holds its default: leave the key out."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT = _Omit()


@dataclass(frozen=True)
class Extension:
    """One format extension: its name (what the ``extensions`` list of a table names), a one-line description,
    the field keys and/or the content parser name that opt into it, and ``check`` for its keys."""

    name: str
    description: str
    keys: tuple = ()
    content: str | None = None
    check: Callable[[str, str, Any], Any] | None = None


def fail(scope: str, key: str, name: str, what: str) -> None:
    """Raise the ValueError every extension key check raises: names the field, the key and the extension."""
    raise ValueError(f"{scope}: {key!r} {what} (format extension '{name}')")


# ------------------------------------------------------------------------------------------- key checks


def _check_argument_types(scope: str, key: str, value: Any) -> Any:
    if value == "json" and isinstance(value, str):
        return OMIT
    if value != "schema" or not isinstance(value, str):
        fail(scope, key, "argument_types", f"must be \"schema\" or \"json\" (the default), got {value!r:.60}")
    return value


def _check_key_aliases(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, dict):
        fail(scope, key, "key_aliases", f"must be a dict of alias -> canonical key, got {type(value).__name__}")
    if not value:
        return OMIT
    for alias, canonical in value.items():
        if not isinstance(canonical, str):
            fail(scope, key, "key_aliases", f"maps {alias!r:.40} to a {type(canonical).__name__}; "
                 "the canonical key must be a string")
        if alias == canonical:
            fail(scope, key, "key_aliases", f"maps {alias!r:.40} to itself")
        if canonical in value:
            fail(scope, key, "key_aliases", f"maps {alias!r:.40} to {canonical!r:.40}, which is itself an alias "
                 "(no chains)")
    return dict(value)


def _check_as_list(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, bool):
        fail(scope, key, "as_list", f"must be a bool, got {type(value).__name__}")
    return value if value else OMIT


def _check_decode_json_strings(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        fail(scope, key, "decode_json_strings", "must be a list of dotted key paths (strings)")
    if not value:
        return OMIT
    for p in value:
        if not p or any(not part for part in p.split(".")):
            fail(scope, key, "decode_json_strings", f"holds {p!r:.60}, which is not a dotted key path "
                 "(non-empty keys joined by '.')")
    if len(set(value)) != len(value):
        fail(scope, key, "decode_json_strings", "lists a path twice")
    return list(value)


def _check_close_json_end(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, bool):
        fail(scope, key, "close_json_end", f"must be a bool, got {type(value).__name__}")
    return value if value else OMIT


def _check_on_error(scope: str, key: str, value: Any) -> Any:
    if value == "raise" and isinstance(value, str):
        return OMIT
    if not isinstance(value, str) or value not in ("content", "drop"):
        fail(scope, key, "on_error", f"must be \"content\", \"drop\" or \"raise\" (the default), got {value!r:.60}")
    return value


def _check_optional_placeholders(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        fail(scope, key, "optional_placeholders", "must be a list of named groups of the field's open_pattern "
             "(strings)")
    if not value:
        return OMIT
    if len(set(value)) != len(value):
        fail(scope, key, "optional_placeholders", "lists a name twice")
    return list(value)


def _check_content_fallback(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, list):
        fail(scope, key, "content_fallback", f"must be a list of {{\"content\": parser, \"content_args\": ..}}, "
             f"got {type(value).__name__}")
    if not value:
        return OMIT
    out = []
    for i, entry in enumerate(value):
        if not isinstance(entry, dict) or "content" not in entry or set(entry) - {"content", "content_args"}:
            fail(scope, key, "content_fallback", f"entry {i} must be a dict with 'content' and optional "
                 "'content_args' only")
        if not isinstance(entry["content"], str):  # (a base parser's name: load_template checks which)
            fail(scope, key, "content_fallback", f"entry {i}: 'content' must be a content parser name")
        out.append({"content": entry["content"], "content_args": entry.get("content_args", {})})
    return out


def _check_flatten(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, bool):
        fail(scope, key, "flatten", f"must be a bool, got {type(value).__name__}")
    return value if value else OMIT


def _check_escaped_json_values(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, bool):
        fail(scope, key, "escaped_json_values", f"must be a bool, got {type(value).__name__}")
    return value if value else OMIT


def _check_unwrap_pattern(scope: str, key: str, value: Any) -> Any:
    if not isinstance(value, str) or not value:  # (load_template compiles it)
        fail(scope, key, "unwrap_pattern", f"must be a non-empty regex string, got {value!r:.60}")
    return value


# ------------------------------------------------------------------------------------------- the registry

EXTENSIONS: dict[str, Extension] = {
    "python_calls": Extension(
        "python_calls", "content parser \"python-calls\": Python call syntax to [{\"name\", \"arguments\"}, ...]",
        content="python-calls"),
    "argument_types": Extension(
        "argument_types", "\"argument_types\": \"schema\": with tools=, tool-call arguments are typed by their "
        "JSON Schema (a string parameter keeps its text)", keys=("argument_types",), check=_check_argument_types),
    "key_aliases": Extension(
        "key_aliases", "\"key_aliases\": {alias: canonical}: rename keys of the parsed dict before the transform",
        keys=("key_aliases",), check=_check_key_aliases),
    "as_list": Extension(
        "as_list", "\"as_list\": true: a parsed value that is not a list becomes a one-element list",
        keys=("as_list",), check=_check_as_list),
    "decode_json_strings": Extension(
        "decode_json_strings", "\"decode_json_strings\": [paths]: after the transform, a string at a listed path "
        "that holds a JSON object becomes that object", keys=("decode_json_strings",),
        check=_check_decode_json_strings),
    "close_json_end": Extension(
        "close_json_end", "\"close_json_end\": true: the region also closes right after the JSON value its body "
        "starts with; text after it goes on (runtime/values/json_end.py)", keys=("close_json_end",),
        check=_check_close_json_end),
    "on_error": Extension(
        "on_error", "\"on_error\": \"content\" | \"drop\": a region whose value fails to parse is kept as content "
        "text or dropped, and the parse goes on (runtime/values/recovery.py)", keys=("on_error",), check=_check_on_error),
    "optional_placeholders": Extension(
        "optional_placeholders", "\"optional_placeholders\": [group names]: a transform dict entry that is one "
        "placeholder of a listed open_pattern group that did not take part is left out "
        "(runtime/values/optional_placeholders.py)", keys=("optional_placeholders",), check=_check_optional_placeholders),
    "content_fallback": Extension(
        "content_fallback", "\"content_fallback\": [{content, content_args}, ..]: where the field's content parser "
        "fails, these are tried in order; the first value wins (runtime/values/content_fallback.py)",
        keys=("content_fallback",), check=_check_content_fallback),
    "unwrap_pattern": Extension(
        "unwrap_pattern", "\"unwrap_pattern\": regex: before the content parser, each match in the body is "
        "replaced by its group 'keep' (citation markup; runtime/values/unwrap.py)", keys=("unwrap_pattern",),
        check=_check_unwrap_pattern),
    "json_values": Extension(
        "json_values", "content parser \"json-values\": comma-separated JSON values to the list of them "
        "(runtime/values/json_values.py)", content="json-values"),
    "flatten": Extension(
        "flatten", "\"flatten\": true: on a repeated field, a region's value that is a list adds its elements "
        "to the field's list one by one instead of being one element", keys=("flatten",), check=_check_flatten),
    "escaped_json_values": Extension(
        "escaped_json_values", "\"escaped_json_values\": true: an xml-inline/kv-lines value that its json "
        "value_parser does not read as JSON is read as the inside of a JSON string literal, then as JSON "
        "(runtime/values/parsers.py)", keys=("escaped_json_values",), check=_check_escaped_json_values),
}


def field_keys() -> dict:
    """Extension field key -> the extension name it opts into."""
    return {k: e.name for e in EXTENSIONS.values() for k in e.keys}


def content_names() -> dict:
    """Extension content parser name -> the extension name it opts into."""
    return {e.content: e.name for e in EXTENSIONS.values() if e.content is not None}


def check_field_keys(scope: str, spec: dict) -> dict:
    """The normalized extension keys of one raw field `spec`: ``{key: normalized value}`` in registry order,
    defaults left out. Each key's check raises ValueError naming `scope` and the key."""
    out = {}
    content = spec.get("content")
    if isinstance(content, str) and content in content_names() and spec.get("content_args", {}) != {}:
        fail(scope, "content_args", content_names()[content], f"must be absent or {{}}: the {content!r} parser "
             "takes no options")
    for ext in EXTENSIONS.values():
        for key in ext.keys:
            if key in spec:
                value = ext.check(scope, key, spec[key]) if ext.check is not None else spec[key]
                if value is not OMIT:
                    out[key] = value
    return out


def field_extensions(field: dict) -> list:
    """The names of the extensions a (normalized) field uses: those whose keys it has, and the one its
    ``content`` names if that is an extension parser. Sorted."""
    keys = field_keys()
    names = {keys[k] for k in field if k in keys}
    content = content_names().get(field.get("content"))
    if content is not None:
        names.add(content)
    return sorted(names)


def unsupported(name: Any) -> ValueError:
    """The error a reader raises for a table that uses an extension it does not implement."""
    return ValueError(f"table uses format extension {_quoted(name)}, which this reader does not support")


def _quoted(name: Any) -> str:
    return f"'{name}'" if isinstance(name, str) and name.isprintable() else repr(name)


def check_supported(names: Any, supported: Any = None) -> None:
    """Raise `unsupported` for the first of `names` not in `supported` (default: every registered extension:
    this runtime implements all of them)."""
    known = EXTENSIONS if supported is None else supported
    for name in names:
        if not isinstance(name, str) or name not in known:
            raise unsupported(name)
