"""Bundled response templates for common chat-model families.

Each `<name>.json` file beside this module holds one family's response template, verified against the
reference implementation (transformers 5.23.0) on the format corpus (`tests/data/corpus.json`,
described in `tests/data/FORMATS.md`): every corpus case gives its expected message in both. Most are the
corpus's templates changed in the base format where real outputs fell into a gap (content on both sides of a
tool call joined by a blank line, header variants, closing tags inside argument values); tests/test_corpus.py
lists each changed family with the reason and tests/test_template_gaps.py pins each gap. The test cases
themselves are not shipped with the package.

    >>> from chatparse import parse_response, templates
    >>> templates.names()[:3]
    ['cohere', 'deepseek_r1', 'deepseek_v3']
    >>> message = parse_response(output, templates.get("qwen3"), prefix=chat_prompt)  # doctest: +SKIP

`get()` returns a fresh deep copy on every call, so callers may modify the result freely. `for_model()` finds
the family of a model from its Hugging Face id or its tokenizer config.
"""

from __future__ import annotations

import copy
import json
import os
import re
from functools import lru_cache
from importlib import resources

from .fingerprints import family_of_chat_template

__all__ = ["names", "get", "for_model", "family_of", "family_of_chat_template"]

_SUFFIX = ".json"
SERVING_OVERRIDES_FILE = "serving_overrides.json"  # not a template: per family, the keys `serving` merges in


