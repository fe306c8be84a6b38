"""Tools for response-template authors: static checks, a chat-template round trip, automaton drawings.

* `checks.run_checks(template)` -> list of `Finding` (severity, check, field, key, message): what the compiled
  automata say about the delimiters - overlaps, opens that can never fire, an implicit close that swallows
  another field's delimiter, unbounded hold-back, patterns that need `regex` at run time, backtracking risks.
* `roundtrip.round_trip(template, chat_template)` -> `RoundTrip`: render sample assistant messages with the
  model's chat template (as transformers renders it), parse the rendered turn back, report every difference.
* `show.to_dot(template)`: each parser mode's delimiter automaton as Graphviz DOT (`show.to_svg` via `dot`).
* `load_template_arg(arg)`: a template from a JSON file, a tokenizer directory, or a bundled name.

The command line (`chatparse check|show|parse`) lives in `chatparse.authoring.cli`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

__all__ = ["load_template_arg", "load_chat_template_arg"]


def load_template_arg(arg: str) -> tuple[Any, str | None]:
    """Resolve a TEMPLATE argument: ``(response_template, chat_template_or_None)``.

    `arg` is a JSON file holding a response template (or a ``tokenizer_config.json`` with a
    ``response_template`` key), a tokenizer directory, or the name of a bundled template
    (``chatparse.templates.names()``). A chat template found beside it (the config's ``chat_template`` string,
    or ``chat_template.jinja`` in the directory) is returned too, so `check` can round-trip without
    ``--chat-template``.
    """
    from chatparse import templates

    path = Path(arg)
    if path.is_dir():
        cfg_path = path / "tokenizer_config.json"
        if not cfg_path.is_file():
            raise ValueError(f"{arg} is a directory without tokenizer_config.json")
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict) or cfg.get("response_template") is None:
            raise ValueError(f"{cfg_path} has no 'response_template'")
        chat = cfg.get("chat_template") if isinstance(cfg.get("chat_template"), str) else None
        jinja = path / "chat_template.jinja"
        if chat is None and jinja.is_file():
            chat = jinja.read_text(encoding="utf-8")
        return cfg["response_template"], chat
    if path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{arg} is not valid JSON: {e}") from e
        if isinstance(data, dict) and "fields" not in data and "response_template" in data:
            chat = data.get("chat_template") if isinstance(data.get("chat_template"), str) else None
            return data["response_template"], chat
        return data, None
    if arg in templates.names():
        return templates.get(arg), None
    hint = "" if os.sep in arg or arg.endswith(".json") else f"; bundled templates: {', '.join(templates.names())}"
    raise ValueError(f"{arg!r} is neither a file, a tokenizer directory nor a bundled template name{hint}")


def load_chat_template_arg(arg: str) -> str:
    """A chat template from a ``.jinja`` file, or from a JSON file's ``chat_template`` string."""
    path = Path(arg)
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        if isinstance(data, dict) and isinstance(data.get("chat_template"), str):
            return data["chat_template"]
        raise ValueError(f"{arg} holds no 'chat_template' string")
    return text
