"""The table format (FORMAT.md): round trips, refusal of damaged and hostile files, pickling, tokenizer
directories, runtime independence, and conformance of the Python and JavaScript runtimes on the vectors.

* save -> load gives identical tables and identical parses (events and messages) on the whole corpus;
* every bit flip, truncation, size change and a catalogue of hostile edits (resealed with a valid checksum, so
  the structural checks themselves are exercised: bad offsets, dtypes, shapes, indices, JSON, template) is
  refused with ValueError - never another exception, never a hang; random resealed mutations either are
  refused or load into tables that parse without crashing;
* a compiled template pickles through the format, including into `multiprocessing` spawn workers;
* tokenizer directories: write, load from tables (no compilation), recompile with a warning on mismatch,
  `chatparse compile` / `--check`, compatibility with transformers' tokenizer_config.json;
* the loader + runtime import neither chatparse.compiler nor interegular nor transformers;
* the Python runner and `node js/run_vectors.mjs` pass every vector, plus fresh random differential vectors.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
import multiprocessing as mp
import pickle
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from deps import need, needs_program

import chatparse
import chatparse.tokenizer_dir as td
import corpus_cases as cc
import make_vectors as mv
from harness import time_limit
from chatparse import CompiledTemplate, compile_template, templates
from chatparse.compiler.writer import HEADER_SIZE, dumps, save, translate_js
from chatparse.runtime.tables.loader import load, loads, template_hash
from chatparse.runtime.tables.layout import Tables

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
NODE = shutil.which("node")
CORPUS = cc.load()
HEADER = struct.Struct("<8sII7Q2I32s32s16s")


def _events(template, prefix: str, chunks: list[str]):
    try:
        p = chatparse.ResponseParser(template, prefix=prefix)
        events = list(p.initial_events)
        for c in chunks:
            events.append(("feed", p.feed(c)))
        msg, final = p.finalize()
        return ("ok", msg, events, final)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return ("error", type(e).__name__)


# ------------------------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("name", templates.names())
def test_round_trip_identical(name, tmp_path):
    compiled = compile_template(templates.get(name))
    path = tmp_path / "t.cpt"
    save(compiled, path)
    data = path.read_bytes()
    for raw in (load(path), load(path, use_mmap=False), loads(data)):
        # everything the compiler produces is carried (a new key in build_tables must be added to the format)
        assert set(compiled.raw_tables) <= set(raw)
        assert all(set(a) == set(b) for a, b in zip(compiled.raw_tables["patterns"], raw["patterns"]))
        assert all(set(a) == set(b) for a, b in zip(compiled.raw_tables["modes"], raw["modes"]))
        assert td.tables_differ(raw, compiled.raw_tables) is None
        assert raw["template"] == compiled.spec and list(raw["template"]) == list(compiled.spec)
        assert raw["header"]["template_sha256"] == template_hash(compiled.spec)
        assert dumps(raw) == data  # re-serializing what was read gives the same bytes
    loaded = CompiledTemplate(raw["template"], raw)
    cases = [c for c in CORPUS.cases if c.name == name]
    for case in cases:
        a = chatparse.parse_response(case.output, compiled, prefix=case.prefix, tools=case.tools)
        b = chatparse.parse_response(case.output, loaded, prefix=case.prefix, tools=case.tools)
        assert cc.strict_equal(a, b) and cc.strict_equal(b, case.expected), case.id
        chunks = mv.chunkings(case.id, case.output, False)[-1]
        assert _events(compiled, case.prefix, chunks) == _events(loaded, case.prefix, chunks), case.id


def test_dumps_is_deterministic_and_small():
    raw = compile_template(templates.get("gpt_oss")).raw_tables
    a, b = dumps(raw), dumps(copy.deepcopy(raw))
    assert a == b
    assert len(dumps(raw, js=False)) < len(a) < 64_000
    assert loads(dumps(raw, js=False)).get("js") is None and "js" in loads(a)


def test_vocab_hash_round_trip():
    raw = compile_template(templates.get("qwen3")).raw_tables
    vh = hashlib.sha256(b"vocab").hexdigest()
    got = loads(dumps(raw, vocab_hash=vh))
    assert got["header"]["vocab_sha256"] == vh
    assert loads(dumps(got))["header"]["vocab_sha256"] == vh
    assert loads(dumps(raw))["header"]["vocab_sha256"] is None
    with pytest.raises(ValueError):
        dumps(raw, vocab_hash=b"short")


# ------------------------------------------------------------------------------------------- damaged files


def _sample_files() -> dict[str, bytes]:
    out = {n: dumps(compile_template(templates.get(n)).raw_tables) for n in ("qwen3", "gpt_oss", "kimi_k2")}
    out["x_regex"] = dumps(compile_template(mv.REGEX_T).raw_tables)
    return out


SAMPLES = _sample_files()


def _refused(data: bytes) -> str:
    with time_limit(5, TimeoutError):
        try:
            loads(data)
        except ValueError as e:
            return str(e)
    raise AssertionError("damaged file was accepted")


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_bit_flips_refused(name):
    data = SAMPLES[name]
    rng = random.Random(name)
    positions = list(range(0, HEADER_SIZE)) + rng.sample(range(len(data)), 400) + list(range(len(data) - 40, len(data)))
    for pos in positions:
        buf = bytearray(data)
        buf[pos] ^= 1 << rng.randrange(8)
        _refused(bytes(buf))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_truncation_and_padding_refused(name):
    data = SAMPLES[name]
    for n in list(range(0, 300)) + list(range(300, len(data), 97)) + [len(data) - 1]:
        assert "bytes" in _refused(data[:n]) or "checksum" in _refused(data[:n])
    for extra in (b"\0", b"\0" * 8, b"junk" * 100):
        _refused(data + extra)
    _refused(b"")
    _refused(b"\x89CPT\r\n\x1a\n" + b"\0" * 300)


def _sections(data: bytes):
    f = list(HEADER.unpack_from(data, 0))
    _, _, _, _, t_off, t_len, m_off, m_len, d_off, d_len = f[:10]
    return f, data[t_off:t_off + t_len], json.loads(data[m_off:m_off + m_len]), data[d_off:d_off + d_len]


def _assemble(header: list, template: bytes, meta: bytes, blob: bytes, *, fix_layout=True, rehash=True) -> bytes:
    """A file from parts, with a valid SHA-256 trailer (so only the structural checks can object)."""
    h = list(header)
    if fix_layout:
        t_off = HEADER_SIZE
        m_off = t_off + len(template)
        d_off = (m_off + len(meta) + 7) & ~7
        h[3:10] = [d_off + len(blob) + 32, t_off, len(template), m_off, len(meta), d_off, len(blob)]
    if rehash:
        spec = json.loads(template)
        h[12] = hashlib.sha256(json.dumps(spec, sort_keys=True, separators=(",", ":"),
                                          ensure_ascii=False).encode()).digest()
    size = h[3]
    buf = bytearray(max(size, HEADER_SIZE + 32))
    HEADER.pack_into(buf, 0, *h)
    buf[h[4]:h[4] + len(template)] = template
    buf[h[6]:h[6] + len(meta)] = meta
    buf[h[8]:h[8] + len(blob)] = blob
    buf = buf[:size] if size >= HEADER_SIZE + 32 else buf
    buf[-32:] = hashlib.sha256(bytes(buf[:-32])).digest()
    return bytes(buf)


def _edit(data: bytes, meta_fn=None, template_fn=None, blob_fn=None, header_fn=None, **kw) -> bytes:
    header, template, meta, blob = _sections(data)
    meta = copy.deepcopy(meta)
    if meta_fn:
        meta = meta_fn(meta) or meta
    spec = json.loads(template)
    if template_fn:
        spec = template_fn(spec) or spec
    template = json.dumps(spec, separators=(",", ":"), ensure_ascii=False).encode()
    if blob_fn:
        blob = bytes(blob_fn(bytearray(blob), meta))
    if header_fn:
        header_fn(header)
    meta_b = meta if isinstance(meta, bytes) else json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode()
    return _assemble(header, template, meta_b, blob, **kw)


def _arr(meta, name):
    return next(a for a in meta["arrays"] if a["name"] == name)


def _set(meta, name, **kw):
    _arr(meta, name).update(kw)


def _poke(name, value, index=0):
    def fn(blob, meta):
        a = _arr(meta, name)
        dt = np.dtype("<" + a["dtype"])
        np.frombuffer(blob, dtype=dt, count=int(np.prod(a["shape"])), offset=a["offset"])  # bounds check
        struct.pack_into("<" + {"u1": "B", "i1": "b", "u2": "H", "i2": "h", "u4": "I", "i4": "i"}[a["dtype"]],
                         blob, a["offset"] + index * dt.itemsize, value)
        return blob
    return fn


HOSTILE = {
    # header
    "version 2": dict(header_fn=lambda h: h.__setitem__(1, 2)),
    "header size": dict(header_fn=lambda h: h.__setitem__(2, 200)),
    "unknown flag": dict(header_fn=lambda h: h.__setitem__(10, 4)),
    "reserved": dict(header_fn=lambda h: h.__setitem__(11, 1)),
    "vocab without flag": dict(header_fn=lambda h: h.__setitem__(13, b"\1" * 32)),
    "version string": dict(header_fn=lambda h: h.__setitem__(14, b"\xff0.1".ljust(16, b"\0"))),
    "empty version": dict(header_fn=lambda h: h.__setitem__(14, b"\0" * 16)),
    "stale template hash": dict(template_fn=lambda s: s["fields"][0].update(optional=False), rehash=False),
    # arrays
    "negative offset": dict(meta_fn=lambda m: _set(m, "class_ids", offset=-8)),
    "huge offset": dict(meta_fn=lambda m: _set(m, "class_ids", offset=2**62)),
    "unaligned offset": dict(meta_fn=lambda m: _set(m, "class_ids", offset=3)),
    "offset past data": dict(meta_fn=lambda m: _set(m, "mode0.term", offset=_arr(m, "mode0.term")["offset"] + 10**6)),
    "overlap": dict(meta_fn=lambda m: _set(m, "mode0.eot", offset=_arr(m, "mode0.trans")["offset"])),
    "nbytes": dict(meta_fn=lambda m: _set(m, "mode0.trans", nbytes=_arr(m, "mode0.trans")["nbytes"] + 1)),
    "huge shape": dict(meta_fn=lambda m: _set(m, "mode0.trans", shape=[2**31, 2**31], nbytes=2**62)),
    "negative shape": dict(meta_fn=lambda m: _set(m, "mode0.eot", shape=[-1])),
    "3-d shape": dict(meta_fn=lambda m: _set(m, "mode0.trans", shape=[1, 1, _arr(m, "mode0.trans")["nbytes"]])),
    "float dtype": dict(meta_fn=lambda m: _set(m, "class_ids", dtype="f4")),
    "i4 trans": dict(meta_fn=lambda m: _set(m, "class_ids", dtype="i1")),
    "missing array": dict(meta_fn=lambda m: m.update(arrays=[a for a in m["arrays"] if a["name"] != "mode0.acc"])),
    "unknown array": dict(meta_fn=lambda m: m["arrays"].append({**_arr(m, "class_ids"), "name": "extra"})),
    "duplicate array": dict(meta_fn=lambda m: m["arrays"].append(dict(_arr(m, "class_ids")))),
    "state out of range": dict(blob_fn=_poke("mode0.trans", 255, 7)),
    "eot out of range": dict(blob_fn=_poke("mode0.eot", 255, 1)),
    "accept code": dict(blob_fn=_poke("mode0.acc", 5, 3)),
    "terminal flag": dict(blob_fn=_poke("mode0.term", 2, 1)),
    "dead state live": dict(blob_fn=_poke("mode0.trans", 1, 0)),
    "class id": dict(blob_fn=_poke("class_ids", 200, 1)),
    "class starts order": dict(blob_fn=_poke("class_starts", 0x10FFFF, 1)),
    "class starts origin": dict(blob_fn=_poke("class_starts", 5, 0)),
    # metadata
    "n_classes 0": dict(meta_fn=lambda m: m.update(n_classes=0)),
    "n_classes big": dict(meta_fn=lambda m: m.update(n_classes=70000)),
    "n_classes str": dict(meta_fn=lambda m: m.update(n_classes="21")),
    "n_classes bool": dict(meta_fn=lambda m: m.update(n_classes=True)),
    "n_classes wrong": dict(meta_fn=lambda m: m.update(n_classes=m["n_classes"] + 1)),
    "meta extra key": dict(meta_fn=lambda m: m.update(surprise=1)),
    "meta missing key": dict(meta_fn=lambda m: m.pop("modes")),
    "meta version": dict(meta_fn=lambda m: m.update(chatparse_version="9.9")),
    "meta not object": dict(meta_fn=lambda m: [1, 2]),
    "meta deep": dict(meta_fn=lambda m: ("[" * 100_000 + "]" * 100_000).encode()),
    "meta not utf8": dict(meta_fn=lambda m: b'{"a": "\xff"}'),
    "meta not json": dict(meta_fn=lambda m: b"{nope"),
    "pattern source": dict(meta_fn=lambda m: m["patterns"][0].update(source="x")),
    "pattern kind": dict(meta_fn=lambda m: m["patterns"][0].update(kind="middle")),
    "pattern field": dict(meta_fn=lambda m: m["patterns"][0].update(field=99)),
    "pattern field bool": dict(meta_fn=lambda m: m["patterns"][1].update(field=True)),
    "pattern missing key": dict(meta_fn=lambda m: m["patterns"][0].pop("history")),
    "pattern history 0": dict(meta_fn=lambda m: m["patterns"][0].update(history=0)),
    "pattern horizon": dict(meta_fn=lambda m: m["patterns"][0].update(horizon=-2)),
    "pattern groups flag": dict(
        meta_fn=lambda m: [p.update(named_groups=not p["named_groups"]) for p in m["patterns"]]),
    "literal not exact": dict(  # (on gpt_oss: since the gap fixes, qwen3's delimiters are all patterns)
        sample="gpt_oss",
        meta_fn=lambda m: [p.update(exact=False) for p in m["patterns"] if p["key"] in ("open", "close")]),
    "pattern reasons": dict(meta_fn=lambda m: m["patterns"][0].update(reasons="why")),
    "too few patterns": dict(meta_fn=lambda m: m["patterns"].pop()),
    "watch list": dict(meta_fn=lambda m: m["modes"][0].update(patterns=[0])),
    "extra mode": dict(meta_fn=lambda m: m["modes"].append(dict(m["modes"][1]))),
    "start state": dict(meta_fn=lambda m: m["modes"][0].update(startN=10**6)),
    "start state neg": dict(meta_fn=lambda m: m["modes"][0].update(start0=-1)),
    "first not list": dict(meta_fn=lambda m: m["modes"][0].update(first="x")),
    "first range order": dict(meta_fn=lambda m: m["modes"][0].update(first=[[[[5, 3]], None]])),
    "first range big": dict(meta_fn=lambda m: m["modes"][0].update(first=[[[[0, 0x110000]], None]])),
    "first shape": dict(meta_fn=lambda m: m["modes"][0].update(first=[[[[1, 2, 3]], None]])),
    "first overlap": dict(meta_fn=lambda m: m["modes"][0].update(first=[[[[1, 5], [3, 9]], None]])),
    "js type": dict(meta_fn=lambda m: m.update(js=[])),
    "js patterns": dict(meta_fn=lambda m: m["js"].update(patterns=[])),
    "js translation": dict(meta_fn=lambda m: m["js"].update(anchor={"source": 5, "groups": {}})),
    # template
    "template field key": dict(template_fn=lambda s: s["fields"][0].pop("join")),
    "template parser": dict(template_fn=lambda s: s["fields"][0].update(content="yaml")),
    "template names": dict(template_fn=lambda s: s["fields"][1].update(name=s["fields"][0]["name"])),
    "template implicit": dict(template_fn=lambda s: s.update(implicit="nobody")),
    "template regex": dict(template_fn=lambda s: s.update(start_anchor={"pattern": "(unclosed"})),
    "template literals": dict(template_fn=lambda s: s.update(start_anchor={"literals": []})),
    "template version": dict(template_fn=lambda s: s.update(version=2)),
    "template list": dict(template_fn=lambda s: [s]),
    "template bool flag": dict(template_fn=lambda s: s["fields"][0].update(repeats=1)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_edits_refused(case):
    kw = dict(HOSTILE[case])
    data = _edit(SAMPLES[kw.pop("sample", "qwen3")], **kw)
    msg = _refused(data)
    assert msg.startswith("chatparse table file:"), msg


def test_hostile_template_not_compact():
    header, template, meta, blob = _sections(SAMPLES["qwen3"])
    spaced = json.dumps(json.loads(template), ensure_ascii=False).encode()  # same value, not the compact form
    assert "compact" in _refused(_assemble(header, spaced, json.dumps(meta).encode(), blob))
    assert loads(_assemble(header, template, json.dumps(meta).encode(), blob))  # the control loads


def test_random_resealed_mutations_never_crash():
    """Mutate integers and strings of the metadata at random, reseal: refused, or loads and parses safely."""
    rng = random.Random(7)
    texts = ["<think>a</think>b<tool_call>{\"x\": 1}</tool_call>", "plain <|im_end|> text", "<think>\n\n"]
    loaded = refused = 0
    for name in ("qwen3", "x_regex"):
        header, template, meta, blob = _sections(SAMPLES[name])
        meta_text = json.dumps(meta)
        for _ in range(150):
            toks = list(__import__("re").finditer(r"-?\d+|\"[^\"]*\"", meta_text))
            t = rng.choice(toks)
            new = rng.choice([str(rng.randint(-3, 3)), str(rng.randint(0, 2**40)), '"x"', "null", "[]", "1.5"])
            mutated = meta_text[:t.start()] + new + meta_text[t.end():]
            data = _assemble(header, template, mutated.encode(), blob)
            with time_limit(5, TimeoutError):
                try:
                    raw = loads(data)
                except ValueError:
                    refused += 1
                    continue
                tables = Tables(raw)
                ct = CompiledTemplate(raw["template"], raw)
                loaded += 1
                for text in texts:
                    try:
                        ct.parse(text, prefix="")
                    except (ValueError, KeyError, RuntimeError):
                        pass
                assert tables.modes
    assert refused > 50 and loaded > 10, (refused, loaded)


def test_load_errors_name_the_file(tmp_path):
    p = tmp_path / "bad.cpt"
    p.write_bytes(SAMPLES["qwen3"][:-1])
    with pytest.raises(ValueError, match="bad.cpt"):
        load(p)
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="too short"):
        load(p)


# ------------------------------------------------------------------------------------------- pickling


def _corpus_texts(name):
    return [(c.output, c.prefix) for c in CORPUS.cases if c.name == name]


def test_pickle_round_trip():
    for name in ("qwen3", "gpt_oss", "cohere"):
        ct = compile_template(templates.get(name))
        data = pickle.dumps(ct)
        assert len(data) < 20_000
        assert b"chatparse.runtime.tables.loader" in data and b"compiled_from_bytes" in data
        assert b"numpy" not in data and b"Tables" not in data  # only bytes and a plain function
        back = pickle.loads(data)
        assert isinstance(back, CompiledTemplate) and back.spec == ct.spec
        assert td.tables_differ(back.raw_tables, ct.raw_tables) is None
        for text, prefix in _corpus_texts(name):
            assert cc.strict_equal(back.parse(text, prefix=prefix), ct.parse(text, prefix=prefix))
        assert pickle.dumps(back)  # a loaded one pickles again


def test_pickle_registered_on_package_import():
    code = ("import pickle, chatparse; from chatparse import templates, compile_template; "
            "d = pickle.dumps(compile_template(templates.get('qwen3'))); print(b'compiled_from_bytes' in d)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True", (
        "plain `import chatparse` does not pickle a CompiledTemplate through the table format: "
        "CompiledTemplate.__reduce__ (compiled.py) must reach compiled_from_bytes")


def test_pickle_into_spawned_pool():
    ct = compile_template(templates.get("qwen3"))
    items = _corpus_texts("qwen3") * 3
    want = [ct.parse(t, prefix=p) for t, p in items]
    work = functools.partial(_parse_item, ct)
    with mp.get_context("spawn").Pool(2) as pool:
        got = pool.map(work, items, chunksize=2)
    assert all(cc.strict_equal(a, b) for a, b in zip(got, want))


def _parse_item(ct, item):
    text, prefix = item
    return ct.parse(text, prefix=prefix)


# ------------------------------------------------------------------------------------------- tokenizer dirs


def test_tokenizer_dir_roundtrip(tmp_path, monkeypatch, caplog):
    d = tmp_path / "tok"
    d.mkdir()
    (d / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 128, "tokenizer_class": "X"}))
    tpl = templates.get("qwen3")
    path = td.save_dir(d, tpl)
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    assert cfg["model_max_length"] == 128 and cfg["response_template"] == tpl
    assert path.name == "response_template.cpt" and path.exists()
    # Matching tables are used as they are: no compilation at all.
    import chatparse.compiler.build as build

    monkeypatch.setattr(build, "build_tables", lambda spec: pytest.fail("load_dir compiled despite matching tables"))
    chatparse.compiled._cache.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct = td.load_dir(d)
    assert not caplog.records
    case = _corpus_texts("qwen3")[0]
    monkeypatch.undo()
    assert cc.strict_equal(ct.parse(case[0], prefix=case[1]), compile_template(tpl).parse(case[0], prefix=case[1]))
    assert td.check_dir(d)[0]


def test_tokenizer_dir_mismatch_recompiles(tmp_path, caplog):
    d = tmp_path / "tok"
    td.save_dir(d, templates.get("smollm3"))
    cfg = json.loads((d / "tokenizer_config.json").read_text())
    cfg["response_template"]["fields"]["reasoning_content"]["close_pattern"] = r"\s*</THINK>\s*"
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        ct = td.load_dir(d)
    assert any("different response_template" in r.getMessage() for r in caplog.records)
    assert ct.parse("<think>a</THINK>b", prefix="")["reasoning_content"] == "a"
    ok, msg = td.check_dir(d)
    assert not ok and "hash mismatch" in msg
    # damaged and missing tables: recompiled, with the reason in the warning
    tables = d / "response_template.cpt"
    tables.write_bytes(tables.read_bytes()[:-3])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        td.load_dir(d)
    assert any("cannot be used" in r.getMessage() for r in caplog.records)
    tables.unlink()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatparse"):
        td.load_dir(d)
    assert any("does not exist" in r.getMessage() for r in caplog.records)
    assert not td.check_dir(d)[0]


def test_cli_compile_and_check(tmp_path, capsys):
    from chatparse.cli import main

    d = tmp_path / "tok"
    d.mkdir()
    (d / "tokenizer_config.json").write_text(json.dumps({"response_template": templates.get("hermes")}))
    assert main(["compile", "--check", str(d)]) == 1
    assert main(["compile", str(d)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["compile", "--check", str(d)]) == 0
    raw = load(d / "response_template.cpt")
    # same template, different automaton (a flipped accept code, resealed): --check notices
    data = _edit((d / "response_template.cpt").read_bytes(),
                 blob_fn=_poke("mode1.acc", 1, int(np.argmax(raw["modes"][1]["acc"].ravel() == 0))))
    (d / "response_template.cpt").write_bytes(data)
    assert main(["compile", "--check", str(d)]) == 1
    assert "differs" in capsys.readouterr().err
    (d / "tokenizer_config.json").write_text(json.dumps({"response_template": {"fields": {}}}))
    assert main(["compile", str(d)]) == 2


def test_transformers_tokenizer_dir(tmp_path):
    need("tokenizers")
    from tokenizers import Tokenizer, models
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")))
    tpl = templates.get("qwen3")
    tok.response_template = tpl
    tok.save_pretrained(tmp_path)
    td.compile_dir(tmp_path)  # what `chatparse compile DIR` does
    ct = td.load_dir(tmp_path)
    text, prefix = _corpus_texts("qwen3")[0]
    assert cc.strict_equal(ct.parse(text, prefix=prefix), tok.parse_response(text, prefix=prefix))
    td.save_dir(tmp_path, templates.get("hermes"))  # rewrite the template the chatparse way
    assert AutoTokenizer.from_pretrained(tmp_path).response_template == templates.get("hermes")
    assert td.check_dir(tmp_path)[0]


# ------------------------------------------------------------------------------------------- independence


def test_runtime_needs_no_compiler():
    vec = json.loads((VECTORS / "qwen3.json").read_text())
    case = next(c for c in vec["cases"] if "message" in c and len(c["feeds"]) > 1)
    code = f"""
