"""Compiled tables next to a tokenizer: write, load, check, and the `chatparse compile` command.

A tokenizer directory keeps its response template where transformers keeps it - the ``response_template`` key
of ``tokenizer_config.json`` (written with ``json.dumps(..., indent=2, sort_keys=True, ensure_ascii=False)``,
as ``save_pretrained`` does) - and chatparse adds one file beside it, ``response_template.cpt``, holding the
template compiled to tables (format: FORMAT.md). The tables are compiled from the template *as stored in
tokenizer_config.json*, so its header hash is the hash of exactly that template.

* `save_dir(directory, template)`: write the template into tokenizer_config.json (keeping every other key)
  and the tables beside it.
* `compile_dir(directory)`: (re)compile the template already in tokenizer_config.json and write the tables.
  When the directory has a ``tokenizer.json`` (or a `tokenizer` is passed) that chatparse can derive token
  bytes for, the file also gets the *token section* (FORMAT.md section 8): the vocabulary's token bytes and
  the per-mode token tables, so that token ids can be parsed without the compiler or the tokenizer.
* `load_dir(directory)`: a `CompiledTemplate` for the directory - from the tables file when its template hash
  matches the config's template (no compilation; the automaton is not rebuilt), else compiled from the config,
  with a logged warning saying why the tables were not used. When the file has a token section (and, if a
  `tokenizer` is passed, its vocabulary hash is that tokenizer's; if not, the directory's tokenizer.json is
  the one it was built from), the result carries it: ``TokenParser(ct, prefix=...)`` or
  ``chatparse.runtime.tokens.token_binding(ct)`` parse token ids. Otherwise, with a tokenizer at hand, the
  token tables are rebuilt with a warning saying why.
* `check_dir(directory)`: `(ok, message)`; the tables must load, match the template, and equal what this
  chatparse compiles now (token section included).

Importing this module also registers `CompiledTemplate` with `copyreg`, so compiled templates pickle through
the table format (`chatparse.compiler.writer.compiled_reduce`).
"""

from __future__ import annotations

import copyreg
import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .compiled import CompiledTemplate

__all__ = ["CONFIG_NAME", "TABLES_NAME", "TOKENIZER_NAME", "save_dir", "compile_dir", "load_dir", "check_dir",
           "stale_tables", "register", "main_compile"]

logger = logging.getLogger("chatparse")

CONFIG_NAME = "tokenizer_config.json"
TABLES_NAME = "response_template.cpt"
TOKENIZER_NAME = "tokenizer.json"


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


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _dir_tokenizer(directory):
    """`(tokenizer, sha256 of tokenizer.json)` of a directory with a tokenizer.json, else `(None, None)`.

    A `tokenizers.Tokenizer` read from the file; wrapped in transformers' `PreTrainedTokenizerFast` only when
    tokenizer_config.json turns on ``clean_up_tokenization_spaces`` for a non-BPE model (then transformers'
    decode differs from the raw tokenizer's, and the token tables must follow transformers)."""
    path = Path(directory) / TOKENIZER_NAME
    if not path.exists():
        return None, None
    from tokenizers import Tokenizer

    sha = _file_sha256(path)
    tok = Tokenizer.from_file(str(path))
    try:
        cfg = _read_config(directory)
    except (OSError, ValueError):
        cfg = {}
    if cfg.get("clean_up_tokenization_spaces") and type(tok.model).__name__ != "BPE":
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=True)
    return tok, sha


def _bind_dir(compiled, directory, tokenizer=None, *, quiet: bool = False):
    """`(binding or None, tokenizer_sha256 or None)`: `compiled` bound to `tokenizer`, else to the
    directory's tokenizer.json (a tokenizer chatparse cannot derive token bytes for gives None, logged)."""
    if tokenizer is not None:
        return bind(compiled, tokenizer), None
    try:
        tok, sha = _dir_tokenizer(directory)
    except ImportError as e:  # tokenizers (or transformers, for a cleanup tokenizer) is not installed
        if not quiet:
            logger.warning("chatparse: no token tables for %s: %s", Path(directory) / TOKENIZER_NAME, e)
        return None, None
    except Exception as e:  # a tokenizer.json the tokenizers library cannot read
        if not quiet:
            logger.warning("chatparse: no token tables: %s cannot be read (%s)", Path(directory) / TOKENIZER_NAME, e)
        return None, _file_sha256(Path(directory) / TOKENIZER_NAME)
    if tok is None:
        return None, None
    try:
        return bind(compiled, tok), sha
    except (ValueError, TypeError) as e:
        if not quiet:
            logger.warning("chatparse: no token tables for %s: %s", Path(directory) / TOKENIZER_NAME, e)
        return None, sha


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------ binding


