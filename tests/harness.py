"""Running chatparse and the transformers reference side by side, in a comparable normal form.

Events are compared after merging adjacent `region_chunk`s of the same field (chunk boundaries are free to
differ, their concatenation is not). Errors are compared by exception class.
"""

from __future__ import annotations

import random
import signal
import sys
from contextlib import contextmanager

import chatparse


class RefTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds: float, error: type[BaseException] = RefTimeout):
    """Raise `error` in the block after `seconds` (SIGALRM): a hang becomes an exception.

    The alarm repeats every 50 ms until the block is left: Python runs a signal handler wherever the
    interpreter is, and an exception raised inside a garbage-collector callback (hypothesis installs one)
    is only printed, so a single alarm could be lost while the reference loops on, growing a list until the
    machine runs out of memory (seen in a 2,000-example run)."""
    on = [True]

    def _raise(signum, frame):
        # not while the last one is being handled (a repeat there, on a loaded machine, would interrupt the
        # handler: seen inside the reference's own exception formatting)
        if on[0] and not isinstance(sys.exc_info()[1], error):
            raise error()

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        try:
            on[0] = False
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def normalize(events: list[dict]) -> list[dict]:
    """Adjacent chunks of one field merged; a `region_malformed` event's error (an exception object, equal to
    another only by identity) as (class name, message)."""
    out: list[dict] = []
    for ev in events:
        if (ev["type"] == "region_chunk" and out and out[-1]["type"] == "region_chunk"
                and out[-1]["field"] == ev["field"]):
            out[-1] = {**out[-1], "text": out[-1]["text"] + ev["text"]}
        else:
            ev = dict(ev)
            if "error" in ev:
                ev["error"] = (type(ev["error"]).__name__, str(ev["error"]))
            out.append(ev)
    return out


def run(parser_cls, template, chunks, prefix="", tools=None):
    """Feed `chunks`; return ("ok", message, normalized events) or ("error", exception class name, None)."""
    events: list[dict] = []
    try:
        p = parser_cls(template, prefix=prefix, tools=tools)
        events += p.initial_events
        for c in chunks:
            events += p.feed(c)
        msg, final = p.finalize()
        events += final
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        return ("error", type(e).__name__, None)
    return ("ok", msg, normalize(events))


def run_reference(template, text, prefix="", tools=None, seconds: float = 2.0):
    """The reference's one-shot answer (one feed), or raises RefTimeout."""
    from transformers.utils.chat_parsing import ResponseParser as RefParser

    with time_limit(seconds):
        return run(RefParser, template, [text], prefix, tools)


def run_chatparse(template, chunks, prefix="", tools=None):
    return run(chatparse.ResponseParser, template, chunks, prefix, tools)


def stream_in(template, chunks, dialect=None):
    """chatparse fed `chunks` (no prompt) in `dialect`: ``(message, every event)``; exceptions propagate."""
    p = chatparse.ResponseParser(template, prefix="", dialect=dialect)
    events = list(p.initial_events)
    for c in chunks:
        events += p.feed(c)
    msg, final = p.finalize()
    return msg, events + final


def outcome_of(fn):
    """``("ok", *result)`` or ``("error", exception class name)`` for ValueError, KeyError and TypeError."""
    try:
        r = fn()
    except (ValueError, KeyError, TypeError) as e:
        return ("error", type(e).__name__)
    return ("ok",) + (r if isinstance(r, tuple) else (r,))


def readme_example(after: str) -> tuple[str, str]:
    """The first documented example after the text `after` (a ```python block and the ```text block after it),
    in README.md or the first page of docs/ that holds `after`, run: ``(what it printed, the text block)``.
    (tests/test_docs_examples.py runs every example; this runs one beside the tests of what it shows.)"""
    import contextlib
    import io
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pages = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    page = next(p for p in pages if after in p.read_text(encoding="utf-8"))
    text = page.read_text(encoding="utf-8")
    rest = text[text.index(after):]
    m = re.search(r"```python\n(.*?)```\s*```text\n(.*?)```", rest, re.S)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(m.group(1), str(page.relative_to(root)), "exec"), {})
    return out.getvalue(), m.group(2)


def split(text: str, cuts) -> list[str]:
    cuts = sorted(set(c for c in cuts if 0 < c < len(text)))
    out, prev = [], 0
    for c in cuts:
        out.append(text[prev:c])
        prev = c
    out.append(text[prev:])
    return out


def random_chunks(text: str, rng: random.Random, max_size: int = 7) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, max_size)
        out.append(text[i:i + n])
        i += n
    return out


def check_well_formed(events: list[dict]) -> None:
    """Flat, ordered regions: open, chunks, close; nothing nested; chunks only inside their open region."""
    open_field = None
    for ev in events:
        assert set(ev) >= {"type", "field"}, ev
        if ev["type"] == "region_open":
            assert open_field is None, f"nested open {ev} inside {open_field}"
            open_field = ev["field"]
        elif ev["type"] == "region_chunk":
            assert ev["field"] == open_field, ev
            assert isinstance(ev["text"], str) and ev["text"]
            assert type(ev["dirty"]) is bool
        elif ev["type"] == "region_close":
            assert ev["field"] == open_field, ev
            assert "value" in ev
            open_field = None
        else:
            raise AssertionError(f"unknown event type {ev}")
    assert open_field is None, "a region was left open after finalize"
