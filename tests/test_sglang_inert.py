"""Inert deltas in chatparse's SGLang plugin: a detector whose parser is quiet in a region hands a delta in
which no delimiter can begin on as that region's text, without feeding its parser, and feeds those deltas in
one piece before the parser is next needed (`chatparse.integrations.sglang._InertDeltas`, `inert_state`).

This must not change a single delta. Here, the deltas with the inert paths on (`INERT`, with `VERIFY_INERT`:
a lagging feed whose events are not the text handed out raises) are compared with the deltas of the two
parsers fed every delta, as SGLang's streaming chat path gets them (`bench.sglang_families`):

* on every family's real-output corpus, in 4-character deltas and in a random chunking per case;
* on synthetic answers made of delimiter fragments (``<``, whitespace, ``<tool_call``, ``<｜``...) before a
  call, and on synthetic calls whose argument is made of closer and JSON fragments, for the four families the
  bench measures, in random chunkings and with the lag fed every 1 to `LAG` deltas (hypothesis, and a
  fixed set of seeds); with the inert check made to pass every delta these differ
  (`test_a_wrong_inert_check_is_caught`), so the comparison can fail;
* with SGLang's own reasoning parser in front of the plugin's tool parser, and the plugin's reasoning parser
  in front of SGLang's hand-written tool parser.

And the inert paths are really in use where the bench measures (`test_inert_in_use`).

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so.
"""

from __future__ import annotations

import logging
import random

import pytest
from deps import need_sglang
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


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


def _run(rp, fp, pieces: list[str]) -> list[tuple]:
    """Per delta (the last: the end of stream), (reasoning, normal text, calls) as SGLang's streaming chat
    path gets them (`bench.sglang_families.stream_steps`, on the given deltas)."""
    return sf.stream_steps(rp, fp, pieces)


def stream(side: str, family: str, case: dict, pieces: list[str]) -> list[tuple]:
    return _run(*sf._parsers(side, family, case, stream=True), pieces)


def both(side: str, family: str, case: dict, pieces: list[str], lag: int = plugin.LAG, make=None) -> tuple:
    """(deltas with the parsers fed every delta, deltas with the inert paths on, lag fed every `lag` deltas
    at most, and every lagging feed checked); `make` builds the parsers (default: `side`'s)."""
    make = make or (lambda: sf._parsers(side, family, case, stream=True))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(plugin, "INERT", False)
        fed = _run(*make(), pieces)
        mp.setattr(plugin, "INERT", True)
        mp.setattr(plugin, "VERIFY_INERT", True)
        mp.setattr(plugin, "LAG", lag)
        return fed, _run(*make(), pieces)


@pytest.mark.parametrize("family", FAMILIES)
def test_corpus_deltas_unchanged(family):
    sides = ["plugin_same"] + (["plugin"] if family in sf.HANDWRITTEN else [])
    for case in sf.corpus(family):
        rng = random.Random(f"{family}/{case.get('id')}")
        chunkings = [sf.deltas(case["output"], 4, family),
                     _pieces(case["output"], [rng.randint(1, 9) for _ in range(11)])]
        for side in sides:
            for pieces in chunkings:
                fed, inert = both(side, family, case, pieces, lag=rng.choice((1, 3, plugin.LAG)))
                assert inert == fed, (side, case.get("id"), pieces)


