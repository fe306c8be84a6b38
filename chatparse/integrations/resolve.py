"""Which response template a server parses a checkpoint's output with: one resolver for every server plugin.

A published checkpoint's tokenizer config holds no ``response_template``, so a plugin that needed one would
serve nobody. `resolve` finds a template for a tokenizer in this order, first found wins:

1. **the tokenizer config's own** ``response_template`` (the model's authors wrote it);
2. **the operator's choice**, the environment variable ``CHATPARSE_RESPONSE_TEMPLATE`` (or `choice`): a bundled
   family name (``qwen3``: its serving-grade template; ``qwen3:base``: its base-format one), or the path of a
   template JSON file, of a ``tokenizer_config.json`` holding one, or of a ``.cpt`` table file;
3. **the model id**: the bundled family `chatparse.templates.family_of` finds in the tokenizer's
   ``name_or_path`` (``Qwen/Qwen3-8B``);
4. **the chat template**: the family `chatparse.templates.family_of_chat_template` recognises in the
   tokenizer's ``chat_template`` (a local directory such as ``/models/ft-7`` names no family).

A bundled family found by 3 or 4 gives its serving-grade template (`chatparse.templates.serving`). When none
gives one, `resolve` raises `TemplateNotFound` listing these ways. An operator's choice that names no bundled
family, or a file that cannot be read, is refused naming the variable and listing the names, rather than
falling through to a guess.

`resolve` never imports a server; it reads the tokenizer's attributes (``response_template``,
``init_kwargs``, ``name_or_path``, ``chat_template``) the way transformers' tokenizers and vLLM's wrappers
expose them.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Any

from chatparse import templates

__all__ = ["ENV", "Resolution", "TemplateNotFound", "resolve", "from_choice", "log_once", "inner_tokenizer",
           "template_of_spec"]

ENV = "CHATPARSE_RESPONSE_TEMPLATE"
logger = logging.getLogger("chatparse")


class TemplateNotFound(LookupError):
    """No response template for this checkpoint; the message lists the ways to give one."""


@dataclass(frozen=True)
class Resolution:
    """A resolved template: the dict to serve, where it came from (``"tokenizer config"``, ``"operator"``,
    ``"model id"``, ``"chat template"``), the bundled family when it is one, and a one-line reason."""

    template: dict
    source: str
    family: str | None
    reason: str


def inner_tokenizer(tokenizer: Any) -> Any:
    """The transformers tokenizer behind a server's wrapper (vLLM may wrap it), else `tokenizer`."""
    for attr in ("tokenizer", "hf_tokenizer", "_tokenizer"):
        inner = getattr(tokenizer, attr, None)
        if inner is not None and hasattr(inner, "convert_ids_to_tokens"):
            return inner
    return tokenizer


def _attr(tokenizer: Any, name: str) -> Any:
    """`name` from the tokenizer (or the tokenizer it wraps), else from its ``init_kwargs``; None if absent."""
    for tok in (tokenizer, inner_tokenizer(tokenizer)):
        value = getattr(tok, name, None)
        if value is None:
            value = (getattr(tok, "init_kwargs", None) or {}).get(name)
        if value is not None:
            return value
    return None


def config_template(tokenizer: Any) -> dict | None:
    """The tokenizer config's own ``response_template``. A value that is present but not an object is
    refused naming the key (a config that tries to give one and gets it wrong is not silently ignored)."""
    value = _attr(tokenizer, "response_template")
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError(f"tokenizer config key 'response_template' must be a JSON object (a response template), "
                         f"got {type(value).__name__}")
    return value


def _delimiter(out: dict, key: str, value: dict | None) -> None:
    if value is None:
        return
    if "pattern" in value:
        out[key + "_pattern"] = value["pattern"]
    else:
        literals = value["literals"]
        out[key] = literals[0] if len(literals) == 1 else list(literals)


_FIELD_DEFAULTS = {"content": "text", "content_args": {}, "repeats": False, "join": None, "optional": False,
                   "transform": None, "transform_each": False}