_path_lock = threading.Lock()
_path_tokenizers: OrderedDict = OrderedDict()  # (path, mtime, size) -> tokenizer: a path binds like one object


def tokenizer_from_path(path) -> Any:
    """The tokenizer of a ``tokenizer.json`` file, or of a tokenizer directory holding one (read as
    `chatparse.tokenizer_dir` reads it: a `tokenizers.Tokenizer`, wrapped in transformers' fast tokenizer when
    tokenizer_config.json beside it turns on ``clean_up_tokenization_spaces`` for a non-BPE model). Cached
    while the file is unchanged, so that binding the same path twice reuses one vocabulary."""
    p = os.path.abspath(os.fspath(path))
    file = os.path.join(p, TOKENIZER_NAME) if os.path.isdir(p) else p
    try:
        st = os.stat(file)
    except FileNotFoundError:
        what = f"{path} has no {TOKENIZER_NAME}" if os.path.isdir(p) else f"{path} does not exist"
        raise FileNotFoundError(f"bind: {what} (pass a tokenizer.json file, a tokenizer directory or a "
                                "tokenizer object)") from None
    key = (file, st.st_mtime_ns, st.st_size)
    with _path_lock:
        hit = _path_tokenizers.get(key)
    if hit is not None:
        return hit
    try:
        if os.path.basename(file) == TOKENIZER_NAME:
            tok, _ = _dir_tokenizer(os.path.dirname(file))
        else:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_file(file)
    except ImportError:
        raise
    except Exception as e:
        raise ValueError(f"bind: {file} cannot be read as a tokenizer ({type(e).__name__}: {e})") from None
    with _path_lock:
        _path_tokenizers[key] = tok
        while len(_path_tokenizers) > 4:
            _path_tokenizers.popitem(last=False)
    return tok


def bind(template, tokenizer, *, skip_special_tokens: bool = False):
    """Bind a response template (dict or CompiledTemplate) to a tokenizer (`tokenizers.Tokenizer`, a
    transformers tokenizer, a `TokenVocab`, or the path of a ``tokenizer.json`` file or of a tokenizer
    directory: `tokenizer_from_path`): the runtime `TokenBinding` that parses token ids
    (`chatparse.compiler.tokens.bind`, which caches it per template and tokenizer). This is `chatparse.bind`.

    ``skip_special_tokens=True`` decodes like ``decode(ids, skip_special_tokens=True)`` (special tokens
    vanish); the default keeps them, as transformers' ``decode`` and ``parse_response`` do.
    """
    from .compiled import compile_template
    from .compiler.tokens import bind as bind_compiled
    from .runtime.tokens import TokenBinding

    if isinstance(template, TokenBinding):
        return template
    if isinstance(tokenizer, (str, os.PathLike)):
        tokenizer = tokenizer_from_path(tokenizer)
    return bind_compiled(compile_template(template), tokenizer, skip_special_tokens=skip_special_tokens)


# ------------------------------------------------------------------------------------------------ API


def save_dir(directory, template: Any, *, vocab_hash: bytes | str | None = None, tokenizer=None,
             tokens: bool = True) -> Path:
    """Write `template` into `directory`/tokenizer_config.json and its tables beside it; returns the tables path.

    Other keys of an existing tokenizer_config.json are kept; the file is written the way transformers'
    ``save_pretrained`` writes it (so ``AutoTokenizer.from_pretrained`` sees the same template). `tokenizer`
    and `tokens`: see `compile_dir`."""
    from .compiler.validate import load_template

    load_template(template)  # refuse an invalid template before touching the directory
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = _config_path(directory)
    cfg = _read_config(directory) if path.exists() else {}
    cfg["response_template"] = template
    _write_json(path, cfg)
    return compile_dir(directory, vocab_hash=vocab_hash, tokenizer=tokenizer, tokens=tokens)


