"""Chat-template round trips for the bundled families (issue #17, item 3b): the shared harness.

A seeded generator makes random assistant messages (reasoning, content, 0-3 tool calls whose arguments hold
every JSON type - strings with unicode, quotes, backslashes and newlines, ints, floats, bools, null, nested
objects and arrays - and text between calls), each restricted to what its family's output format can represent.
Each message is rendered with the family's chat template (tests/chat_templates/<family>.jinja) the way
transformers' ``apply_chat_template`` renders it, the assistant turn is cut out, and parsed back with the
bundled response template (chatparse/templates/<family>.json) three ways; each must give back the message:

* one-shot: ``chatparse.parse_response(turn, template, prefix=prompt, tools=tools)``;
* streamed: ``chatparse.ResponseParser`` fed the turn in random chunks (1 to 12 characters);
* per token: the turn encoded with a real byte-level BPE tokenizer trained here (``tokenizers`` library) whose
  special tokens are the family's delimiters, fed to ``chatparse.TokenParser`` in random groups of 1-4 ids.

API (for tests/test_chat_roundtrip.py and the per-family authors):

``CAPS[family] -> Caps``
    What the family's format can represent. Every restriction carries its reason (``Caps.reasons``). To add a
    family: write tests/chat_templates/<family>.jinja (cite its source at the top), add a ``Caps(...)`` entry
    here (defaults = no restriction) with a reason for each restriction, and run
    ``python -m pytest tests/test_chat_roundtrip.py -q -k <family>``.
``random_message(rng, caps) -> Sample``
    One random assistant message (``Sample.message``, what must be parsed back), the message given to the
    chat template (``Sample.rendered``: it may also hold ``content_parts``, the text before each call and after
    the last, which the chat templates render in place of ``content``), the tool schemas
    (``Sample.tools``: one tool per call, each argument typed as the value generated for it) and the kind of
    case (``Sample.kind``: BETWEEN when the content is split around the calls, CALLS for other messages with
    tool calls, "" without). ``Caps.xfail`` maps a kind to a known gap.
``render_turn(family, sample) -> (prompt, turn)``
    The generation prompt (history + ``add_generation_prompt=True``) and the assistant turn that follows it in
    the rendered conversation (trailing whitespace dropped: a model stops at its end-of-turn token).
``tokenizer_for(family)`` / ``binding_for(family)``
    The family's trained tokenizer (cached for the session) and its chatparse token binding.
``check_message(family, sample, rng) -> list[str]``
    Runs the three parses; returns the failures (empty when all three give back ``sample.message``).
``run_family(family, n, seed, kinds=None) -> Report``
    ``n`` messages (only of the case kinds in ``kinds`` when given); ``Report.failures`` holds
    (index, kind, failures, turn) for each failing message and ``Report.kinds`` counts the cases of each kind.

Chat-template variables per family (``Caps.render_kwargs``, e.g. a thinking switch) are passed to both renders.
"""

from __future__ import annotations

import copy
import json
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import pytest
from deps import need

import chatparse
from chatparse import templates
from chatparse.authoring.roundtrip import render

CHAT_TEMPLATES = Path(__file__).parent / "chat_templates"

ARG_KINDS = ("string", "int", "float", "bool", "null", "object", "array")
BETWEEN = "text between calls"  # case kinds: content split around the calls,
CALLS = "tool calls"  # tool calls (content, if any, in one piece),
KINDS = ("", CALLS, BETWEEN)  # and "" for no tool calls


@dataclass(frozen=True)
class Caps:
    """What a family's output format can carry; each restriction (a field set away from its default) must be
    explained in `reasons` under the field's name."""

    reasoning: bool = True  # the format has a reasoning field
    content: bool = True  # the format has a content field
    max_calls: int = 3  # tool calls per message (0 = the format has no tool calls)
    content_with_calls: bool = True  # content and tool calls in one turn
    reasoning_with_calls: bool = True  # reasoning and tool calls in one turn
    text_between_calls: bool = True  # model text between two calls comes back as the joined content
    empty_arguments: bool = True  # a call with no arguments
    arg_kinds: tuple = ARG_KINDS  # top-level argument value kinds
    json_like_strings: bool = True  # string arguments that read as JSON (e.g. "42", "true") stay strings
    edge_space_strings: bool = True  # string arguments with leading/trailing whitespace keep it
    call_ids: bool = False  # the format carries a tool-call id (then every generated call has one)
    call_id_format: str = ""  # the id's required form, e.g. "functions.{name}:{index}" (default: any string)
    render_kwargs: dict = field(default_factory=dict)  # chat-template variables
    reasons: dict = field(default_factory=dict)  # restriction -> why the format cannot represent it
    xfail: dict = field(default_factory=dict)  # case kind -> known gap (strict xfail until fixed)

    def restrictions(self) -> dict:
        """{field: (value, reason)} for every field set away from the default."""
        base = Caps()
        out = {}
        for name in ("reasoning", "content", "max_calls", "content_with_calls", "reasoning_with_calls",
                     "text_between_calls", "empty_arguments", "arg_kinds", "json_like_strings",
                     "edge_space_strings"):
            if getattr(self, name) != getattr(base, name):
                out[name] = (getattr(self, name), self.reasons.get(name))
        return out


