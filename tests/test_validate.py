"""Template validation: chatparse's ``load_template`` against transformers 5.23.0 ``load_response_template``.

Bad templates must be rejected by both with the same exception class, the required message substrings, and
a message naming the field and the key; valid templates must be accepted by both with a normalized form
that agrees with the reference's compiled template.
"""

from __future__ import annotations

import copy
import json
import re

try:
    import chatparse.compiler  # noqa: F401
except ImportError:  # pragma: no cover - only when run without the project root on sys.path
    import pathlib
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers.utils.chat_parsing.response_parser import ResponseParser
from transformers.utils.chat_parsing.response_templates import load_response_template

from chatparse.compiler.validate import canonical_json, load_template

FAST = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])


def tpl(fields=None, **top):
    """A minimal valid template with the given fields / top-level overrides."""
    spec = {"start_anchor": "<|assistant|>", "fields": fields if fields is not None else {"content": {}}}
    spec.update(top)
    return spec


def raised(fn, spec):
    try:
        fn(copy.deepcopy(spec))
    except Exception as err:  # noqa: BLE001
        return err
    return None


# (id, template, exception class, required substrings, field mention, key mention)
BAD = [
    ("not-a-dict", ["x"], ValueError, ["must be a dict"], "response_template", "response_template"),
    ("version-2", tpl(version=2), ValueError, ["version"], "response_template", "version"),
    ("version-str", tpl(version="1"), ValueError, ["version"], "response_template", "version"),
    ("unknown-top-key", tpl(extra=1), ValueError, ["Unknown keys in response_template"], "response_template", "extra"),
    ("defaults-list", tpl(defaults=["role"]), ValueError, ["must be a dict"], "response_template", "defaults"),
    ("fields-empty", tpl(fields={}), ValueError, ["non-empty dict"], "response_template", "fields"),
    ("fields-list", tpl(fields=[{"open": "a"}]), ValueError, ["non-empty dict"], "response_template", "fields"),
    ("fields-missing", {"start_anchor": "x"}, ValueError, ["non-empty dict"], "response_template", "fields"),
    ("field-not-dict", tpl({"x": "text"}), ValueError, ["must be a dict"], "Field 'x'", "x"),
    ("unknown-field-key", tpl({"x": {"opn": "<a>"}}), ValueError, ["unknown keys"], "Field 'x'", "opn"),
    ("unknown-content", tpl({"x": {"open": "<a>", "content": "yaml"}}), ValueError, ["unknown content parser"], "Field 'x'", "content"),
    ("open-both", tpl({"x": {"open": "<a>", "open_pattern": "<a>"}}), ValueError, ["cannot specify both"], "Field 'x'", "open_pattern"),
    ("close-both", tpl({"x": {"close": "</a>", "close_pattern": "</a>"}}), ValueError, ["cannot specify both"], "Field 'x'", "close_pattern"),
    ("open-empty-list", tpl({"x": {"open": []}}), ValueError, ["at least one"], "Field 'x'", "open"),
    ("open-empty-literal", tpl({"x": {"open": [""]}}), ValueError, ["empty"], "Field 'x'", "open"),
    ("open-empty-string", tpl({"x": {"open": ""}}), ValueError, ["empty"], "Field 'x'", "open"),
    ("open-ints", tpl({"x": {"open": [1, 2]}}), ValueError, ["only strings"], "Field 'x'", "open"),
    ("open-dict", tpl({"x": {"open": {"a": 1}}}), ValueError, ["string or list of strings"], "Field 'x'", "open"),
    ("open-none", tpl({"x": {"open": None}}), ValueError, ["string or list of strings"], "Field 'x'", "open"),
    ("close-mixed", tpl({"x": {"open": "<a>", "close": ["</a>", 3]}}), ValueError, ["only strings"], "Field 'x'", "close"),
    ("open-regex", tpl({"x": {"open_pattern": "(<a"}}), ValueError, ["invalid open_pattern regex"], "Field 'x'", "open_pattern"),
    ("close-regex", tpl({"x": {"open": "<a>", "close_pattern": "[a"}}), ValueError, ["invalid close_pattern regex"], "Field 'x'", "close_pattern"),
    ("join-not-str", tpl({"x": {"open": "<a>", "repeats": True, "join": 7}}), ValueError, ["must be a string"], "Field 'x'", "join"),
    ("join-no-repeats", tpl({"x": {"open": "<a>", "join": ""}}), ValueError, ["requires 'repeats'"], "Field 'x'", "join"),
    ("join-repeats-false", tpl({"x": {"open": "<a>", "join": "\n", "repeats": False}}), ValueError, ["requires 'repeats'"], "Field 'x'", "join"),
    ("each-not-bool", tpl({"x": {"open": "<a>", "transform": "{content}", "transform_each": 1}}), ValueError, ["must be a bool"], "Field 'x'", "transform_each"),
    ("each-no-transform", tpl({"x": {"open": "<a>", "transform_each": True}}), ValueError, ["no", "transform"], "Field 'x'", "transform_each"),
    ("interpolation", tpl({"x": {"open": "<a>", "transform": {"name": "name: {content}"}}}), ValueError, ["interpolation", "{content}", "mixes"], "Field 'x'", "transform"),
    ("dotted-mix", tpl({"x": {"open": "<a>", "transform": [{"a": "pre {content.args}"}]}}), ValueError, ["mixes"], "Field 'x'", "transform"),
    ("named-open", tpl({"x": {"open_pattern": r"<(?P<name>\w+)>"}, "c": {}}), ValueError, ["transform", "name"], "Field 'x'", "open_pattern"),
    ("named-close", tpl({"x": {"open": "<t>", "close_pattern": r"</t id=(?P<id>\d+)>"}}), ValueError, ["transform", "'id'"], "Field 'x'", "close_pattern"),
    ("two-implicit", tpl({"a": {}, "b": {"close": "x"}}), ValueError, ["At most one field"], "a, b", "open"),
    ("no-anchor", {"fields": {"x": {}}}, ValueError, ["start_anchor"], "response_template", "start_anchor_pattern"),
    ("both-anchors", tpl(start_anchor_pattern="a"), ValueError, ["cannot specify both"], "response_template", "start_anchor_pattern"),
    ("anchor-empty-list", tpl(start_anchor=[]), ValueError, ["at least one"], "response_template", "start_anchor"),
    ("anchor-regex", {"start_anchor_pattern": "(", "fields": {"x": {}}}, ValueError, ["invalid start_anchor_pattern regex"], "response_template", "start_anchor_pattern"),
    ("anchor-int", tpl(start_anchor=5), ValueError, ["string or list of strings"], "response_template", "start_anchor"),
    # Order of checks: the first failing rule wins, exactly as in the reference.
    ("order-version-first", {"version": 3, "bogus": 1}, ValueError, ["version"], "response_template", "version"),
    ("order-field-before-anchor", {"fields": {"x": {"content": "nope"}}}, ValueError, ["unknown content parser"], "Field 'x'", "content"),
    ("order-content-before-open", tpl({"x": {"content": "nope", "open": []}}), ValueError, ["unknown content parser"], "Field 'x'", "content"),
    ("order-implicit-before-anchor", {"fields": {"a": {}, "b": {}}}, ValueError, ["At most one"], "a, b", "open"),
    ("order-join-before-each", tpl({"x": {"open": "a", "join": 1, "transform_each": 3}}), ValueError, ["must be a string"], "Field 'x'", "join"),
]


