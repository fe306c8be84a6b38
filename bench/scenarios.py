"""Benchmark scenarios: deterministic, realistic generations in four real output formats.

Every scenario is one model generation (``prefix`` = the chat prompt, ``output`` = what the model wrote) in the
syntax of one bundled template, as documented in ``tests/data/FORMATS.md`` and exercised by the corpus
cases of ``tests/data/corpus.json``:

* ``smollm3``     - ChatML, ``<think>...</think>``, ``<tool_call>{json}</tool_call>``, ``<|im_end|>``
* ``qwen3_coder`` - ChatML, ``<tool_call><function=NAME><parameter=KEY>raw value</parameter>...``
* ``gpt_oss``     - harmony channels: analysis / ``commentary to=functions.NAME`` / final
* ``gemma4``      - ``<|channel>thought\\n...<channel|>``, ``<|tool_call>call:NAME{k:<|"|>v<|"|>}<tool_call|>``
  (json with ``string_delims`` and ``unquoted_keys``, regex ``open_pattern`` with a named group)

Text is assembled from pieces a model really writes: reasoning prose (with the occasional ``n <= 10^5`` and
non-ASCII character), source code and HTML dense with ``<`` and newlines (Python, C++ templates, TypeScript
generics, HTML tables - whose ``<t...`` tags partially match ``<think>``, ``<tool_call>`` and ``<turn|>``), and
long tool-call arguments (whole files written through ``write_file``). Everything is drawn from a
``random.Random`` seeded by the scenario name, so every run benchmarks the same bytes.

Document kinds:

* ``mixed``     - a typical turn: reasoning, an answer with code, tool calls with long arguments (one-shot, memory)
* ``reasoning`` - the generation is one long reasoning region (prose + code), then a short answer
* ``content``   - short reasoning, then one long answer dense with ``<`` and ``\\n`` (code/HTML)
* ``tool_args`` - short reasoning, then one tool call whose argument is a long file (code/HTML)

A few pieces carry non-ASCII characters (curly quotes, an arrow, accented names), which makes CPython store the
whole text at 2 bytes per character, as for most real outputs; ``make(..., ascii=True)`` gives the same text
with ASCII stand-ins (1 byte per character), which halves the cost of the reference's buffer copies.

The ``reasoning``/``content``/``tool_args`` kinds keep one region open over (almost) the whole generation,
so a streaming window ending at any length sees the same kind of text and per-feed costs at 15k and at 500k
characters are comparable.

`Scenario.expect` is the shape the generator meant (reasoning, content, number of tool calls);
`bench.measure.check` asserts it, and that chatparse and the reference agree, before anything is timed.
"""

from __future__ import annotations

import json
import random
import zlib
from dataclasses import dataclass, field

FORMATS = ("smollm3", "qwen3_coder", "gpt_oss", "gemma4")
KINDS = ("mixed", "reasoning", "content", "tool_args")
STREAM_KINDS = ("reasoning", "content", "tool_args")

FORMAT_LABELS = {
    "smollm3": "SmolLM3",
    "qwen3_coder": "Qwen3-Coder (XML parameters)",
    "gpt_oss": "gpt-oss (harmony)",
    "gemma4": "Gemma 4 (string_delims, regex open)",
}

# No generated piece may contain any of these: they are delimiters (or delimiter fragments that would make
# the text a different message) in one of the four formats.
FORBIDDEN = (
    "<think>", "</think>", "<tool_call>", "</tool_call>", "<|", "|>", "<function=", "</function>",
    "<parameter=", "</parameter>", "<channel|>", "<turn|>", "<eos>", "<tool_call|>", "to=functions.",
    "\x01", "\x02",
)


