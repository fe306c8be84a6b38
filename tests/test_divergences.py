"""Where chatparse deliberately differs from the reference: split-dependence, hangs, backtracking blow-ups.

Each test shows the reference's behaviour next to chatparse's, so a change on either side is noticed.
"""

from __future__ import annotations

import pytest
from transformers.utils.chat_parsing import ResponseParser as RefParser
from transformers.utils.chat_parsing import parse_response as ref_parse

import chatparse
from harness import RefTimeout, run_chatparse, run_reference, time_limit

OVERLAP = {
    "start_anchor": "<|A|>",
    "fields": {"x": {"open": ["<ab", "<abc>"], "close": "!"}},
}


def _stream(parser_cls, template, chunks, prefix=""):
    p = parser_cls(template, prefix=prefix)
    for c in chunks:
        p.feed(c)
    return p.finalize()[0]


def test_reference_answer_depends_on_the_split_chatparse_does_not():
    # The example: the reference commits "<ab" at the feed boundary and keeps "c>" as text.
    assert _stream(RefParser, OVERLAP, ["hi<abc", ">yo!bye"]) == {"x": "c>yo"}
    assert ref_parse("hi<abc>yo!bye", OVERLAP, prefix="") == {"x": "yo"}
    text = "hi<abc>yo!bye"
    for cut in range(len(text) + 1):
        assert _stream(chatparse.ResponseParser, OVERLAP, [text[:cut], text[cut:]]) == {"x": "yo"}
        # ...and between prefix and generation as well.
        assert _stream(chatparse.ResponseParser, OVERLAP, [text[cut:]], prefix="<|A|>" + text[:cut]) == {"x": "yo"}


def test_dollar_before_a_newline_that_is_not_final():
    # `$` also matches before a *final* "\n". Streamed, the reference treats the end of each feed as final.
    t = {"start_anchor": "<|A|>", "fields": {"content": {"close_pattern": "$"}, "x": {"open": "<x>", "close": "</x>"}}}
    text = "one\ntwo"
    ref_split = _stream(RefParser, t, ["one\n", "two"])
    assert ref_split == {"content": "two"}  # closed early at "one", then reopened: the first line is lost
    assert ref_parse(text, t, prefix="") == {"content": "one\ntwo"}
    for cut in range(len(text) + 1):
        assert _stream(chatparse.ResponseParser, t, [text[:cut], text[cut:]]) == {"content": "one\ntwo"}


def test_zero_width_open_and_close_refused_where_reference_hangs():
    t = {"start_anchor": "<|A|>", "fields": {"x": {"open_pattern": "(?:^|<e>)", "close_pattern": "(?:^|<e>)"}}}
    with pytest.raises(RefTimeout):
        with time_limit(1.0):
            ref_parse("<e>a<e>", t, prefix="")
    with pytest.raises(ValueError, match="Field 'x'.*empty string"):
        chatparse.parse_response("<e>a<e>", t, prefix="")


@pytest.mark.parametrize("name, content", [("tool", "text"), ("tool_calls", "json")])
def test_zero_width_open_and_close_meeting_at_one_offset_stop_where_reference_hangs(caplog, name, content):
    """Patterns that can both be empty only at some offsets pass the load check. Where a zero-width open and
    a zero-width close of its region meet at one offset, the reference opens and closes there forever
    (growing a list without bound); chatparse closes the region once, stops there and logs it, on every
    path and for every split (found by a long differential run, whose reference calls ran out of memory)."""
    t = {"start_anchor": "<|A|>", "fields": {name: {"open_pattern": "(?P<g>[^>]*)(?=[ab\\n])",
                                                     "close_pattern": "(?P<g>[^>]*)(?=[ab\\n])",
                                                     "content": content, "transform": {"g": "{g}", "c": "{content}"}}}}
    text = ">bx >bx <a><b\n\nb<a><<a>a//>b<a><<"
    chatparse.compile_template(t)  # not refused: at most offsets one of them consumes text
    from chatparse.runtime.oneshot import parse as oneshot

    want = run_chatparse(t, [text])
    if content == "text":
        with pytest.raises(RefTimeout):
            run_reference(t, text, seconds=0.5)
        assert want[:2] == ("ok", {name: {"g": "", "c": ""}})
    else:  # the first empty json body fails, in both, before any loop
        assert want[:2] == run_reference(t, text)[:2] == ("error", "ValueError")
    for cuts in ([], [2], [1, 2, 3, 5, 8]):
        chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
        caplog.clear()
        assert run_chatparse(t, chunks) == want
        if content == "text":
            assert f"field '{name}' opened and closed with zero width at offset 1" in caplog.text
    try:
        for lean in (True, False):
            oneshot.LEAN = lean
            try:
                got = ("ok", chatparse.parse_response(text, t, prefix=""))
            except ValueError as e:
                got = ("error", type(e).__name__)
            assert got == want[:2], lean
    finally:
        oneshot.LEAN = True


def test_exponential_backtracking_pattern_stays_linear():
    t = {"start_anchor": "<|A|>", "fields": {"x": {"open_pattern": "<(?:a|aa)+>", "close": "</x>"}}}
    compiled = chatparse.compile_template(t)
    assert all(p.exact for p in compiled.tables.patterns)  # decided by the tables, `regex` never runs on it
    # The reference's time grows ~1.6x per extra 'a' (0.03 s for 26 here): 40 'a's take far over a second.
    with pytest.raises(RefTimeout):
        with time_limit(1.0):
            ref_parse("<" + "a" * 40 + "b", t, prefix="")
    text = "<" + "a" * 200_000 + "b and then <aaa>body</x>"
    assert chatparse.parse_response(text, compiled, prefix="") == {"x": "body"}
    parser = compiled.parser(prefix="")
    for i in range(0, len(text), 4096):
        parser.feed(text[i:i + 4096])
    assert parser.finalize()[0] == {"x": "body"}


def test_stall_on_zero_width_implicit_close_matches_reference_one_shot(caplog):
    # A zero-width close of the empty implicit region stops the reference's parse; chatparse agrees (and logs).
    t = {"start_anchor": "<|A|>",
         "fields": {"content": {"close_pattern": "(?=<x>)"}, "x": {"open": "<y>", "close": "</y>"}}}
    text = "ab<x>cd<y>e</y>"
    ref = run_reference(t, text)
    assert ref[1] == {"content": "ab"}
    for cuts in ([], [3], [1, 2, 3, 4, 5, 6, 7]):
        chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
        caplog.clear()
        assert run_chatparse(t, chunks) == ref
        assert "rest of the text is ignored" in caplog.text
    caplog.clear()
    assert chatparse.parse_response(text, t, prefix="") == ref[1]  # the one-shot path
    assert "zero-width close of the empty implicit field at offset 2" in caplog.text
