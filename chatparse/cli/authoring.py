"""`chatparse check`, `chatparse show` and `chatparse parse`: the command line for template authors.

TEMPLATE is read by `chatparse.cli.template_arg`: a bundled name (``qwen3``: serving-grade; ``qwen3:base``), a
response-template or tokenizer_config JSON file, a ``.cpt`` table file, or a tokenizer directory. Errors are one
line, ``chatparse check|show|parse: error: ...``, naming the file or option (`chatparse.cli`).

* ``chatparse check TEMPLATE [--chat-template FILE]`` - static checks on the compiled automata and, with a
  chat template, a render/parse round trip; one line per finding (``severity: field.key: message [check]``);
  exit status 1 when there is an error, 2 when TEMPLATE or FILE cannot be read.
* ``chatparse show TEMPLATE [--format dot|svg] [--mode N] [-o FILE]`` - the automaton of each parser mode.
* ``chatparse parse TEMPLATE FILE --prefix-file F|--prefix TEXT [--stream] [--chunk N]`` - the parsed message
  as JSON, or with ``--stream`` the live events, coloured by region when stdout is a terminal. The prefix (the
  chat prompt) is required, as `ResponseParser` requires it (``--prefix ""`` opts out); exit status 1 when
  the output does not parse.
"""

from __future__ import annotations

import json
import sys

from chatparse.cli import CLIError, _positive_int, read_text, read_tools, template_arg

__all__ = ["register", "main_check", "main_show", "main_parse"]

_COLOURS = ("36", "33", "32", "35", "34", "31", "96", "93")
_SEV_COLOUR = {"error": "31;1", "warning": "33", "info": "2"}


_TEMPLATE_HELP = ("a bundled name (qwen3: serving-grade; qwen3:base), a template or tokenizer_config JSON file, "
                  "a .cpt table file, or a tokenizer directory")
NO_PREFIX = ('give --prefix-file (the chat prompt sent before the generation) or --prefix TEXT (--prefix "" opts '
             "out), because chat templates often pre-write part of the assistant message (a qwen3 prompt can end "
             "in <think>)")


def register(subparsers) -> None:
    c = subparsers.add_parser(
        "check", help="static checks of a response template (and a round trip against a chat template)",
        description="Check a response template: overlapping delimiters, opens that can never fire, an implicit "
                    "close that swallows another delimiter, unbounded hold-back, patterns that need `regex` at "
                    "run time, backtracking risks; with --chat-template also render sample messages and parse "
                    "them back. Exit status 1 when an error is found.")
    c.add_argument("template", metavar="TEMPLATE", help=_TEMPLATE_HELP)
    c.add_argument("--chat-template", metavar="FILE", help="Jinja chat template (.jinja, or a JSON with "
                                                           "'chat_template') to round-trip against")
    c.add_argument("--chat-template-kwargs", metavar="JSON", default=None,
                   help='extra chat-template variables as a JSON object, e.g. \'{"enable_thinking": false}\'')
    c.add_argument("--renderer", choices=("auto", "transformers", "jinja2"), default="auto",
                   help="how to render the chat template (default: transformers when importable)")
    c.add_argument("--reference", action="store_true",
                   help="also parse each rendered turn with transformers' reference parser and compare")
    c.add_argument("--min-severity", choices=("info", "warning", "error"), default="info",
                   help="hide findings below this severity (default: show all)")
    c.add_argument("--json", action="store_true", help="print findings as a JSON list")
    c.add_argument("-v", "--verbose", action="store_true", help="show each round-trip scenario's rendered turn")
    c.set_defaults(func=main_check)

    s = subparsers.add_parser(
        "show", help="draw the delimiter automata of a response template (Graphviz DOT or SVG)",
        description="Print each parser mode's delimiter automaton as Graphviz DOT (or SVG via the `dot` program): "
                    "edges labelled with character ranges, accepting states with the delimiter they complete.")
    s.add_argument("template", metavar="TEMPLATE", help=_TEMPLATE_HELP)
    s.add_argument("--format", choices=("dot", "svg"), default="dot")
    s.add_argument("--mode", type=int, default=None, metavar="N",
                   help="only mode N (0: outside any region; 1+i: inside field i)")
    s.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    s.set_defaults(func=main_show)

    p = subparsers.add_parser(
        "parse", help="parse a model output with a response template",
        description="Parse FILE (model output; '-' for stdin) and print the message as JSON, or with --stream "
                    "feed it in chunks and print the live events (coloured by region on a terminal).")
    p.add_argument("template", metavar="TEMPLATE", help=_TEMPLATE_HELP)
    p.add_argument("file", metavar="FILE", help="the raw generated text ('-' for stdin)")
    prefix = p.add_mutually_exclusive_group()
    prefix.add_argument("--prefix-file", metavar="F", help="file holding the chat prompt sent before the generation "
                                                           "(this or --prefix is required)")
    prefix.add_argument("--prefix", metavar="TEXT", help='the chat prompt itself ("" opts out: no prompt)')
    p.add_argument("--tools", metavar="JSON_FILE", help="tool schemas (a JSON list) for typing tool-call arguments")
    p.add_argument("--stream", action="store_true", help="print streaming events instead of only the message")
    p.add_argument("--chunk", type=_positive_int, default=8, metavar="N",
                   help="characters per feed with --stream (default 8)")
    p.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                   help="ANSI colours for --stream (default: when stdout is a terminal)")
    p.set_defaults(func=main_parse)


