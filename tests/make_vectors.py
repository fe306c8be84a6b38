"""Conformance vectors for ports of the chatparse runtime: generate them, and check them in Python.

    python tests/make_vectors.py            # (re)write tests/vectors/
    python tests/make_vectors.py --check    # run every vector through the Python runtime (exit 1 on failure)
    node js/run_vectors.mjs tests/vectors   # the same vectors through the JavaScript runtime
    python tests/make_vectors.py --fuzz N --seed S [--dialect vllm] --dir D   # random differential vectors
    python tests/make_vectors.py --tokens [--only NAMES]  # (re)write only the token-mode vectors

A *template vector* is ``<name>.json`` plus ``<name>.cpt`` (the tables file, FORMAT.md)::

    {"kind": "template", "name", "template": <the template as written>, "tables": "<name>.cpt",
     "template_sha256": <hex>,
     "cases": [{"id", ["dialect": "vllm",] "prefix", "tools": list | null, "feeds": [str, ...],
                ["input_start": int,]                                 # with a dialect
                "initial_events": [...], "feed_events": [[...] per completed feed],
                "final_events": [...], "message": {...},          # when the parse succeeds
                "error": null | {"type": "ValueError", "stage": "init" | "feed" | "finalize", "index": int},
                ["oneshot": {"message": {...}} | {"error": E}]}]}  # with a dialect, on a case's whole text
    E = {"type": <Python exception class>, "message": str[, "loose": true]}

Everything is what chatparse itself produces: `ResponseParser(template, prefix=..., tools=...)`, each feed's
events, `finalize()`. Values that JSON cannot hold are tagged: a non-finite float is
``{"$py": "float", "v": "nan" | "inf" | "-inf"}`` and an integer outside +-2**53 is ``{"$py": "int", "v": "<digits>"}``.

**Dialects.** A case with ``"dialect"`` is parsed with ``ResponseParser(..., dialect=<it>)`` (absent: the
default, transformers'). In ``"vllm"`` (vLLM 0.33.0's serving dialect, `chatparse.runtime.stream.dialect`) the events
carry ``start``/``end`` (code-point offsets into `input_text`) and explicit opens ``captures``; a region whose
value fails ends with ``{"type": "region_malformed", "field", "start", "end", "error": E}`` and the parse goes
on; prompt characters held back and released later are left out of the chunks. ``input_start`` is
``len(input_text)`` before the first feed (a runner also checks that `input_text` ends as that prefix plus
every feed), and ``oneshot`` is ``parse_response(whole text, ..., dialect=<it>)`` (the whole text parsed, then
a missing required field raised, else the first malformed region's error).

**Errors in events** (E): the Python class, and the message the exception was raised with (its one string
argument). A port must reproduce the class always, and the message word for word unless E says ``"loose"``.
Exact are chatparse's own messages about the template ("Field '...': 'join' requires ...", "transform
placeholder '{...}' ...", "Required response_template fields missing ...") when they are printable ASCII
without escapes and name no float type; loose is everything else: the wording of Python's json module (it
changes between Python versions), of int()/float(), a region body quoted with repr(), a repr with escapes
(they follow Python's Unicode tables), and float/int type names (a port may not tell 1.0 from 1). The
``error`` of a case (an exception that ends the parse) is compared by class, stage and feed index only.

**Token-mode vectors** (kind "tokens", ``<name>.tok-<vocab>.json`` plus ``<name>.tok-<vocab>.cpt``: the
tables file of template vector ``<name>`` WITH a token section, FORMAT.md section 8) feed token ids::

    {"kind": "tokens", "name": <the template vector's name>, "vocab": "bl" | "sp" | "uc",
     "tables": "<name>.tok-<vocab>.cpt", "template_sha256": <hex>, "vocab_sha256": <hex>, "vocab_size": V,
     "cases": [{"id", ["dialect": "vllm",] "prefix": str | "prefix_ids": [int, ...], "tools": list | null,
                "feeds": [[id, ...], ...],                    # each feed a list of ids, fed in one call
                "texts": [str per feed, str],                 # the decoded text each feed releases, then finalize's
                ["input_start": int,]                         # with a dialect
                "initial_events", "feed_events", "final_events", "message", "error",   # as template cases
                ["oneshot": {"message": {...}} | {"error": E}]}]}  # the one-shot parse of all the ids

Everything is what chatparse's token parser produces from the tables file alone:
``TokenParser(token_binding(CompiledTemplate(raw["template"], raw)), prefix=... | prefix_ids=..., tools=...,
dialect=...)``, ``feed_tokens(feed)`` per feed, ``finalize()``; ``oneshot`` is ``binding.parse(all ids, ...)``
(`chatparse.parse_tokens`). A ``prefix_ids`` prompt is decoded whole (the vocabulary's decode of those ids) and
cut like a text prompt; the generation's decode starts fresh after it. ``texts`` is the incremental decode
(`chatparse.runtime.tokens.decode._Decoder`): bytes of a character split across tokens are held until it is
complete (a feed may release ""), invalid UTF-8 is one U+FFFD per maximal invalid subpart, ByteFallback runs,
Metaspace first-token texts, ``strip_start`` and transformers' clean-up are applied as the token section says.
A case with an id outside ``0 <= id < V`` ends with ``{"type": "ValueError", "stage": "feed", "index"}``
(``texts`` then stops before that feed). ``--check`` also verifies the reference property on every case that
succeeds: `ResponseParser` fed ``texts`` (the last one before ``finalize``) gives the same events and message,
so a port's token engine may be its decoder in front of its character engine, and any fast path it takes
must keep those events. The vocabularies (`TOKEN_VOCABS`) are real tokenizers trained at generation time with
the `tokenizers` library on the token tests' training text (tests/token_support.py): ``bl`` byte-level BPE
(900 ids, the corpus's delimiters as special tokens: whole-delimiter tokens; `bytes` kind) for every bundled
and hand-written template; ``sp`` SentencePiece-style BPE with ``<0xXX>`` byte fallback (700 ids, no special
tokens: delimiters cut across tokens; `pieces` kind, ``strip_start`` 1) for every other bundled family; ``uc``
Unigram + Metaspace in transformers' ``PreTrainedTokenizerFast`` with ``clean_up_tokenization_spaces`` (500
ids, the vocabulary of a Metaspace BPE trained here: first-token texts, clean-up) for six families; training
is deterministic, so rewriting the vectors gives the same files. Per template: its first four (``bl``) or
three cases, each as encoded and fed in random runs of 1-3 ids (the first with its prompt as ids, where it
has one); the first again fed one id at a time, with some tokens replaced by their single-byte tokens
(characters split across feeds; not for ``uc``, which has no byte tokens); the second with random tokens
inserted (lone bytes, special tokens: U+FFFD, errors); the first in the vllm dialect (whole, with
``oneshot``, and in runs of 1-4 ids); with ``uc``, the first again with a space put before its punctuation
(which the clean-up takes out), one id at a time; qwen3 and x_misc add an id out of range.

``values.json`` (kind "values") holds content-parser and tool-argument-coercion cases:
``{"parser", "args", "text", "expect" | "error"}`` and ``{"coerce", "types", "expect" | "error"}``.
``regex.json`` (kind "regex") holds, per pattern, its JavaScript translation (as in a tables file's port
section) and Python `regex.finditer` results on sample texts: ``[start, end, groupdict]`` with code-point
offsets: ``{"patterns": [{"pattern", "translation", "cases": [{"text", "expect"}]}]}``.

Templates: every bundled template (`chatparse.templates`) with its cases from the format corpus (tests/data) and its
gap cases (tests/test_template_gaps.py: outputs in the families' documented formats that the corpus templates
got wrong), the fixtures of tests/fixtures_templates.py, and the hand-written templates below, which exercise
what the corpus does not (number/bool/kv-lines/json dialects, tool-argument typing, lookbehind, word boundaries,
case-insensitive and multi-line patterns, backreferences, atomic groups, astral characters, required fields,
the zero-width stall, bodies that fail to parse, zero-width opens and closes). Each case is fed whole and in
seeded random chunkings; then again in the vllm dialect (`dialect_cases`: every hand-written case, two of
each bundled template's, whole and cut at random places, plus prompts that end inside a delimiter).
Lookbehind-led delimiters (llama3_json, minimax_m1, xlam, the hand-written ones) also check the start guard
(`chatparse.runtime.regex.lead_assert`): their per-feed events change without it.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import re
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))

VECTORS = HERE / "vectors"

# ---------------------------------------------------------------------------------------------- hand-written

VALUES_T = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<<ASSISTANT>>",
    "fields": {
        "count": {"open": "<n>", "close": "</n>", "content": "int"},
        "score": {"open": "<f>", "close": "</f>", "content": "float"},
        "flag": {"open": "<b>", "close": "</b>", "content": "bool"},
        "meta": {"open": "<meta>", "close": "</meta>", "content": "kv-lines"},
        "sizes": {"open": "<sizes>", "close": "</sizes>", "content": "kv-lines",
                  "content_args": {"line_sep": ";", "kv_sep": "=", "value_parser": {"name": "int"}}},
        "args": {"open": "<args>", "close": "</args>", "content": "json",
                 "content_args": {"unquoted_keys": True, "string_delims": [["<s>", "</s>"]], "allow_non_json": True}},
        "notes": {"open": "📝", "close": "🔚", "repeats": True, "join": " | ", "content_args": {"strip": False}},
        "content": {},
    },
}
VALUES_CASES = [
    ("basic", "x<<ASSISTANT>>", "<n> 42 </n><f>1_000.5</f><b>TRUE</b>Hello 🌍 world"),
    ("unicode_digits", "", "<n>٤٢</n><f>\u2003-inf\u2003</f><b>0</b>"),
    ("nan", "", "<f>nan</f> and <n>+7</n>"),
    ("kv", "", "<meta>name: alice\nage: 30\n\nbad line\nurl: http://x:80</meta><sizes>a=1; b = 22 ;c=3</sizes>"),
    ("json_dialects", "", '<args>{city: <s>Lon"don</s>,n: 3,nested: {deep: [1, 2.5, NaN, -0.0]}}</args>'),
    ("json_dialects_spaced", "", '<args>{city: <s>Lon"don</s>, n: 3}</args>'),
    ("json_fallback", "", "<args>  not json at all  </args>tail"),
    ("notes_join", "", "📝 first 🔚between📝second😀🔚 end"),
    ("int_error", "", "<n>forty-two</n>"),
    ("kv_error", "", "<sizes>a=1;b=x</sizes>"),
    ("astral_everywhere", "", "😀😀📝😀🔚<n>𝟒𝟐</n>😀"),
]

REGEX_T = {
    "defaults": {"role": "assistant"},
    "start_anchor_pattern": r"<\|im_start\|>assistant\s*",
    "fields": {
        "reasoning_content": {"open": "<think>", "close_pattern": r"\s*</think>\s*|\bDONE"},
        "tool_calls": {
            "open_pattern": r"(?i:<call)\s+name=(?P<q>[\"'])(?P<name>\w+)(?P=q)\s*>",
            "close_pattern": r"\s*</call>|(?<=\})\s*;",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "code": {
            "open_pattern": r"```(?P<lang>\w*)\n",
            "close": "```",
            "repeats": True,
            "content_args": {"strip": False},
            "transform": {"lang": "{lang}", "code": "{content}"},
        },
        "answer": {"open_pattern": r"(?m)^ANSWER:[ \t]*", "close_pattern": r"[ \t]*$"},
        "content": {"close_pattern": r"\s*(?:<\|im_end\|>|(?>END)(?!\w))"},
    },
}
REGEX_CASES = [
    ("think_done", "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
     "<think>plan it DONE now <CALL name=\"get\">{\"a\": 1}</call> after<|im_end|>"),
    ("word_boundary", "", "<think>UNDONE things, then DONE.</think>rest"),
    ("semicolon_close", "", "<call name='f1'>{\"x\": [1]}; <call name=\"f2\" >{}</call>"),
    ("backref_mismatch", "", "<call name=\"f1'>{}</call> plain"),
    ("code_blocks", "", "Intro\n```python\nprint('hi')\n```\n```\nraw\n```\nbye"),
    ("multiline_answer", "", "Some text\nANSWER: 42\nmore\nANSWER:last"),
    ("atomic_end", "", "text ENDING here END"),
    ("anchor_multi", "<|im_start|>assistant\nold<|im_end|><|im_start|>assistant  \n", "<think>x</think>y"),
    ("unicode_word", "", "<think>Ünïcödé DONE</think><call name=\"naïve_名前\">{\"k\": \"v\"}</call>"),
]

XML_T = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "tool_calls": {
            "open_pattern": r"<tool_call>\s*<function=(?P<name>[^>\s]+)>",
            "close_pattern": r"</function>\s*</tool_call>",
            "repeats": True,
            "content": "xml-inline",
            "content_args": {
                "tag_pattern": r"<parameter=(?P<key>[^>]+)>\s*(?P<value>.*?)\s*</parameter>",
                "value_parser": {"name": "json", "args": {"allow_non_json": True}},
                "merge_duplicates": True,
            },
            "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "attrs": {
            "open": "<attrs>",
            "close": "</attrs>",
            "content": "xml-inline",
            "content_args": {"tag_pattern": r"(?P<key>\w+)=(?P<q>[\"'])(?P<value>.*?)(?P=q)"},
        },
        "content": {},
    },
}
XML_TOOLS = [
    {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
        "hour": {"type": "integer"}, "minutes": {"type": ["integer", "null"]}, "enabled": {"type": "boolean"},
        "ratio": {"type": "number"}, "tags": {"type": "array"}, "opts": {"type": "object"},
        "label": {"type": "string"}, "maybe": {"anyOf": [{"type": "integer"}, {"type": "string"}], "nullable": True},
        "many": {"type": "integer"}}}}},
    {"name": "bare_tool", "parameters": {"properties": {"n": {"type": "number"}}}},
]
XML_CASES = [
    ("typed_args", "", "<tool_call><function=set_alarm><parameter=hour>7</parameter><parameter=minutes>null</parameter>"
     "<parameter=enabled>True</parameter><parameter=ratio>2.50</parameter><parameter=tags>[\"a\", \"b\"]</parameter>"
     "<parameter=opts>{\"x\": 1}</parameter><parameter=label>wake up</parameter><parameter=maybe>None</parameter>"
     "<parameter=many>1</parameter><parameter=many>2.0</parameter><parameter=many>x</parameter>"
     "</function></tool_call>", XML_TOOLS),
    ("untyped", "", "<tool_call>\n<function=other>\n<parameter=a>\n{\"k\": [1, 2]}\n</parameter>\n</function>\n"
     "</tool_call>\nok", None),
    ("bare_tool", "", "<tool_call><function=bare_tool><parameter=n>1e3</parameter></function></tool_call>", XML_TOOLS),
    ("attrs", "", "<attrs>a=\"1\" b='two words' c=\"mis'match' d=\"😀\"</attrs>", None),
]

MISC_T = {
    "defaults": {"role": "assistant", "extra": []},
    "start_anchor": ["<BOS>", "<START>"],
    "fields": {
        "answer": {"open": "<a>", "close": "</a>", "optional": False},
        "items": {"open": "<items>", "close": "</items>", "content": "json", "transform_each": True,
                  "transform": {"id": "{id}", "label": "{name}", "const": 1}},
        "joined": {"open": "<j>", "close": "</j>", "repeats": True, "join": "", "content": "json"},
    },
}
MISC_CASES = [
    ("ok", "<START>junk<BOS>", "ignored <a>yes</a> dropped <items>[{\"id\": 1, \"name\": \"x\"}]</items>"),
    ("missing_required", "", "<items>[]</items>"),
    ("transform_each_error", "", "<a>x</a><items>{\"id\": 1}</items>"),
    ("join_not_string", "", "<a>x</a><j>\"s\"</j><j>[1]</j>"),
    ("transform_missing_key", "", "<a>x</a><items>[{\"id\": 1}]</items>"),
    ("no_anchor_in_prefix", "no anchor here <a>", "inside</a>"),
]

STALL_T = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<s>",
    "fields": {
        "content": {"close_pattern": r"(?=<stop>)|(?=!!)"},
        "tail": {"open": "<stop>", "close": "</stop>"},
    },
}
STALL_CASES = [
    ("stall_at_start", "", "<stop>never parsed</stop>"),
    ("close_then_open", "", "hello<stop>inside</stop> after"),
    ("stall", "<s>", "!!never parsed <stop>x</stop>"),
    ("stall_later", "", "text!!more"),
]

MALFORMED_T = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|assistant|>",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>"},
        "tool_calls": {
            "open_pattern": r"<call(?: id=(?P<id>\d+))? name=(?P<name>[\w.]+)>",
            "close": "</call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "id": "{id}", "function": {"name": "{name}", "arguments": "{content}"}},
        },
        "score": {"open": "<score>", "close": "</score>", "content": "float", "optional": False},
        "tags": {"open": "<tag>", "close": "</tag>", "repeats": True, "join": ", ", "content": "json"},
        "point": {"open": "<pt>", "close": "</pt>", "content": "json", "transform": {"x": "{content.pos.x}"}},
        "items": {"open": "<items>", "close": "</items>", "content": "json", "transform_each": True,
                  "transform": {"id": "{id}"}},
        "meta": {"open": "<meta>", "close": "</meta>", "content": "kv-lines",
                 "content_args": {"value_parser": {"name": "int"}}},
        "content": {"close": "<|end|>"},
    },
}
MALFORMED_CASES = [
    ("all_good", "<|assistant|>", '<think>hm</think><call id=1 name=f>{"a": 1}</call><score>0.5</score>'
     '<tag>"x"</tag><tag>"y"</tag><pt>{"pos": {"x": 3}}</pt><items>[{"id": 1}]</items>done<|end|>'),
    ("bad_json", "", '<call id=2 name=f>{"a": 1,}</call>after<score>1</score>'),
    ("uncaptured_placeholder", "", "<call name=g>{}</call><score>2</score>"),
    ("join_non_string", "", '<tag>"a"</tag><tag>[1, 2]</tag><tag>"b"</tag><score>3</score>'),
    ("index_non_dict", "", '<pt>{"pos": 5}</pt><score>1</score>'),
    ("missing_key", "", '<pt>{"pos": {"y": 1}}</pt><score>1</score>'),
    ("transform_each", "", '<items>{"id": 1}</items><items>[1]</items><score>1</score>'),
    ("bad_required", "", "<score>high</score>text"),
    ("missing_and_malformed", "", "<call name=g>{}</call>"),
    ("kv_bad", "", "<meta>a: 1\nb: two</meta><score>1</score>"),
    ("malformed_at_end", "", '<score>1</score><call id=3 name=h>{"unterminated": '),
    ("unicode_offsets", "x<|assistant|>😀", '😀<think>é😀</think><score>1e1</score>名<call id=9 name=x.y>{"k": "😀"}'
     "</call>😀<|end|>"),
    ("malformed_then_more", "", '<call id=1 name=a>nope</call><call id=2 name=b>{"ok": true}</call><score>1</score>'),
]

ZERO_WIDTH_T = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<s>",
    "fields": {
        "tool_calls": {"open_pattern": r"(?=\[\{)", "close_pattern": r"(?<=\}\])", "repeats": True, "content": "json"},
        "notes": {"open_pattern": r"NOTE:(?P<level>[A-Z]+)?[ \t]*", "close_pattern": r"(?=\n)", "repeats": True,
                  "transform": {"level": "{level}", "text": "{content}"}},
        "content": {},
    },
}
ZERO_WIDTH_CASES = [
    ("calls", "<s>", 'Sure [{"name": "a"}] and [{"name": "b"}]'),
    ("adjacent_calls_loop", "", '[{"a": 1}][{"b": 2}] never parsed'),
    ("bad_call", "", "[{oops}] after"),
    ("notes", "", "x NOTE:WARN careful\nNOTE: plain\nend"),
    ("prompt_inside_open", "<s>text [", '{"k": 1}] tail'),
]

HAND = {
    "x_values": (VALUES_T, VALUES_CASES),
    "x_regex": (REGEX_T, REGEX_CASES),
    "x_xml_tools": (XML_T, XML_CASES),
    "x_misc": (MISC_T, MISC_CASES),
    "x_stall": (STALL_T, STALL_CASES),
    "x_malformed": (MALFORMED_T, MALFORMED_CASES),
    "x_zero_width": (ZERO_WIDTH_T, ZERO_WIDTH_CASES),
}

# ---------------------------------------------------------------------------------------------- values.json

VALUE_TEXTS = [
    "42", " 42 ", "+7", "-0", "007", "1_000", "_1", "1__0", "1_", "٤٢", "𝟒𝟐", "３", "\u2003 5 \u2003", "\x1c5", "5\x1c",
    "\x855", "1e5", "1.5", ".5", "5.", ".", "-.5e-3", "1_0.5", "1._5", "inf", "-Infinity", "NaN", "nan ", "+nan",
    "0x10",
    "١٢.٥", "true", "TRUE", "1", "0", "yes", "", "   ", "\t\n", "İ", "12345678901234567", "1e400", "-1e-400",
    '{"a": 1, "a": 2, "b": [1, 2.0, -0.0, 1e2]}', '[NaN, Infinity, -Infinity]', '"\\ud83d\\ude00 \\u00e9 \\n"',
    '"\\ud83d"', '{"x": "tab\there"}', '[1, 2,]', '{"a" 1}', "\ufeff{}", " [ ] ", '{"k": tru}', "01", "-", "1.5e",
    '{"nested": {"deep": {"deeper": [[[]]]}}}', '"unterminated', '{"a": 1} extra', '{"__proto__": 5, "x": 1}',
    "{name: \"v\", n2: 3}", "{ spaced: 1}", "{ünï: 1}", '{"k": <s>a "b" c</s>}', "name: alice\nage: 30",
    "a=1;b=2", "k: v: w\n\n  : empty key\nnocolon", "x" * 40,
]
VALUE_ARGS = {
    "text": [{}, {"strip": False}, {"strip": 0}, {"strip": []}, {"strip": "no"}],
    "int": [{}, {"strip": False}],
    "float": [{}, {"strip": False}],
    "bool": [{}, {"strip": False}],
    "json": [{}, {"allow_non_json": True}, {"unquoted_keys": True}, {"string_delims": [["<s>", "</s>"]]},
             {"string_delims": [["<s>", "</s>"]], "unquoted_keys": True, "allow_non_json": True, "strip": False},
             {"string_delims": "ab"}, {"string_delims": None}],
    "kv-lines": [{}, {"strip": False}, {"line_sep": ";", "kv_sep": "="}, {"kv_sep": ""}, {"line_sep": ""},
                 {"line_sep": None}, {"value_parser": {"name": "int"}}, {"value_parser": {"name": "nope"}},
                 {"value_parser": {"name": "json", "args": {"allow_non_json": True}}}],
}
COERCE_TYPES = [["integer"], ["number"], ["boolean"], ["null"], ["object"], ["array"], ["string"], ["integer", "null"],
                ["number", "string"], ["null", "boolean", "integer"], ["unknown"]]
COERCE_RAW = ["7", " 7 ", "7.0", "7.5", "1e3", "1_0", "nan", "inf", "True", " false ", "1", "0", "null", "None",
              '{"a": 1}', "[1, 2]", "[1,", "٣", "x", ""]


# ---------------------------------------------------------------------------------------------- regex.json

REGEX_BANK = [
    r"\w+", r"\W+", r"\d+", r"\s+", r"\S+", r"[^\s<]+", r"(?i)straße", r"(?i)[a-z]+", r"(?i:k)x", r"\bword\b",
    r"\Bor\B", r"^a", r"a$", r"(?m)^\w+$", r"\Aab", r"ab\Z", r"a.c", r"(?-s:a.c)", r"a{2,3}", r"a{2,}?",
    r"(?:ab)+?c", r"(?P<x>a|b)(?P=x)", r"(a)(b)?c", r"(?<=\})\s*;", r"(?<![a-z])\d+", r"(?=foo)f", r"x(?!y)",
    r"a++b", r"(?>a|ab)c", r"(?P<name>\w+)=(?P<value>[^;]*)", r"(?P<n>a)|(?P<n>b)", r"[é\U0001F600]+", r"😀+",
    r"\x85|\u2028", r".", r"[^\]]", r"[\]\-\\^]+", r"a|", r"(?=x)|x", r"\$\{(?P<v>\w+)\}", r"(?i)σ+",
    r"\d+(?:\.\d+)?", r"(?x) a  b # comment", r"[\w.\-]+", r"[^\W\d]+", r"\n?</x>", r"(?s).*?!",
]
REGEX_TEXTS = [
    "ab abc aab", "straße STRASSE Straße STRAẞE", "kx Kx Kx", "word words sword word", "a\nb\na", "{x}; }; ;",
    "x1 a1 12 ١٢ 𝟒", "foo fob xy xz", "aaab aab ab", "name=val;k=v;ünï=名", "ééé😀😀 x", "\x85\u2028\u2029",
    "ΣΑΣ σς", "a\nc a.c abc", "aaaa", "${var} ${2} ${}", "", "<x> \n</x></x>", "hi! there!", "1.5 2. .3",
    " \t\u2003mixed\u00a0space ", "a-b.c_d é-f",
]


def regex_cases() -> list[dict]:
    """Python `regex` finditer results (code-point spans and group dicts) for translated patterns."""
    import regex

    from chatparse import templates
    from chatparse.compiler.writer import js_section, translate_js

    from chatparse import compile_template

    sources = list(REGEX_BANK)
    for name in templates.names():
        raw = compile_template(templates.get(name)).raw_tables
        sources += [p["source"] for p in raw["patterns"]]
        sources += list(js_section(raw)["content"])
    texts_by_source = {}
    for name in templates.names():
        tpl_texts = [c.output[:300] for c in _corpus().cases if c.name == name][:3]
        raw = compile_template(templates.get(name)).raw_tables
        for src in [p["source"] for p in raw["patterns"]] + list(js_section(raw)["content"]):
            texts_by_source.setdefault(src, []).extend(tpl_texts)
    out = []
    seen = set()
    for src in sources:
        if src in seen:
            continue
        seen.add(src)
        t = translate_js(src)
        if "error" in t:
            continue
        rx = regex.compile(src, regex.DOTALL)
        cases = []
        for text in dict.fromkeys(REGEX_TEXTS + texts_by_source.get(src, [])):
            cases.append({"text": text, "expect": [[m.start(), m.end(), m.groupdict()] for m in rx.finditer(text)]})
        out.append({"pattern": src, "translation": t, "cases": cases})
    return out


def _corpus():
    import corpus_cases as cc

    return cc.load()


# ---------------------------------------------------------------------------------------------- encoding


# Messages a port must reproduce word for word: chatparse's own wording around template-given names (and the
# Python repr of printable ASCII strings and of lists of them). Anything else - the wording of Python's json
# module, of int()/float(), a region body quoted with repr(), a repr with escapes (which characters it escapes
# follows Python's Unicode tables), a float/int type name (a port may not tell 1.0 from 1) - is compared by
# class only ("loose").
_EXACT_MESSAGES = ("Field '", "transform placeholder '", "Required response_template fields missing")


def encode_error(e: BaseException) -> dict:
    """An exception as a vector holds it: ``{"type": <Python class name>, "message": <its message>}``, plus
    ``"loose": true`` where a port need only reproduce the class (see `_EXACT_MESSAGES`). The message is the
    exception's one string argument (what ``str()`` shows, without the quotes ``str(KeyError)`` adds)."""
    msg = e.args[0] if len(e.args) == 1 and isinstance(e.args[0], str) else str(e)
    out = {"type": type(e).__name__, "message": msg}
    exact = (msg.startswith(_EXACT_MESSAGES) and all(" " <= c <= "~" for c in msg) and "\\" not in msg
             and "float" not in msg)
    if not exact:
        out["loose"] = True
    return out


