"""`chatparse parse-file IN OUT --template TEMPLATE`: the command line of `chatparse.data.parse_file` (whose
docstring says what it reads, writes and guarantees). Errors are one line (`chatparse.cli`); the command exits
1 when rows were read and every one failed."""

from __future__ import annotations

import sys

from ..data import parse_file as pf
from . import CLIError, template_arg


def register(subparsers) -> None:
    p = subparsers.add_parser("parse-file", help="parse a JSONL or Parquet file of generations into messages",
                              description=pf.__doc__.split("\n\n")[0])
    p.add_argument("input", metavar="IN", help="input file (.jsonl / .parquet; .jsonl.gz)")
    p.add_argument("output", metavar="OUT", help="output file (.jsonl / .parquet), format by extension")
    p.add_argument("--template", required=True, metavar="TEMPLATE",
                   help="a bundled name (qwen3: serving-grade; qwen3:base), a template or tokenizer_config JSON "
                        "file, a .cpt table file, or a tokenizer directory")
    p.add_argument("--text-column", default="text", help="the generated text's column (default: text)")
    p.add_argument("--prefix-column", help="the column holding each row's chat prompt")
    p.add_argument("--prefix", help='one chat prompt for all rows ("" opts out)')
    p.add_argument("--tools-column", help="column with each row's tool schemas (a list, or JSON text)")
    p.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--batch-size", type=int, default=4096,
                   help="rows per batch (default 4096; fewer where a batch would hold more than about 2 MB)")
    p.add_argument("--drop-input", action="store_true", help="write the message columns only")
    p.add_argument("--column-prefix", default="", help="prefix of the message column names (e.g. parsed_)")
    p.add_argument("--dialect", choices=("transformers", "vllm"), help="events dialect (default transformers)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main_parse_file)


def main_parse_file(args) -> int:
    """The command (module docstring); errors propagate to `chatparse.cli.main`, which prints them as one line."""
    import tqdm  # noqa: F401 - (with pyarrow, below: a missing one names the extra, before any work)

    pf._own_process()  # this process is the command's own
    template, _ = template_arg(args.template, "--template")
    try:
        tables = pf._tables_of(template)
    except (ValueError, TypeError) as e:
        raise CLIError(f"--template {args.template}: {e}") from None
    summary = pf.parse_file(args.input, args.output, tables, text_column=args.text_column,
                            prefix=args.prefix, prefix_column=args.prefix_column, tools_column=args.tools_column,
                            workers=args.workers, batch_size=args.batch_size, drop_input=args.drop_input,
                            column_prefix=args.column_prefix, dialect=args.dialect,
                            progress=not args.no_progress)
    print(pf.format_summary(summary, args.input, args.output), file=sys.stderr)
    if summary["rows"] and summary["failed"] == summary["rows"]:
        raise CLIError(f"every row failed ({summary['rows']} of {summary['rows']}; the summary above says why)", 1)
    return 0