@lru_cache(maxsize=1)
def _names() -> tuple[str, ...]:
    root = resources.files(__name__)
    return tuple(sorted(
        entry.name[: -len(_SUFFIX)]
        for entry in root.iterdir()
        if entry.name.endswith(_SUFFIX) and entry.is_file() and entry.name != SERVING_OVERRIDES_FILE
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


@lru_cache(maxsize=1)
def _serving_overrides() -> dict:
    text = resources.files(__name__).joinpath(SERVING_OVERRIDES_FILE).read_text(encoding="utf-8")
    return json.loads(text)


def serving(name: str) -> dict:
    """A deep copy of the *serving-grade* template of family `name`: the bundled template (`get`) with the
    family's keys from ``serving_overrides.json`` merged in, field by field (a ``null`` value removes the key).

    The base-format template (`get`) parses what transformers' reference parses, and is what belongs in a
    ``tokenizer_config.json``. The serving-grade one parses what the model emits the way vLLM's and SGLang's
    own per-model parsers do, with the format extensions that need (FORMAT.md, "Extensions"): a malformed
    tool call kept as content instead of failing the message, pythonic calls, text after a JSON call, JSON
    arguments given as a string, ... . transformers refuses a template that uses an extension; chatparse, its
    tables and its JS runtime read it. A family without serving keys gets its base template. `for_model`,
    the CLI, ``parse-file`` and the vLLM plugin use this one by default (README, "Which template").

    Raises `KeyError` (listing the available names) when no template of that name is bundled."""
    return merge_fields(get(name), _serving_overrides().get(name, {}))


def merge_fields(template: dict, overrides: dict) -> dict:
    """`template` with `overrides` (``{field: {key: value}}``) merged in, key by key, in place: a ``null`` value
    removes the key, a field not in the template is added. Returns `template`."""
    for field, keys in overrides.items():
        target = template["fields"].setdefault(field, {})
        for key, value in keys.items():
            if value is None:
                target.pop(key, None)
            else:
                target[key] = copy.deepcopy(value)
    return template


BASE_SUFFIX = ":base"


def is_name(arg) -> bool:
    """`arg` names a bundled template as `by_name` reads it (``qwen3`` or ``qwen3:base``)."""
    return isinstance(arg, str) and (arg[: -len(BASE_SUFFIX)] if arg.endswith(BASE_SUFFIX) else arg) in _names()


def by_name(arg: str) -> dict:
    """The bundled template a name on a command line or in a config means: ``qwen3`` its serving-grade template
    (`serving`: "parse this model's output"), ``qwen3:base`` its base-format one (`get`). Raises `KeyError`
    listing the names."""
    if isinstance(arg, str) and arg.endswith(BASE_SUFFIX):
        return get(arg[: -len(BASE_SUFFIX)])
    return serving(arg)


# Model ids to families, first match wins (more specific before more general). Each row: a regex searched in
# the model id (case-insensitive; the organisation part is optional), and the family. From the families'
# model lists in tests/data/FORMATS.md.
_MODEL_FAMILIES: tuple[tuple[str, str], ...] = (
    (r"qwen3[-_.]?coder|qwen3\.5|qwen3[-_]next", "qwen3_coder"),
    (r"qwen3|qwq", "qwen3"),
    (r"qwen2\.5|hermes[-_ ]?[23]", "hermes"),
    (r"deepseek[-_]?v3\.2", "deepseek_v32"),
    (r"deepseek[-_]?v3\.1", "deepseek_v31"),
    (r"deepseek[-_]?r1", "deepseek_r1"),
    (r"deepseek[-_]?v3", "deepseek_v3"),
    (r"kimi[-_]?vl.*think|kimi[-_]?k1\.5", "kimi_vl_think"),
    (r"kimi[-_]?k2", "kimi_k2"),
    (r"glm[-_]?4\.[56]", "glm45"),
    (r"glm[-_]?4\.7|glm[-_]?5", "glm47"),
    (r"minimax[-_]?m2", "minimax_m2"),
    (r"minimax[-_]?(m1|text[-_]?01)", "minimax_m1"),
    (r"nemotron", "nemotron_json"),
    (r"xlam", "xlam"),
    (r"llama[-_]?3\.[123]", "llama3_json"),
    (r"lfm2", "lfm2"),
    (r"magistral|devstral|ministral[-_]?3|mistral[-_]?small[-_]?3\.[12]", "mistral_v11"),
    (r"mistral[-_]?7b|mixtral|mistral[-_]?nemo", "mistral_pre_v11"),
    (r"gpt[-_]?oss", "gpt_oss"),
    (r"command[-_]?(r7b|a)|c4ai[-_]command", "cohere"),
    (r"granite[-_]?20b[-_]?function", "granite_20b_fc"),
    (r"granite[-_]?4", "granite4"),
    (r"granite[-_]?3", "granite3"),
    (r"internlm2", "internlm2"),
    (r"jamba", "jamba"),
    (r"phi[-_]?4[-_]?mini", "phi4_mini"),
    (r"functiongemma", "functiongemma"),
    (r"gemma[-_]?4", "gemma4"),
    (r"seed[-_]?oss", "seed_oss"),
    (r"hunyuan[-_]?a13b", "hunyuan_a13b"),
    (r"step[-_]?3", "step3"),
    (r"ernie[-_]?4\.5", "ernie45"),
    (r"smollm3", "smollm3"),
    (r"longcat", "longcat"),
    (r"gigachat[-_]?3", "gigachat3"),
)


def family_of(model: str) -> str | None:
    """The bundled family of a model id such as ``"Qwen/Qwen3-8B"`` (or a local path ending in one), or None
    when no bundled family is known for it. Matching is by name only (`_MODEL_FAMILIES`, most specific
    first): a fine-tune that changed its output format is not told apart from its base."""
    if not isinstance(model, str):
        raise TypeError(f"model must be a model id (str), got {type(model).__name__}")
    name = model.rstrip("/\\").replace("\\", "/")
    for pattern, family in _MODEL_FAMILIES:
        if re.search(pattern, name, re.IGNORECASE):
            return family
    return None


def for_model(model, *, base: bool = False) -> dict:
    """The response template for a model: `model` is a model id (``"Qwen/Qwen3-8B"``), a tokenizer directory,
    or a tokenizer config (the dict of ``tokenizer_config.json``, or a tokenizer object).

    A tokenizer config's own ``response_template`` wins (the model's authors wrote it); otherwise the family is
    found from the model id (`family_of`; a config's ``name_or_path``) and its bundled template returned (a
    fresh copy): its serving-grade template (`serving`), or with ``base=True`` its base-format one (`get`).
    Raises `KeyError` naming the model when neither gives a template."""
    config, name = None, None
    if isinstance(model, str):
        path = os.path.join(model, "tokenizer_config.json")
        if os.path.isdir(model) and os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                config = json.load(f)
            name = config.get("name_or_path") or config.get("_name_or_path") or model
        else:
            name = model
    elif isinstance(model, dict):
        config = model
        name = config.get("name_or_path") or config.get("_name_or_path")
    else:  # a tokenizer object (transformers): its response_template and its name
        template = getattr(model, "response_template", None)
        if isinstance(template, dict):
            return copy.deepcopy(template)
        name = getattr(model, "name_or_path", None)
    if config is not None and isinstance(config.get("response_template"), dict):
        return copy.deepcopy(config["response_template"])
    family = family_of(name) if isinstance(name, str) and name else None
    if family is None:
        raise KeyError(f"no response template for model {name or model!r}: its tokenizer config holds none and "
                       f"no bundled family matches its name; pass one of {', '.join(_names())} to get()")
    return get(family) if base else serving(family)