def compile_dir(directory, *, vocab_hash: bytes | str | None = None, tokenizer=None, tokens: bool = True,
                template: Any = None, name: str = TABLES_NAME) -> Path:
    """Compile the response_template of `directory`/tokenizer_config.json into `directory`/response_template.cpt.

    With `tokens` (the default), the file also holds the token tables for `tokenizer` (a `tokenizers.Tokenizer`
    or a transformers tokenizer) or, when none is passed, for the directory's tokenizer.json (skipped, with a
    warning, when chatparse cannot derive that tokenizer's token bytes). `template` and `name`: another
    template than the config's (a variant a server derives from it) into another file of the directory."""
    from .compiled import compile_template
    from .compiler.writer import save

    compiled = compile_template(_config_template(directory) if template is None else template)
    binding, sha = _bind_dir(compiled, directory, tokenizer) if tokens else (None, None)
    out = Path(directory) / name
    save(compiled, out, vocab_hash=vocab_hash, tokens=binding if binding is not None else False,
         tokenizer_sha256=sha)
    return out


def load_dir(directory, *, tokenizer=None, template: Any = None, name: str = TABLES_NAME) -> CompiledTemplate:
    """The compiled response template of a tokenizer directory, from its tables when they match.

    When the tables file is missing, unreadable, corrupted, or was compiled for a different template, the
    template is compiled from tokenizer_config.json instead and a warning says so (the directory is not
    modified; run ``chatparse compile DIR`` to refresh it).

    Token tables: when the file has a token section it comes with the result (``TokenParser(ct, ...)``,
    `chatparse.runtime.tokens.token_binding`) - if `tokenizer` is given, only when the section's vocabulary
    hash is that tokenizer's (computing it derives the tokenizer's vocabulary); if not, only when the
    directory's tokenizer.json is still the one the section was built from. Otherwise, when there is a
    tokenizer (given, or a tokenizer.json beside the tables), the token tables are rebuilt with a warning.
    `template` and `name`: as for `compile_dir`."""
    from .compiler.validate import load_template
    from .runtime.tables.loader import load, template_hash

    directory = Path(directory)
    if template is None:
        template = _config_template(directory)
    spec = load_template(template)
    want = template_hash(spec)
    tables = directory / name
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
            elif not _same_order(raw["template"], spec):
                why = f"{tables} was compiled for the response_template with its keys in another order"
            else:
                from . import __version__

                if raw["header"]["chatparse_version"] != __version__:
                    logger.info("chatparse: %s was written by chatparse %s (this is %s); same format, using it",
                                tables, raw["header"]["chatparse_version"], __version__)
                # Same template up to key order; the config's order is the one a fresh compile would use.
                raw["template"] = spec
                ct = CompiledTemplate(spec, raw)
                return _load_tokens(ct, directory, tables, tokenizer)
    logger.warning("chatparse: %s; recompiling response_template from %s (run `chatparse compile %s` to "
                   "refresh the tables)", why, CONFIG_NAME if name == TABLES_NAME else "the template", directory)
    from .compiled import compile_template

    compiled = compile_template(template)
    if tokenizer is None and not (directory / TOKENIZER_NAME).exists():
        return compiled
    ct = CompiledTemplate(compiled.spec, compiled.raw_tables)  # not the shared cached object: it gets tokens
    binding, _ = _bind_dir(ct, directory, tokenizer)
    if binding is not None:
        ct._token_binding = binding
    return ct


def _load_tokens(ct: CompiledTemplate, directory: Path, tables: Path, tokenizer) -> CompiledTemplate:
    """Keep the token section of a loaded table file when it is for the tokenizer at hand, else rebuild."""
    data = ct.raw_tables.get("tokens")
    why = None
    if tokenizer is not None:
        from .compiler.writer import vocab_hash

        if data is None:
            why = f"{tables} has no token tables"
        elif ct.raw_tables["header"]["vocab_sha256"] != vocab_hash(tokenizer):
            why = f"{tables} has token tables for a different tokenizer vocabulary (vocabulary hash mismatch)"
    elif data is not None:
        recorded = data["meta"]["tokenizer_sha256"]
        path = directory / TOKENIZER_NAME
        if recorded is not None and path.exists() and _file_sha256(path) != recorded:
            why = f"{path} changed since the token tables in {tables} were built"
    if why is None:
        return ct
    if data is None and tokenizer is None:
        return ct
    ct.raw_tables.pop("tokens", None)
    logger.warning("chatparse: %s; rebuilding the token tables (run `chatparse compile %s` to refresh them)",
                   why, directory)
    binding, _ = _bind_dir(ct, directory, tokenizer)
    if binding is not None:
        ct._token_binding = binding
    return ct


