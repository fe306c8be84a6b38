"""The template rules: validation of ``response_template`` dicts, the one validator of templates.

``load_template`` turns a template dict into its normalized form (the compiler's input, the template section of
a table file); ``check_normalized`` checks that a normalized template read from a table file is exactly what
``load_template`` makes of some template, so the loader (runtime/tables/loader.py) and the compiler
(``chatparse.compiler.validate`` re-exports this module) apply the same rules.

``load_template`` accepts exactly the templates transformers 5.23.0 (``load_response_template``) accepts,
rejects the others with the same exception class, in the same order of checks, with the reference's key
message substrings, and returns a normalized, JSON-serializable description for the compiler.

Order of checks (the first failure wins, as in the reference):

1. template shape: dict, ``version`` (== 1 when present), unknown top-level keys, ``defaults`` a dict,
   ``fields`` a non-empty dict;
2. each field in template order: dict, unknown keys, ``content`` parser name, ``open``/``open_pattern``,
   ``close``/``close_pattern``, ``join`` type, ``join`` needs ``repeats``, ``transform_each`` type,
   ``transform_each`` needs ``transform``, then either the transform strings (no placeholder mixed with
   text) or, without a transform, no named groups in the open/close patterns;
3. at most one implicit field (no ``open``/``open_pattern``);
4. exactly one of ``start_anchor`` / ``start_anchor_pattern``.

``content_args`` are deliberately *not* checked here: the reference only fails on them when a body is
parsed, and chatparse keeps that parse-time behaviour (see ``chatparse.runtime.values.parsers``).
"""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

import regex

from ..values.extensions import check_field_keys, check_supported, content_names, field_extensions, field_keys
from ..values.parsers import PARSER_NAMES
from ..values.transform import PLACEHOLDER

__all__ = ["load_template", "check_normalized", "canonical_json"]


def canonical_json(spec: Any) -> str:
    """Sorted keys, compact separators, raw Unicode: the template hash and the compile cache key.

    Two specs that compare equal as JSON values give the same string."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_TOP_LEVEL_KEYS = frozenset({"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"})
_FIELD_KEYS = frozenset(
    {
        "open",
        "open_pattern",
        "close",
        "close_pattern",
        "content",
        "content_args",
        "repeats",
        "join",
        "optional",
        "transform",
        "transform_each",
    }
)


def _check_shape(spec: Any) -> None:
    """Top-level structure checks, in the reference's order."""
    if not isinstance(spec, dict):
        raise ValueError(f"response_template must be a dict, got {type(spec).__name__}")
    version = spec.get("version", 1)
    if version != 1:
        raise ValueError(f"Unsupported response_template version: {version} (key 'version' must be 1)")
    unknown = set(spec) - _TOP_LEVEL_KEYS
    if unknown:
        raise ValueError(f"Unknown keys in response_template: {sorted(unknown)}")
    if not isinstance(spec.get("defaults", {}), dict):
        raise ValueError("response_template.defaults must be a dict")
    fields = spec.get("fields", {})
    if not isinstance(fields, dict) or not fields:
        raise ValueError("response_template.fields must be a non-empty dict")


def _anchor(scope: str, holder: dict, literal_key: str, pattern_key: str) -> tuple[Any, Any]:
    """Validate one delimiter given either as literal(s) under ``literal_key`` or a regex under
    ``pattern_key``.

    Returns ``(normalized, compiled)`` where ``normalized`` is ``None``, ``{"literals": [...]}`` (a string
    becomes a one-element list; duplicates dropped keeping first-seen order) or ``{"pattern": p}``, and
    ``compiled`` is the pattern compiled with DOTALL (``None`` for literals), used only to validate it and to
    read its named groups."""
    if literal_key in holder and pattern_key in holder:
        raise ValueError(f"{scope}: cannot specify both '{literal_key}' and '{pattern_key}'")
    if literal_key in holder:
        raw = holder[literal_key]
        if isinstance(raw, str):
            literals = [raw]
        elif isinstance(raw, list):
            if not raw:
                raise ValueError(f"{scope}: '{literal_key}' list must contain at least one literal")
            if not all(isinstance(item, str) for item in raw):
                raise ValueError(f"{scope}: '{literal_key}' list must contain only strings")
            literals = list(dict.fromkeys(raw))
        else:
            raise ValueError(
                f"{scope}: '{literal_key}' must be a string or list of strings, got {type(raw).__name__}"
            )
        if "" in literals:
            raise ValueError(f"{scope}: '{literal_key}' literals cannot be empty strings")
        return {"literals": literals}, None
    if pattern_key in holder:
        pattern = holder[pattern_key]
        try:
            compiled = regex.compile(pattern, regex.DOTALL)
        except regex.error as err:
            raise ValueError(f"{scope}: invalid {pattern_key} regex: {err}") from err
        return {"pattern": pattern}, compiled
    return None, None


