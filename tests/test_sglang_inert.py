"""One request's two detectors in chatparse's SGLang plugin share the reasoning detector's parse.

SGLang runs a request's reasoning detector, then hands its normal text on to the tool detector
(`serving_chat._process_reasoning_stream`, then `_process_tool_call_stream`). The plugin's tool detector links
to the plugin's reasoning detector of the same request (`chatparse.integrations.sglang._Tagged`) and, while the
reasoning detector finds a delta to be answer text only (or call text only) and the tool parser is in its
passthrough region (or in a call) holding nothing, hands the text on (or nothing) without feeding its own
parser (fed later in one piece: `_catch_up`).
This must not change a single delta. Here, the deltas with sharing (`SHARE`) are compared with the deltas of
the two parsers each fed every delta, as SGLang's streaming chat path gets them (`bench.sglang_families`):

* on every family's real-output corpus, in 4-character deltas and in a random chunking per case;
* on synthetic answers made of opener fragments (``<``, ``<<``, whitespace, ``<tool_call``...) before a call,
  in random chunkings, with `VERIFY_SHARING` on (a catch-up that is not the skipped passthrough text raises);
  with the guard on the delta's characters removed (`opener_firsts` empty) these differ
  (`test_the_synthetic_answers_catch_a_wrong_skip`), so the comparison can fail;
* on synthetic calls whose string argument is made of closer and JSON fragments (``</tool_call``, ``<``,
  ``\\"``, ``}``...), escaped or not, some followed by a second call, in random chunkings, on the base-format
  and the serving-grade templates, with `VERIFY_SHARING` on;
* a request whose reasoning parser is not the plugin's (only ``--tool-call-parser chatparse``) is never
  linked, and the plugin's tagged text handed to another tool parser is the same text.

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so.
"""

from __future__ import annotations

import logging
import random

import pytest
from deps import need_sglang


need_sglang()

from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402

from bench import sglang_detectors as bd  # noqa: E402
from bench import sglang_families as sf  # noqa: E402
from chatparse.integrations import sglang as plugin  # noqa: E402

logging.getLogger("sglang").setLevel(logging.CRITICAL)
logging.getLogger("sglang.srt.parser.response_template").setLevel(logging.CRITICAL)
plugin.register()

FAMILIES = sf.families()


def _pieces(text: str, sizes: list[int]) -> list[str]:
    out, i, k = [], 0, 0
    while i < len(text):
        n = sizes[k % len(sizes)]
        out.append(text[i:i + n])
        i, k = i + n, k + 1
    return out


def stream(side: str, family: str, case: dict, pieces: list[str]) -> list[tuple]:
    """Per delta (the last: the end of stream), (reasoning, normal text, calls) as SGLang's streaming chat
    path gets them (`bench.sglang_families.streamed`, on the given deltas)."""
    rp, fp = sf._parsers(side, family, case, stream=True)
    out = []
    for piece in pieces + [None]:
        reasoning, text = "", piece or ""
        if rp is not None:
            r, t = rp.parse_stream_end() if piece is None else rp.parse_stream_chunk(piece)
            reasoning, text = r or "", t or ""
        items: list = []
        if fp is not None:
            if text:
                text, items = fp.parse_stream_chunk(text)
                items = list(items)
            if piece is None:
                end_text, end_items = fp.parse_stream_end()
                text += end_text or ""
                items += list(end_items)
        out.append((reasoning, text, [it.model_dump() for it in items]))
    return out


def both(monkeypatch, side: str, family: str, case: dict, pieces: list[str]) -> tuple[list, list]:
    """(deltas with two parsers fed every delta, deltas with the shared parse)."""
    monkeypatch.setattr(plugin, "SHARE", False)
    separate = stream(side, family, case, pieces)
    monkeypatch.setattr(plugin, "SHARE", True)
    return separate, stream(side, family, case, pieces)


@pytest.fixture
def verify(monkeypatch):
    monkeypatch.setattr(plugin, "VERIFY_SHARING", True)


@pytest.mark.parametrize("family", FAMILIES)
def test_corpus_deltas_unchanged(family, monkeypatch, verify):
    sides = ["plugin_same"] + (["plugin"] if family in sf.HANDWRITTEN else [])
    for case in sf.corpus(family):
        rng = random.Random(f"{family}/{case.get('id')}")
        chunkings = [sf.deltas(case["output"], 4, family),
                     _pieces(case["output"], [rng.randint(1, 9) for _ in range(11)])]
        for side in sides:
            for pieces in chunkings:
                separate, shared = both(monkeypatch, side, family, case, pieces)
                assert shared == separate, (side, case.get("id"), pieces)


_FRAGMENTS = ("<", "<<", " ", "\n", "  ", "<tool", "_call", ">", "a", "b c", "word", "<tool_call", "\t", "x<",
              "< ", "</", "\n\n")
_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
SYNTHETIC = ("qwen3", "hermes")
SEEDS = 120


