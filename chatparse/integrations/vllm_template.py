"""The template vLLM 0.33.0 serves, derived from a checkpoint's response template without importing vLLM.

vLLM's adapter (`vllm.parser.response_template`) does not parse with the tokenizer config's template as it
is: it parses with its streaming form (`_streaming_template`): every field optional, and an implicit
``content`` field added when every field has an open delimiter. The plugin also serves the format's own name
for reasoning, ``reasoning_content``, under vLLM's name, ``thinking`` (`serving_template`). `serving_variant`
is both steps, as a template dict, so that ``chatparse compile DIR --vllm`` can write the variant's tables
(``response_template.vllm.cpt``) beside the tokenizer where vLLM is not installed, and the plugin loads
them instead of compiling at start-up (`chatparse.integrations.vllm`). tests/test_vllm_plugin.py checks the
variant against vLLM's own `_streaming_template` for every bundled template vLLM serves.
"""

from __future__ import annotations

import copy

THINKING_FIELD = "thinking"  # vLLM's name for the reasoning field
CONTENT_FIELD = "content"
REASONING_ALIASES = ("reasoning_content",)  # served as `thinking`
SERVING_TABLES_NAME = "response_template.vllm.cpt"


def serving_template(template: dict | None) -> dict | None:
    """`template` with its reasoning field under the name vLLM serves (``reasoning_content`` -> ``thinking``)
    and its content field without ``repeats``/``join``, else unchanged; None stays None.

    The content keys: vLLM's adapter builds the served content from the content field's region chunks, every
    segment's, streamed or not (`_ResponseStream._route`); it never reads the message dict, which is all a
    content `join` changes (the bundled templates join content segments around tool calls, issue #17). vLLM
    refuses the keys on content all the same, so the template it is handed goes without them: what it serves
    is what it would serve with them."""
    if not isinstance(template, dict) or not isinstance(template.get("fields"), dict):
        return template
    template = _content_unjoined(template)
    fields = template["fields"]
    alias = next((a for a in REASONING_ALIASES if a in fields), None)
    if alias is None or THINKING_FIELD in fields:
        return template
    out = dict(template)
    out["fields"] = {(THINKING_FIELD if k == alias else k): v for k, v in fields.items()}
    if isinstance(out.get("defaults"), dict) and alias in out["defaults"]:
        out["defaults"] = {(THINKING_FIELD if k == alias else k): v for k, v in out["defaults"].items()}
    return out


def _content_unjoined(template: dict) -> dict:
    """`template` itself when its content field has no ``join``; else a copy whose content field has neither
    ``join`` nor ``repeats`` (a shallow copy down to that field; the others are shared)."""
    content = template["fields"].get(CONTENT_FIELD)
    if not isinstance(content, dict) or "join" not in content:
        return template
    out = dict(template)
    out["fields"] = dict(template["fields"])
    out["fields"][CONTENT_FIELD] = {k: v for k, v in content.items() if k not in ("join", "repeats")}
    return out


def text_joins(template: dict) -> dict:
    """The ``join`` of each text field of `template` that joins its repeats (``content``, and the reasoning
    field under vLLM's name ``thinking``): what the plugin streams between two regions of the field."""
    fields = template.get("fields") if isinstance(template, dict) else None
    out = {}
    for name, field in (fields or {}).items():
        if not isinstance(field, dict) or not isinstance(field.get("join"), str) or field.get("content", "text") != "text":
            continue
        served = THINKING_FIELD if name in REASONING_ALIASES else name
        if served in (THINKING_FIELD, CONTENT_FIELD):
            out[served] = field["join"]
    return out


def vllm_view(template: dict) -> dict:
    """`template` (a `serving_template`) as vLLM's adapter reads it when chatparse parses: a template vLLM's
    own loader and startup check accept, with the same fields and delimiters.

    The plugin parses with chatparse's compiled template; vLLM's adapter only routes chatparse's events by
    field, and reads a field's delimiter literals (when to hand out a match that ends at the end of the text,
    the closer rest at the end of a stream, the reasoning closer's token ids), the thinking field's
    ``repeats`` (reasoning that may come back never ends) and the start anchor. So the view keeps those and
    drops what vLLM's loader refuses and never uses here: the format extensions' keys, the value keys of a
    field whose content parser is an extension's (``content``, ``content_args``, ``transform``,
    ``transform_each``), a table's ``version``/``extensions`` marks, and the reasoning field's ``join`` and
    ``repeats`` (vLLM refuses a joined reasoning field, and with ``repeats`` it would never call reasoning
    ended; gpt-oss's analysis channel is both, and its end is then the last region's, as for any field). A
    template that uses none of these is returned as it is (a copy)."""
    from chatparse.runtime.values import extensions

    ext_keys, ext_content = set(extensions.field_keys()), set(extensions.content_names())
    out = {k: v for k, v in copy.deepcopy(template).items() if k not in ("version", "extensions")}
    for name, field in out["fields"].items():
        if not isinstance(field, dict):
            continue
        dropped = set(ext_keys)
        if field.get("content") in ext_content:
            dropped |= {"content", "content_args", "transform", "transform_each"}
        if name == THINKING_FIELD:
            dropped |= {"join", "repeats"}
        for key in dropped & set(field):
            del field[key]
    return out


def serving_variant(template: dict) -> dict:
    """The template vLLM's adapter parses with when serving `template` through the plugin: the reasoning
    field renamed (`serving_template`), then vLLM's streaming form (every field optional; an implicit
    ``content`` field added when every field has an open delimiter). A new dict; `template` is unchanged."""
    if not isinstance(template, dict) or not isinstance(template.get("fields"), dict):
        raise TypeError("serving_variant takes a response template dict with a 'fields' object")
    out = copy.deepcopy(serving_template(template))
    fields = out["fields"]
    if CONTENT_FIELD not in fields and all(
            isinstance(f, dict) and ("open" in f or "open_pattern" in f) for f in fields.values()):
        fields[CONTENT_FIELD] = {}
    for field in fields.values():
        field["optional"] = True
    return out


def compile_serving_dir(directory, *, tokenizer=None):
    """Write the tables of `directory`'s template as vLLM serves it (`serving_variant`) to
    `directory`/response_template.vllm.cpt, with token tables for the directory's tokenizer.json (or
    `tokenizer`); returns the path."""
    from chatparse import tokenizer_dir

    variant = serving_variant(tokenizer_dir._config_template(directory))
    return tokenizer_dir.compile_dir(directory, tokenizer=tokenizer, template=variant, name=SERVING_TABLES_NAME)