NO_REASONING = "the format has no reasoning field"
NO_BETWEEN = ("a later content segment overwrites the earlier one (content has no `repeats`), so text between "
              "calls cannot come back joined")
XML_JSON_VALUES = ("argument values are written bare between tags and read back with a json value parser: a "
                   "string such as \"42\" or \"true\" is read back as a number/bool (the tools= schema only "
                   "converts strings), and surrounding whitespace is stripped")
GAP_BETWEEN = "known template gap (issue #17): text between tool calls is kept only after the last call"

# family -> capabilities. Families with no entry are not round-tripped (CHAT-2 adds theirs).
CAPS: dict[str, Caps] = {
    "hermes": Caps(reasoning=False, text_between_calls=False,
                   reasons={"reasoning": NO_REASONING, "text_between_calls": NO_BETWEEN}),
    "qwen3": Caps(text_between_calls=False, reasons={"text_between_calls": NO_BETWEEN}),
    # ---- CHAT-1's families
    "cohere": Caps(content_with_calls=False, text_between_calls=False, call_ids=True,
                   reasons={"content_with_calls": "a tool-calling turn is thinking + one action block; the answer "
                                                  "comes in a later turn (the model's chat template renders no "
                                                  "response next to an action)",
                            "text_between_calls": "all calls are one JSON list in one action block"}),
    "deepseek_r1": Caps(xfail={BETWEEN: NO_BETWEEN + " (same gap as deepseek_v31; not in the issue's list)"}),
    "deepseek_v3": Caps(reasoning=False, reasons={"reasoning": NO_REASONING},
                        xfail={BETWEEN: NO_BETWEEN + " (same gap as deepseek_v31; not in the issue's list)"}),
    "deepseek_v31": Caps(render_kwargs={"thinking": True}, xfail={BETWEEN: GAP_BETWEEN}),
    "deepseek_v32": Caps(render_kwargs={"thinking": True}, text_between_calls=False, json_like_strings=False,
                         edge_space_strings=False,
                         reasons={"text_between_calls": "all calls are one <｜DSML｜function_calls> block",
                                  "json_like_strings": XML_JSON_VALUES, "edge_space_strings": XML_JSON_VALUES}),
    "ernie45": Caps(),
    "functiongemma": Caps(reasoning=False, reasons={"reasoning": NO_REASONING},
                          xfail={BETWEEN: NO_BETWEEN + " (not in the issue's list)"}),
    "gemma4": Caps(xfail={BETWEEN: NO_BETWEEN + " (not in the issue's list)"}),
    "glm45": Caps(json_like_strings=False, edge_space_strings=False, xfail={BETWEEN: GAP_BETWEEN},
                  reasons={"json_like_strings": XML_JSON_VALUES, "edge_space_strings": XML_JSON_VALUES}),
    "glm47": Caps(json_like_strings=False, edge_space_strings=False,
                  xfail={BETWEEN: NO_BETWEEN + " (same gap as glm45; not in the issue's list)"},
                  reasons={"json_like_strings": XML_JSON_VALUES, "edge_space_strings": XML_JSON_VALUES}),
    "granite3": Caps(render_kwargs={"thinking": True}, text_between_calls=False,
                     reasons={"text_between_calls": "all calls are one JSON list after <|tool_call|>"}),
    "granite4": Caps(reasoning=False, reasons={"reasoning": NO_REASONING}, xfail={BETWEEN: GAP_BETWEEN}),
    "granite_20b_fc": Caps(reasoning=False, text_between_calls=False,
                           reasons={"reasoning": NO_REASONING,
                                    "text_between_calls": "a call has no closing tag: it runs to the next "
                                                          "<function_call> or <|endoftext|>, so text after it is "
                                                          "read as part of its JSON"}),
    "hunyuan_a13b": Caps(text_between_calls=False,
                         reasons={"text_between_calls": "all calls are one JSON list in one <tool_calls> block"}),
    "internlm2": Caps(reasoning=False, reasons={"reasoning": NO_REASONING},
                      xfail={BETWEEN: NO_BETWEEN + " (not in the issue's list)"}),
    "gigachat3": Caps(reasoning=False, max_calls=1, text_between_calls=False,
                      reasons={"reasoning": NO_REASONING,
                               "max_calls": "the model's chat template renders one `function call` message per "
                                            "assistant turn (tool_calls[0])",
                               "text_between_calls": "one call per turn"},
                      xfail={CALLS: "template gap: the model's chat template ends the `function call` message with "
                                    "<|message_sep|>, but the bundled template closes a call only at </s>, so the "
                                    "JSON body takes the <|message_sep|> and fails to parse"}),
    # ---- CHAT-2's families
    "jamba": Caps(reasoning=False, text_between_calls=False,
                  reasons={"reasoning": NO_REASONING,
                           "text_between_calls": "all calls are one JSON list in one <tool_calls> block after the "
                                                 "text"}),
    "kimi_k2": Caps(call_ids=True, call_id_format="functions.{name}:{index}", text_between_calls=False,
                    reasons={"text_between_calls": "all calls are written in one <|tool_calls_section_begin|> ... "
                                                   "<|tool_calls_section_end|> section"}),
    "kimi_vl_think": Caps(max_calls=0, reasons={"max_calls": "the model has no tool calls (the format has no "
                                                             "tool_calls field)"}),
    "lfm2": Caps(text_between_calls=False,
                 reasons={"text_between_calls": "all calls are one JSON list in one <|tool_call_start|> block"}),
    "llama3_json": Caps(reasoning=False, content_with_calls=False,
                        reasons={"reasoning": NO_REASONING,
                                 "content_with_calls": "a calling turn is the bare JSON call(s) alone: Meta's "
                                                       "template writes no text beside a call"}),
    "longcat": Caps(reasoning=False, reasons={"reasoning": NO_REASONING}, xfail={BETWEEN: GAP_BETWEEN}),
    "minimax_m1": Caps(text_between_calls=False,
                       reasons={"text_between_calls": "all calls are JSON lines in one <tool_calls> block"}),
    "minimax_m2": Caps(),
    "mistral_pre_v11": Caps(reasoning=False, content_with_calls=False,
                            reasons={"reasoning": NO_REASONING,
                                     "content_with_calls": "a calling turn is [TOOL_CALLS] and one JSON list alone "
                                                           "(Mistral's template writes no text beside it, and text "
                                                           "after the list would be read as part of its JSON)"}),
    "mistral_v11": Caps(text_between_calls=False,
                        reasons={"text_between_calls": "a call has no closing tag: its JSON runs to the next "
                                                       "[TOOL_CALLS] or </s>, so text after it is read as part of "
                                                       "its JSON"}),
    "nemotron_json": Caps(text_between_calls=False,
                          reasons={"text_between_calls": "all calls are one JSON list in one <TOOLCALL> block"}),
    "phi4_mini": Caps(reasoning=False, text_between_calls=False,
                      reasons={"reasoning": NO_REASONING,
                               "text_between_calls": "all calls are one JSON list after functools, with no closing "
                                                     "marker: only the end of the turn may follow it"}),
    "seed_oss": Caps(json_like_strings=False, edge_space_strings=False,
                     reasons={"json_like_strings": XML_JSON_VALUES, "edge_space_strings": XML_JSON_VALUES},
                     xfail={BETWEEN: NO_BETWEEN + " (not in the issue's list)"}),
    "step3": Caps(text_between_calls=False,
                  reasons={"text_between_calls": "all calls are one <｜tool_calls_begin｜> ... <｜tool_calls_end｜> "
                                                 "block"}),
    "xlam": Caps(content_with_calls=False,
                 reasons={"content_with_calls": "xLAM's template writes a calling turn as the JSON list alone"}),
}