def encode(v):
    """Make a chatparse value JSON-safe (non-finite floats and big ints become tagged objects, exceptions
    `encode_error`'s objects)."""
    if isinstance(v, BaseException):
        return encode_error(v)
    if isinstance(v, float) and not math.isfinite(v):
        return {"$py": "float", "v": "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")}
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53:
        return {"$py": "int", "v": str(v)}
    if isinstance(v, dict):
        return {k: encode(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [encode(x) for x in v]
    return v


def decode(v):
    if isinstance(v, dict):
        if set(v) == {"$py", "v"}:
            return float(v["v"]) if v["$py"] == "float" else int(v["v"])
        return {k: decode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [decode(x) for x in v]
    return v


def _dump(obj) -> bytes:
    try:
        return json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


# ---------------------------------------------------------------------------------------------- running


def run_case(template, prefix: str, tools, feeds: list[str], dialect: str | None = None) -> dict:
    """What chatparse does with one case: events per stage, the message, or the first error. With a
    `dialect`, also where generated text begins in `input_text` (``input_start``, in code points)."""
    from chatparse import ResponseParser

    out: dict = {"initial_events": [], "feed_events": [], "error": None}
    stage, index = "init", 0
    try:
        if dialect is None:
            p = ResponseParser(template, prefix=prefix, tools=tools)
        else:
            p = ResponseParser(template, prefix=prefix, tools=tools, dialect=dialect)
            out["input_start"] = len(p.input_text)
        out["initial_events"] = p.initial_events
        stage = "feed"
        for index, f in enumerate(feeds):
            out["feed_events"].append(p.feed(f))
        stage, index = "finalize", 0
        message, final = p.finalize()
        out["final_events"] = final
        out["message"] = message
    except Exception as e:  # noqa: BLE001 - the class is what the vector records
        out["error"] = {"type": type(e).__name__, "stage": stage, "index": index if stage == "feed" else 0}
    return encode(out)


def run_oneshot(template, prefix: str, tools, text: str, dialect: str) -> dict:
    """`parse_response(text, ..., dialect=dialect)`: ``{"message"}`` or ``{"error": {"type", "message"}}``."""
    from chatparse import parse_response

    try:
        return encode({"message": parse_response(text, template, prefix=prefix, tools=tools, dialect=dialect)})
    except Exception as e:  # noqa: BLE001
        return {"error": encode_error(e)}


def chunkings(case_id: str, text: str, hand: bool) -> list[list[str]]:
    rng = random.Random(zlib.crc32(case_id.encode("utf-8")))
    out = [[text]]
    small, i = [], 0
    while i < len(text):
        n = rng.randint(1, 7)
        small.append(text[i:i + n])
        i += n
    if len(small) > 1:
        out.append(small)
    if hand and 1 < len(text) <= 200:
        out.append(list(text))
    if hand and len(text) > 40:
        cuts = sorted(rng.sample(range(1, len(text)), 3))
        out.append([text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])])
    return out


def _template_cases():
    """(name, template, [(case id, prefix, output, tools)], hand-written?) for every template vector."""
    import corpus_cases as cc
    from fixtures_templates import FIXTURES

    from chatparse import templates

    corpus = cc.load()
    for name in templates.names():
        cases = [(c.id, c.prefix, c.output, c.tools) for c in corpus.cases if c.name == name]
        cases += _gap_cases(name)
        yield name, templates.get(name), cases, False
    for name, (tpl, prefix, text, _) in sorted(FIXTURES.items()):
        yield f"f_{name}", tpl, [(f"f_{name}", prefix, text, None)], True
    for name, (tpl, cases) in HAND.items():
        yield name, tpl, [(f"{name}-{c[0]}", c[1], c[2], c[3] if len(c) > 3 else None) for c in cases], True
    yield from _extension_cases()


def _gap_cases(name: str) -> list:
    """The family's cases of tests/test_template_gaps.py: outputs that fell into gaps of the bundled templates
    (issue #17), which the corpus lacks."""
    from test_template_gaps import GAPS

    return [(f"gap-{g.id}", g.prefix, g.output, None) for g in GAPS if g.family == name]


def _extension_cases():
    """The ``ext_<extension>`` vectors, one per format extension: a template that uses it
    (tests/ext_templates.py, ext_close_templates.py, ext_list_templates.py: `VECTORS`), with its family's real cases and the extra texts of ``EXTRA_CASES``."""
    import ext_close_templates
    import ext_list_templates
    import ext_templates

    # (the value-level, the region-level and the list extensions)
    for module in (ext_templates, ext_close_templates, ext_list_templates):
        for ext, name in module.VECTORS.items():
            tpl, cases, _ = module.FAMILIES[name]
            items = [(f"ext_{name}-{c[0]}", c[1], c[2], c[3]) for c in cases]
            items += [(f"ext_{name}-{c[0]}", c[1], c[2], c[3]) for c in module.EXTRA_CASES.get(name, [])]
            yield f"ext_{ext}", tpl, items, "ext"  # (every case in the vllm dialect too; no per-character feeds)

def dialect_cases(name: str, compiled, cases: list, hand: bool, dialect: str = "vllm") -> list[dict]:
    """Cases of one template vector again in the serving `dialect`: every hand-written case (two of a bundled
    template's), whole (with the one-shot `parse_response` result) and in a seeded random chunking; then, for
    the first case with an explicit delimiter, the same text with the prompt ending inside that delimiter
    (which the generation then completes), and, where it makes a difference, with the prompt ending in the
    first characters of a delimiter that the generation does not complete (prompt text held back, then
    released: left out of the chunks)."""
    rng = random.Random(zlib.crc32(f"{dialect}:{name}".encode("utf-8")))
    picked = list(cases) if hand else [cases[i] for i in sorted(rng.sample(range(len(cases)), min(2, len(cases))))]
    out = []
    for cid, prefix, text, tools in picked:
        for k, feeds in enumerate(dialect_chunkings(cid, text)):
            case = {"id": f"{cid}/{dialect}{k}", "dialect": dialect, "prefix": prefix, "tools": tools, "feeds": feeds,
                    **run_case(compiled, prefix, tools, feeds, dialect)}
            if k == 0:
                case["oneshot"] = run_oneshot(compiled, prefix, tools, text, dialect)
            out.append(case)
    for cid, prefix, text, tools in picked:
        held = held_prompt_cases(compiled, cid, prefix, text, tools, dialect)
        if held:
            out += held
            break
    return out


def dialect_chunkings(case_id: str, text: str) -> list[list[str]]:
    """Whole, and cut at up to six seeded random places (coarser than `chunkings`: the dialect changes what
    the events say, not when they come, and the vectors stay small)."""
    rng = random.Random(zlib.crc32(("cuts:" + case_id).encode("utf-8")))
    out = [[text]]
    if len(text) > 1:
        cuts = sorted(rng.sample(range(1, len(text)), min(6, len(text) - 1)))
        out.append([text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])])
    return out


