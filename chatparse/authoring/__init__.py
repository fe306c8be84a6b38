"""Tools for response-template authors: static checks, a chat-template round trip, automaton drawings.

* `checks.run_checks(template)` -> list of `Finding` (severity, check, field, key, message): what the compiled
  automata say about the delimiters - overlaps, opens that can never fire, an implicit close that swallows
  another field's delimiter, unbounded hold-back, patterns that need `regex` at run time, backtracking risks.
* `roundtrip.round_trip(template, chat_template)` -> `RoundTrip`: render sample assistant messages with the
  model's chat template (as transformers renders it), parse the rendered turn back, report every difference.
* `show.to_dot(template)`: each parser mode's delimiter automaton as Graphviz DOT (`show.to_svg` via `dot`).
* `load_template_arg(arg)`: a template from a bundled name, a JSON file, a ``.cpt`` table file or a tokenizer
  directory: how every ``chatparse`` subcommand reads its TEMPLATE.

The command line (`chatparse check|show|parse`) lives in `chatparse.cli.authoring`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["load_template_arg", "load_chat_template_arg"]


def load_template_arg(arg: str, *, bundled: str = "serving") -> tuple[Any, str | None]:
    """Resolve a TEMPLATE argument, as every ``chatparse`` subcommand reads it: ``(response_template,
    chat_template_or_None)``. `arg` is, first match wins:

    * a tokenizer directory: its ``tokenizer_config.json``'s ``response_template``; the chat template is the
      config's ``chat_template`` string or ``chat_template.jinja`` beside it (so `check` round-trips without
      ``--chat-template``);
    * a table file (its bytes start with the table format's magic, or its name ends in ``.cpt``): the template
      it was compiled from (`chatparse.integrations.resolve.template_of_spec`: it compiles to the same tables);
    * a JSON file: a response template, or a ``tokenizer_config.json`` holding a ``response_template`` object
      (and maybe a ``chat_template`` string);
    * a bundled name (`chatparse.templates.is_name`): ``qwen3`` is the family's serving-grade template,
      ``qwen3:base`` its base-format one (`templates.by_name`); with ``bundled="base"`` (what `chatparse grammar`
      constrains) both are the base format.

    Raises ValueError, one line naming `arg` (and the file's line and column, or the key), for anything else.
    """
    from chatparse import templates

    if bundled not in ("serving", "base"):
        raise ValueError(f"bundled must be 'serving' or 'base', got {bundled!r}")
    path = Path(arg)
    if path.is_dir():
        cfg_path = path / "tokenizer_config.json"
        if not cfg_path.is_file():
            raise ValueError(f"{arg} is a directory without tokenizer_config.json: not a tokenizer directory")
        cfg = _json_of(cfg_path)
        if not isinstance(cfg, dict) or not isinstance(cfg.get("response_template"), dict):
            raise ValueError(f"{cfg_path} has no 'response_template' object")
        chat = cfg.get("chat_template") if isinstance(cfg.get("chat_template"), str) else None
        jinja = path / "chat_template.jinja"
        if chat is None and jinja.is_file():
            chat = _text_of(jinja)
        return cfg["response_template"], chat
    if path.is_file():
        from chatparse.runtime.tables import loader

        data = _bytes_of(path)
        if data.startswith(loader.MAGIC) or path.suffix == ".cpt":
            from chatparse.integrations.resolve import template_of_spec

            try:
                return template_of_spec(loader.loads(data)["template"]), None
            except ValueError as e:
                raise ValueError(f"{arg}: not a valid table file: {e}") from None
        data = _json_of(path, data)
        if isinstance(data, dict) and "fields" not in data and ("response_template" in data
                                                                  or "chat_template" in data):
            if not isinstance(data.get("response_template"), dict):
                raise ValueError(f"{arg} has no 'response_template' object (a tokenizer_config.json without one?)")
            chat = data.get("chat_template") if isinstance(data.get("chat_template"), str) else None
            return data["response_template"], chat
        if not isinstance(data, dict):
            raise ValueError(f"{arg} holds a JSON {_kind(data)}, not a response template (an object with 'fields')")
        return data, None
    if templates.is_name(arg):
        if bundled == "base":
            return templates.get(arg.removesuffix(templates.BASE_SUFFIX)), None
        return templates.by_name(arg), None
    hint = "" if os.sep in arg or arg.endswith((".json", ".cpt")) else (
        f"; bundled templates: {', '.join(templates.names())} (add {templates.BASE_SUFFIX!r} for the base format)")
    raise ValueError(f"{arg!r} is neither a file, a tokenizer directory nor a bundled template name{hint}")


def load_chat_template_arg(arg: str) -> str:
    """A chat template from a ``.jinja`` file, or from a JSON file's ``chat_template`` string. Raises ValueError,
    one line naming `arg`, when the file is missing, unreadable, not UTF-8, not JSON or has no such string."""
    path = Path(arg)
    if path.suffix == ".json":
        data = _json_of(path)
        if isinstance(data, dict) and isinstance(data.get("chat_template"), str):
            return data["chat_template"]
        raise ValueError(f"{arg} holds no 'chat_template' string")
    return _text_of(path)


def _bytes_of(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror or e}") from None


def _text_of(path: Path, data: bytes | None = None) -> str:
    data = _bytes_of(path) if data is None else data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})") from None


def _json_of(path: Path, data: bytes | None = None) -> Any:
    try:
        return json.loads(_text_of(path, data))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON: {e.msg} (line {e.lineno} column {e.colno})") from None


def _kind(value: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(type(value), "null")