def known_gap(family: str, kind: str) -> str | None:
    """The known gap that makes `kind` fail for `family` now, or None. A gap ends by itself once the bundled
    template has the fix (text between calls: the content field gets `repeats`; others: GAP_FIXED): from then
    on the case runs as a normal, must-pass one, so a fix can neither go unnoticed nor leave a stale xfail."""
    reason = CAPS[family].xfail.get(kind)
    fields = templates.get(family)["fields"]
    if reason and kind == BETWEEN and fields.get("content", {}).get("repeats"):
        return None
    fixed = GAP_FIXED.get((family, kind))
    if reason and fixed and fixed(fields):
        return None
    return reason


# (family, kind) -> "the bundled template has the fix" for gaps other than text between calls
GAP_FIXED = {
    ("gigachat3", CALLS): lambda fields: "message_sep" in fields["tool_calls"].get("close_pattern", ""),
}


# ------------------------------------------------------------------------------------------------ generator
WORDS = ["hello", "world", "the", "weather", "in", "Paris", "is", "sunny", "中文", "日本語", "😀", "🚀", "é",
         "naïve", "café", "Ελληνικά", "русский", "—", "✓", "1.5", "42", "𝔘𝔫𝔦", "\"quoted\"", "it's", "a\\b",
         "x=1,", "(ok)", "[list]", "{brace}", "50%", "#tag", "a&b", "tab\there", "ü", "🎉", "Zürich", "東京"]
