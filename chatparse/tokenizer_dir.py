"""Compiled tables next to a tokenizer: write, load, check, and the `chatparse compile` command.

A tokenizer directory keeps its response template where transformers keeps it - the ``response_template`` key
of ``tokenizer_config.json`` (written with ``json.dumps(..., indent=2, sort_keys=True, ensure_ascii=False)``,
as ``save_pretrained`` does) - and chatparse adds one file beside it, ``response_template.cpt``, holding the
template compiled to tables (format: FORMAT.md). The tables are compiled from the template *as stored in
tokenizer_config.json*, so its header hash is the hash of exactly that template.

* `save_dir(directory, template)`: write the template into tokenizer_config.json (keeping every other key)
  and the tables beside it.
* `compile_dir(directory)`: (re)compile the template already in tokenizer_config.json and write the tables.
* `load_dir(directory)`: a `CompiledTemplate` for the directory - from the tables file when its template hash
  matches the config's template (no compilation; the automaton is not rebuilt), else compiled from the config,
  with a logged warning saying why the tables were not used.
* `check_dir(directory)`: `(ok, message)`; the tables must load, match the template, and equal what this
  chatparse compiles now.

Importing this module also registers `CompiledTemplate` with `copyreg`, so compiled templates pickle through
the table format (`chatparse.compiler.writer.compiled_reduce`).
"""

from __future__ import annotations

import copyreg
import json
import logging
import os
from pathlib import Path
from typing import Any

from .compiled import CompiledTemplate

__all__ = ["CONFIG_NAME", "TABLES_NAME", "save_dir", "compile_dir", "load_dir", "check_dir", "register",
           "main_compile"]

logger = logging.getLogger("chatparse")

CONFIG_NAME = "tokenizer_config.json"
TABLES_NAME = "response_template.cpt"


def _reduce(ct):
    from .compiler.writer import compiled_reduce

    return compiled_reduce(ct)


copyreg.pickle(CompiledTemplate, _reduce)


# ------------------------------------------------------------------------------------------------ helpers


def _config_path(directory) -> Path:
    return Path(directory) / CONFIG_NAME


def _read_config(directory) -> dict:
    path = _config_path(directory)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"{path} does not exist: not a tokenizer directory") from None
    cfg = json.loads(text)
    if not isinstance(cfg, dict):
        raise ValueError(f"{path} does not hold a JSON object")
    return cfg


def _config_template(directory) -> Any:
    cfg = _read_config(directory)
    if cfg.get("response_template") is None:
        raise ValueError(f"{_config_path(directory)} has no 'response_template'")
    return cfg["response_template"]


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ API


def save_dir(directory, template: Any, *, vocab_hash: bytes | str | None = None) -> Path:
    """Write `template` into `directory`/tokenizer_config.json and its tables beside it; returns the tables path.

    Other keys of an existing tokenizer_config.json are kept; the file is written the way transformers'
    ``save_pretrained`` writes it (so ``AutoTokenizer.from_pretrained`` sees the same template)."""
    from .compiler.validate import load_template

    load_template(template)  # refuse an invalid template before touching the directory
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = _config_path(directory)
    cfg = _read_config(directory) if path.exists() else {}
    cfg["response_template"] = template
    _write_json(path, cfg)
    return compile_dir(directory, vocab_hash=vocab_hash)


def compile_dir(directory, *, vocab_hash: bytes | str | None = None) -> Path:
    """Compile the response_template of `directory`/tokenizer_config.json into `directory`/response_template.cpt."""
    from .compiled import compile_template
    from .compiler.writer import save

    compiled = compile_template(_config_template(directory))
    out = Path(directory) / TABLES_NAME
    save(compiled, out, vocab_hash=vocab_hash)
    return out


def load_dir(directory) -> CompiledTemplate:
    """The compiled response template of a tokenizer directory, from its tables when they match.

    When the tables file is missing, unreadable, corrupted, or was compiled for a different template, the
    template is compiled from tokenizer_config.json instead and a warning says so (the directory is not
    modified; run ``chatparse compile DIR`` to refresh it)."""
    from .compiler.validate import load_template
    from .runtime.loader import load, template_hash

    directory = Path(directory)
    template = _config_template(directory)
    spec = load_template(template)
    want = template_hash(spec)
    tables = directory / TABLES_NAME
    why = None
    if not tables.exists():
        why = f"{tables} does not exist"
    else:
        try:
            raw = load(tables)
        except ValueError as e:
            why = f"{tables} cannot be used: {e}"
        else:
            if raw["header"]["template_sha256"] != want:
                why = f"{tables} was compiled for a different response_template (template hash mismatch)"
            else:
                from . import __version__

                if raw["header"]["chatparse_version"] != __version__:
                    logger.info("chatparse: %s was written by chatparse %s (this is %s); same format, using it",
                                tables, raw["header"]["chatparse_version"], __version__)
                # Same template up to key order; the config's order is the one a fresh compile would use.
                raw["template"] = spec
                return CompiledTemplate(spec, raw)
    logger.warning("chatparse: %s; recompiling response_template from %s (run `chatparse compile %s` to "
                   "refresh the tables)", why, CONFIG_NAME, directory)
    from .compiled import compile_template

    return compile_template(template)


