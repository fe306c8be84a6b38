"""chatparse's serving dialect against vLLM 0.33.0's copy of the interpreter (`vllm.parser.chat_parsing`).

Claim under test: with ``dialect="vllm"``, for every template, text and chunking, chatparse gives what vLLM's
`ResponseParser` gives when fed the whole text in one piece: the same events (spans, captures and malformed
regions with their errors included, chunks compared after merging adjacent ones of a field), the same
message or exception, the same `input_text`; and `parse_response(..., dialect="vllm")` what vLLM's
`parse_response` gives. The one sanctioned difference is chunking: vLLM's answer may depend on where the text
was split, chatparse's never does.

vLLM's runs get a time limit (a loop there is the input's: the example is discarded); chatparse's run outside
it, under a limit of their own whose expiry fails the test, so a chatparse error or hang is never a discard.
The discards, with their reasons, and the timing rule's cases (chatparse earlier, vLLM committed early, the
stated exception) are counted and printed at the end of the module's run.

vllm==0.33.0 pins transformers < 5.21, which lacks the transformers reference the rest of the suite needs, so
it lives in an environment of its own: `.ci/run` makes it and runs this file there. Elsewhere it skips.
"""

from __future__ import annotations

import functools
import itertools
import json
import re
import subprocess
import sys

import pytest

from deps import need, need_vllm  # noqa: E402

# vLLM 0.33.0 pins transformers<5.21, so .ci/run installs it in a venv of its own and runs this file there
vllm_chat_parsing = need_vllm("vllm.parser.chat_parsing")

from hypothesis import HealthCheck, assume, given, note, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import chatparse  # noqa: E402
from chatparse import templates as templates_lib  # noqa: E402
from harness import RefTimeout, normalize, split  # noqa: E402
from strategies import (GLM45_CALLS, LIT_TEXT_PIECES, VALUE_PIECES, _delims, compiles,  # noqa: E402
                        glm45_generation, literal_led_templates, templates, texts_for)
from timing_rule import (Tally, chatparse_limit, discard, reference_limit, regex_hold,  # noqa: E402
                         tally_fixture, within_hold)

VParser = vllm_chat_parsing.ResponseParser
v_parse_response = vllm_chat_parsing.parse_response
ERRORS = (ValueError, KeyError, TypeError, RuntimeError)

# Discards (each for the input's reason) and the timing rule's cases, printed at the end of the module's run
TALLY = Tally("serving dialect against vLLM 0.33.0")
_print_tally = tally_fixture(TALLY)


def _compiles(template) -> bool:
    """`compiles`, counting what it turns away: a field whose open and close both match the empty string,
    which chatparse refuses at load and on which vLLM loops (README, Hangs)."""
    if compiles(template):
        return True
    TALLY.add("discarded: zero-width open and close of one field (vLLM loops, chatparse refuses)")
    return False


def run(make, chunks, prefix):
    """Feed `chunks` to ``make(prefix)``; ("ok", message, events, input_text at start and end) or ("error",
    class name, message)."""
    events: list[dict] = []
    try:
        p = make(prefix)
        start = p.input_text
        events += p.initial_events
        for c in chunks:
            events += p.feed(c)
        msg, final = p.finalize()
        events += final
    except ERRORS as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", msg, normalize(events), (start, p.input_text))


def run_vllm(template, text, prefix, seconds=2.0):
    with reference_limit(seconds):
        return run(lambda pre: VParser(template, prefix=pre), [text], prefix)


def run_ours(template, chunks, prefix):
    return run(lambda pre: chatparse.ResponseParser(template, prefix=pre, dialect="vllm"), chunks, prefix)