SEPS = [" ", " ", " ", ", ", ". ", "\n", "\n\n", " — "]
KEY_CHARS = "abcdefghijklmnopqrstuvwxyz_"
NAMES = ["get_weather", "search", "create_note", "send_email", "lookup_user", "book_flight", "calc", "f",
         "run_query", "translate_text", "set_alarm", "list_files"]


def _text(rng: random.Random, lo=1, hi=12) -> str:
    """Words joined by spaces/punctuation/newlines; never leading or trailing whitespace (text fields strip)."""
    n = rng.randint(lo, hi)
    out = rng.choice(WORDS)
    for _ in range(n - 1):
        out += rng.choice(SEPS) + rng.choice(WORDS)
    return out.strip()


def _parses_as_json(s: str) -> bool:
    try:
        json.loads(s)
    except ValueError:
        return False
    return True


def _string(rng: random.Random, caps: Caps) -> str:
    while True:
        r = rng.random()
        if r < 0.1:
            s = rng.choice(["", "42", "true", "null", "3.5", "\"x\"", "[1, 2]", "{}", "  padded  ", "line1\nline2",
                            "\\n is not a newline", "back\\slash", "tab\tand \"quote\""])
        elif r < 0.2:
            s = " " + _text(rng, 1, 3) + "\n"
        else:
            s = _text(rng, 1, 6)
        if not caps.json_like_strings and _parses_as_json(s):
            continue
        if not caps.edge_space_strings and s != s.strip():
            continue
        if not caps.json_like_strings and s == "":
            continue  # an empty value reads back as "" but an empty string is a json-like edge: keep it simple
        return s


def _value(rng: random.Random, caps: Caps, kind: str, depth: int = 0):
    if kind == "string":
        return _string(rng, caps)
    if kind == "int":
        return rng.choice([0, 1, -7, 42, 2 ** 31, -(10 ** 12), rng.randint(-1000, 1000)])
    if kind == "float":
        return rng.choice([0.5, -2.25, 3.14159, 1e-05, 1.5e+20, round(rng.uniform(-1000, 1000), rng.randint(1, 6))])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "null":
        return None
    inner = [k for k in ARG_KINDS if depth < 2 or k not in ("object", "array")]
    inner_caps = Caps()  # inside an object or array everything is JSON
    if kind == "object":
        return {_key(rng): _value(rng, inner_caps, rng.choice(inner), depth + 1) for _ in range(rng.randint(0, 3))}
    return [_value(rng, inner_caps, rng.choice(inner), depth + 1) for _ in range(rng.randint(0, 3))]


def _key(rng: random.Random) -> str:
    return "".join(rng.choice(KEY_CHARS) for _ in range(rng.randint(1, 8))).strip("_") or "k"


SCHEMA_TYPE = {"string": "string", "int": "integer", "float": "number", "bool": "boolean", "null": "null",
               "object": "object", "array": "array"}


@dataclass
class Sample:
    message: dict  # what must be parsed back
    rendered: dict  # what the chat template is given
    tools: list | None
    kind: str = ""


