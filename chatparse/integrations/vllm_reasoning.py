"""Reasoning-end detection and reasoning-token counting for the vLLM plugin, on chatparse's parser.

vLLM 0.33.0 answers both questions from the events its interpreter has handed out so far
(`vllm.parser.response_template`: `_reasoning_has_ended`, `_ReasoningTokenCounter`), and re-parses the whole
prompt and generation for the first on every call when the reasoning closer is not a literal. Here the same
answers come from chatparse's parser in the serving dialect, continued over the new tokens only.

The one thing to reconcile is *when* events are handed out. chatparse hands a delimiter out as soon as no
continuation can change it; vLLM's interpreter holds a complete match that ends exactly at the end of the
text so far until one more character arrives: always when the match is zero-width, and otherwise unless it
is a literal that no other literal of the same field extends (`_can_grow` in
`vllm.parser.chat_parsing.response_parser`). `edge_split` (`chatparse.integrations.edge_timing`, SGLang's
interpreter has the same rule) moves such events
(and the implicit close reported with an open) back to where vLLM reports them: after the end of the text, in
what its reasoning-end check sees when it feeds a NUL. vLLM's own decision function then reads chatparse's
events (`reasoning_has_ended`), so the rule it applies is its own.

What this does not reproduce: a `regex` partial match that vLLM holds where no match can complete (README,
Differences), and vLLM's per-token decode of a character split across tokens (U+FFFD pieces).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

from vllm.parser import response_template as _rt

from chatparse.integrations.edge_timing import CLOSED, DELIMITED, edge_split

CONTINUATION_CHECK = 16  # ids compared to take a call as continuing the previous one


class _EventsView:
    """What vLLM's `_reasoning_has_ended` reads of a parser: its `initial_events`, and `feed` (a NUL)."""

    def __init__(self, initial_events: list[dict], feed: Callable[[str], list[dict]]):
        self.initial_events = initial_events
        self.feed = feed


def reasoning_has_ended(template: Any, parser: Any, *, thinking_disabled: bool) -> bool:
    """vLLM's `_reasoning_has_ended` for a chatparse parser in the serving dialect made with the text as its
    prefix (`parser` is consumed: the NUL is fed to it)."""
    length = parser.input_length
    handed, held = edge_split(template, parser.initial_events, length)
    view = _EventsView(handed, lambda text: _probed(template, held, parser.feed(text), length + len(text)))
    return _rt._reasoning_has_ended(view, template, thinking_disabled=thinking_disabled)


def _probed(template: Any, held: list[dict], events: list[dict], length: int) -> list[dict]:
    """What vLLM's interpreter hands out when the probe text arrives: the events it held, then those of the
    probe, less what it holds again at the new end (a `regex` close such as ``.`` matching the NUL itself)."""
    return edge_split(template, held + events, length)[0]


def _continues(seen: list[int], ids: Sequence[int]) -> bool:
    """`ids` continues `seen` (checked on the last `CONTINUATION_CHECK` ids of `seen`, so that a call costs
    the new ids, not all of them)."""
    n = len(seen)
    if len(ids) < n:
        return False
    k = max(0, n - CONTINUATION_CHECK)
    return list(ids[k:n]) == seen[k:]


