"""Write the invalid-file conformance vectors: tests/vectors/invalid/NAME.cpt + NAME.json, one per check of
FORMAT.md section 1 ("What a reader must check") and of the token section's section 8.4 (``tokens_*``, on bases
with token tables for vocabularies trained here), each a valid file with one defect and (except where the
defect is the seal itself) a recomputed layout, template hash, vocabulary hash and checksum, and ``{"kind":
"invalid", "tables": "NAME.cpt", "check": step, "error": message}`` (step: section 1's step number, or
``"8.4.k"``) - the table-file error both runtimes must give (checked by tests/test_table_fuzz.py in Python and
by `node js/run_vectors.mjs tests/vectors/invalid`).

    python tests/make_invalid_vectors.py          # (re)writes tests/vectors/invalid/
    python tests/make_invalid_vectors.py --check  # the Python loader still gives every vector's error

The expected message is what the Python loader says; writing refuses a vector the JS runtime (when node is
installed) does not refuse with the same message, so the directory only ever holds errors both give.
"""

from __future__ import annotations

import argparse
import json
import shutil
import struct
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]

import table_fuzz as tf  # noqa: E402
from chatparse.runtime.tables.loader import loads  # noqa: E402

OUT = HERE / "vectors" / "invalid"


def _file(base: str = "qwen3", *, header=None, template=None, meta=None, blob=None, raw=None, seal=True) -> bytes:
    """The base file with edits: `header(h)`, `template(spec)`, `meta(meta)`, `blob(meta, bytearray)` change
    parts in place (or return a replacement); `raw(bytearray)` edits the sealed bytes (then the trailer is
    recomputed unless `seal` is False)."""
    data = tf.load_bases((base,))[base][0]
    h, t, m, b = tf.sections(data)
    spec, md, blob_b = json.loads(t), json.loads(m), bytearray(b)
    if template:
        spec = template(spec) or spec
    if meta:
        md = meta(md) or md
    if blob:
        blob(md, blob_b)
    if header:
        header(h)
    t_bytes = spec if isinstance(spec, bytes) else tf.compact(spec)
    m_bytes = md if isinstance(md, bytes) else tf.compact(md)
    out = bytearray(tf.reseal(h, t_bytes, m_bytes, blob_b))
    if raw:
        raw(out)
        if seal:
            out = bytearray(tf.trailer(out))
    return bytes(out)


def _poke(name: str, index: int, value: int):
    """Set element `index` (flat) of array `name` to `value`."""
    import numpy as np

    def edit(md, blob):
        a = next(e for e in md["arrays"] if e["name"] == name)
        dt = np.dtype(tf._DTYPE[a["dtype"]])
        arr = np.frombuffer(bytes(blob[a["offset"]:a["offset"] + a["nbytes"]]), dtype=dt).copy()
        arr.ravel()[index] = value
        blob[a["offset"]:a["offset"] + a["nbytes"]] = arr.tobytes()
    return edit


def _set(path, value):
    def edit(obj):
        o = obj
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = value
    return edit


def _del(path):
    def edit(obj):
        o = obj
        for k in path[:-1]:
            o = o[k]
        del o[path[-1]]
    return edit


def _pad_to(spec: dict, rem: int) -> bytes:
    """The template section with a default added so that its length is `rem` modulo 8 (the base's metadata
    length then decides; with the qwen3 base this leaves padding before the data section)."""
    spec = dict(spec, defaults=dict(spec["defaults"], pad=""))
    while len(tf.compact(spec)) % 8 != rem:
        spec["defaults"]["pad"] += "x"
    return tf.compact(spec)


def _dirty_padding(buf: bytearray) -> None:
    m_off, m_len, d_off = struct.unpack_from("<QQQ", buf, 40)
    assert d_off > m_off + m_len, "no padding in this file"
    buf[m_off + m_len] = 1


def _repeat_literal(spec: dict) -> None:
    """The first literal delimiter of the template's fields, listed twice."""
    d = next(f[k] for f in spec["fields"] for k in ("open", "close") if f[k] and "literals" in f[k])
    d["literals"].append(d["literals"][0])


def _padding_vector() -> bytes:
    """The base with non-zero padding before the data section: the template section is lengthened until there
    is padding (how much depends on the metadata's length, which changes with the compiler)."""
    data = tf.load_bases(("qwen3",))["qwen3"][0]
    m_len = struct.unpack_from("<Q", data, 48)[0]
    rem = (3 - m_len) % 8  # 160 + T + M = 3 (mod 8): five bytes of padding
    return _file(template=lambda s: _pad_to(s, rem), raw=_dirty_padding)


