"""chatparse against the installed transformers reference, on generated templates, texts and chunkings.

Claim under test: for every template and text, chatparse fed in *any* chunking gives the reference's
one-shot answer (message, or exception class) and the same events up to chunk boundaries.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import chatparse
from harness import RefTimeout, check_well_formed, run_chatparse, run_reference, split
from strategies import compiles, templates, texts_for

def _compare(template, text, cuts, prefix=""):
    note(f"template={template!r}\ntext={text!r}\ncuts={cuts!r}")
    try:
        ref = run_reference(template, text, prefix=prefix)
    except RefTimeout:
        assume(False)
    one = run_chatparse(template, [text], prefix=prefix)
    assert one == ref
    try:
        whole = ("ok", chatparse.parse_response(text, template, prefix=prefix))
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        whole = ("error", type(e).__name__)
    assert whole == ref[:2]
    chunks = split(text, cuts)
    streamed = run_chatparse(template, chunks, prefix=prefix)
    assert streamed == ref
    if streamed[0] == "ok":
        check_well_formed(streamed[2])


SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))


@SETTINGS
@given(st.data())
def test_generated_templates_match_reference_for_any_chunking(data):
    template = data.draw(templates())
    assume(compiles(template))
    text = data.draw(texts_for(template))
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text))), max_size=8))
    _compare(template, text, cuts)


@SETTINGS
@given(st.data())
def test_one_character_feeds_match_reference(data):
    template = data.draw(templates())
    assume(compiles(template))
    text = data.draw(texts_for(template))
    _compare(template, text, list(range(1, len(text))))


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_prefix_then_generation_matches_unsplit_text(data):
    """Splitting between prefix and generation changes nothing: compare with the reference on the joined text."""
    template = data.draw(templates())
    assume(compiles(template))
    text = data.draw(texts_for(template))
    at = data.draw(st.integers(0, len(text)))
    try:
        ref = run_reference(template, text, prefix="<|A|>")
    except RefTimeout:
        assume(False)
    got = run_chatparse(template, [text[at:]], prefix="<|A|>" + text[:at])
    if ref[0] == "error":
        assert got[0] == "error" and got[1] == ref[1]
    else:
        assert got[1] == ref[1]


@pytest.mark.parametrize("seed", range(5))
def test_long_random_texts_streamed_equal_one_shot(seed):
    rng = random.Random(seed)
    template = {
        "start_anchor": "<|A|>",
        "defaults": {"role": "assistant"},
        "fields": {
            "think": {"open": ["<t>", "<think>"], "close": "</t>"},
            "tool": {"open_pattern": r"<call name=(?P<n>\w+)>", "close": "</call>", "repeats": True,
                     "transform": {"name": "{n}", "args": "{content}"}},
            "content": {"close_pattern": r"\Z"},
        },
    }
    pieces = ["<t>", "</t>", "<think>", "<call name=f1>", "</call>", "<", "</", "<th", "x", "\n", "ab "]
    text = "".join(rng.choice(pieces) for _ in range(400))
    ref = run_reference(template, text)
    for _ in range(3):
        cuts = [rng.randint(1, len(text)) for _ in range(rng.randint(1, 200))]
        assert run_chatparse(template, split(text, cuts)) == ref


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_one_shot_paths_agree_with_reference(data):
    """parse_response takes the lean path, or decides with `regex` at candidates inside the streaming
    parser's region logic, or with the automaton (long texts, whitespace-led modes) or after a fallback:
    force each path and compare with the reference."""
    from chatparse.runtime.oneshot import parse as oneshot

    template = data.draw(templates())
    assume(compiles(template))
    text = data.draw(texts_for(template))
    try:
        ref = run_reference(template, text)
    except RefTimeout:
        assume(False)
    saved = oneshot.SCAN_PRONE_LIMIT, oneshot.WholeTextScanner.__init__, oneshot.CLOCK_EVERY, oneshot.SCAN_SECONDS
    try:
        for lean, limit, budget, clock in ((True, 10**9, None, False), (False, 0, None, False),
                                           (False, 10**9, None, False), (False, 10**9, 0, False),
                                           (True, 10**9, None, True)):
            oneshot.LEAN = lean
            oneshot.SCAN_PRONE_LIMIT = limit
            # clock: the lean path's time is up at its first candidate (the automaton redoes the parse)
            oneshot.CLOCK_EVERY, oneshot.SCAN_SECONDS = (1, -1.0) if clock else saved[2:]

            def init(self, tables, text, _orig=saved[1], _budget=budget):
                _orig(self, tables, text)
                if _budget is not None:
                    self.budget = _budget  # exhausted at once: the automaton redoes the parse

            oneshot.WholeTextScanner.__init__ = init
            try:
                got = ("ok", chatparse.parse_response(text, template, prefix=""))
            except (ValueError, KeyError, TypeError, RuntimeError) as e:
                got = ("error", type(e).__name__)
            assert got == ref[:2], (lean, limit, budget, clock)
    finally:
        oneshot.SCAN_PRONE_LIMIT, oneshot.WholeTextScanner.__init__, oneshot.CLOCK_EVERY, oneshot.SCAN_SECONDS = saved
        oneshot.LEAN = True


# -- self-overlapping delimiters: an attempt may start at every character ------------------------------------

@st.composite
def overlapping_templates(draw):
    """Open patterns that can start again inside their own match (``x[^<]*<`` on ``xxxx``), some with a short
    alternative that matches inside a longer attempt (``a|b[ab]*c``)."""
    head = draw(st.sampled_from(["x", "ab", "a", "<a", "b"]))
    body = draw(st.sampled_from([r"[^<]*", r"[ab]*", r"\w*", r"[^!]*?", r"b*", r"[ax]+", ""]))
    tail = draw(st.sampled_from(["<", "!", "c", "", "b"]))
    short = draw(st.sampled_from(["", "|a", "|b", "|xb", "|ab"]))
    if draw(st.booleans()):
        # a later alternative sharing the head: its match stays tentative while the first one can grow, so
        # a later attempt can hold a match while an earlier one, in the same state, still may or may not
        head = draw(st.sampled_from(["a", "ab", "x"]))
        body = draw(st.sampled_from([r"[^<]*", r"\w*", r"[abx]*"]))
        tail = draw(st.sampled_from(["c", "<", "!"]))
        short = draw(st.sampled_from([f"|{head}b", f"|{head}", f"|{head}a"]))
    look = draw(st.sampled_from(["", "", "", "(?=<)", "(?=a)", "(?<=a)", "(?<![ab])"]))
    source = f"(?:{head}{body}{tail}{short})"
    source = look + source if look.startswith("(?<") else source + look
    fields = {"t": {"open_pattern": source, "repeats": True}}
    if draw(st.integers(0, 3)):
        fields["t"]["close"] = draw(st.sampled_from(["!", "<", "c", "bb"]))
    if draw(st.booleans()):
        fields["content"] = {}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


@st.composite
def runs_of(draw, pieces):
    """Texts made of long runs of short pieces, where attempts pile up."""
    out = []
    for _ in range(draw(st.integers(1, 5))):
        out.append(draw(st.sampled_from(pieces)) * draw(st.integers(1, 40)))
    return "".join(out)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_self_overlapping_delimiters_match_reference(data):
    template = data.draw(overlapping_templates())
    assume(compiles(template))
    text = data.draw(runs_of(["x", "a", "b", "ab", "ba", "aab", "<", "!", "c", " ", "xa<"]))
    cuts = data.draw(st.lists(st.integers(1, max(1, len(text))), max_size=12))
    _compare(template, text, cuts)


@pytest.mark.parametrize("pattern, unit, tail", [
    (r"x[^<]*<", "x", ""), (r"x[^<]*<", "x", "<"), (r"\w+:", "ab", ""), (r"(?:a|b[ab]*c)", "baaaa", ""),
    (r"(?:a|b[ab]*c)", "ba", "c"), (r"(?:ab|a[ab]*c)", "aab", ""), (r"(?:a[ab]*c|ab)", "aab", " "),
    # lookarounds: `regex` decides at each attempt's start, and the later attempts wait as followers
    (r"\s*</t>\s*|\s*(?=<c>)", " ", "<c>"), (r"\s*</t>\s*|\s*(?=<c>)", " \n", "x"),
    (r"(?<=a)[ab]*c", "ab", "c"), (r"(?<=a)[ab]*c", "xab", "c"),
])
def test_live_attempts_stay_bounded_by_the_states(pattern, unit, tail):
    """An attempt can start at every character of a run; attempts in the same state are merged
    (`Scanner._merge`), so a feed's cost does not grow with the run. Compared with the reference too."""
    template = {"start_anchor": "<|A|>", "fields": {"t": {"open_pattern": pattern, "close": "!"},
                                                     "content": {}}}
    text = unit * (3000 // len(unit)) + tail + "!"
    p = chatparse.ResponseParser(template, prefix="")
    scanner = p._core.scanner
    bound = 1 + max(len(m.acc) for m in chatparse.compile_template(template).tables.modes)
    worst = 0
    for k in range(0, len(text), 7):
        p.feed(text[k:k + 7])
        worst = max(worst, len(scanner.attempts))
    assert worst <= bound
    assert run_chatparse(template, [text]) == run_reference(template, text)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_start_anchors_read_back_after_long_runs_match_reference(data):
    """`^`/`\\A` inside a lookbehind (or beside it) hold only at the very start of the text, however far the
    scanner has trimmed its buffer: a feed of more than 512 plain characters ending in the lookbehind's text,
    then the rest, must not see the trimmed buffer's start as the text's start (it did: ``{'content': 'z'}``
    where the reference gives the whole text)."""
    pattern = data.draw(st.sampled_from([r"(?<=^a)b", r"(?<=\Aa)b", r"(?<=^ab)c", r"(?:^|(?<=^a))b",
                                         r"(?<=^a|x)b"]))
    template = {"start_anchor": "<|A|>", "fields": {"t": {"open_pattern": pattern, "close": ">"},
                                                     "content": {}}}
    filler = "q" + "x" * data.draw(st.integers(250, 1400))
    text = filler + data.draw(st.sampled_from(["a", "ab", ""])) + data.draw(st.sampled_from(["b>z", "c>z"]))
    lead = data.draw(st.integers(1, 3))
    cuts = [lead, len(text) - 3, len(text) - 2] + data.draw(st.lists(st.integers(1, len(text)), max_size=4))
    _compare(template, text, cuts, prefix="")
