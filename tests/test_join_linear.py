"""A `join` field's values are kept as parts while parsing and joined once, when the message is read: joining
at every region made each region cost the length of all the text before it (quadratic in the number of
regions: content between thousands of tool calls). Checked by what is stored, not by timing; the message is
the reference's."""

from __future__ import annotations

import chatparse
from chatparse import templates
from chatparse.runtime.stream.parser import JoinedParts


def _text(n: int) -> str:
    call = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    return "".join(f"part {i} {call}" for i in range(n)) + "end"


def test_join_parts_are_joined_once_when_read():
    from transformers.utils.chat_parsing import parse_response as reference

    template = templates.get("hermes")
    assert template["fields"]["content"]["join"] == "\n\n"
    text = _text(50)
    p = chatparse.ResponseParser(template, prefix="")
    for k in range(0, len(text), 7):
        p.feed(text[k:k + 7])
    stored = p._core.output["content"]
    assert type(stored) is JoinedParts and len(stored) == 50  # the parts so far, not one string rebuilt 50 times
    assert p._output["content"] == "\n\n".join(stored)  # read mid-stream: joined
    fork = p._core.fork()
    message, _ = p.finalize()
    want = reference(text, template, prefix="")
    assert message == want == chatparse.parse_response(text, template, prefix="")
    assert message["content"] == "\n\n".join(f"part {i}" for i in range(50)) + "\n\nend"
    assert type(fork.output["content"]) is JoinedParts and fork.output["content"] is not stored  # (its own copy)


def _plain_final(required: list, defaults: dict, output: dict, malformed) -> dict:
    """`final_output`'s rule stated plainly: parts joined, a required field missing (and not malformed) raises,
    then a key without a value (None, or an empty str / list / dict) dropped unless it is a default's."""
    out = {k: v.text() if type(v) is JoinedParts else v for k, v in output.items()}
    missing = [n for n in required if n not in out and not (malformed and n in malformed)]
    if missing:
        raise ValueError(f"Required response_template fields missing from parsed output: {missing}")
    return {k: v for k, v in out.items()
            if k in defaults or not (v is None or isinstance(v, (list, dict, str)) and not v)}


def test_final_output_is_the_plain_rule():
    """`parser.final_output` (whose usual message, nothing required and every value non-empty and whole, is
    returned as it is) against its rule stated plainly, on messages of every kind of value."""
    from types import SimpleNamespace

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from chatparse.runtime.stream.parser import final_output

    keys = st.sampled_from(["role", "content", "reasoning_content", "tool_calls", "x"])
    values = st.one_of(st.none(), st.sampled_from(["", "a", 0, 1, False, 0.0]), st.lists(st.integers(), max_size=2),
                       st.dictionaries(st.just("k"), st.integers(), max_size=1),
                       st.lists(st.sampled_from(["", "p"]), min_size=1, max_size=3).map(
                           lambda parts: JoinedParts("\n\n", parts)))

    @settings(max_examples=400, deadline=None)
    @given(st.dictionaries(keys, values, max_size=5), st.lists(keys, max_size=2, unique=True),
           st.dictionaries(keys, st.sampled_from(["assistant", ""]), max_size=2),
           st.one_of(st.none(), st.sets(keys, max_size=2)))
    def check(output, required, defaults, malformed):
        tables = SimpleNamespace(required=required, template={"defaults": defaults})
        try:
            want = _plain_final(required, defaults, dict(output), malformed)
        except ValueError as e:
            want = e
        try:
            got = final_output(tables, dict(output), malformed)
        except ValueError as e:
            got = e
        if isinstance(want, ValueError):
            assert isinstance(got, ValueError) and str(got) == str(want)
        else:
            assert got == want and all(type(v) is not JoinedParts for v in got.values())

    check()
