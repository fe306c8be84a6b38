"""`chatparse grammar TEMPLATE --tools tools.json`: print a template's constrained-decoding grammar.

TEMPLATE is read as every subcommand reads it (`chatparse.cli.template_arg`: a template or tokenizer_config JSON
file, a ``.cpt`` table file, a tokenizer directory, or a bundled name), except that a bundled name, ``qwen3`` as
``qwen3:base``, gives the family's base-format template (`templates.get`), not the serving-grade one the other
subcommands parse with: a grammar constrains what the model writes, the base format, and the serving-grade
extensions only recover outputs a constrained model does not write (most of them have no grammar export). The
grammar goes to stdout (``--format lark``: llguidance's Lark; ``structural_tag``: xgrammar's JSON as vLLM
passes it); what it over- or under-approximates goes to stderr (``--json`` puts both in one object). Errors are
one line, ``chatparse grammar: error: ...``, naming the file or option (`chatparse.cli`).
"""

from __future__ import annotations

import json
import sys

from . import CLIError, read_text, read_tools, template_arg


def _tool_choice(text: str | None):
    if text is None:
        return "auto"
    text = text.strip()
    if text.startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise CLIError(f"--tool-choice: not valid JSON: {e.msg} (column {e.colno})") from None
    return text


def main_grammar(args) -> int:
    from .. import compile_template

    template, _ = template_arg(args.template, bundled="base")
    tools = read_tools(args.tools) if args.tools else None
    prefix = read_text(args.prefix_file, "--prefix-file") if args.prefix_file else None
    choice = _tool_choice(args.tool_choice)
    try:
        compiled = compile_template(template)
    except (ValueError, TypeError) as e:
        raise CLIError(f"{args.template}: {e}") from None
    try:
        g = compiled.grammar(tools, tool_choice=choice, format=args.format, prefix=prefix)
    except (ValueError, KeyError, TypeError) as e:
        where = f" with --tools {args.tools}" if args.tools else ""
        raise CLIError(f"{args.template}{where}: {e.args[0] if isinstance(e, KeyError) and e.args else e}") \
            from None
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
    p.add_argument("template", metavar="TEMPLATE", help="a bundled name (its base format), a template or "
                   "tokenizer_config JSON file, a .cpt table file, or a tokenizer directory")
    p.add_argument("--tools", metavar="FILE", help="JSON file: the request's tools (OpenAI function format)")
    p.add_argument("--format", choices=("lark", "structural_tag"), default="lark")
    p.add_argument("--tool-choice", metavar="CHOICE",
                   help='none, auto (default), required, a tool name, or {"type": "function", ...} JSON')
    p.add_argument("--prefix-file", metavar="FILE", help="the chat prompt (sets the region the output starts in)")
    p.add_argument("--json", action="store_true", help="one JSON object: grammar, exact, approximated")
    p.set_defaults(func=main_grammar)