def _first_delimiter(compiled, prefix: str, text: str, tools, dialect: str):
    """Offsets in `text` of the first delimiter of at least two characters that the parse of `text` (fed
    whole after `prefix`) decides within it, or None."""
    from chatparse import ResponseParser

    try:
        p = ResponseParser(compiled, prefix=prefix, tools=tools, dialect=dialect)
        gen = len(p.input_text)
        for ev in p.feed(text):
            if "start" in ev and ev["end"] - ev["start"] >= 2 and ev["start"] >= gen:
                return ev["start"] - gen, ev["end"] - gen
    except Exception:  # noqa: BLE001 - no such case then
        return None
    return None


def held_prompt_cases(compiled, cid: str, prefix: str, text: str, tools, dialect: str) -> list[dict]:
    from dataclasses import replace

    from chatparse.runtime.stream.dialect import resolve

    span = _first_delimiter(compiled, prefix, text, tools, dialect)
    if span is None:
        return []
    s, e = span
    out = []
    feeds = dialect_chunkings(cid + "/held", text[s + 1:])[-1]
    out.append({"id": f"{cid}/{dialect}-held", "dialect": dialect, "prefix": prefix + text[:s + 1], "tools": tools,
                "feeds": feeds, **run_case(compiled, prefix + text[:s + 1], tools, feeds, dialect)})
    # A delimiter's first characters ending the prompt, then text that does not complete it: the held prompt
    # characters are released as region text by a later feed (kept out of the chunks, in the value).
    d = resolve(dialect)
    chunky = replace(d, prompt_chunks=True, name="custom")
    for k in range(1, e - s):
        for filler in (" ", "\u2603", "x\n"):
            pre, gen = prefix + text[:s + k], filler + text[s:]
            feeds = dialect_chunkings(cid + "/released", gen)[-1]
            res = run_case(compiled, pre, tools, feeds, dialect)
            if res == run_case(compiled, pre, tools, feeds, chunky):
                continue  # no prompt text released here
            out.append({"id": f"{cid}/{dialect}-released", "dialect": dialect, "prefix": pre, "tools": tools,
                        "feeds": feeds, **res})
            return out
    return out


