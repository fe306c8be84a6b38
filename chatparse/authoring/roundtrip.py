"""Round trip: render sample assistant messages with a chat template, parse the rendered turn back.

For each sample scenario (reasoning + answer, answer with several tool calls with nested arguments, tool calls
only, a plain answer, a second turn) the conversation is rendered twice, the way transformers'
``apply_chat_template`` renders it (``transformers.utils.chat_template_utils.render_jinja_template`` when
importable; otherwise a jinja2 sandbox set up like transformers': ``trim_blocks``, ``lstrip_blocks``,
``loopcontrols``, a ``tojson`` filter, ``raise_exception``, ``strftime_now`` and the reasoning-field aliasing):

* without the assistant message and with ``add_generation_prompt=True`` - the *prefix*;
* with the assistant message - the rendered assistant turn is what follows the prefix (trailing whitespace
  after the last token is dropped: a model stops at its end-of-turn token, the newline after it belongs to the
  chat layout).

The turn is parsed with chatparse (``prefix=`` the prompt, ``tools=`` the sample tool schemas, so arguments are
typed as the schema says) and compared with the message that was rendered; every difference is reported.
A chat template that refuses a scenario with ``raise_exception`` is reported as info, not as a failure.

The field names of the response template are also compared with what the chat template reads: a field the
chat template never reads is lost when the parsed message is rendered back into the chat.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from .checks import Finding, sort_findings

__all__ = ["SAMPLE_TOOLS", "RoundTrip", "ScenarioResult", "round_trip", "render", "template_reads",
           "sample_scenarios"]

REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
_ALIASED = ("thinking", "reasoning_content")  # what transformers fills from any of REASONING_KEYS

SAMPLE_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather forecast for a place.",
        "parameters": {"type": "object", "properties": {
            "location": {"type": "object", "description": "Where",
                         "properties": {"city": {"type": "string"}, "country": {"type": "string"}}},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature units"},
            "days": {"type": "integer", "description": "How many days"},
        }, "required": ["location"]}}},
    {"type": "function", "function": {
        "name": "search_flights", "description": "Search flights between two airports.",
        "parameters": {"type": "object", "properties": {
            "origin": {"type": "string", "description": "IATA code"},
            "destination": {"type": "string", "description": "IATA code"},
            "passengers": {"type": "array", "description": "Travellers",
                           "items": {"type": "object", "properties": {"name": {"type": "string"},
                                                                      "age": {"type": "integer"}}}},
            "flexible": {"type": "boolean", "description": "Allow nearby dates"},
            "max_price": {"type": "number", "description": "Budget in EUR"},
        }, "required": ["origin", "destination"]}}},
    {"type": "function", "function": {
        "name": "create_note", "description": "Save a note.",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string", "description": "Title"},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "Tags"},
        }, "required": ["title"]}}},
]

_CALLS = [
    {"type": "function", "function": {"name": "get_weather", "arguments": {
        "location": {"city": "Paris", "country": "FR"}, "units": "celsius", "days": 3}}},
    {"type": "function", "function": {"name": "search_flights", "arguments": {
        "origin": "CDG", "destination": "NRT",
        "passengers": [{"name": "Ana", "age": 34}, {"name": "Li", "age": 7}],
        "flexible": True, "max_price": 1250.5}}},
    {"type": "function", "function": {"name": "create_note", "arguments": {
        "title": "Trip to Tōkyō", "tags": ["travel", "2025"]}}},
]

_SYSTEM = {"role": "system", "content": "You are a helpful travel assistant."}
_USER = {"role": "user", "content": "What's the weather in Paris, and can you find flights to Tokyo for two?"}
_REASONING = "The user wants two things.\nFirst the forecast for Paris, then flights CDG to NRT."
_ANSWER = "Paris will be mild, around 18 °C.\nI found three direct flights to Tokyo under 1300 EUR."
_PREAMBLE = "Let me check the forecast and search for flights."


@dataclass
class Scenario:
    name: str
    history: list  # messages before the assistant turn
    message: dict  # the assistant message to render and parse back


@dataclass
class ScenarioResult:
    name: str
    status: str  # "ok" | "differs" | "refused" | "error"
    expected: dict | None = None
    parsed: dict | None = None
    prefix: str = ""
    output: str = ""
    differences: list = field(default_factory=list)  # (path, expected, got)
    error: str = ""


@dataclass
class RoundTrip:
    renderer: str
    scenarios: list
    findings: list
    reads: frozenset

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)


# ------------------------------------------------------------------------------------------------ rendering


def _transformers_render():
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except Exception:  # transformers missing or broken: use the jinja2 fallback
        return None
    return render_jinja_template


def render(chat_template: str, messages: list, *, tools=None, add_generation_prompt: bool = False,
           renderer: str = "auto", **kwargs) -> str:
    """Render `messages` as transformers' ``apply_chat_template(tokenize=False)`` would."""
    if renderer not in ("auto", "transformers", "jinja2"):
        raise ValueError(f"unknown renderer {renderer!r}")
    fn = _transformers_render() if renderer in ("auto", "transformers") else None
    if fn is None and renderer == "transformers":
        raise ImportError("transformers.utils.chat_template_utils is not importable")
    if fn is not None:
        rendered, _ = fn(conversations=[copy.deepcopy(messages)], tools=copy.deepcopy(tools),
                         chat_template=chat_template, add_generation_prompt=add_generation_prompt, **kwargs)
        return rendered[0]
    template = _jinja_env().from_string(chat_template)
    return template.render(messages=_alias_reasoning(copy.deepcopy(messages)), tools=copy.deepcopy(tools),
                           documents=None, add_generation_prompt=add_generation_prompt, **kwargs)