def one_shot(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except ERRORS as e:
        return ("error", type(e).__name__, str(e))


def compare(template, text, cuts, prefix="<|A|>"):
    note(f"template={template!r}\ntext={text!r}\ncuts={cuts!r}\nprefix={prefix!r}")
    check(template, text, cuts, prefix)


def check(template, text, cuts, prefix):
    """vLLM's streamed answer for `text` in one feed, and chatparse's in the serving dialect in one feed and
    split at `cuts`, are the same; so are their one-shot answers. (A reference timeout discards the example,
    counted; chatparse's stages run outside the limit.)"""
    try:
        ref = run_vllm(template, text, prefix)
        with reference_limit(2.0):
            ref_whole = one_shot(v_parse_response, text, template, prefix=prefix)
    except RefTimeout:
        discard(TALLY, "vLLM loops")
    TALLY.add("examples compared")
    with chatparse_limit():  # chatparse's own stages: an error or a hang fails the test
        assert run_ours(template, [text], prefix) == ref
        assert run_ours(template, split(text, cuts), prefix) == ref
        assert one_shot(chatparse.parse_response, text, template, prefix=prefix, dialect="vllm") == ref_whole


SETTINGS = settings(max_examples=700, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.data())
def test_generated_templates_match_vllm_for_any_chunking(data):
    template = data.draw(templates(failing=True))
    assume(_compiles(template))
    text = data.draw(texts_for(template, extra=tuple(VALUE_PIECES)))
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text))), max_size=8))
    compare(template, text, cuts)


@SETTINGS
@given(st.data())
def test_one_character_feeds_match_vllm(data):
    template = data.draw(templates(failing=True))
    assume(_compiles(template))
    text = data.draw(texts_for(template, extra=tuple(VALUE_PIECES)))
    compare(template, text, list(range(1, len(text))))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(literal_led_templates(), st.lists(st.sampled_from(LIT_TEXT_PIECES), max_size=20).map("".join),
       st.lists(st.integers(1, 40), max_size=6))
def test_literal_led_modes_match_vllm(template, text, cuts):
    """Modes whose every pattern is a whitespace lead and a literal, some going on in ways only `regex`
    decides (the one-shot path's `WideFinder.lits` candidates; glm-4.5's tool-call open, whose calls run
    within a `backtrack.SpanBound` and by its `re` twin on ASCII spans): streamed and one-shot in the
    serving dialect, vLLM's answer."""
    assume(_compiles(template))
    compare(template, text, cuts)


@pytest.mark.parametrize("name, sep, value", GLM45_CALLS)
def test_glm45_tool_calls_match_vllm(name, sep, value):
    """glm-4.5's bundled template on generations with 1-3 tool calls: its tool-call open is asked only where
    its literal is (`WideFinder.lits`), without a timeout where its span is short (`SpanBound`: a name of 120
    characters is not), by `re` where that span is ASCII, and its arguments' `xml-inline` tag pattern by `re`
    on ASCII text; streamed and one-shot in the serving dialect, vLLM's message."""
    template = templates_lib.get("glm45")
    for calls in (1, 3):
        check(template, glm45_generation(name, sep, value, calls), [7, 30], "")


def run_split(make, prefix, gen):
    """(initial events, generated events, message) of ``make(prefix)`` fed `gen`; ("error", ...) on error."""
    try:
        p = make(prefix)
        initial = normalize(p.initial_events)
        events = p.feed(gen)
        msg, final = p.finalize()
    except ERRORS as e:
        return ("error", type(e).__name__, str(e))
    return ("ok", msg, initial, normalize(events + final), p.input_text)


