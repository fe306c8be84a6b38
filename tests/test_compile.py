"""The compiler on its own: exact character classes, leftmost-first match ends, and bounded refusals."""

from __future__ import annotations

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse.compiler.charsets import class_ranges


def _tables(pattern: str):
    return chatparse.compile_template(
        {"start_anchor": "S", "fields": {"x": {"open_pattern": pattern, "close": "\x00"}}}
    ).tables


def dfa_match_end(tables, text: str, start: int):
    """Run mode 0's DFA from `start` to its end (feeding EOT at the end of text); the match end or None."""
    mode = tables.modes[0]
    st_ = mode.start0 if start == 0 else mode.startN
    end = None
    if mode.acc[st_]:
        end = start - mode.acc[st_][0][1]
    i = start
    while st_ and not mode.term[st_] and i < len(text):
        st_ = mode.trans[st_ * mode.n_classes + tables.cmap[ord(text[i])]]
        i += 1
        if st_ and mode.acc[st_]:
            end = i - mode.acc[st_][0][1]
    if st_ and not mode.term[st_] and i == len(text):
        st_ = mode.eot[st_]
        if st_ and mode.acc[st_]:
            end = i - mode.acc[st_][0][1]
    return end


PIECES = ["a", "b", "ab", "<", ">", r"[ab]", r"\w", r"\s", ".", r"[^>]", r"\d"]
QUANTS = ["", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,2}?"]


@st.composite
def exact_patterns(draw):
    def atom():
        p = draw(st.sampled_from(PIECES))
        return (f"(?:{p})" if len(p) > 1 and not p.startswith(("[", "\\")) else p) + draw(st.sampled_from(QUANTS))

    seqs = ["".join(atom() for _ in range(draw(st.integers(1, 4)))) for _ in range(draw(st.integers(1, 3)))]
    body = "|".join(seqs)
    pre = draw(st.sampled_from(["", "", "^", "(?:^|<)"]))
    post = draw(st.sampled_from(["", "", "$", r"\Z"]))
    return f"{pre}(?:{body}){post}"


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(exact_patterns(), st.text(alphabet="ab<> \n1é", max_size=12))
def test_dfa_match_end_equals_regex_leftmost_first(pattern, text):
    tables = _tables(pattern)
    assert tables.patterns[0].exact, pattern
    rx = regex.compile(pattern, regex.DOTALL)
    for start in range(len(text) + 1):
        m = rx.match(text, start)
        assert dfa_match_end(tables, text, start) == (m.end() if m else None), (pattern, text, start)


def test_character_classes_are_regex_unicode_classes():
    word = class_ranges(r"\w")
    inside = lambda cp: any(lo <= cp <= hi for lo, hi in word)  # noqa: E731
    for ch in "aé_9ßЖ中":
        assert inside(ord(ch)) == bool(regex.match(r"\w", ch)) is True
    for ch in " -\n€":
        assert inside(ord(ch)) == bool(regex.match(r"\w", ch)) is False
    # `.` with DOTALL includes "\n"; every code point of \s agrees with regex.
    assert class_ranges(".") == ((0, 0x10FFFF),)
    space = class_ranges(r"\s")
    for lo, hi in space:
        for cp in (lo, hi):
            assert regex.match(r"\s", chr(cp))


def test_unicode_word_delimiter_matches_non_ascii_names():
    t = {"start_anchor": "S", "fields": {"x": {"open_pattern": r"<f=(?P<n>\w+)>", "close": "</f>",
                                              "transform": {"name": "{n}", "body": "{content}"}}}}
    assert chatparse.parse_response("<f=café_1>ok</f>", t, prefix="") == {"x": {"name": "café_1", "body": "ok"}}


@pytest.mark.parametrize("pattern,message", [
    (r"(?:a|b)*a(?:a|b){14}", "Field 'x' open_pattern.*exceeds 20000 states"),
    ("a{64}" * 400, "Field 'x': open_pattern: pattern too large.*MAX_NFA_STATES"),  # (x{1,30000} is now a+)
    (r"\p{L}+", "Field 'x': open_pattern: .*syntax specific to the `regex` module"),
    (r"(?<=a.*)b", "Field 'x': open_pattern: .*unbounded lookbehind"),
])
def test_compile_refuses_with_field_and_key(pattern, message):
    with pytest.raises(ValueError, match=message):
        chatparse.compile_template({"start_anchor": "S", "fields": {"x": {"open_pattern": pattern, "close": "!"}}})


def test_lookaround_patterns_are_marked_regex_decided_with_reasons():
    c = chatparse.compile_template({"start_anchor": "S", "fields": {
        "x": {"open_pattern": r"(?<=\n)<x>", "close_pattern": r"</x>(?!y)"}}})
    reasons = {p["key"]: p["reasons"] for p in c.raw_tables["patterns"]}
    assert reasons == {"open_pattern": ["lookbehind"], "close_pattern": ["lookahead"]}


# -- the compile cache: the same dict object, unchanged, skips validation (chatparse/compiled.py) ------------

def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001 - class and message are compared
        return (type(e), str(e))


EDITS = [
    ("repeats", True), ("repeats", 1), ("repeats", 1.0), ("repeats", False), ("close", "</t>"), ("close", ("</t>",)), ("close", ["</t>"]),
    ("close", ["</t>", "</u>"]), ("close", 7), ("open", "<t>"), ("open", "<u>"), ("content", "json"),
    ("content", "nope"), ("join", "\n"), ("join", None),
]


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.sampled_from(EDITS), max_size=12))
def test_reused_template_dict_follows_every_edit(edits):
    """A template dict compiled again and again while it is edited in place (values of other types that
    compare equal, tuples for lists, invalid values) gives what validating a fresh copy gives, every time."""
    import copy

    from chatparse.compiler.validate import load_template

    template = {"start_anchor": "<|A|>", "fields": {"t": {"open": "<t>", "close": "</t>"}, "content": {}}}
    field = template["fields"]["t"]
    for key, value in [(None, None)] * 3 + edits:  # (three plain rounds first: the copy is taken on the second)
        if key is not None:
            field[key] = value
        got = _outcome(lambda: chatparse.compile_template(template).spec)
        want = _outcome(lambda: load_template(copy.deepcopy(template)))
        assert got == want, (key, value)


def test_templates_differing_only_in_key_order_compile_apart():
    """A transform's key order is the output's (as in the reference): two templates that differ only in it
    must not share a cached compile (the cache used to be keyed by sorted-key JSON)."""
    from transformers.utils.chat_parsing import parse_response as reference

    def template(pairs):
        return {"defaults": {"role": "assistant"}, "start_anchor": "<s>",
                "fields": {"tool_calls": {"open": "<t>", "close": "</t>", "repeats": True, "content": "json",
                                          "transform": dict(pairs)}}}

    text = '<t>{"k": 2}</t>'
    for pairs in ([("y", 1), ("x", "{content}")], [("x", "{content}"), ("y", 1)]):
        got = chatparse.parse_response(text, template(pairs), prefix="<s>")["tool_calls"][0]
        assert list(got) == [k for k, _ in pairs] == list(reference(text, template(pairs), prefix="<s>")["tool_calls"][0])
