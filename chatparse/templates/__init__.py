"""Bundled response templates for common chat-model families.

Each `<name>.json` file beside this module holds one family's response template, exactly as verified against
the reference implementation (transformers 5.23.0) on the shared format corpus (`shared/formats/corpus.json`,
described in `shared/formats/FORMATS.md`). The test cases themselves are not shipped with the package.

    >>> from chatparse import parse_response, templates
    >>> templates.names()[:3]
    ['cohere', 'deepseek_r1', 'deepseek_v3']
    >>> message = parse_response(output, templates.get("qwen3"), prefix=chat_prompt)  # doctest: +SKIP

`get()` returns a fresh deep copy on every call, so callers may modify the result freely.
"""

from __future__ import annotations

import copy
import json
from functools import lru_cache
from importlib import resources

__all__ = ["names", "get"]

_SUFFIX = ".json"


@lru_cache(maxsize=1)
def _names() -> tuple[str, ...]:
    root = resources.files(__name__)
    return tuple(sorted(
        entry.name[: -len(_SUFFIX)]
        for entry in root.iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file()
    ))


@lru_cache(maxsize=None)
def _load(name: str) -> dict:
    text = resources.files(__name__).joinpath(name + _SUFFIX).read_text(encoding="utf-8")
    return json.loads(text)


def names() -> list[str]:
    """Sorted names of the bundled templates (e.g. ``"hermes"``, ``"qwen3"``, ``"gpt_oss"``)."""
    return list(_names())


def get(name: str) -> dict:
    """A deep copy of the bundled response template `name`.

    Raises `KeyError` (listing the available names) when no template of that name is bundled.
    """
    if not isinstance(name, str) or name not in _names():
        raise KeyError(f"No bundled response template named {name!r}; available: {', '.join(_names())}")
    return copy.deepcopy(_load(name))