@dataclass
class Scenario:
    """One generation: feed ``output`` after ``prefix`` through ``template`` (a bundled template name)."""

    fmt: str
    kind: str
    length: int  # the requested size in characters (the output is at least this long for long kinds)
    prefix: str
    output: str
    expect: dict = field(default_factory=dict)  # shape checks: keys present, number of tool calls
    text: str = "unicode"  # "ascii": the non-ASCII characters replaced (see `make`)

    @property
    def name(self) -> str:
        return f"{self.fmt}/{self.kind}/{self.length}" + ("/ascii" if self.text == "ascii" else "")

    def template(self) -> dict:
        from chatparse import templates

        return templates.get(self.fmt)


def _rng(*key) -> random.Random:
    return random.Random(zlib.crc32("/".join(map(str, key)).encode()))


# -- text pieces -------------------------------------------------------------------------------------------

_CONNECT = ["First,", "Then", "However,", "So", "Wait,", "Actually,", "Hmm,", "Now", "Also,", "Next,", "OK,",
            "But", "In that case", "Alternatively,", "To be safe,"]
_SUBJ = ["the user", "the request", "this function", "the parser", "the test suite", "the cache", "the loop",
         "the config file", "the API", "the migration", "the query", "the template", "the previous step",
         "the edge case", "the stack trace", "the benchmark", "our helper", "the CSS grid", "the handler"]
_VERB = ["needs", "handles", "returns", "expects", "breaks on", "wraps", "ignores", "validates", "rewrites",
         "depends on", "should cover", "mis-parses", "already caches", "must not touch", "iterates over"]
_OBJ = ["an empty list", "the edge case where n == 0", "a list of records", "unicode input like “naïve”",
        "the last element", "every row of the table", "the nested dict", "the timeout", "duplicate keys",
        "the HTTP 404 path", "negative offsets", "the retry budget", "a string with quotes (\"like this\")",
        "the header row", "the sorted order", "concurrent writers", "the 10^5 limit", "the <div> wrapper"]
_TAIL = ["", "", "", " when n <= 10^5", " because i < j always holds", " — that is the tricky part",
         " (see line {n})", " in O(n log n)", " if x < 0", ", so the bound is 2^{n}", " → fine", " for ~{n} items",
         " before returning", " according to the docs", " unless a < b"]
_THINK_OPEN = ["Let me think about this.", "Okay, the user wants {n} things fixed.", "Let me check the code.",
               "I need to figure out why the test fails.", "The question is about performance."]


def prose_sentence(r: random.Random) -> str:
    s = f"{r.choice(_CONNECT)} {r.choice(_SUBJ)} {r.choice(_VERB)} {r.choice(_OBJ)}{r.choice(_TAIL)}."
    return s.replace("{n}", str(r.randint(2, 400)))


def prose_paragraph(r: random.Random, sentences: tuple[int, int] = (3, 7)) -> str:
    return " ".join(prose_sentence(r) for _ in range(r.randint(*sentences)))


_IDS = ["items", "rows", "count", "limit", "node", "buf", "total", "left", "right", "key", "value", "user",
        "order", "index", "cache", "result", "score", "depth", "width", "offset"]
_TAGS = ["div", "span", "table", "thead", "tbody", "tr", "td", "th", "tt", "textarea", "template", "time",
         "ul", "li", "section", "em", "strong", "a", "p", "label", "input", "button"]


def _id(r: random.Random) -> str:
    return r.choice(_IDS) + (str(r.randint(0, 9)) if r.random() < 0.3 else "")


def code_python(r: random.Random) -> str:
    a, b, c = _id(r), _id(r), _id(r)
    n = r.randint(1, 99)
    return (
        f"def check_{a}({b}: list[int], {c}: int = {n}) -> bool:\n"
        f"    for i in range(len({b})):\n"
        f"        if {b}[i] < {c} and i <= {n}:\n"
        f"            {b}[i] <<= 1\n"
        f"        elif {b}[i] >= {c} or {b}[i] < -{n}:\n"
        f"            return False\n"
        f"    return sum(x for x in {b} if x < {c}) < {n * 10}\n"
    )


