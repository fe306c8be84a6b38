"""The resealed-file fuzzer of table files (issue #19 item 1): deterministic structural mutations of valid
`.cpt` files, resealed (layout, template hash and SHA-256 trailer recomputed, as anyone publishing a file can),
run through both runtimes, and compared.

A mutant is judged by what each runtime makes of it (FORMAT.md section 1, "What a reader must check"):

* refused: the table-file error (Python ``ValueError("chatparse table file: ...")``, JavaScript
  ``PyError("ValueError")`` with the same message), and the message is the same in both runtimes;
* loaded: then a few fixed texts of the base file's vectors are parsed (streamed in two feeds, then
  finalized) and both runtimes give the same events and message, or the same exception class at the same stage;
  no exception other than the parser's own (Python ValueError/KeyError/TypeError/RuntimeError, a JS
  ``PyError``) and no hang (each mutant has a time bound).

Four bases carry a token section (FORMAT.md section 8) for a small vocabulary trained at load time with the
`tokenizers` library (`TOKEN_BASES`); their mutants get token-section edits half of the time (`mutate_tokens`)
and a recomputed vocabulary hash most of the time (`reseal`), so that each check of FORMAT.md 8.4 is reached.
Both runtimes must decide them alike; both then build the token parser of a loaded one, which must refuse or
build alike (the checks that need the compiled tables, FORMAT.md 8.4, last paragraph: same message), and feed
it the base's id sequences (`python_outcome`, `js/fuzz_tables.mjs`): no crash, no hang. (A damaged `inert`
table may misparse, and the two token engines take different fast paths, so their messages on such a file
are not compared.)

`mutants(seed, n)` yields ``(name, bytes, what)``; `run(seed, n, workdir)` writes them to a directory, runs
`js/fuzz_tables.mjs` once over the whole directory and the Python runtime in-process, and returns the
figures and every disagreement. `python tests/table_fuzz.py --n 20000` runs it from the command line.

The C runtime (native/, issue #40) is the third reader: with ``native=PATH`` (a `chatparse-load` executable,
`native_loader` builds one with CMake) `run` also loads every mutant in C, one process per batch, and its
verdict must be Python's: refused with the same message, or loaded (``c_refused``/``c_loaded``; a C crash, a
sanitizer report or a missing verdict is a crash of side "c"). The command line does this whenever CMake and
PCRE2 are there (``--no-native`` skips it).

What the fuzzer leaves alone, and why: the *values* of the port section's translations (``js.patterns[i]``,
``js.anchor``, ``js.content`` sources and group maps) and ``js.word``. Only the JavaScript runtime reads them
(they are its Python-regex-to-JavaScript translations); a reader can check their form but not that a
different, well-formed translation means the same as the Python pattern, so a file with a replaced translation
loads in both runtimes and parses differently in JavaScript - like a replaced automaton it is a well-formed
file that parses wrongly (FORMAT.md section 1, "What the checks do not prove"). Their structure (keys, types)
is mutated like everything else.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
NODE = shutil.which("node")
HEADER = struct.Struct("<8sII7Q2I32s32s16s")
PREFIX = "chatparse table file: "
# Base templates of several shapes (literal delimiters, regex-decided ones with lookarounds and named groups, a
# format extension, many fields); each brings the texts of its conformance vector's first cases.
BASES = ("qwen3", "x_regex", "gpt_oss", "kimi_k2", "hermes", "x_misc", "x_ext", "t_qwen3", "t_gpt_oss", "t_hermes",
         "t_x_regex")
# Bases with a token section (FORMAT.md section 8): a template with token tables for a small vocabulary trained
# here with the `tokenizers` library: name -> (template base, tokenizer kind, special tokens, skip_special_tokens,
# tokenizer_sha256). Byte-level BPE ("bytes" kind, tokens with incomplete UTF-8), SentencePiece-style byte
# fallback ("pieces", byte tokens, strip_start), Unigram + Metaspace ("pieces", first-token texts; its special
# tokens skipped); with the delimiters as special tokens (whole-delimiter rows) and without (x_regex).
TOKEN_BASES = {
    "t_qwen3": ("qwen3", "byte_level", ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"], False,
                "ab" * 32),
    "t_gpt_oss": ("gpt_oss", "byte_fallback", ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|call|>",
                                               "<|return|>", "<|constrain|>"], False, None),
    "t_hermes": ("hermes", "metaspace", ["<tool_call>", "</tool_call>", "<|im_end|>"], True, None),
    "t_x_regex": ("x_regex", "byte_level", [], False, None),
}
TOKEN_FILLER = ["hello", "world", "the", "weather", "in", "Paris", "中文", "😀", "é", "naïve", "café", "—", "1.5",
                '{"name": "f", "arguments": {"x": 1}}', "\n", "  ", "true", "𝔘𝔫𝔦"]
TEXTS_PER_BASE = 3
TIME_BOUND = 10.0  # seconds for loading one mutant and parsing its texts (generous: the machine is shared)
VOCAB_TAG = b"chatparse vocabulary v1\n"
VOCAB_ARRAYS = ("offsets", "bytes", "flags", "first_ids", "first_offsets", "first_bytes")
_DTYPE = {"u1": "<u1", "i1": "<i1", "u2": "<u2", "i2": "<i2", "u4": "<u4", "i4": "<i4"}
# Paths (as tuples of keys, "*" for any) under which values are only the JS runtime's translations: see above.
_PORT_VALUES = (("js", "patterns", "*", "source"), ("js", "patterns", "*", "groups"), ("js", "anchor", "source"),
                ("js", "anchor", "groups"), ("js", "content"), ("js", "word"))


# ------------------------------------------------------------------------------------------- files


def sections(data: bytes):
    """(header fields as a list, template bytes, metadata bytes, data-section bytes) of a well-formed file."""
    h = list(HEADER.unpack_from(data, 0))
    t_off, t_len, m_off, m_len, d_off, d_len = h[4:10]
    return h, data[t_off:t_off + t_len], data[m_off:m_off + m_len], bytearray(data[d_off:d_off + d_len])


def reseal(h: list, template: bytes, meta: bytes, blob: bytes, *, rehash: bool = True, revocab: bool = True) -> bytes:
    """A file from its parts with a valid layout and trailer; with `rehash`, the template hash is recomputed
    from the template section (when it parses as JSON: Python's canonical form); with `revocab`, the
    vocabulary hash of a token section (FORMAT.md 8.3) from the section as it now is (when the metadata names
    the parameters and the arrays it is computed over: `vocab_hash_of`)."""
    h = list(h)
    if rehash:
        try:
            spec = json.loads(template.decode("utf-8"))
            canon = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            h[12] = hashlib.sha256(canon.encode("utf-8")).digest()
        except (ValueError, RecursionError):
            pass
    if revocab:
        v = vocab_hash_of(meta, blob)
        if v is not None:
            h[13] = v
    m_off = 160 + len(template)
    d_off = (m_off + len(meta) + 7) & ~7
    blob = bytes(blob) + b"\0" * (-len(blob) % 8)
    h[3:10] = [d_off + len(blob) + 32, 160, len(template), m_off, len(meta), d_off, len(blob)]
    buf = bytearray(h[3])
    HEADER.pack_into(buf, 0, *h)
    buf[160:m_off] = template
    buf[m_off:m_off + len(meta)] = meta
    buf[d_off:d_off + len(blob)] = blob
    return trailer(buf)


def vocab_hash_of(meta: bytes, blob: bytes) -> bytes | None:
    """The vocabulary hash (FORMAT.md 8.3) of a (maybe damaged) token section: the metadata's ``tokens``
    parameters in canonical JSON and the raw bytes of the six vocabulary arrays as the directory places them;
    None when the metadata does not say (no ``tokens`` object, a parameter or an array entry missing or out of
    the data section)."""
    try:
        md = json.loads(meta.decode("utf-8"))
        tm = md["tokens"]
        scalars = {k: tm[k] for k in ("kind", "size", "strip_char", "strip_start", "cleanup")}
        canon = json.dumps(scalars, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        entries = {e["name"]: e for e in md["arrays"] if type(e) is dict and type(e.get("name")) is str}
        h = hashlib.sha256(VOCAB_TAG + canon + b"\n")
        for name in VOCAB_ARRAYS:
            e = entries[f"tokens.{name}"]
            off, n = e["offset"], e["nbytes"]
            if type(off) is not int or type(n) is not int or not 0 <= off <= off + n <= len(blob):
                return None
            h.update(struct.pack("<Q", n) + bytes(blob[off:off + n]))
        return h.digest()
    except (ValueError, KeyError, TypeError, RecursionError, UnicodeError, AttributeError):
        return None


def trailer(buf) -> bytes:
    buf = bytearray(buf)
    buf[-32:] = hashlib.sha256(bytes(buf[:-32])).digest()
    return bytes(buf)


def compact(value) -> bytes:
    """The format's compact JSON; a lone surrogate (which UTF-8 cannot hold) is written as its escape."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, separators=(",", ":")).encode("utf-8")


# ------------------------------------------------------------------------------------------- mutations


def _paths(value, path=()):
    """Every (path, value) in a JSON value, the root included."""
    out = [(path, value)]
    stack = [(path, value)]
    while stack:
        p, v = stack.pop()
        items = v.items() if type(v) is dict else enumerate(v) if type(v) is list else ()
        for k, x in items:
            out.append((p + (k,), x))
            stack.append((p + (k,), x))
    return out


def _port_value(path) -> bool:
    for pat in _PORT_VALUES:
        if len(path) >= len(pat) and all(a == "*" or a == b for a, b in zip(pat, path)):
            return True
    return False


def _get(root, path):
    for k in path:
        root = root[k]
    return root


def _new_int(rng: random.Random, v: int) -> int:
    return rng.choice([v + 1, v - 1, v + 1, v - 1, 0, -1, 1, 2, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32,
                       2**53 + 1, 2**64 + 1, -(2**31), rng.randint(0, max(1, abs(v) * 2)), v * 2, v // 2])


def _new_scalar(rng: random.Random, v, strings: list):
    """Another value for a scalar or container: same type nearby most of the time, sometimes another type."""
    if rng.random() < 0.2:
        return rng.choice([None, True, False, 0, 1, -1, 1.0, 0.5, "", "x", [], {}, [0], {"a": 1}, 1e300,
                           float("inf"), float("nan"), 2**70])
    if type(v) is bool:
        return not v
    if type(v) is int:
        return _new_int(rng, v)
    if type(v) is float:
        return rng.choice([v + 1, -v, 0.0, int(v) if v == v and abs(v) < 1e18 else 0])
    if type(v) is str:
        return rng.choice([v + "x", v[:-1], "", v.upper(), v[::-1], v + v, "\ud800", "\u00e9" + v,
                           rng.choice(strings) if strings else v])
    if v is None:
        return rng.choice([0, "", [], {}, False])
    return None


def mutate_json(rng: random.Random, root, *, port_values: bool):
    """One structural mutation of a JSON value (returned; `root` is not changed)."""
    root = copy.deepcopy(root)
    paths = [(p, v) for p, v in _paths(root) if port_values or not _port_value(p)]
    strings = [v for _, v in paths if type(v) is str][:200]
    path, v = rng.choice(paths)
    op = rng.random()
    if type(v) is list and v and op < 0.5:
        kind = rng.randrange(6)
        if kind == 0:
            del v[rng.randrange(len(v))]
        elif kind == 1:
            v.insert(rng.randrange(len(v) + 1), copy.deepcopy(rng.choice(v)))
        elif kind == 2 and len(v) > 1:
            i, j = rng.sample(range(len(v)), 2)
            v[i], v[j] = v[j], v[i]
        elif kind == 3:
            del v[rng.randrange(len(v)):]
        elif kind == 4:
            v.reverse()
        else:
            v.append(copy.deepcopy(v[-1]))
        return root
    if type(v) is dict and v and op < 0.5:
        kind = rng.randrange(4)
        keys = list(v)
        k = rng.choice(keys)
        if kind == 0:
            del v[k]
        elif kind == 1:
            v[k + "_"] = v.pop(k)
        elif kind == 2:
            v["extra"] = 1
        else:  # reorder keys
            items = list(v.items())
            rng.shuffle(items)
            v.clear()
            v.update(items)
        return root
    new = _new_scalar(rng, v, strings)
    if not path:
        return new
    _get(root, path[:-1])[path[-1]] = new
    return root


def _array_entry(rng: random.Random, meta: dict):
    arrays = meta.get("arrays")
    arrays = [a for a in arrays if type(a) is dict and type(a.get("dtype")) is str and a["dtype"] in _DTYPE and type(a.get("offset")) is int
              and type(a.get("nbytes")) is int and a["nbytes"] > 0 and a["offset"] >= 0
              and a["nbytes"] % np.dtype(_DTYPE[a["dtype"]]).itemsize == 0] if type(arrays) is list else []
    return rng.choice(arrays) if arrays else None


def mutate_blob(rng: random.Random, meta: dict, blob: bytearray) -> bytearray:
    """One element of one array set to a nearby, extreme or random value of its dtype, or one byte flipped."""
    blob = bytearray(blob)
    a = _array_entry(rng, meta)
    if a is None or a["offset"] + a["nbytes"] > len(blob) or rng.random() < 0.15:
        if blob:
            i = rng.randrange(len(blob))
            blob[i] ^= 1 << rng.randrange(8)
        return blob
    dt = np.dtype(_DTYPE.get(a["dtype"], "<u1"))
    count = a["nbytes"] // dt.itemsize
    arr = np.frombuffer(bytes(blob[a["offset"]:a["offset"] + a["nbytes"]]), dtype=dt).copy()
    i = rng.randrange(count)
    info = np.iinfo(dt)
    v = int(arr[i])
    # mostly small moves (states, classes, flags stay near valid values: what loads and must then parse alike)
    new = rng.choice([v + 1, v - 1, v + 1, v - 1, 0, 1, -1, 2, info.max, info.min, rng.randint(info.min, info.max),
                      int(arr[rng.randrange(count)])])
    arr[i] = max(info.min, min(info.max, new))
    blob[a["offset"]:a["offset"] + a["nbytes"]] = arr.tobytes()
    return blob


def _token_entries(meta: dict) -> dict:
    """The directory entries of the token arrays (``tokens.<name>`` -> entry) that can be edited in place."""
    arrays = meta.get("arrays") if type(meta) is dict else None
    out = {}
    for a in arrays if type(arrays) is list else ():
        if type(a) is dict and type(a.get("name")) is str and a["name"].startswith("tokens.") \
                and type(a.get("dtype")) is str and a["dtype"] in _DTYPE and type(a.get("offset")) is int \
                and type(a.get("nbytes")) is int and a["offset"] >= 0 and a["nbytes"] > 0 \
                and a["nbytes"] % np.dtype(_DTYPE[a["dtype"]]).itemsize == 0:
            out[a["name"][7:]] = a
    return out


def mutate_tokens(rng: random.Random, meta, blob: bytearray):
    """One edit of the token section, aimed at its checks (FORMAT.md 8.4): its metadata object, an element of
    one of its arrays set to a value that matters for that array (a flag combination, a neighbouring offset, a
    UTF-8 lead or continuation byte, an inert bit, a delimiter row's mode, id or pattern), or a consistent
    shortening (fewer whole-delimiter rows, which is still a valid file). Returns ``(meta, blob, word)``."""
    blob = bytearray(blob)
    entries = _token_entries(meta)
    r = rng.random()
    if r < 0.3 and type(meta) is dict and type(meta.get("tokens")) is dict:
        meta = copy.deepcopy(meta)
        meta["tokens"] = mutate_json(rng, meta["tokens"], port_values=True)
        return meta, blob, "tokens-meta"
    if r < 0.38 and "delims" in entries:
        meta = copy.deepcopy(meta)
        e = _token_entries(meta)["delims"]
        if type(e.get("shape")) is list and len(e["shape"]) == 2 and type(e["shape"][0]) is int and e["shape"][0] > 0:
            k = rng.randrange(e["shape"][0])
            e["shape"][0] -= k + 1
            e["nbytes"] -= 12 * (k + 1)
            if rng.random() < 0.5:  # the rows kept are the last ones
                e["offset"] += 12 * (k + 1)
        return meta, blob, "tokens-delims-rows"
    if not entries:
        return meta, blob, "tokens-none"
    if r < 0.46:  # a directory entry: another dtype of the same size, a reshape, one element fewer, or gone
        meta = copy.deepcopy(meta)
        e = _token_entries(meta)[rng.choice(sorted(entries))]
        shape = e.get("shape")
        kind = rng.randrange(4)
        if kind == 0:
            e["dtype"] = {"u1": "i1", "u2": "i2", "u4": "i4"}.get(e["dtype"], "u1")
        elif kind == 1 and type(shape) is list and all(type(x) is int for x in shape):
            e["shape"] = rng.choice([[shape[0] * shape[1]], shape[::-1]]) if len(shape) == 2 else [1] + shape
        elif kind == 2 and type(shape) is list and len(shape) == 1 and type(shape[0]) is int and shape[0] > 0:
            e["shape"] = [shape[0] - 1]
            e["nbytes"] -= np.dtype(_DTYPE[e["dtype"]]).itemsize
        else:
            meta["arrays"].remove(e)
        return meta, blob, "tokens-entry"
    name = rng.choice(sorted(entries))
    a = entries[name]
    if a["offset"] + a["nbytes"] > len(blob):
        return meta, blob, "tokens-none"
    dt = np.dtype(_DTYPE[a["dtype"]])
    arr = np.frombuffer(bytes(blob[a["offset"]:a["offset"] + a["nbytes"]]), dtype=dt).copy()
    i = rng.randrange(len(arr))
    v = int(arr[i])
    other = int(arr[rng.randrange(len(arr))])
    size = meta["tokens"].get("size") if type(meta.get("tokens")) is dict else None
    size = size if type(size) is int else 1
    choices = {
        "flags": [0, 1, 2, 3, 4, 5, 6, 7, 8, v ^ 1, v ^ 2, v ^ 4, other],
        "offsets": [v + 1, v - 1, other, 0],
        "first_offsets": [v + 1, v - 1, other, 0],
        "bytes": [0x80, 0xBF, 0xC3, 0xC0, 0xE0, 0xED, 0xF0, 0xF4, 0xF5, 0xFF, 0x41, 0x20, v ^ 0x40, other],
        "first_bytes": [0x80, 0xC3, 0xE2, 0xF0, 0xFF, 0x41, v ^ 0x40, other],
        "inert": [1 - v if v <= 1 else 0, 1 - v if v <= 1 else 0, 2, 255],
        "delims": [v + 1, v - 1, 0, other, size - 1, size, rng.randrange(max(1, size))],
        "first_ids": [v + 1, v - 1, 0, other, size - 1, size],
    }.get(name, [v + 1, v - 1])
    info = np.iinfo(dt)
    arr[i] = max(info.min, min(info.max, rng.choice(choices)))
    blob[a["offset"]:a["offset"] + a["nbytes"]] = arr.tobytes()
    return meta, blob, f"tokens-{name}"


def mutate_file(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """One mutant of a well-formed file and a word saying what was done. A file with a token section gets
    token-section edits half of the time (`mutate_tokens`), and its vocabulary hash is recomputed after the
    edits (as the template hash is) unless the edit was to that hash, or one time in five (then a changed
    vocabulary must be refused by its hash)."""
    h, template, meta_b, blob = sections(data)
    spec = json.loads(template)
    meta = json.loads(meta_b)
    what = []
    tokens = "tokens" in meta
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        if tokens and rng.random() < 0.5:
            meta, blob, word = mutate_tokens(rng, meta, blob)
            what.append(word)
            continue
        r = rng.random()
        if r < 0.34:
            meta = mutate_json(rng, meta, port_values=False)
            what.append("meta")
        elif r < 0.52:
            blob = mutate_blob(rng, meta if type(meta) is dict else {}, blob)
            what.append("array")
        elif r < 0.72:
            spec = mutate_json(rng, spec, port_values=True)
            what.append("template")
        elif r < 0.80:
            what.append("header")
            field = rng.choice([1, 2, 10, 11, 13, 14, 14])
            if field == 13:
                b = bytearray(h[13])
                b[rng.randrange(32)] ^= 1 << rng.randrange(8)
                h[13] = bytes(b)
                what.append("vocab-hash")
            elif field == 14:
                b = bytearray(h[14])
                b[rng.randrange(16)] = rng.choice([0, 0x20, 0x21, 0x7E, 0x7F, 0x41, 0xFF])
                h[14] = bytes(b)
            elif field == 10:
                h[10] ^= 1 << rng.choice([0, 1, 2, 31])
            else:
                h[field] = _new_int(rng, h[field]) % 2**32
        else:
            what.append(rng.choice(["raw", "swap", "layout", "noncompact"]))
    t_bytes = compact(spec)
    m_bytes = compact(meta)
    if "noncompact" in what:
        t_bytes = json.dumps(spec, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1])).encode(
            "utf-8", "surrogatepass")
    if "swap" in what:
        t_bytes, m_bytes = m_bytes, t_bytes
    revocab = "vocab-hash" not in what and rng.random() < 0.8
    try:
        out = reseal(h, t_bytes, m_bytes, blob, revocab=revocab)
    except (struct.error, UnicodeEncodeError):
        out = reseal(sections(data)[0], template, meta_b, sections(data)[3])
    if "raw" in what:  # a flipped bit anywhere before the trailer but in the port's translations, then resealed
        buf = bytearray(out)
        m_off, m_len = struct.unpack_from("<QQ", buf, 40)
        js = bytes(buf[m_off:m_off + m_len]).find(b',"js":')
        skip = range(m_off + js, m_off + m_len) if js >= 0 else range(0)
        i = rng.randrange(len(buf) - 32)
        while i in skip:
            i = rng.randrange(len(buf) - 32)
        buf[i] ^= 1 << rng.randrange(8)
        out = trailer(buf)
    if "layout" in what:  # a header size/offset field changed after sealing (trailer recomputed)
        buf = bytearray(out)
        off = rng.choice([16, 24, 32, 40, 48, 56, 64])
        v = struct.unpack_from("<Q", buf, off)[0]
        struct.pack_into("<Q", buf, off, _new_int(rng, v) % 2**64)
        out = trailer(buf)
    return out, "+".join(what)


# A version-2 template (a format extension: the python-calls content parser), for the extension checks.
EXT_T = {"start_anchor": "<|assistant|>",
         "fields": {"content": {"close": "<|end|>"},
                    "tool_calls": {"open": "<|tool_call_start|>", "close": "<|tool_call_end|>",
                                   "content": "python-calls"}}}
EXT_TEXTS = ['Sure.<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|><|end|>', "plain<|end|>"]


def _template(name: str):
    from chatparse import templates

    if name == "x_ext":
        return EXT_T
    if name.startswith("x_"):
        import make_vectors as mv

        return {"x_regex": mv.REGEX_T, "x_misc": mv.MISC_T}[name]
    return templates.get(name)


def _texts(name: str, template: dict) -> list:
    """The prefix-less texts of the first cases of the base's conformance vector (when there is one), else texts
    made of the template's literal delimiters."""
    path = VECTORS / f"{name}.json"
    texts = []
    if name == "x_ext":
        return EXT_TEXTS
    if path.exists():
        for c in json.loads(path.read_text(encoding="utf-8"))["cases"]:
            text = "".join(c["feeds"])
            if c.get("dialect") is None and text not in texts:
                texts.append(text)
            if len(texts) == TEXTS_PER_BASE:
                return texts
    body = 'a {"name": "f", "arguments": {"x": 1}} b'
    for f in template["fields"].values():
        lit = [f.get(k) for k in ("open", "close")]
        lit = [x if isinstance(x, str) else x[0] if isinstance(x, list) else "" for x in lit]
        texts.append(lit[0] + body + lit[1] + " tail")
    return texts[:TEXTS_PER_BASE] or ["plain text"]


def train_tokenizer(kind: str, specials: list, texts: list, seed: int = 0):
    """A small real tokenizer trained now with the `tokenizers` library on `texts` and filler lines:
    ``byte_level`` (BPE, 300 ids), ``byte_fallback`` (SentencePiece-style BPE with ``<0xXX>`` byte tokens and
    the Replace/ByteFallback/Fuse/Strip decoder, 300 ids) or ``metaspace`` (Unigram with Metaspace, about 120
    ids). Deterministic for the same inputs."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    rng = random.Random(seed)
    corpus = list(texts) * 3 + ["".join(rng.choice(TOKEN_FILLER) + rng.choice([" ", "", "\n"]) for _ in range(12))
                                for _ in range(200)]
    if kind == "byte_level":
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tr = trainers.BpeTrainer(vocab_size=300, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                 special_tokens=specials, show_progress=False)
    elif kind == "byte_fallback":
        tok = Tokenizer(models.BPE(byte_fallback=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        tr = trainers.BpeTrainer(vocab_size=300, limit_alphabet=30, show_progress=False,
                                 special_tokens=[f"<0x{b:02X}>" for b in range(256)] + specials)
    else:
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tr = trainers.UnigramTrainer(vocab_size=120, special_tokens=specials, show_progress=False)
    tok.train_from_iterator(corpus, trainer=tr)
    return tok


def load_bases(names=BASES) -> dict:
    """name -> (file bytes, texts, id sequences): each base template compiled and written now (so the fuzz
    follows the current compiler), with a few texts to parse; a token base (`TOKEN_BASES`) with its token
    section for a tokenizer trained now, and its texts encoded by that tokenizer plus one sequence of
    arbitrary ids (what the Python runtime also parses as token ids)."""
    from chatparse import compile_template
    from chatparse import bind
    from chatparse.compiler.writer import dumps

    out = {}
    for name in names:
        if name in TOKEN_BASES:
            tname, kind, specials, skip, tsha = TOKEN_BASES[name]
            template = _template(tname)
            texts = _texts(tname, template)
            tok = train_tokenizer(kind, specials, texts)
            binding = bind(template, tok, skip_special_tokens=skip)
            data = dumps(binding.compiled.raw_tables, tokens=binding, tokenizer_sha256=tsha)
            rng = random.Random(name)
            ids = [tok.encode(t).ids for t in texts] + [[rng.randrange(tok.get_vocab_size()) for _ in range(40)]]
            out[name] = (data, texts, ids)
            continue
        template = _template(name)
        out[name] = (dumps(compile_template(template).raw_tables), _texts(name, template), [])
    return out


def mutants(seed: int, n: int, bases: dict):
    """`n` mutants, deterministic for `seed`: ``(name, base, bytes, what)``, bases in turn."""
    rng = random.Random(seed)
    names = sorted(bases)
    for i in range(n):
        base = names[i % len(names)]
        data, what = mutate_file(rng, bases[base][0])
        yield f"m{seed}_{i:06d}", base, data, what


# ------------------------------------------------------------------------------------------- running


class _Timeout(Exception):
    pass


@contextmanager
def _bound(seconds: float):
    def handler(signum, frame):
        raise _Timeout()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


# What parsing may raise (the reference's own exceptions: bad values, missing fields, and AttributeError for
# content_args that are not an object, which the reference only notices when it parses a body).
_PARSE_ERRORS = (ValueError, KeyError, TypeError, RuntimeError, AttributeError)


def _special_floats(v):
    if type(v) is float and v != v or v in (float("inf"), float("-inf")):
        return repr(v).replace("inf", "Infinity").replace("nan", "NaN")
    if type(v) is list:
        return [_special_floats(x) for x in v]
    if type(v) is dict:
        return {k: _special_floats(x) for k, x in v.items()}
    return v


def _plain(v):
    """A JSON-comparable form of parse output (floats that are integers compare equal to JS numbers; infinities
    and NaN as the strings JS's side writes for them)."""
    return _special_floats(json.loads(json.dumps(v, default=repr, allow_nan=True)))


def python_outcome(data: bytes, texts: list, ids: list = ()) -> dict:
    """What the Python runtime makes of a file: {"refused": message} or {"loaded": [per text result]};
    {"crash": ...} for anything else (another exception class, a time-out).

    A loaded file with a token section and `ids` also gets its token parser built (which refuses, with a
    table-file error, what needs the compiled tables: FORMAT.md 8.4, last paragraph) and each id sequence fed
    to it one id at a time: ``"tokens"`` in the outcome says which (``{"refused": message}`` or ``{"parsed":
    n, "differ": k}``: k sequences whose message differs from the text parser's on the decoded ids, which a
    damaged `inert` table may cause). It must not crash or hang; `js/fuzz_tables.mjs` does the same in the
    JavaScript runtime, and `run` compares the two verdicts on building the token parser."""
    from chatparse.compiled import ResponseParser
    from chatparse.runtime.tables.loader import loads
    from chatparse.runtime.tables.template import template_class
    from chatparse.runtime.tokens import token_binding

    try:
        with _bound(TIME_BOUND):
            try:
                raw = loads(data)
                compiled = template_class()(raw["template"], raw)
            except ValueError as e:
                msg = str(e)
                if not msg.startswith(PREFIX):
                    return {"crash": f"ValueError without the table-file prefix: {msg}"}
                return {"refused": msg}
            results = []
            for text in texts:
                stage = "init"
                events = []
                try:
                    p = ResponseParser(compiled, prefix="")
                    events += p.initial_events
                    stage = "feed"
                    half = len(text) // 2
                    events += p.feed(text[:half])
                    events += p.feed(text[half:])
                    stage = "finalize"
                    message, final = p.finalize()
                    results.append({"events": _plain(events + final), "message": _plain(message)})
                except _PARSE_ERRORS as e:
                    results.append({"error": type(e).__name__, "stage": stage})
            out = {"loaded": results}
            if "tokens" in raw and ids:
                out["tokens"] = _token_outcome(token_binding, compiled, ids)
            return out
    except _Timeout:
        return {"crash": f"time-out after {TIME_BOUND} s"}
    except Exception as e:  # noqa: BLE001 - the point: any other exception is a finding
        return {"crash": f"{type(e).__name__}: {e}"[:300]}


def _message(feed, items, finalize):
    """The message of a parser fed `items` one at a time (its events are computed and dropped), or the class
    name of the parser's own exception when it raises one."""
    try:
        for x in items:
            feed(x)
        return _plain(finalize()[0])
    except _PARSE_ERRORS as e:
        return type(e).__name__


def _token_outcome(token_binding, compiled, ids: list) -> dict:
    """The token-id part of `python_outcome` (see there)."""
    from chatparse.compiled import ResponseParser

    try:
        b = token_binding(compiled)
    except ValueError as e:
        if not str(e).startswith(PREFIX):
            raise
        return {"refused": str(e)}
    differ = 0
    for seq in ids:
        seq = [i for i in seq if i < b.vocab.size]
        p = b.parser(prefix="")
        got = _message(p.feed_tokens, seq, p.finalize)
        t = ResponseParser(compiled, prefix="")
        differ += got != _message(t.feed, [b.vocab.decode(seq)], t.finalize)
    return {"parsed": len(ids), "differ": differ}


def js_outcomes(directory: Path, texts: dict, ids: dict | None = None) -> dict:
    """{mutant name: outcome} from one `node js/fuzz_tables.mjs` process over `directory` (texts per base in
    ``texts.json`` there, and id sequences per token base in ``ids.json``: the JS token parser is built and
    run on them as `python_outcome` does)."""
    (directory / "texts.json").write_text(json.dumps(texts), encoding="utf-8")
    (directory / "ids.json").write_text(json.dumps(ids or {}), encoding="utf-8")
    out = subprocess.run([NODE, str(ROOT / "js" / "fuzz_tables.mjs"), str(directory)], capture_output=True,
                         text=True, timeout=3600)
    if out.returncode != 0:
        raise RuntimeError(f"fuzz_tables.mjs failed: {out.stderr[-2000:]}")
    return json.loads(out.stdout)


def native_loader(build_dir: Path | None = None, *, sanitize: bool = False) -> Path:
    """Build `chatparse-load` (native/, CMake) into `build_dir` (default build/native, or build/native-asan with
    `sanitize`: ASan+UBSan) and return its path. Raises RuntimeError with CMake's output when it cannot."""
    build_dir = Path(build_dir or ROOT / "build" / ("native-asan" if sanitize else "native"))
    cmake = shutil.which("cmake")
    if cmake is None:
        raise RuntimeError("cmake is not installed")
    steps = ([cmake, "-S", str(ROOT / "native"), "-B", str(build_dir), f"-DCHATPARSE_SANITIZE={'ON' if sanitize else 'OFF'}"],
             [cmake, "--build", str(build_dir), "--target", "chatparse-load", "-j", "2"])
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{(out.stdout + out.stderr)[-3000:]}")
    return build_dir / "chatparse-load"


def c_outcomes(loader: Path, files: list) -> list:
    """The C loader's verdict per file, in order: {"refused": message} or {"loaded": True}, or {"crash": ...}
    for every file of a process that fails (a crash or a sanitizer report ends it). One process per 1,000 files
    (a command line's length is bounded)."""
    if len(files) > 1000:
        return [o for i in range(0, len(files), 1000) for o in c_outcomes(loader, files[i:i + 1000])]
    out = subprocess.run([str(loader), *map(str, files)], capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0",
                              "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1"})
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != len(files):
        # (every file of the process: a report at exit, such as a leak, comes after every verdict is printed)
        return [{"crash": f"chatparse-load exit {out.returncode}: {out.stderr[-1500:]}"}] * len(files)
    return [json.loads(x) for x in lines]


def python_verdict(data: bytes) -> dict:
    """The Python loader's verdict on a file, as `c_outcomes` gives C's: {"refused": message} or {"loaded": True}."""
    from chatparse.runtime.tables.loader import loads

    try:
        loads(data)
    except ValueError as e:
        return {"refused": str(e)}
    return {"loaded": True}


def _same(a, b) -> bool:
    return a == b  # (after _plain: 1 == 1.0; NaN cannot occur in these values)


def run(seed: int, n: int, workdir: Path | None = None, *, batch: int = 2500, bases: dict | None = None,
        log=None, native: Path | None = None) -> dict:
    """Fuzz `n` mutants of seed `seed` through both runtimes; returns the figures and the disagreements.

    ``token_*`` figures count the mutants of token bases: how many both runtimes refused and loaded, and of
    the loaded ones, how many token parsers Python refused to build (``token_bind_refused``) or built and ran
    (``token_ids_run``), and in how many of those the token-id message differed from the text parser's
    (``token_differ``, informative: a damaged `inert` table may misparse). ``refusals``: how often each
    refusal message was given (numbers in it replaced by N). With `native` (a chatparse-load path), ``c_refused``
    and ``c_loaded`` count the mutants the C loader decided as Python did (refused with the same message, or
    loaded); any other C verdict is a disagreement of side "c"."""
    bases = bases or load_bases()
    texts = {name: b[1] for name, b in bases.items()}
    ids = {name: b[2] for name, b in bases.items()}
    stats = {"mutants": 0, "refused": 0, "loaded": 0, "disagreements": [], "crashes": [], "py_s": 0.0, "js_s": 0.0,
             "token_mutants": 0, "token_refused": 0, "token_loaded": 0, "token_bind_refused": 0, "token_ids_run": 0,
             "token_differ": 0, "refusals": {}, "c_refused": 0, "c_loaded": 0, "c_s": 0.0}
    tmp = Path(tempfile.mkdtemp(prefix="cpt_fuzz_", dir=workdir))
    try:
        gen = mutants(seed, n, bases)
        while True:
            chunk = [m for _, m in zip(range(batch), gen)]
            if not chunk:
                break
            for f in tmp.glob("*.cpt"):
                f.unlink()
            for name, base, data, _ in chunk:
                (tmp / f"{name}.{base}.cpt").write_bytes(data)
            t0 = time.perf_counter()
            js = js_outcomes(tmp, texts, ids)
            stats["js_s"] += time.perf_counter() - t0
            c = [None] * len(chunk)
            if native is not None:
                t0 = time.perf_counter()
                c = c_outcomes(native, [tmp / f"{name}.{base}.cpt" for name, base, _, _ in chunk])
                stats["c_s"] += time.perf_counter() - t0
            t0 = time.perf_counter()
            for (name, base, data, what), co in zip(chunk, c):
                py = python_outcome(data, texts[base], ids[base])
                j = js.get(name, {"crash": "no result from node"})
                stats["mutants"] += 1
                if base in TOKEN_BASES:
                    stats["token_mutants"] += 1
                    tok = py.get("tokens", {})
                    stats["token_bind_refused"] += "refused" in tok
                    stats["token_ids_run"] += "parsed" in tok
                    stats["token_differ"] += tok.get("differ", 0) > 0
                for side, o in (("python", py), ("js", j)):
                    if "crash" in o:
                        stats["crashes"].append({"mutant": name, "base": base, "what": what, "side": side,
                                                 "crash": o["crash"]})
                if "refused" in py and "refused" in j and py["refused"] == j["refused"]:
                    stats["refused"] += 1
                    stats["token_refused"] += base in TOKEN_BASES
                    key = re.sub(r"\d+", "N", py["refused"][len(PREFIX):])
                    stats["refusals"][key] = stats["refusals"].get(key, 0) + 1
                elif "loaded" in py and "loaded" in j and _same(py["loaded"], j["loaded"]) and (
                        "refused" in py.get("tokens", {})) == ("refused" in j.get("tokens", {})) and (
                        py.get("tokens", {}).get("refused") == j.get("tokens", {}).get("refused")):
                    # (and the same verdict on building a token parser: FORMAT.md 8.4, last paragraph)
                    stats["loaded"] += 1
                    stats["token_loaded"] += base in TOKEN_BASES
                elif "crash" not in py and "crash" not in j:
                    stats["disagreements"].append({"mutant": name, "base": base, "what": what,
                                                   "python": _brief(py), "js": _brief(j)})
                if co is not None:
                    if "crash" in co:
                        stats["crashes"].append({"mutant": name, "base": base, "what": what, "side": "c",
                                                 "crash": co["crash"]})
                    elif "refused" in py and co.get("refused") == py["refused"]:
                        stats["c_refused"] += 1
                    elif "loaded" in py and co.get("loaded") is True:
                        stats["c_loaded"] += 1
                    elif "crash" not in py:
                        stats["disagreements"].append({"mutant": name, "base": base, "what": what, "side": "c",
                                                       "python": _brief(py), "c": json.dumps(co)[:300]})
            stats["py_s"] += time.perf_counter() - t0
            if log:
                log(f"{stats['mutants']} mutants: {stats['refused']} refused, {stats['loaded']} loaded, "
                    f"{len(stats['disagreements'])} disagreements, {len(stats['crashes'])} crashes"
                    + (f"; C: {stats['c_refused']} refused, {stats['c_loaded']} loaded as Python" if native else ""))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return stats


def _brief(o: dict) -> str:
    if "refused" in o:
        return o["refused"]
    return "loaded: " + json.dumps(o.get("loaded"))[:300]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--show", type=int, default=20, help="disagreements/crashes to print")
    ap.add_argument("--bases", default=",".join(BASES), help="comma-separated base names (default: all; "
                    "--bases tokens: the token bases only)")
    ap.add_argument("--no-native", action="store_true", help="leave the C runtime out (by default it is built with "
                    "CMake into build/native and judged too, when CMake and PCRE2 are installed)")
    ap.add_argument("--sanitize", action="store_true", help="the C loader built with ASan+UBSan (build/native-asan)")
    args = ap.parse_args(argv)
    names = tuple(TOKEN_BASES) if args.bases == "tokens" else tuple(args.bases.split(","))
    native = None
    if not args.no_native:
        try:
            native = native_loader(sanitize=args.sanitize)
        except RuntimeError as e:
            print(f"the C runtime is left out: {e}", flush=True)
    t0 = time.perf_counter()
    stats = run(args.seed, args.n, bases=load_bases(names), log=lambda s: print(s, flush=True), native=native)
    for d in (stats["disagreements"] + stats["crashes"])[:args.show]:
        print(json.dumps(d, ensure_ascii=False)[:700])
    refusals = stats.pop("refusals")
    print(json.dumps({k: (len(v) if type(v) is list else round(v, 1) if type(v) is float else v)
                      for k, v in stats.items()}), f"total {time.perf_counter() - t0:.0f} s")
    token_msgs = [m for m in refusals if m.startswith(("token section", "tokens", "vocabulary hash"))]
    print(f"{len(refusals)} distinct refusal messages, {len(token_msgs)} of them the token section's (FORMAT.md 8.4)")
    return 0 if not stats["disagreements"] and not stats["crashes"] else 1


if __name__ == "__main__":
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
    sys.exit(main())