def _check_transform_strings(scope: str, transform: Any) -> None:
    """Reject any string inside ``transform`` (dict values and list items, recursively) that contains a
    placeholder but is not exactly one placeholder: string interpolation is not supported."""
    if isinstance(transform, dict):
        for item in transform.values():
            _check_transform_strings(scope, item)
    elif isinstance(transform, list):
        for item in transform:
            _check_transform_strings(scope, item)
    elif isinstance(transform, str):
        if PLACEHOLDER.search(transform) and not PLACEHOLDER.fullmatch(transform):
            raise ValueError(
                f"{scope}: 'transform' string {transform!r} mixes a {{placeholder}} with literal text. "
                'Use either a whole-string placeholder (e.g. "{content}") or a plain literal; '
                "string interpolation is not supported."
            )


def _field(name: Any, spec: Any) -> dict:
    """Validate one field spec and return its normalized dict (see ``load_template``)."""
    scope = f"Field '{name}'"
    if not isinstance(spec, dict):
        raise ValueError(f"{scope} must be a dict, got {type(spec).__name__}")
    unknown = set(spec) - _FIELD_KEYS - field_keys().keys()
    if unknown:
        raise ValueError(f"{scope}: unknown keys {sorted(unknown)}")
    content = spec.get("content", "text")
    if content not in PARSER_NAMES and content not in content_names():
        raise ValueError(
            f"{scope}: unknown content parser '{content}' in 'content'. Available: {sorted(PARSER_NAMES)}"
        )
    open_norm, open_re = _anchor(scope, spec, "open", "open_pattern")
    close_norm, close_re = _anchor(scope, spec, "close", "close_pattern")
    join = spec.get("join")
    if join is not None and not isinstance(join, str):
        raise ValueError(f"{scope}: 'join' must be a string, got {type(join).__name__}")
    if join is not None and not spec.get("repeats", False):
        raise ValueError(f"{scope}: 'join' requires 'repeats': true")
    transform = spec.get("transform")
    transform_each = spec.get("transform_each", False)
    if not isinstance(transform_each, bool):
        raise ValueError(f"{scope}: transform_each must be a bool, got {type(transform_each).__name__}")
    if transform_each and transform is None:
        raise ValueError(f"{scope}: transform_each is set but no 'transform' was provided")
    if transform is not None:
        _check_transform_strings(scope, transform)
    else:
        groups: set = set()
        for compiled in (open_re, close_re):
            if compiled is not None:
                groups |= set(compiled.groupindex)
        if groups:
            raise ValueError(
                f"{scope}: open_pattern/close_pattern declares named group(s) {sorted(groups)}, but the "
                "field has no 'transform'. Named captures are only surfaced through a 'transform' "
                "template (where they appear alongside 'content'). Either add a 'transform' that uses "
                "the captures, or remove the named groups from the pattern."
            )
    extended = check_field_keys(scope, spec)  # format extensions (runtime/values/extensions.py): checked last
    if extended.get("close_json_end") and open_norm is None:
        raise ValueError(f"{scope}: 'close_json_end' needs an explicit 'open' or 'open_pattern': the implicit "
                         "field has no region body of its own to read a JSON value from (format extension "
                         "'close_json_end')")
    for group in extended.get("optional_placeholders", ()):
        if transform is None or open_re is None or group not in open_re.groupindex:
            raise ValueError(f"{scope}: 'optional_placeholders' names {group!r:.40}, which is not a named group of "
                             "the field's 'open_pattern' (and the field needs a 'transform') (format extension "
                             "'optional_placeholders')")
    for i, entry in enumerate(extended.get("content_fallback", ())):
        if entry["content"] not in PARSER_NAMES:
            raise ValueError(f"{scope}: 'content_fallback' entry {i} names content parser {entry['content']!r:.40}; "
                             f"available: {sorted(PARSER_NAMES)} (format extension 'content_fallback')")
    if "unwrap_pattern" in extended:
        try:
            regex.compile(extended["unwrap_pattern"], regex.DOTALL)
        except regex.error as err:
            raise ValueError(f"{scope}: invalid 'unwrap_pattern' regex: {err} (format extension 'unwrap_pattern')") \
                from err
    if extended.get("flatten") and (not spec.get("repeats", False) or join is not None):
        raise ValueError(f"{scope}: 'flatten' needs 'repeats': true and no 'join': it adds a list value's elements "
                         "to the field's list (format extension 'flatten')")
    if extended.get("escaped_json_values"):
        args = spec.get("content_args", {})
        parser = args.get("value_parser") if isinstance(args, dict) else None
        if content not in ("xml-inline", "kv-lines") or not isinstance(parser, dict) \
                or parser.get("name", "text") != "json":
            raise ValueError(f"{scope}: 'escaped_json_values' needs 'content' xml-inline or kv-lines with a "
                             "'value_parser' named 'json' in 'content_args' (format extension 'escaped_json_values')")
    if extended.get("on_error") == "content" and open_norm is None:
        raise ValueError(f"{scope}: 'on_error': 'content' cannot be set on the implicit field: its text would be "
                         "recovered into itself (use 'drop') (format extension 'on_error')")
    return {
        "name": name,
        "open": open_norm,
        "close": close_norm,
        "content": content,
        "content_args": deepcopy(spec.get("content_args", {})),
        "repeats": bool(spec.get("repeats", False)),
        "join": join,
        "optional": bool(spec.get("optional", True)),
        "transform": deepcopy(transform),
        "transform_each": transform_each,
        **deepcopy(extended),
    }