def renderer_name(renderer: str = "auto") -> str:
    if renderer == "auto":
        return "transformers" if _transformers_render() is not None else "jinja2"
    return renderer


def _alias_reasoning(messages: list) -> list:
    out = []
    for m in messages:
        if isinstance(m, dict):
            r = next((m[k] for k in REASONING_KEYS if m.get(k) is not None), None)
            if r is not None:
                m = {"thinking": r, **m, "reasoning_content": r}
        out.append(m)
    return out


_ENV = None


def _jinja_env():
    """A jinja2 sandbox configured like transformers' chat-template environment."""
    global _ENV
    if _ENV is not None:
        return _ENV
    from datetime import datetime

    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` renders its body (assistant-mask tracking is not needed)."""

        tags = {"generation"}

        def parse(self, parser):
            next(parser.stream)
            return parser.parse_statements(("name:endgeneration",), drop_needle=True)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    _ENV = env
    return env


def template_reads(chat_template: str) -> frozenset:
    """Names a chat template can read from its data: attribute names, constant subscripts and string
    constants (``message.reasoning_content``, ``message['tool_calls']``, ``'thinking' in message``)."""
    import jinja2.nodes as nodes

    ast = _jinja_env().parse(chat_template)
    names = set()
    for node in ast.find_all((nodes.Getattr, nodes.Getitem, nodes.Const)):
        if isinstance(node, nodes.Getattr):
            names.add(node.attr)
        elif isinstance(node, nodes.Getitem):
            if isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
                names.add(node.arg.value)
        elif isinstance(node.value, str):
            names.add(node.value)
    return frozenset(names)


# ------------------------------------------------------------------------------------------------ scenarios


def sample_scenarios(spec: dict) -> tuple[list, list]:
    """Scenarios for a normalized template `spec`; also the names of fields no sample value is generated for."""
    names = [f["name"] for f in spec["fields"]]
    reasoning = next((n for n in names if n in REASONING_KEYS), None)
    has_content = "content" in names
    has_tools = "tool_calls" in names
    extra, skipped = {}, []
    for f in spec["fields"]:
        n = f["name"]
        if n in REASONING_KEYS or n in ("content", "tool_calls"):
            continue
        if f["content"] == "text" and not f["repeats"]:
            extra[n] = f"Sample value for {n}."
        else:
            skipped.append(n)

    def msg(*, think=True, content=None, calls=None) -> dict:
        m: dict = {"role": "assistant"}
        if reasoning and think:
            m[reasoning] = _REASONING
        if has_content and content is not None:
            m["content"] = content
        if has_tools and calls:
            m["tool_calls"] = copy.deepcopy(calls)
        m.update(extra)
        return m

    base = [_SYSTEM, _USER]
    out = []
    if has_content or reasoning:
        out.append(Scenario("answer", base, msg(content=_ANSWER)))
    if has_tools:
        out.append(Scenario("tool_calls", base, msg(content=_PREAMBLE if has_content else None, calls=_CALLS)))
        out.append(Scenario("tool_calls_only", base, msg(calls=_CALLS[:2])))
    if has_content and reasoning:
        out.append(Scenario("plain_answer", base, msg(think=False, content=_ANSWER)))
    if has_content:
        second = base + [{"role": "assistant", "content": "Hello! How can I help?"},
                         {"role": "user", "content": "Any news about my flight?"}]
        out.append(Scenario("second_turn", second, msg(content="Your flight AF276 leaves on time.")))
    if not out and extra:
        out.append(Scenario("fields", base, msg(think=False)))
    return out, skipped


# ------------------------------------------------------------------------------------------------ comparing


def differences(expected: Any, got: Any, path: str = "") -> list:
    """Every place where `got` differs from `expected`, as ``(path, expected, got)``.

    A tool call's ``id`` present only in `got` is not a difference (templates may add ids)."""
    out: list = []
    if isinstance(expected, dict) and isinstance(got, dict):
        for k in expected:
            p = f"{path}.{k}" if path else k
            if k not in got:
                out.append((p, expected[k], _MISSING))
            else:
                out.extend(differences(expected[k], got[k], p))
        for k in got:
            if k not in expected and not (k == "id" and "function" in got):
                out.append((f"{path}.{k}" if path else k, _MISSING, got[k]))
        return out
    if isinstance(expected, list) and isinstance(got, list):
        for i in range(max(len(expected), len(got))):
            p = f"{path}[{i}]"
            if i >= len(got):
                out.append((p, expected[i], _MISSING))
            elif i >= len(expected):
                out.append((p, _MISSING, got[i]))
            else:
                out.extend(differences(expected[i], got[i], p))
        return out
    same = (type(expected) is type(got) or (_is_number(expected) and _is_number(got))) and expected == got
    if not same:
        out.append((path, expected, got))
    return out


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


class _Missing:
    def __repr__(self) -> str:
        return "(absent)"


_MISSING = _Missing()


def _show(v: Any) -> str:
    if v is _MISSING:
        return "(absent)"
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


# ------------------------------------------------------------------------------------------------ round trip


def round_trip(template: Any, chat_template: str, *, renderer: str = "auto", template_kwargs: dict | None = None,
               tools: list | None = None, reference: bool = False) -> RoundTrip:
    """Render sample messages with `chat_template`, parse them back with `template`, report differences.

    `template_kwargs` are extra chat-template variables (``enable_thinking`` ...). With `reference`, each turn is
    also parsed by transformers' reference parser and any disagreement with chatparse is an error.
    """
    import jinja2

    from chatparse import compile_template, parse_response

    tools = SAMPLE_TOOLS if tools is None else tools
    kwargs = dict(template_kwargs or {})
    compiled = compile_template(template)
    spec = compiled.spec
    findings: list[Finding] = []
    try:
        reads = template_reads(chat_template)
    except jinja2.TemplateSyntaxError as e:
        return RoundTrip(renderer_name(renderer), [], [Finding("error", "roundtrip", None, "chat_template",
                                                               f"chat template does not parse: {e}")], frozenset())
    findings.extend(_unread_fields(spec, reads))
    scenarios, skipped = sample_scenarios(spec)
    for name in skipped:
        findings.append(Finding("info", "roundtrip", name, None,
                                "no sample value is generated for this field (not a plain text field), so the "
                                "round trip does not cover it"))
    results = []
    prewritten = False  # the generation prompt already holds the (empty) reasoning: see below
    for sc in scenarios:
        res = ScenarioResult(sc.name, "ok")
        results.append(res)
        try:
            res.prefix = render(chat_template, sc.history, tools=tools, add_generation_prompt=True,
                                renderer=renderer, **kwargs)
            full = render(chat_template, sc.history + [sc.message], tools=tools, add_generation_prompt=False,
                          renderer=renderer, **kwargs)
            thought = [k for k in REASONING_KEYS if k in sc.message]
            if thought and not full.startswith(res.prefix):
                # With thinking turned off (qwen3's ``enable_thinking: false``) the generation prompt ends in
                # an empty reasoning block the model continues after: a turn with reasoning cannot follow it.
                # The same turn without its reasoning is what such a model generates.
                message = {k: v for k, v in sc.message.items() if k not in thought}
                bare = render(chat_template, sc.history + [message], tools=tools, add_generation_prompt=False,
                              renderer=renderer, **kwargs)
                if bare.startswith(res.prefix):
                    sc = Scenario(sc.name, sc.history, message)
                    full = bare
                    prewritten = True
        except jinja2.TemplateError as e:
            if type(e) is jinja2.TemplateError:  # raise_exception(): the template refuses this message
                res.status, res.error = "refused", str(e)
                findings.append(Finding("info", "roundtrip", None, "chat_template",
                                        f"scenario '{sc.name}': the chat template refuses it: {e}"))
            else:
                res.status, res.error = "error", f"{type(e).__name__}: {e}"
                findings.append(Finding("error", "roundtrip", None, "chat_template",
                                        f"scenario '{sc.name}': rendering failed: {res.error}"))
            continue
        if not full.startswith(res.prefix):
            at = next((i for i, (a, b) in enumerate(zip(full, res.prefix)) if a != b),
                      min(len(full), len(res.prefix)))
            res.status = "error"
            res.error = (f"the generation prompt is not a prefix of the rendered conversation (they differ at "
                         f"character {at}: prompt {_show(res.prefix[at:at + 40])}, conversation "
                         f"{_show(full[at:at + 40])})")
            findings.append(Finding("error", "roundtrip", None, "chat_template", f"scenario '{sc.name}': {res.error}"))
            continue
        res.output = full[len(res.prefix):].rstrip()
        res.expected = dict(copy.deepcopy(spec["defaults"]), **copy.deepcopy(sc.message))
        try:
            res.parsed = parse_response(res.output, compiled, prefix=res.prefix, tools=tools)
        except Exception as e:  # a parse error is a finding, not a crash
            res.status, res.error = "error", f"{type(e).__name__}: {e}"
            findings.append(Finding("error", "roundtrip", None, None,
                                    f"scenario '{sc.name}': parsing the rendered turn failed: {res.error}; "
                                    f"turn: {_show(res.output)}"))
            continue
        res.differences = differences(res.expected, res.parsed)
        if res.differences:
            res.status = "differs"
            for path, exp, got in res.differences:
                top = path.split(".")[0].split("[")[0]
                findings.append(Finding("error", "roundtrip", top or None, None,
                                        f"scenario '{sc.name}': {path}: rendered {_show(exp)}, parsed back "
                                        f"{_show(got)}"))
        if reference:
            findings.extend(_reference_check(sc.name, template, res, tools))
    if prewritten:
        findings.append(Finding("info", "roundtrip", None, "chat_template",
                                "the generation prompt already holds the reasoning block (thinking is off with "
                                "these chat-template variables): turns with reasoning cannot follow it, so they "
                                "were rendered and parsed back without their reasoning"))
    return RoundTrip(renderer_name(renderer), results, sort_findings(findings), reads)


def _unread_fields(spec: dict, reads: frozenset) -> list:
    out = []
    keys = [f["name"] for f in spec["fields"]] + [k for k in spec["defaults"] if k != "role"]
    for name in keys:
        if name in reads:
            continue
        if name in REASONING_KEYS and any(a in reads for a in _ALIASED):
            used = "reasoning_content" if "reasoning_content" in reads else "thinking"
            msg = (f"the chat template never reads '{name}', it reads '{used}'; rendering works only because "
                   f"transformers copies a message's reasoning to 'thinking' and 'reasoning_content'")
            if name != "reasoning_content":
                msg += "; name the field 'reasoning_content', the standard key"
        else:
            msg = (f"the chat template never reads '{name}': a parsed '{name}' is dropped when the message is "
                   "rendered back into the chat")
            if name in REASONING_KEYS:
                msg += "; name the reasoning field 'reasoning_content'"
        out.append(Finding("warning", "unread-field", name, None, msg))
    return out


def _reference_check(name: str, template: Any, res: ScenarioResult, tools: list) -> list:
    try:
        from transformers.utils.chat_parsing import parse_response as ref_parse
    except Exception:
        return [Finding("info", "roundtrip", None, None, "reference comparison skipped: transformers not importable")]
    try:
        ref = ref_parse(res.output, template, prefix=res.prefix, tools=tools)
    except Exception as e:
        ref = f"{type(e).__name__}: {e}"
    if ref != res.parsed:
        return [Finding("error", "roundtrip", None, None,
                        f"scenario '{name}': chatparse and the reference disagree: {_show(res.parsed)} vs {_show(ref)}")]
    return []


def format_round_trip(rt: RoundTrip, verbose: bool = False) -> str:
    lines = [f"round trip ({rt.renderer} renderer):"]
    for r in rt.scenarios:
        line = f"  {r.name}: {r.status}"
        if r.status in ("refused", "error"):
            line += f" - {r.error}"
        elif r.status == "differs":
            line += f" ({len(r.differences)} difference(s))"
        lines.append(line)
        if verbose and r.output:
            lines.append(f"    turn: {_show(r.output)}")
    return "\n".join(lines)