@pytest.mark.parametrize("spec,exc,needles,field,key", [row[1:] for row in BAD], ids=[row[0] for row in BAD])
def test_bad_template_rejected_like_reference(spec, exc, needles, field, key):
    ref_err = raised(load_response_template, spec)
    our_err = raised(load_template, spec)
    assert type(ref_err) is exc, ref_err
    assert type(our_err) is exc, our_err
    for needle in needles:
        assert needle.lower() in str(ref_err).lower()
        assert needle.lower() in str(our_err).lower(), (needle, str(our_err))
    assert field in str(our_err) and key in str(our_err), str(our_err)


@pytest.mark.parametrize(
    "spec",
    [
        tpl({"x": {"open": "<a>", "content": ["json"]}}),  # unhashable parser name
        tpl({"x": {"open_pattern": 5}}),  # a pattern that is not a string
        tpl({"x": {"open": "<a>", "close_pattern": None}}),
    ],
)
def test_type_errors_match_reference(spec):
    ref_err, our_err = raised(load_response_template, spec), raised(load_template, spec)
    assert ref_err is not None and type(our_err) is type(ref_err)


def test_validation_precedes_missing_prefix_check():
    # B6/B11: the ResponseParser constructor validates before complaining about the missing prefix.
    with pytest.raises(ValueError, match="start_anchor"):
        ResponseParser({"fields": {"x": {}}})
    with pytest.raises(ValueError, match="start_anchor"):
        load_template({"fields": {"x": {}}})


