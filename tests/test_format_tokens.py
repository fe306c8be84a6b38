"""Token tables in the table file (FORMAT.md section 8): the token section round trips, is refused when damaged,
and gives a TokenParser without the compiler, the tokenizer or a re-derived vocabulary.

* save -> load -> `TokenParser` gives exactly the events, messages and spans of a parser from `bind()`, on
  byte-level BPE and SentencePiece-style (byte_fallback; Metaspace) tokenizers trained here with `tokenizers`,
  with and without the delimiters as special tokens, and on Mistral's tekken (131k tokens, from the
  mistral-common wheel) when available; the loaded vocabulary and per-mode tables equal the bound ones;
* bit flips, truncation, a catalogue of hostile edits (resealed: valid checksum and vocabulary hash, so the
  structural checks themselves are exercised) and random resealed mutations are refused with ValueError, or
  load into tables that parse without crashing;
* the vocabulary hash: checked against a tokenizer when one is given, refused when it differs;
* tokenizer directories with a tokenizer.json: `compile_dir` writes the token section, `load_dir` uses it
  without compiling anything, rebuilds (with a warning) when the tokenizer changed, `check_dir` verifies it;
* a process that imports neither chatparse.compiler nor tokenizers/transformers parses token ids from a file;
* the JavaScript runtime skips the token section;
* load times for 131k (tekken) and 150k (synthetic) token tables are measured and printed (not asserted).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import pickle
import random
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from deps import need, needs_program

tokenizers = need("tokenizers")

import chatparse  # noqa: E402
import chatparse.tokenizer_dir as td  # noqa: E402
from chatparse import CompiledTemplate, templates  # noqa: E402
from chatparse import bind  # noqa: E402
from chatparse.compiler.tokens import TokenVocab, vocab_for  # noqa: E402
from chatparse.compiler.writer import dumps, save, vocab_hash  # noqa: E402
from chatparse.runtime.tables.loader import load, loads, vocab_digest  # noqa: E402
from chatparse.runtime.tokens import TokenParser, binding_from_data, token_binding  # noqa: E402
from token_support import (CASES, metaspace_tokenizer, mutate, split_into_bytes, tekken_tokenizer,  # noqa: E402
                           trained_tokenizers)

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
HEADER = struct.Struct("<8sII7Q2I32s32s16s")
HEADER_SIZE = 160


# ------------------------------------------------------------------------------------------------ tokenizers
@pytest.fixture(scope="module")
def toks():
    # Metaspace exercises the first-token texts of the table format's section
    return {**trained_tokenizers(), "metaspace": metaspace_tokenizer(300)}


from bench.bench_load import synthetic_vocab  # noqa: E402  (one generator for the benchmark and the tests)


# ------------------------------------------------------------------------------------------------ helpers
def round_trip(binding, tmp_path: Path, name: str = "t.cpt", **kw):
    """Save a binding's template + token tables, load the file (memory-mapped), return (file bytes,
    loaded CompiledTemplate, loaded binding)."""
    path = tmp_path / name
    save(binding.compiled, path, tokens=binding, **kw)
    data = path.read_bytes()
    raw = load(path)
    assert dumps(raw) == data  # re-serializing what was read gives the same bytes
    ct = CompiledTemplate(raw["template"], raw)
    return data, ct, token_binding(ct)


def assert_same_tables(a, b):
    """The loaded vocabulary and per-mode tables equal the bound ones (everything runtime/tokens/__init__.py reads)."""
    va, vb = a.vocab, b.vocab
    for k in ("kind", "size", "strip_char", "strip_start", "cleanup", "tok_bytes", "tok_text", "byte_val_list",
              "first_text", "has_bytes_tokens", "n_partial"):
        assert getattr(va, k) == getattr(vb, k), k
    assert np.array_equal(va.skip, vb.skip) and np.array_equal(va.byte_val, vb.byte_val)
    ta, tb = a.tables, b.tables
    assert np.array_equal(ta.flat, tb.flat)
    assert list(ta.fast) == list(tb.fast)
    assert ta.never == tb.never and ta.mode_field == tb.mode_field and ta.field_names == tb.field_names
    assert ta.exact_modes == tb.exact_modes and ta.none_row == tb.none_row
    assert [{i: (pi, None if c is None else c.groupdict()) for i, (pi, c) in d.items()} for d in ta.delims] == \
        [{i: (pi, None if c is None else c.groupdict()) for i, (pi, c) in d.items()} for d in tb.delims]


def run(binding, prefix, ids, tools=None, spans=False, chunk=None):
    """Per-feed events, final message and events (or the exception type), and spans."""
    try:
        p = TokenParser(binding, prefix=prefix, tools=tools, spans=spans)
        out = [p.initial_events]
        k = 0
        while k < len(ids):
            n = 1 if chunk is None else chunk[k % len(chunk)]
            out.append(p.feed_tokens(ids[k:k + n] if n > 1 else ids[k]))
            k += n
        out.append(p.finalize())
        if spans:
            out.append(p.spans)
        return ("ok", out)
    except (ValueError, KeyError, TypeError) as e:
        return ("error", type(e).__name__, str(e))


def assert_same_events(a, b, prefix, ids, tools=None, rng=None):
    assert run(a, prefix, ids, tools) == run(b, prefix, ids, tools)
    if rng is not None and rng.random() < 0.3:
        assert run(a, prefix, ids, tools, spans=True) == run(b, prefix, ids, tools, spans=True)
    if rng is not None and rng.random() < 0.3:
        chunk = [rng.choice([1, 2, 3, 5, 8]) for _ in range(7)]
        assert run(a, prefix, ids, tools, chunk=chunk) == run(b, prefix, ids, tools, chunk=chunk)


def median_ms(fn, repeat: int = 9) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return sorted(times)[len(times) // 2] * 1000


def load_times(path: Path) -> dict:
    """`load` (validate, memory-map: the arrays are views) and `ready` (+ CompiledTemplate + TokenBinding:
    every Python list a TokenParser indexes), and `first parser` (+ a TokenParser and its first token)."""
    def ready():
        raw = load(path)
        return token_binding(CompiledTemplate(raw["template"], raw))

    def first():
        TokenParser(ready(), prefix="").feed_tokens(0)

    return {"load": median_ms(lambda: load(path)), "ready": median_ms(ready), "first parser": median_ms(first)}


def print_times(label: str, size: int, nbytes: int, times: dict) -> None:
    cells = ", ".join(f"{k} {v:.1f} ms" for k, v in times.items())
    print(f"\n[load time] {label}: {size} tokens, {nbytes / 1e6:.2f} MB file: {cells}")


# ================================================================================================== round trip
@pytest.mark.parametrize("tokname", ["bl-special", "bl-plain", "sp-special", "sp-plain", "metaspace"])
def test_round_trip_identical_events(toks, tokname, tmp_path):
    """Every template of the corpus cases: loaded token tables equal the bound ones and give identical
    events for encoded ids, ids with characters split over byte tokens, and ids with random tokens."""
    tok = toks[tokname]
    rng = random.Random(tokname)
    loaded: dict = {}
    for name, template, prefix, output, tools, cid in CASES:
        b = bind(template, tok)
        # (a family's cases may come with its bundled template and with the corpus's, where they differ)
        key = json.dumps(template)
        if key not in loaded:
            data, ct, lb = round_trip(b, tmp_path, f"{name}-{len(loaded)}.cpt")
            assert_same_tables(b, lb)
            raw = loads(data)
            assert raw["header"]["vocab_sha256"] == vocab_hash(tok)
            assert set(raw["tokens"]) >= {"meta", "offsets", "bytes", "flags", "inert", "delims"}
            loaded[key] = lb
        lb = loaded[key]
        ids = tok.encode(output).ids
        if tokname == "metaspace":
            variants = [ids, mutate(tok, ids, rng)]
        else:
            variants = [ids, split_into_bytes(tok, ids, rng), mutate(tok, ids, rng)]
        for v in variants:
            assert_same_events(b, lb, prefix, v, tools, rng)
        assert lb.parse(ids, prefix=prefix, tools=tools) == b.parse(ids, prefix=prefix, tools=tools)
    # random token soup, and many streams at once
    size = tok.get_vocab_size()
    for name in ("qwen3", "gpt_oss", "kimi_k2"):
        b = bind(templates.get(name), tok)
        if name not in loaded:  # (no corpus case of it: the shared corpus is not beside the tests)
            loaded[name] = round_trip(b, tmp_path, f"{name}.cpt")[2]
        lb = loaded[name]
        for _ in range(5):
            ids = [rng.randrange(size) for _ in range(rng.randint(1, 60))]
            assert_same_events(b, lb, "", ids, rng=rng)
        batch = np.array([[rng.randrange(size) for _ in range(40)] for _ in range(4)])
        sa, sb = b.streams(4, prefix=""), lb.streams(4, prefix="")
        for col in batch.T:
            assert stream_events(sa.step(col)) == stream_events(sb.step(col))
        assert [stream_final(sa, k) for k in range(4)] == [stream_final(sb, k) for k in range(4)]


def stream_events(step) -> list:
    out = []
    for k in range(len(step)):
        try:
            out.append(step[k])
        except (ValueError, KeyError, TypeError) as e:
            out.append(type(e).__name__)
    return out


def stream_final(streams, k):
    try:
        return streams.finalize(k)
    except (ValueError, KeyError, TypeError) as e:
        return type(e).__name__


def test_skip_special_tokens_binding_round_trips(toks, tmp_path):
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok, skip_special_tokens=True)
    data, ct, lb = round_trip(b, tmp_path)
    assert_same_tables(b, lb)
    assert loads(data)["header"]["vocab_sha256"] == vocab_hash(tok, skip_special_tokens=True) != vocab_hash(tok)
    for name, template, prefix, output, tools, cid in CASES:
        if name == "qwen3":
            assert_same_events(b, lb, prefix, tok.encode(output).ids, tools)


def test_vocab_hash_checked(toks, tmp_path):
    tok, other = toks["bl-special"], toks["sp-special"]
    b = bind(templates.get("qwen3"), tok)
    data = dumps(b.compiled.raw_tables, tokens=b)
    h = vocab_hash(tok)
    assert vocab_hash(tok) == vocab_hash(vocab_for(tok))  # a tokenizer or its vocab
    # the same vocabulary gives the same hash whatever the template
    assert loads(dumps(bind(templates.get("gpt_oss"), tok).compiled.raw_tables,
                       tokens=bind(templates.get("gpt_oss"), tok)))["header"]["vocab_sha256"] == h
    assert loads(data, vocab_hash=h)["tokens"]
    assert loads(data, vocab_hash=bytes.fromhex(h))["tokens"]
    with pytest.raises(ValueError, match="vocabulary hash mismatch"):
        loads(data, vocab_hash=vocab_hash(other))
    with pytest.raises(ValueError, match="no vocabulary hash"):
        loads(dumps(b.compiled.raw_tables, tokens=False), vocab_hash=h)
    with pytest.raises(ValueError):
        loads(data, vocab_hash="abc")
    with pytest.raises(ValueError, match="vocab_hash differs"):
        dumps(b.compiled.raw_tables, tokens=b, vocab_hash=vocab_hash(other))
    with pytest.raises(ValueError, match="different response template"):
        dumps(bind(templates.get("hermes"), tok).compiled.raw_tables, tokens=b)
    path = tmp_path / "t.cpt"
    path.write_bytes(data)
    assert load(path, vocab_hash=h)["header"]["vocab_sha256"] == h
    with pytest.raises(ValueError, match="t.cpt"):
        load(path, vocab_hash=vocab_hash(other))


def test_without_token_section_and_pickles(toks, tmp_path):
    """Files without a token section are as before; a template loaded with one pickles without it."""
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    with_tokens = dumps(b.compiled.raw_tables, tokens=b)
    plain = dumps(b.compiled.raw_tables)
    assert len(plain) < len(with_tokens)
    assert "tokens" not in loads(plain) and loads(plain)["header"]["vocab_sha256"] is None
    assert dumps(loads(with_tokens), tokens=False) == dumps(b.compiled.raw_tables,
                                                            vocab_hash=vocab_hash(tok))
    raw = loads(with_tokens)
    ct = CompiledTemplate(raw["template"], raw)
    with pytest.raises(TypeError):
        TokenParser(CompiledTemplate(raw["template"], loads(plain)), prefix="")
    with pytest.raises(ValueError, match="no token tables"):
        token_binding(CompiledTemplate(raw["template"], loads(plain)))
    blob = pickle.dumps(ct)
    assert len(blob) < 64_000
    back = pickle.loads(blob)
    assert "tokens" not in back.raw_tables
    text = "<think>a</think>b<|im_end|>"
    assert back.parse(text, prefix="") == ct.parse(text, prefix="")
    # a CompiledTemplate is accepted by TokenParser when it carries token tables
    ids = tok.encode(text).ids
    assert run(ct, "", ids) == run(b, "", ids)


# ================================================================================================== damage
def _sections(data: bytes):
    h = list(HEADER.unpack_from(data, 0))
    t_off, t_len, m_off, m_len, d_off, d_len = h[4:10]
    return h, data[t_off:t_off + t_len], json.loads(data[m_off:m_off + m_len]), bytearray(data[d_off:d_off + d_len])


def _token_arrays(meta, blob):
    out = {}
    for a in meta["arrays"]:
        if a["name"].startswith("tokens."):
            dt = np.dtype("<" + a["dtype"])
            count = int(np.prod(a["shape"]))
            out[a["name"][7:]] = np.frombuffer(bytes(blob), dtype=dt, count=count, offset=a["offset"]).reshape(
                a["shape"])
    return out


def _reseal(h, template: bytes, meta, blob: bytes, *, vocab=True) -> bytes:
    """A file from parts with a valid layout and SHA-256 trailer and (unless `vocab` is False) a vocabulary
    hash recomputed over the edited section, so that only the structural checks can object."""
    meta_b = meta if isinstance(meta, bytes) else json.dumps(meta, ensure_ascii=False,
                                                              separators=(",", ":")).encode()
    h = list(h)
    if vocab and isinstance(meta, dict) and isinstance(meta.get("tokens"), dict):
        try:
            h[13] = vocab_digest(meta["tokens"], _token_arrays(meta, blob))
        except (KeyError, ValueError, TypeError):
            pass
    t_off = HEADER_SIZE
    m_off = t_off + len(template)
    d_off = (m_off + len(meta_b) + 7) & ~7
    h[3:10] = [d_off + len(blob) + 32, t_off, len(template), m_off, len(meta_b), d_off, len(blob)]
    buf = bytearray(h[3])
    HEADER.pack_into(buf, 0, *h)
    buf[t_off:m_off] = template
    buf[m_off:m_off + len(meta_b)] = meta_b
    buf[d_off:d_off + len(blob)] = blob
    buf[-32:] = hashlib.sha256(bytes(buf[:-32])).digest()
    return bytes(buf)


def _edit(data: bytes, meta_fn=None, blob_fn=None, header_fn=None, vocab=True) -> bytes:
    h, template, meta, blob = _sections(data)
    meta = copy.deepcopy(meta)
    if meta_fn:
        meta = meta_fn(meta) or meta
    if blob_fn:
        blob = blob_fn(blob, meta) or blob
    if header_fn:
        header_fn(h)
    return _reseal(h, template, meta, bytes(blob), vocab=vocab)


def _arr(meta, name):
    return next(a for a in meta["arrays"] if a["name"] == name)


def _poke(name, value, index=0):
    def fn(blob, meta):
        a = _arr(meta, f"tokens.{name}")
        fmt = "<" + {"u1": "B", "u4": "I"}[a["dtype"]]
        if index < 0:
            idx = int(np.prod(a["shape"])) + index
        else:
            idx = index
        struct.pack_into(fmt, blob, a["offset"] + idx * struct.calcsize(fmt), value(blob, meta) if callable(value)
                         else value)
    return fn


def _first_where(name, pred):
    """Index of the first entry of array `name` satisfying pred(array) (a boolean mask)."""
    def idx(blob, meta):
        return int(np.flatnonzero(pred(_token_arrays(meta, blob), meta))[0])
    return idx


def _poke_at(name, index_fn, value):
    def fn(blob, meta):
        i = index_fn(blob, meta)
        _poke(name, value, i)(blob, meta)
    return fn


def _text_start(blob, meta):
    arrs = _token_arrays(meta, blob)
    off = arrs["offsets"].astype(np.int64)
    ok = ((arrs["flags"] & 2) != 0) & (np.diff(off) > 0) & (arrs["bytes"][np.minimum(off[:-1], len(arrs["bytes"]) - 1)]
                                                            != 0x7A)
    return int(off[np.flatnonzero(ok)[0]])


def _text_token_byte(arrs, meta):
    """Offset (into tokens.bytes) of the first byte of the first non-empty text token."""
    off = arrs["offsets"].astype(np.int64)
    ok = ((arrs["flags"] & 2) != 0) & (np.diff(off) > 0)
    return np.zeros(len(arrs["bytes"]), bool) | (np.arange(len(arrs["bytes"])) == off[np.flatnonzero(ok)[0]])


HOSTILE_BL = {
    # header
    "tokens flag without vocab flag": dict(header_fn=lambda h: (h.__setitem__(10, 2), h.__setitem__(13, b"\0" * 32))),
    "tokens flag cleared": dict(header_fn=lambda h: h.__setitem__(10, 1)),
    "unknown flag 4": dict(header_fn=lambda h: h.__setitem__(10, 7)),
    "stale vocab hash": dict(blob_fn=_poke_at("bytes", lambda b, m: _text_start(b, m), 0x7A), vocab=False),
    # metadata
    "tokens not object": dict(meta_fn=lambda m: m.update(tokens=[1])),
    "tokens missing": dict(meta_fn=lambda m: m.pop("tokens")),
    "size +1": dict(meta_fn=lambda m: m["tokens"].update(size=m["tokens"]["size"] + 1)),
    "size 0": dict(meta_fn=lambda m: m["tokens"].update(size=0)),
    "size str": dict(meta_fn=lambda m: m["tokens"].update(size="9")),
    "size huge": dict(meta_fn=lambda m: m["tokens"].update(size=2**40)),
    "kind": dict(meta_fn=lambda m: m["tokens"].update(kind="words")),
    "kind pieces": dict(meta_fn=lambda m: m["tokens"].update(kind="pieces")),
    "strip_char empty": dict(meta_fn=lambda m: m["tokens"].update(strip_char="")),
    "strip_char long": dict(meta_fn=lambda m: m["tokens"].update(strip_char="ab")),
    "strip_start negative": dict(meta_fn=lambda m: m["tokens"].update(strip_start=-1)),
    "cleanup int": dict(meta_fn=lambda m: m["tokens"].update(cleanup=1)),
    "name int": dict(meta_fn=lambda m: m["tokens"].update(name=5)),
    "tokenizer sha": dict(meta_fn=lambda m: m["tokens"].update(tokenizer_sha256="XYZ")),
    "tokens extra key": dict(meta_fn=lambda m: m["tokens"].update(more=1)),
    "tokens missing key": dict(meta_fn=lambda m: m["tokens"].pop("kind")),
    # array directory
    "missing inert": dict(meta_fn=lambda m: m.update(arrays=[a for a in m["arrays"] if a["name"] != "tokens.inert"])),
    "unknown token array": dict(meta_fn=lambda m: m["arrays"].append({**_arr(m, "tokens.flags"), "name": "tokens.x"})),
    "offsets dtype": dict(meta_fn=lambda m: _arr(m, "tokens.offsets").update(
        dtype="u2", shape=[_arr(m, "tokens.offsets")["shape"][0] * 2])),
    "flags shape": dict(meta_fn=lambda m: _arr(m, "tokens.flags").update(
        shape=[_arr(m, "tokens.flags")["shape"][0] - 1], nbytes=_arr(m, "tokens.flags")["nbytes"] - 1)),
    "inert 1-d": dict(meta_fn=lambda m: _arr(m, "tokens.inert").update(shape=[_arr(m, "tokens.inert")["nbytes"]])),
    "delims 1-d": dict(meta_fn=lambda m: _arr(m, "tokens.delims").update(
        shape=[_arr(m, "tokens.delims")["shape"][0] * 3])),
    "overlapping token arrays": dict(meta_fn=lambda m: _arr(m, "tokens.flags").update(
        offset=_arr(m, "tokens.offsets")["offset"])),
    # values
    "offsets origin": dict(blob_fn=_poke("offsets", 1, 0)),
    "offsets end": dict(blob_fn=_poke("offsets", 1, -1)),
    "offsets decrease": dict(blob_fn=_poke("offsets", 0, 300)),
    "offsets huge": dict(blob_fn=_poke("offsets", 2**32 - 1, 5)),
    "unknown token flag": dict(blob_fn=_poke("flags", 8 | 2, 65)),
    "skipped text": dict(blob_fn=_poke("flags", 3, 65)),
    "byte flag in bytes kind": dict(blob_fn=_poke("flags", 4, 65)),
    "text not utf8": dict(blob_fn=_poke_at("bytes", _first_where("bytes", _text_token_byte), 0xFF)),
    "text starts mid-char": dict(blob_fn=_poke_at("bytes", _first_where("bytes", _text_token_byte), 0x80)),
    "partial token marked text": dict(blob_fn=_poke_at(
        "flags", _first_where("flags", lambda a, m: (a["flags"] == 0) & (np.diff(a["offsets"].astype(int)) > 0)), 2)),
    "inert 2": dict(blob_fn=_poke_at("inert", _first_where("inert", lambda a, m: a["inert"].ravel() == 1), 2)),
    "inert partial token": dict(blob_fn=_poke_at("inert", _first_where(
        "inert", lambda a, m: np.tile((a["flags"] & 2) == 0, len(a["inert"]))), 1)),
    "delim mode": dict(blob_fn=_poke("delims", 99, 0)),
    "delim token": dict(blob_fn=_poke("delims", 2**31, 1)),
    "delim pattern not watched": dict(blob_fn=_poke("delims", 99, 2)),
    "delims unsorted": dict(blob_fn=lambda blob, meta: _swap_delims(blob, meta)),
    "delim inert": dict(blob_fn=lambda blob, meta: _inert_delim(blob, meta)),
}


def _swap_delims(blob, meta):
    a = _arr(meta, "tokens.delims")
    rows = np.frombuffer(bytes(blob), "<u4", count=int(np.prod(a["shape"])), offset=a["offset"]).reshape(-1, 3)
    assert len(rows) >= 2
    blob[a["offset"]:a["offset"] + a["nbytes"]] = rows[::-1].astype("<u4").tobytes()


def _inert_delim(blob, meta):
    a = _arr(meta, "tokens.delims")
    m, i, _ = np.frombuffer(bytes(blob), "<u4", count=3, offset=a["offset"]).tolist()
    inert = _arr(meta, "tokens.inert")
    blob[inert["offset"] + m * inert["shape"][1] + i] = 1


def _refused(data: bytes, *, binding: bool = False) -> str:
    try:
        raw = loads(data)
        if not binding:
            raise AssertionError("damaged file was accepted")
        binding_from_data(CompiledTemplate(raw["template"], raw), raw["tokens"])
    except ValueError as e:
        assert str(e).startswith("chatparse table file:"), e
        return str(e)
    raise AssertionError("damaged token section was accepted")


@pytest.fixture(scope="module")
def bl_file(toks):
    b = bind(templates.get("qwen3"), toks["bl-special"])
    data = dumps(b.compiled.raw_tables, tokens=b)
    raw = loads(data)
    assert len(raw["tokens"]["delims"]) >= 2 and (raw["tokens"]["flags"] == 0).any()
    return data


@pytest.mark.parametrize("case", sorted(HOSTILE_BL))
def test_hostile_token_edits_refused(bl_file, case):
    msg = _refused(_edit(bl_file, **HOSTILE_BL[case]))
    if case == "stale vocab hash":
        assert "vocabulary hash does not match" in msg


def test_hostile_controls_load(bl_file):
    """The resealing itself is sound: an edit that changes nothing loads."""
    assert loads(_edit(bl_file))["tokens"]
    assert loads(_edit(bl_file, meta_fn=lambda m: m["tokens"].update(name="renamed")))["tokens"]


def test_hostile_binding_checks(bl_file, toks):
    """Edits that pass the loader's structural checks but not the binding's (which has the compiled tables)."""
    def not_a_delimiter(blob, meta):  # the last entry's token becomes a later token that is no delimiter
        arrs = _token_arrays(meta, blob)
        m, i, _ = arrs["delims"][-1].tolist()
        ok = ((arrs["flags"] & 2) != 0) & (np.diff(arrs["offsets"].astype(np.int64)) == 1) & (arrs["inert"][m] == 0)
        j = int(np.flatnonzero(ok & (np.arange(len(ok)) > i))[0])
        _poke("delims", j, len(arrs["delims"]) * 3 - 2)(blob, meta)

    msg = _refused(_edit(bl_file, blob_fn=not_a_delimiter), binding=True)
    assert "not a whole delimiter" in msg
    # a mode without a prefilter (its close pattern matches the empty string): no inert tokens allowed
    spec = {"start_anchor": "<a>",
            "fields": {"content": {}, "reasoning_content": {"open": "<think>", "close_pattern": r"x*"}}}
    b = bind(spec, toks["bl-special"])
    no_pf = [m for m, mode in enumerate(b.compiled.tables.modes) if mode.first_re is None]
    assert no_pf
    data = dumps(b.compiled.raw_tables, tokens=b)
    m = no_pf[0]

    def set_inert(blob, meta):
        a = _arr(meta, "tokens.inert")
        arrs = _token_arrays(meta, blob)
        i = int(np.flatnonzero((arrs["flags"] & 2) != 0)[66])
        blob[a["offset"] + m * a["shape"][1] + i] = 1

    assert "no prefilter" in _refused(_edit(data, blob_fn=set_inert), binding=True)


def test_sentencepiece_hostile_edits(toks):
    """Byte tokens and Metaspace first-token texts: the checks of the 'pieces' kind."""
    b = bind(templates.get("qwen3"), toks["sp-special"])
    sp = dumps(b.compiled.raw_tables, tokens=b)
    arrs = loads(sp)["tokens"]
    byte_tok = int(np.flatnonzero(arrs["flags"] & 4)[0])
    lens = np.diff(arrs["offsets"].astype(np.int64))
    text_tok = int(np.flatnonzero(((arrs["flags"] & 2) != 0) & (lens > 1))[0])
    assert "byte token" in _refused(_edit(sp, blob_fn=_poke("flags", 4, text_tok)))  # several bytes
    assert "either text or a byte" in _refused(_edit(sp, blob_fn=_poke("flags", 0, text_tok)))
    assert "byte token" in _refused(_edit(sp, blob_fn=_poke("flags", 6, byte_tok)))
    ms = bind(templates.get("qwen3"), toks["metaspace"])
    md = dumps(ms.compiled.raw_tables, tokens=ms)
    first = loads(md)["tokens"]["first_ids"]
    assert len(first) > 2
    assert "increasing" in _refused(_edit(md, blob_fn=_poke("first_ids", int(first[1]), 0)))
    assert "increasing" in _refused(_edit(md, blob_fn=_poke("first_ids", 10**7, len(first) - 1)))
    assert "rise" in _refused(_edit(md, blob_fn=_poke("first_offsets", 10**6, 1)))
    assert "UTF-8" in _refused(_edit(md, blob_fn=_poke("first_bytes", 0xFF, 0)))
    skipped = int(np.flatnonzero(loads(md)["tokens"]["flags"] & 1)[0]) if (loads(md)["tokens"]["flags"] & 1).any() \
        else None
    if skipped is not None and skipped < first[0]:
        assert "skipped" in _refused(_edit(md, blob_fn=_poke("first_ids", skipped, 0)))
    # first-token texts in a bytes-kind file
    assert "pieces" in _refused(_edit(md, meta_fn=lambda m: m["tokens"].update(kind="bytes")))


def test_bit_flips_and_truncation_refused(bl_file):
    rng = random.Random(3)
    h = HEADER.unpack_from(bl_file, 0)
    d_off = h[8]
    for pos in rng.sample(range(d_off, len(bl_file)), 300) + list(range(0, HEADER_SIZE, 3)):
        buf = bytearray(bl_file)
        buf[pos] ^= 1 << rng.randrange(8)
        _refused(bytes(buf))
    for n in [0, 100, 191, d_off, d_off + 1000, len(bl_file) - 33, len(bl_file) - 1]:
        _refused(bl_file[:n])
    _refused(bl_file + b"\0" * 8)


def test_random_resealed_mutations_never_crash(bl_file, toks):
    """Random values written into the token arrays and metadata, resealed with a valid checksum and
    vocabulary hash: refused with ValueError, or the file loads and parses token ids without crashing."""
    tok = toks["bl-special"]
    rng = random.Random(11)
    h, template, meta, blob = _sections(bl_file)
    entries = [a for a in meta["arrays"] if a["name"].startswith("tokens.") and a["nbytes"]]
    soups = [[rng.randrange(tok.get_vocab_size()) for _ in range(40)] for _ in range(3)]
    soups.append(tok.encode("<think>\nhmm</think>\n\nThe answer <tool_call>{\"name\": \"f\"}</tool_call>").ids)
    accepted = refused = 0
    for trial in range(400):
        m = copy.deepcopy(meta)
        b = bytearray(blob)
        what = rng.random()
        if what < 0.15:
            key = rng.choice(["size", "strip_start", "kind", "strip_char", "cleanup"])
            m["tokens"][key] = rng.choice([0, 1, -1, 2**31, "pieces", "bytes", " ", True, None, [], 3.5])
        elif what < 0.3:
            a = _arr(m, rng.choice(entries)["name"])
            a[rng.choice(["offset", "nbytes"])] += rng.choice([-8, 8, 1, -1, 2**20])
        else:
            a = rng.choice(entries)
            for _ in range(rng.randint(1, 4)):
                pos = a["offset"] + rng.randrange(a["nbytes"])
                b[pos] = rng.choice([0, 1, 2, 3, 4, 0x7F, 0x80, 0xC3, 0xFF, rng.randrange(256)])
        data = _reseal(h, template, m, bytes(b))
        try:
            raw = loads(data)
            ct = CompiledTemplate(raw["template"], raw)
            lb = binding_from_data(ct, raw["tokens"])
        except ValueError as e:
            assert str(e).startswith("chatparse table file:"), e
            refused += 1
            continue
        accepted += 1
        for ids in soups:
            run(lb, "", ids)  # must not raise anything but the parse errors `run` catches
            run(lb, "", ids, spans=True)
    assert refused > 100 and accepted > 10, (refused, accepted)


# ================================================================================================== directories
def test_tokenizer_dir_with_token_tables(toks, tmp_path, monkeypatch, caplog):
    tok, other = toks["bl-special"], toks["bl-plain"]
    d = tmp_path / "tok"
    d.mkdir()
    tok.save(str(d / "tokenizer.json"))
    tpl = templates.get("qwen3")
    path = td.save_dir(d, tpl)
    raw = load(path)
    assert raw["tokens"]["meta"]["size"] == tok.get_vocab_size()
    assert raw["tokens"]["meta"]["tokenizer_sha256"] == hashlib.sha256((d / "tokenizer.json").read_bytes()).hexdigest()
    assert td.check_dir(d) == (True, f"{path} is up to date")
    ref = bind(tpl, tok)
    cases = [(p, o, t) for n, _, p, o, t, _ in CASES if n == "qwen3"]

    # Loading uses the tables as they are: nothing is compiled, bound or derived.
    import chatparse.compiler.build as build
    import chatparse.compiler.tokens as ctok

    monkeypatch.setattr(build, "build_tables", lambda spec: pytest.fail("load_dir compiled"))
    monkeypatch.setattr(ctok, "vocab_for", lambda *a, **k: pytest.fail("load_dir derived the vocabulary"))
    monkeypatch.setattr(ctok.TokenTables, "__init__", lambda *a, **k: pytest.fail("load_dir built token tables"))
    chatparse.compiled._cache.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct = td.load_dir(d)
        for prefix, output, tools in cases:
            ids = tok.encode(output).ids
            assert run(ct, prefix, ids, tools) == run(ref, prefix, ids, tools)
    assert not caplog.records
    monkeypatch.undo()

    # A tokenizer passed explicitly: its vocabulary hash must match.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        assert token_binding(td.load_dir(d, tokenizer=tok)).vocab.tok_bytes == ref.vocab.tok_bytes
    assert not caplog.records
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct2 = td.load_dir(d, tokenizer=other)
    assert any("vocabulary hash mismatch" in r.getMessage() for r in caplog.records)
    ref2 = bind(tpl, other)
    ids = other.encode(cases[0][1]).ids
    assert run(ct2, cases[0][0], ids) == run(ref2, cases[0][0], ids)

    # tokenizer.json replaced: the recorded hash no longer matches; rebuilt with a warning; --check notices.
    other.save(str(d / "tokenizer.json"))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct3 = td.load_dir(d)
    assert any("changed since the token tables" in r.getMessage() for r in caplog.records)
    assert run(ct3, cases[0][0], ids) == run(ref2, cases[0][0], ids)
    ok, msg = td.check_dir(d)
    assert not ok and "token tables differ" in msg
    td.compile_dir(d)
    assert td.check_dir(d)[0]

    # Tables without a token section while a tokenizer.json is there: --check asks for a recompile.
    td.compile_dir(d, tokens=False)
    assert "tokens" not in load(path)
    ok, msg = td.check_dir(d)
    assert not ok and "no token tables" in msg
    # ... and a template change recompiles and rebuilds the token tables, with a warning.
    td.compile_dir(d)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["response_template"] = templates.get("hermes")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct4 = td.load_dir(d)
    assert any("different response_template" in r.getMessage() for r in caplog.records)
    ids = other.encode("Sure!\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>").ids
    assert run(ct4, "", ids) == run(bind(templates.get("hermes"), other), "", ids)
    assert chatparse.compile_template(templates.get("hermes")).__dict__.get("_token_binding") is None


def test_tokenizer_dir_per_mode_tables_checked_without_tokenizer(toks, tmp_path):
    """No tokenizer.json (token tables written for a tokenizer passed in): --check still rebuilds the per-mode
    tables from the stored vocabulary and notices a changed one."""
    tok = toks["sp-special"]
    d = tmp_path / "tok"
    path = td.save_dir(d, templates.get("gpt_oss"), tokenizer=tok)
    raw = load(path)
    assert raw["tokens"]["meta"]["tokenizer_sha256"] is None
    assert td.check_dir(d)[0]
    arrs = raw["tokens"]
    i = int(np.flatnonzero(arrs["inert"][0])[0])
    data = _edit(path.read_bytes(), blob_fn=_poke("inert", 0, i))
    path.write_bytes(data)
    ok, msg = td.check_dir(d)
    assert not ok and "token array inert" in msg


def test_cli_compile_reports_token_tables(toks, tmp_path, capsys):
    from chatparse.cli import main

    d = tmp_path / "tok"
    d.mkdir()
    toks["sp-plain"].save(str(d / "tokenizer.json"))
    (d / "tokenizer_config.json").write_text(json.dumps({"response_template": templates.get("deepseek_r1")}))
    assert main(["compile", str(d)]) == 0
    assert f"token tables for {toks['sp-plain'].get_vocab_size()} tokens" in capsys.readouterr().out
    assert main(["compile", "--check", str(d)]) == 0


def test_runtime_alone_parses_token_ids(toks, tmp_path):
    """A process that cannot import chatparse.compiler, interegular, transformers or tokenizers parses token
    ids from a file with a token section, with the same events as a bound parser here."""
    tok = toks["bl-special"]
    tpl = templates.get("qwen3")
    b = bind(tpl, tok)
    path = tmp_path / "t.cpt"
    save(b.compiled, path, tokens=b)
    prefix, output = next((p, o) for n, _, p, o, t, _ in CASES if n == "qwen3" and "<tool_call>" in o)
    ids = tok.encode(output).ids
    want = run(b, prefix, ids)
    code = f"""