def generate(out_dir: Path = VECTORS, only: list | None = None) -> list[Path]:
    """Write every vector (removing the old files), or with `only` just the template vectors of those names
    (the other files stay as they are)."""
    from chatparse import compile_template

    out_dir.mkdir(parents=True, exist_ok=True)
    if only is None:
        for old in list(out_dir.glob("*.json")) + list(out_dir.glob("*.cpt")):
            old.unlink()
    written = []
    for name, template, cases, hand in _template_cases():
        if only is not None and name not in only:
            continue
        compiled = compile_template(template)
        vec_cases = []
        for cid, prefix, text, tools in cases:
            # (ext_* vectors: the extensions act on a closed region's value, so one feed in the default dialect;
            # the vllm cases below are chunked)
            for k, feeds in enumerate(chunkings(cid, text, hand is True) if hand != "ext" else [[text]]):
                res = run_case(compiled, prefix, tools, feeds)
                vec_cases.append({"id": f"{cid}/{k}", "prefix": prefix, "tools": tools, "feeds": feeds, **res})
        vec_cases += dialect_cases(name, compiled, cases, bool(hand))
        write_vector(out_dir, name, template, compiled, vec_cases)
        written.append(out_dir / f"{name}.json")
    written += generate_tokens(out_dir, only)
    if only is not None:
        return written
    path = out_dir / "values.json"
    path.write_bytes(_dump({"kind": "values", "cases": value_cases()}))
    written.append(path)
    path = out_dir / "regex.json"
    path.write_bytes(_dump({"kind": "regex", "patterns": regex_cases()}))
    written.append(path)
    return written