# ------------------------------------------------------------------------------------------------ helpers


def _colour(enabled: bool, code: str, text: str) -> str:
    return f"\x1b[{code}m{text}\x1b[0m" if enabled else text


# ------------------------------------------------------------------------------------------------ check


def main_check(args) -> int:
    from ..authoring import load_chat_template_arg
    from ..authoring.checks import SEVERITIES, run_checks, sort_findings
    from ..authoring.roundtrip import format_round_trip, round_trip

    template, bundled_chat = template_arg(args.template)
    try:
        chat = load_chat_template_arg(args.chat_template) if args.chat_template else bundled_chat
    except ValueError as e:
        raise CLIError(f"--chat-template: {e}") from None
    try:
        kwargs = json.loads(args.chat_template_kwargs) if args.chat_template_kwargs else {}
    except json.JSONDecodeError as e:
        raise CLIError(f"--chat-template-kwargs: not valid JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(kwargs, dict):
        raise CLIError("--chat-template-kwargs must be a JSON object")
    findings = run_checks(template)
    rt = None
    compiled_ok = not any(f.check == "compile" and f.severity == "error" for f in findings)
    if chat is not None and compiled_ok:
        rt = round_trip(template, chat, renderer=args.renderer, template_kwargs=kwargs, reference=args.reference)
        findings = sort_findings(findings + rt.findings)
    limit = SEVERITIES.index(args.min_severity)
    shown = [f for f in findings if SEVERITIES.index(f.severity) <= limit]
    counts = {s: sum(1 for f in findings if f.severity == s) for s in SEVERITIES}
    if args.json:
        print(json.dumps({"findings": [f.as_dict() for f in shown], "counts": counts,
                          "round_trip": None if rt is None else {
                              "renderer": rt.renderer,
                              "scenarios": {r.name: r.status for r in rt.scenarios}}},
                         indent=2, ensure_ascii=False))
    else:
        tty = sys.stdout.isatty()
        for f in shown:
            print(_colour(tty, _SEV_COLOUR[f.severity], f.severity) + f": {f.where}: {f.message} [{f.check}]")
        if rt is not None:
            print(format_round_trip(rt, verbose=args.verbose))
        summary = ", ".join(f"{counts[s]} {s}{'s' if counts[s] != 1 and s != 'info' else ''}" for s in SEVERITIES)
        print(f"{args.template}: {summary}" + ("" if chat is not None else " (no chat template: round trip skipped)"))
    return 1 if counts["error"] else 0


# ------------------------------------------------------------------------------------------------ show


def main_show(args) -> int:
    from ..authoring.show import GraphvizMissing, to_dot, to_svg

    template, _ = template_arg(args.template)
    try:
        dot = to_dot(template, mode=args.mode)
    except (ValueError, TypeError) as e:
        raise CLIError(f"{args.template}: {e}") from None
    text = dot
    if args.format == "svg":
        try:
            text = to_svg(dot)
        except GraphvizMissing as e:
            raise CLIError(str(e), 3) from None
        except RuntimeError as e:
            raise CLIError(str(e)) from None
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as e:
            raise CLIError(f"-o {args.output}: {e.strerror or e}") from None
    else:
        sys.stdout.write(text)
    return 0


# ------------------------------------------------------------------------------------------------ parse


def main_parse(args) -> int:
    from chatparse import ResponseParser

    if args.prefix is None and args.prefix_file is None:
        raise CLIError(NO_PREFIX)
    template, _ = template_arg(args.template)
    text = read_text(args.file, "FILE")
    prefix = args.prefix if args.prefix is not None else read_text(args.prefix_file, "--prefix-file")
    tools = read_tools(args.tools) if args.tools else None
    try:
        parser = ResponseParser(template, prefix=prefix, tools=tools)
    except (ValueError, TypeError) as e:
        raise CLIError(f"{args.template}: {e}" if not tools else f"{args.template} with --tools {args.tools}: {e}") \
            from None
    out = sys.stdout
    colour = args.color == "always" or (args.color == "auto" and out.isatty())
    names = [f["name"] for f in parser._compiled.spec["fields"]]
    palette = {n: _COLOURS[i % len(_COLOURS)] for i, n in enumerate(names)}

    def emit(events):
        for ev in events:
            line = json.dumps(ev, ensure_ascii=False)
            code = palette.get(ev.get("field"), "0")
            if ev.get("type") != "region_chunk":
                code += ";1"
            out.write(_colour(colour, code, line) + "\n")
        out.flush()

    try:
        if args.stream:
            emit(parser.initial_events)
            for i in range(0, len(text), args.chunk):
                emit(parser.feed(text[i:i + args.chunk]))
            message, final = parser.finalize()
            emit(final)
            out.write("# message\n")
        else:
            parser.feed(text)
            message, _ = parser.finalize()
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise CLIError(f"parsing failed: {type(e).__name__}: {e}", 1) from None
    out.write(json.dumps(message, indent=2, ensure_ascii=False) + "\n")
    return 0
