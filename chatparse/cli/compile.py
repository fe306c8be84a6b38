"""`chatparse compile DIR`: precompile a tokenizer directory's response_template into response_template.cpt beside
it (`chatparse.tokenizer_dir.compile_dir`; ``--vllm``: the template as vLLM serves it), or with ``--check``
verify that the tables there are what this chatparse compiles (`chatparse.tokenizer_dir.check_dir`)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..tokenizer_dir import CONFIG_NAME, check_dir, compile_dir
from . import CLIError


def register(subparsers) -> None:
    """Add `chatparse compile DIR` and `chatparse compile --check DIR` to the chatparse CLI."""
    p = subparsers.add_parser(
        "compile",
        help="precompile a tokenizer directory's response_template into response_template.cpt",
        description="Compile the response_template in DIR/tokenizer_config.json into DIR/response_template.cpt "
                    "(the table format of FORMAT.md), with token tables for DIR/tokenizer.json when there is one. "
                    "With --check, write nothing: verify that the tables exist, are intact, belong to the "
                    "template and the tokenizer, and equal what this chatparse compiles.",
    )
    p.add_argument("directory", metavar="DIR", help="tokenizer directory (holds tokenizer_config.json)")
    p.add_argument("--check", action="store_true", help="verify instead of writing; exit status 1 if stale")
    p.add_argument("--vllm", action="store_true",
                   help="write the tables of the template as vLLM 0.33.0 serves it through chatparse's plugin "
                        "(response_template.vllm.cpt), which the plugin loads instead of compiling")
    p.set_defaults(func=main_compile)


def main_compile(args) -> int:
    directory = Path(args.directory)
    if not (directory / CONFIG_NAME).is_file():
        what = "is not a directory" if not directory.is_dir() else f"has no {CONFIG_NAME}"
        raise CLIError(f"{directory} {what}: not a tokenizer directory")
    if args.check:
        ok, msg = check_dir(args.directory)
        print(("ok: " if ok else "stale: ") + msg, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    try:
        if getattr(args, "vllm", False):
            from ..integrations.vllm_template import compile_serving_dir

            out = compile_serving_dir(args.directory)
        else:
            out = compile_dir(args.directory)
    except (OSError, ValueError, TypeError, KeyError) as e:
        raise CLIError(str(e)) from None
    from ..runtime.tables.loader import load

    raw = load(out)
    note = f", token tables for {raw['tokens']['meta']['size']} tokens" if "tokens" in raw else ""
    print(f"wrote {out} ({out.stat().st_size} bytes{note})")
    return 0