NOISE = ["\n", " ", "  ", "\t", "😀", "é", "名", "{", "}", "[", "]", '"', "'", "<", ">", "/", "|", ":", ";", ",", "=",
         "DONE", "END", "true", "42", "x", "\\", "```", "\u2003", "\x85"]


def random_case(compiled, rng: random.Random, case_id: str, prefix: str, text: str,
                dialect: str | None = None) -> dict:
    """One random differential case: `text` fed in random pieces of 1-9 characters after `prefix`; with a
    `dialect`, half the time the prompt also takes the first pieces (prompt characters held back, released by
    later feeds), and the case records the one-shot result too."""
    feeds, i = [], 0
    while i < len(text):
        n = rng.randint(1, 9)
        feeds.append(text[i:i + n])
        i += n
    if dialect is not None and feeds and rng.random() < 0.5:
        j = rng.randrange(len(feeds))
        prefix += "".join(feeds[:j + 1])
        feeds = feeds[j + 1:]
        text = "".join(feeds)
    case = {"id": case_id, **({"dialect": dialect} if dialect is not None else {}), "prefix": prefix,
            "tools": None, "feeds": feeds, **run_case(compiled, prefix, None, feeds, dialect)}
    if dialect is not None:
        case["oneshot"] = run_oneshot(compiled, prefix, None, text, dialect)
    return case


def write_vector(out_dir: Path, name: str, template, compiled, cases: list[dict]) -> None:
    """`<name>.cpt` and `<name>.json` (a template vector holding `cases`) in `out_dir`."""
    from chatparse.compiler.writer import dumps
    from chatparse.runtime.tables.loader import template_hash

    (out_dir / f"{name}.cpt").write_bytes(dumps(compiled.raw_tables))
    vec = {"kind": "template", "name": name, "template": template, "tables": f"{name}.cpt",
           "template_sha256": template_hash(compiled.spec), "cases": cases}
    (out_dir / f"{name}.json").write_bytes(_dump(vec))


def fuzz_templates(out_dir: Path, items: list, seed: int = 0, dialect: str | None = None) -> int:
    """Random differential vectors for given templates (generated ones, `tests/strategies.py`): `items` is
    ``[(template, [(prefix, text), ...]), ...]``; template `i` becomes ``gen<i>.json``, each text one
    `random_case`. Returns the case count."""
    from chatparse import compile_template

    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    total = 0
    for i, (template, texts) in enumerate(items):
        compiled = compile_template(template)
        cases = [random_case(compiled, rng, f"gen{i}-{k}", prefix, text, dialect)
                 for k, (prefix, text) in enumerate(texts)]
        write_vector(out_dir, f"gen{i}", template, compiled, cases)
        total += len(cases)
    return total


