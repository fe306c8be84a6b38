"""Table files from an untrusted source (issue #19): files with a valid, recomputed checksum that used to load
and then fail at run time, fail with an exception other than the table-file error, or take far longer to load
than their size warrants. Each check here holds in both runtimes (Python and `js/chatparse.mjs`), with the
same message, as FORMAT.md states it:

* a terminal state other than the dead state must accept a pattern (one that accepts nothing made the
  scanner raise ``TypeError: 'NoneType' object is not iterable`` while streaming);
* ``js.word`` must be a character class of the form FORMAT.md section 7 gives (JS threw a raw SyntaxError
  building its placeholder regex from an invalid one; Python did not look at it);
* no string in either JSON section may hold a lone surrogate (an escaped ``\\ud800`` in the template section
  raised a bare UnicodeEncodeError in Python);
* building the runtime tables is linear in the file's size (65,535 character classes, long single-character
  chains, many distinct self-loops: each used to take seconds to a minute).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from deps import needs_program

from chatparse import CompiledTemplate, compile_template, templates
from chatparse.compiler.writer import dumps
from chatparse.runtime.tables.loader import loads
from chatparse.runtime.tables.rules import prefilter_pairs
from chatparse.runtime.tables.layout import Tables

ROOT = Path(__file__).resolve().parents[1]
NODE = shutil.which("node")
HEADER = struct.Struct("<8sII7Q2I32s32s16s")
PREFIX = "chatparse table file: "
QWEN3 = dumps(compile_template(templates.get("qwen3")).raw_tables)


# ------------------------------------------------------------------------------------------- helpers


def _sections(data: bytes):
    h = list(HEADER.unpack_from(data, 0))
    t_off, t_len, m_off, m_len, d_off, d_len = h[4:10]
    return h, data[t_off:t_off + t_len], data[m_off:m_off + m_len], bytearray(data[d_off:d_off + d_len])


def _reseal(h: list, template: bytes, meta: bytes, blob: bytes, template_hash: bytes | None = None) -> bytes:
    """A file from its parts with a valid layout and SHA-256 trailer (what anyone can publish)."""
    h = list(h)
    m_off = 160 + len(template)
    d_off = (m_off + len(meta) + 7) & ~7
    h[3:10] = [d_off + len(blob) + 32, 160, len(template), m_off, len(meta), d_off, len(blob)]
    if template_hash is not None:
        h[12] = template_hash
    buf = bytearray(h[3])
    HEADER.pack_into(buf, 0, *h)
    buf[160:m_off] = template
    buf[m_off:m_off + len(meta)] = meta
    buf[d_off:d_off + len(blob)] = blob
    buf[-32:] = hashlib.sha256(bytes(buf[:-32])).digest()
    return bytes(buf)


def _edit_meta(data: bytes, fn) -> bytes:
    h, t, m, b = _sections(data)
    meta = json.loads(m)
    fn(meta)
    return _reseal(h, t, json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode(), b)


def _py(data: bytes) -> str:
    """What the Python loader makes of a file: "loaded" or the table-file error's message (any other
    exception fails the test)."""
    try:
        raw = loads(data)
        Tables(raw)
    except ValueError as e:
        assert str(e).startswith(PREFIX), f"not the table-file error: {type(e).__name__}: {e}"
        return str(e)
    return "loaded"


def _js(tmp_path: Path, files: dict[str, bytes], parse: bool = False) -> dict[str, str]:
    """The same for the JS runtime, one node process for all `files`: "loaded", the PyError's message when
    it is a ValueError, else "JS <class>: message". With `parse`, a loaded file also parses a text whose
    tool call goes through the transform (and so the placeholder regex built from ``js.word``)."""
    for name, data in files.items():
        (tmp_path / f"{name}.cpt").write_bytes(data)
    script = f"""