def delimiters(events):
    return [e for e in events if e["type"] != "region_chunk"]


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_prefix_and_generation_split_match_vllm(data):
    """The prompt holds part of the text: initial events, spans across the boundary, and prompt characters
    held back as a possible delimiter, which never reach a generated chunk.

    Which prompt text is handed out in `initial_events` (and so is not a generated chunk later) follows the
    timing rule: chatparse may hand out more than vLLM where that is certain, and less only where vLLM decided
    what more text could change (then vLLM's answer depends on where the prompt ended: the sanctioned
    difference). Everything else (every delimiter event, spans and values, the generated chunks, the message,
    input_text) is the same."""
    template = data.draw(templates(failing=True))
    assume(_compiles(template))
    text = data.draw(texts_for(template, extra=tuple(VALUE_PIECES)))
    at = data.draw(st.integers(0, len(text)))
    prefix, gen = "<|A|>" + text[:at], text[at:]
    note(f"template={template!r}\nprefix={prefix!r}\ngen={gen!r}")
    try:
        with reference_limit(2.0):
            ref = run_split(lambda pre: VParser(template, prefix=pre), prefix, gen)
        unsplit = run_vllm(template, text, "<|A|>")
    except RefTimeout:
        discard(TALLY, "vLLM loops (prompt and generation split)")
    # chatparse's own stages, outside the reference's limit: an error or a hang fails the test
    with chatparse_limit():
        got = run_split(lambda pre: chatparse.ResponseParser(template, prefix=pre, dialect="vllm"), prefix, gen)
    TALLY.add("splits compared")
    if ref[0] == "error" or unsplit[0] == "error" or ref[1] != unsplit[1] \
            or delimiters(ref[2] + ref[3]) != delimiters(unsplit[2]):
        # vLLM's answer depends on the split; chatparse's is the unsplit one (its message, and every delimiter
        # event: the prompt's text is not a generated chunk, so chunks are not compared)
        assert got[:2] == unsplit[:2]
        if got[0] == "ok":
            assert delimiters(got[2] + got[3]) == delimiters(unsplit[2])
        TALLY.add("splits where vLLM's answer depends on the split (chatparse's is the unsplit one)")
        return
    if got == ref:
        return
    note(f"chatparse: {got!r}\nvLLM: {ref!r}")
    # The prompt's events differ only in when they were handed out (the timing rule of
    # test_one_character_feeds_hand_out_events_no_later_than_vllm, at the end of the prompt)
    ours, theirs = got[2], ref[2]
    runs = list(_continuations(template, "<|A|>", text[:at]))
    if _is_prefix(theirs, ours):
        assert all(_is_prefix(ours, run) for run in runs)
        TALLY.add("splits where chatparse hands out more of the prompt (certain)")
    elif all(_is_prefix(theirs, run) for run in runs):
        # vLLM was certain and chatparse is behind: only under the stated exception, by its rule (`regex_hold`
        # at the end of the prompt, caught up within its bound when the text goes on one character at a time)
        assert _is_prefix(ours, theirs)
        with chatparse_limit():
            bound = regex_hold(chatparse.ResponseParser(template, prefix=prefix, dialect="vllm"))
            stages = _stages(chatparse.ResponseParser(template, prefix="<|A|>", dialect="vllm"), text)
        caught = next((j for j in range(at + 1, len(stages)) if _is_prefix(theirs, stages[j])), None)
        assert within_hold(bound, at, caught, len(stages) - 1), (bound, caught)
        TALLY.add("splits where chatparse holds prompt text vLLM handed out (the stated exception)")
    else:
        TALLY.add("splits where vLLM committed what more text changes")
    # and nothing else: every delimiter event, the generated chunks, the message, input_text
    assert delimiters(got[2] + got[3]) == delimiters(ref[2] + ref[3])
    assert [e for e in got[3] if e["type"] == "region_chunk"] == [e for e in ref[3] if e["type"] == "region_chunk"]
    assert got[1] == ref[1] and got[4] == ref[4]


def test_serving_dialect_events_of_a_malformed_tool_call_match_vllm():
    """The README's recovery example, against vLLM: a bad JSON tool call between two good ones."""
    template = templates_lib.get("qwen3")
    template = {**template, "fields": {**template["fields"]}}
    prefix = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"
    text = ("plan</think>\n\nok <tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
            "<tool_call>\n{\"name\": \"b\", \"arguments\": {oops}\n</tool_call>"
            "<tool_call>\n{\"name\": \"c\", \"arguments\": {\"x\": 1}}\n</tool_call>")
    ref = run_vllm(template, text, prefix)
    assert ref[0] == "ok"
    assert [e["type"] for e in ref[2]].count("region_malformed") == 1
    for cuts in ([], list(range(1, len(text))), list(range(3, len(text), 5))):
        assert run_ours(template, split(text, cuts), prefix) == ref