def fuzz(out_dir: Path, per_template: int = 20, seed: int = 0, dialect: str | None = None) -> int:
    """Write random differential vectors to `out_dir` (same layout as `generate`); returns the case count.

    Texts are spliced from the template's delimiter literals, substrings of its known outputs and noise, so
    they are full of partial, overlapping and interrupted delimiters; each is fed in one random chunking.
    With a `dialect` ("vllm") every case is parsed in it (see `random_case`)."""
    from chatparse import compile_template

    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    total = 0
    for name, template, cases, _ in _template_cases():
        compiled = compile_template(template)
        literals = [s for f in compiled.spec["fields"] for k in ("open", "close") if f[k] and "literals" in f[k]
                    for s in f[k]["literals"]]
        texts = [c[2] for c in cases] or ["plain text"]
        prefixes = [""] + [c[1] for c in cases if c[1]]
        vec_cases = []
        for k in range(per_template):
            parts = []
            for _ in range(rng.randint(1, 14)):
                r = rng.random()
                if r < 0.35 and literals:
                    lit = rng.choice(literals)
                    parts.append(lit if rng.random() < 0.8 else lit[:rng.randint(1, max(1, len(lit) - 1))])
                elif r < 0.8:
                    t = rng.choice(texts)
                    a = rng.randrange(len(t) + 1)
                    parts.append(t[a:a + rng.randint(1, 60)])
                else:
                    parts.append(rng.choice(NOISE))
            text = "".join(parts)
            vec_cases.append(random_case(compiled, rng, f"fuzz-{name}-{k}", rng.choice(prefixes), text, dialect))
        total += len(vec_cases)
        write_vector(out_dir, name, template, compiled, vec_cases)
    return total


def value_cases() -> list[dict]:
    from chatparse.runtime.values.coerce import coerce
    from chatparse.runtime.values.parsers import parse_content

    out = []
    for parser, arg_list in VALUE_ARGS.items():
        for args in arg_list:
            for text in VALUE_TEXTS:
                case = {"parser": parser, "args": args, "text": text}
                try:
                    case["expect"] = encode(parse_content(text, parser, json.loads(json.dumps(args))))
                except Exception as e:  # noqa: BLE001
                    case["error"] = type(e).__name__
                out.append(case)
    for types in COERCE_TYPES:
        for raw in COERCE_RAW:
            case = {"coerce": raw, "types": types}
            try:
                case["expect"] = encode(coerce(raw, tuple(types)))
            except Exception as e:  # noqa: BLE001
                case["error"] = type(e).__name__
            out.append(case)
    return out


# ---------------------------------------------------------------------------------------------- token mode

# The vocabularies of the token-mode vectors, trained at generation time with the `tokenizers` library on the
# token tests' training text (tests/token_support.py): label -> (what it exercises, the templates it covers).
TOKEN_VOCABS = {
    # byte-level BPE, 900 ids, the corpus's delimiters as special tokens: `bytes` kind, whole-delimiter tokens,
    # characters split across tokens (held UTF-8 bytes). Every bundled family and hand-written template.
    "bl": ("all", 4),
    # SentencePiece-style BPE with <0xXX> byte fallback, 700 ids, no special tokens: `pieces` kind, delimiters
    # cut across ordinary tokens, ByteFallback runs, strip_start 1 (the decoder's Strip). Every other bundled
    # family (sorted by name), their first three cases.
    "sp": ("half", 3),
    # Unigram + Metaspace (first-token texts) wrapped in transformers' PreTrainedTokenizerFast with
    # clean_up_tokenization_spaces: `pieces` kind, first_ids, cleanup. Six families, their first three cases.
    "uc": (("qwen3", "gpt_oss", "hermes", "deepseek_r1", "kimi_k2", "llama3_json"), 3),
}
"""label -> (which templates: "all" = every bundled and hand-written one, "half" = every other bundled family,
or names; the most cases per template). (The tables files dominate the size: about 25 kB each.)"""
TOKEN_FILE = "{name}.tok-{vocab}"