def template_of_spec(spec: dict) -> dict:
    """The template dict of a normalized template (a table file's ``template`` section, `load_template`'s
    form): what compiles to the same tables, for a server that takes template dicts. Keys at their default
    are left out; delimiters become ``open``/``open_pattern`` (a list where there are several literals)."""
    out: dict = {}
    if spec.get("defaults"):
        out["defaults"] = dict(spec["defaults"])
    if spec.get("start_anchor") is not None:
        _delimiter(out, "start_anchor", spec["start_anchor"])
    fields = out["fields"] = {}
    for f in spec["fields"]:
        field: dict = {}
        _delimiter(field, "open", f.get("open"))
        _delimiter(field, "close", f.get("close"))
        for key, value in f.items():
            if key not in ("name", "open", "close") and _FIELD_DEFAULTS.get(key, object()) != value:
                field[key] = value
        fields[f["name"]] = field
    return out


def from_choice(choice: str, *, what: str = f"${ENV}") -> Resolution:
    """The template an operator names (see the module docstring). Raises ValueError naming `what` for an
    unknown family name, a missing or unreadable file, or a file that holds no template."""
    choice = choice.strip()
    if templates.is_name(choice):
        base = choice.endswith(templates.BASE_SUFFIX)
        name = choice[: -len(templates.BASE_SUFFIX)] if base else choice
        kind = "base-format" if base else "serving-grade"
        return Resolution(templates.by_name(choice), "operator", name,
                          f"{what}={choice}: the bundled {name} template ({kind})")
    if not os.path.isfile(choice):
        raise ValueError(f"{what}={choice!r} is neither a bundled family ({', '.join(templates.names())}; "
                         f"add '{templates.BASE_SUFFIX}' for the base format) nor an existing file (a template JSON, a "
                         f"tokenizer_config.json or a .cpt table file)")
    if choice.endswith(".cpt"):
        from chatparse.runtime.tables import loader

        try:
            raw = loader.load(choice)
        except (OSError, ValueError) as exc:
            raise ValueError(f"{what}={choice!r}: not a readable table file: {exc}") from None
        return Resolution(template_of_spec(raw["template"]), "operator", None,
                          f"{what}={choice}: the table file's template")
    try:
        with open(choice, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what}={choice!r}: not a readable JSON file: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("response_template"), dict):
        return Resolution(data["response_template"], "operator", None,
                          f"{what}={choice}: its key 'response_template'")
    if isinstance(data, dict) and "fields" in data:
        return Resolution(data, "operator", None, f"{what}={choice}: a response template file")
    raise ValueError(f"{what}={choice!r}: holds neither a response template (an object with 'fields') nor a "
                     f"tokenizer config with a 'response_template' object")


def resolve(tokenizer: Any, *, choice: str | None = None) -> Resolution:
    """The template to serve `tokenizer`'s checkpoint with, by the order of the module docstring. `choice`
    defaults to ``$CHATPARSE_RESPONSE_TEMPLATE`` (empty: none). Raises `TemplateNotFound` when nothing gives
    one, ValueError for a bad config value or operator choice (both name what is wrong)."""
    own = config_template(tokenizer)
    if own is not None:
        return Resolution(own, "tokenizer config", None, "the tokenizer config's own 'response_template'")
    if choice is None:
        choice = os.environ.get(ENV, "")
    if choice.strip():
        return from_choice(choice)
    name = _attr(tokenizer, "name_or_path")
    if isinstance(name, str) and name:
        family = templates.family_of(name)
        if family is not None:
            return Resolution(templates.serving(family), "model id", family,
                              f"the bundled {family} template (serving-grade), from the model id {name!r}")
    chat_template = _attr(tokenizer, "chat_template")
    if chat_template is not None:
        family = templates.family_of_chat_template(chat_template)
        if family is not None:
            return Resolution(templates.serving(family), "chat template", family,
                              f"the bundled {family} template (serving-grade), recognised from the checkpoint's "
                              f"chat template")
    raise TemplateNotFound(
        f"no response template for {name or 'this checkpoint'!r}: its tokenizer config holds no "
        f"'response_template', ${ENV} is not set, no bundled family matches its model id, and its chat template "
        f"is not one a bundled family recognises. Give one: set ${ENV} to a bundled family "
        f"({', '.join(templates.names())}), or to a template JSON, tokenizer_config.json or .cpt file; or add "
        f"'response_template' to the checkpoint's tokenizer_config.json")


_logged: set = set()


def log_once(resolution: Resolution, server: str, log: logging.Logger | None = None) -> None:
    """Log to `log` (default: the ``chatparse`` logger), once per process and reason, which template `server`
    serves and why."""
    key = (server, resolution.reason)
    if key not in _logged:
        _logged.add(key)
        (log or logger).info("chatparse (%s): serving %s", server, resolution.reason)