def test_vllm_loaded_template_object_is_accepted():
    """vLLM's adapter hands its parser a pre-loaded `ResponseTemplate`: chatparse converts it."""
    template = templates_lib.get("qwen3")
    from vllm.parser.chat_parsing.response_templates import load_response_template

    loaded = load_response_template(template)
    prefix = "<|im_start|>assistant\n<think>\n"
    text = "a</think>\n\nb <tool_call>\n{\"name\": \"f\", \"arguments\": {\"k\": 2}}\n</tool_call>"
    ref = run(lambda pre: VParser(loaded, prefix=pre), [text], prefix)
    got = run(lambda pre: chatparse.ResponseParser(loaded, prefix=pre, dialect="vllm"), [text], prefix)
    assert got == ref and got[0] == "ok"
    assert chatparse.compile_template(loaded).spec == chatparse.compile_template(template).spec


# -- when events are handed out --------------------------------------------------------------------------------

def _is_prefix(a: list, b: list) -> bool:
    """Events `a` are a prefix of events `b` (normalized; `a`'s last chunk may be a prefix of `b`'s)."""
    if len(a) > len(b):
        return False
    for k, (x, y) in enumerate(zip(a, b)):
        if x == y:
            continue
        last = k == len(a) - 1
        if not (last and x["type"] == y["type"] == "region_chunk" and x["field"] == y["field"]
                and y["text"].startswith(x["text"])):
            return False
    return True


def _stages(parser, text):
    """Cumulative normalized events after the prefix and after each one-character feed."""
    events = list(parser.initial_events)
    out = [normalize(events)]
    for c in text:
        events += parser.feed(c)
        out.append(normalize(events))
    return out


ALPHABET = "ab<>/x\n {}\"12"


def _spelled(source: str) -> str:
    """A rough spelling of a pattern source: group syntax dropped, a class by its first character (a negated
    one by "z", \\w by "a", \\d by "1", \\s by a space), quantifiers and anchors dropped; alternatives stay
    separated by "|". Only a source of continuations."""
    s = re.sub(r"\(\?(?:P<\w+>|[:=!]|<[=!])|[()]", "", source)
    s = re.sub(r"\[\^[^\]]*\]", "z", s)
    s = re.sub(r"\[\\?([^\]])[^\]]*\]", r"\1", s)
    s = re.sub(r"\\[sSdDwW]", lambda m: {"s": " ", "d": "1", "W": "!"}.get(m.group()[1], "a"), s)
    return re.sub(r"\{\d*,?\d*\}|[?*+^$]|\\[bBAZ]", "", s).replace("\\n", "\n").replace("\\", "")


