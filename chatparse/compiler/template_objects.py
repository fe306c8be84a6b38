"""Template dicts from the pre-loaded ``ResponseTemplate`` objects of the reference interpreters.

vLLM's serving adapter (`vllm.parser.response_template`) loads a checkpoint's template once, with
`vllm.parser.chat_parsing.load_response_template`, and hands the resulting ``ResponseTemplate`` to its parser;
transformers' `load_response_template` returns the same shape. A drop-in parser must accept that object, so
`to_template_dict` rebuilds the template dict it was loaded from. It reads attributes only (no import of
vLLM or transformers), and the dict then goes through chatparse's own validation like any other.
"""

from __future__ import annotations

from typing import Any

__all__ = ["is_template_object", "to_template_dict"]

_FIELD_ATTRS = ("name", "open_re", "open_literals", "close_re", "close_literals", "content", "content_args",
                "repeats", "join", "optional", "transform", "transform_each")


def is_template_object(obj: Any) -> bool:
    """Whether `obj` looks like a reference interpreter's loaded ``ResponseTemplate``."""
    return (not isinstance(obj, dict) and hasattr(obj, "fields") and hasattr(obj, "start_anchor_re")
            and hasattr(obj, "defaults") and isinstance(getattr(obj, "fields"), dict))


def _delimiter(out: dict, key: str, rx: Any, literals: Any) -> None:
    if literals is not None:
        out[key] = literals[0] if len(literals) == 1 else list(literals)
    elif rx is not None:
        out[f"{key}_pattern"] = rx.pattern


def to_template_dict(obj: Any) -> dict:
    """The template dict that a loaded ``ResponseTemplate`` `obj` was built from (same fields in the same
    order, literal delimiters as literals, patterns as their source). ValueError naming the field if a
    field lacks an attribute the format needs."""
    fields: dict = {}
    for name, f in obj.fields.items():
        missing = [a for a in _FIELD_ATTRS if not hasattr(f, a)]
        if missing:
            raise ValueError(f"ResponseTemplate field '{name}' has no {', '.join(missing)}: not a loaded "
                             "response template")
        out: dict = {}
        _delimiter(out, "open", f.open_re, f.open_literals)
        _delimiter(out, "close", f.close_re, f.close_literals)
        if f.content != "text":
            out["content"] = f.content
        if f.content_args:
            out["content_args"] = f.content_args
        if f.repeats:
            out["repeats"] = True
        if f.join is not None:
            out["join"] = f.join
        if f.optional is not True:
            out["optional"] = f.optional
        if f.transform is not None:
            out["transform"] = f.transform
        if f.transform_each:
            out["transform_each"] = True
        fields[name] = out
    template: dict = {"defaults": obj.defaults, "fields": fields}
    literals = getattr(obj, "start_anchor_literals", None)
    if literals is not None:
        template["start_anchor"] = literals[0] if len(literals) == 1 else list(literals)
    else:
        template["start_anchor_pattern"] = obj.start_anchor_re.pattern
    return template
