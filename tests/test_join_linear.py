"""A `join` field's values are kept as parts while parsing and joined once, when the message is read: joining
at every region made each region cost the length of all the text before it (quadratic in the number of
regions: content between thousands of tool calls). Checked by what is stored, not by timing; the message is
the reference's."""

from __future__ import annotations

import chatparse
from chatparse import templates
from chatparse.runtime.parser import JoinedParts


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
