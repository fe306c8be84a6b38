"""The C runtime's JSON (native/src/value.h, json.c: the value model every part of libchatparse shares) reads
and writes JSON exactly as Python's json module does:

* ``cp_json_parse`` is ``json.loads``: the same value, or the same error class and message (offsets in code
  points, NaN/Infinity, duplicate keys, lone surrogates, the 4300-digit limit, a BOM), on thousands of mutated
  JSON texts;
* ``cp_json_dump`` is ``json.dumps`` with the default options, with ``separators=(",", ":"),
  ensure_ascii=False`` (the table format's compact form) and with ``sort_keys=True, indent=1``: floats spelled as
  ``repr`` on random doubles of every magnitude; a deep copy is equal to its original.

It builds `chatparse-json` (native/tools/chatparse_json.c) with CMake into build/native-pytest: a skip without
CMake or PCRE2, a failure under ``CHATPARSE_REQUIRE_DEPS`` (tests/deps.py).
"""

from __future__ import annotations

import json
import random
import struct
import subprocess
from pathlib import Path

import pytest
from native_build import build_native

ROOT = Path(__file__).resolve().parents[1]

SEEDS = [
    '{"a": [1, 2.5, -0.0, 1e16, 1e-5, 123456789012345678901234567890, "x\\u00e9\\ud83d\\ude00\\ud800"], '
    '"b": {"c": null, "a": true}, "a": false}',
    "[NaN, Infinity, -Infinity, 0.1, 1E400, -1e-400, 5e-324, 1.7976931348623157e308, -9223372036854775808, "
    "9223372036854775808]",
    '"\\u12"', '  {"k" : "v\\n\\t\\"\\\\\\/\\b\\f\\r"}  ', '[1,2,{"x":[]},{}]', '"é😀\x7f\x01"', "-12.5e+3",
    '{"a":{"a":{"a":[[[]]]}}}', '"\\ud83d\\u0041"', '"\\ud83d\\ud83d\\ude00"', "1" * 4301, "-" + "1" * 4301,
    "[" + "9" * 400 + "]", "\ufeff[1]", "[1,]", '{"a":1,}', "1.e5", '"\\x"', "[\n1,\n2 3]", "\u2028\"\u2028\"",
]
ALPHABET = list('{}[]",:.-+eE0123456789 \n\tnulltruefalseNaNInfinity\\u"abé😀\x00\x1f\ud800')


def _mutate(rng: random.Random, s: str) -> str:
    chars = list(s)
    for _ in range(rng.randint(0, 4)):
        op = rng.random()
        if op < 0.3 and chars:
            del chars[rng.randrange(len(chars))]
        elif op < 0.6:
            chars.insert(rng.randint(0, len(chars)), rng.choice(ALPHABET))
        elif chars:
            chars[rng.randrange(len(chars))] = rng.choice(ALPHABET)
    return "".join(chars)


def _python(text: str) -> list:
    try:
        v = json.loads(text)
    except (ValueError, RecursionError) as e:
        return [f"E {type(e).__name__}: {e}"]
    return ["O " + json.dumps(v), "C " + json.dumps(v, separators=(",", ":"), ensure_ascii=False),
            "S " + json.dumps(v, sort_keys=True, indent=1).replace("\n", "\\n")]


@pytest.fixture(scope="module")
def tool() -> Path:
    build = build_native(ROOT / "build" / "native-pytest", ("chatparse-json",))
    return build / "chatparse-json"


def _compare(tool: Path, texts: list) -> None:
    data = b"".join(b"%d\n" % len(b) + b for b in (t.encode("utf-8", "surrogatepass") for t in texts))
    out = subprocess.run([str(tool)], input=data, capture_output=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = out.stdout.decode("utf-8", "surrogatepass").split("\n")[:-1]
    assert "COPYDIFF" not in got
    want = [line for t in texts for line in _python(t)]
    assert len(got) == len(want)
    wrong = [(t, w, g) for t, w, g in zip((t for t in texts for _ in _python(t)), want, got) if w != g]
    assert not wrong, wrong[:3]


def test_loads_and_dumps_as_python_on_mutated_texts(tool):
    rng = random.Random(40)
    texts = list(SEEDS) + [_mutate(rng, rng.choice(SEEDS)) for _ in range(4000)]
    _compare(tool, texts)


def test_float_repr_as_python(tool):
    rng = random.Random(41)
    texts = []
    for _ in range(1500):
        floats = [struct.unpack("<d", rng.randbytes(8))[0] for _ in range(20)]
        floats += [rng.uniform(-1, 1) * 10 ** rng.randint(-25, 25) for _ in range(10)]
        floats += [round(rng.random(), rng.randint(1, 6)) * 10 ** rng.randint(-6, 18) for _ in range(10)]
        texts.append(json.dumps(floats))
    texts.append(json.dumps([1e16, 1e15, 1e-4, 1e-5, 0.1, 1.0, -0.0, 2.5e-308, 5e-324, 1.7976931348623157e308]))
    _compare(tool, texts)


def test_nesting_and_big_numbers(tool):
    texts = ["[" * 500 + "]" * 500, '{"a":' * 300 + "1" + "}" * 300, "1" * 4300, "-" + "1" * 4300,
             "0." + "3" * 5000, "1e-400", "-1e400", "[" + ",".join(str(2 ** k) for k in range(0, 200, 7)) + "]"]
    _compare(tool, texts)