def random_message(rng: random.Random, caps: Caps) -> Sample:
    """A random assistant message that `caps` allows: at least one of content and tool calls."""
    while True:
        ncalls = rng.randint(0, caps.max_calls) if caps.max_calls else 0
        think = caps.reasoning and rng.random() < 0.6 and (ncalls == 0 or caps.reasoning_with_calls)
        has_content = caps.content and rng.random() < 0.7 and (ncalls == 0 or caps.content_with_calls)
        if ncalls or has_content:
            break
    msg: dict = {"role": "assistant"}
    if think:
        msg["reasoning_content"] = _text(rng, 1, 20)
    calls, tools = [], []
    names = rng.sample(NAMES, ncalls)
    for i, name in enumerate(names):
        nargs = rng.randint(0 if caps.empty_arguments else 1, 4)
        args, props = {}, {}
        for _ in range(nargs):
            kind = rng.choice(caps.arg_kinds)
            k = _key(rng)
            args[k] = _value(rng, caps, kind)
            props[k] = {"type": SCHEMA_TYPE[kind]}
        call = {"type": "function", "function": {"name": name, "arguments": args}}
        if caps.call_ids:
            call_id = (caps.call_id_format.format(name=name, index=i) if caps.call_id_format
                       else rng.choice([str(i), f"call_{rng.randrange(10 ** 6)}"]))
            call = {"id": call_id, **call}
        calls.append(call)
        tools.append({"type": "function", "function": {"name": name, "description": f"Tool {name}.",
                                                       "parameters": {"type": "object", "properties": props}}})
    rendered = copy.deepcopy(msg)
    kind = ""
    if has_content:
        if ncalls >= 2 and caps.content and caps.content_with_calls and rng.random() < 0.3:
            # text before some calls (and maybe after the last): comes back as the parts joined
            parts = [_text(rng, 1, 6) if rng.random() < 0.7 or j in (0, 1) else "" for j in range(ncalls + 1)]
            parts[-1] = parts[-1] if rng.random() < 0.5 else ""
            if sum(1 for p in parts if p) >= 2 and (caps.text_between_calls or BETWEEN in caps.xfail):
                msg["content"] = "\0".join(p for p in parts if p)  # joined by check_message with the template's join
                rendered["content_parts"] = parts
                rendered["content"] = "".join(parts)
                kind = BETWEEN
        if not kind:
            msg["content"] = rendered["content"] = _text(rng, 1, 20)
    if calls:
        msg["tool_calls"] = calls
        rendered["tool_calls"] = copy.deepcopy(calls)
        kind = kind or CALLS
    return Sample(msg, rendered, tools or None, kind)


# ------------------------------------------------------------------------------------------------ rendering
HISTORY = [{"role": "system", "content": "You are a helpful assistant."},
           {"role": "user", "content": "Help me with a few things, please."}]


