"""The lean path's native regions (`chatparse.runtime.oneshot._lean_regions`, issue #20) against its Python loop.

For a template whose every mode is decided by string tests (one literal, literals with whitespace around
them, or no delimiter at all) or by a keyed literal table (every match starts with one of a few literals, and
`regex` is asked only where one occurs: gpt-oss, cohere), `oneshot._parse_lean` hands the whole delimiter loop
to the C module and only stores the regions it returns. The message, the exception, the logged stall / loop and the fallback to the
automaton must be those of the Python loop (``lean_regions._use_native = False``) for every text, and the
reference's (tests/test_oneshot.py's shaped-template test runs through the module too). Without the module
(an install with no C compiler) these tests skip, saying so; ``CHATPARSE_REQUIRE_NATIVE=1`` (set by .ci/run)
makes its absence a failure.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import chatparse
from chatparse import templates
from chatparse.runtime.oneshot import lean_regions
from chatparse.runtime.oneshot import parse as oneshot
from chatparse.runtime.oneshot.plan import plan_for
from strategies import shaped_templates

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

native = pytest.mark.skipif(not lean_regions.NATIVE, reason="chatparse.runtime.oneshot._lean_regions is not built (no "
                            "C compiler when chatparse was installed); the Python loop is tested by test_oneshot.py")

# the bundled templates the module takes (every mode one literal, shaped literals, keyed literals, or nothing)
NATIVE_TEMPLATES = ["cohere", "ernie45", "gpt_oss", "granite3", "granite4", "granite_20b_fc", "hermes", "hunyuan_a13b",
                    "jamba", "kimi_vl_think", "lfm2", "longcat", "mistral_pre_v11", "nemotron_json", "qwen3", "smollm3"]


def test_native_module_is_built_where_required():
    """Built wherever chatparse was installed with a C compiler; required to be where CHATPARSE_REQUIRE_NATIVE=1."""
    if not lean_regions.NATIVE and os.environ.get("CHATPARSE_REQUIRE_NATIVE") != "1":
        pytest.skip("not built: no C compiler when chatparse was installed (CHATPARSE_REQUIRE_NATIVE is not set)")
    assert lean_regions.NATIVE, "pip install did not build chatparse.runtime.oneshot._lean_regions"


@native
def test_which_bundled_templates_go_native():
    """The module takes exactly the bundled templates whose modes are all string tests or keyed literal tables
    (the list above), and refuses the others (a mode whose candidates only a prefilter or the whitespace-led
    search finds, or one that starts with a literal `regex` decides)."""
    taken = [name for name in templates.names()
             if plan_for(chatparse.compile_template(templates.get(name)).tables).native is not None]
    assert taken == NATIVE_TEMPLATES


def outcome(tables, text, *, enabled, caplog=None, seconds=60.0):
    """`_parse_lean`'s message, or its exception's class and message, or "fallback"; with the records logged.
    The candidate paths' time limit is `seconds` (their count limit stays): with the module's 2 ms a loaded
    machine could make the Python loop fall back where the C loop does not, which says nothing about what either
    decides."""
    if caplog is not None:
        caplog.clear()
    saved = lean_regions._use_native, oneshot.SCAN_SECONDS
    lean_regions._use_native, oneshot.SCAN_SECONDS = enabled, seconds
    try:
        got = ("ok", oneshot._parse_lean(tables, {}, text))
    except oneshot._Fallback as f:
        got = ("fallback", f.automaton)
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        got = ("error", type(e).__name__, str(e))
    finally:
        lean_regions._use_native, oneshot.SCAN_SECONDS = saved
    logged = [] if caplog is None else [r.getMessage() for r in caplog.records]
    return got, logged


def same_both_ways(tables, text, caplog=None, seconds=60.0):
    native_got = outcome(tables, text, enabled=True, caplog=caplog, seconds=seconds)
    python_got = outcome(tables, text, enabled=False, caplog=caplog, seconds=seconds)
    assert native_got == python_got, text
    return native_got[0]


@native
@pytest.mark.parametrize("name", NATIVE_TEMPLATES)
def test_bundled_generations_parse_as_the_python_loop(name):
    """bench/datasets_gen.py's generations of each family (about one in twenty malformed), and the same texts
    cut at every 7th offset: the same messages and errors either way."""
    from bench.datasets_gen import FAMILIES, generations

    tables = chatparse.compile_template(templates.get(name)).tables
    family = name if name in FAMILIES else "qwen3"
    prefixes, texts = generations(family, 60, seed=11)
    for text in texts:
        same_both_ways(tables, text)
        for cut in range(0, len(text), 7):
            same_both_ways(tables, text[:cut])


SHAPED_OPENS = [r"\s*<a>", "<a>", r"\s*<b>", r"\s+<bc>", r"\s*(?:<c>|<cc>)", r"\s*(?=<c>)"]
SHAPED_CLOSES = [r"\s*</a>", r"</a>\s*", r"\s*</a>\s*|\s*(?=<b>)", r"\s+(?:</b>|</bc>)", "</c>", r"\s*(?=<a>)",
                 r"\s*</a>\s*", "</b>", r"\s*(?=<c>)"]
PIECES = ["<a>", "</a>", "<b>", "<bc>", "</b>", "</bc>", "<c>", "<cc>", "</c>", "<", "</", " ", "\n", "\t", "\u3000",
          "\x1c", "\x85", "x", "é", "😀", " <c>", "\n<a>", " </a> ", "\u3000<b>", "  </bc>", " </c>\n", "{}", "[1]"]


@native
@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@example(template={"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # a zero-width open, then its close
          "fields": {"a": {"open_pattern": r"\s*(?=<c>)", "close_pattern": r"\s*(?=<a>)"}}}, text="x<c><a>y")
@example(template={"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # ... and at its offset: a loop
          "fields": {"a": {"open_pattern": r"\s*(?=<c>)", "close_pattern": r"\s*(?=<c>)"}}}, text="x<c>y")
@example(template={"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",  # a zero-width close of an empty region
          "fields": {"content": {"close_pattern": r"\s*(?=<a>)"}}}, text="<a>x")
@given(template=shaped_templates(SHAPED_OPENS, SHAPED_CLOSES, json_bodies=True),
       text=st.lists(st.sampled_from(PIECES), max_size=24).map("".join))
def test_shaped_templates_parse_as_the_python_loop(template, text, caplog):
    """Random templates of shaped, literal and closeless modes, texts of their literals, whitespace of every
    kind (\\u3000, \\x1c, \\x85), non-ASCII text: the same message, error, logged stall or loop, either way."""
    same_where_native(template, text, caplog)


def same_where_native(template, text, caplog):
    """`same_both_ways` for a template the compiler takes and the module runs (others are left out)."""
    from strategies import compiles

    if not compiles(template):
        return
    tables = chatparse.compile_template(template).tables
    if plan_for(tables).native is None:
        return
    with caplog.at_level(logging.INFO, logger="chatparse"):
        same_both_ways(tables, text, caplog)


def share_taken(strategy, taken_by, examples: int) -> tuple:
    """(templates of `strategy` the module takes as `taken_by(plan)` says, templates that compile)."""
    from strategies import compiles

    taken = total = 0

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(strategy)
    def count(template):
        nonlocal taken, total
        if compiles(template):
            total += 1
            taken += bool(taken_by(plan_for(chatparse.compile_template(template).tables)))

    count()
    return taken, total


@native
def test_the_random_templates_mostly_go_native():
    """The strategy above is not vacuous: most of its templates are taken by the module."""
    taken, total = share_taken(shaped_templates(SHAPED_OPENS, SHAPED_CLOSES, json_bodies=True),
                               lambda plan: plan.native is not None, 200)
    assert total and taken / total > 0.5, (taken, total)


@native
def test_stall_and_loop_are_logged_as_by_the_python_loop(caplog):
    stall = {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",
             "fields": {"content": {"close_pattern": r"\s*(?=<a>)"}, "a": {"open_pattern": "<b>"}}}
    tables = chatparse.compile_template(stall).tables
    assert plan_for(tables).native is not None
    with caplog.at_level(logging.INFO, logger="chatparse"):
        got, logged = outcome(tables, "<a>rest", enabled=True, caplog=caplog)
        assert got == ("ok", {"role": "assistant"}) and logged
        assert (got, logged) == outcome(tables, "<a>rest", enabled=False, caplog=caplog)


@native
def test_out_of_candidates_or_time_goes_to_the_automaton():
    """When the candidate budget runs out, or the deadline has passed at a clock check (every 64 candidates),
    the module says so and the parse goes to the automaton, after the regions found before are stored, as in
    the Python loop; the message is the automaton's."""
    template = {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>",
                "fields": {"a": {"open_pattern": r"\s+<b>"}, "content": {}}}
    tables = chatparse.compile_template(template).tables
    spec = plan_for(tables).native
    assert spec is not None
    text = "<b>" * 1000  # (every '<b>' a candidate, none led by whitespace: 1000 candidates, budget 814)
    found, status, _, _ = lean_regions._lean_regions.regions(spec, text, 10_000, -1.0, lambda: 0.0)
    assert status == 3 and found == []  # (the clock, at the 16th candidate: 10,000 - 16 = 156 * 64)
    found, status, _, _ = lean_regions._lean_regions.regions(spec, text, 10_000, 1e30, lambda: 0.0)
    assert status == 0 and found == [(1, text, -1, None, None)]
    assert same_both_ways(tables, text) == ("fallback", True)  # (the budget)
    assert same_both_ways(tables, "<b>" * 100 + "x <b>", seconds=-1.0) == ("fallback", True)  # (the deadline)
    assert oneshot.parse_whole(tables, {}, text) == oneshot._parse_by_automaton(tables, {}, text)