def _u64(off, value):
    return lambda buf: struct.pack_into("<Q", buf, off, value)


# ------------------------------------------------------------------ the token section (FORMAT.md 8.4)
# Bases with token tables for vocabularies trained here (tests/table_fuzz.py TOKEN_BASES): t_qwen3 ("bytes"
# kind, whole-delimiter rows, tokens with incomplete UTF-8), t_gpt_oss ("pieces", byte tokens), t_hermes
# ("pieces", first-token texts, skipped special tokens). `_file` recomputes the vocabulary hash after an edit,
# so each vector fails at its own check, not at the hash (except the hash's own vector).


def _entry(md: dict, name: str) -> dict:
    return next(e for e in md["arrays"] if e["name"] == f"tokens.{name}")


def _tok(md: dict, blob: bytearray, name: str):
    """A copy of token array `name` (flat)."""
    import numpy as np

    e = _entry(md, name)
    return np.frombuffer(bytes(blob[e["offset"]:e["offset"] + e["nbytes"]]), dtype=tf._DTYPE[e["dtype"]]).copy()


def _put(md: dict, blob: bytearray, name: str, arr) -> None:
    e = _entry(md, name)
    blob[e["offset"]:e["offset"] + e["nbytes"]] = arr.tobytes()


def _tokens(edit):
    """A blob edit given the token arrays: `edit(md, blob, get)` with ``get(name)`` a copy of that array; it
    writes back with `_put`."""
    return lambda md, blob: edit(md, blob, lambda name: _tok(md, blob, name))


def _where(arr, pred) -> int:
    return next(i for i, x in enumerate(arr.tolist()) if pred(i, x))


def _shape(name: str, shape: list, nbytes_delta: int = 0):
    def edit(md):
        e = _entry(md, name)
        e["shape"] = shape(e["shape"])
        e["nbytes"] += nbytes_delta
    return edit


def _flag_edit(base_flags_pred, value):
    """Set the flags of the first token whose (id, flags) satisfy the predicate (and, given its length in
    bytes, `base_flags_pred(i, flags, length)`) to `value`."""
    def edit(md, blob, get):
        flags, off = get("flags"), get("offsets")
        i = _where(flags, lambda i, f: base_flags_pred(i, f, int(off[i + 1]) - int(off[i])))
        flags[i] = value
        _put(md, blob, "flags", flags)
    return _tokens(edit)


def _poke_tok(name: str, index, value):
    """Token array `name`: element `index` (an int, or a function of the arrays' getter) set to `value` (a
    value, or a function of the getter)."""
    def edit(md, blob, get):
        arr = get(name)
        i = index(get) if callable(index) else index
        arr[i] = value(get) if callable(value) else value
        _put(md, blob, name, arr)
    return _tokens(edit)


def _last_text_byte(get) -> int:
    """The position in tokens.bytes of the last byte of the last TEXT token."""
    flags, off = get("flags"), get("offsets")
    i = max(k for k in range(len(flags)) if flags[k] & 2 and off[k + 1] > off[k])
    return int(off[i + 1]) - 1


def _misalign(md, blob, get):
    """Move the boundary between two TEXT tokens one byte into a multi-byte character: the TEXT bytes, taken
    together, are still the same valid UTF-8."""
    flags, off, data = get("flags"), get("offsets"), get("bytes")
    for k in range(len(flags) - 1):
        if flags[k] & 2 and flags[k + 1] & 2 and off[k + 1] - off[k] >= 2 and data[off[k + 1] - 1] >= 0x80:
            off[k + 1] -= 1
            _put(md, blob, "offsets", off)
            return
    raise AssertionError("no token ends in a multi-byte character")


def _misalign_first(md, blob, get):
    """The same for two first-token texts (first_offsets)."""
    fo, data = get("first_offsets"), get("first_bytes")
    for k in range(len(fo) - 2):
        if fo[k + 1] - fo[k] >= 2 and fo[k + 2] > fo[k + 1] and data[fo[k + 1] - 1] >= 0x80:
            fo[k + 1] -= 1
            _put(md, blob, "first_offsets", fo)
            return
    raise AssertionError("no first-token text ends in a multi-byte character")


def _one_delim_row(md):
    e = _entry(md, "delims")
    e["shape"], e["nbytes"] = [1, 3], 12