import importlib.abc, json, sys, types
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.startswith("chatparse.compiler") or name.split(".")[0] in ("interegular", "transformers"):
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
pkg = types.ModuleType("chatparse"); pkg.__path__ = [{str(ROOT / 'chatparse')!r}]; sys.modules["chatparse"] = pkg
from chatparse.runtime.tables.loader import load
from chatparse.runtime.tables.layout import Tables
from chatparse.runtime.stream.parser import StreamParser
t = Tables(load({str(VECTORS / 'qwen3.cpt')!r}))
p = StreamParser(t)
if {case['prefix']!r}:
    p.feed(t.cut_prefix({case['prefix']!r}))
for f in {case['feeds']!r}:
    p.feed(f)
msg, _ = p.finish()
print(json.dumps(msg))
print(sorted(m for m in sys.modules if m.startswith(("chatparse", "interegular", "transformers"))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    msg_line, mods = out.stdout.strip().splitlines()
    assert json.loads(msg_line) == case["message"]
    assert "compiler" not in mods and "interegular" not in mods and "transformers" not in mods


# ------------------------------------------------------------------------------------------- JS port marks


def test_translation_marks_untranslatable():
    assert "error" in translate_js(r"(a)?(?(1)b|c)")
    assert "error" in translate_js(r"(?i)(a)\1")
    assert "error" in translate_js(r"\p{L}+")
    assert "error" in translate_js(r"(unclosed")
    assert "error" in translate_js(5)
    assert translate_js(r"(?P<n>a)|(?P<n>b)")["groups"] == {"$n0": "n", "$n1": "n"}
    ok = translate_js(r"(?P<name>\w+)\s*(?=<)")
    assert ok["groups"] == {"name": "name"} and "caveats" not in ok


@needs_program("node", "the JavaScript reader")
def test_js_refuses_untranslatable_delimiter(tmp_path):
    tpl = {"start_anchor": "<s>", "fields": {"content": {"close_pattern": r"(x)?(?(1)y|z)"}}}
    ct = compile_template(tpl)
    assert ct.parse("abxyz", prefix="") == {"content": "ab"}
    save(ct, tmp_path / "c.cpt")
    out = _node(f"""
const t = (await import({json.dumps(str(ROOT / 'js' / 'chatparse.mjs'))}));
try {{ t.loadTables(fs.readFileSync({json.dumps(str(tmp_path / 'c.cpt'))})); console.log("loaded"); }}
catch (e) {{ console.log(e.pyType + ": " + e.message); }}""")
    assert out.startswith("ValueError:") and "cannot run in JavaScript" in out and "conditional" in out


# ------------------------------------------------------------------------------------------- vectors


def test_vectors_small():
    size = sum(p.stat().st_size for p in VECTORS.iterdir())
    assert size < 6_900_000, size  # (3.0 MB until the ext_* vectors of the format extensions, 158 + 42 + 35 kB,
    # then about 30 kB for each later ext_* vector; regex.json at 3.50 MB once it held the serving-grade
    # templates' override patterns too, 153 patterns; 6.66 MB with the token-mode vectors (issue #40, *.tok-*:
    # 3.16 MB, 67 tables files with a token section of 25 kB on average, which is most of it, and their cases)
    assert len(list(VECTORS.glob("*.cpt"))) >= len(templates.names()) + 10


def test_python_runner_passes_every_vector():
    n, failures = mv.check(VECTORS)
    assert not failures, "\n".join(failures[:20])
    assert n > 5000


def _node(script: str) -> str:
    out = subprocess.run([NODE, "--input-type=module", "-e", "import fs from 'node:fs';\n" + script],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _run_js_vectors(directory: Path, note: str = "") -> dict:
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(directory), "--json"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0 and summary["failed"] == 0, note + out.stdout[-4000:] + out.stderr[-2000:]
    return summary


@needs_program("node", "the JavaScript reader")
def test_js_runner_passes_every_vector():
    summary = _run_js_vectors(VECTORS)
    assert summary["passed"] > 5000


@needs_program("node", "the JavaScript reader")
def test_js_random_differential(tmp_path):
    seed = random.randrange(10**6)
    n = mv.fuzz(tmp_path, per_template=12, seed=seed)
    note = (f"reproduce: python tests/make_vectors.py --fuzz 12 --seed {seed} --dir /tmp/fz && "
            "node js/run_vectors.mjs /tmp/fz\n")
    assert _run_js_vectors(tmp_path, note)["passed"] >= n  # (plus surrogate-split re-runs)


@needs_program("node", "the JavaScript reader")
def test_js_refuses_damaged_files(tmp_path):
    data = SAMPLES["gpt_oss"]
    rng = random.Random(3)
    files = []
    for i in range(60):
        buf = bytearray(data)
        buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        files.append(bytes(buf))
    files += [data[:n] for n in (0, 10, 159, 200, len(data) // 2, len(data) - 1)]
    files += [_edit(SAMPLES[kw.pop("sample", "qwen3")], **kw)
              for kw in (dict(HOSTILE[k]) for k in sorted(HOSTILE) if "meta deep" not in k)]
    for i, b in enumerate(files):
        (tmp_path / f"{i}.cpt").write_bytes(b)
    (tmp_path / "good.cpt").write_bytes(data)
    out = _node(f"""
const t = (await import({json.dumps(str(ROOT / 'js' / 'chatparse.mjs'))}));
const dir = {json.dumps(str(tmp_path))};
const res = {{}};
for (const f of fs.readdirSync(dir)) {{
  try {{ t.loadTables(fs.readFileSync(dir + "/" + f)); res[f] = "loaded"; }}
  catch (e) {{ res[f] = e.pyType || ("JS " + e.name + ": " + e.message); }}
}}
console.log(JSON.stringify(res));""")
    res = json.loads(out)
    assert res.pop("good.cpt") == "loaded"
    assert set(res.values()) == {"ValueError"}, {k: v for k, v in res.items() if v != "ValueError"}


@needs_program("node", "the JavaScript reader")
def test_js_vllm_dialect_random_differential(tmp_path):
    """The JS runtime agrees with Python in the serving dialect ("vllm": spans, captures, region_malformed
    events, prompt text held back and kept out of chunks, input_text, parse_response) on generated templates
    (tests/strategies.py, with bodies that fail to parse and lookbehind-led delimiters) and on random texts
    for every vector template, each fed in random pieces, half of them with the prompt ending mid-text."""
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as hst

    from strategies import VALUE_PIECES, compiles, templates as gen_templates, texts_for

    items = []

    @settings(max_examples=120, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(hst.data())
    def collect(data):
        tpl = data.draw(gen_templates(failing=True))
        assume(compiles(tpl))
        texts = [(data.draw(hst.sampled_from(["", "<|A|>", "x<|A|>a<"])), data.draw(texts_for(tpl, VALUE_PIECES)))
                 for _ in range(3)]
        items.append((tpl, texts))

    collect()
    seed = random.randrange(10**6)
    n = mv.fuzz_templates(tmp_path, items, seed=seed, dialect="vllm")
    n += mv.fuzz(tmp_path, per_template=6, seed=seed, dialect="vllm")
    assert any(f.name.startswith("gen") for f in tmp_path.glob("*.json"))
    note = (f"vectors kept in {tmp_path} (generated templates: gen*.json); bundled ones reproduce with: "
            f"python tests/make_vectors.py --fuzz 6 --seed {seed} --dialect vllm --dir /tmp/fz && "
            "node js/run_vectors.mjs /tmp/fz\n")
    assert _run_js_vectors(tmp_path, note)["passed"] >= n


@needs_program("node", "the JavaScript reader")
def test_js_start_guards_match_python(tmp_path):
    """Per mode and character class, the JS runtime guards attempt starts with the same lookbehinds as Python
    (`chatparse.runtime.regex.lead_assert.start_guards`): the JS guard is the head of the pattern's translation,
    which must be the translation of the lookbehind Python runs, for every vector template and for patterns
    whose lookbehind has classes, alternatives, a negation or a lookahead, or that share a mode with a
    pattern without one."""
    extra = {
        "g_classes": {"start_anchor": "<s>", "fields": {
            "a": {"open": "<a>", "close_pattern": r"(?<=[\])}])\s*;"},
            "b": {"open_pattern": r"(?<![\w.])@(?P<n>\w+)", "close_pattern": r"(?<=\n|;)\n?", "transform": {"n": "{n}"}},
            "content": {"close_pattern": r"(?<!\\)(?:END|STOP)"}}},
        "g_mixed": {"start_anchor": "<s>", "fields": {
            "a": {"open_pattern": r"(?<=z)<a>", "close_pattern": r"(?<=['\"](?=\s))\s*</a>"},
            "b": {"open_pattern": r"(?<=y)<b>", "close": "</b>"},
            "c": {"open": "[c]", "close": "[/c]"},
            "d": {"open_pattern": r"(?<=x)#d|#D", "close": "#"}}},
    }
    tables = {p.stem: load(p) for p in sorted(VECTORS.glob("*.cpt"))}
    for name, tpl in extra.items():
        tables[name] = compile_template(tpl).raw_tables
    want = {}
    for name, raw in tables.items():
        t = Tables(raw)
        modes = []
        for mode in t.modes:
            if mode.guards is None:
                modes.append(None)
                continue
            modes.append([None if g is None else [translate_js(rx.pattern)["source"] for rx in g] for g in mode.guards])
        want[name] = modes
    assert any(m is not None for modes in want.values() for m in modes)
    paths = {}
    for name, raw in tables.items():
        path = VECTORS / f"{name}.cpt"
        if name in extra:
            path = tmp_path / f"{name}.cpt"
            path.write_bytes(dumps(raw))
        paths[name] = str(path)
    out = _node(f"""
const t = (await import({json.dumps(str(ROOT / 'js' / 'chatparse.mjs'))}));
const paths = {json.dumps(paths)};
const res = {{}};
for (const [name, path] of Object.entries(paths)) {{
  const tables = t.loadTables(fs.readFileSync(path));
  res[name] = tables.modes.map((m) => (m.guards === null ? null : m.guards.map((g) => (g === null ? null : g.map((rx) => rx.source)))));
}}
console.log(JSON.stringify(res));""")
    got = json.loads(out)
    assert got == want
