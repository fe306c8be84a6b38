"""Both runtimes validate table files identically (issue #19 item 1, FORMAT.md section 1 "What a reader must
check"):

* resealed mutants of valid files (tests/table_fuzz.py: structural edits of the header, both JSON sections and
  the arrays, with layout, template hash and checksum recomputed) are refused by Python and JavaScript with the
  same table-file error, or loaded by both and parsed into the same events and messages; no other exception, no
  hang. The default run takes 3,000 mutants (about 20 s); ``-m slow`` runs 20,000 (seed 20), and
  ``CHATPARSE_FUZZ_MUTANTS=N`` sets the default run's count;
* the same for 1,500 mutants of the bases with a token section (FORMAT.md 8.4, for vocabularies trained here):
  the JavaScript runtime makes the token section's checks in Python's order with Python's messages, and the
  Python token parser built from a loaded mutant parses token ids without crashing;
* the invalid-file conformance vectors (tests/vectors/invalid/: one resealed file per check, with the error
  both runtimes must give) are refused with exactly that message by both;
* a file's ``modes[].first`` must be its automaton's prefilter (the JS runtime uses it, the Python one derives
  a deeper one itself: any other value would make them parse differently).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from deps import needs_program

import table_fuzz as tf
from chatparse.runtime.tables.loader import loads

ROOT = Path(__file__).resolve().parents[1]
INVALID = ROOT / "tests" / "vectors" / "invalid"
NODE = shutil.which("node")
needs_node = needs_program("node", "the JavaScript reader")


def _check(stats: dict) -> None:
    assert not stats["crashes"], stats["crashes"][:5]
    assert not stats["disagreements"], stats["disagreements"][:5]
    assert stats["refused"] + stats["loaded"] == stats["mutants"]
    # the mutations reach both outcomes (a fuzzer that only produced garbage would prove little)
    assert stats["loaded"] > stats["mutants"] // 20 and stats["refused"] > stats["mutants"] // 2, stats


@needs_node
def test_resealed_mutants_same_decision_and_parse_in_both_runtimes(tmp_path):
    n = int(os.environ.get("CHATPARSE_FUZZ_MUTANTS", "3000"))
    _check(tf.run(seed=19, n=n, workdir=tmp_path, batch=3000))


@needs_node
def test_token_section_mutants_same_decision_in_both_runtimes(tmp_path):
    stats = tf.run(seed=21, n=1500, workdir=tmp_path, batch=1500, bases=tf.load_bases(tuple(tf.TOKEN_BASES)))
    _check(stats)
    # the token parser was built and run on loaded mutants, and refused some (what needs the compiled tables)
    assert stats["token_ids_run"] > 100 and stats["token_bind_refused"] >= 1, stats
    # most checks of FORMAT.md 8.4 were what refused a mutant (each check's own file: tests/vectors/invalid/)
    token_msgs = [m for m in stats["refusals"] if m.startswith(("token section", "tokens", "vocabulary hash"))]
    assert len(token_msgs) >= 25, sorted(token_msgs)


@needs_node
@pytest.mark.slow
def test_resealed_mutants_20000(tmp_path):
    """The full run (about 3 minutes): with ``-m slow`` only (tests/conftest.py deselects it otherwise)."""
    _check(tf.run(seed=20, n=20000, workdir=tmp_path))


# ------------------------------------------------------------------------------------------- invalid vectors


def _invalid_cases() -> list:
    return sorted(p.stem for p in INVALID.glob("*.cpt")) if INVALID.exists() else []


def test_invalid_vectors_exist_and_python_gives_their_error():
    cases = _invalid_cases()
    assert len(cases) >= 20, "tests/vectors/invalid/ is missing (python tests/make_invalid_vectors.py)"
    for name in cases:
        want = json.loads((INVALID / f"{name}.json").read_text(encoding="utf-8"))["error"]
        with pytest.raises(ValueError) as e:
            loads((INVALID / f"{name}.cpt").read_bytes())
        assert str(e.value) == want, name


@needs_node
def test_invalid_vectors_js_gives_their_error():
    out = subprocess.run([NODE, str(ROOT / "js" / "run_vectors.mjs"), str(INVALID), "--json"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


# ------------------------------------------------------------------------------------------- the prefilter


def test_first_must_be_the_automatons_prefilter():
    """Widening or narrowing `first` (what the JS runtime skips text by) is refused, with the same error as any
    other edit; the file as written loads."""
    data = tf.load_bases(("qwen3",))["qwen3"][0]
    h, t, m, b = tf.sections(data)
    meta = json.loads(m)
    assert loads(tf.reseal(h, t, tf.compact(meta), b))
    for edit in (lambda f: f[0][0].append([0x10FF00, 0x10FF01]), lambda f: f[0][0].pop(), lambda f: f.pop(),
                 lambda f: f.append(f[0])):
        bad = json.loads(m)
        edit(bad["modes"][0]["first"])
        with pytest.raises(ValueError, match=r"modes\[0\]\.first: not the prefilter the mode's automaton gives"):
            loads(tf.reseal(h, t, tf.compact(bad), b))