def _partial_delim(md, blob):
    """The single delims row names a token with no text of its own (incomplete UTF-8)."""
    _one_delim_row(md)
    flags, d = _tok(md, blob, "flags"), _tok(md, blob, "delims")
    d[1] = _where(flags, lambda i, f: f == 0)
    _put(md, blob, "delims", d)


def _tk(base, *, meta=None, blob=None, raw=None):
    return lambda: _file(base, meta=meta, blob=blob, raw=raw)


# name -> (FORMAT.md section 1 step, file)
CASES = {
    "short": (1, lambda: _file(raw=lambda b: b.__delitem__(slice(100, None)), seal=False)),
    "magic": (1, lambda: _file(raw=lambda b: b.__setitem__(1, 0x44))),
    "version": (1, lambda: _file(raw=lambda b: struct.pack_into("<I", b, 8, 2))),
    "header_size": (1, lambda: _file(raw=lambda b: struct.pack_into("<I", b, 12, 128))),
    "file_size_huge": (1, lambda: _file(raw=_u64(16, 2**64 - 1))),
    "checksum": (2, lambda: _file(raw=lambda b: b.__setitem__(200, b[200] ^ 1), seal=False)),
    "flags_unknown": (3, lambda: _file(raw=lambda b: struct.pack_into("<I", b, 72, 8))),
    "flags_tokens_without_hash": (3, lambda: _file(raw=lambda b: struct.pack_into("<I", b, 72, 2))),
    "reserved": (3, lambda: _file(raw=lambda b: struct.pack_into("<I", b, 76, 1))),
    "offsets": (4, lambda: _file(raw=_u64(40, 2**63))),
    "padding": (4, _padding_vector),
    "vocab_hash_without_flag": (3, lambda: _file(raw=lambda b: b.__setitem__(120, 7))),
    "version_field": (3, lambda: _file(raw=lambda b: b.__setitem__(150, 0x7F))),
    "template_not_utf8": (5, lambda: _file(template=lambda s: tf.compact(s)[:-2] + b"\xff}")),
    "template_too_deep": (5, lambda: _file(template=lambda s: s.__setitem__("defaults", json.loads("[" * 101 + "]" * 101)))),
    "template_not_json": (5, lambda: _file(template=lambda s: tf.compact(s) + b",")),
    "template_lone_surrogate": (5, lambda: _file(template=lambda s: tf.compact(s).replace(b'"assistant"', b'"\\ud800"', 1))),
    "template_not_compact": (5, lambda: _file(template=lambda s: json.dumps(s).encode())),
    "template_hash": (5, lambda: _file(raw=lambda b: b.__setitem__(90, b[90] ^ 1))),
    "template_keys": (6, lambda: _file(template=_del(["implicit"]))),
    "template_version_float": (6, lambda: _file(template=_set(["version"], 1.0))),
    "template_join_without_repeats": (6, lambda: _file(template=_set(["fields", 0, "join"], ","))),
    "template_transform_mixed": (6, lambda: _file(template=_set(["fields", 0, "transform"], {"a": "x{content}"}))),
    "template_repeated_literal": (6, lambda: _file("gpt_oss", template=_repeat_literal)),
    "template_implicit": (6, lambda: _file(template=_set(["implicit"], "reasoning_content"))),
    "template_unknown_extension": (6, lambda: _file(template=lambda s: {"version": 2, "extensions": ["nope"], **{
        k: v for k, v in s.items() if k != "version"}})),
    "meta_keys": (7, lambda: _file(meta=_set(["extra"], 1))),
    "meta_n_classes_float": (7, lambda: _file(meta=lambda m: m.__setitem__("n_classes", float(m["n_classes"])))),
    "array_dtype": (7, lambda: _file(meta=_set(["arrays", 0, "dtype"], "f8"))),
    "array_outside": (7, lambda: _file(meta=lambda m: m["arrays"][-1].__setitem__("offset", m["arrays"][-1]["offset"] + 8))),
    "array_overlap": (7, lambda: _file(meta=lambda m: m["arrays"][1].__setitem__("offset", m["arrays"][0]["offset"]))),
    "pattern_source": (7, lambda: _file(meta=_set(["patterns", 0, "source"], "x"))),
    "pattern_history": (7, lambda: _file(meta=_set(["patterns", 0, "history"], 0))),
    "pattern_literal_not_exact": (7, lambda: _file("gpt_oss", meta=_set(["patterns", 0, "exact"], False))),
    "pattern_named_groups": (7, lambda: _file(meta=_set(["patterns", 0, "named_groups"], True))),
    "class_map_order": (8, lambda: _file(blob=_poke("class_starts", 1, 0))),
    "class_id": (8, lambda: _file(blob=_poke("class_ids", 0, 250))),
    "mode_watch": (8, lambda: _file(meta=_set(["modes", 0, "patterns"], [0]))),
    "mode_state_range": (8, lambda: _file(blob=_poke("mode0.trans", 5, 250))),
    "mode_eot_range": (8, lambda: _file(blob=_poke("mode0.eot", 1, 250))),
    "mode_accept_code": (8, lambda: _file(blob=_poke("mode0.acc", 3, 2))),
    "mode_terminal_flag": (8, lambda: _file(blob=_poke("mode0.term", 1, 2))),
    "mode_dead_state": (8, lambda: _file(blob=_poke("mode0.trans", 0, 1))),
    "mode_start": (8, lambda: _file(meta=_set(["modes", 0, "startN"], 10**6))),
    "mode_first": (8, lambda: _file(meta=_set(["modes", 0, "first"], None))),
    "unknown_array": (8, lambda: _file(meta=lambda m: m["arrays"].append({"name": "extra", "dtype": "u1", "shape": [0], "offset": 0, "nbytes": 0}))),
    "js_keys": (8, lambda: _file(meta=_del(["js", "word"]))),
    "js_translation_pattern": (8, lambda: _file(meta=_set(["js", "patterns", 0, "pattern"], "x"))),
    "js_word": (8, lambda: _file(meta=_set(["js", "word"], "[a-"))),
    # FORMAT.md 8.4, the token section: "8.4.k" is its check k
    "tokens_not_object": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens"], []))),
    "tokens_keys": ("8.4.1", _tk("t_qwen3", meta=_del(["tokens", "name"]))),
    "tokens_size": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "size"], 0))),
    "tokens_kind": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "kind"], "words"))),
    "tokens_strip_char": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "strip_char"], "\u2581 "))),
    "tokens_tokenizer_sha256": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "tokenizer_sha256"], "AB" * 32))),
    "tokens_strip_start": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "strip_start"], -1))),
    "tokens_cleanup": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "cleanup"], 0))),
    "tokens_name": ("8.4.1", _tk("t_qwen3", meta=_set(["tokens", "name"], None))),
    "tokens_array_missing": ("8.4.1", _tk("t_qwen3", meta=lambda m: m["arrays"].remove(_entry(m, "delims")))),
    "tokens_array_dtype": ("8.4.1", _tk("t_qwen3", meta=lambda m: _entry(m, "flags").__setitem__("dtype", "i1"))),
    "tokens_array_rank": ("8.4.1", _tk("t_qwen3", meta=_shape("bytes", lambda s: [1] + s))),
    "tokens_offsets_shape": ("8.4.2", _tk("t_qwen3", meta=_shape("offsets", lambda s: [s[0] - 1], -4))),
    "tokens_offsets_start": ("8.4.2", _tk("t_qwen3", blob=_poke_tok("offsets", 0, 1))),
    "tokens_offsets_decreasing": ("8.4.2", _tk("t_qwen3", blob=_poke_tok("offsets", 2, lambda g: g("offsets")[1] - 1))),
    "tokens_first_offsets_end": ("8.4.4", _tk("t_hermes", blob=_poke_tok(
        "first_offsets", lambda g: len(g("first_offsets")) - 1, lambda g: g("first_offsets")[-1] + 1))),
    "tokens_flags_shape": ("8.4.3", _tk("t_qwen3", meta=_shape("flags", lambda s: [s[0] - 1], -1))),
    "tokens_flags_unknown": ("8.4.3", _tk("t_qwen3", blob=_poke_tok("flags", 0, 8))),
    "tokens_flags_skip_text": ("8.4.3", _tk("t_qwen3", blob=_poke_tok("flags", 0, 3))),
    "tokens_flags_byte_with_text": ("8.4.3", _tk("t_gpt_oss", blob=_flag_edit(lambda i, f, n: f == 4, 6))),
    "tokens_flags_byte_length": ("8.4.3", _tk("t_gpt_oss", blob=_flag_edit(lambda i, f, n: f == 2 and n > 1, 4))),
    "tokens_flags_byte_in_bytes_kind": ("8.4.3", _tk("t_qwen3", blob=_flag_edit(lambda i, f, n: f == 2 and n == 1, 4))),
    "tokens_flags_piece_neither": ("8.4.3", _tk("t_gpt_oss", blob=_flag_edit(lambda i, f, n: f == 2, 0))),
    "tokens_text_invalid_start": ("8.4.6", _tk("t_qwen3", blob=_poke_tok("bytes", 0, 0xFF))),
    "tokens_text_invalid_continuation": ("8.4.6", _tk("t_qwen3", blob=_poke_tok("bytes", 0, 0xC3))),
    "tokens_text_end_of_data": ("8.4.6", _tk("t_qwen3", blob=_poke_tok("bytes", _last_text_byte, 0xE2))),
    "tokens_text_boundary": ("8.4.6", _tk("t_qwen3", blob=_tokens(_misalign))),
    "tokens_first_text_utf8": ("8.4.6", _tk("t_hermes", blob=_poke_tok("first_bytes", 0, 0xFF))),
    "tokens_first_text_boundary": ("8.4.6", _tk("t_hermes", blob=_tokens(_misalign_first))),
    "tokens_first_ids_kind": ("8.4.4", _tk("t_hermes", meta=_set(["tokens", "kind"], "bytes"))),
    "tokens_first_ids_order": ("8.4.4", _tk("t_hermes", blob=_poke_tok("first_ids", 1, lambda g: g("first_ids")[0]))),
    "tokens_first_ids_range": ("8.4.4", _tk("t_hermes", blob=_poke_tok(
        "first_ids", lambda g: len(g("first_ids")) - 1, 10**6))),
    "tokens_first_ids_skipped": ("8.4.4", _tk("t_hermes", blob=_poke_tok("flags", lambda g: g("first_ids")[0], 1))),
    "tokens_inert_shape": ("8.4.5", _tk("t_qwen3", meta=_shape("inert", lambda s: s[::-1]))),
    "tokens_inert_value": ("8.4.5", _tk("t_qwen3", blob=_poke_tok("inert", 0, 2))),
    "tokens_inert_without_text": ("8.4.5", _tk("t_qwen3", blob=_poke_tok(
        "inert", lambda g: _where(g("flags"), lambda i, f: f == 0), 1))),
    "tokens_delims_shape": ("8.4.7", _tk("t_qwen3", meta=_shape("delims", lambda s: s[::-1]))),
    "tokens_delims_range": ("8.4.7", _tk("t_qwen3", blob=_poke_tok("delims", 0, 99))),
    "tokens_delims_order": ("8.4.7", _tk("t_gpt_oss", blob=_poke_tok("delims", 3, 3))),
    "tokens_delims_pattern": ("8.4.7", _tk("t_qwen3", blob=_poke_tok("delims", 2, 99))),
    "tokens_delims_text": ("8.4.7", _tk("t_qwen3", meta=_one_delim_row, blob=_partial_delim)),
    "tokens_delims_inert": ("8.4.7", _tk("t_qwen3", blob=_poke_tok(
        "inert", lambda g: int(g("delims")[0]) * len(g("flags")) + int(g("delims")[1]), 1))),
    "tokens_vocab_hash": ("8.4.8", _tk("t_qwen3", raw=lambda b: b.__setitem__(120, b[120] ^ 1))),
}