def _continuations(template, prefix, head):
    """vLLM's events for `head` fed in one piece then finalized, and for `head` plus each one character of
    ALPHABET, each two, each three of "ab<>/x\\n", runs of one character up to six, or each end of a literal
    delimiter or of a literal run of a pattern delimiter of the template (through finalize() where it returns): what
    it decides once the text is known further."""
    # literal delimiters, and the literal runs of pattern delimiters, each from every cut
    pieces = _delims(template) + [run for f in template["fields"].values() for k, v in f.items()
                                  if k.endswith("_pattern") for run in re.findall(r"[^\\()\[\]|?*+{}.^$]+", v)]
    # and each pattern delimiter's alternatives spelled out, a class by its first character (what a match can
    # still need after a partial one: ``<[ab]<[ab]`` after ``>a<`` of ``>a<<[ab]<[ab]``)
    pieces += [alt for f in template["fields"].values() for k, v in f.items() if k.endswith("_pattern")
               for alt in _spelled(v).split("|") if alt]
    ends = {d[j:] for d in pieces for j in range(len(d))}
    short = ["".join(t) for n in (1, 2, 3) for t in itertools.product(ALPHABET if n < 3 else "ab<>/x\n", repeat=n)]
    runs = [c * n for c in ALPHABET for n in (4, 5, 6)]
    for tail in ["", *short, *runs, *sorted(ends)]:
        try:
            with reference_limit(2.0):
                p = VParser(template, prefix=prefix)
                events = p.initial_events + p.feed(head + tail)
                try:
                    events += p.finalize()[1]
                except ERRORS:
                    pass
        except (RefTimeout, *ERRORS):
            continue
        yield normalize(events)


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_one_character_feeds_hand_out_events_no_later_than_vllm(data):
    """Event timing, fed one character at a time, in the rule the README states (Differences, "When events
    are handed out"): at every feed, chatparse has handed out what vLLM has, or more; where more, vLLM's own
    one-shot runs over the text so far followed by the end of the stream or by any one character all begin
    with what chatparse handed out (it was certain). chatparse is behind (or apart) only where vLLM decided
    what a next character changes: some such run does not begin with what vLLM handed out."""
    template = data.draw(templates(failing=True))
    assume(_compiles(template))
    text = data.draw(texts_for(template, extra=tuple(VALUE_PIECES)))
    prefix = "<|A|>"
    note(f"template={template!r}\ntext={text!r}")
    try:
        with reference_limit(2.0):
            theirs = _stages(VParser(template, prefix=prefix), text)
    except RefTimeout:
        discard(TALLY, "vLLM loops (one-character feeds)")
    except ERRORS as e:
        # vLLM refuses the prompt or a feed: chatparse refuses it the same way
        with chatparse_limit(), pytest.raises(type(e)):
            _stages(chatparse.ResponseParser(template, prefix=prefix, dialect="vllm"), text)
        discard(TALLY, "vLLM raises on one-character feeds, and chatparse the same")
    found = check_timing(template, text, theirs, prefix)
    TALLY.add("one-character examples compared")
    for _, kind in found:
        TALLY.add(f"feeds where {kind}")


EARLIER, UNCERTAIN, EXCEPTION = ("chatparse is earlier (certain)", "vLLM committed what more text changes",
                                 "chatparse is behind under the stated exception (regex-decided)")


def check_timing(template, text, theirs, prefix="<|A|>"):
    """The rule at every stage of `text` fed one character at a time, against vLLM's stages `theirs`; the
    (stage, kind) of every stage where the events differ, each of `EARLIER`, `UNCERTAIN` or `EXCEPTION`."""
    with chatparse_limit():  # chatparse's own stages: an error or a hang fails the test
        ours, holds = _stages_held(chatparse.ResponseParser(template, prefix=prefix, dialect="vllm"), text)
    found = []
    for k, (v, c) in enumerate(zip(theirs, ours)):
        if v == c:
            continue
        runs = list(_continuations(template, prefix, text[:k]))
        if _is_prefix(v, c):
            assert all(_is_prefix(c, run) for run in runs), (k, v, c)
            found.append((k, EARLIER))
        elif all(_is_prefix(v, run) for run in runs):
            # vLLM was certain and chatparse is behind: only the README's stated limitation, by its rule (what
            # holds chatparse is held by a pattern decided by `regex`, which is asked once the characters its
            # assertions may read are there: `regex_hold`), and caught up within its bound
            caught = next((j for j in range(k + 1, len(ours)) if _is_prefix(v, ours[j])), None)
            assert within_hold(holds[k], k, caught, len(ours) - 1), ("chatparse later than vLLM", k, v, c)
            found.append((k, EXCEPTION))
        else:
            found.append((k, UNCERTAIN))
    return found