@native
@pytest.mark.parametrize("args, error", [
    (("", 0, (True,), (0,), (("nowhere",),)), ValueError),  # implicit field 0 needs a mode 1
    (("", -1, (True,), (0, 1), (("nowhere",), ("nowhere",))), ValueError),  # opens / pat_field lengths
    (("", -1, (True,), (5,), (("nowhere",), ("nowhere",))), ValueError),  # a field out of range
    (("", -1, (True,), (0,), (("single", "", 0, 1), ("nowhere",))), TypeError),  # an empty literal
    (("", -1, (True,), (0,), (("single", "<a>", 3, 3), ("nowhere",))), ValueError),  # a pattern out of range
    (("", -1, (True,), (0,), (("other",), ("nowhere",))), ValueError),  # an unknown kind
    (("", -1, (True,), (0,), (("shaped", False, ("<a>",), (None,), (((0, 0, ((0, 0, 3, 7),)),),)),
                              ("nowhere",))), ValueError),  # an `after` out of range
    (("", -1, (True,), (0,), (("shaped", False, ("<a>",), (None, None), ((),)), ("nowhere",))), TypeError),
    (("\u3001", -1, (True,), (0,), (("nowhere",), ("nowhere",))), ValueError),  # whitespace past U+3000
    (("", -1, [True], (0,), (("nowhere",), ("nowhere",))), TypeError),  # a list for a tuple
    (("", -1, (True,), (0,), (("keyed", ("<a>",), ((0, 3), (0, 3))), ("nowhere",))), TypeError),  # keys != literals
    (("", -1, (True,), (0,), (("keyed", ("<a>",), ((4, 3),)), ("nowhere",))), ValueError),  # a pattern out of range
    (("", -1, (True,), (0,), (("keyed", ("<a>",), ("x",)), ("nowhere",))), TypeError),  # neither (pi, length) nor callable
    (("", -1, (True,), (0,), (("keyed", ("",), ((0, 0),)), ("nowhere",))), TypeError),  # an empty literal
])
def test_bad_specs_are_refused(args, error):
    with pytest.raises(error, match="lean_regions spec|must be"):
        lean_regions._lean_regions.compile(*args)