def _sentencepiece_tokenizer(vocab_size: int = 700):
    """`token_support.sentencepiece_tokenizer([])` with its 40-character alphabet chosen here (most frequent,
    ties by code point) and handed to the trainer, whose own choice among equally frequent characters varies
    from run to run: the same tokenizer every time."""
    import collections

    import token_support as ts
    from tokenizers import Tokenizer, decoders, models, normalizers, trainers

    texts = ts.training_text()
    counts = collections.Counter(c for t in texts for c in t.replace(" ", "\u2581"))
    alphabet = sorted(counts, key=lambda c: (-counts[c], c))[:40]
    tok = Tokenizer(models.BPE(byte_fallback=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(texts, trainer=trainers.BpeTrainer(
        vocab_size=vocab_size, limit_alphabet=40, initial_alphabet=alphabet, show_progress=False,
        special_tokens=[f"<0x{b:02X}>" for b in range(256)]))
    return tok


def token_tokenizers() -> dict:
    """label -> (tokenizer for `chatparse.bind`, `tokenizers.Tokenizer` that encodes the cases). Real
    tokenizers, trained here (deterministically: BPE training is; the Unigram vocabulary is the Metaspace BPE's,
    scored by merge rank, since the Unigram trainer is not deterministic)."""
    import token_support as ts
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bl = ts.byte_level_tokenizer(ts.special_strings())
    sp = _sentencepiece_tokenizer()
    ms = Tokenizer(models.BPE())
    ms.pre_tokenizer = pre_tokenizers.Metaspace()
    ms.decoder = decoders.Metaspace()
    ms.train_from_iterator(ts.training_text(), trainer=trainers.BpeTrainer(
        vocab_size=500, special_tokens=["<unk>", "<think>", "</think>", "<|im_end|>"], show_progress=False))
    pieces = sorted(ms.get_vocab().items(), key=lambda kv: kv[1])
    uni = Tokenizer(models.Unigram([(p, -1.0 - 0.01 * i) for p, i in pieces], unk_id=0))
    uni.add_special_tokens(["<think>", "</think>", "<|im_end|>"])
    uni.pre_tokenizer = pre_tokenizers.Metaspace()
    uni.decoder = decoders.Metaspace()
    from transformers import PreTrainedTokenizerFast

    uc = PreTrainedTokenizerFast(tokenizer_object=uni, clean_up_tokenization_spaces=True)
    return {"bl": (bl, bl), "sp": (sp, sp), "uc": (uc, uni)}


def token_vector(name: str, template, cases: list, label: str, tok, enc) -> tuple[bytes, dict]:
    """(tables file bytes with the token section, vector dict) for one template and one vocabulary."""
    from token_support import mutate, split_into_bytes

    from chatparse import bind
    from chatparse.compiler.writer import dumps
    from chatparse.runtime.tables.loader import template_hash

    b = bind(template, tok)
    data = dumps(b.compiled.raw_tables, tokens=b)
    from chatparse.runtime.tables.loader import loads

    vec_cases = []
    rng = random.Random(zlib.crc32(f"tokens:{label}:{name}".encode("utf-8")))
    size = b.vocab.size
    for k, (cid, prefix, text, tools) in enumerate(cases):
        ids = enc.encode(text, add_special_tokens=False).ids
        variants = [("ids", ids, _id_chunks(rng, ids, 3))]
        if k == 0:
            one = split_into_bytes(enc, ids, rng, rate=0.5) if label != "uc" else ids
            variants.append(("split1", one, [[i] for i in one]))
        if k == 1 or len(cases) == 1:
            bad = mutate(enc, ids, rng, n=6)
            variants.append(("mutated", bad, _id_chunks(rng, bad, 5)))
        if k == 0 and b.vocab.cleanup:  # a space before punctuation, which transformers' clean-up takes out again
            spaced = re.sub(r"(?<=\S)([,.!?]|'s|'m|'re|'ve|n't)", r" \1", text)
            sids = enc.encode(spaced, add_special_tokens=False).ids
            variants.append(("cleanup", sids, [[i] for i in sids]))
        for vname, vids, feeds in variants:
            base = {"id": f"{cid}/{vname}"}
            if prefix and k == 0 and vname == "ids":
                base["prefix_ids"] = enc.encode(prefix, add_special_tokens=False).ids
            else:
                base["prefix"] = prefix
            vec_cases.append(run_token_case(b, {**base, "tools": tools, "feeds": feeds}, oneshot=vname != "split1"))
        if k == 0:  # the serving dialect: whole and chunked, with the one-shot parse of the ids
            for j, feeds in enumerate([[ids], _id_chunks(rng, ids, 4)]):
                vec_cases.append(run_token_case(b, {"id": f"{cid}/vllm{j}", "dialect": "vllm", "prefix": prefix,
                                                    "tools": tools, "feeds": feeds}, oneshot=j == 0))
    if name in ("qwen3", "x_misc"):  # an id out of range: ValueError at that feed
        vec_cases.append(run_token_case(b, {"id": f"{name}-out-of-range", "prefix": "", "tools": None,
                                            "feeds": [[1, 2], [size], [3]]}, oneshot=True))
    raw = loads(data)
    vec = {"kind": "tokens", "name": name, "vocab": label, "tables": TOKEN_FILE.format(name=name, vocab=label) + ".cpt",
           "template_sha256": template_hash(b.compiled.spec), "vocab_sha256": raw["header"]["vocab_sha256"],
           "vocab_size": size, "cases": vec_cases}
    return data, vec


def _id_chunks(rng: random.Random, ids: list, most: int) -> list:
    out, i = [], 0
    while i < len(ids):
        n = rng.randint(1, most)
        out.append(ids[i:i + n])
        i += n
    return out


def run_token_case(binding, case: dict, oneshot: bool = False) -> dict:
    """`case` (id, prefix or prefix_ids, tools, feeds as id lists[, dialect]) with what chatparse's token
    parser does: the decoded text of each feed and of `finalize` (``texts``), the events, message or error
    (as `run_case`), and with `oneshot` the one-shot `binding.parse` of all the ids."""
    from chatparse.runtime.tokens.decode import _Decoder

    out = dict(case)
    dec = _Decoder(binding.vocab)
    texts = []
    try:
        for f in case["feeds"]:
            texts.append(dec.feed(f))
        texts.append(dec.finish())
    except IndexError:  # an id out of range: the texts up to it
        pass
    out["texts"] = texts
    out.update(run_token_parser(binding, case))
    if oneshot:
        out["oneshot"] = run_token_oneshot(binding, case)
    return out


def _prefix_kw(case: dict) -> dict:
    return {"prefix_ids": case["prefix_ids"]} if "prefix_ids" in case else {"prefix": case["prefix"]}


def run_token_parser(binding, case: dict) -> dict:
    """What `TokenParser` does with a token case: as `run_case` (``input_start`` with a dialect)."""
    from chatparse.runtime.tokens import TokenParser

    dialect = case.get("dialect")
    out: dict = {"initial_events": [], "feed_events": [], "error": None}
    stage, index = "init", 0
    try:
        p = TokenParser(binding, tools=case["tools"], dialect=dialect, **_prefix_kw(case))
        if dialect is not None:
            out["input_start"] = len(p.input_text)
        out["initial_events"] = p.initial_events
        stage = "feed"
        for index, f in enumerate(case["feeds"]):
            out["feed_events"].append(p.feed_tokens(f))
        stage, index = "finalize", 0
        message, final = p.finalize()
        out["final_events"] = final
        out["message"] = message
    except Exception as e:  # noqa: BLE001
        out["error"] = {"type": type(e).__name__, "stage": stage, "index": index if stage == "feed" else 0}
    return encode(out)


def run_token_oneshot(binding, case: dict) -> dict:
    """`binding.parse(all ids, ...)` (`chatparse.parse_tokens`): ``{"message"}`` or ``{"error"}``."""
    ids = [i for f in case["feeds"] for i in f]
    try:
        return encode({"message": binding.parse(ids, tools=case["tools"], dialect=case.get("dialect"),
                                                **_prefix_kw(case))})
    except Exception as e:  # noqa: BLE001
        return {"error": encode_error(e)}


def fuzz_tokens(out_dir: Path, per_template: int = 4, seed: int = 0, names: tuple = ("qwen3", "gpt_oss", "hermes",
                "kimi_k2", "x_regex", "x_malformed")) -> int:
    """Random token-mode vectors (the layout of `generate_tokens`) in `out_dir`: for each template of `names` and
    each vocabulary, `per_template` cases whose ids are a case's encoding with random tokens replaced by their
    single bytes and random ids (any token: lone bytes, special tokens, byte-fallback runs) inserted, or pure
    random ids, fed in random runs of 1-6 ids, in either dialect, the prompt as text or ids. Returns the case
    count."""
    from token_support import mutate, split_into_bytes

    from chatparse import bind
    from chatparse.compiler.writer import dumps
    from chatparse.runtime.tables.loader import loads, template_hash

    out_dir.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    toks = token_tokenizers()
    total = 0
    for name, template, cases, _ in token_templates():
        if name not in names:
            continue
        for label, (tok, enc) in toks.items():
            b = bind(template, tok)
            data = dumps(b.compiled.raw_tables, tokens=b)
            vec_cases = []
            for k in range(per_template):
                cid, prefix, text, tools = rng.choice(cases)
                ids = enc.encode(text, add_special_tokens=False).ids
                if rng.random() < 0.2:
                    ids = [rng.randrange(b.vocab.size) for _ in range(rng.randint(1, 80))]
                else:
                    if label != "uc":
                        ids = split_into_bytes(enc, ids, rng, rate=rng.random())
                    ids = mutate(enc, ids, rng, n=rng.randint(1, 8))
                case = {"id": f"fuzz-{name}-{label}-{k}"}
                if rng.random() < 0.5:
                    case["dialect"] = "vllm"
                if prefix and rng.random() < 0.5:
                    case["prefix_ids"] = enc.encode(prefix, add_special_tokens=False).ids
                else:
                    case["prefix"] = prefix
                case.update({"tools": tools, "feeds": _id_chunks(rng, ids, 6)})
                vec_cases.append(run_token_case(b, case, oneshot=True))
            stem = TOKEN_FILE.format(name=name, vocab=label)
            (out_dir / f"{stem}.cpt").write_bytes(data)
            vec = {"kind": "tokens", "name": name, "vocab": label, "tables": f"{stem}.cpt",
                   "template_sha256": template_hash(b.compiled.spec), "vocab_sha256": loads(data)["header"]["vocab_sha256"],
                   "vocab_size": b.vocab.size, "cases": vec_cases}
            (out_dir / f"{stem}.json").write_bytes(_dump(vec))
            total += len(vec_cases)
    return total


def token_templates():
    """(name, template, cases, hand) of the template vectors that get token vectors: every bundled template,
    the hand-written ones and the fixtures (ext_*: not here, they act on closed regions' values only)."""
    for name, template, cases, hand in _template_cases():
        if hand == "ext" or name.startswith("f_"):
            continue
        yield name, template, cases, hand


def generate_tokens(out_dir: Path = VECTORS, only: list | None = None) -> list[Path]:
    """Write the token-mode vectors (`TOKEN_VOCABS`), removing old ones (with `only`: just those templates')."""
    out_dir.mkdir(parents=True, exist_ok=True)
    if only is None:
        for old in list(out_dir.glob("*.tok-*.json")) + list(out_dir.glob("*.tok-*.cpt")):
            old.unlink()
    toks = token_tokenizers()
    written = []
    from chatparse import templates

    half = set(templates.names()[::2])
    for name, template, cases, hand in token_templates():
        if only is not None and name not in only:
            continue
        for label, (which, most) in TOKEN_VOCABS.items():
            if not (which == "all" or (which == "half" and name in half) or name in which):
                continue
            tok, enc = toks[label]
            data, vec = token_vector(name, template, cases[:most], label, tok, enc)
            stem = TOKEN_FILE.format(name=name, vocab=label)
            (out_dir / f"{stem}.cpt").write_bytes(data)
            (out_dir / f"{stem}.json").write_bytes(_dump(vec))
            written.append(out_dir / f"{stem}.json")
    return written


# ---------------------------------------------------------------------------------------------- checking


def check(vec_dir: Path = VECTORS) -> tuple[int, list[str]]:
    """Run every vector through the Python runtime, with the tables loaded from the vector's file.

    Returns (number of cases run, failure messages)."""
    import corpus_cases as cc

    from chatparse import CompiledTemplate, compile_template
    from chatparse.runtime.values.coerce import coerce
    from chatparse.runtime.tables.loader import load, template_hash
    from chatparse.runtime.values.parsers import parse_content

    failures: list[str] = []
    count = 0
    for path in sorted(vec_dir.glob("*.json")):
        vec = json.loads(path.read_text(encoding="utf-8"))
        if vec["kind"] == "regex":
            import regex

            for entry in vec["patterns"]:
                rx = regex.compile(entry["pattern"], regex.DOTALL)
                for c in entry["cases"]:
                    count += 1
                    got = [[m.start(), m.end(), m.groupdict()] for m in rx.finditer(c["text"])]
                    if got != c["expect"]:
                        failures.append(f"{path.name} {entry['pattern']!r} on {c['text']!r}: got {got}")
            continue
        if vec["kind"] == "values":
            for i, c in enumerate(vec["cases"]):
                count += 1
                try:
                    got = ("ok", parse_content(c["text"], c["parser"], c["args"])) if "parser" in c \
                        else ("ok", coerce(c["coerce"], tuple(c["types"])))
                except Exception as e:  # noqa: BLE001
                    got = ("error", type(e).__name__)
                want = ("error", c["error"]) if "error" in c else ("ok", decode(c["expect"]))
                if not (got[0] == want[0] and cc.strict_equal(got[1], want[1])):
                    failures.append(f"{path.name}[{i}] {c}: got {got!r}")
            continue
        if vec["kind"] == "tokens":
            n, fails = check_tokens(vec_dir, path, vec)
            count += n
            failures += fails
            continue
        raw = load(vec_dir / vec["tables"])
        compiled = CompiledTemplate(raw["template"], raw)
        fresh = compile_template(vec["template"])
        want_hash = vec["template_sha256"]
        if template_hash(fresh.spec) != want_hash or raw["header"]["template_sha256"] != want_hash:
            failures.append(f"{path.name}: template hash mismatch")
            continue
        for c in vec["cases"]:
            count += 1
            dialect = c.get("dialect")
            want = decode({k: c[k] for k in ("initial_events", "feed_events", "final_events", "message", "error",
                                             "input_start") if k in c})
            for label, tpl in (("tables file", compiled), ("fresh compile", fresh)):
                got = decode(run_case(tpl, c["prefix"], c["tools"], c["feeds"], dialect))
                got = {k: got[k] for k in want if k in got}
                if not cc.strict_equal(got, want):
                    failures.append(f"{path.name} {c['id']} ({label}): got {cc.show(got)[:300]}, want "
                                    f"{cc.show(want)[:300]}")
                if "oneshot" in c:
                    got1 = decode(run_oneshot(tpl, c["prefix"], c["tools"], "".join(c["feeds"]), dialect))
                    if not cc.strict_equal(got1, decode(c["oneshot"])):
                        failures.append(f"{path.name} {c['id']} ({label}, parse_response): got "
                                        f"{cc.show(got1)[:300]}, want {cc.show(c['oneshot'])[:300]}")
    return count, failures


def check_tokens(vec_dir: Path, path: Path, vec: dict) -> tuple[int, list[str]]:
    """One token-mode vector: its tables file (template and vocabulary hashes as the vector says, the same
    template as the character-mode vector of that name), then per case the token parser built from the file
    alone (`token_binding`) against the recorded texts, events, message or error and one-shot result, and the
    reference property: the character parser (`ResponseParser`) fed the recorded texts gives the same."""
    import corpus_cases as cc

    from chatparse import CompiledTemplate
    from chatparse.runtime.tables.loader import load
    from chatparse.runtime.tokens import token_binding
    from chatparse.runtime.tokens.decode import _Decoder

    failures: list[str] = []
    raw = load(vec_dir / vec["tables"])
    header = raw["header"]
    sibling = vec_dir / f"{vec['name']}.json"
    want_hash = vec["template_sha256"]
    if header["template_sha256"] != want_hash or header["vocab_sha256"] != vec["vocab_sha256"] or (
            sibling.exists() and json.loads(sibling.read_text(encoding="utf-8"))["template_sha256"] != want_hash):
        return len(vec["cases"]), [f"{path.name}: template or vocabulary hash mismatch"] * len(vec["cases"])
    compiled = CompiledTemplate(raw["template"], raw)
    binding = token_binding(compiled)
    if binding.vocab.size != vec["vocab_size"]:
        return len(vec["cases"]), [f"{path.name}: vocabulary size {binding.vocab.size}"] * len(vec["cases"])
    for c in vec["cases"]:
        want = decode({k: c[k] for k in ("initial_events", "feed_events", "final_events", "message", "error",
                                         "input_start") if k in c})
        got = decode(run_token_parser(binding, c))
        got = {k: got[k] for k in want if k in got}
        if not cc.strict_equal(got, want):
            failures.append(f"{path.name} {c['id']}: got {cc.show(got)[:300]}, want {cc.show(want)[:300]}")
        dec, texts = _Decoder(binding.vocab), []
        try:
            for f in c["feeds"]:
                texts.append(dec.feed(f))
            texts.append(dec.finish())
        except IndexError:  # (an id out of range: the texts up to it)
            pass
        if texts != c["texts"]:
            failures.append(f"{path.name} {c['id']}: decoded {texts!r:.300}, want {c['texts']!r:.300}")
        if "oneshot" in c:
            got1 = decode(run_token_oneshot(binding, c))
            if not cc.strict_equal(got1, decode(c["oneshot"])):
                failures.append(f"{path.name} {c['id']} (parse_tokens): got {cc.show(got1)[:300]}, want "
                                f"{cc.show(c['oneshot'])[:300]}")
        if c["error"] is None:  # the reference: the character parser on the decoded text, feed by feed
            prefix = binding.decode(c["prefix_ids"]) if "prefix_ids" in c else c["prefix"]
            ref = decode(run_case(compiled, prefix, c["tools"], c["texts"], c.get("dialect")))
            last = ref["feed_events"].pop()  # (the text finalize releases)
            ref["final_events"] = last + ref.get("final_events", [])
            ref = {k: ref[k] for k in want if k in ref}
            if not cc.strict_equal(ref, want):
                failures.append(f"{path.name} {c['id']}: the character parser on the decoded text gives "
                                f"{cc.show(ref)[:300]}, the token parser {cc.show(want)[:300]}")
    return len(vec["cases"]), failures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="verify the vectors with the Python runtime")
    ap.add_argument("--dir", type=Path, default=VECTORS)
    ap.add_argument("--fuzz", type=int, default=0, metavar="N",
                    help="instead: write N random differential cases per template to --dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default=None, metavar="NAMES",
                    help="write only these template vectors and their token-mode vectors (comma-separated, e.g. "
                         "ext_olmo3), keeping the others")
    ap.add_argument("--tokens", action="store_true",
                    help="write only the token-mode vectors (*.tok-*), keeping the others")
    ap.add_argument("--dialect", default=None, help="with --fuzz: parse the random cases in this dialect (vllm)")
    args = ap.parse_args(argv)
    logging.getLogger("chatparse").setLevel(logging.ERROR)  # the stall vectors log a warning each
    if args.fuzz:
        print(f"wrote {fuzz(args.dir, args.fuzz, args.seed, args.dialect)} random cases to {args.dir}")
        return 0
    if args.check:
        n, failures = check(args.dir)
        for f in failures:
            print("FAIL", f)
        print(f"{n - len(failures)}/{n} vector cases pass")
        return 1 if failures else 0
    only = None if args.only is None else args.only.split(",")
    paths = generate_tokens(args.dir, only) if args.tokens else generate(args.dir, only)
    names = {p.name.split(".")[0] for p in paths}
    if only is not None and not args.tokens and len(names) != len(only):
        print(f"unknown vector name(s) in --only: {sorted(set(only) - names)}", file=sys.stderr)
        return 2
    size = sum(p.stat().st_size for p in args.dir.iterdir())
    print(f"wrote {len(paths)} vector files ({size / 1e6:.2f} MB) to {args.dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