@pytest.mark.parametrize("template, text, feeds", [
    # the tables step both alternatives and decide after "<b"; `regex` then reads one character after that
    # (the lookahead's), where vLLM knew at "<b" that the first alternative matched
    ({"b": {"open_pattern": "<(?!x)|<b", "close": ">"}, "content": {}}, "z<b>z", {3}),
    # a word boundary: decided after "<b>", then one more character (here the end of the text)
    ({"b": {"open_pattern": "<b\\b|<bc", "close": ">"}, "content": {}}, "x<bc>z<b>", {9}),
    # a lookahead in the middle that the tables decide with vLLM (no feed behind)
    ({"b": {"open_pattern": "<(?=[ab])[ab]", "close": ">"}, "content": {}}, "x<a>y<b>z", set()),
])
def test_the_stated_exception_holds_only_what_its_rule_says_against_vllm(template, text, feeds):
    """tests/test_event_timing.py's cases of the stated exception, against vLLM's copy: chatparse is behind
    vLLM exactly at those feeds, under `regex_hold`'s rule, and nowhere else."""
    template = {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": template}
    with reference_limit(2.0):
        theirs = _stages(VParser(template, prefix="<|A|>"), text)
    found = check_timing(template, text, theirs)
    assert {k for k, kind in found if kind == EXCEPTION} == feeds, found


def _stages_held(parser, text):
    """`_stages`, and `regex_hold` of the parser after the prefix and after each feed."""
    events = list(parser.initial_events)
    out, holds = [normalize(events)], [regex_hold(parser)]
    for c in text:
        events += parser.feed(c)
        out.append(normalize(events))
        holds.append(regex_hold(parser))
    return out, holds


def test_zero_width_loop_after_a_malformed_value_stops_where_vllm_hangs():
    """README, Differences, "Hangs": in the serving dialect the first empty JSON body no longer stops vLLM's
    copy, which then opens and closes the field at one offset forever; chatparse stops there, for any split."""
    t = {"start_anchor": "<|A|>", "fields": {"tool_calls": {
        "open_pattern": "(?P<g>[^>]*)(?=[ab\\n])", "close_pattern": "(?P<g>[^>]*)(?=[ab\\n])", "content": "json",
        "transform": {"g": "{g}", "c": "{content}"}}}}
    text = ">bx >bx <a><b\n\nb<a><<a>a//>b<a><<"
    # vLLM in a process of its own: a SIGALRM inside its ever-growing loop can land in a garbage-collector
    # callback, where the exception is lost (pytest then fails on the unraisable exception instead)
    code = ("import json, sys\nfrom vllm.parser.chat_parsing import ResponseParser\nprint('ready', flush=True)\n"
            "t, text = json.loads(sys.argv[1])\np = ResponseParser(t, prefix='<|A|>')\np.feed(text)\n"
            "print('returned', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, json.dumps([t, text])], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=3)
    finally:
        proc.kill()
        proc.wait()
    want = run_ours(t, [text], "<|A|>")
    assert want[0] == "ok" and want[1] == {}
    assert [e["type"] for e in want[2]] == ["region_open", "region_malformed"]
    for cuts in ([2], [1, 2, 3, 5, 8], list(range(1, len(text)))):
        assert run_ours(t, split(text, cuts), "<|A|>") == want


@functools.lru_cache(maxsize=1)
def _byte_level():
    from token_support import byte_level_tokenizer

    return byte_level_tokenizer([])


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_templates_stepped_without_events_match_vllm(data):
    """`TokenStreams` in the serving dialect, stepped as byte-level token ids with or without events
    (``step(ids, events=False)``) and ended without events: each stream's message is vLLM's parser fed its
    decoded text in one piece, or its failure."""
    need("tokenizers")
    from token_support import draw_steps, outcome, same_failure, step_all

    template = data.draw(templates())
    assume(_compiles(template))
    tok = _byte_level()
    b = chatparse.bind(template, tok)
    seqs, flags = draw_steps(data, tok, template, texts_for)
    capacity = data.draw(st.sampled_from([3, 1024]))
    try:  # vLLM first, within its limit; chatparse's streams after, outside it
        refs = [run_vllm(template, b.decode(ids), "") for ids in seqs]
    except RefTimeout:
        discard(TALLY, "vLLM loops (token streams)")
    with chatparse_limit():
        s = b.streams(len(seqs), prefix="", dialect="vllm", capacity=capacity)
        step_all(s, seqs, flags)
        gots = [outcome(lambda: s.finalize(j, events=False)) for j in range(len(seqs))]
    TALLY.add("token-stream examples compared")
    for j, (ref, got) in enumerate(zip(refs, gots)):
        assert got == ("ok", ref[1]) if ref[0] == "ok" else same_failure(got, ref[1]), (j, got, ref[:2])