@native
def test_a_good_spec_by_hand():
    spec = lean_regions._lean_regions.compile(" ", 1, (True, False, False), (0, 0, 1), (
        ("shaped", True, ("<a>",), ((0, 0, 1 << 62, 3, 0),), (((0, 0, ((0, 1 << 62, 3, 0),)),),)),
        ("single", "</a>", 1, 4), ("nowhere",)))
    found, status, _, _ = lean_regions._lean_regions.regions(spec, "x  <a>y</a>z", 100, 1e30, lambda: 0.0)
    assert (found, status) == ([(1, "x", -1, None, None), (0, "y", 0, None, None), (1, "z", -1, None, None)], 0)


@native
def test_a_keyed_spec_by_hand():
    """A keyed mode: a literal key is its pattern's match; a decide callable is asked at each occurrence of its
    literal, None moving the search on, its (end, pattern, match, reader) handed back with the region it opens;
    an end outside [p, len(text)] is refused; an exception it raises propagates."""
    asked = []

    def decide(text, p):
        asked.append(p)
        return None if text[p + 2] != "!" else (p + 3, 1, "M", "R")

    spec = lean_regions._lean_regions.compile("", 2, (True, True, False), (0, 1, 2), (
        ("keyed", ("<a", "<b"), ((0, 2), decide)), ("single", "/", 2, 1), ("single", "/", 2, 1), ("nowhere",)))
    found, status, _, _ = lean_regions._lean_regions.regions(spec, "x<bx<ay/<b!z/w", 100, 1e30, lambda: 0.0)
    assert status == 0 and asked == [1, 8]
    assert found == [(2, "x<bx", -1, None, None), (0, "y", 0, None, None), (1, "z", 1, "M", "R"),
                     (2, "w", -1, None, None)]
    bad = lean_regions._lean_regions.compile("", -1, (True,), (0,), (
        ("keyed", ("<b",), (lambda text, p: (len(text) + 1, 0, None, None),)), ("nowhere",)))
    with pytest.raises(ValueError, match="end"):
        lean_regions._lean_regions.regions(bad, "<b", 100, 1e30, lambda: 0.0)

    def boom(text, p):
        raise oneshot._Fallback(automaton=True)

    fails = lean_regions._lean_regions.compile("", -1, (True,), (0,), (("keyed", ("<b",), (boom,)), ("nowhere",)))
    with pytest.raises(oneshot._Fallback):
        lean_regions._lean_regions.regions(fails, "x<b", 100, 1e30, lambda: 0.0)