# per family: (the reasoning before the answer, fragments of an answer, a call, a call opened up to its string
# argument, what closes it, fragments of that argument)
_WORDS = ("a", "b c", "word", "x y z", " ", "  ", "\n", "\n\n", "\t")
SYNTHETIC = {
    "qwen3": ("<think>\nhm\n</think>\n\n",
              ("<", "<<", "<tool", "_call", ">", "<tool_call", "x<", "< ", "</", "</think>", "<|im_end", "|>"),
              '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
              '<tool_call>\n{"name": "get_weather", "arguments": {"city": "', '"}}\n</tool_call>',
              ("<", "</", "</tool_call", ">", '\\"', "}", "{", ":", ",")),
    "hermes": ("",
               ("<", "<<", "<tool", "_call", ">", "<tool_call", "x<", "< ", "</", "<|im_end", "|>"),
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
               '<tool_call>\n{"name": "get_weather", "arguments": {"city": "', '"}}\n</tool_call>',
               ("<", "</", "</tool_call", ">", '\\"', "}", "{", ":", ",")),
    "glm47": ("hm</think>",
              ("<", "<<", "<tool", "_call", ">", "<tool_call", "x<", "</", "<|user", "|>", "<arg_key>"),
              "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
              "<tool_call>get_weather<arg_key>city</arg_key><arg_value>", "</arg_value></tool_call>",
              ("<", "</", "</arg_value", "</tool_call", "<arg_key>", ">", '"', "}", "{")),
    "deepseek_v31": ("hm</think>",
                     ("<", "<｜", "｜>", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜end▁of▁sentence",
                      "x<", "</"),
                     '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}'
                     '<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
                     '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "',
                     '"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
                     ("<", "<｜", "<｜tool▁call▁end", "｜>", '\\"', "}", "{", ":", ",")),
}
# the prompt ends the bench gives each family (glm47's and deepseek_v31's open the reasoning)
PREFIX = {family: bd.SHAPES[family][0] for family in SYNTHETIC}


def synthetic_output(family: str, kind: str, fragments: list[str], escape: bool, second: bool) -> str:
    """An answer of `fragments`, then a call (`kind` "answer"); or a short answer, then a call whose string
    argument is `fragments` (JSON-escaped where the call is JSON and `escape`), then text, and a second call
    (`second`) (`kind` "call")."""
    reasoning, _, call, opened, closer, _ = SYNTHETIC[family]
    body = "".join(fragments)
    if kind == "answer":
        return reasoning + body + call
    if escape and family != "glm47":
        body = body.replace("\\", "\\\\").replace('"', '\\"')
    return reasoning + "Sure.\n" + opened + body + closer + "\nok then" + (call if second else "")


def _case(family: str, output: str) -> dict:
    """A case of `family` (its tools: those the output calls, `bench.sglang_families.tools_for`)."""
    return {"id": "synthetic", "output": output, "prefix": PREFIX[family]}


def _compare(family: str, kind: str, fragments: list[str], sizes: list[int], lag: int, escape: bool = False,
             second: bool = False) -> bool:
    case = _case(family, synthetic_output(family, kind, fragments, escape, second))
    pieces = _pieces(case["output"], sizes)
    fed, inert = both("plugin", family, case, pieces, lag)
    return fed == inert


def _fragments(family: str, kind: str) -> tuple:
    return _WORDS + SYNTHETIC[family][1 if kind == "answer" else 5]


SEEDS = 60


def _differences(family: str, kind: str) -> int:
    bad = 0
    for seed in range(SEEDS):
        rng = random.Random(seed)
        fragments = [rng.choice(_fragments(family, kind)) for _ in range(50)]
        sizes = [rng.randint(1, 6) for _ in range(7)]
        bad += not _compare(family, kind, fragments, sizes, rng.choice((1, 2, 3, plugin.LAG)),
                            escape=rng.random() < 0.5, second=seed % 2 == 1)
    return bad


@pytest.mark.parametrize("kind", ("answer", "call"))
@pytest.mark.parametrize("family", SYNTHETIC)
def test_synthetic_deltas_unchanged(family, kind):
    assert _differences(family, kind) == 0


@st.composite
def synthetic_runs(draw):
    family = draw(st.sampled_from(sorted(SYNTHETIC)))
    kind = draw(st.sampled_from(("answer", "call")))
    fragments = draw(st.lists(st.sampled_from(_fragments(family, kind)), max_size=40))
    sizes = draw(st.lists(st.integers(1, 9), min_size=1, max_size=8))
    return family, kind, fragments, sizes, draw(st.sampled_from((1, 2, 3, 64, plugin.LAG))), draw(st.booleans()), \
        draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(synthetic_runs())
def test_inert_on_equals_off(run):
    """Hypothesis: any answer or call argument of delimiter fragments, in any chunking, with the lag fed
    every 1 to `LAG` deltas, streams the same deltas with the inert paths on and off."""
    assert _compare(*run)


