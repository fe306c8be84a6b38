"""The lean one-shot path (chatparse/runtime/oneshot/parse.py) and its shortcuts (runtime/regex/literals.py) against `regex`.

`literal_pieces` lets ``str.find``/``str.startswith`` stand in for a pattern's `regex` match, and
`literal_prefixes` skips a `regex` call where no match can start. Both must agree with `regex` at every
offset of every text; the differential tests (tests/test_differential.py) check whole parses against the
reference with the lean path on and off.
"""

from __future__ import annotations

import copy

import pytest
import regex
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse.runtime.oneshot import parse as oneshot
from chatparse.runtime.regex.backtrack import backtracking_risk
from chatparse.runtime.regex.literals import literal_pieces, literal_prefixes
from strategies import GLM45_CALLS, LIT_TEXT_PIECES, glm45_generation, literal_led_templates, shaped_templates

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Pieces of delimiter sources: escaped and plain literals, whitespace, metacharacters, groups, classes,
# quantifiers, anchors, lookarounds, inline flags, alternation.
PIECES = ["<", "a", "b", "|", r"\|", "ab", " ", r"\ ", "\n", "\\\n", "#", "é", ".", r"\.", "*", "+", "?", "{2}",
          "[ab]", "[|]", "[^a]", "(", ")", "(?:", "(?P<n>", "(?=a)", "(?<=a)", "(?i)", "(?i:", r"\s*", r"\w",
          "^", "$", r"\Z", "a*?", "(?x)", "}", "]", "[(?]", r"\(?", "(?i:a)"]
TEXT = st.text(alphabet="<ab |.\n#éAB", max_size=14)


def _compiled(source: str):
    """`source` compiled as the tables compile delimiters (DOTALL), or None if `regex` refuses it."""
    try:
        return regex.compile(source, regex.DOTALL)
    except regex.error:
        return None


@SETTINGS
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6), TEXT)
def test_literal_pieces_decide_like_regex(parts, text):
    source = "".join(parts)
    pieces = literal_pieces(source)
    rx = _compiled(source)
    if pieces is None or rx is None:
        return
    for p in range(len(text) + 1):
        m = rx.match(text, p)
        first = next((q for q in pieces if text.startswith(q, p)), None)
        assert (m.end() if m else None) == (p + len(first) if first is not None else None), (source, text, p)


@SETTINGS
@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6), TEXT)
def test_literal_prefixes_never_skip_a_match(parts, text):
    source = "".join(parts)
    prefixes = literal_prefixes(source)
    rx = _compiled(source)
    if prefixes is None or rx is None:
        return
    assert all(prefixes)
    for p in range(len(text) + 1):
        if rx.match(text, p) is not None:
            assert text.startswith(prefixes, p), (source, text, p)


WS_LED = [r"\s*", r"\s+", r"\s*?"]
WS_TEXT = st.text(alphabet="<ab |\n\t\x1c\x85\u3000x>", max_size=14)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(WS_LED), st.lists(st.sampled_from(PIECES), min_size=1, max_size=4)),
                min_size=1, max_size=3), WS_TEXT)
def test_literals_after_whitespace_never_skip_a_match(alts, text):
    """Where `literals_after_whitespace` names literals, every match at any offset has one of them starting
    where the run of `regex`'s whitespace from that offset ends (`oneshot._decide_at` skips the call
    otherwise); the run is found with `oneshot_plan._WS_CHARS`, as the one-shot path finds it."""
    from chatparse.runtime.regex.literals import literals_after_whitespace
    from chatparse.runtime.oneshot.plan import _WS_CHARS

    source = "|".join(lead + "".join(parts) for lead, parts in alts)
    lits = literals_after_whitespace(source)
    rx = _compiled(source)
    if lits is None or rx is None:
        return
    for p in range(len(text) + 1):
        q = p
        while q < len(text) and text[q] in _WS_CHARS:
            q += 1
        if rx.match(text, p) is not None:
            assert text.startswith(lits, q), (source, text, p)


# (sources that are shapes most of the time, with a few of what `literal_shapes` must refuse)
SHAPE_LEADS = ["", "", r"\s*", r"\s*", r"\s+", r"\s*?"]
SHAPE_BODIES = ["<a>", "<a>", "ab", "a", r"\|a", "(?:<a>|<ab>)", "(?:a|<)", "(?=<a>)", "(?=b|<a)", " a", "(?:a)b",
                "(?:a|b)?", "[ab]"]
SHAPE_TAILS = ["", "", r"\s*", r"\s*", r"\s+", "b"]
SHAPE_TEXT = st.lists(st.sampled_from(["<a>", "<ab>", "a", "b", "<", ">", "|", " ", "\n", "\t", "\x1c", "\x85",
                                       "\u3000"]), max_size=10).map("".join)


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(SHAPE_LEADS), st.sampled_from(SHAPE_BODIES), st.sampled_from(SHAPE_TAILS)),
                min_size=1, max_size=3), SHAPE_TEXT)
