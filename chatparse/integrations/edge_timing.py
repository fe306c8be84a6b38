"""When the servers' copies of the interpreter hand a delimiter out: the edge rule vLLM 0.33.0
(`vllm.parser.chat_parsing`) and SGLang 0.5.23 (`sglang.srt.parser.chat_parsing`) share, applied to
chatparse's events.

chatparse hands a delimiter out as soon as no continuation can change it. Both servers' interpreters hold a
complete match that ends exactly at the end of the text so far until one more character arrives: always when
the match is zero-width, and otherwise unless it is a literal that no other literal of the same field extends
(their `_can_grow`, the same code in both). `edge_split` moves such events, and the implicit close reported with
an open, back to where the interpreter reports them. Neither server is imported here: `template` is the
server's own loaded template, whose fields carry the literals `_can_grow` reads.
"""

from __future__ import annotations

from typing import Any

DELIMITED = ("region_open", "region_close", "region_malformed")
CLOSED = ("region_close", "region_malformed")  # the events of a region whose value was stored (or failed to be)


def can_grow(template: Any, event: dict) -> bool:
    """The interpreter's `_can_grow` for the delimiter of `event`, a match ending at the end of the text:
    whether it holds it until more text (or the end) arrives. `template` is the server's loaded template."""
    if event["start"] == event["end"]:
        return True
    field = template.fields[event["field"]]
    if event["type"] == "region_open":
        literals, extend = field.open_literals, field.open_literal_can_extend
    else:
        literals, extend = field.close_literals, field.close_literal_can_extend
    return literals is None or extend


def edge_split(template: Any, events: list[dict], length: int) -> tuple[list[dict], list[dict]]:
    """`events` (chatparse's, for input text of `length` characters) as (what the interpreter has handed out,
    what it still holds): the split falls at the first delimiter event that ends at `length` and can grow, or
    at the zero-width close reported together with it (an open closes the region before)."""
    for i, ev in enumerate(events):
        if ev["type"] in DELIMITED and ev["end"] == length and can_grow(template, ev):
            if ev["type"] == "region_open" and i and events[i - 1]["type"] in CLOSED \
                    and events[i - 1]["start"] == events[i - 1]["end"] == ev["start"]:
                i -= 1
            return events[:i], events[i:]
    return events, []