def test_a_wrong_inert_check_is_caught(monkeypatch):
    """With an inert check that passes every delta (an anchor no text holds, no leading whitespace), the
    detectors hand on text their parsers would hold or read as a delimiter: the comparisons above see it."""
    real = plugin.inert_state

    def passes_all(adapter, fields):
        got = real(adapter, fields)
        return None if got is None else ("\x00", "", *got[2:])

    monkeypatch.setattr(plugin, "inert_state", passes_all)
    with pytest.raises(AssertionError, match="inert deltas"):  # VERIFY_INERT sees the parser disagree
        _differences("hermes", "answer")
    monkeypatch.setattr(plugin, "VERIFY_INERT", False)
    monkeypatch.setattr(plugin, "INERT", True)
    bad = 0
    for family in SYNTHETIC:
        for kind in ("answer", "call"):
            for seed in range(10):
                rng = random.Random(seed)
                fragments = [rng.choice(_fragments(family, kind)) for _ in range(50)]
                case = _case(family, synthetic_output(family, kind, fragments, False, False))
                pieces = _pieces(case["output"], [rng.randint(1, 6) for _ in range(7)])
                with pytest.MonkeyPatch.context() as mp:
                    mp.setattr(plugin, "INERT", False)
                    fed = stream("plugin", family, case, pieces)
                bad += stream("plugin", family, case, pieces) != fed
    assert bad > 0


def _counting(detector) -> list:
    """A list that counts the feeds of `detector`'s parser (wrapping its bound `feed`)."""
    calls: list = []
    parser = detector._adapter._parser
    assert parser is not None, "the detector has not parsed yet"
    feed = parser.feed

    def counted(text):
        calls.append(text)
        return feed(text)

    parser.feed = counted
    return calls


@pytest.mark.parametrize("position", bd.POSITIONS)
@pytest.mark.parametrize("family", bd.FAMILIES)
def test_inert_in_use(family, position):
    """As served (both flags chatparse), both detectors' parsers are fed for a small share of the deltas of a
    long answer and of a long call argument (what the bench measures): the inert paths are really in use."""
    text = bd.output_text(family, 2_000, position)
    start = len(bd.head(family, position))
    rp, fp = bd._parsers("plugin", family)
    pieces = _pieces(text[start:start + 2_000], [4])
    for piece in sf.deltas(text[:start], 4, family) + pieces[:1]:
        bd._step(rp, fp, piece)
    counts = [_counting(rp.detector), _counting(fp.detector)]
    pieces = pieces[1:]
    for piece in pieces:
        bd._step(rp, fp, piece)
    for calls in counts:
        assert len(calls) < len(pieces) / 2, (len(calls), len(pieces))


@pytest.mark.parametrize("pair", ("sglang reasoning", "sglang tools"))
def test_with_sglangs_own_other_parser(pair):
    """``--tool-call-parser chatparse`` behind SGLang's own reasoning parser, and ``--reasoning-parser
    chatparse`` in front of SGLang's hand-written tool parser: the same deltas with the inert paths on and off,
    and the plugin's parser skips most deltas of a long answer."""
    family = "qwen3"
    tok = sf.plugin_tokenizer(family)
    prefix = bd.SHAPES[family][0]

    def make():
        reasoning = "qwen3" if pair == "sglang reasoning" else plugin.NAME
        rp = ReasoningParser(reasoning, stream_reasoning=True, tokenizer=tok, tool_call_parser_active=True,
                             prefix=prefix)
        tools = plugin.NAME if pair == "sglang reasoning" else "qwen25"
        return rp, FunctionCallParser([bd.TOOL], tools, tokenizer=tok, prefix=prefix)

    text = bd.output_text(family, 2_000)[:2_100] + SYNTHETIC[family][2] + "\nDone."
    pieces = sf.deltas(text, 4, family)
    fed, inert = both("", family, {}, pieces, make=make)
    assert inert == fed
    assert any(calls for _, _, calls in fed)  # (the call is served)
    rp, fp = make()
    ours = fp.detector if pair == "sglang reasoning" else rp.detector
    for piece in pieces[:20]:  # (past the reasoning)
        bd._step(rp, fp, piece)
    counted = _counting(ours)
    for piece in pieces[20:400]:
        bd._step(rp, fp, piece)
    assert len(counted) < 100
