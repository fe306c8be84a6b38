"""Read the chatparse table format (FORMAT.md) back into the in-memory table dict, validating everything.

`loads(data)` takes the bytes of a ``.cpt`` file (``bytes``, ``bytearray``, ``memoryview`` or ``mmap``) and
returns the dict `chatparse.runtime.tables.layout.Tables` takes (the same keys `build_tables` produces, plus
``header`` and, when the file has one, the port section ``js``). `load(path)` memory-maps the file, so the
arrays are views of the page cache rather than copies.

Every check that can fail raises ValueError with a message saying what is wrong and where: the magic number,
the format version, the header sizes and section offsets, the SHA-256 trailer (any flipped bit), UTF-8 and JSON
syntax of both JSON sections, the template section being compact JSON whose canonical form (sorted keys)
hashes to the header's template hash,
the template's shape, every metadata key and type, each array's dtype, shape, size and bounds, every state,
class and pattern index, and that the patterns and per-mode watch lists are exactly the ones the template
defines. A file that passes can then only describe a well-formed automaton, so `Tables` and the scanner never
index out of range or loop. (What a file cannot prove is that its automaton is the one the compiler would
build today; `chatparse compile --check DIR` recompiles and compares for that.)

A file with a token section (FORMAT.md section 8) also gets every check of 8.4 - offsets, flags, strict UTF-8
of every token text, indices, the vocabulary hash recomputed - with numpy over whole arrays (no per-token
Python loop), and comes back with ``raw["tokens"]``.

Only the standard library, numpy, `regex` and runtime/tables/template.py (the template object it builds) are imported:
not chatparse.compiler, interegular or transformers.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import struct
from typing import Any

import numpy as np
import regex

from .rules import check_depth, prefilter_pairs, quote, quote_list, template_rules
from .template import template_class
from .validate import canonical_json, check_normalized

__all__ = ["loads", "load", "compiled_from_bytes", "template_hash", "canonical_json", "vocab_digest", "token_texts",
           "FORMAT_VERSION", "MAGIC", "FLAG_VOCAB_HASH", "FLAG_TOKENS", "TOKEN_ARRAYS", "VOCAB_ARRAYS"]

MAGIC = b"\x89CPT\r\n\x1a\n"
FORMAT_VERSION = 1
HEADER_SIZE = 160
TRAILER_SIZE = 32
FLAG_VOCAB_HASH = 1
FLAG_TOKENS = 2
_HEADER = struct.Struct("<8sII7Q2I32s32s16s")
N_CODEPOINTS = 0x110000
MAX_INT = 2**31 - 1
_DTYPES = {"u1": np.dtype("<u1"), "i1": np.dtype("<i1"), "u2": np.dtype("<u2"), "i2": np.dtype("<i2"),
           "u4": np.dtype("<u4"), "i4": np.dtype("<i4")}
_STATE_DTYPES = ("u1", "u2", "u4")
_PATTERN_KEYS = {"kind", "field", "key", "source", "exact", "reasons", "named_groups", "history", "horizon"}
_MODE_KEYS = {"patterns", "start0", "startN", "first"}
_ARRAY_KEYS = {"name", "dtype", "shape", "offset", "nbytes"}
# The token section (FORMAT.md section 8): metadata keys, and its arrays (``tokens.<name>``) with dtype and rank.
TOKEN_META_KEYS = ("size", "kind", "strip_char", "strip_start", "cleanup", "name", "tokenizer_sha256")
TOKEN_ARRAYS = {"offsets": ("u4", 1), "bytes": ("u1", 1), "flags": ("u1", 1), "first_ids": ("u4", 1),
                "first_offsets": ("u4", 1), "first_bytes": ("u1", 1), "inert": ("u1", 2), "delims": ("u4", 2)}
# The arrays that describe the vocabulary (not the template): the vocabulary hash covers exactly these.
VOCAB_ARRAYS = ("offsets", "bytes", "flags", "first_ids", "first_offsets", "first_bytes")
_T_SKIP, _T_TEXT, _T_BYTE = 1, 2, 4
_MAX_DELIM_CHARS = 256


def template_hash(spec: Any) -> str:
    """Hex SHA-256 of the canonical JSON of a normalized template (the header's template hash)."""
    return hashlib.sha256(canonical_json(spec).encode("utf-8")).hexdigest()


class _Bad(ValueError):
    pass


def _fail(msg: str):
    raise ValueError(f"chatparse table file: {msg}")


# --------------------------------------------------------------------------------------------- entry points


def load(path, *, use_mmap: bool = True, vocab_hash: bytes | str | None = None) -> dict:
    """`loads` of the file at `path`, memory-mapped (read-only) unless `use_mmap` is False."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < HEADER_SIZE + TRAILER_SIZE:
            _fail(f"{path}: {size} bytes is too short to be a table file (truncated?)")
        if not use_mmap:
            return loads(f.read(), vocab_hash=vocab_hash)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return loads(mm, vocab_hash=vocab_hash)
    except ValueError as e:
        try:
            mm.close()
        except BufferError:  # a view is still referenced (e.g. by the traceback); the GC will close it
            pass
        raise ValueError(f"{e} ({path})") from None


def compiled_from_bytes(data: bytes):
    """Rebuild a template (`chatparse.CompiledTemplate`, see `chatparse.runtime.tables.template.template_class`) from
    table bytes: the unpickling half of `writer.compiled_reduce`."""
    raw = loads(data)
    return template_class()(raw["template"], raw)


def loads(data, *, vocab_hash: bytes | str | None = None) -> dict:
    """Validate and decode one table file held in `data`. Raises ValueError (only) on any defect.

    `vocab_hash` (32 bytes or 64 hex digits, e.g. ``chatparse.compiler.writer.vocab_hash(tokenizer)``): the
    file must have been built for exactly that vocabulary (its header's vocabulary hash must be this one).
    A file with a token section comes back with ``raw["tokens"]`` (see `chatparse.runtime.tokens.
    binding_from_data`)."""
    expected = None
    if vocab_hash is not None:
        expected = bytes.fromhex(vocab_hash) if isinstance(vocab_hash, str) else bytes(vocab_hash)
        if len(expected) != 32:
            raise ValueError("vocab_hash must be a SHA-256 digest (32 bytes or 64 hex digits)")
    try:
        raw = _loads(data)
    except UnicodeError as e:  # (a ValueError, but not one of ours: give it the prefix)
        _fail(f"malformed ({type(e).__name__}: {e})")
    except ValueError:
        raise
    except RecursionError:
        _fail("JSON nests too deeply")
    except (TypeError, KeyError, IndexError, AttributeError, OverflowError, MemoryError, struct.error,
            UnicodeError, regex.error) as e:  # defensive: every defect must surface as ValueError
        _fail(f"malformed ({type(e).__name__}: {e})")
    if expected is not None:
        have = raw["header"]["vocab_sha256"]
        if have is None:
            _fail("the file has no vocabulary hash (no token tables), but one was required")
        if have != expected.hex():
            _fail("the tables were built for a different tokenizer vocabulary (vocabulary hash mismatch)")
    return raw


# --------------------------------------------------------------------------------------------- header


def _loads(data) -> dict:
    if isinstance(data, bytearray):
        data = bytes(data)  # the arrays are views: do not share a buffer the caller may change
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    h = _header(view)
    spec = _template_section(view, h)
    meta, arrays, patterns, modes, n_classes, (starts, ids) = _metadata(view, h, spec)
    raw = {
        "format": FORMAT_VERSION,
        "template": spec,
        "class_starts": starts,
        "class_ids": ids,
        "n_classes": n_classes,
        "patterns": patterns,
        "modes": modes,
        "header": {
            "format_version": h["version"],
            "chatparse_version": h["chatparse_version"],
            "template_sha256": h["t_hash"].hex(),
            "vocab_sha256": h["v_hash"].hex() if h["flags"] & FLAG_VOCAB_HASH else None,
        },
    }
    if "js" in meta:
        raw["js"] = _js_section(meta["js"], patterns, spec)
    if "tokens" in meta:
        raw["tokens"] = _token_section(meta["tokens"], arrays, modes, h["v_hash"])
    _check_template(spec)  # last: the checks only Python's regex engine can make (FORMAT.md section 1, step 9)
    return raw


def _header(view: memoryview) -> dict:
    """The header's fields, checked: size, magic, version, sizes and offsets, the SHA-256 trailer, flags."""
    n = len(view)
    if n < HEADER_SIZE + TRAILER_SIZE:
        _fail(f"{n} bytes is too short to be a table file (truncated?)")
    if bytes(view[:8]) != MAGIC:
        _fail("not a chatparse table file (bad magic number)")
    (_, version, header_size, file_size, t_off, t_len, m_off, m_len, d_off, d_len, flags, reserved, t_hash,
     v_hash, v_raw) = _HEADER.unpack_from(view, 0)
    if version != FORMAT_VERSION:
        _fail(f"format version {version} is not supported (this chatparse reads version {FORMAT_VERSION})")
    if header_size != HEADER_SIZE:
        _fail(f"header size {header_size}, expected {HEADER_SIZE}")
    if file_size != n:
        _fail(f"header says {file_size} bytes but the file has {n} (truncated or padded)")
    digest = hashlib.sha256(view[:n - TRAILER_SIZE]).digest()
    if digest != bytes(view[n - TRAILER_SIZE:]):
        _fail("checksum mismatch: the file is corrupted")
    if flags & ~(FLAG_VOCAB_HASH | FLAG_TOKENS):
        _fail(f"unknown header flags {flags:#x}")
    if flags & FLAG_TOKENS and not flags & FLAG_VOCAB_HASH:
        _fail("token section without its vocabulary hash")
    if reserved != 0:
        _fail("reserved header field is not zero")
    if t_off != HEADER_SIZE or m_off != t_off + t_len or d_off != _align8(m_off + m_len) \
            or d_len % 8 or d_off + d_len != n - TRAILER_SIZE:
        _fail("section offsets/lengths are inconsistent")
    if any(view[m_off + m_len:d_off]):
        _fail("non-zero padding before the data section")
    if not flags & FLAG_VOCAB_HASH and any(v_hash):
        _fail("vocabulary hash present but its flag is clear")
    return {"version": version, "t_off": t_off, "t_len": t_len, "m_off": m_off, "m_len": m_len, "d_off": d_off,
            "d_len": d_len, "flags": flags, "t_hash": t_hash, "v_hash": v_hash,
            "chatparse_version": _version_field(v_raw)}


def _template_section(view: memoryview, h: dict) -> dict:
    """The template section: compact JSON hashing to the header's template hash, a normalized template."""
    template_bytes = bytes(view[h["t_off"]:h["t_off"] + h["t_len"]])
    spec = _json(template_bytes, "template")
    if json.dumps(spec, separators=(",", ":"), ensure_ascii=False).encode("utf-8") != template_bytes:
        _fail("template section is not in the format's compact JSON form")
    if hashlib.sha256(canonical_json(spec).encode("utf-8")).digest() != h["t_hash"]:
        _fail("template hash does not match the template section")
    template_rules(spec, _fail)
    return spec


def _metadata(view: memoryview, h: dict, spec: dict) -> tuple:
    """The metadata section and what it describes: ``(meta, arrays, patterns, modes, n_classes, class map)``."""
    meta = _json(bytes(view[h["m_off"]:h["m_off"] + h["m_len"]]), "metadata")
    if not isinstance(meta, dict):
        _fail("metadata is not a JSON object")
    _keys(meta, {"chatparse_version", "n_classes", "patterns", "modes", "arrays"}, {"js", "tokens"}, "metadata")
    if ("tokens" in meta) != bool(h["flags"] & FLAG_TOKENS):
        _fail("the token-section flag and the metadata's 'tokens' entry disagree")
    if meta["chatparse_version"] != h["chatparse_version"]:
        _fail("metadata chatparse_version differs from the header's")
    n_classes = _int(meta["n_classes"], "n_classes", 1, 65535)
    arrays = _arrays(meta["arrays"], view[h["d_off"]:h["d_off"] + h["d_len"]], h["d_len"])
    patterns = _patterns(meta["patterns"], spec)
    class_map = _class_map(arrays, n_classes)
    modes = _modes(meta["modes"], spec, patterns, arrays, n_classes, class_map)
    known = {"class_starts", "class_ids"} | {f"mode{i}.{k}" for i in range(len(modes))
                                             for k in ("trans", "eot", "acc", "term")}
    if "tokens" in meta:
        known |= {f"tokens.{k}" for k in TOKEN_ARRAYS}
    extra = set(arrays) - known
    if extra:
        _fail(f"unknown arrays {quote_list(sorted(extra))}")
    return meta, arrays, patterns, modes, n_classes, class_map


def _align8(n: int) -> int:
    return (n + 7) & ~7


def _version_field(raw: bytes) -> str:
    text = raw.rstrip(b"\0")
    if b"\0" in text or not text or any(not 0x21 <= b < 0x7F for b in text):
        _fail("chatparse version field is not NUL-padded printable ASCII")
    return text.decode("ascii")


def _json(b: bytes, what: str):
    try:
        text = b.decode("utf-8")
    except UnicodeDecodeError as e:
        _fail(f"{what} section is not UTF-8 (invalid byte at offset {e.start})")
    check_depth(text, what, _fail)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        _fail(f"{what} section is not valid JSON ({e})")
    except ValueError:  # (an integer of more than 4300 digits)
        _fail(f"{what} section is not valid JSON (an integer has more than 4300 digits)")
    # Strict UTF-8 holds no surrogates: only a \uD800-\uDFFF escape without its pair can put one in a string,
    # and such a string is no text (it cannot be encoded back; the JS runtime would hash it differently).
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(value):
        _fail(f"{what} section: a string holds a lone surrogate (an unpaired \\ud800-\\udfff escape)")
    return value


_SURROGATE_ESCAPE = regex.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = regex.compile("[\ud800-\udfff]")


def _has_lone_surrogate(value) -> bool:
    """Whether a string (a key or a value) anywhere in a parsed JSON value holds a surrogate code point
    (json.loads joins an escaped pair into one code point, so only lone ones are left). Iterative: the value
    may nest deeply."""
    stack = [value]
    while stack:
        v = stack.pop()
        if type(v) is str:
            if _SURROGATE.search(v):
                return True
        elif type(v) is list:
            stack.extend(v)
        elif type(v) is dict:
            for k, x in v.items():
                if _SURROGATE.search(k):
                    return True
                stack.append(x)
    return False


# --------------------------------------------------------------------------------------------- small checks


def _keys(obj: dict, required: set, optional: set, where: str) -> None:
    missing = required - set(obj)
    if missing:
        _fail(f"{where}: missing keys {quote_list(sorted(missing))}")
    extra = set(obj) - required - optional
    if extra:
        _fail(f"{where}: unexpected keys {quote_list(sorted(extra))}")


def _int(v, where: str, lo: int = 0, hi: int = MAX_INT) -> int:
    if type(v) is not int or not lo <= v <= hi:
        _fail(f"{where}: expected an integer in {lo}..{hi}")
    return v


def _bool(v, where: str) -> bool:
    if type(v) is not bool:
        _fail(f"{where}: expected true/false")
    return v


def _str(v, where: str) -> str:
    if type(v) is not str:
        _fail(f"{where}: expected a string")
    return v


def _list(v, where: str) -> list:
    if type(v) is not list:
        _fail(f"{where}: expected a list")
    return v


# --------------------------------------------------------------------------------------------- template


def _compile(src: str, where: str):
    try:
        return regex.compile(src, regex.DOTALL)
    except (regex.error, RecursionError, OverflowError, ValueError) as e:
        _fail(f"{where}: regex does not compile ({e})")


def _check_template(spec) -> None:
    """The template section holds a normalized template: the template rules (runtime/tables/validate.py), one
    definition for the compiler and the loader. Run after every other check: beyond `template_rules` it only
    adds what needs Python's regex engine (the patterns compile), which a port cannot check."""
    try:
        check_normalized(spec)
    except ValueError as e:
        _fail(str(e))


def _delimiter_source(delim: dict) -> str:
    if "pattern" in delim:
        return delim["pattern"]
    return "|".join(regex.escape(s) for s in sorted(delim["literals"], key=len, reverse=True))


def _expected_patterns(spec: dict) -> list:
    out = []
    for fi, f in enumerate(spec["fields"]):
        for kind in ("open", "close"):
            d = f[kind]
            if d is not None:
                out.append((kind, fi, kind if "literals" in d else f"{kind}_pattern", _delimiter_source(d)))
    return out


# --------------------------------------------------------------------------------------------- metadata


def _patterns(raw_patterns, spec: dict) -> list:
    expected = _expected_patterns(spec)
    raw_patterns = _list(raw_patterns, "patterns")
    if len(raw_patterns) != len(expected):
        _fail(f"patterns: {len(raw_patterns)} entries but the template defines {len(expected)} delimiters")
    out = []
    for i, (p, (kind, fi, key, src)) in enumerate(zip(raw_patterns, expected)):
        where = f"patterns[{i}]"
        if type(p) is not dict:
            _fail(f"{where}: expected an object")
        _keys(p, _PATTERN_KEYS, set(), where)
        if (p["kind"], p["field"], p["key"], p["source"]) != (kind, fi, key, src) or type(p["field"]) is not int:
            _fail(f"{where}: does not match the template's {key} of field {quote(spec['fields'][fi]['name'])}")
        exact = _bool(p["exact"], f"{where}.exact")
        reasons = _list(p["reasons"], f"{where}.reasons")
        if any(type(r) is not str for r in reasons):
            _fail(f"{where}.reasons: expected strings")
        named = _bool(p["named_groups"], f"{where}.named_groups")
        rx = _compile(src, where)
        if named != bool(rx.groupindex):
            _fail(f"{where}: named_groups does not match the pattern")
        if named and spec["fields"][fi]["transform"] is None:
            _fail(f"{where}: the pattern has named groups but field {fi} has no transform")
        if key in ("open", "close") and not exact:
            _fail(f"{where}: a literal delimiter must be exact")
        history = _int(p["history"], f"{where}.history", 1)
        horizon = _int(p["horizon"], f"{where}.horizon", -1)
        out.append({"kind": kind, "field": fi, "key": key, "source": src, "exact": exact, "reasons": list(reasons),
                    "named_groups": named, "history": history, "horizon": horizon})
    return out


def _arrays(entries, data: memoryview, d_len: int) -> dict:
    entries = _list(entries, "arrays")
    out: dict = {}
    spans = []
    for i, e in enumerate(entries):
        where = f"arrays[{i}]"
        if type(e) is not dict:
            _fail(f"{where}: expected an object")
        _keys(e, _ARRAY_KEYS, set(), where)
        name = _str(e["name"], f"{where}.name")
        if name in out:
            _fail(f"{where}: duplicate array {quote(name)}")
        if type(e["dtype"]) is not str or e["dtype"] not in _DTYPES:
            _fail(f"{where} ({quote(name)}): dtype is not one of {quote_list(sorted(_DTYPES))}")
        dt = _DTYPES[e["dtype"]]
        shape = _list(e["shape"], f"{where}.shape")
        if not 1 <= len(shape) <= 2:
            _fail(f"{where} ({quote(name)}): arrays have 1 or 2 dimensions")
        count = 1
        for s in shape:
            count *= _int(s, f"{where}.shape", 0, d_len)
        offset = _int(e["offset"], f"{where}.offset", 0, d_len)
        nbytes = _int(e["nbytes"], f"{where}.nbytes", 0, d_len)
        if nbytes != count * dt.itemsize:
            _fail(f"{where} ({quote(name)}): nbytes {nbytes} does not match its shape and dtype")
        if offset % 8 or offset + nbytes > d_len:
            _fail(f"{where} ({quote(name)}): offset {offset} (+{nbytes}) is unaligned or outside the data section")
        spans.append((offset, offset + nbytes, name))
        arr = np.frombuffer(data, dtype=dt, count=count, offset=offset) if count else np.zeros(0, dt)
        out[name] = arr.reshape(shape)
    spans = sorted(s for s in spans if s[1] > s[0])
    for (_, a1, an), (b0, _, bn) in zip(spans, spans[1:]):
        if b0 < a1:
            _fail(f"arrays {quote(an)} and {quote(bn)} overlap")
    return out


def _get(arrays: dict, name: str, dtypes, ndim: int):
    if name not in arrays:
        _fail(f"missing array {quote(name)}")
    arr = arrays[name]
    code = next(k for k, v in _DTYPES.items() if v == arr.dtype)
    if code not in dtypes:
        _fail(f"array {quote(name)}: dtype {code} not allowed here (expected {'/'.join(dtypes)})")
    if arr.ndim != ndim:
        _fail(f"array {quote(name)}: expected {ndim} dimension(s)")
    return arr


def _class_map(arrays: dict, n_classes: int):
    starts = _get(arrays, "class_starts", ("u4",), 1)
    ids = _get(arrays, "class_ids", ("u1", "u2"), 1)
    if starts.shape != ids.shape or len(starts) == 0 or starts[0] != 0:
        _fail("class map must start at code point 0 with one class id per interval")
    if len(starts) > 1 and (np.diff(starts.astype(np.int64)) <= 0).any():
        _fail("class map intervals must be strictly increasing")
    if int(starts[-1]) >= N_CODEPOINTS:
        _fail("class map interval beyond U+10FFFF")
    if int(ids.max()) >= n_classes:
        _fail("class id out of range")
    if len(np.unique(ids)) != n_classes:
        _fail("class map does not use every class")
    return starts, ids


def _expected_watch(spec: dict) -> list:
    fields = spec["fields"]
    implicit = spec["implicit"]
    pats = _expected_patterns(spec)
    watch = [[pi for pi, (kind, fi, _, _) in enumerate(pats)
              if kind == "open" or fields[fi]["name"] == implicit]]
    for fi, f in enumerate(fields):
        watch.append([pi for pi, (kind, pf, _, _) in enumerate(pats)
                      if pf == fi and kind == "close" and f["name"] != implicit])
    return watch


def _modes(raw_modes, spec: dict, patterns: list, arrays: dict, n_classes: int, class_map: tuple) -> list:
    raw_modes = _list(raw_modes, "modes")
    watch = _expected_watch(spec)
    if len(raw_modes) != len(watch):
        _fail(f"modes: {len(raw_modes)} entries, expected {len(watch)} (one per field plus the outside mode)")
    out = []
    for mi, (m, w) in enumerate(zip(raw_modes, watch)):
        where = f"modes[{mi}]"
        if type(m) is not dict:
            _fail(f"{where}: expected an object")
        _keys(m, _MODE_KEYS, set(), where)
        if type(m["patterns"]) is not list or m["patterns"] != w or any(type(x) is not int for x in m["patterns"]):
            _fail(f"{where}: watched patterns are not the template's {w}")
        trans = _get(arrays, f"mode{mi}.trans", _STATE_DTYPES, 2)
        n_states = trans.shape[0]
        if n_states < 1 or trans.shape[1] != n_classes:
            _fail(f"{where}: transition table has shape ({trans.shape[0]}, {trans.shape[1]}), expected "
                  f"(states >= 1, {n_classes})")
        eot = _get(arrays, f"mode{mi}.eot", _STATE_DTYPES, 1)
        acc = _get(arrays, f"mode{mi}.acc", ("i1",), 2)
        term = _get(arrays, f"mode{mi}.term", ("u1",), 1)
        if eot.shape != (n_states,) or term.shape != (n_states,) or acc.shape != (n_states, len(w)):
            _fail(f"{where}: per-state arrays do not match {n_states} states and {len(w)} patterns")
        if trans.size and int(trans.max()) >= n_states:
            _fail(f"{where}: transition to a state outside 0..{n_states - 1}")
        if eot.size and int(eot.max()) >= n_states:
            _fail(f"{where}: end-of-text transition to a state outside 0..{n_states - 1}")
        if acc.size and (int(acc.min()) < -1 or int(acc.max()) > 1):
            _fail(f"{where}: accept codes must be -1, 0 or 1")
        if term.size and int(term.max()) > 1:
            _fail(f"{where}: terminal flags must be 0 or 1")
        if trans[0].any() or eot[0] != 0 or (acc[0] != -1).any() or term[0] != 1:
            _fail(f"{where}: state 0 must be the dead state")
        idle = term[1:].astype(bool) & ~(acc[1:] >= 0).any(axis=1)  # (W == 0: no state accepts)
        if idle.any():
            _fail(f"{where}: terminal state {int(np.flatnonzero(idle)[0]) + 1} accepts no pattern "
                  "(only the dead state 0 may be terminal without accepting)")
        start0 = _int(m["start0"], f"{where}.start0", 0, n_states - 1)
        startn = _int(m["startN"], f"{where}.startN", 0, n_states - 1)
        first = prefilter_pairs(trans, acc, term, startn, *class_map)
        if _strict_json(m["first"]) != _strict_json(first):
            _fail(f"{where}.first: not the prefilter the mode's automaton gives (FORMAT.md section 4)")
        out.append({"patterns": list(w), "trans": trans, "eot": eot, "acc": acc, "term": term.view(np.bool_),
                    "start0": start0, "startN": startn, "first": first})
    return out


def _strict_json(v) -> str:
    """Compare JSON values by their text: 1.0 is not 1 and true is not 1 here."""
    return json.dumps(v, separators=(",", ":"))


def _translation(t, where: str, pattern: str | None = None) -> dict:
    if type(t) is not dict:
        _fail(f"{where}: expected an object")
    if pattern is not None and t.get("pattern") != pattern:
        _fail(f"{where}: translation is not for this pattern")
    extra = {"pattern"} if pattern is not None else set()
    if "error" in t:
        _keys(t, {"error"}, extra, where)
        _str(t["error"], where)
        return t
    _keys(t, {"source", "groups"}, {"caveats"} | extra, where)
    _str(t["source"], where)
    if type(t["groups"]) is not dict or any(type(v) is not str for v in t["groups"].values()):
        _fail(f"{where}.groups: expected an object of strings")
    if "caveats" in t and any(type(c) is not str for c in _list(t["caveats"], where)):
        _fail(f"{where}.caveats: expected strings")
    return t


def _js_section(js, patterns: list, spec: dict) -> dict:
    if type(js) is not dict:
        _fail("js: expected an object")
    _keys(js, {"patterns", "anchor", "content", "word"}, set(), "js")
    pats = _list(js["patterns"], "js.patterns")
    if len(pats) != len(patterns):
        _fail("js.patterns: one translation per pattern expected")
    for i, (t, p) in enumerate(zip(pats, patterns)):
        _translation(t, f"js.patterns[{i}]", p["source"])
    _translation(js["anchor"], "js.anchor", _delimiter_source(spec["start_anchor"]))
    if type(js["content"]) is not dict:
        _fail("js.content: expected an object")
    for k, t in js["content"].items():
        _translation(t, "js.content")
    if js["word"] is not None:
        _check_word(_str(js["word"], "js.word"))
    return js


_CLASS_ESCAPES = "\\][-^"


def _check_word(word: str) -> None:
    """`js.word` must be a JavaScript character class in the form FORMAT.md section 7 gives (the JS runtime
    builds RegExps from it; this runtime checks it the same way, so both accept the same files)."""
    n, i = len(word), 1
    ok = n >= 2 and word[0] == "[" and word[-1] == "]"
    if ok and word[i] == "^" and n > 2:
        i += 1
    prev = -1  # the code point of the last atom, when it may start a range
    while ok and i < n - 1:
        if word[i] == "-" and prev >= 0:
            cp, i = _class_atom(word, i + 1, n - 1)
            ok = cp >= prev
            prev = -1
        else:
            cp, i = _class_atom(word, i, n - 1)
            ok, prev = cp >= 0, cp
    if not ok:
        _fail(f"js.word: {word!r:.60} is not a character class of the form FORMAT.md section 7 describes")


def _class_atom(word: str, i: int, end: int) -> tuple[int, int]:
    """(code point, next index) of the class atom at `word[i]` (ending before `end`), or (-1, i)."""
    if i >= end:
        return -1, i
    c = word[i]
    if c == "\\":
        if i + 1 < end and word[i + 1] in _CLASS_ESCAPES:
            return ord(word[i + 1]), i + 2
        m = _CLASS_HEX.match(word, i, end)
        if m is None or int(m.group(1), 16) > 0x10FFFF:
            return -1, i
        return int(m.group(1), 16), m.end()
    if c in _CLASS_ESCAPES or "\ud800" <= c <= "\udfff":
        return -1, i
    return ord(c), i + 1


_CLASS_HEX = regex.compile(r"\\u\{([0-9A-Fa-f]{1,6})\}")


# --------------------------------------------------------------------------------------------- token section


def vocab_digest(meta: dict, arrays: dict) -> bytes:
    """The vocabulary hash (FORMAT.md 8.3): SHA-256 over a tag, the canonical JSON of the vocabulary's scalar
    parameters, and each vocabulary array (`VOCAB_ARRAYS`, in that order) as its little-endian bytes preceded
    by its byte length (u64). `arrays` maps the short names (``offsets``...) to arrays of the format's dtypes."""
    h = hashlib.sha256(b"chatparse vocabulary v1\n")
    scalars = {k: meta[k] for k in ("kind", "size", "strip_char", "strip_start", "cleanup")}
    h.update(canonical_json(scalars).encode("utf-8") + b"\n")
    for name in VOCAB_ARRAYS:
        arr = np.ascontiguousarray(arrays[name], dtype=_DTYPES[TOKEN_ARRAYS[name][0]])
        h.update(struct.pack("<Q", arr.nbytes))
        h.update(memoryview(arr).cast("B"))
    return h.digest()


def _utf8_segments(buf: np.ndarray, seg_lens: np.ndarray, what: str):
    """Decode `buf` (uint8) as strict UTF-8 whose segments of `seg_lens` bytes each start at a character
    boundary (so each segment is valid UTF-8 on its own); returns (text, character offset of every segment
    boundary)."""
    try:
        text = buf.tobytes().decode("utf-8")
    except UnicodeDecodeError as e:
        _fail(f"token section: {what} is not valid UTF-8 ({e.reason} at byte {e.start})")
    starts = np.zeros(len(seg_lens) + 1, dtype=np.int64)
    np.cumsum(seg_lens, out=starts[1:])
    lead = (buf & 0xC0) != 0x80
    nz = starts[:-1][seg_lens > 0]
    if nz.size and not lead[nz].all():
        _fail(f"token section: {what}: a token's bytes do not start at a character boundary")
    cum = np.zeros(len(buf) + 1, dtype=np.int32 if len(buf) < 2**31 else np.int64)
    np.cumsum(lead, out=cum[1:])
    return text, cum[starts]


def token_texts(data: dict):
    """``(text, char_offsets, first_text, first_offsets)``: the texts of the token section in two strings
    with the character offsets of each token's text (tokens without the TEXT flag have none: zero length) and
    of each Metaspace first-token text. Validates the UTF-8; cached in the dict."""
    cached = data.get("_texts")
    if cached is not None:
        return cached
    offsets = np.asarray(data["offsets"], dtype=np.int64)
    lens = np.diff(offsets)
    has = (np.asarray(data["flags"]) & _T_TEXT) != 0
    blob = np.asarray(data["bytes"], dtype=np.uint8)
    text, co = _utf8_segments(blob[np.repeat(has, lens)], np.where(has, lens, 0), "token text")
    fo = np.asarray(data["first_offsets"], dtype=np.int64)
    ftext, fco = _utf8_segments(np.asarray(data["first_bytes"], dtype=np.uint8), np.diff(fo), "first-token text")
    out = (text, co, ftext, fco)
    data["_texts"] = out
    return out


def _offsets(arr: np.ndarray, n: int, total: int, what: str) -> np.ndarray:
    if arr.shape != (n + 1,):
        _fail(f"token section: {what} has shape {arr.shape}, expected ({n + 1},)")
    o = arr.astype(np.int64)
    if o[0] != 0 or o[-1] != total or (np.diff(o) < 0).any():
        _fail(f"token section: {what} must rise from 0 to {total} without decreasing")
    return o


def _token_section(tm, arrays: dict, modes: list, v_hash: bytes) -> dict:
    if type(tm) is not dict:
        _fail("tokens: expected an object")
    _keys(tm, set(TOKEN_META_KEYS), set(), "tokens")
    size = _int(tm["size"], "tokens.size", 1)
    if tm["kind"] not in ("bytes", "pieces"):
        _fail("tokens.kind: expected 'bytes' or 'pieces'")
    if type(tm["strip_char"]) is not str or len(tm["strip_char"]) != 1:
        _fail("tokens.strip_char: expected one character")
    tsha = tm["tokenizer_sha256"]
    if tsha is not None and (type(tsha) is not str or not regex.fullmatch(r"[0-9a-f]{64}", tsha)):
        _fail("tokens.tokenizer_sha256: expected null or 64 lowercase hex digits")
    meta = {"size": size, "kind": tm["kind"], "strip_char": tm["strip_char"],
            "strip_start": _int(tm["strip_start"], "tokens.strip_start"),
            "cleanup": _bool(tm["cleanup"], "tokens.cleanup"), "name": _str(tm["name"], "tokens.name"),
            "tokenizer_sha256": tsha}
    arrs = {k: _get(arrays, f"tokens.{k}", (dt,), nd) for k, (dt, nd) in TOKEN_ARRAYS.items()}

    offsets = _offsets(arrs["offsets"], size, len(arrs["bytes"]), "offsets")
    lens = np.diff(offsets)
    flags = arrs["flags"]
    if flags.shape != (size,):
        _fail(f"token section: flags has shape {flags.shape}, expected ({size},)")
    if (flags & ~np.uint8(_T_SKIP | _T_TEXT | _T_BYTE)).any():
        _fail("token section: unknown token flags")
    skip = (flags & _T_SKIP) != 0
    text = (flags & _T_TEXT) != 0
    byte = (flags & _T_BYTE) != 0
    if (skip & text).any():
        _fail("token section: a skipped token cannot have text")
    if (byte & text).any() or (byte & (lens != 1)).any():
        _fail("token section: a byte token holds exactly one byte and has no text of its own")
    if meta["kind"] == "bytes" and byte.any():
        _fail("token section: byte tokens only exist in the 'pieces' kind")
    if meta["kind"] == "pieces" and (~skip & (text == byte)).any():
        _fail("token section: every piece that is not skipped is either text or a byte token")

    first_ids = arrs["first_ids"]
    n_first = len(first_ids)
    _offsets(arrs["first_offsets"], n_first, len(arrs["first_bytes"]), "first_offsets")
    if n_first:
        if meta["kind"] != "pieces":
            _fail("token section: first-token texts only exist in the 'pieces' kind")
        ids = first_ids.astype(np.int64)
        if (np.diff(ids) <= 0).any() or ids[-1] >= size:
            _fail("token section: first_ids must be increasing token ids")
        if skip[ids].any():
            _fail("token section: a skipped token has a first-token text")

    inert = arrs["inert"]
    if inert.shape != (len(modes), size):
        _fail(f"token section: inert has shape {inert.shape}, expected ({len(modes)}, {size})")
    if inert.size and int(inert.max()) > 1:
        _fail("token section: inert flags must be 0 or 1")
    usable = text & (lens > 0)
    if (inert.astype(bool) & ~usable).any():
        _fail("token section: only tokens with non-empty text of their own can be inert")

    data = {"meta": meta, **arrs}
    _, char_offsets, _, _ = token_texts(data)  # strict UTF-8 of every text token and first-token text

    delims = arrs["delims"]
    if delims.ndim != 2 or delims.shape[1] != 3:
        _fail(f"token section: delims has shape {delims.shape}, expected (n, 3)")
    if len(delims):
        d = delims.astype(np.int64)
        m, i, pi = d[:, 0], d[:, 1], d[:, 2]
        if int(m.max()) >= len(modes) or int(i.max()) >= size:
            _fail("token section: a whole-delimiter entry names a mode or token out of range")
        if (np.diff(m * size + i) <= 0).any():
            _fail("token section: whole-delimiter entries must be sorted by (mode, token) without repeats")
        for mm, pp in sorted(set(zip(m.tolist(), pi.tolist()))):  # (sorted: the first error is the JS one)
            if pp not in modes[mm]["patterns"]:
                _fail(f"token section: pattern {pp} is not watched in mode {mm}")
        nchars = np.diff(char_offsets)[i]
        if not usable[i].all() or (nchars > _MAX_DELIM_CHARS).any():
            _fail(f"token section: a whole-delimiter token must have text of 1..{_MAX_DELIM_CHARS} characters")
        if inert[m, i].any():
            _fail("token section: a whole-delimiter token cannot be inert in its mode")

    if vocab_digest(meta, arrs) != v_hash:
        _fail("vocabulary hash does not match the token section")
    return data