def check_dir(directory) -> tuple[bool, str]:
    """Verify a tokenizer directory's tables: present, intact, for its template, and up to date."""
    from . import __version__
    from .compiled import compile_template
    from .compiler.validate import load_template
    from .runtime.tables.loader import load, template_hash

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
    if not _same_order(raw["template"], spec):
        return False, f"{tables} was compiled for the response_template with its keys in another order"
    compiled = compile_template(template)
    fresh = compiled.raw_tables
    diff = tables_differ(raw, fresh)
    if diff:
        return False, f"{tables} differs from what chatparse {__version__} compiles ({diff}); recompile it"
    diff = _check_tokens(directory, tables, raw, compiled)
    if diff:
        return False, diff
    note = "" if raw["header"]["chatparse_version"] == __version__ else \
        f" (written by chatparse {raw['header']['chatparse_version']})"
    return True, f"{tables} is up to date{note}"


def stale_tables(directory) -> str | None:
    """Why the tables file of a tokenizer directory is out of date for its template, or None (up to date, or
    no tables file). What `chatparse parse/check DIR` warn about: they use the template in tokenizer_config.json,
    where `load_dir` would have used the tables. Cheaper than `check_dir`: the token section is not rebuilt."""
    from . import __version__
    from .compiled import compile_template
    from .compiler.validate import load_template
    from .runtime.tables.loader import load, template_hash

    directory = Path(directory)
    tables = directory / TABLES_NAME
    if not tables.exists():
        return None
    try:
        template = _config_template(directory)
        spec = load_template(template)
    except (OSError, ValueError, TypeError):
        return None  # (the command itself reports a bad config)
    try:
        raw = load(tables)
    except ValueError as e:
        return f"{tables} cannot be used: {e}"
    if raw["header"]["template_sha256"] != template_hash(spec):
        return f"{tables} was compiled for a different response_template (template hash mismatch)"
    if not _same_order(raw["template"], spec):
        return f"{tables} was compiled for the response_template with its keys in another order"
    diff = tables_differ(raw, compile_template(template).raw_tables)
    if diff:
        return f"{tables} differs from what chatparse {__version__} compiles ({diff})"
    return None


def _check_tokens(directory: Path, tables: Path, raw: dict, compiled) -> str | None:
    """None when the token section (or its absence) is what `compile_dir` writes now, else why not."""
    from . import __version__
    from .compiler.writer import token_data
    from .runtime.tokens import LoadedVocab

    have = raw.get("tokens")
    binding, sha = _bind_dir(compiled, directory, quiet=True)
    if binding is None:
        if have is None:
            return None
        if sha is None:  # no tokenizer.json: the vocabulary cannot be checked, the per-mode tables can
            binding = bind(compiled, LoadedVocab(have))
        else:
            return f"{tables} has token tables but chatparse cannot derive the token bytes of its tokenizer.json"
    elif have is None:
        return f"{tables} has no token tables for {TOKENIZER_NAME} (run `chatparse compile {directory}`)"
    diff = token_tables_differ(have, token_data(binding))
    if diff:
        return (f"{tables}: token tables differ from what chatparse {__version__} builds for "
                f"{TOKENIZER_NAME if sha else 'their vocabulary'} ({diff}); recompile it")
    return None


def token_tables_differ(a: dict, b: dict) -> str | None:
    """None when two token sections hold the same vocabulary and per-mode tables, else the first difference."""
    import numpy as np

    from .runtime.tables.loader import TOKEN_ARRAYS

    for k in ("size", "kind", "strip_char", "strip_start", "cleanup"):
        if a["meta"][k] != b["meta"][k]:
            return f"vocabulary {k}"
    for k in TOKEN_ARRAYS:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        if x.shape != y.shape or not np.array_equal(x.astype(np.int64), y.astype(np.int64)):
            return f"token array {k}"
    return None


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


def _same_order(a: dict, b: dict) -> bool:
    """Two normalized templates with the same hash are the same but for dict key order, which matters: a
    transform's key order is the output's. True when they are the same in key order too."""
    return json.dumps(a, separators=(",", ":"), ensure_ascii=False) == json.dumps(b, separators=(",", ":"),
                                                                                   ensure_ascii=False)
