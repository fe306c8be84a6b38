"""Write compiled tables in the chatparse table format (FORMAT.md at the top of the repository).

`dumps(raw_tables)` turns the in-memory table dict (`build.build_tables`, or what `runtime.loader.loads`
returned) into the bytes of one ``.cpt`` file; `save(compiled, path)` writes them atomically. The layout is a
fixed 160-byte header (holding the SHA-256 of the template's canonical, key-sorted JSON), the normalized
template as compact UTF-8 JSON (key order kept), the metadata as UTF-8 JSON, the flat little-endian integer
arrays, and a SHA-256 trailer over everything before it. No pickle anywhere.

The metadata also carries, unless ``js=False``, the *port section*: every regular expression a runtime in
another language needs (regex-decided and capturing delimiters, the start anchor, the ``tag_pattern`` s of
``xml-inline`` content, Python's ``\\w`` class), translated to JavaScript RegExp source (flags ``su``, named
groups, every character class spelled out as the exact code-point set `regex` uses). A pattern that cannot be
translated is marked ``{"error": why}`` instead, so a port refuses it up front instead of misparsing.

`compiled_reduce` makes a `CompiledTemplate` pickle through this format (`chatparse.tokenizer_dir` registers
it with `copyreg`): a few kB, validated on unpickling, and the only callable a pickle names is
`chatparse.runtime.tables.loader.compiled_from_bytes`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import re._constants as C
import re._parser as sre_parse
import secrets
import struct
import weakref
from functools import lru_cache
from typing import Any

import numpy as np
import regex

from .charsets import class_ranges, complement, literal_ranges, normalize
from .regex_ast import _REGEX_ONLY, PatternError, _in_source

__all__ = ["dumps", "save", "compiled_reduce", "translate_js", "token_data", "vocab_hash", "MAGIC",
           "FORMAT_VERSION", "HEADER_SIZE"]

# The layout constants live with the reader (the runtime never imports the compiler; the reverse is fine).
from ..runtime.tables.loader import (_HEADER, FLAG_TOKENS, FLAG_VOCAB_HASH, FORMAT_VERSION, HEADER_SIZE,  # noqa: E402
                              MAGIC, TOKEN_ARRAYS, TOKEN_META_KEYS, TRAILER_SIZE, _align8, vocab_digest)
from ..runtime.tables.validate import canonical_json as _canonical_json  # noqa: E402  (the template hash's text)

assert _HEADER.size == HEADER_SIZE

MAX_CODEPOINT = 0x10FFFF


def _template_json(spec: Any) -> str:
    # The template section: compact, raw Unicode, key order kept (transform/defaults order is output order).
    return json.dumps(spec, separators=(",", ":"), ensure_ascii=False)


# ------------------------------------------------------------------------------------------------ arrays


def _arrays(raw: dict) -> list[tuple[str, np.ndarray]]:
    """The named arrays of a table dict, in file order, in their on-disk dtypes."""
    out: list[tuple[str, np.ndarray]] = []
    starts = np.asarray(raw["class_starts"])
    if starts.size and (int(starts.min()) < 0 or int(starts.max()) > MAX_CODEPOINT):
        raise ValueError("class_starts: code point out of range")
    out.append(("class_starts", starts.astype("<u4")))
    ids = np.asarray(raw["class_ids"])
    n_classes = int(raw["n_classes"])
    if not 1 <= n_classes <= 65535:
        raise ValueError("n_classes out of range 1..65535")
    out.append(("class_ids", ids.astype("<u1" if n_classes <= 256 else "<u2")))
    for mi, mode in enumerate(raw["modes"]):
        trans = np.asarray(mode["trans"])
        n_states = trans.shape[0]
        dt = "<u1" if n_states <= 256 else "<u2" if n_states <= 65536 else "<u4"
        out.append((f"mode{mi}.trans", trans.astype(dt)))
        out.append((f"mode{mi}.eot", np.asarray(mode["eot"]).astype(dt)))
        out.append((f"mode{mi}.acc", np.asarray(mode["acc"]).astype("<i1")))
        out.append((f"mode{mi}.term", np.asarray(mode["term"]).astype("<u1")))
    return out


# ------------------------------------------------------------------------------------------------ token section


def _vocab_arrays(vocab) -> tuple[dict, dict]:
    """The vocabulary part of a token section: (metadata, arrays) of a `TokenVocab` (or a loaded vocab)."""
    size = int(vocab.size)
    tb = vocab.tok_bytes
    lens = np.fromiter(map(len, tb), dtype=np.int64, count=size)
    offsets = np.zeros(size + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    skip = np.asarray(vocab.skip, dtype=bool)
    has_text = np.fromiter((t is not None for t in vocab.tok_text), dtype=bool, count=size) & ~skip
    byte = np.asarray(vocab.byte_val) >= 0
    flags = (skip.astype(np.uint8) | (has_text.astype(np.uint8) << 1) | (byte.astype(np.uint8) << 2))
    first = sorted(vocab.first_text.items())
    fenc = [t.encode("utf-8") for _, t in first]
    flens = np.fromiter(map(len, fenc), dtype=np.int64, count=len(fenc))
    foffsets = np.zeros(len(fenc) + 1, dtype=np.int64)
    np.cumsum(flens, out=foffsets[1:])
    if offsets[-1] >= 2**32 or foffsets[-1] >= 2**32:
        raise ValueError("token bytes do not fit the table format (4 GiB)")
    meta = {"size": size, "kind": vocab.kind, "strip_char": vocab.strip_char,
            "strip_start": int(vocab.strip_start), "cleanup": bool(vocab.cleanup),
            "name": str(getattr(vocab, "name", "tokenizer")), "tokenizer_sha256": None}
    arrays = {
        "offsets": offsets.astype("<u4"),
        "bytes": np.frombuffer(b"".join(tb), dtype=np.uint8),
        "flags": flags.astype("<u1"),
        "first_ids": np.array([i for i, _ in first], dtype="<u4"),
        "first_offsets": foffsets.astype("<u4"),
        "first_bytes": np.frombuffer(b"".join(fenc), dtype=np.uint8),
    }
    return meta, arrays


def token_data(binding, *, tokenizer_sha256: str | None = None) -> dict:
    """The token section (FORMAT.md section 8) of a `TokenBinding` (`chatparse.bind`), as the
    dict `dumps(..., tokens=...)` writes and `loads` returns under ``"tokens"``.

    `tokenizer_sha256`: hex SHA-256 of the tokenizer.json the vocabulary was derived from (informative: lets
    `chatparse.tokenizer_dir.load_dir` notice a changed tokenizer without deriving it)."""
    vocab, tables = binding.vocab, binding.tables
    meta, arrays = _vocab_arrays(vocab)
    if tokenizer_sha256 is not None:
        if not re.fullmatch(r"[0-9a-f]{64}", tokenizer_sha256):
            raise ValueError("tokenizer_sha256 must be 64 lowercase hex digits")
        meta["tokenizer_sha256"] = tokenizer_sha256
    n, size = tables.n_modes, vocab.size
    arrays["inert"] = np.ascontiguousarray(np.asarray(tables.flat)[:n * size].reshape(n, size), dtype="<u1")
    rows = sorted((m, i, pi) for m, d in enumerate(tables.delims) for i, (pi, _) in d.items())
    arrays["delims"] = np.array(rows, dtype="<u4").reshape(-1, 3)
    return {"meta": meta, **arrays}


def vocab_hash(tokenizer, *, skip_special_tokens: bool = False) -> str:
    """Hex vocabulary hash (the header field) of a tokenizer (`tokenizers.Tokenizer`, a transformers tokenizer
    or a vocab): what `loads(..., vocab_hash=...)` and `tokenizer_dir.load_dir(..., tokenizer=...)` compare."""
    from .tokens import vocab_for

    meta, arrays = _vocab_arrays(vocab_for(tokenizer, skip_special_tokens=skip_special_tokens))
    return vocab_digest(meta, arrays).hex()


def _token_arrays(data: dict) -> list[tuple[str, np.ndarray]]:
    return [(f"tokens.{k}", np.ascontiguousarray(np.asarray(data[k]), dtype="<" + dt))
            for k, (dt, _) in TOKEN_ARRAYS.items()]


_DTYPE_CODES = {np.dtype("<u1"): "u1", np.dtype("<i1"): "i1", np.dtype("<u2"): "u2", np.dtype("<i2"): "i2",
                np.dtype("<u4"): "u4", np.dtype("<i4"): "i4"}


# ------------------------------------------------------------------------------------------------ dumps


def dumps(raw_tables: dict, *, vocab_hash: bytes | str | None = None, js: bool = True, tokens=None,
          tokenizer_sha256: str | None = None) -> bytes:
    """The table-format bytes of `raw_tables` (see FORMAT.md).

    `vocab_hash` (32 bytes or 64 hex digits) binds the file to a tokenizer vocabulary; by default it is kept
    from a dict that `loads` returned. With ``js=False`` the port section is left out (pickles do this);
    otherwise a dict that already carries one (read from a file) keeps it, else it is computed.

    `tokens`: the token section (FORMAT.md section 8): a `TokenBinding` of this template (``bind(template,
    tokenizer)``) or a token-section dict (`token_data`, or ``loads(...)["tokens"]``); None keeps the one of
    a dict that `loads` returned; False leaves it out. With a token section the vocabulary hash is the
    section's (a different `vocab_hash` is refused). `tokenizer_sha256` goes with a binding (see
    `token_data`).
    """
    raw = raw_tables
    if raw.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        raise ValueError(f"tables of format {raw.get('format')} cannot be written as format {FORMAT_VERSION}")
    template_bytes, template_hash = _template_section(raw["template"])
    tok, vocab, flags = _vocabulary(raw, vocab_hash, tokens, tokenizer_sha256)

    from .._version import __version__ as version

    vbytes = version.encode("ascii")
    if len(vbytes) > 16:
        raise ValueError(f"chatparse version {version!r} does not fit the 16-byte header field")

    arrays = _arrays(raw)
    if tok is not None:
        arrays += _token_arrays(tok)
    directory = []
    offset = 0
    for name, arr in arrays:
        directory.append({"name": name, "dtype": _DTYPE_CODES[arr.dtype], "shape": [int(s) for s in arr.shape],
                          "offset": offset, "nbytes": int(arr.nbytes)})
        offset = _align8(offset + arr.nbytes)
    meta_bytes = _metadata(raw, version, directory, js, tok)
    return _assemble(template_bytes, template_hash, meta_bytes, arrays, directory, offset, flags, vocab, vbytes)


def _template_section(spec) -> tuple[bytes, bytes]:
    """The template section's bytes (compact JSON, key order kept) and the template hash (of the canonical
    JSON)."""
    try:
        return (_template_json(spec).encode("utf-8"),
                hashlib.sha256(_canonical_json(spec).encode("utf-8")).digest())
    except UnicodeEncodeError as e:
        raise ValueError("response_template contains a lone surrogate, which the table format (UTF-8) cannot "
                         "hold") from e
    except (TypeError, ValueError) as e:
        raise ValueError(f"response_template is not JSON-serializable: {e}") from e


def _vocabulary(raw: dict, vocab_hash, tokens, tokenizer_sha256) -> tuple:
    """``(token section dict or None, the header's 32 vocabulary-hash bytes, header flags)`` for `dumps`."""
    tok = raw.get("tokens") if tokens is None else (tokens or None)
    if tok is not None and not isinstance(tok, dict):
        if getattr(tok, "compiled", None) is not None and tok.compiled.spec != raw["template"]:
            raise ValueError("the token tables were bound to a different response template")
        tok = token_data(tok, tokenizer_sha256=tokenizer_sha256)
    if tok is not None:
        if len(tok["inert"]) != len(raw["modes"]):
            raise ValueError("the token tables do not have one row per mode of these tables")
        digest = vocab_digest(tok["meta"], tok)
        if vocab_hash is not None and tokens is not None:
            given = bytes.fromhex(vocab_hash) if isinstance(vocab_hash, str) else bytes(vocab_hash)
            if given != digest:
                raise ValueError("vocab_hash differs from the vocabulary hash of the token tables")
        vocab_hash = digest
    if vocab_hash is None:
        vocab_hash = (raw.get("header") or {}).get("vocab_sha256")
    flags = 0
    vocab = b"\0" * 32
    if vocab_hash is not None:
        vocab = bytes.fromhex(vocab_hash) if isinstance(vocab_hash, str) else bytes(vocab_hash)
        if len(vocab) != 32:
            raise ValueError("vocab_hash must be a SHA-256 digest (32 bytes or 64 hex digits)")
        flags |= FLAG_VOCAB_HASH
    if tok is not None:
        flags |= FLAG_TOKENS
    return tok, vocab, flags


def _metadata(raw: dict, version: str, directory: list, js: bool, tok) -> bytes:
    """The metadata section (FORMAT.md): compact JSON bytes."""
    meta: dict = {
        "chatparse_version": version,
        "n_classes": int(raw["n_classes"]),
        "patterns": [_pattern_meta(p) for p in raw["patterns"]],
        "modes": [{"patterns": [int(i) for i in m["patterns"]], "start0": int(m["start0"]),
                   "startN": int(m["startN"]), "first": _first_meta(m["first"])} for m in raw["modes"]],
        "arrays": directory,
    }
    port = None
    if js:
        port = raw.get("js") or js_section(raw)
    if port is not None:
        meta["js"] = port
    if tok is not None:
        meta["tokens"] = {k: tok["meta"][k] for k in TOKEN_META_KEYS}
    return json.dumps(meta, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _assemble(template_bytes: bytes, template_hash: bytes, meta_bytes: bytes, arrays: list, directory: list,
              data_length: int, flags: int, vocab: bytes, vbytes: bytes) -> bytes:
    """Header, template, metadata, padding, the arrays at their directory offsets, and the SHA-256 trailer."""
    template_offset = HEADER_SIZE
    meta_offset = template_offset + len(template_bytes)
    data_offset = _align8(meta_offset + len(meta_bytes))
    file_size = data_offset + data_length + TRAILER_SIZE
    buf = bytearray(file_size)
    _HEADER.pack_into(buf, 0, MAGIC, FORMAT_VERSION, HEADER_SIZE, file_size, template_offset, len(template_bytes),
                      meta_offset, len(meta_bytes), data_offset, data_length, flags, 0, template_hash, vocab,
                      vbytes.ljust(16, b"\0"))
    buf[template_offset:meta_offset] = template_bytes
    buf[meta_offset:meta_offset + len(meta_bytes)] = meta_bytes
    for entry, (_, arr) in zip(directory, arrays):
        start = data_offset + entry["offset"]
        buf[start:start + entry["nbytes"]] = arr.tobytes()
    buf[file_size - TRAILER_SIZE:] = hashlib.sha256(memoryview(buf)[:file_size - TRAILER_SIZE]).digest()
    return bytes(buf)


def _pattern_meta(p: dict) -> dict:
    return {
        "kind": p["kind"],
        "field": int(p["field"]),
        "key": p["key"],
        "source": p["source"],
        "exact": bool(p["exact"]),
        "reasons": [str(r) for r in p["reasons"]],
        "named_groups": bool(p["named_groups"]),
        "history": int(p["history"]),
        "horizon": int(p["horizon"]),
    }


def _first_meta(first):
    if first is None:
        return None
    return [[[[int(lo), int(hi)] for lo, hi in c1], None if c2 is None else [[int(lo), int(hi)] for lo, hi in c2]]
            for c1, c2 in first]


def save(compiled, path, *, vocab_hash: bytes | str | None = None, js: bool = True, tokens=None,
         tokenizer_sha256: str | None = None) -> None:
    """Write `compiled` (a `CompiledTemplate` or a table dict) to `path`, atomically (temp file + rename).
    `tokens`: see `dumps` (a `TokenBinding` writes its token tables into the file).

    The rename means a process that has the old file memory-mapped keeps seeing the old bytes."""
    raw = compiled if isinstance(compiled, dict) else compiled.raw_tables
    data = dumps(raw, vocab_hash=vocab_hash, js=js, tokens=tokens, tokenizer_sha256=tokenizer_sha256)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = _create_temp(directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _create_temp(directory: str) -> tuple[int, str]:
    """A new file beside the target, created with mode 0o666 less the umask - the mode any new file gets, e.g.
    0644 - where `tempfile.mkstemp` would give 0600, which the rename would carry over to the tables file."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f".cpt-{secrets.token_hex(6)}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no unused temporary file name in {directory}")


# ------------------------------------------------------------------------------------------------ pickling

_pickled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def compiled_reduce(ct):
    """`__reduce__` for CompiledTemplate: rebuild from the table bytes (no port section), cached per object."""
    from chatparse.runtime.tables.loader import compiled_from_bytes

    data = _pickled.get(ct)
    if data is None:
        try:
            data = dumps(ct.raw_tables, js=False, tokens=False)  # token tables stay out of pickles
        except ValueError:  # a template the format cannot hold (a lone surrogate): pickle the parts instead
            return type(ct), (ct.spec, ct.raw_tables)
        try:
            _pickled[ct] = data
        except TypeError:  # not weak-referenceable: just don't cache
            pass
    return compiled_from_bytes, (data,)


# ------------------------------------------------------------------------------------------------ JS port


def js_section(raw: dict) -> dict:
    """The port section of the metadata: JavaScript translations of every regex a runtime may run."""
    spec = raw["template"]
    anchor = spec["start_anchor"]
    if "literals" in anchor:
        anchor_src = "|".join(regex.escape(s) for s in sorted(anchor["literals"], key=len, reverse=True))
    else:
        anchor_src = anchor["pattern"]
    content: dict = {}
    need_word = False
    for f in spec["fields"]:
        if f.get("transform") is not None:
            need_word = True
        # (the field's parser, and those of format extension content_fallback)
        for parser in [f] + f.get("content_fallback", []):
            for src in _tag_patterns(parser["content"], parser["content_args"]):
                if src not in content:
                    content[src] = translate_js(src)
            if _mentions_key(parser["content_args"], "unquoted_keys"):
                need_word = True
        src = f.get("unwrap_pattern")  # (format extension unwrap_pattern: run on the body, as a tag_pattern is)
        if src is not None and src not in content:
            content[src] = translate_js(src)
    return {
        "patterns": [{"pattern": p["source"], **translate_js(p["source"])} for p in raw["patterns"]],
        "anchor": {"pattern": anchor_src, **translate_js(anchor_src)},
        "content": content,
        "word": _js_class(class_ranges(r"\w")) if need_word else None,
    }


def _tag_patterns(name, args, depth: int = 0):
    """Every string `tag_pattern` an xml-inline parser can reach from (name, args), nested value_parsers too."""
    if depth > 32 or not isinstance(args, dict):
        return
    if name == "xml-inline" and isinstance(args.get("tag_pattern"), str):
        yield args["tag_pattern"]
    vp = args.get("value_parser")
    if isinstance(vp, dict):
        yield from _tag_patterns(vp.get("name", "text"), vp.get("args", {}), depth + 1)


def _mentions_key(obj, key: str, depth: int = 0) -> bool:
    if depth > 64:
        return False
    if isinstance(obj, dict):
        return key in obj or any(_mentions_key(v, key, depth + 1) for v in obj.values())
    if isinstance(obj, list):
        return any(_mentions_key(v, key, depth + 1) for v in obj)
    return False


_SYNTAX = set("^$\\.*+?()[]{}|/")
_CLASS_SPECIAL = set("\\]-^[")
_NAMED_GROUP = re.compile(r"(?<!\\)\(\?P<(\w+)>")
_JS_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _printable(cp: int) -> bool:
    return 0x20 < cp < 0x7F or (cp > 0xA0 and not 0xD800 <= cp <= 0xDFFF and chr(cp).isprintable())


def _js_char(cp: int, special=_SYNTAX) -> str:
    """One code point in a JS regex (unicode mode): escaped if in `special` (the syntax characters outside a
    class, `_CLASS_SPECIAL` inside one), itself if printable, else ``\\u{X}``."""
    ch = chr(cp)
    if ch in special:
        return "\\" + ch
    if _printable(cp):
        return ch
    return f"\\u{{{cp:X}}}"


def _js_class_char(cp: int) -> str:
    return _js_char(cp, _CLASS_SPECIAL)


def _class_items(ranges) -> str:
    parts = []
    for lo, hi in ranges:
        if lo == hi:
            parts.append(_js_class_char(lo))
        elif hi == lo + 1:
            parts.append(_js_class_char(lo) + _js_class_char(hi))
        else:
            parts.append(_js_class_char(lo) + "-" + _js_class_char(hi))
    return "".join(parts)


def _js_class(ranges) -> str:
    """A JS (u-mode) atom matching exactly the code points in `ranges`."""
    ranges = normalize(ranges)
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _js_char(ranges[0][0])
    comp = complement(ranges)
    if not comp:
        return "[^]"
    if len(comp) < len(ranges):
        return "[^" + _class_items(comp) + "]"
    return "[" + _class_items(ranges) + "]"


class _Untranslatable(Exception):
    pass


def _rflags(flags: int) -> int:
    out = 0
    if flags & re.IGNORECASE:
        out |= regex.IGNORECASE
    if flags & re.ASCII:
        out |= regex.ASCII
    return out


@lru_cache(maxsize=1024)
def _translate_cached(pattern: str) -> str:
    return json.dumps(_translate(pattern), ensure_ascii=False)


def translate_js(pattern) -> dict:
    """`{"source": js, "groups": {js_name: python_name}, "caveats": [...]}` or `{"error": why}`.

    The source is for ``new RegExp(source, "su")`` (plus ``y``/``g`` as the runtime needs) and matches
    exactly what `regex.compile(pattern, regex.DOTALL)` matches, except where a caveat says otherwise."""
    if not isinstance(pattern, str):
        return {"error": f"pattern is a {type(pattern).__name__}, not a string"}
    return json.loads(_translate_cached(pattern))


def _translate(pattern: str) -> dict:
    if _REGEX_ONLY.search(pattern):
        return {"error": "uses syntax specific to the Python `regex` module"}
    try:
        regex.compile(pattern, regex.DOTALL)
    except regex.error as e:
        return {"error": f"invalid regex: {e}"}
    # Duplicate group names (allowed by `regex`, not by `re`'s parser or by Node 20) are renamed apart.
    names = _NAMED_GROUP.findall(pattern)
    dup_names = {n for n in names if names.count(n) > 1}
    if any(f"(?P={n})" in pattern for n in dup_names):
        return {"error": "a backreference to a group name defined more than once"}
    counter = iter(range(len(names)))
    renamed: list[tuple[str, str]] = []

    def rename(m):
        i = next(counter)
        if m.group(1) not in dup_names:
            return m.group(0)
        new = f"cpg{i}__{m.group(1)}"
        renamed.append((new, m.group(1)))
        return f"(?P<{new}>"

    try:
        parsed = sre_parse.parse(_NAMED_GROUP.sub(rename, pattern), re.DOTALL)
    except (re.error, RecursionError, OverflowError) as e:
        return {"error": f"cannot be parsed for translation: {e}"}
    sre_to_py = dict(renamed)
    gid_name = {gid: name for name, gid in parsed.state.groupdict.items()}
    py_names = [sre_to_py.get(gid_name[g], gid_name[g]) for g in sorted(gid_name)]
    dupes = {n for n in py_names if py_names.count(n) > 1}
    js_names: dict[int, str] = {}
    groups: dict[str, str] = {}
    for i, gid in enumerate(sorted(gid_name)):
        py = sre_to_py.get(gid_name[gid], gid_name[gid])
        js = py if (_JS_IDENT.match(py) and py not in dupes) else f"$n{i}"
        js_names[gid] = js
        groups[js] = py
    t = _Emitter(js_names, pattern)
    try:
        t.collect_refs(parsed)
        src, _ = t.seq(parsed, parsed.state.flags)
    except (_Untranslatable, PatternError) as e:
        return {"error": str(e)}
    except RecursionError:
        return {"error": "pattern nests too deeply to translate"}
    if dupes:
        t.caveats.append("duplicate group names: JavaScript reports the last alias that participated")
    out = {"source": src, "groups": groups}
    if t.caveats:
        out["caveats"] = sorted(set(t.caveats))
    return out


class _Emitter:
    def __init__(self, js_names: dict, pattern: str):
        self.js_names = js_names
        self.refs: set = set()
        self.caveats: list = []
        self.atomic = 0
        self.pattern = pattern

    def collect_refs(self, sub) -> None:
        for op, av in sub:
            if op is C.GROUPREF:
                self.refs.add(av)
            elif op is C.GROUPREF_EXISTS:
                raise _Untranslatable("conditional group (?(id)yes|no) has no JavaScript equivalent")
            for child in _children(op, av):
                self.collect_refs(child)

    def group_name(self, gid: int) -> str:
        return self.js_names.get(gid) or f"$g{gid}"

    def seq(self, sub, flags: int, rep: bool = False) -> tuple[str, bool]:
        items = list(sub)
        parts = [self.item(op, av, flags, rep) for op, av in items]
        if len(parts) == 1:
            return parts[0]
        return "".join(p for p, _ in parts), False

    def wrap(self, text_atom: tuple[str, bool]) -> str:
        text, atom = text_atom
        return text if atom else f"(?:{text})"

    def atomic_group(self, inner: str) -> str:
        self.atomic += 1
        name = f"$a{self.atomic}"
        return f"(?:(?=(?<{name}>{inner}))\\k<{name}>)"

    def item(self, op, av, flags: int, rep: bool) -> tuple[str, bool]:
        ic = bool(flags & re.IGNORECASE)
        ml = bool(flags & re.MULTILINE)
        rf = _rflags(flags)
        if op is C.LITERAL:
            if ic:
                return _js_class(literal_ranges(av, True)), True
            return _js_char(av), True
        if op is C.NOT_LITERAL:
            return _js_class(complement(literal_ranges(av, ic))), True
        if op is C.ANY:
            return ("[^]" if flags & re.DOTALL else "[^\\n]"), True
        if op is C.IN:
            return _js_class(class_ranges(_in_source(av), rf)), True
        if op is C.BRANCH:
            return "(?:" + "|".join(self.seq(b, flags, rep)[0] for b in av[1]) + ")", True
        if op is C.SUBPATTERN:
            gid, add, dele, p = av
            inner, _ = self.seq(p, (flags | add) & ~dele, rep)
            if gid is None:
                return f"(?:{inner})", True
            if gid in self.js_names:
                if rep:
                    self.caveats.append("a named group inside a repetition: when a later iteration skips the "
                                        "group, Python keeps the earlier capture and JavaScript reports none")
                return f"(?<{self.js_names[gid]}>{inner})", True
            if gid in self.refs:
                return f"(?<$g{gid}>{inner})", True
            return f"(?:{inner})", True
        if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            lo, hi, p = av
            body = self.wrap(self.seq(p, flags, rep or hi != 1))
            if hi >= C.MAXREPEAT:
                q = "*" if lo == 0 else "+" if lo == 1 else f"{{{lo},}}"
            elif lo == hi:
                q = f"{{{lo}}}"
            elif lo == 0 and hi == 1:
                q = "?"
            else:
                q = f"{{{lo},{hi}}}"
            if op is C.MIN_REPEAT:
                q += "?"
            if op is C.POSSESSIVE_REPEAT:
                return self.atomic_group(body + q), True
            return body + q, False
        if op is C.ATOMIC_GROUP:
            inner, _ = self.seq(av, flags, rep)
            return self.atomic_group(inner), True
        if op is C.AT:
            if av is C.AT_BEGINNING_STRING or (av is C.AT_BEGINNING and not ml):
                return "^", False
            if av is C.AT_BEGINNING:
                return "(?<![^\\n])", False
            if av is C.AT_END_STRING:
                return "$", False
            if av is C.AT_END:
                return ("(?![^\\n])" if ml else "(?=\\n?$)"), False
            word = _js_class(class_ranges(r"\w", rf & regex.ASCII))
            if av is C.AT_BOUNDARY:
                return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))", True
            if av is C.AT_NON_BOUNDARY:
                return f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))", True
            raise _Untranslatable(f"unsupported anchor {av}")
        if op in (C.ASSERT, C.ASSERT_NOT):
            direction, p = av
            inner, _ = self.seq(p, flags, rep)
            head = ("(?=" if op is C.ASSERT else "(?!") if direction > 0 else ("(?<=" if op is C.ASSERT else "(?<!")
            return head + inner + ")", False
        if op is C.GROUPREF:
            if ic:
                raise _Untranslatable("case-insensitive backreference has no exact JavaScript equivalent")
            if "backreference" not in " ".join(self.caveats):
                self.caveats.append("backreference: to a group that did not participate, Python fails and "
                                    "JavaScript matches the empty string")
            return f"\\k<{self.group_name(av)}>", True
        if op is C.GROUPREF_EXISTS:
            raise _Untranslatable("conditional group (?(id)yes|no) has no JavaScript equivalent")
        raise _Untranslatable(f"unsupported regex construct {op}")


def _children(op, av):
    if op is C.BRANCH:
        return list(av[1])
    if op is C.SUBPATTERN:
        return [av[3]]
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return [av[2]]
    if op is C.ATOMIC_GROUP:
        return [av]
    if op in (C.ASSERT, C.ASSERT_NOT):
        return [av[1]]
    if op is C.GROUPREF_EXISTS:
        return [x for x in av[1:] if x is not None]
    return []
