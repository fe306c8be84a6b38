"""Write the invalid-file conformance vectors: tests/vectors/invalid/NAME.cpt + NAME.json, one per check of
FORMAT.md section 1 ("What a reader must check"), each a valid file with one defect and (except where the
defect is the seal itself) a recomputed layout, template hash and checksum, and ``{"kind": "invalid",
"tables": "NAME.cpt", "check": step, "error": message}`` - the table-file error both runtimes must give
(checked by tests/test_table_fuzz.py in Python and by `node js/run_vectors.mjs tests/vectors/invalid`).

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
from chatparse.runtime.loader import loads  # noqa: E402

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


def _u64(off, value):
    return lambda buf: struct.pack_into("<Q", buf, off, value)


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
    "padding": (4, lambda: _file(template=lambda s: _pad_to(s, 3), raw=_dirty_padding)),
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
    "template_repeated_literal": (6, lambda: _file(template=lambda s: s["fields"][0]["open"]["literals"].append(
        s["fields"][0]["open"]["literals"][0]))),
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
    "pattern_literal_not_exact": (7, lambda: _file(meta=_set(["patterns", 0, "exact"], False))),
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
    if OUT.exists():
        shutil.rmtree(OUT)
    OUT.mkdir(parents=True)
    for name, (step, make) in CASES.items():
        data = make()
        error = _python_error(data)
        if not error.startswith("chatparse table file: "):
            raise SystemExit(f"{name}: not refused ({error})")
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