def code_cpp(r: random.Random) -> str:
    a, b = _id(r), _id(r)
    n = r.randint(2, 64)
    return (
        "#include <vector>\n#include <map>\n"
        f"template <typename T>\nstd::vector<std::pair<int, T>> {a}_of(const std::map<int, std::vector<T>>& {b}) {{\n"
        f"    std::vector<std::pair<int, T>> out;\n"
        f"    for (int i = 0; i < {n}; ++i) {{\n"
        f"        if ({b}.count(i) && {b}.at(i).size() <= {n}u) out.emplace_back(i, {b}.at(i)[0]);\n"
        f"        std::cout << i << \"\\n\";\n"
        f"    }}\n    return out;\n}}\n"
    )


def code_ts(r: random.Random) -> str:
    a, b = _id(r), _id(r)
    n = r.randint(1, 500)
    return (
        f"const {a} = new Map<string, Array<number>>();\n"
        f"function pick{b.capitalize()}<T extends {{ id: number }}>(xs: T[]): T | undefined {{\n"
        f"  return xs.filter((x) => x.id < {n} && x.id >= 0).sort((p, q) => p.id - q.id)[0];\n"
        f"}}\n"
        f"if ({a}.size < {n}) {{ console.log(`<${{{a}.size}}>`); }}\n"
    )


def code_html(r: random.Random) -> str:
    rows = []
    for _ in range(r.randint(2, 5)):
        cells = "".join(f"<td class=\"c{r.randint(0, 9)}\">{_id(r)} &lt; {r.randint(1, 99)}</td>"
                        for _ in range(r.randint(2, 4)))
        rows.append(f"    <tr>{cells}</tr>\n")
    tag = r.choice(_TAGS)
    return (
        f"<section id=\"{_id(r)}\">\n  <!-- {r.choice(_OBJ)} -->\n  <table>\n   <thead><tr><th>{_id(r)}</th>"
        f"<th>{_id(r)}</th></tr></thead>\n   <tbody>\n" + "".join(rows) +
        f"   </tbody>\n  </table>\n  <{tag} title=\"{_id(r)}\">{_id(r)}<br/></{tag}>\n"
        f"  <textarea rows=\"{r.randint(2, 9)}\"></textarea>\n</section>\n"
    )


def code_sql(r: random.Random) -> str:
    return (f"SELECT {_id(r)}, COUNT(*) FROM {_id(r)} WHERE {_id(r)} < {r.randint(1, 999)} "
            f"AND {_id(r)} <> 'x' GROUP BY 1 HAVING COUNT(*) <= {r.randint(2, 50)};\n")


_CODE = [(code_python, "python"), (code_cpp, "cpp"), (code_ts, "typescript"), (code_html, "html"),
         (code_sql, "sql")]


def code_block(r: random.Random, fenced: bool = True) -> str:
    gen, lang = r.choice(_CODE)
    body = "".join(gen(r) for _ in range(r.randint(1, 3)))
    return f"```{lang}\n{body}```" if fenced else body


def fill(r: random.Random, n: int, style: str) -> str:
    """At least `n` characters (stopping at a piece boundary) of one style of text.

    ``reasoning``: mostly prose paragraphs with some code; ``dense``: markdown answer, mostly code/HTML;
    ``file``: raw source text (several files concatenated), as written into a tool-call argument.
    """
    parts: list[str] = []
    size = 0
    while size < n:
        if style == "reasoning":
            piece = code_block(r) if r.random() < 0.2 else prose_paragraph(r)
            sep = "\n\n"
        elif style == "dense":
            piece = code_block(r) if r.random() < 0.75 else prose_paragraph(r, (1, 3))
            sep = "\n\n"
        elif style == "file":
            gen, _ = r.choice(_CODE)
            piece = gen(r)
            sep = "\n"
        else:
            raise ValueError(style)
        parts.append(piece)
        size += len(piece) + len(sep)
    text = sep.join(parts)
    for bad in FORBIDDEN:
        assert bad not in text, f"generator produced a delimiter {bad!r}"
    return text


