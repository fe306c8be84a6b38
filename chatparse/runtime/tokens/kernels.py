"""The two loops of `TokenStreams` that run over every stream, native where a C compiler was at install time.

* `advance(src, dst, rowoff, next, out, V)`: one step of every stream's row: the step's ids copied into the
  ring buffer and range-checked, every stream's next row offset gathered from the row tables, and whether any
  row changed or is unknown (-1), in one pass. Native only (None without the C module): `TokenStreams.step`
  then takes its numpy spelling (a handful of whole-array operations), which gives the same rows.
* `join_columns(texts, buf, cols, starts, stop)`: for each column ``cols[k]`` of the 2-D int64 id buffer
  `buf` (steps x streams), the texts (`TokenTexts`) of the ids ``buf[starts[k]:stop, cols[k]]`` joined, in
  the order of `cols`; an id of -1 (an inactive stream's step) picks the last text, which is empty. Exactly
  ``b"".join`` / ``"".join`` of those texts, natively (bytes copied straight from one blob of every token's
  bytes, reading the ids row by row) or in Python (`python_join_columns`: a numpy gather of a block's texts,
  a list, a join).

Why: a step the row tables take whole is a handful of numpy operations on arrays of B (about 4 us for 256,
each call's overhead rather than work; natively 1.4-1.6 us), and every token's text is joined once (about 30
ns a token in Python on tekken's bytes; natively about 7). Both are per token of every stream: together they
were about half of a many-stream run (bench/PERF_NOTES.md#native-kernels). The native module is
`chatparse.runtime.tokens._stream_kernels` (its C source says what each function guarantees); ``NATIVE`` says whether
it is built. tests/test_stream_kernels.py checks each against its Python spelling.
"""

from __future__ import annotations

import numpy as np

__all__ = ["NATIVE", "TokenTexts", "advance", "join_columns", "python_join_columns"]


class TokenTexts:
    """A vocabulary's token texts for joining: `items`, a list (all bytes, or all str) whose last entry is
    empty (the text of id -1); `table`, the same as a numpy object array (one gather turns a block of ids into
    texts); `join`, ``b"".join`` or ``"".join``; for bytes, `blob` and `offsets` too (every text in one bytes
    object, text i at ``blob[offsets[i]:offsets[i + 1]]``: what the native join reads)."""

    __slots__ = ("items", "table", "join", "blob", "offsets")

    def __init__(self, items: list):
        if not items or items[-1]:
            raise ValueError("TokenTexts: the last text must be the empty one (that of id -1)")
        self.items = items
        self.table = np.empty(len(items), dtype=object)
        self.table[:] = items
        self.blob = self.offsets = None
        if isinstance(items[-1], bytes):
            self.join = b"".join
            self.blob = b"".join(items)
            self.offsets = np.zeros(len(items) + 1, dtype=np.int64)
            np.cumsum([len(t) for t in items], out=self.offsets[1:])
        else:
            self.join = "".join


_BLOCK = 32  # streams per gather in `python_join_columns` (their texts stay in the cache until joined)


def python_join_columns(texts: TokenTexts, buf, cols: list, starts: list, stop: int) -> list:
    """`join_columns` in Python. One stream: its texts item by item for a short run, else one gather. Many:
    blocks of `_BLOCK` streams whose runs start at about the same step (sorted by start), one gather per block
    from its earliest start, each stream's texts joined while the gathered list is fresh in the cache."""
    join = texts.join
    if len(cols) == 1:
        s = starts[0]
        col = buf[s:stop, cols[0]]
        return [join(texts.table[col].tolist() if stop - s >= 64 else map(texts.items.__getitem__, col.tolist()))]
    out = [None] * len(cols)
    order = sorted(range(len(cols)), key=starts.__getitem__)
    for c in range(0, len(order), _BLOCK):
        part = order[c:c + _BLOCK]
        lo = starts[part[0]]
        part.sort(key=cols.__getitem__)
        streams = [cols[k] for k in part]
        b0, b1 = streams[0], streams[-1] + 1
        block = buf[lo:stop, b0:b1] if b1 - b0 == len(streams) == len(set(streams)) else buf[lo:stop, streams]
        for k, col in zip(part, texts.table[block].T.tolist()):
            s = starts[k] - lo
            out[k] = join(col[s:] if s else col)
    return out


try:
    from ._stream_kernels import advance, join_bytes_columns, join_str_columns
except ImportError:  # built without a C compiler: the Python spellings, the same results
    advance = join_bytes_columns = join_str_columns = None

NATIVE = advance is not None
_native_join = NATIVE  # (False: `join_columns` takes the Python spelling; tests and the bench switch it)


def join_columns(texts: TokenTexts, buf, cols: list, starts: list, stop: int) -> list:
    """Per column ``cols[k]`` of `buf`, the texts of its ids from step ``starts[k]`` to `stop`, joined (module
    docstring)."""
    if not _native_join:
        return python_join_columns(texts, buf, cols, starts, stop)
    if texts.blob is not None:
        return join_bytes_columns(texts.blob, texts.offsets, buf, cols, starts, stop)
    return join_str_columns(texts.items, buf, cols, starts, stop)