def load_template(spec: Any) -> dict:
    """Validate a ``response_template`` dict and return its normalized form.

    Raises ``ValueError`` (``TypeError`` for the odd non-hashable/non-string values the reference also
    chokes on) with the reference's message substrings; every message names the field (or
    ``response_template``) and the offending key. The result is JSON-serializable and shares no mutable
    state with ``spec``::

        {"version": 1, "defaults": {...}, "start_anchor": {"literals": [...]} | {"pattern": str},
         "implicit": <field name> | None,
         "fields": [{"name", "open", "close", "content", "content_args", "repeats", "join",
                     "optional", "transform", "transform_each"}, ...]}   # template order

    ``open``/``close`` are ``None``, ``{"literals": [str, ...]}`` (deduplicated, first-seen order) or
    ``{"pattern": str}``; ``repeats``/``optional`` are normalized to bools by truthiness, which is how
    the reference reads them.

    Format extensions (runtime/values/extensions.py): a field may also hold extension keys, and ``content`` may name
    an extension parser; the reference refuses those templates. A field keeps the extension keys it uses
    (normalized, after the keys above), and a template with any is ``{"version": 2, "extensions": [sorted
    names], "defaults", ...}``; one without any is exactly the form above."""
    _check_shape(spec)
    fields = [_field(name, raw) for name, raw in spec["fields"].items()]
    implicit = [field["name"] for field in fields if field["open"] is None]
    if len(implicit) > 1:
        raise ValueError(
            "At most one field may omit 'open'/'open_pattern' (that field becomes the "
            f"implicit-open / leftover sink). Found: {', '.join(implicit)}"
        )
    anchor, _ = _anchor("response_template", spec, "start_anchor", "start_anchor_pattern")
    if anchor is None:
        raise ValueError("response_template must define 'start_anchor' or 'start_anchor_pattern'.")
    for field in fields:
        if field.get("on_error") == "content" and not implicit:
            raise ValueError(f"Field '{field['name']}': 'on_error': 'content' needs an implicit field (one without "
                             "'open'/'open_pattern') to keep the text in (format extension 'on_error')")
    extensions = sorted({name for field in fields for name in field_extensions(field)})
    if extensions:  # FORMAT.md section 2, "Extensions": only a template that uses one changes form
        return {
            "version": 2,
            "extensions": extensions,
            "defaults": deepcopy(spec.get("defaults", {})),
            "start_anchor": anchor,
            "implicit": implicit[0] if implicit else None,
            "fields": fields,
        }
    return {
        "version": 1,
        "defaults": deepcopy(spec.get("defaults", {})),
        "start_anchor": anchor,
        "implicit": implicit[0] if implicit else None,
        "fields": fields,
    }