class ReasoningEndTracker:
    """`is_reasoning_end(input_ids)` for a growing `input_ids`, at the cost of the new ids.

    vLLM's answer for ids is `_reasoning_has_ended` over a parser whose prefix is all of them, decoded. This
    keeps one chatparse `TokenParser` (prefix: the ids of the first call) and feeds it each call's new ids;
    of the events handed out it keeps what `_reasoning_has_ended` reads (whether reasoning closed, and the
    last open or close), and the NUL goes to a fork of the parser (`probe`). A call whose ids do not continue
    the previous call's starts again from them."""

    def __init__(self, binding: Any, template: Any, *, thinking_disabled: bool):
        self.binding = binding
        self.template = template
        self.thinking_disabled = thinking_disabled
        self.parser = None
        self.seen: list[int] = []

    def __call__(self, input_ids: Sequence[int]) -> bool:
        if self.parser is None or not _continues(self.seen, input_ids):
            try:
                self.parser = self.binding.parser(prefix_ids=list(input_ids), dialect="vllm")
            except Exception:
                self.parser = None
                return False  # as vLLM's `is_reasoning_end`, whose parser could not be built
            self.seen = list(input_ids)
            self.closed = None  # the first close (or malformed end) of the reasoning field
            self.last = None  # the last open, close or malformed event
            self.held: list[dict] = []
            self._take(self.parser.initial_events)
        elif len(input_ids) > len(self.seen):
            new = list(input_ids[len(self.seen):])
            self.seen += new
            # one id as an int: the token tables' inline path (a list takes the general one)
            self._take(self.parser.feed_tokens(new[0] if len(new) == 1 else new))
        initial = ([self.closed] if self.closed is not None and self.closed is not self.last else []) + (
            [self.last] if self.last is not None else [])
        parser, held, length, template = self.parser, self.held, self.parser.input_length, self.template
        view = _EventsView(initial, lambda text: _probed(template, held, parser.probe(text), length + len(text)))
        return _rt._reasoning_has_ended(view, self.template, thinking_disabled=self.thinking_disabled)

    def _take(self, events: list[dict]) -> None:
        handed, self.held = edge_split(self.template, self.held + events, self.parser.input_length)
        for ev in handed:
            if ev["type"] in DELIMITED:
                self.last = ev
                if self.closed is None and ev["type"] in CLOSED and ev["field"] == _rt.THINKING_FIELD:
                    self.closed = ev


class ReasoningTokenCounter:
    """vLLM's `_ReasoningTokenCounter` (the generated tokens whose text the template parses as reasoning,
    counting text held as a possible closer until a closer arrives) on chatparse's parser, each call costing
    its new tokens: a token's count is final once its text lies before the parser's held text
    (`held_from`), since no later delimiter starts before that.

    The parser is fed what vLLM's counter feeds: each new id decoded on its own, joined."""

    def __init__(self, compiled: Any, template: Any, prefix: str, tokenizer: Any):
        import chatparse

        self.template = template
        self.tokenizer = tokenizer
        self.parser = chatparse.ResponseParser(compiled, prefix=prefix, dialect="vllm")
        self.start = self.parser.input_length
        self.token_ids: list[int] = []
        self.token_ends: list[int] = []
        self.spans: list[tuple[int, float]] = []  # (after the open, start of the close) of reasoning regions
        self.open: int | None = None
        self.held: list[dict] = []
        self.settled = 0  # tokens whose count is final
        self.settled_count = 0
        self.span_at = 0  # first span that may still cover a token not settled
        self._take(self.parser.initial_events)

    def continues(self, token_ids: Sequence[int]) -> bool:
        return _continues(self.token_ids, token_ids)

    def count(self, token_ids: Sequence[int]) -> int:
        new_ids = list(token_ids[len(self.token_ids):])
        texts = [_rt._decode(self.tokenizer, [token_id]) for token_id in new_ids]
        end = self.token_ends[-1] if self.token_ends else self.start
        for text in texts:
            end += len(text)
            self.token_ends.append(end)
        self.token_ids.extend(new_ids)
        self._take(self.parser.feed("".join(texts)))
        decided = self.parser.held_from
        if self.held:
            decided = min(decided, self.held[0]["start"])
        ends = self.token_ends
        i = self.settled
        start = ends[i - 1] if i else self.start
        while i < len(ends) and ends[i] <= decided:
            self.settled_count += self._counts(start, ends[i], settle=True)
            start = ends[i]
            i += 1
        self.settled = i
        tail = 0
        for end in ends[i:]:
            tail += self._counts(start, end, settle=False)
            start = end
        return self.settled_count + tail

    def _counts(self, start: int, end: int, *, settle: bool) -> bool:
        """Whether the token spanning [start, end) overlaps a reasoning region (an open one runs to inf)."""
        spans, k = self.spans, self.span_at
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        if settle:
            self.span_at = k
        if k < len(spans) and spans[k][0] < end:
            return True
        return self.open is not None and self.open < end

    def _take(self, events: list[dict]) -> None:
        handed, self.held = edge_split(self.template, self.held + events, self.parser.input_length)
        for ev in handed:
            if ev["field"] != _rt.THINKING_FIELD or ev["type"] == "region_chunk":
                continue
            if ev["type"] == "region_open":
                self.open = ev["end"]
            elif self.open is not None:
                self.spans.append((self.open, ev["start"]))
                self.open = None