@pytest.mark.parametrize(
    "spec",
    [
        tpl(version=1),
        tpl(),
        tpl(version=True),  # the reference compares with ==, so True is accepted as 1
        tpl(version=1.0),
        tpl({"x": {"open": "<a>", "content_args": {"tag_pattern": "("}, "content": "xml-inline"}}),
        tpl({"x": {"open": "<a>", "content": "xml-inline"}}),  # tag_pattern only checked at parse time
        tpl({"x": {"open": "<a>", "content": "kv-lines", "content_args": {"value_parser": {"name": "nope"}}}}),
        tpl({"x": {"open": "<a>", "content_args": None}}),
        tpl({"x": {"open": "<a>", "repeats": "yes", "join": None, "optional": 0, "transform": None}}),
        tpl({"x": {"open_pattern": r"<(?P<n>\w+)>", "transform": {"n": "{n}", "lit": "{not interp}"}}}),
        tpl({"x": {"open_pattern": "(?:^|<think>\\s*)", "close": ["</think>", "</think>"]}, "c": {"close_pattern": "$"}}),
    ],
)
def test_accepted_like_reference(spec):
    load_response_template(copy.deepcopy(spec))
    out = load_template(copy.deepcopy(spec))
    json.dumps(out)


def test_literals_deduplicated_first_seen_order():
    spec = tpl({"x": {"open": ["<b>", "<a>", "<b>", "<a>"], "close": "</x>"}}, start_anchor=["S", "T", "S"])
    ref = load_response_template(copy.deepcopy(spec))
    out = load_template(spec)
    assert out["fields"][0]["open"] == {"literals": ref.fields["x"].open_literals} == {"literals": ["<b>", "<a>"]}
    assert out["fields"][0]["close"] == {"literals": ["</x>"]}
    assert out["start_anchor"] == {"literals": ["S", "T"]}


def test_normalized_shape_and_defaults():
    spec = {
        "defaults": {"role": "assistant", "x": ""},
        "start_anchor_pattern": r"<\|im_start\|>assistant\n",
        "fields": {
            "thinking": {"open": "<think>", "close": "</think>"},
            "tool_calls": {
                "open_pattern": r"<tool_call>\s*<function=(?P<name>\w+)>",
                "close": "</tool_call>",
                "repeats": True,
                "content": "xml-inline",
                "content_args": {"tag_pattern": r"<parameter=(?P<key>\w+)>(?P<value>.*?)</parameter>"},
                "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}},
            },
            "content": {"close": "<|im_end|>"},
        },
    }
    out = load_template(spec)
    assert out["version"] == 1 and out["implicit"] == "content"
    assert out["start_anchor"] == {"pattern": r"<\|im_start\|>assistant\n"}
    assert [f["name"] for f in out["fields"]] == ["thinking", "tool_calls", "content"]
    thinking, tools, content = out["fields"]
    assert thinking == {
        "name": "thinking", "open": {"literals": ["<think>"]}, "close": {"literals": ["</think>"]},
        "content": "text", "content_args": {}, "repeats": False, "join": None, "optional": True,
        "transform": None, "transform_each": False,
    }
    assert tools["open"] == {"pattern": r"<tool_call>\s*<function=(?P<name>\w+)>"} and tools["repeats"] is True
    assert content["open"] is None
    # No aliasing with the input, and JSON round-trips.
    spec["defaults"]["role"] = "changed"
    spec["fields"]["tool_calls"]["transform"]["type"] = "changed"
    assert out["defaults"] == {"role": "assistant", "x": ""}
    assert tools["transform"]["type"] == "function"
    assert json.loads(json.dumps(out)) == out


def test_canonical_json_is_order_insensitive():
    a = {"fields": {"x": {"open": "é", "close": "</x>"}}, "start_anchor": "S"}
    b = {"start_anchor": "S", "fields": {"x": {"close": "</x>", "open": "é"}}}
    assert canonical_json(a) == canonical_json(b) == '{"fields":{"x":{"close":"</x>","open":"é"}},"start_anchor":"S"}'