import importlib.abc, json, sys, types
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith("chatparse.compiler") or name.split(".")[0] in ("interegular", "transformers",
                                                                         "tokenizers", "torch"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
pkg = types.ModuleType("chatparse"); pkg.__path__ = [{str(ROOT / 'chatparse')!r}]; sys.modules["chatparse"] = pkg
from chatparse.runtime.tables.loader import load
from chatparse.compiled import CompiledTemplate
from chatparse.runtime.tokens import TokenParser
raw = load({str(path)!r})
p = TokenParser(CompiledTemplate(raw["template"], raw), prefix={prefix!r})
out = [p.initial_events] + [p.feed_tokens(i) for i in {ids!r}] + [list(p.finalize())]
print(json.dumps(out))
print(sorted(m for m in sys.modules if m.startswith(("chatparse", "interegular", "transformers", "tokenizers"))))
"""
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    out_line, mods = res.stdout.strip().splitlines()
    assert json.loads(out_line) == json.loads(json.dumps(want[1][:-1] + [list(want[1][-1])]))
    assert "compiler" not in mods and "transformers" not in mods and "tokenizers" not in mods


@needs_program("node", "the JavaScript reader")
def test_js_skips_token_section(toks, tmp_path):
    tok = toks["bl-special"]
    b = bind(templates.get("qwen3"), tok)
    path = tmp_path / "t.cpt"
    save(b.compiled, path, tokens=b)
    text = ("<think>\nhmm 😀</think>\n\nThe answer.<tool_call>\n"
            '{"name": "f", "arguments": {"x": 1}}\n</tool_call>')
    damaged = tmp_path / "bad.cpt"
    damaged.write_bytes(_edit(path.read_bytes(), header_fn=lambda h: h.__setitem__(10, 1)))
    script = f"""
import fs from "node:fs";
import {{ loadTables, ResponseParser }} from {json.dumps(str(ROOT / "js" / "chatparse.mjs"))};
const t = loadTables(fs.readFileSync({json.dumps(str(path))}));
const p = new ResponseParser(t, "");
const ev = p.feed({json.dumps(text)});
const [msg, fin] = p.finalize();
let refused = "";
try {{ loadTables(fs.readFileSync({json.dumps(str(damaged))})); }} catch (e) {{ refused = e.message; }}
console.log(JSON.stringify({{vocab: t.header.vocabSha256, ev: ev.concat(fin), msg, refused}}));
"""
    res = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    r = chatparse.ResponseParser(templates.get("qwen3"), prefix="")
    ev = r.feed(text)
    msg, fin = r.finalize()
    assert got["msg"] == json.loads(json.dumps(msg)) and got["vocab"] == vocab_hash(tok)
    assert [e["type"] for e in got["ev"]] == [e["type"] for e in ev + fin]
    assert "token" in got["refused"]


# ================================================================================================== large vocabularies
def test_tekken_round_trip_and_load_time(tmp_path):
    """Mistral's tekken (131k byte-level tokens, about 1% not valid UTF-8 alone)."""
    tok = tekken_tokenizer()
    rng = random.Random(5)
    partial = None
    for name in ("mistral_v11", "qwen3"):
        b = bind(templates.get(name), tok)
        data, ct, lb = round_trip(b, tmp_path, f"{name}.cpt")
        assert_same_tables(b, lb)
        if partial is None:
            partial = [i for i, t in enumerate(lb.vocab.tok_text) if t is None]
            assert len(partial) > 500
            print_times(f"tekken ({name})", b.vocab.size, len(data), load_times(tmp_path / f"{name}.cpt"))
        for cname, template, prefix, output, tools, cid in CASES:
            if cname == name:
                ids = tok.encode(output, add_special_tokens=False).ids
                assert_same_events(b, lb, prefix, ids, tools, rng)
        for _ in range(4):
            ids = [rng.choice(partial) if rng.random() < 0.3 else rng.randrange(b.vocab.size) for _ in range(50)]
            assert_same_events(b, lb, "", ids, rng=rng)


def test_150k_synthetic_vocabulary_load_time(tmp_path):
    vocab = synthetic_vocab(150_000)
    b = bind(templates.get("qwen3"), vocab)
    data, ct, lb = round_trip(b, tmp_path)
    assert lb.vocab.size == 150_000 and lb.vocab.n_partial > 1000
    assert any(lb.tables.delims)
    print_times("synthetic byte-level (qwen3)", 150_000, len(data), load_times(tmp_path / "t.cpt"))
    rng = random.Random(1)
    for _ in range(3):
        ids = [rng.randrange(150_000) for _ in range(60)]
        assert_same_events(b, lb, "", ids, rng=rng)
    think = vocab.tok_bytes.index(b"<think>")
    end = vocab.tok_bytes.index(b"</think>")
    ids = ([think] + [rng.randrange(300, 150_000) for _ in range(30)] + [end]
           + [rng.randrange(150_000) for _ in range(30)])
    assert_same_events(b, lb, "", ids)
