"""The `chatparse` command line.

Guarantees, for every subcommand (`chatparse --help` lists them all):

* TEMPLATE (``--template`` for parse-file) is read by one function, `template_arg`: a bundled name, a
  template or tokenizer_config JSON file, a ``.cpt`` table file, or a tokenizer directory.
* An error is one line on stderr, ``chatparse SUBCOMMAND: error: MESSAGE``, naming the file, column, key or
  option it is about, with a non-zero exit status (2: bad input or usage; 1: the input was read but parsing
  failed; 3: a missing system tool). No input ends in a traceback: an unexpected exception is reported the same
  way, with exit status 1 (``CHATPARSE_TRACEBACK=1`` shows its traceback). A missing optional dependency names
  the extra that installs it.

`chatparse demo` streams the spec's SmolLM3 example output through the SmolLM3 response template, printing
each event as it is produced and then the final message - the library's main job, in one screen.
Further subcommands are contributed by feature modules through a `register(subparsers)` function; they report
errors by raising `CLIError` (or OSError / ValueError / KeyError / TypeError, whose message names the input).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
import time
from typing import Any

# The example from the response-parsing spec (SmolLM3): template and raw model output.
DEMO_TEMPLATE = {
    "defaults": {"role": "assistant"},
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "reasoning_content": {"open": "<think>", "close": "</think>", "content": "text"},
        "tool_calls": {
            "open": "<tool_call>",
            "close": "</tool_call>",
            "repeats": True,
            "content": "json",
            "transform": {"type": "function", "function": "{content}"},
        },
        "content": {"close": "<|im_end|>", "content": "text"},
    },
}
DEMO_PROMPT = "<|im_start|>user\nHi there!<|im_end|>\n<|im_start|>assistant\n"
DEMO_OUTPUT = (
    "<think>\nI should greet the user\n</think>\n\n"
    '<tool_call>{"name": "greet_user", "arguments": {"greeting": "Hi!"}}</tool_call>'
)

_FEATURE_MODULES = ("chatparse.cli.compile", "chatparse.cli.authoring", "chatparse.cli.parse_file",
                    "chatparse.cli.grammar")


def _demo(args) -> int:
    from .. import ResponseParser

    out = sys.stdout
    parser = ResponseParser(DEMO_TEMPLATE, prefix=DEMO_PROMPT)
    out.write(f"# streaming {len(DEMO_OUTPUT)} characters in chunks of {args.chunk}\n")
    for event in parser.initial_events:
        out.write(json.dumps(event) + "\n")
    for i in range(0, len(DEMO_OUTPUT), args.chunk):
        for event in parser.feed(DEMO_OUTPUT[i:i + args.chunk]):
            out.write(json.dumps(event) + "\n")
        out.flush()
        if args.delay:
            time.sleep(args.delay)
    message, final = parser.finalize()
    for event in final:
        out.write(json.dumps(event) + "\n")
    out.write("# message\n" + json.dumps(message, indent=2) + "\n")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be 0 or more seconds, got {text}")
    return value


class CLIError(Exception):
    """What a subcommand reports instead of its result: `main` prints ``chatparse SUB: error: MESSAGE`` (one
    line) on stderr and returns `status`."""

    def __init__(self, message: str, status: int = 2):
        super().__init__(message)
        self.status = status


# The extra of pyproject.toml that installs each optional module a subcommand may import.
EXTRAS = {"pyarrow": "data", "tqdm": "data", "jinja2": "authoring", "transformers": "transformers"}


def read_text(path: str, what: str) -> str:
    """The text of file `path` (``-``: stdin), UTF-8, line ends kept. CLIError naming `what` and `path` when
    the file is missing, unreadable or not UTF-8 text."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8", newline="") as fh:
            return fh.read()
    except OSError as e:
        raise CLIError(f"{what} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise CLIError(f"{what} {path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} at offset {e.start})") from None


def read_json(path: str, what: str) -> Any:
    """The JSON value in file `path` (`read_text`); CLIError naming `what`, `path`, line and column if invalid."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise CLIError(f"{what} {path}: not valid JSON: {e.msg} (line {e.lineno} column {e.colno})") from None


def json_kind(value: Any) -> str:
    """The JSON name of `value`'s type (object, list, string, number, boolean, null)."""
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "number",
            float: "number"}.get(type(value), "null")