def synthetic(family: str, seed: int) -> tuple[dict, list[str]]:
    """A case of `family` whose answer is random opener fragments, then a call, and a random chunking."""
    rng = random.Random(seed)
    body = "".join(rng.choice(_FRAGMENTS) for _ in range(60))
    opening = "<think>\nhm\n</think>\n\n" if family == "qwen3" else ""
    case = dict(sf.corpus(family)[0], output=opening + body + _CALL)
    return case, _pieces(case["output"], [rng.randint(1, 6) for _ in range(7)])


def _differences(monkeypatch, family: str) -> int:
    bad = 0
    for seed in range(SEEDS):
        case, pieces = synthetic(family, seed)
        separate, shared = both(monkeypatch, "plugin_same", family, case, pieces)
        bad += shared != separate
    return bad


@pytest.mark.parametrize("family", SYNTHETIC)
def test_synthetic_answers_unchanged(family, monkeypatch, verify):
    assert _differences(monkeypatch, family) == 0


_CALL_FRAGMENTS = ("a", "bc d", " ", "\n", "<", "</", "</tool_call", ">", '\\"', "}", "{", ":", ",", "x y z", "\t")


@pytest.mark.parametrize("side", ("plugin_same", "plugin"))
@pytest.mark.parametrize("family", SYNTHETIC)
def test_synthetic_calls_unchanged(family, side, monkeypatch, verify):
    base = sf.corpus(family)[0]
    for seed in range(SEEDS):
        rng = random.Random(seed)
        body = "".join(rng.choice(_CALL_FRAGMENTS) for _ in range(50))
        arg = body.replace("\\", "\\\\").replace('"', '\\"') if rng.random() < 0.5 else body
        output = (("<think>\nhm\n</think>\n\n" if family == "qwen3" else "") + "Sure.\n<tool_call>\n"
                  '{"name": "get_weather", "arguments": {"city": "' + arg + '"}}\n</tool_call>\nok then'
                  + ('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>' if seed % 2 else ""))
        case = dict(base, output=output)
        pieces = _pieces(output, [rng.randint(1, 6) for _ in range(7)])
        separate, shared = both(monkeypatch, side, family, case, pieces)
        assert shared == separate, (seed, pieces)


def test_the_synthetic_answers_catch_a_wrong_skip(monkeypatch):
    """Without the guard on a delta's characters (a delta in which an opener may begin is fed), the shared
    parse hands on text the tool parser would hold or read as a call: the comparison above sees it."""
    monkeypatch.setattr(plugin, "_models", {})
    monkeypatch.setattr(plugin, "opener_firsts", lambda template: (frozenset(), False))
    assert sum(_differences(monkeypatch, family) for family in SYNTHETIC) > 0


@pytest.mark.parametrize("position", bd.POSITIONS)
@pytest.mark.parametrize("family", bd.FAMILIES)
def test_linked_and_skipping(family, position):
    """As served (both flags chatparse), the tool detector links to the reasoning detector and skips its
    parser for most deltas of a long answer, and of a long call's argument where the call is JSON (what the
    bench measures): the sharing is really in use."""
    text = bd.output_text(family, 2_000, position)
    start = len(bd.head(family, position))
    rp, fp = bd._parsers("plugin", family)
    tool = fp.detector
    skipped = 0
    for piece in sf.deltas(text[:start], 4, family) + _pieces(text[start:start + 2_000], [4]):
        before = len(tool._skipped)
        bd._step(rp, fp, piece)
        skipped += len(tool._skipped) > before
    model = plugin._model(sf.plugin_tokenizer(family), None)
    if model.tool_firsts is None:
        assert tool._peer is None and skipped == 0
    elif position == "call" and model.call_firsts is None:  # (a few deltas of the answer before the call)
        assert tool._peer is rp.detector and skipped < 10
    else:
        assert tool._peer is rp.detector and skipped > 250


def test_not_linked_without_the_plugins_reasoning_detector():
    """``--tool-call-parser chatparse`` with SGLang's own reasoning parser: no link, every delta parsed."""
    family = "qwen3"
    tok = sf.plugin_tokenizer(family)
    prefix = bd.SHAPES[family][0]
    rp = ReasoningParser("qwen3", stream_reasoning=True, tokenizer=tok, tool_call_parser_active=True, prefix=prefix)
    fp = FunctionCallParser([bd.TOOL], plugin.NAME, tokenizer=tok, prefix=prefix)
    for piece in sf.deltas(bd.output_text(family, 2_000)[:2_100], 4, family):
        bd._step(rp, fp, piece)
    assert fp.detector._peer is None and not fp.detector._skipped


def test_tagged_text_to_another_tool_parser():
    """``--reasoning-parser chatparse`` with SGLang's hand-written tool parser: the tagged text it gets is
    the same text (a `str`), and the plugin's reasoning detector tags only one."""
    family = "qwen3"
    tok = sf.plugin_tokenizer(family)
    prefix = bd.SHAPES[family][0]
    rp = ReasoningParser(plugin.NAME, stream_reasoning=True, tokenizer=tok, tool_call_parser_active=True,
                         prefix=prefix)
    tagged = []
    for piece in sf.deltas(bd.output_text(family, 2_000)[:400], 4, family):
        _, normal = rp.parse_stream_chunk(piece)
        if type(normal) is plugin._Tagged:
            tagged.append(normal)
            assert isinstance(normal, str) and str(normal) == normal
    assert len(tagged) == 1