def check_dir(directory) -> tuple[bool, str]:
    """Verify a tokenizer directory's tables: present, intact, for its template, and up to date."""
    from . import __version__
    from .compiled import compile_template
    from .compiler.validate import load_template
    from .runtime.loader import load, template_hash

    directory = Path(directory)
    try:
        template = _config_template(directory)
        spec = load_template(template)
    except (OSError, ValueError, TypeError) as e:
        return False, f"response_template: {e}"
    tables = directory / TABLES_NAME
    if not tables.exists():
        return False, f"{tables} is missing (run `chatparse compile {directory}`)"
    try:
        raw = load(tables)
    except ValueError as e:
        return False, str(e)
    if raw["header"]["template_sha256"] != template_hash(spec):
        return False, f"{tables} was compiled for a different response_template (template hash mismatch)"
    fresh = compile_template(template).raw_tables
    diff = tables_differ(raw, fresh)
    if diff:
        return False, f"{tables} differs from what chatparse {__version__} compiles ({diff}); recompile it"
    note = "" if raw["header"]["chatparse_version"] == __version__ else \
        f" (written by chatparse {raw['header']['chatparse_version']})"
    return True, f"{tables} is up to date{note}"


def tables_differ(a: dict, b: dict) -> str | None:
    """None when two table dicts describe the same automaton, else a short description of the first difference."""
    import numpy as np

    if a["n_classes"] != b["n_classes"]:
        return "number of character classes"
    for k in ("class_starts", "class_ids"):
        if not np.array_equal(np.asarray(a[k]), np.asarray(b[k])):
            return k
    keys = ("kind", "field", "key", "source", "exact", "reasons", "named_groups", "history", "horizon")
    if [[p[k] for k in keys] for p in a["patterns"]] != [[p[k] for k in keys] for p in b["patterns"]]:
        return "pattern metadata"
    if len(a["modes"]) != len(b["modes"]):
        return "number of modes"
    for i, (ma, mb) in enumerate(zip(a["modes"], b["modes"])):
        for k in ("trans", "eot", "acc", "term"):
            if not np.array_equal(np.asarray(ma[k]).astype(np.int64), np.asarray(mb[k]).astype(np.int64)):
                return f"mode {i} {k}"
        if (list(ma["patterns"]), ma["start0"], ma["startN"]) != (list(mb["patterns"]), mb["start0"], mb["startN"]):
            return f"mode {i} start states"
        norm = (lambda f: None if f is None else [[[list(r) for r in c1], None if c2 is None else
                                                   [list(r) for r in c2]] for c1, c2 in f])
        if norm(ma["first"]) != norm(mb["first"]):
            return f"mode {i} prefilter"
    return None


# ------------------------------------------------------------------------------------------------ CLI


def register(subparsers) -> None:
    """Add `chatparse compile DIR` and `chatparse compile --check DIR` to the chatparse CLI."""
    p = subparsers.add_parser(
        "compile",
        help="precompile a tokenizer directory's response_template into response_template.cpt",
        description="Compile the response_template in DIR/tokenizer_config.json into DIR/response_template.cpt "
                    "(the table format of FORMAT.md). With --check, write nothing: verify that the tables exist, "
                    "are intact, belong to the template, and equal what this chatparse compiles.",
    )
    p.add_argument("directory", metavar="DIR", help="tokenizer directory (holds tokenizer_config.json)")
    p.add_argument("--check", action="store_true", help="verify instead of writing; exit status 1 if stale")
    p.set_defaults(func=main_compile)


def main_compile(args) -> int:
    import sys

    if args.check:
        ok, msg = check_dir(args.directory)
        print(("ok: " if ok else "stale: ") + msg, file=sys.stdout if ok else sys.stderr)
        return 0 if ok else 1
    try:
        out = compile_dir(args.directory)
    except (OSError, ValueError, TypeError, KeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {out} ({out.stat().st_size} bytes)")
    return 0
