"""Pausing Python's cyclic garbage collector around bursts of new containers that are not garbage."""

from __future__ import annotations

import contextlib
import gc


@contextlib.contextmanager
def collector_paused():
    """The cyclic garbage collector paused inside the block, restored after (left as it was if already off).

    For code that makes many new containers that are not garbage: a parser per stream (`TokenStreams`), a
    chunk's messages held while they are made columns (`chatparse.data.arrow`). Each thousand or so would set off
    a collection, and every tenth of the older ones walks every object of the process (with a 131k-token
    vocabulary loaded, most of the cost of creating 256 streams; 7% of `parse_arrow`'s time on 100,000 short
    rows). Cycles made meanwhile (a failed row's traceback) wait for the next collection."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