def test_literal_shapes_decide_like_regex(alts, text):
    """Where `literal_shapes` reads a source, `oneshot._decide_shaped` gives `regex`'s match end at every
    offset (None where it does not match), from the literal where the whitespace run from that offset ends
    (the run found with `oneshot_plan._WS_CHARS`): the one-shot path's string tests instead of `regex`
    calls (qwen3's delimiters, for one). Zero-width matches are rejected by no one here: a lookahead's end is
    its run's end."""
    from chatparse.runtime.regex.literals import literal_shapes
    from chatparse.runtime.oneshot.plan import _WS_CHARS, shaped_entries

    source = "|".join(lead + body + tail for lead, body, tail in alts)
    shapes = literal_shapes(source)
    rx = _compiled(source)
    if shapes is None or rx is None:
        return
    lits = sorted({lit for _, _, got, _ in shapes for lit in got}, key=len, reverse=True)
    for p in range(len(text) + 1):
        q = p
        while q < len(text) and text[q] in _WS_CHARS:
            q += 1
        m = rx.match(text, p)
        lit = next((x for x in lits if text.startswith(x, q)), None)  # (what the lean path's search finds)
        got = None
        if lit is not None:
            entries = shaped_entries(lit, [(0, (0, ""), shapes)])
            got = oneshot._decide_shaped(entries, text, p, q)
            if got is None and p < q:  # (the lean path asks at the literal too, for alternatives without a lead)
                got = oneshot._decide_shaped(entries, text, q, q)
                got = got if got is not None and got[0] == p else None
        assert (m.end() if m else None) == (got[1] if got else None), (source, text, p)


def test_literal_shapes_on_known_sources():
    from chatparse.runtime.regex.literals import SHAPE_AHEAD, SHAPE_END, SHAPE_TRAIL, literal_shapes

    many = 1 << 62
    assert literal_shapes(r"\s*</think>\s*|\s*(?=<tool_call>)") == (
        (0, many, ("</think>",), SHAPE_TRAIL), (0, many, ("<tool_call>",), SHAPE_AHEAD))
    assert literal_shapes(r"</tool_call>\s*") == ((0, 0, ("</tool_call>",), SHAPE_TRAIL),)
    assert literal_shapes(r"\s+(?:<\|a\|>|<b>)") == ((1, many, ("<|a|>", "<b>"), SHAPE_END),)
    for refused in [r"\s*(?:a|b)?c", r"\s*?x", r"\s*\s*x", r"\s* x", r"\s*(?=a)\s*", r"\s*a(?=b)", r"a\s+",
                    r"\s+", "", "(?P<n>a)", r"\s*a\\s*", "(?i)a", r"\s*[ab]"]:
        assert literal_shapes(refused) is None, refused


def test_whitespace_set_is_regexs():
    """`oneshot_plan._WS_CHARS` is exactly what `regex`'s \\s takes, over all of Unicode."""
    from chatparse.runtime.oneshot.plan import _WS_CHARS

    assert _WS_CHARS == {chr(c) for c in range(0x110000) if regex.match(r"\s", chr(c))}


def test_literal_shortcuts_on_known_sources():
    assert literal_pieces(r"<\|return\|>|<\|end\|>") == ("<|return|>", "<|end|>")
    assert literal_pieces("<\\|channel>thought\\\n") == ("<|channel>thought\n",)
    assert literal_pieces(r"Here\ is") == ("Here is",)
    for refused in [r"\s*</think>", "a|", "", r"a\b", "(?x)a b", "a*"]:
        assert literal_pieces(refused) is None, refused
    assert literal_prefixes(r"<\|channel\|>commentary\s+to=(?P<n>\w+)|to=functions\.x") == (
        "<|channel|>commentary", "to=functions.x")
    assert literal_prefixes("ab*c") == ("a",)
    for refused in [r"\s*<tool_call>", "a(?i)b", "(?:a|b)c", "[|]x|y", "x|"]:
        assert literal_prefixes(refused) is None, refused
    from chatparse.runtime.regex.literals import literals_after_whitespace

    assert literals_after_whitespace(r"\s*</think>\s*|\s*(?=<tool_call>)") == ("</think>", "<tool_call>")
    assert literals_after_whitespace(r"\s*(?:<\|im_end\|>|<\|endoftext\|>)\s*") == ("<|im_end|>", "<|endoftext|>")
    for refused in [r"</tool_call>\s*", r"\s*(?:a|b)?c", r"\s*?x", r"\s*(?=<a>)|x", r"\s*\s*x", r"\s* x"]:
        assert literals_after_whitespace(refused) is None, refused