import fs from "node:fs";
const t = await import({json.dumps((ROOT / "js" / "chatparse.mjs").as_uri())});
const dir = {json.dumps(str(tmp_path))};
const res = {{}};
for (const f of fs.readdirSync(dir).filter((f) => f.endsWith(".cpt"))) {{
  const name = f.slice(0, -4);
  try {{
    const tables = t.loadTables(fs.readFileSync(dir + "/" + f));
    const call = '<tool_call>{{"name": "f", "arguments": {{}}}}</tool_call>';
    if ({json.dumps(parse)}) t.parseResponse(call, tables, {{ prefix: "" }});
    res[name] = "loaded";
  }} catch (e) {{
    res[name] = e.pyType === "ValueError" ? e.message : "JS " + (e.pyType || e.name) + ": " + e.message;
  }}
}}
console.log(JSON.stringify(res));"""
    out = subprocess.run([NODE, "--input-type=module", "-e", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


needs_node = needs_program("node", "the JavaScript reader")


# ------------------------------------------------------------------------------------------- terminal states


def _idle_terminal() -> tuple[bytes, dict]:
    """qwen3's file with one live, non-accepting state of mode 0 marked terminal (resealed)."""
    h, t, m, blob = _sections(QWEN3)
    meta = json.loads(m)
    raw = loads(QWEN3)
    mode = raw["modes"][0]
    acc, term = np.asarray(mode["acc"]), np.asarray(mode["term"])
    s = next(s for s in range(1, len(term)) if not term[s] and (acc[s] < 0).all())
    entry = next(a for a in meta["arrays"] if a["name"] == "mode0.term")
    blob[entry["offset"] + s] = 1
    return _reseal(h, t, m, blob), raw


def test_terminal_state_accepting_nothing_is_refused_at_load():
    data, raw = _idle_terminal()
    msg = _py(data)
    assert msg.startswith(PREFIX + "modes[0]: terminal state ") and "accepts no pattern" in msg, msg
    # the raw-dict path (`Tables`, what the compiler hands over) refuses it as well
    mode = dict(raw["modes"][0])
    term = np.array(mode["term"], dtype=bool)
    acc = np.asarray(mode["acc"])
    s = next(s for s in range(1, len(term)) if not term[s] and (acc[s] < 0).all())
    term[s] = True
    mode["term"] = term
    with pytest.raises(ValueError, match="terminal state other than 0 accepts no pattern"):
        Tables({**raw, "modes": [mode] + raw["modes"][1:]})
    # the control: the untouched file loads and streams
    ct = CompiledTemplate(raw["template"], raw)
    parser = ct.parser(prefix="")
    for ch in "<think>a</think>b<tool_call>":
        parser.feed(ch)


@needs_node
def test_terminal_state_accepting_nothing_is_refused_by_js(tmp_path):
    data, _ = _idle_terminal()
    res = _js(tmp_path, {"idle": data, "good": QWEN3})
    assert res["good"] == "loaded"
    assert res["idle"] == _py(data), res


# ------------------------------------------------------------------------------------------- js.word


GOOD_WORDS = ["[a-z]", "[^]", "[]", "[\\u{41}-\\u{5A}_\\-\\^]", "[^\\]\\[\\\\]", "[0-9A-Z_a-zé]", "[\\u{10FFFF}]",
              "[a-a]"]
BAD_WORDS = ["[z-a]", "[", "]", "abc", "\\w", "[\\q]", "[\\u{110000}]", "[\\u{1234567}]", "[\\u{}]", "[a-]",
             "[-a]", "[a-b-c]", "[[]", "[]]", "[a^]", "(", "[\\]", "[\\u41]", "[\\d]", "[a\\u{62]", "",
             "[\\u{5A}-\\u{41}]"]


def _with_word(word) -> bytes:
    return _edit_meta(QWEN3, lambda m: m["js"].update(word=word))


def test_js_word_checked_by_python():
    assert loads(QWEN3)["js"]["word"].startswith("[")  # qwen3's transform needs it: the compiler writes it
    for word in GOOD_WORDS + [None]:
        assert _py(_with_word(word)) == "loaded", word
    for word in BAD_WORDS:
        msg = _py(_with_word(word))
        assert msg.startswith(PREFIX + "js.word: ") and "FORMAT.md section 7" in msg, (word, msg)


@needs_node
def test_js_word_checked_by_js_the_same_way(tmp_path):
    files = {f"w{i}": _with_word(w) for i, w in enumerate(GOOD_WORDS + BAD_WORDS)}
    res = _js(tmp_path, files, parse=True)
    for i, w in enumerate(GOOD_WORDS + BAD_WORDS):
        want = "loaded" if w in GOOD_WORDS else _py(files[f"w{i}"])
        assert res[f"w{i}"] == want, (w, res[f"w{i}"], want)