# ----------------------------------------------------------------------------- generated templates

LITERAL = st.text(alphabet="<>/|abt\n", min_size=1, max_size=5)
PATTERNS = st.sampled_from(
    [r"<t>", r"(?:^|<think>\s*)", r"\Z", r"$", r"</t>(?=!)", r"<(?P<name>\w+)>", r"</t id=(?P<id>\d+)>", r"(?P<a>x)|(?P<b>y)"]
)
CONTENTS = st.sampled_from(["text", "int", "float", "bool", "json", "xml-inline", "kv-lines"])
GOOD_TRANSFORMS = st.recursive(
    st.one_of(st.sampled_from(["{content}", "{content.a.b}", "{name}", "function", "{not interp}", "{}"]), st.integers(), st.none()),
    lambda inner: st.one_of(st.lists(inner, max_size=2), st.dictionaries(st.sampled_from(["a", "{b}"]), inner, max_size=2)),
    max_leaves=4,
)


@st.composite
def good_field(draw, explicit: bool):
    field = {}
    if explicit:
        field[draw(st.sampled_from(["open", "open_pattern"]))] = None
        if "open" in field:
            field["open"] = draw(st.one_of(LITERAL, st.lists(LITERAL, min_size=1, max_size=3)))
        else:
            field["open_pattern"] = draw(PATTERNS)
    close_kind = draw(st.sampled_from(["none", "close", "close_pattern"]))
    if close_kind == "close":
        field["close"] = draw(st.one_of(LITERAL, st.lists(LITERAL, min_size=1, max_size=3)))
    elif close_kind == "close_pattern":
        field["close_pattern"] = draw(PATTERNS)
    if draw(st.booleans()):
        field["content"] = draw(CONTENTS)
    if draw(st.booleans()):
        field["content_args"] = draw(st.sampled_from([{}, {"strip": False}, {"tag_pattern": "("}, {"x": [1]}]))
    if draw(st.booleans()):
        field["repeats"] = draw(st.booleans())
        if field["repeats"] and draw(st.booleans()):
            field["join"] = draw(st.sampled_from(["", "\n", " | "]))
    if draw(st.booleans()):
        field["optional"] = draw(st.booleans())
    if draw(st.booleans()):
        field["transform"] = draw(GOOD_TRANSFORMS)
        if field["transform"] is not None and draw(st.booleans()):
            field["transform_each"] = draw(st.booleans())
    if field.get("transform") is None and ("open_pattern" in field or "close_pattern" in field):
        # Named groups need a transform; give one whenever a pattern is used.
        field["transform"] = "{content}"
    return field


@st.composite
def good_template(draw):
    names = draw(st.lists(st.sampled_from(["content", "thinking", "tool_calls", "x", "é"]), min_size=1, max_size=4, unique=True))
    implicit_at = draw(st.one_of(st.none(), st.integers(0, len(names) - 1)))
    fields = {name: draw(good_field(explicit=i != implicit_at)) for i, name in enumerate(names)}
    spec = {"fields": fields}
    if draw(st.booleans()):
        spec["start_anchor"] = draw(st.one_of(LITERAL, st.lists(LITERAL, min_size=1, max_size=3)))
    else:
        spec["start_anchor_pattern"] = draw(PATTERNS)
    if draw(st.booleans()):
        spec["defaults"] = {"role": "assistant"}
    if draw(st.booleans()):
        spec["version"] = 1
    return spec


def _agree(out, ref):
    """The normalized template describes the same thing as the reference's compiled template."""
    assert out["implicit"] == ref.implicit
    assert out["defaults"] == ref.defaults
    assert [f["name"] for f in out["fields"]] == list(ref.fields)
    for f in out["fields"]:
        r = ref.fields[f["name"]]
        for side in ("open", "close"):
            norm, compiled, literals = f[side], getattr(r, f"{side}_re"), getattr(r, f"{side}_literals")
            if norm is None:
                assert compiled is None
            elif "literals" in norm:
                assert norm["literals"] == literals
            else:
                assert literals is None and norm["pattern"] == compiled.pattern
        assert (f["content"], f["content_args"], f["join"], f["transform"], f["transform_each"]) == (
            r.content, r.content_args, r.join, r.transform, r.transform_each)
        assert f["repeats"] == bool(r.repeats) and f["optional"] == bool(r.optional)
    if "literals" in out["start_anchor"]:
        assert out["start_anchor"]["literals"] == ref.start_anchor_literals
    else:
        assert ref.start_anchor_literals is None and out["start_anchor"]["pattern"] == ref.start_anchor_re.pattern