_NORMALIZED_KEYS = ("version", "defaults", "start_anchor", "implicit", "fields")
_NORMALIZED_FIELD_KEYS = ("name", "open", "close", "content", "content_args", "repeats", "join", "optional",
                          "transform", "transform_each")


def check_normalized(spec: Any) -> None:
    """Raise ValueError unless `spec` (parsed JSON) is exactly ``load_template``'s normalized form of some
    template: the same rules as a template dict, nothing the normalization would change (a repeated literal,
    ``1`` for ``true``, a wrong ``implicit``...). The message says what is wrong; the loader prefixes it."""
    if type(spec) is dict and "extensions" in spec:  # a version-2 template: first, can this reader read it?
        names = spec["extensions"]
        if type(names) is not list or not names or spec.get("version") != 2:
            raise ValueError("template: 'extensions' must be a non-empty list, with 'version': 2")
        check_supported(names)
        if set(spec) != {"extensions", *_NORMALIZED_KEYS}:
            raise ValueError(f"template: expected an object with keys {['extensions', *_NORMALIZED_KEYS]}")
    elif type(spec) is not dict or set(spec) != set(_NORMALIZED_KEYS):
        raise ValueError(f"template: expected an object with keys {list(_NORMALIZED_KEYS)}")
    fields = spec["fields"]
    if type(fields) is not list or not fields:
        raise ValueError("template: fields must be a non-empty list")
    raw_fields: dict = {}
    for i, f in enumerate(fields):
        where = f"template.fields[{i}]"
        if type(f) is not dict or not set(_NORMALIZED_FIELD_KEYS) <= set(f) \
                or not set(f) - set(_NORMALIZED_FIELD_KEYS) <= field_keys().keys():
            raise ValueError(f"{where}: expected an object with keys {list(_NORMALIZED_FIELD_KEYS)} "
                             "(and format extension keys)")
        if type(f["name"]) is not str:
            raise ValueError(f"{where}.name: expected a string")
        if f["name"] in raw_fields:
            raise ValueError(f"template: duplicate field name {f['name']!r:.40}")
        raw = {k: f[k] for k in f if k not in ("name", "open", "close", "join", "transform")}
        for key in ("join", "transform"):
            if f[key] is not None:
                raw[key] = f[key]
        for key in ("open", "close"):
            raw.update(_raw_delimiter(f[key], key, f"{where}.{key}"))
        raw_fields[f["name"]] = raw
    version = 1 if "extensions" in spec else spec["version"]  # (a template dict is always version 1)
    template = {"version": version, "defaults": spec["defaults"], "fields": raw_fields,
                **_raw_delimiter(spec["start_anchor"], "start_anchor", "template.start_anchor")}
    try:
        again = load_template(template)
    except (ValueError, TypeError, RecursionError, OverflowError) as e:
        raise ValueError(f"template: {e}") from None
    if canonical_json(again) != canonical_json(spec):
        raise ValueError("template: not in normalized form (load_template would normalize it differently)")


def _raw_delimiter(d: Any, key: str, where: str) -> dict:
    """The template-dict entry of a normalized delimiter: {key: literals}, {key_pattern: pattern} or {}."""
    if d is None:
        return {}
    if type(d) is dict and len(d) == 1:
        if type(d.get("literals")) is list:
            return {key: d["literals"]}
        if type(d.get("pattern")) is str:
            return {f"{key}_pattern": d["pattern"]}
    raise ValueError(f"{where}: expected null, {{'literals': [...]}} or {{'pattern': str}}")
