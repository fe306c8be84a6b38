"""One-shot parsing when the whole text is known: candidates from the tables, decisions from `regex` in C.

Streaming needs the automaton: it must know, before the text ends, whether a delimiter is already certain.
A one-shot parse (`parse_response`, `CompiledTemplate.parse`, batches) has the complete text, so at a
candidate start every watched pattern's match is simply `regex`'s match there - exactly the reference's
decision (earliest start first; the tables' prefilter proves no earlier start can match). The per-character
Python loop disappears; the region and value logic is the streaming parser's own. Modes whose delimiters
may begin with whitespace use it only while little text is left: for such patterns each `regex` call costs
time proportional to the rest of the string, so on long texts they keep the linear automaton.

`regex` backtracks, so this path is guarded: match calls on patterns that could backtrack badly (quantified
groups, many unbounded quantifiers) have a timeout, and the number of candidate starts is bounded by the
text length. If either is exceeded (a pathological pattern such as ``<(?:a|aa)+>``
on ``"<aaaa..."``, or a long run of candidates), the parse is redone by the automaton, which is linear.
The result is the same either way; only the time differs.
"""

from __future__ import annotations

import re

from .parser import StreamParser
from .scanner import Scanner

MATCH_TIMEOUT = 0.05  # seconds per `regex` call before falling back to the automaton
SCAN_PRONE_LIMIT = 4096  # characters left beyond which whitespace-led modes use the automaton


_QUANTIFIED_GROUP = re.compile(r"\)(?:[*+]|\{\d*,\d*\})")
_UNBOUNDED = re.compile(r"(?<!\\)[*+]")


def backtracking_risk(source: str) -> bool:
    """True when `regex` might backtrack badly on `source` (a quantified group, or four or more unbounded
    quantifiers). Only such calls get a timeout: a timeout costs about a microsecond per call."""
    return _QUANTIFIED_GROUP.search(source) is not None or len(_UNBOUNDED.findall(source)) >= 4


class _Fallback(Exception):
    pass


class WholeTextScanner(Scanner):
    """A scanner whose `decide` asks `regex` at each candidate start; valid only once the text is complete."""

    def __init__(self, tables, text: str):
        super().__init__(tables)
        self.push(text)
        self.budget = len(text) // 4 + 64
        risky = getattr(tables, "oneshot_risky", None)
        if risky is None:  # computed once per loaded template
            risky = tables.oneshot_risky = [backtracking_risk(p.source) for p in tables.patterns]
        self.risky = risky

    def decide(self, eos: bool):
        mode = self.mode
        if mode.first_re is None or (mode.wchars and self.end - self.scan > SCAN_PRONE_LIMIT):
            # `regex` checks a whitespace-led pattern (\s*</think>) for its required literal over the whole
            # rest of the string on every call, so on long texts those modes use the linear automaton (as do
            # modes where an attempt can start anywhere).
            return Scanner.decide(self, eos)
        text, base = self.text, self.base
        n = len(text)
        patterns = self.t.patterns
        fields = self.t.fields
        risky = self.risky
        i = self.scan - base
        while True:
            # Offset 0 is always a candidate: `^` can hold there, and the prefilter describes offsets > 0.
            p = i if base + i == 0 and mode.start0 else mode.skip_to(text, i)
            if p >= n:  # a match starting at the very end never counts (as in the reference)
                self.scan = self.end
                return None
            self.budget -= 1
            if self.budget < 0:
                raise _Fallback()
            best_key = best = None
            for pi in mode.patterns:
                pat = patterns[pi]
                if risky[pi]:
                    try:
                        m = pat.rx.match(text, p, timeout=MATCH_TIMEOUT)
                    except TimeoutError as e:
                        raise _Fallback() from e
                else:
                    m = pat.rx.match(text, p)
                if m is not None:
                    key = (p - m.end(), 0 if pat.kind == "open" else 1, fields[pat.field]["name"])
                    if best_key is None or key < best_key:
                        best_key, best = key, (base + p, base + m.end(), pi, m)
            if best is not None:
                self.scan = best[1]
                return best
            i = p + 1

    def safe_end(self) -> int:
        return self.scan


def parse_whole(tables, tool_params: dict, text: str) -> dict:
    """The message for the complete `text` (cut prefix + generation), as `StreamParser` would give it."""
    core = StreamParser(tables, tool_params)
    core.scanner = WholeTextScanner(tables, text)
    try:
        return core.finish()[0]
    except _Fallback:
        core = StreamParser(tables, tool_params)
        core.feed(text)
        return core.finish()[0]