def test_lean_path_is_taken_and_matches_the_other_paths():
    """The bundled templates' typical shapes parse by the lean path, to the same message as without it."""
    from chatparse import templates

    text = ("<think>\nplan it\n</think>\n\nHere.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n"
            "</tool_call><|im_end|>")
    ct = chatparse.compile_template(templates.get("smollm3"))
    calls = []
    real = oneshot._parse_lean

    def spy(*args):
        out = real(*args)
        calls.append(out)
        return out

    oneshot._parse_lean = spy
    try:
        lean = ct.parse(text, prefix="")
    finally:
        oneshot._parse_lean = real
    assert calls == [lean]
    oneshot.LEAN = False
    try:
        assert ct.parse(text, prefix="") == lean
    finally:
        oneshot.LEAN = True
    assert lean["tool_calls"] == [{"type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]


# -- whitespace-led delimiters: the lean path's automaton decisions (`_dfa_decide`) ---------------------------

W_DELIMS = [r"\s*<t>", r"\s*</t>\s*", r"\s*(?=<c>)", r"\s*<c>", r"[ \n]*<a>", r"\s+<b>", r"\s*$", r"\s*\Z",
            r"\s*<(?P<g>[ab]+)>", r"\s*(?:<t>|<u>)\s*", r"(?<=>)\s*<t>", r"\s*<t>(?=\n)", r"\s*<",
            r"\s*<t>[^<]*$", r"\s*<c>[^<\n]*\Z", r"\s*</tool>"]
W_TEXT = st.lists(st.sampled_from(["<t>", "</t>", "<c>", "<a>", "<b>", "<u>", "<ab>", "<", "</", " ", "  ",
                                   "\n", " \n ", "x", "ab", ">"]), max_size=16).map("".join)


@st.composite
def whitespace_templates(draw):
    def pattern():
        return draw(st.sampled_from(W_DELIMS))

    fields = {"r": {"open_pattern": pattern(), "close_pattern": pattern()}}
    if draw(st.booleans()):
        fields["tool"] = {"open_pattern": pattern(), "close": draw(st.sampled_from(["</x>", "\n"])), "repeats": True}
    fields["content"] = {"close_pattern": pattern()} if draw(st.booleans()) else {}
    for f in fields.values():
        for key in ("open_pattern", "close_pattern"):
            if key in f and "?P<g>" in f[key]:
                f["transform"] = {"g": "{g}", "c": "{content}"}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(whitespace_templates(), W_TEXT)
def test_whitespace_led_modes_lean_equals_reference(template, text):
    """Templates whose delimiters start with whitespace runs, texts full of runs and partial delimiters: the
    lean path (automaton decisions per candidate, dead-state memo) gives the reference's answer."""
    from harness import RefTimeout, run_reference
    from hypothesis import assume

    try:
        chatparse.compile_template(template)
    except ValueError as exc:
        # discarded only for the input's reason: the reference refuses the template too, or it is the one
        # template chatparse refuses on purpose (open and close both empty: the reference loops forever there,
        # docs/differences.md, "Hangs"); any other refusal fails here
        if "can both match the empty string" not in str(exc):
            from transformers.utils.chat_parsing.response_templates import load_response_template

            with pytest.raises((ValueError, TypeError, KeyError)):
                load_response_template(template)
        assume(False)
    try:
        ref = run_reference(template, text)
    except RefTimeout:
        assume(False)
    try:
        got = ("ok", oneshot._parse_lean(chatparse.compile_template(template).tables, {}, text))
    except oneshot._Fallback:
        assume(False)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        got = ("error", type(e).__name__)
    assert got == ref[:2]


def test_backtracking_pattern_falls_back_to_the_automaton():
    """gpt-oss's own tool-call open pattern backtracks quadratically in `regex` on a long run without '<'
    (measured here: 4.4 s at 64,000 characters). The lean path's timeout hands the parse to the automaton,
    whose answer equals the streamed one; the text around it still parses."""
    from chatparse import templates

    ct = chatparse.compile_template(templates.get("gpt_oss"))
    risky = [p for p in ct.tables.patterns if backtracking_risk(p.source)]
    assert risky, "the gpt_oss tool-call pattern is expected to need a timeout"
    text = ("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary to=functions."
            + "a" * 20000 + "<|channel|>final<|message|>done<|return|>")
    streamed = ct.parser(prefix="")
    for i in range(0, len(text), 4096):
        streamed.feed(text[i:i + 4096])
    message = ct.parse(text, prefix="")
    assert message == streamed.finalize()[0]
    from harness import run_reference

    assert run_reference(templates.get("gpt_oss"), text, seconds=30)[:2] == ("ok", message)


@pytest.mark.parametrize("source, risky", [
    # many ways to split one text: a quantified group, a backreference, open runs without a separator
    (r"<(?:a|aa)+>", True), (r"(?:\w+,)*x", True), (r"(a*)\1b", True), (r"(?P<q>a)(?P=q)", True),
    (r"x[^<]*[^<]*<", True), (r"(?P<n>\w+)\w*:", True), (r"[^>]*x[^>]*y", True),
    (r"\s*(?:</x>)?\s*(?:<y>|\Z)", True), (r"\s*(?=\s*\{)", True), (r"a{1,100}a{1,100}", True),
    (r"[^\s<]+\s*<", True), (r"(?:a[^<]*)?[^<]*<", True), (r"x(?:a|[^<]*)[^<]*<", True),
    # every open run stops at a character it cannot take, which must come
    (r"\s*</think>\s*", False), (r"x[^<]*<", False), (r"\w+:", False), (r"<f=(?P<n>[^>\n]+)>", False),
    (r"\s*(?:<a>\s*)?<b>\s*", False), (r"(?<=\])\s*(?:;\s*|(?=<x>|\{\s*\"n\"))", False),
    (r"\s*(?:<a>|<b>)\s*", False), (r"a{2,5}b{1,3}", False), (r"\s*functools(?=\s*\[)", False),
])
def test_backtracking_risk_on_known_sources(source, risky):
    assert backtracking_risk(source) is risky


@pytest.mark.parametrize("pattern, unit, length", [
    (r"x[^<]*<", "x", 256_000),  # linear per call, but a call at each of the first 64,000 candidates
    (r"x[^<]*[^<]*<", "x", 64_000),  # quadratic per call
    (r"(\w+)\w*:", "ab", 64_000),
    # glm-4.5's tool-call open (cubic), each call within its bound's span: about 1 ms per call without a timeout
    (r"\s*<tool_call>\s*([^\n<]+?)\s*(?=<arg_key>|</tool_call>|\n)", "<tool_call>" + " " * 85 + "<<", 64_000),
])
def test_adversarial_runs_stay_bounded_one_shot(pattern, unit, length):
    """Without the clock the first takes minutes (measured: 2 s at 64,000 characters, quadratic), without
    the separator analysis the second takes hours (115 s at 8,000); now the automaton takes over. The last
    is bounded (`backtrack.SpanBound`), but each call is slow: the clock still sends the parse to the
    automaton. A hang guard, not a speed test: the limit is generous."""
    from harness import time_limit

    template = {"start_anchor": "<|A|>", "fields": {"t": {"open_pattern": pattern, "close": "!"}}}
    text = unit * (length // len(unit))
    streamed = chatparse.ResponseParser(template, prefix="")
    for i in range(0, len(text), 4096):
        streamed.feed(text[i:i + 4096])
    want = streamed.finalize()[0]
    with time_limit(20.0, TimeoutError):
        assert chatparse.parse_response(text, template, prefix="") == want


def test_wide_prefilter_that_stops_on_whitespace():
    """Found by a 1,500-example run of the differential one-shot test: for ``\\s\\w`` the whitespace-led
    finder's prefilter takes any character, so it stopped on the space itself, and the space was skipped as
    if it were an anchor no match starts at; the lean path missed the close."""
    from harness import run_reference

    template = {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",
                "fields": {"a": {"open": "<", "content_args": {"strip": False}},
                           "b": {"open": "<<", "close_pattern": r"\s\w", "content_args": {"strip": False}}}}
    for text in ("<< a", "<<  a", "<<x \tb", "<< "):
        got = oneshot._parse_lean(chatparse.compile_template(template).tables, {}, text)
        assert ("ok", got) == run_reference(template, text)[:2], text


@pytest.mark.parametrize("source, bound", [
    (r"x[^<]*[^<]*<", ("<", 1)), (r"(\w+)\w*:", (":", 1)), (r"x[^<]*[^<]*<|y[^<]*[^<]*<<", ("<", 2)),
    (r"<a>(?P<n>[^\s<]+)[^<]*(?:<b>[^<]*)?<c>", ("<", 3)),
    (r"x[^<]*[^<]*<", ("<", 1)),
    (r"x.*[^<]*<", None),  # '.' takes every character
    (r"x[^<]*[^<]*<(?=y)", ("<", 1)), (r"x[^<]*[^<]*(?!<b>)<", ("<", 2)),  # lookarounds: their '<' count
    (r"x[^<]*[^<]*<$", None), (r"x[^<]*[^<]*<\b", None), (r"x[^<]*[^<]*<+", None),  # tests the end / unbounded
    (r"x\s*\w*\s*y", None),  # cubic, but every literal is in a class: left to the timeout
    (r"x[^<]*[^<]*[^<]*<", ("<", 1)), (r"x[^<]*[^<]*[^<]*[^<]*<", None),  # cubic: bounded; quartic: not
    # glm-4.5's tool-call open (cubic: \s*, a lazy name run, \s*)
    (r"\s*<tool_call>\s*(?P<name>[^\n<]+?)\s*(?=<arg_key>|</tool_call>|\n)", ("<", 3)),
    (r"<(?:a|aa)+>", None), (r"x[^<]*<", None),  # exponential; not risky at all
])
def test_match_bound_on_known_sources(source, bound):
    from chatparse.runtime.regex.backtrack import match_bound

    assert match_bound(source) == bound


B_ATOMS = ["<", "a", "b", ":", "[^<]", "[^\\s<]", "\\s", "\\w", "[ab]", "(?:<b>)?", "(?P<g>[^<:]+)", "\\|"]
B_QUANTS = ["", "", "*", "+", "?", "{1,3}"]


RUNS = ["[^<]", "[^\\s<]", "\\s", "\\w", "[ab]", "[^<:]"]


@st.composite
def bounded_sources(draw):
    """Pattern sources: random atoms, or the shape `match_bound` is for (two open runs in a row, then
    literals), so that many examples have a bound."""
    if draw(st.booleans()):
        items = draw(st.lists(st.tuples(st.sampled_from(B_ATOMS), st.sampled_from(B_QUANTS)), min_size=1,
                              max_size=7))
        return [atom + ("" if atom.startswith("(?P") else quant) for atom, quant in items]
    lit = st.sampled_from(["", "a", "<", ":", "<b>", "a<", "(?=<)", "$", "\\b", "(?!<b>)", "(?=<b>|a)", "(?<=<)",
                           "(?=:|\n)"])
    run = st.builds(lambda c, q: c + q, st.sampled_from(RUNS), st.sampled_from(["*", "+", "{1,}", "*?"]))
    first = draw(run)
    if draw(st.booleans()):
        first = "(?P<g>" + first + ")"
    return [draw(lit), first, draw(run), draw(st.sampled_from(["", "(?:<b>[^<]*)?", "\\s*", "[^<:]*?"])),
            draw(st.sampled_from(["<", ":", "<b>", "<<"])), draw(lit)]


B_TEXT = st.lists(st.sampled_from(["a", "b", "ab", " ", ":", "<", "<b>", "<<", "|", "\n"]), max_size=16).map("".join)


@SETTINGS
@example(["x", "[^<]*", "[^<]*", "", "<", "$"], False, "x<<", 0)  # (an assertion about the end: no bound)
@example(["", "\\s*", "[^<]*?", "\\s*", "<b>", "(?=<b>|a)"], False, " a <b><b>", 0)  # (cubic, a lookahead)
@given(bounded_sources(), st.booleans(), B_TEXT, st.integers(0, 3))
def test_match_bound_never_changes_a_match(parts, alternation, text, p):
    """Where `match_bound` gives (c, k) (quadratic and cubic patterns, lookarounds among them), `regex`
    stopped anywhere at or after the (k+1)-th c from p matches exactly as it does on the whole text: same span,
    same groups; `stops_within` says so exactly there."""
    from chatparse.runtime.regex.backtrack import match_bound, span_test, stops_within

    source = "".join(parts)
    if alternation:
        source = source + "|" + "".join(reversed(parts)).replace("(?P<g>", "(?:")
    rx = _compiled(source)
    bound = match_bound(source) if rx is not None else None
    if bound is None:
        return
    p = min(p, len(text))
    c, k = bound
    q = p - 1
    for _ in range(k + 1):
        q = text.find(c, q + 1)
        if q < 0:
            q = len(text)
            break
    whole = rx.match(text, p)
    for end in range(q, len(text) + 1):
        cut = rx.match(text, p, end)
        assert (whole and (whole.span(), whole.groupdict())) == (cut and (cut.span(), cut.groupdict()))
    for span in range(len(text) + 2):
        assert stops_within(text, p, span_test(bound), span) == (p + span > q or p + span >= len(text))


@SETTINGS
@given(st.lists(st.text(alphabet="ab<", min_size=1, max_size=4), min_size=1, max_size=3, unique=True),
       st.text(alphabet="ab<x", max_size=24))
def test_cut_prefix_finds_the_last_anchor_match(literals, prefix):
    """`Tables.cut_prefix` takes its `str.rfind` shortcut only where it gives the end of the last
    non-overlapping match of the anchors' alternation (longest literal first, as compiled)."""
    template = {"start_anchor": literals, "fields": {"content": {}}}
    tables = chatparse.compile_template(template).tables
    alternation = regex.compile("|".join(regex.escape(s) for s in sorted(literals, key=len, reverse=True)))
    ends = [m.end() for m in alternation.finditer(prefix)]
    assert tables.cut_prefix(prefix) == (prefix[ends[-1]:] if ends else prefix)


def test_cut_prefix_shortcut_is_taken_where_anchors_cannot_overlap():
    kinds = {tuple(a): chatparse.compile_template({"start_anchor": a, "fields": {"content": {}}})
             .tables.anchor_literals is not None
             for a in (["<|start|>assistant"], ["<|turn>model\n", "<tool_response|>"], ["aa"], ["ab", "ba"],
                       ["abc", "b"])}
    assert kinds == {("<|start|>assistant",): True, ("<|turn>model\n", "<tool_response|>"): True,
                     ("aa",): False, ("ab", "ba"): False, ("abc", "b"): False}


@SETTINGS
@given(st.lists(st.sampled_from(PIECES + ["(?P<m>b)", "|", "(?P<n>a)?"]), min_size=1, max_size=6), TEXT)
def test_capture_reader_reads_what_groupdict_reads(parts, text):
    """`capture_reader` (one group read directly) gives `captures_of`'s dict at every offset."""
    from chatparse.runtime.stream.parser import capture_reader, captures_of

    rx = _compiled("".join(parts))
    if rx is None:
        return
    read = capture_reader(rx)
    assert read(None) == {}
    for p in range(len(text) + 1):
        m = rx.match(text, p)
        if m is not None:
            assert read(m) == captures_of(m)


def test_keyed_modes_need_literals_that_name_one_pattern():
    """`oneshot_plan._keyed` keys a mode by the literal its candidate search finds only where that literal
    names the one pattern that can match there: no literal a prefix of another, none shared."""
    from chatparse.runtime.oneshot.plan import plan_for

    def keyed(fields):
        tables = chatparse.compile_template({"start_anchor": "S", "fields": fields}).tables
        entry = plan_for(tables).modes[0][5]
        return None if entry is None else {lit: (pi, rx is None) for lit, (pi, rx, _risk, _read) in entry.items()}

    # (pattern indexes: each field's open, then its close)
    assert keyed({"a": {"open": "<a>", "close": "!"}, "b": {"open_pattern": "<b(?P<n>x+)>", "close": "!",
                                                            "transform": "{n}"}}) == {"<a>": (0, True),
                                                                                   "<b": (2, False)}
    assert keyed({"a": {"open": "<a", "close": "!"}, "b": {"open": "<ab", "close": "!"}}) is None  # prefix
    assert keyed({"a": {"open": "<a>", "close": "!"}, "b": {"open_pattern": "<a>x", "close": "!"}}) is None


@pytest.mark.parametrize("text", ["<<", "a<b<c", "<", "x" * 5000 + "<" + "y" * 5000])
def test_field_without_close_in_the_lean_path(text):
    """A field with no close watches nothing: its region runs to the end of the text (found by the long
    differential run, where the keyed candidate search once looked up an empty literal)."""
    from harness import run_reference

    template = {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",
                "fields": {"a": {"open": "<", "content_args": {"strip": False}}, "b": {"open": "<b", "close": "!"}}}
    assert chatparse.parse_response(text, template, prefix="") == run_reference(template, text)[1]


ASCII_TEXT = st.text(alphabet="<ab |.\n#AB_1\t\x1c\x0b-", max_size=14)


@SETTINGS
@given(st.lists(st.sampled_from(PIECES + [r"\d", r"\W", r"[\w.\-]+", r"[^\s<]+", r"\b", r"\S", r"\D"]), min_size=1,
                max_size=6), ASCII_TEXT)
def test_ascii_twin_matches_like_regex_on_ascii_text(parts, text):
    """Where `re_compat.ascii_twin` gives an `re` pattern, it matches ASCII text as `regex` does: same span
    and groups at every offset, with and without an end."""
    from chatparse.runtime.regex.re_compat import ascii_twin

    source = "".join(parts)
    rx = _compiled(source)
    twin = ascii_twin(source) if rx is not None else None
    if twin is None:
        return
    for p in range(len(text) + 1):
        for end in (len(text), min(len(text), p + 3)):
            want, got = rx.match(text, p, end), twin.match(text, p, end)
            assert (want and (want.span(), want.groupdict())) == (got and (got.span(), got.groupdict()))


def test_ascii_class_escapes_agree_on_every_ascii_character():
    """The premise of `re_compat`: `regex`'s Unicode \\w \\d \\s and the twins' agree on all 128 ASCII
    characters (plain `re` does not: its \\s takes \\x1c to \\x1f)."""
    from chatparse.runtime.regex.re_compat import ascii_twin

    for esc in (r"\w", r"\d", r"\s", r"\W", r"\D", r"\S", r"[^\s<]", r"a\b", r"a\B"):
        rx, twin = regex.compile(esc), ascii_twin(esc)
        texts = [c for c in map(chr, range(128))] + ["a" + c for c in map(chr, range(128))]
        assert [t for t in texts if bool(rx.match(t)) != bool(twin.match(t))] == [], esc


def _gpt_oss_literal_content_open() -> dict:
    """gpt-oss's template as the format corpus has it: content opened by the literal final header (the bundled
    one's became a pattern with the <|constrain|> fix, and its mode 0 is no longer keyed by literals), the mode
    the window twin is for."""
    from chatparse import templates

    template = copy.deepcopy(templates.get("gpt_oss"))
    template["fields"]["content"] = {"open": "<|channel|>final<|message|>", "close": ["<|return|>", "<|end|>"]}
    return template


@pytest.mark.parametrize("name", ["write_file", "wrïte_file", "w" * 1500, "w" * 700 + "é" + "w" * 700])
@pytest.mark.parametrize("before", ["", "→ ", "é" * 1100])
@pytest.mark.parametrize("sep", [" ", "\xa0"])  # regex's \s takes U+00A0, re.ASCII's does not
@pytest.mark.parametrize("body", ['{"a": 1}', '{"a": "\xa0é"}'])  # past the span's stop, inside 1,024 characters
def test_window_twin_runs_only_where_its_span_is_ascii(name, before, sep, body):
    """gpt-oss's tool-call open is keyed by its two literals, and each alternative is run by its `re` twin
    where the span a bounded call may read is ASCII (`oneshot_plan.WindowTwin`), by `regex` elsewhere or
    beyond the span: the same message as streaming and as the reference, wherever a non-ASCII character
    sits (before the call, in the name, past the span, past the span's stop: the (k+1)-th '<')."""
    from harness import run_reference

    from chatparse.runtime.oneshot.plan import WindowTwin, plan_for

    template = _gpt_oss_literal_content_open()
    compiled = chatparse.compile_template(template)
    assert {type(e[2]) for e in plan_for(compiled.tables).modes[0][5].values() if e[1] is not None} == {WindowTwin}
    text = (f"<|channel|>analysis<|message|>{before}think<|end|><|start|>assistant<|channel|>commentary{sep}"
            f"to=functions.{name}{sep}<|constrain|>json<|message|>{body}<|call|>"
            f"<|start|>assistant to=functions.{name}<|channel|>commentary json<|message|>{{}}<|call|>"
            "<|channel|>final<|message|>done<|return|>")
    streamed = compiled.parser(prefix="")
    for i in range(0, len(text), 7):
        streamed.feed(text[i:i + 7])
    message = compiled.parse(text, prefix="")
    assert message == streamed.finalize()[0]
    assert ("ok", message) == run_reference(template, text, seconds=30)[:2]


def test_a_literal_two_patterns_start_with_is_decided_by_both():
    """gpt-oss's tool-call header and a recipient-less commentary preamble both start with
    ``<|channel|>commentary``: the keyed one-shot plan keys that literal to both (each with its tie rank) and
    asks both there; the message is streaming's and the reference's."""
    from harness import run_reference

    from chatparse import templates
    from chatparse.runtime.oneshot.plan import plan_for

    template = templates.get("gpt_oss")
    compiled = chatparse.compile_template(template)
    for mode in (plan_for(compiled.tables).modes[0], plan_for(compiled.tables).ascii_modes[0]):
        pi, candidates, _, _ = mode[5]["<|channel|>commentary"]
        assert pi == -2 and len(candidates) == 2  # (-2: they cannot both match at one start; `_exclusive`)
    text = ("<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary<|message|>Let me look."
            "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
            '{"city": "Paris"}<|call|><|start|>assistant<|channel|>final<|message|>Sunny.<|return|>')
    message = compiled.parse(text, prefix="")
    streamed = compiled.parser(prefix="")
    streamed.feed(text)
    assert message == streamed.finalize()[0] == run_reference(template, text, seconds=30)[1]
    assert message["content"] == "Let me look.\n\nSunny."
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


def _shared_literal_plan(a: str, b: str):
    """A template whose two fields open with patterns `a` and `b` (both starting with ``<x>``), its mode 0's
    keyed entry for a literal both start with (or None where there is none), and the two compiled
    patterns."""
    from chatparse.runtime.oneshot.plan import plan_for

    template = {"start_anchor": "S", "fields": {"a": {"open_pattern": a, "close": "!"},
                                                "b": {"open_pattern": b, "close": "!"},
                                                "c": {"open": "<y>", "close": "!"}}}  # (two literals: keyed)
    compiled = chatparse.compile_template(template)
    keyed = plan_for(compiled.tables).modes[0][5]
    shared = [entry for entry in (keyed or {}).values() if entry[0] < 0]
    return template, compiled, shared[0] if shared else None, (_compiled(a), _compiled(b))


def test_patterns_that_can_match_at_one_start_keep_the_longest_match_rule():
    """Two patterns sharing their first literal are asked one after the other, stopping at the first match
    (-2), only where no start can match both (`oneshot_plan._exclusive`); where one can (a ``<x>[ab]`` match
    is a prefix of a ``<x>[ab]+c`` one, or both take ``<x>ac``) both are asked and the longest wins (-1)."""
    for a, b, how in [(r"<x>[ab]", r"<x>[ab]+c", -1), (r"<x>[ab]*c", r"<x>[ab]c", -1), (r"<x>(?=[ab])", r"<x>\w", -1),
                      (r"<x>[ab]\w", r"<x>[cd]\w", -2), (r"<x>\s*<", r"<x>\s+t", -2), (r"<x>[ab]+!", r"<x>[cd]", -2)]:
        template, compiled, entry, _ = _shared_literal_plan(a, b)
        assert entry is not None and entry[0] == how, (a, b, entry)
        for text in ["<x>ab!", "<x>aac!", "<x>b!", "<x> <!", "<x>  t!", "<x>c!", "<x>ac!", "<x>dd!", "<x>ab!c"]:
            streamed = compiled.parser(prefix="")
            streamed.feed(text)
            assert compiled.parse(text, prefix="") == streamed.finalize()[0], (a, b, text)


# (each suffix starts with a class, so that the two patterns share the literal ``<x>`` and the mode is keyed)
SUFFIX_PIECES = ["a", "b", "ab", " ", r"\s*", r"\s+", "a*", "b+", "[ab]", "[^b]", "(?:a|b)", "(?=a)", "c?", "<"]
FIRST_PIECES = ["[ab]", "[^b]", "[cd]", r"\s*", r"\s+", "[ab]*", "[bc]+", r"\w", "(?=[ab])"]


@SETTINGS
@given(st.sampled_from(FIRST_PIECES), st.lists(st.sampled_from(SUFFIX_PIECES), max_size=3),
       st.sampled_from(FIRST_PIECES), st.lists(st.sampled_from(SUFFIX_PIECES), max_size=3),
       st.text(alphabet="<x>abc !", max_size=16))
def test_exclusive_patterns_never_match_at_one_start(a0, a, b0, b, text):
    """Where the plan stops at the first match of patterns sharing a literal (-2), `regex` never matches both
    at one offset of any text; and the one-shot message is streaming's either way."""
    a, b = "<x>" + a0 + "".join(a), "<x>" + b0 + "".join(b)
    if a == b or _compiled(a) is None or _compiled(b) is None:
        return
    try:
        template, compiled, entry, (ra, rb) = _shared_literal_plan(a, b)
    except ValueError:
        return  # (a template the compiler refuses, such as an open that can match the empty string)
    text = "<x>" + text
    if entry is not None and entry[0] == -2:
        assert not any(ra.match(text, p) and rb.match(text, p) for p in range(len(text))), (a, b, text)
    streamed = compiled.parser(prefix="")
    streamed.feed(text)
    try:
        want = ("ok", streamed.finalize()[0])
    except Exception as e:  # noqa: BLE001 - the same exception either way
        want = ("error", type(e), str(e))
    try:
        got = ("ok", compiled.parse(text, prefix=""))
    except Exception as e:  # noqa: BLE001
        got = ("error", type(e), str(e))
    assert got == want


AFTER_WS = ["<a", "<ab", "<abc", "x", "(?=<a)", "(?:<ab|x)"]


@SETTINGS
@given(st.lists(st.sampled_from(AFTER_WS), min_size=2, max_size=3, unique=True),
       st.sampled_from([r"\s*", r"\s+"]),
       st.lists(st.sampled_from([" ", "\n", "\t", "<a", "<ab", "<abc", "x", "!", "b", "c", ">"]), max_size=12))
def test_patterns_asked_by_the_literal_after_whitespace_give_streamings_message(lits, lead, parts):
    """Fields opened by ``\\s*`` + a literal, some literals prefixes of others: the one-shot path asks at a
    candidate only the patterns that can match with the literal found where the whitespace run ends
    (`oneshot_plan.WideFinder.by_lit`); its message is streaming's and the reference's."""
    from harness import run_reference

    from chatparse.runtime.oneshot.plan import plan_for

    fields = {f"f{k}": {"open_pattern": lead + lit, "close": "!", "content_args": {"strip": False}}
              for k, lit in enumerate(lits)}
    template = {"start_anchor": "S", "fields": fields}
    compiled = chatparse.compile_template(template)
    assert plan_for(compiled.tables).modes[0].wide.at_run_end is not None
    text = "".join(parts)
    streamed = compiled.parser(prefix="")
    streamed.feed(text)
    want = streamed.finalize()[0]
    assert compiled.parse(text, prefix="") == want
    assert run_reference(template, text)[:2] == ("ok", want)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@example({"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # (regex's \\s takes U+00A0, re.ASCII's not)
          "fields": {"f0": {"open_pattern": r"\s*<b>\s*(?P<g>[^\n<]+?)\s*(?=<c>|\n)", "close_pattern": "</e>",
                            "transform": {"g": "{g}", "c": "{content}"}},
                     "f1": {"open_pattern": r"\s*<a>", "close_pattern": "</e>"}}}, "x <b>\xa0name\n y</e>", 0)
@given(literal_led_templates(), st.lists(st.sampled_from(LIT_TEXT_PIECES), max_size=20).map("".join),
       st.integers(0, 3))
def test_modes_of_literal_led_patterns_find_candidates_by_their_literals(template, text, repeat):
    """Where every pattern a mode watches is a whitespace lead and literals (`WideFinder.lits`), the lean path
    takes the literals' next occurrence as the next candidate and `regex` (or string tests) decides there:
    the reference's message or exception class, and the streaming parser's (repeated, so that texts past
    `SCAN_PRONE_LIMIT`, where the automaton decided before, are drawn too)."""
    from harness import RefTimeout, run_chatparse, run_reference
    from strategies import compiles

    from chatparse.runtime.oneshot.plan import plan_for

    if not compiles(template):
        return
    ct = chatparse.compile_template(template)
    wide = plan_for(ct.tables).modes[0].wide
    assert wide is not None and wide.lits is not None
    text = text * (1 + repeat * 1500 // max(1, len(text)))
    try:
        ref = run_reference(template, text) if len(text) < 2000 else None
    except RefTimeout:
        ref = None
    try:
        got = ("ok", oneshot._parse_lean(ct.tables, {}, text))
    except oneshot._Fallback:
        return
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        got = ("error", type(e).__name__)
    if ref is not None:
        assert got == ref[:2], (template, text)
    assert run_chatparse(template, [text])[:2] == got


@pytest.mark.parametrize("name, sep, value", GLM45_CALLS)
def test_glm45_tool_calls_parse_like_the_reference(name, sep, value):
    """glm-4.5's bundled template on generations with 1-3 tool calls (`WideFinder.lits` candidates, the
    tool-call open within its `SpanBound` or not, `re` twins on ASCII spans and `xml-inline` text, `regex`
    elsewhere): one-shot and streamed, the reference's message."""
    from chatparse import templates
    from harness import run_chatparse, run_reference

    template = templates.get("glm45")
    for calls in (1, 3):
        text = glm45_generation(name, sep, value, calls)
        want = run_reference(template, text, prefix="")[:2]
        assert want[0] == "ok" and len(want[1]["tool_calls"]) == calls
        assert ("ok", chatparse.parse_response(text, template, prefix="")) == want
        assert run_chatparse(template, [text[:9], text[9:]], prefix="")[:2] == want


# Delimiters that are all `literal_shapes` (whitespace leads, literal groups, lookaheads, trailing runs), with a
# few that are not, so that modes mixing them are drawn too.
SHAPED_OPENS = [r"\s*<a>", r"\s+<a>", r"\s+<c>", "<a>", r"\s*(?:<b>|<bc>)", r"\s*<b>\s*", "<c>", r"\s*<a>|\s*(?=<c>)",
                r"<[ab]>"]
SHAPED_CLOSES = [r"\s*</a>", r"</a>\s*", r"\s*</a>\s*|\s*(?=<b>)", r"\s+(?:</b>|</bc>)", "</c>", r"\s*(?=<a>)",
                 r"\s*</[ab]>"]
SHAPED_TEXT_PIECES = ["<a>", "</a>", "<b>", "<bc>", "</b>", "</bc>", "<c>", "</c>", "<", "</", " ", "\n", "\t",
                      "\u3000", "\x1c", "x", "é", " <c>", "\n<a>", " </a> ", "\u3000<b>", "  </bc>", " </c>\n"]


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@example({"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # a pattern without a lead, in a led mode
          "fields": {"a": {"open_pattern": r"\s*<a>"}, "b": {"open_pattern": "<c>"},
                     "content": {"content_args": {"strip": False}}}}, "x <c>y")
@example({"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # \s+ without whitespace before
          "fields": {"a": {"open_pattern": r"\s+<a>"}, "content": {}}}, "x<a>y")
@example({"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # a trailing run, kept out of the body
          "fields": {"a": {"open_pattern": "<a>", "close_pattern": r"</a>\s*"},
                     "content": {"content_args": {"strip": False}}}}, "<a>x</a> \n y")
@given(shaped_templates(SHAPED_OPENS, SHAPED_CLOSES),
       st.lists(st.sampled_from(SHAPED_TEXT_PIECES), max_size=16).map("".join))
def test_shaped_delimiters_parse_like_the_reference(template, text):
    """Templates whose modes watch `literal_shapes` patterns (decided by `oneshot._decide_shaped` after one
    literal search per candidate, the lean path's cheapest way) give the reference's message or exception
    class, one-shot; the streaming parser (the automaton) gives the same."""
    from harness import RefTimeout, run_chatparse, run_reference
    from strategies import compiles

    if not compiles(template):
        return  # (a zero-width open and close that would loop: the reference cannot run them either)
    ct = chatparse.compile_template(template)
    try:
        ref = run_reference(template, text)
    except RefTimeout:
        return
    try:
        got = ("ok", ct.parse(text, prefix=""))
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        got = ("error", type(e).__name__)
    assert got == ref[:2], (template, text)
    assert run_chatparse(template, [text])[:2] == ref[:2]