# -- per-format syntax -------------------------------------------------------------------------------------

_SYSTEM = "You are a helpful coding assistant."


def _question(r: random.Random) -> str:
    return f"Please fix the {_id(r)} handling in our {r.choice(['parser', 'web page', 'service'])} and add tests."


def _tool_args(r: random.Random, file_text: str) -> tuple[str, dict]:
    name = r.choice(["write_file", "edit_file", "create_file"])
    return name, {"path": f"src/{_id(r)}/{_id(r)}.{r.choice(['py', 'ts', 'html', 'cpp'])}",
                  "content": file_text, "overwrite": True, "mode": 420}


def _small_call(r: random.Random) -> tuple[str, dict]:
    return r.choice([
        ("run_tests", {"path": f"tests/test_{_id(r)}.py", "verbose": True, "max_failures": r.randint(1, 9)}),
        ("search_code", {"query": f"{_id(r)} < {r.randint(1, 99)}", "limit": r.randint(5, 50)}),
        ("get_weather", {"location": r.choice(["Tokyo", "Paris", "São Paulo", "Zürich"]), "days": 3}),
    ])


class _Syntax:
    """How one format writes reasoning, an answer, tool calls and the end of the turn."""

    def prefix(self, r: random.Random) -> str:
        return (f"<|im_start|>system\n{_SYSTEM}<|im_end|>\n<|im_start|>user\n{_question(r)}<|im_end|>\n"
                "<|im_start|>assistant\n")

    def reasoning(self, body: str) -> str:
        return f"<think>\n{body}\n</think>\n\n"

    def answer(self, body: str) -> str:
        return body

    def call(self, name: str, args: dict) -> str:
        raise NotImplementedError

    def end(self) -> str:
        return "<|im_end|>"

    def join_calls(self, calls: list[str]) -> str:
        return "\n" + "\n".join(calls)


class _SmolLM3(_Syntax):
    def call(self, name, args):
        return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args}, ensure_ascii=False)}\n</tool_call>"


class _Qwen3Coder(_Syntax):
    def call(self, name, args):
        params = "".join(
            f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v)}\n</parameter>\n" for k, v in args.items()
        )
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


class _GptOss(_Syntax):
    def prefix(self, r):
        return (f"<|start|>system<|message|>{_SYSTEM}<|end|><|start|>user<|message|>{_question(r)}<|end|>"
                "<|start|>assistant")

    def reasoning(self, body):
        return f"<|channel|>analysis<|message|>{body}<|end|><|start|>assistant"

    def answer(self, body):
        return f"<|channel|>final<|message|>{body}"

    def call(self, name, args):
        return (f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
                f"{json.dumps(args, indent=2, ensure_ascii=False)}<|call|>")

    def join_calls(self, calls):
        return "<|start|>assistant".join(calls)

    def end(self):
        return "<|return|>"


def _gemma_value(v) -> str:
    if isinstance(v, str):
        return f'<|"|>{v}<|"|>'
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_gemma_value(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_gemma_value(x) for x in v) + "]"
    return json.dumps(v)


class _Gemma4(_Syntax):
    def prefix(self, r):
        return f"<|turn>system\n{_SYSTEM}<turn|>\n<|turn>user\n{_question(r)}<turn|>\n<|turn>model\n"

    def reasoning(self, body):
        return f"<|channel>thought\n{body}<channel|>"

    def call(self, name, args):
        return f"<|tool_call>call:{name}{_gemma_value(args)}<tool_call|>"

    def join_calls(self, calls):
        return " " + "".join(calls)

    def end(self):
        return "<turn|>"


SYNTAX = {"smollm3": _SmolLM3(), "qwen3_coder": _Qwen3Coder(), "gpt_oss": _GptOss(), "gemma4": _Gemma4()}


