"""`chatparse grammar TEMPLATE --tools tools.json`: print a template's constrained-decoding grammar.

TEMPLATE is a bundled template name or a JSON file (a response template, or a tokenizer_config.json holding
one). The grammar goes to stdout (``--format lark``: llguidance's Lark; ``structural_tag``: xgrammar's JSON
as vLLM passes it); what it over- or under-approximates goes to stderr (``--json`` puts both in one object).
"""

from __future__ import annotations

import json
import sys


def _load_template(arg: str) -> dict:
    from . import templates

    if arg in templates.names():
        return templates.get(arg)
    with open(arg, encoding="utf-8") as fh:
        data = json.load(fh)
    return data.get("response_template", data) if isinstance(data, dict) else data


def _tool_choice(text: str | None):
    if text is None:
        return "auto"
    text = text.strip()
    if text.startswith("{"):
        return json.loads(text)
    return text


def main_grammar(args) -> int:
    from . import compile_template

    tools = None
    if args.tools:
        with open(args.tools, encoding="utf-8") as fh:
            tools = json.load(fh)
    prefix = None
    if args.prefix_file:
        with open(args.prefix_file, encoding="utf-8") as fh:
            prefix = fh.read()
    try:
        g = compile_template(_load_template(args.template)).grammar(
            tools, tool_choice=_tool_choice(args.tool_choice), format=args.format, prefix=prefix)
    except (ValueError, KeyError, OSError) as e:
        sys.stderr.write(f"chatparse grammar: {e}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(g.as_dict(), ensure_ascii=False, indent=2) + "\n")
        return 0
    sys.stdout.write(g.text if g.text.endswith("\n") else g.text + "\n")
    for a in g.approximated:
        sys.stderr.write(f"# {a['kind']}: {a['field']} {a['where']}: {a['how']}\n")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("grammar", help="print a template's constrained-decoding grammar (llguidance Lark "
                              "or xgrammar structural tag)", description=__doc__.split("\n\n")[0])
    p.add_argument("template", metavar="TEMPLATE", help="a bundled template name or a template JSON file")
    p.add_argument("--tools", metavar="FILE", help="JSON file: the request's tools (OpenAI function format)")
    p.add_argument("--format", choices=("lark", "structural_tag"), default="lark")
    p.add_argument("--tool-choice", metavar="CHOICE",
                   help='none, auto (default), required, a tool name, or {"type": "function", ...} JSON')
    p.add_argument("--prefix-file", metavar="FILE", help="the chat prompt (sets the region the output starts in)")
    p.add_argument("--json", action="store_true", help="one JSON object: grammar, exact, approximated")
    p.set_defaults(func=main_grammar)
