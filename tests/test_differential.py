"""chatparse against the installed transformers reference, on generated templates, texts and chunkings.

Claim under test: for every template and text, chatparse fed in *any* chunking gives the reference's
one-shot answer (message, or exception class) and the same events up to chunk boundaries.
"""

from __future__ import annotations

import random

import pytest
import regex
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st

import chatparse
from harness import RefTimeout, check_well_formed, run_chatparse, run_reference, split

ALPHA = "ab<>/x\n "
lit = st.text(alphabet="ab<>/x", min_size=1, max_size=4)

ATOMS = [r"[ab]", r"\w", r".", r"[^>]", r"\s", r"x", r"<", r">", r"/", r"b"]
QUANTS = ["", "", "", "*", "+", "?", "*?", "+?", "??", "{1,2}", "{0,2}?"]


@st.composite
def regex_source(draw, allow_groups=True):
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            parts.append(regex.escape(draw(lit)))
        else:
            parts.append(draw(st.sampled_from(ATOMS)) + draw(st.sampled_from(QUANTS)))
    body = "".join(parts)
    if draw(st.integers(0, 4)) == 0:
        body = f"(?:{body}|{regex.escape(draw(lit))})"
    if allow_groups and draw(st.integers(0, 3)) == 0:
        body = f"(?P<g>{body})"
    return body


@st.composite
def delimiter(draw, kind: str, implicit_close: bool = False):
    """A field's open or close: a literal, a literal list, or a pattern (possibly anchored or lookaround)."""
    choice = draw(st.integers(0, 9))
    if choice <= 3:
        return {kind: draw(lit)}
    if choice <= 5:
        return {kind: draw(st.lists(lit, min_size=1, max_size=3))}
    src = draw(regex_source())
    extra = draw(st.integers(0, 9))
    if kind == "open" and extra == 0:
        src = f"(?:^|{src})"
    elif kind == "close" and implicit_close and extra <= 1:
        src = draw(st.sampled_from([r"$", r"\Z", src + r"(?=x)", src + "$"]))
    elif extra == 2:
        src = r"(?<=[ab])" + src
    elif extra == 3:
        src = src + r"(?=[ab\n])"
    return {f"{kind}_pattern": src}


@st.composite
def templates(draw):
    fields = {}
    names = draw(st.lists(st.sampled_from(["a", "b", "c", "tool"]), min_size=1, max_size=3, unique=True))
    for name in names:
        f = dict(draw(delimiter("open")))
        if draw(st.integers(0, 5)) > 0:
            f.update(draw(delimiter("close")))
        content_kind = draw(st.integers(0, 5))
        if content_kind == 0:
            f["content_args"] = {"strip": False}
        if draw(st.booleans()):
            f["repeats"] = True
            if draw(st.integers(0, 2)) == 0:
                f["join"] = "|"
        pats = [v for k, v in f.items() if k.endswith("_pattern")]
        if any(regex.compile(p).groupindex for p in pats):
            f["transform"] = {"g": "{g}", "c": "{content}"} if "join" not in f else None
            if f["transform"] is None:
                del f["transform"]
                del f["join"]
                f["transform"] = {"g": "{g}", "c": "{content}"}
        fields[name] = f
    if draw(st.booleans()):
        impl = {}
        if draw(st.integers(0, 3)) > 0:
            impl.update(draw(delimiter("close", implicit_close=True)))
            for k in list(impl):
                if k.endswith("_pattern") and regex.compile(impl[k]).groupindex:
                    impl["transform"] = {"g": "{g}", "c": "{content}"}
        if draw(st.integers(0, 2)) == 0:
            impl["repeats"] = True
        fields["content"] = impl
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


def _delims(template) -> list[str]:
    out = []
    for f in template["fields"].values():
        for k in ("open", "close"):
            v = f.get(k)
            if isinstance(v, str):
                out.append(v)
            elif isinstance(v, list):
                out.extend(v)
    return out or ["<a>"]


@st.composite
def texts_for(draw, template):
    delims = _delims(template)
    pieces = []
    for _ in range(draw(st.integers(0, 14))):
        kind = draw(st.integers(0, 3))
        if kind == 0:
            pieces.append(draw(st.sampled_from(delims)))
        elif kind == 1:
            d = draw(st.sampled_from(delims))
            pieces.append(d[: draw(st.integers(0, len(d)))])
        else:
            pieces.append(draw(st.text(alphabet=ALPHA, max_size=4)))
    return "".join(pieces)


def compiles(template) -> bool:
    """chatparse refuses only templates the reference cannot run (zero-width open+close loops)."""
    try:
        chatparse.compile_template(template)
    except ValueError as e:
        if "empty string" in str(e):
            return False
        raise
    return True


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
    from chatparse.runtime import oneshot

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