def _assemble(fmt: str, r: random.Random, reasoning: str, answer: str | None, calls: list[tuple[str, dict]]):
    sx = SYNTAX[fmt]
    out = sx.reasoning(reasoning)
    if fmt == "gpt_oss":
        # harmony: analysis, then either the tool calls or the final answer, each in its own message
        if calls:
            out += sx.join_calls([sx.call(n, a) for n, a in calls])
        if answer is not None:
            out += ("<|start|>assistant" if calls else "") + sx.answer(answer) + sx.end()
    else:
        if answer is not None:
            out += sx.answer(answer)
        if calls:
            out += sx.join_calls([sx.call(n, a) for n, a in calls])
        out += sx.end()
    expect = {"reasoning_content": True, "content": answer is not None, "tool_calls": len(calls)}
    return out, expect


def _mixed(fmt: str, r: random.Random, n: int):
    # ~30% reasoning, ~30% answer, ~40% tool calls: one long write_file plus a small call or two
    reasoning = fill(r, int(n * 0.3), "reasoning")
    answer = fill(r, int(n * 0.3), "dense")
    big = fill(r, int(n * 0.36), "file")
    calls = [_tool_args(r, big)] + [_small_call(r) for _ in range(r.randint(1, 2))]
    return _assemble(fmt, r, reasoning, answer, calls)


# ASCII stand-ins for the few non-ASCII characters the pieces use (for the `ascii=True` variant). They only
# ever occur inside string values, so each stand-in must be a character no format escapes (no '"', no '\\').
_TO_ASCII = str.maketrans({"“": "'", "”": "'", "ï": "i", "—": "-", "→": "->", "ã": "a", "ü": "u"})


def to_ascii(text: str) -> str:
    out = text.translate(_TO_ASCII)
    assert out.isascii(), "a non-ASCII character without an ASCII stand-in"
    return out


def make(fmt: str, kind: str, length: int, variant: int = 0, ascii: bool = False) -> Scenario:
    """The scenario `fmt`/`kind` with an output of about `length` characters (``mixed``: within a few percent;
    the single-region kinds: at least `length`, so a streaming window can end at `length`). `variant` picks
    another deterministic text of the same shape (batches). A few pieces hold non-ASCII characters (curly
    quotes, an arrow, accented names), so CPython stores the whole text at 2 bytes per character, as it does
    for most real outputs; `ascii=True` replaces them with ASCII stand-ins (1 byte per character)."""
    sc = _make(fmt, kind, length, variant)
    if ascii:
        sc.output, sc.prefix, sc.text = to_ascii(sc.output), to_ascii(sc.prefix), "ascii"
    return sc


def _make(fmt: str, kind: str, length: int, variant: int = 0) -> Scenario:
    if fmt not in SYNTAX:
        raise KeyError(fmt)
    r = _rng(fmt, kind, length, variant)
    sx = SYNTAX[fmt]
    prefix = sx.prefix(r)
    if kind == "mixed":
        # pieces come in whole units, so aim, measure and re-aim (same seed each time: deterministic)
        target = length
        for _ in range(8):
            r = _rng(fmt, kind, length, variant, "body")
            output, expect = _mixed(fmt, r, target)
            if abs(len(output) - length) <= 0.04 * length:
                break
            target = max(200, int(target * length / len(output)))
    elif kind == "reasoning":
        reasoning = r.choice(_THINK_OPEN).replace("{n}", "3") + "\n\n" + fill(r, length + 64, "reasoning")
        output, expect = _assemble(fmt, r, reasoning, prose_paragraph(r), [])
    elif kind == "content":
        output, expect = _assemble(fmt, r, prose_paragraph(r, (1, 2)), fill(r, length + 64, "dense"), [])
    elif kind == "tool_args":
        calls = [_tool_args(r, fill(r, length + 64, "file"))]
        output, expect = _assemble(fmt, r, prose_paragraph(r, (1, 2)), None, calls)
    else:
        raise KeyError(kind)
    return Scenario(fmt, kind, length, prefix, output, expect)