def _python_error(data: bytes) -> str:
    try:
        loads(data)
    except ValueError as e:
        return str(e)
    return "loaded"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    if args.check:
        bad = [p.stem for p in sorted(OUT.glob("*.cpt"))
               if _python_error(p.read_bytes()) != json.loads(p.with_suffix(".json").read_text())["error"]]
        print(f"{len(list(OUT.glob('*.cpt'))) - len(bad)} invalid vectors give their error; differ: {bad}")
        return 1 if bad else 0
    made = {}
    for name, (step, make) in CASES.items():  # (all made before the directory is replaced)
        data = make()
        error = _python_error(data)
        if not error.startswith("chatparse table file: "):
            raise SystemExit(f"{name}: not refused ({error})")
        made[name] = (step, data, error)
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for name, (step, data, error) in made.items():
        (OUT / f"{name}.cpt").write_bytes(data)
        vec = {"kind": "invalid", "tables": f"{name}.cpt", "check": step, "error": error}
        (OUT / f"{name}.json").write_text(json.dumps(vec, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    node = shutil.which("node")
    if node:
        out = subprocess.run([node, str(HERE.parent / "js" / "run_vectors.mjs"), str(OUT)], capture_output=True,
                             text=True)
        if out.returncode:
            raise SystemExit(f"the JS runtime disagrees:\n{out.stdout[-4000:]}")
    print(f"wrote {len(CASES)} invalid vectors to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