@lru_cache(maxsize=None)
def chat_template(family: str) -> str:
    return (CHAT_TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")


def render_turn(family: str, sample: Sample) -> tuple[str, str]:
    """(generation prompt, assistant turn) as transformers renders them; the prompt must be a prefix of the
    whole conversation, else AssertionError."""
    caps = CAPS[family]
    ct = chat_template(family)
    prompt = render(ct, HISTORY, tools=sample.tools, add_generation_prompt=True, **caps.render_kwargs)
    full = render(ct, HISTORY + [sample.rendered], tools=sample.tools, **caps.render_kwargs)
    assert full.startswith(prompt), f"{family}: the generation prompt is not a prefix of the conversation"
    return prompt, full[len(prompt):].rstrip()


def expected_message(family: str, sample: Sample) -> dict:
    """`sample.message` with split content joined the way the template's content field joins its segments
    (`join`, default "" - the format's rule for `repeats` fields)."""
    msg = copy.deepcopy(sample.message)
    if sample.kind == BETWEEN:
        join = templates.get(family)["fields"].get("content", {}).get("join", "")
        msg["content"] = msg["content"].replace("\0", join)
    return msg


# ------------------------------------------------------------------------------------------------ tokenizers
SPECIAL_RE = re.compile(r"<\|[^|<>\s]{1,40}\|>|<｜[^<>]{1,40}｜>|</?[A-Za-z_][\w:-]{0,30}>|\[/?[A-Z_]{2,20}\]"
                        r"|<\|[a-z_\"]{1,20}>|<[a-z_\"]{1,20}\|>|<｜DSML｜[a-z_]+|</｜DSML｜[a-z_]+>")


def _delimiter_literals(template: dict) -> set:
    out = set()
    fields = template.get("fields", {})
    for key in ("start_anchor",):
        v = template.get(key)
        out.update([v] if isinstance(v, str) else v or [])
    for f in fields.values():
        for key in ("open", "close"):
            v = f.get(key)
            out.update([v] if isinstance(v, str) else v or [])
    return {s for s in out if s and s.strip() == s and len(s) > 1}


@lru_cache(maxsize=None)
def tokenizer_for(family: str):
    """A byte-level BPE tokenizer (small vocab) trained on rendered conversations of this family; its special
    tokens are the family's delimiters (the response template's literal delimiters and the special-looking
    tokens of the rendered chat), so that delimiters arrive as whole tokens, as with the real model."""
    tk = need("tokenizers")
    rng = random.Random(f"tok-{family}")
    caps = CAPS[family]
    texts = []
    for _ in range(40):
        s = random_message(rng, caps)
        p, t = render_turn(family, s)
        texts += [p, t]
    specials = set(SPECIAL_RE.findall("".join(texts))) | _delimiter_literals(templates.get(family))
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tk.decoders.ByteLevel()
    tr = tk.trainers.BpeTrainer(vocab_size=600, initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
                                special_tokens=sorted(specials), show_progress=False)
    tok.train_from_iterator(texts, trainer=tr)
    return tok


@lru_cache(maxsize=None)
def binding_for(family: str):
    return chatparse.bind(templates.get(family), tokenizer_for(family))


@lru_cache(maxsize=None)
def compiled_for(family: str):
    return chatparse.compile_template(templates.get(family))


# ------------------------------------------------------------------------------------------------ checking
def _chunks(rng: random.Random, seq, hi: int):
    i = 0
    while i < len(seq):
        n = rng.randint(1, hi)
        yield seq[i:i + n]
        i += n


def check_message(family: str, sample: Sample, rng: random.Random, tokens: bool = True,
                  reference: bool = False) -> list:
    """Parse the rendered turn one-shot, streamed and per token (and with the transformers reference when
    `reference`); the failures, each naming its mode."""
    prompt, turn = render_turn(family, sample)
    want = expected_message(family, sample)
    compiled = compiled_for(family)
    fails = []

    def attempt(mode, fn):
        try:
            got = fn()
        except Exception as e:  # a raise is a failure to report, with the mode it happened in
            fails.append(f"{mode}: {type(e).__name__}: {e}")
            return
        if got != want:
            fails.append(f"{mode}: got {got!r}"[:400])

    attempt("one-shot", lambda: chatparse.parse_response(turn, compiled, prefix=prompt, tools=sample.tools))

    def streamed():
        p = chatparse.ResponseParser(compiled, prefix=prompt, tools=sample.tools)
        for chunk in _chunks(rng, turn, 12):
            p.feed(chunk)
        return p.finalize()[0]

    attempt("streamed", streamed)
    if reference:
        from transformers.utils.chat_parsing import parse_response as ref_parse

        attempt("reference", lambda: ref_parse(turn, templates.get(family), prefix=prompt, tools=sample.tools))
    if tokens:
        def per_token():
            tok = tokenizer_for(family)
            ids = tok.encode(turn).ids
            assert tok.decode(ids, skip_special_tokens=False) == turn, "the tokenizer does not round-trip the turn"
            p = chatparse.TokenParser(binding_for(family), prefix=prompt, tools=sample.tools)
            for group in _chunks(rng, ids, 4):
                p.feed_tokens(group if len(group) > 1 else group[0])
            return p.finalize()[0]

        attempt("per token", per_token)
    return fails


@dataclass
class Report:
    family: str
    n: int
    failures: list  # (index, kind, [failure], turn)
    kinds: dict  # kind -> count


def run_family(family: str, n: int = 500, seed: int = 0, tokens: bool = True, kinds=None,
               reference_every: int = 0) -> Report:
    """`n` random messages of `family` through `check_message` - only those whose case kind is in `kinds` when
    given (at most 50 * n messages are drawn, so a kind the family never generates cannot hang the test); every
    `reference_every`-th one is also parsed by the transformers reference (0: never)."""
    caps = CAPS[family]
    rng = random.Random(f"{family}-{seed}")
    failures, counts = [], {}
    for i in range(50 * n):
        if sum(counts.values()) >= n:
            break
        sample = random_message(rng, caps)
        if kinds is not None and sample.kind not in kinds:
            continue
        k = sum(counts.values())
        counts[sample.kind] = counts.get(sample.kind, 0) + 1
        fails = check_message(family, sample, rng, tokens, reference=bool(reference_every) and k % reference_every == 0)
        if fails:
            failures.append((i, sample.kind, fails, render_turn(family, sample)[1]))
    return Report(family, sum(counts.values()), failures, counts)
