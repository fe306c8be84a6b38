"""The C runtime's table loader (native/, issue #40) decides every table file as the Python loader does
(FORMAT.md section 1, "What a reader must check", steps 1-8 and 8.4): same refusal message, or loaded.

* native/ builds with CMake (into build/native-pytest, incrementally): a skip where CMake or PCRE2
  (libpcre2-dev) is missing, a failure under ``CHATPARSE_REQUIRE_DEPS`` (tests/deps.py);
* the invalid-file vectors (tests/vectors/invalid/) are refused in C with exactly the vector's error, through
  `chatparse-load` and through the vector runner `chatparse-vectors` (its summary line is js/run_vectors.mjs's);
* every vector table loads in C; truncations and bit flips of one get Python's verdict;
* the resealed-mutant table fuzz (tests/table_fuzz.py) with C as a third reader: 600 mutants here (seconds;
  ``CHATPARSE_NATIVE_FUZZ_MUTANTS=N`` sets the count), ``python tests/table_fuzz.py --n 20000`` for the long
  run; with ``-m slow``, 3,000 mutants through the loader built with ASan+UBSan.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from deps import needs_program
from native_build import build_native

import table_fuzz as tf

ROOT = Path(__file__).resolve().parents[1]
VECTORS = ROOT / "tests" / "vectors"
INVALID = VECTORS / "invalid"


@pytest.fixture(scope="module")
def loader() -> Path:
    return build_native(ROOT / "build" / "native-pytest", ("chatparse-load",)) / "chatparse-load"


def _invalid() -> list:
    return sorted(INVALID.glob("*.json"))


def test_invalid_vectors_are_refused_in_c_with_their_error(loader):
    vectors = [json.loads(p.read_text(encoding="utf-8")) for p in _invalid()]
    assert len(vectors) >= 20
    got = tf.c_outcomes(loader, [INVALID / v["tables"] for v in vectors])
    wrong = [(v["tables"], g, v["error"]) for v, g in zip(vectors, got) if g != {"refused": v["error"]}]
    assert not wrong, wrong[:5]


def test_vector_runner_on_the_invalid_vectors():
    runner = build_native(ROOT / "build" / "native-pytest", ("chatparse-vectors",)) / "chatparse-vectors"
    n = len(_invalid())
    out = subprocess.run([str(runner), str(INVALID), "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[-2] == f"{n}/{n} vector cases pass ({n} files)"
    assert json.loads(lines[-1]) == {"total": n, "passed": n, "failed": 0, "files": n}


def test_vector_runner_fails_a_wrong_vector(tmp_path):
    """A vector whose error the loader does not give is a FAIL line and exit status 1 (the runner can fail)."""
    runner = build_native(ROOT / "build" / "native-pytest", ("chatparse-vectors",)) / "chatparse-vectors"
    src = json.loads((INVALID / "checksum.json").read_text(encoding="utf-8"))
    shutil.copy(INVALID / src["tables"], tmp_path / src["tables"])
    (tmp_path / "checksum.json").write_text(json.dumps({**src, "error": src["error"] + "!"}), encoding="utf-8")
    out = subprocess.run([str(runner), str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert out.stdout.splitlines()[0].startswith("FAIL checksum.json: ")
    assert out.stdout.splitlines()[-1] == "0/1 vector cases pass (1 files)"


def test_every_vector_table_loads_in_c(loader):
    files = sorted(VECTORS.glob("*.cpt"))
    assert files
    got = tf.c_outcomes(loader, files)
    assert [g for g in got if g != {"loaded": True}] == []


def test_truncations_and_bit_flips_get_pythons_verdict(loader, tmp_path):
    data = (VECTORS / "qwen3.cpt").read_bytes() if (VECTORS / "qwen3.cpt").exists() \
        else sorted(VECTORS.glob("*.cpt"))[0].read_bytes()
    cases = {}
    for n in (0, 1, 8, 100, 191, 192, len(data) // 2, len(data) - 1):
        cases[f"cut{n}"] = data[:n]
    cases["pad"] = data + b"\0"
    for i, bit in ((0, 0), (9, 1), (20, 3), (200, 5), (len(data) - 40, 2), (len(data) - 1, 7)):
        b = bytearray(data)
        b[i] ^= 1 << bit
        cases[f"flip{i}"] = bytes(b)
    files = []
    for name, b in cases.items():
        (tmp_path / f"{name}.cpt").write_bytes(b)
        files.append(tmp_path / f"{name}.cpt")
    got = tf.c_outcomes(loader, files)
    want = [tf.python_verdict(b) for b in cases.values()]
    assert got == want


@needs_program("node", "the JavaScript reader (the fuzz runs all three)")
def test_table_fuzz_c_decides_as_python(loader, tmp_path):
    n = int(os.environ.get("CHATPARSE_NATIVE_FUZZ_MUTANTS", "600"))
    stats = tf.run(seed=40, n=n, workdir=tmp_path, batch=n, native=loader)
    assert not stats["crashes"], stats["crashes"][:5]
    assert not stats["disagreements"], stats["disagreements"][:5]
    assert stats["c_refused"] + stats["c_loaded"] == stats["mutants"] == n
    assert stats["c_loaded"] > n // 20 and stats["c_refused"] > n // 2, stats


@needs_program("node", "the JavaScript reader (the fuzz runs all three)")
@pytest.mark.slow
def test_table_fuzz_c_under_sanitizers(tmp_path):
    """3,000 mutants and every vector table through the loader built with ASan+UBSan (no recovery: a report
    ends the process, which is a crash here). With ``-m slow`` only."""
    asan = build_native(ROOT / "build" / "native-asan", ("chatparse-load",), sanitize=True) / "chatparse-load"
    assert all(g == {"loaded": True} for g in tf.c_outcomes(asan, sorted(VECTORS.glob("*.cpt"))))
    stats = tf.run(seed=41, n=3000, workdir=tmp_path, batch=1500, native=asan)
    assert not stats["crashes"] and not stats["disagreements"], (stats["crashes"] + stats["disagreements"])[:5]
    assert stats["c_refused"] + stats["c_loaded"] == stats["mutants"]