# keyed modes: open patterns that start with one of a few literals (some shared by two patterns), then what
# only `regex` decides (a capture, a class, a bounded run that `plan.WindowTwin` runs by its `re` twin)
KEYED_OPENS = ["<a>", "<b>", r"<a>(?P<g>[xy]+)>", r"<b>(?P<g>[^<>]*)>", r"<c>[xy]*(?:<d>[^<]*)?>", r"<c>\s*>",
               r"<c>(?P<g>\w+)\s*>", r"<b>x"]
KEYED_CLOSES = ["</a>", "</b>", ["</a>", "</b>"], "</c>"]
KEYED_PIECES = ["<a>", "<b>", "<c>", "<d>", "</a>", "</b>", "</c>", ">", "x", "y", "xy>", " ", "<", "é", "→",
                "z", "{\"k\": 1}", "\n", "<a>xy>", "<b>x>", "<c>xy>", "<c> >", "<c>z >", "<c>x<d>q>"]


@st.composite
def keyed_templates(draw):
    opens = draw(st.lists(st.sampled_from(KEYED_OPENS), min_size=2, max_size=3, unique=True))
    fields = {}
    for k, open_ in enumerate(opens):
        field = {("open" if "\\" not in open_ and "(" not in open_ and "[" not in open_ else "open_pattern"): open_,
                 "close": draw(st.sampled_from(KEYED_CLOSES)), "repeats": draw(st.booleans())}
        if "(?P<g>" in open_:
            field["transform"] = {"g": "{g}", "c": "{content}"}
        fields[f"f{k}"] = field
    if draw(st.booleans()):
        fields["content"] = {"repeats": True}
    return {"defaults": {"role": "assistant"}, "start_anchor": "<|A|>", "fields": fields}


@native
@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(template=keyed_templates(), text=st.lists(st.sampled_from(KEYED_PIECES), max_size=24).map("".join))
def test_keyed_templates_parse_as_the_python_loop(template, text, caplog):
    """Random templates with keyed modes, texts of their literals, ASCII and not (the keyed tables differ): the
    same message, error, logged stall or loop, either way."""
    same_where_native(template, text, caplog)


@native
def test_the_keyed_templates_mostly_go_native():
    """The strategy above is not vacuous: most of its templates are taken by the module, with a keyed mode."""
    taken, total = share_taken(keyed_templates(), lambda plan: plan.native is not None and any(
        m[5] is not None for m in plan.mode_tuples), 150)
    assert total and taken / total > 0.5, (taken, total)