@needs_node
def test_js_word_random_strings_agree(tmp_path):
    """Random strings near the grammar: both runtimes accept the same ones, and JS builds its regexes from
    every one it accepts (no raw SyntaxError)."""
    rng = random.Random(19)
    parts = ["[", "]", "^", "-", "\\", "a", "z", "é", "\\u{", "}", "41", "10FFFF", "110000", "\\-", "\\]", "𝔸", " "]
    words = set()
    while len(words) < 300:
        words.add("[" + "".join(rng.choice(parts) for _ in range(rng.randint(0, 6))) + rng.choice(["]", "", "]]"]))
    words = sorted(words)
    files = {f"r{i}": _with_word(w) for i, w in enumerate(words)}
    res = _js(tmp_path, files, parse=True)
    accepted = 0
    for i, w in enumerate(words):
        py = _py(files[f"r{i}"])
        assert res[f"r{i}"] == py, (w, res[f"r{i}"], py)
        accepted += py == "loaded"
    assert 20 < accepted < len(words) - 20, accepted


# ------------------------------------------------------------------------------------------- lone surrogates


def _with_surrogate(section: str, escape: str = "\\ud800") -> bytes:
    h, t, m, b = _sections(QWEN3)
    if section == "template":
        t2 = t.replace(b'"role":"assistant"', b'"role":"assistant' + escape.encode() + b'"')
        assert t2 != t
        # (the template hash is left as it was: both runtimes check this before the hash)
        return _reseal(h, t2, m, b)
    meta = m.replace(b'"chatparse_version":"', b'"note":"' + escape.encode() + b'","chatparse_version":"', 1)
    assert meta != m
    return _reseal(h, t, meta, b)


def test_lone_surrogate_refused_with_the_table_file_error():
    for section in ("template", "metadata"):
        for escape in ("\\ud800", "\\uDFFF", "\\ud83d", "\\ude00\\ud83d"):
            msg = _py(_with_surrogate(section, escape))
            assert msg == PREFIX + f"{section} section: a string holds a lone surrogate (an unpaired " \
                                   "\\ud800-\\udfff escape)", (section, escape, msg)
    # an escaped pair is one code point, not a lone surrogate (refused here only as a non-compact template)
    assert "compact" in _py(_with_surrogate("template", "\\ud83d\\ude00"))


@needs_node
def test_lone_surrogate_refused_by_js(tmp_path):
    files = {f"{s}{i}": _with_surrogate(s, e) for s in ("template", "metadata")
             for i, e in enumerate(("\\ud800", "\\ude00\\ud83d"))}
    res = _js(tmp_path, files)
    for name, data in files.items():
        assert res[name] == _py(data), (name, res[name])


# ------------------------------------------------------------------------------------------- load time


def _hostile(starts, ids, n_classes: int, mode0) -> bytes:
    """qwen3's template with made-up class map and mode-0 automaton (`mode0(W)` -> trans, acc, term, start);
    every other mode dead."""
    raw = dict(compile_template(templates.get("qwen3")).raw_tables)
    raw.update(class_starts=np.asarray(starts), class_ids=np.asarray(ids), n_classes=n_classes)
    modes = []
    for mi, m in enumerate(raw["modes"]):
        w = len(m["patterns"])
        if mi == 0:
            trans, acc, term, start = mode0(w)
        else:
            trans, acc, term, start = (np.zeros((1, n_classes), np.int64), np.full((1, w), -1, np.int8),
                                       np.ones(1, bool), 0)
        # (`first` must be the automaton's own prefilter, FORMAT.md section 4)
        first = prefilter_pairs(trans, acc, term, start, np.asarray(starts), np.asarray(ids))
        modes.append({"patterns": m["patterns"], "trans": trans, "eot": np.zeros(len(trans), np.int64),
                      "acc": acc, "term": term, "start0": start, "startN": start, "first": first})
    raw["modes"] = modes
    return dumps(raw)


