"""The `chatparse` command line.

`chatparse demo` streams the spec's SmolLM3 example output through the SmolLM3 response template, printing
each event as it is produced and then the final message - the library's main job, in one screen.
Further subcommands are contributed by feature modules through a `register(subparsers)` function.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time

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

_FEATURE_MODULES = ("chatparse.tokenizer_dir", "chatparse.authoring.cli", "chatparse.parse_file",
                    "chatparse.grammar_cli")


def _demo(args) -> int:
    from . import ResponseParser

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


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    ap = argparse.ArgumentParser(prog="chatparse", description=__doc__.split("\n\n")[0])
    ap.add_argument("--version", action="version", version=f"chatparse {__version__}")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="stream the spec's SmolLM3 example and print events and message")
    demo.add_argument("--chunk", type=_positive_int, default=4, help="characters per feed (default 4)")
    demo.add_argument("--delay", type=_seconds, default=0.0, help="seconds to sleep between feeds")
    demo.set_defaults(func=_demo)
    for name in _FEATURE_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return ap


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:
        # The reader went away (`chatparse demo | head -2`): stop quietly, as a program killed by SIGPIPE
        # would, and point stdout at /dev/null so that the interpreter's last flush cannot fail again.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
