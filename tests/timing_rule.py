"""Shared by the vLLM timing tests (tests/test_vllm_dialect.py, tests/test_vllm_reasoning.py): the stated
exception of the timing rule read from chatparse's state (`regex_hold`, the rule tests/test_event_timing.py
applies against transformers), a tally of discards and exceptions printed at the end of a module's run, and a
time limit for chatparse's own stages whose expiry fails the test.

(tests/test_event_timing.py imports transformers' interpreter at module level, which the vLLM venv lacks, so
the rule lives here rather than there.)
"""

from __future__ import annotations

import collections
import functools
import gc
from contextlib import contextmanager

import pytest

from chatparse.runtime.regex.lead_assert import _live_patterns
from harness import time_limit

NO_BOUND = 1 << 30


class ChatparseHang(AssertionError):
    """chatparse's own stages ran past their time limit: a failure, never a discard."""


@contextmanager
def reference_limit(seconds: float):
    """`time_limit` around the reference's calls (a loop there is the input's: the caller discards the
    example on `RefTimeout`), with the garbage collector paused: an alarm that lands in a collector callback
    (hypothesis installs one) is lost as an unraisable exception, and pytest's hook for it, formatting it
    while the alarm repeats, failed a test on a loaded machine. (The reference's loops grow lists without
    cycles; reference counting still frees them.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        with time_limit(seconds):
            yield
    finally:
        if enabled:
            gc.enable()


def chatparse_limit(seconds: float = 60.0):
    """A time limit around chatparse's own stages only (never around the reference's, whose loops are the
    input's and discard the example): past it the test fails with `ChatparseHang`. Not to be nested with
    another `time_limit` (the inner one's exit stops the outer alarm)."""
    return time_limit(seconds, ChatparseHang)


@functools.lru_cache(maxsize=256)
def _live(mode) -> list:
    return _live_patterns(mode)


def regex_hold(parser) -> int | None:
    """The stated exception's rule, read from chatparse's state after a feed (`parser` a
    `chatparse.ResponseParser`, either dialect): when what chatparse holds is held by a pattern `regex` decides,
    how many more characters that can take at most (`NO_BOUND`: up to the end of the text); None when it is
    not. What holds chatparse is its earliest attempt: either the tables decided it and `regex` waits for the
    characters its assertions may read after it (``Pattern.horizon``), or only a regex-decided pattern can
    still match further from the attempt's state (the tables step a superset of its matches; `Mode.cap`
    bounds it). tests/test_event_timing.py and the vLLM tests share this one rule."""
    sc = parser._core.scanner
    if not sc.attempts:
        return None
    a = sc.attempts[0]
    mode = sc.mode
    pats = [sc.t.patterns[pi] for pi in mode.patterns]
    if a.fin >= 0:
        waits = [NO_BOUND if p.horizon < 0 else a.fin + p.horizon - sc.end
                 for local in (a.ends or ()) for p in [pats[local]] if not p.exact]
        return max(waits) if waits and max(waits) > 0 else None
    live = _live(mode)
    ncls = mode.n_classes
    future = live[mode.eot[a.state]] if mode.eot[a.state] else 0
    for t in set(mode.trans[a.state * ncls:(a.state + 1) * ncls]):
        if t:
            future |= live[t]
    exact = sum(1 << k for k, p in enumerate(pats) if p.exact)
    if not future or future & exact:
        return None
    if mode.cap is None:
        return NO_BOUND
    horizon = max(max(p.horizon, 0) for p in pats)
    return mode.cap - (sc.end - a.start) + horizon


def within_hold(bound: int | None, k: int, caught: int | None, last: int) -> bool:
    """Whether chatparse, behind at stage `k` and first caught up at stage `caught` (None: not before the
    last stage, `last`, so at the end of the text), is behind under the stated exception: held by a
    regex-decided pattern (`bound` from `regex_hold` at `k`) and caught up within that many characters."""
    if bound is None:
        return False
    return (caught - k if caught is not None else last - k) <= bound


class Tally:
    """Counts of a module's examples, discards (each with its reason, the input's) and exceptions."""

    def __init__(self, title: str):
        self.title = title
        self.c: collections.Counter = collections.Counter()

    def __getitem__(self, key):
        return self.c[key]

    def add(self, key: str, n: int = 1) -> None:
        self.c[key] += n

    def line(self) -> str:
        return f"{self.title}: " + ", ".join(f"{k}={v}" for k, v in sorted(self.c.items()))

    def print(self, request) -> None:
        """Print the tally in the run's output, whatever pytest's capture mode."""
        if not self.c:
            return
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            print(self.line())
            return
        with capture.global_and_fixture_disabled():
            print("\n" + self.line())


def discard(tally: Tally, reason: str) -> None:
    """Count a discarded example and leave it (hypothesis draws another)."""
    from hypothesis import assume

    tally.add(f"discarded: {reason}")
    assume(False)


def tally_fixture(tally: Tally):
    """A module-scoped autouse fixture printing `tally` at the end of the module's run."""

    @pytest.fixture(scope="module", autouse=True)
    def _print_tally(request):
        yield
        tally.print(request)

    return _print_tally