def _many_classes() -> bytes:
    """The compiled qwen3 tables with every code point below U+FFFF a class of its own (65,535 classes)."""
    raw = dict(compile_template(templates.get("qwen3")).raw_tables)
    starts, ids = np.asarray(raw["class_starts"]).astype(np.int64), np.asarray(raw["class_ids"])
    n = 65535
    old = ids[np.searchsorted(starts, np.arange(n), side="right") - 1]
    raw.update(class_starts=np.arange(n), class_ids=np.arange(n), n_classes=n)
    raw["modes"] = [{**m, "trans": np.asarray(m["trans"])[:, old]} for m in raw["modes"]]
    return dumps(raw)


def _chain(n_states: int = 200_000) -> bytes:
    """Two classes ("a" and the rest); from the start, one step into a chain of "a" steps through every
    state (each state a `jump` candidate of 256 characters)."""
    def mode0(w):
        trans = np.zeros((n_states, 2), np.int64)
        trans[1, 1] = 2
        trans[2:n_states - 1, 0] = np.arange(3, n_states)
        acc = np.full((n_states, w), -1, np.int8)
        acc[n_states - 1, 0] = 0
        term = np.zeros(n_states, bool)
        term[[0, n_states - 1]] = True
        return trans, acc, term, 1
    return _hostile([0, 97, 98], [1, 0, 1], 2, mode0)


def _loops(n_states: int = 64, n: int = 65535) -> bytes:
    """65,535 classes; every state loops on a different random half of them (each a `loop` regex of
    ~30,000 ranges)."""
    rng = np.random.default_rng(19)

    def mode0(w):
        trans = np.zeros((n_states, n), np.int64)
        for s in range(1, n_states - 1):
            trans[s, rng.random(n) < 0.5] = s
            trans[s, n - 1] = s
            trans[s, 0] = n_states - 1
        acc = np.full((n_states, w), -1, np.int8)
        acc[n_states - 1, 0] = 0
        term = np.zeros(n_states, bool)
        term[[0, n_states - 1]] = True
        return trans, acc, term, 1
    return _hostile(np.arange(n), np.arange(n), n, mode0)


def _calls(fn) -> tuple:
    """(fn's result, the function calls it made: Python functions and built-ins, counted by cProfile).

    A count of work done, not a time, so it does not vary with the machine or its load. It counts work in
    Python, and in C where Python calls it per item (a `list.append` per chain step); the `re` compiler is
    Python (`re._parser`), so the regexes built count too. Whole-matrix numpy calls count once."""
    import cProfile
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    try:
        out = fn()
    finally:
        prof.disable()
    return out, sum(st[1] for st in pstats.Stats(prof).stats.values())


# Calls per byte of the file that building its runtime tables may make: linear in the file's size. Measured
# (2026-12-07): the bundled qwen3 file 0.7 (14 KB: the fixed work dominates), the three files below 0.13
# (65,535 classes), 1.23 (chains: the `jump` budget, 8 steps a state, 65,536 more a mode) and 0.20 (loops).
# Without the budgets the chains take 200,000 x 256 steps (about 30 calls per byte) and the loops compile
# 62 regexes of ~30,000 ranges each.
CALLS_PER_BYTE = 2.0


@pytest.mark.parametrize("make", [_many_classes, _chain, _loops])
def test_load_time_linear_in_file_size(make):
    """Each file is 3-5 MB; before, building its runtime tables took 3 s, 63 s and 3.4 s (JS: well under a
    second): the per-state work is whole-matrix numpy and the optional C-level accelerations have budgets.
    Counted, not timed: the calls made while loading and building the tables stay below `CALLS_PER_BYTE`
    per byte of the file."""
    data = make()
    assert len(data) > 3_000_000
    def build():
        raw = loads(data)
        return raw, Tables(raw)

    (raw, tables), calls = _calls(build)
    assert calls <= CALLS_PER_BYTE * len(data), \
        f"{make.__name__}: {len(data):,} bytes took {calls:,} calls ({calls / len(data):.2f} per byte)"
    # and the tables work: the scanner runs over text (a made-up automaton may find made-up delimiters, whose
    # bodies may then fail to parse: ValueError, as for any template)
    ct = CompiledTemplate(raw["template"], raw)
    try:
        ct.parse("a" * 300 + "<think>b</think>c" + "a" * 300, prefix="")
    except ValueError as e:
        assert "chatparse" not in str(e), e
    assert tables.modes