@FAST
@given(good_template())
def test_generated_valid_templates_accepted_by_both(spec):
    ref = load_response_template(copy.deepcopy(spec))
    out = load_template(copy.deepcopy(spec))
    _agree(out, ref)
    assert json.loads(canonical_json(out)) == out


# Arbitrary (mostly invalid) templates: both must agree on accept / reject and on the exception class.
JUNK = st.one_of(st.none(), st.booleans(), st.integers(-1, 3), st.sampled_from(["", "x", "(", "{content}", "a {b}"]),
                 st.lists(st.sampled_from(["", "a", 1]), max_size=2), st.just({}))
FIELD_KEYS = st.sampled_from(["open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats",
                              "join", "optional", "transform", "transform_each", "bogus"])


@st.composite
def junk_template(draw):
    fields = draw(st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.one_of(st.dictionaries(FIELD_KEYS, st.one_of(JUNK, CONTENTS, PATTERNS), max_size=4), JUNK),
        max_size=3,
    ))
    spec = draw(st.dictionaries(st.sampled_from(["version", "defaults", "start_anchor", "start_anchor_pattern", "other"]),
                                st.one_of(JUNK, PATTERNS, LITERAL), max_size=3))
    if draw(st.integers(0, 4)):
        spec["fields"] = fields
    return spec


def _scope(err):
    """The rule's scope: "Field 'x'" or the first word of the message."""
    return re.match(r"Field '.*?'|\S+", str(err)).group(0)


@FAST
@given(junk_template())
def test_generated_templates_same_verdict(spec):
    ref_err, our_err = raised(load_response_template, spec), raised(load_template, spec)
    assert type(ref_err) is type(our_err), (ref_err, our_err)
    if isinstance(ref_err, ValueError):
        # Same rule fired: the scope prefix of the message is identical.
        assert _scope(our_err) == _scope(ref_err), (str(our_err), str(ref_err))
    if ref_err is None:
        _agree(load_template(copy.deepcopy(spec)), load_response_template(copy.deepcopy(spec)))


# ---------------------------------------------------------------------- the table file's normalized template

def _normalized():
    return load_template(tpl({"think": {"open": ["<t>", "<t>"], "close": "</t>", "repeats": True, "join": "\n"},
                              "call": {"open_pattern": "<c (?P<n>\\w+)>", "close": "</c>",
                                       "transform": {"name": "{n}", "arguments": "{content}"}},
                              "content": {}}, defaults={"role": "assistant"}))


def test_check_normalized_accepts_what_load_template_makes():
    from chatparse.runtime.tables.validate import check_normalized

    check_normalized(json.loads(json.dumps(_normalized())))


@pytest.mark.parametrize("mutate, words", [
    (lambda s: s["fields"][0].update(repeats=1), "normalized form"),            # 1 for true
    (lambda s: s["fields"][0]["open"]["literals"].append("<t>"), "normalized form"),  # a repeated literal
    (lambda s: s.update(implicit=None), "normalized form"),
    (lambda s: s["fields"][0].update(content="yaml"), "unknown content parser"),
    (lambda s: s["fields"][0].update(repeats=False), "'join' requires 'repeats'"),
    (lambda s: s["fields"][1].update(transform={"name": "x{n}"}), "mixes a {placeholder}"),
    (lambda s: s["fields"][1].update(transform=None), "named group"),
    (lambda s: s["fields"][1].update(name=s["fields"][0]["name"]), "duplicate field name"),
    (lambda s: s.update(start_anchor={"pattern": "("}), "invalid start_anchor_pattern"),
    (lambda s: s["fields"][0].update(open=None), "At most one field"),
    (lambda s: s["fields"][0].pop("join"), "expected an object with keys"),
])
def test_check_normalized_applies_the_template_rules(mutate, words):
    """The loader checks a table file's template with the same rules as `load_template` (one validator)."""
    from chatparse.runtime.tables.validate import check_normalized

    spec = json.loads(json.dumps(_normalized()))
    mutate(spec)
    with pytest.raises(ValueError, match=re.escape(words)):
        check_normalized(spec)