def read_tools(path: str, what: str = "--tools") -> list:
    """The tool schemas in JSON file `path`: a list (`read_json`); CLIError naming the file otherwise."""
    tools = read_json(path, what)
    if not isinstance(tools, list):
        raise CLIError(f"{what} {path}: expected a JSON list of tool schemas, got {json_kind(tools)}")
    return tools


def template_arg(arg: str, what: str | None = None, *, bundled: str = "serving") -> tuple:
    """``(response_template, chat_template or None)`` of a TEMPLATE argument: the one reading every subcommand
    uses (`chatparse.authoring.load_template_arg`: a bundled name, a template or tokenizer_config JSON file, a
    ``.cpt`` table file, or a tokenizer directory; `bundled` as there). CLIError naming `what` (the option,
    e.g. ``--template``; None for the positional TEMPLATE) and the argument when it is none of these. For a
    tokenizer directory whose tables file is stale, a warning on stderr says so."""
    from ..authoring import load_template_arg

    try:
        loaded = load_template_arg(arg, bundled=bundled)
    except ValueError as e:
        raise CLIError(f"{what} {e}" if what else str(e)) from None  # (its message starts with `arg`)
    if os.path.isdir(arg):  # its tables file is not what is used here; say if it is stale
        from ..tokenizer_dir import stale_tables

        why = stale_tables(arg)
        if why:
            print(f"warning: {why}; this command uses the response_template of tokenizer_config.json, as "
                  f"`load_dir` would after recompiling (run `chatparse compile {arg}` to refresh the tables)",
                  file=sys.stderr)
    return loaded


def _error_line(exc: BaseException) -> tuple[str, int]:
    """The message and exit status `main` reports for `exc` (module docstring)."""
    if isinstance(exc, CLIError):
        return str(exc), exc.status
    if isinstance(exc, ImportError):
        top = (exc.name or "").split(".")[0] or next((m for m in EXTRAS if m in str(exc)), "")
        if top in EXTRAS:
            return f"this needs {top}, which is not installed: pip install 'chatparse[{EXTRAS[top]}]'", 2
        if isinstance(exc, ModuleNotFoundError) and top:
            return f"this needs the Python module {top}, which is not installed", 2
    if isinstance(exc, KeyError) and exc.args:
        return str(exc.args[0]), 2
    if isinstance(exc, OSError) and exc.filename is not None and exc.strerror:
        return f"{exc.filename}: {exc.strerror}", 2
    if isinstance(exc, (OSError, ValueError, TypeError)):
        return str(exc), 2
    return f"unexpected {type(exc).__name__}: {exc} (CHATPARSE_TRACEBACK=1 shows where)", 1


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    ap = _Parser(prog="chatparse", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"chatparse {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="stream the spec's SmolLM3 example and print events and message")
    demo.add_argument("--chunk", type=_positive_int, default=4, help="characters per feed (default 4)")
    demo.add_argument("--delay", type=_seconds, default=0.0, help="seconds to sleep between feeds")
    demo.set_defaults(func=_demo)
    for name in _FEATURE_MODULES:  # (imported unguarded: a subcommand never silently drops out of --help)
        importlib.import_module(name).register(sub)
    return ap


class _Parser(argparse.ArgumentParser):
    """argparse with usage errors on one line, ``chatparse SUB: error: MESSAGE (see chatparse SUB --help)``."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def main(argv=None) -> int:
    """Run the command line; returns the exit status (module docstring: errors are one line on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print(f"chatparse {args.command}: interrupted", file=sys.stderr)
        return 128 + 2
    except BrokenPipeError:
        # The reader went away (`chatparse demo | head -2`): stop quietly, as a program killed by SIGPIPE
        # would, and point stdout at /dev/null so that the interpreter's last flush cannot fail again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + 13
    except Exception as e:  # noqa: BLE001 - every error is one line (module docstring)
        if os.environ.get("CHATPARSE_TRACEBACK"):
            raise
        message, status = _error_line(e)
        message = re.sub(r"\s*\n\s*", " | ", message.strip())
        print(f"chatparse {args.command}: error: {message}", file=sys.stderr)
        return status

