"""The native kernels of `TokenStreams` (`chatparse.runtime.tokens.kernels`): each gives exactly what its
Python spelling gives, errors included, and TokenStreams gives the same events and messages with either.

The native module is built by ``pip install`` where a C compiler is; where it is not, the tests of the native
functions skip (saying so) and the rest run on the Python spellings. ``CHATPARSE_REQUIRE_NATIVE=1`` (set by
.ci/run) turns a missing native module into a failure, so that CI cannot pass on the fallback alone.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from deps import need
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatparse.runtime.tokens import kernels as stream_kernels
from chatparse.runtime.tokens.kernels import TokenTexts, python_join_columns

native = pytest.mark.skipif(not stream_kernels.NATIVE, reason="chatparse.runtime.tokens._stream_kernels is not built "
                            "(no C compiler at install time): TokenStreams runs on the Python spellings")


def test_the_native_kernels_are_built_where_required():
    """Built wherever chatparse was installed with a C compiler; required to be where CHATPARSE_REQUIRE_NATIVE=1."""
    if not stream_kernels.NATIVE and os.environ.get("CHATPARSE_REQUIRE_NATIVE") != "1":
        pytest.skip("not built: no C compiler when chatparse was installed (CHATPARSE_REQUIRE_NATIVE is not set)")
    assert stream_kernels.NATIVE, "pip install did not build chatparse.runtime.tokens._stream_kernels"


texts_of = st.one_of(
    st.lists(st.binary(max_size=6), min_size=1, max_size=12),
    st.lists(st.text(max_size=4), min_size=1, max_size=12),  # ASCII, Latin-1, BMP and astral kinds mixed
)


def plain_join(items, buf, cols, starts, stop):
    join = b"".join if isinstance(items[-1], bytes) else "".join
    return [join(items[i] for i in buf[s:stop, c].tolist()) for c, s in zip(cols, starts)]


@st.composite
def join_cases(draw):
    items = draw(texts_of)
    items = items + [items[0][:0]]  # the empty text of id -1
    steps, streams = draw(st.integers(1, 9)), draw(st.integers(1, 6))
    ids = draw(st.lists(st.integers(-1, len(items) - 1), min_size=steps * streams, max_size=steps * streams))
    buf = np.array(ids, dtype=np.int64).reshape(steps, streams)
    if draw(st.booleans()):  # a view with other strides, as a slice of the ring buffer is
        buf = np.ascontiguousarray(np.repeat(buf, 2, axis=1))[:, ::2]
    cols = draw(st.lists(st.integers(0, streams - 1), max_size=8))
    stop = draw(st.integers(0, steps))
    starts = [draw(st.integers(0, stop)) for _ in cols]
    return items, buf, cols, starts, stop


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=join_cases())
def test_join_columns_is_the_plain_join(case):
    items, buf, cols, starts, stop = case
    want = plain_join(items, buf, cols, starts, stop)
    assert python_join_columns(TokenTexts(items), buf, cols, starts, stop) == want
    assert stream_kernels.join_columns(TokenTexts(items), buf, cols, starts, stop) == want


@native
def test_join_columns_refuses_what_the_python_spelling_refuses():
    from chatparse.runtime.tokens._stream_kernels import join_bytes_columns, join_str_columns

    buf = np.array([[0, 5], [1, -1]], dtype=np.int64)
    texts = TokenTexts([b"a", b"bc", b""])
    blob, off = texts.blob, texts.offsets
    with pytest.raises(IndexError, match="token id 5"):
        join_bytes_columns(blob, off, buf, [1], [0], 2)
    with pytest.raises(IndexError):
        python_join_columns(texts, buf, [1], [0], 2)
    assert join_bytes_columns(blob, off, buf, [0, 1], [0, 1], 2) == [b"abc", b""]
    with pytest.raises(TypeError, match="2-D int64"):
        join_bytes_columns(blob, off, buf.astype(np.int32), [0], [0], 2)
    with pytest.raises(TypeError, match="2-D int64"):
        join_str_columns(["a", "b", ""], buf[0], [0], [0], 1)
    with pytest.raises(IndexError, match="column 2"):
        join_bytes_columns(blob, off, buf, [2], [0], 2)
    with pytest.raises(ValueError, match="start 3"):
        join_str_columns(["a", "b", ""], buf, [0], [3], 2)
    with pytest.raises(ValueError, match="stop 3"):
        join_bytes_columns(blob, off, buf, [0], [0], 3)
    with pytest.raises(ValueError, match="outside the blob"):  # offsets past the blob's end are never read
        join_bytes_columns(b"ab", off, buf, [0], [0], 2)
    with pytest.raises(ValueError, match="outside the blob"):  # nor decreasing ones
        join_bytes_columns(blob, np.array([0, 2, 1, 3], dtype=np.int64), buf, [0], [0], 2)
    with pytest.raises(TypeError, match="offsets"):
        join_bytes_columns(blob, off.astype(np.int32), buf, [0], [0], 2)
    with pytest.raises(TypeError, match="not str"):
        join_str_columns(["a", b"b", ""], buf, [0], [0], 2)


def numpy_advance(src, rowoff, table, V):
    """What `TokenStreams.step` computes with numpy where the kernel is not built: (code, next rows)."""
    u = src.astype(np.int64).view(np.uint64)
    if (u >= V).any():
        return -1 - int(np.flatnonzero(u >= V)[0]), None
    nxt = table[rowoff + src]
    if (nxt < 0).any():
        return 2, nxt
    return (0 if (nxt == rowoff).all() else 1), nxt


@native
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_advance_is_the_numpy_step(data):
    V = data.draw(st.integers(1, 6))
    rows = data.draw(st.integers(1, 4))
    table = np.array(data.draw(st.lists(st.sampled_from([-1] + [r * V for r in range(rows)]),
                                        min_size=rows * V, max_size=rows * V)), dtype=np.int64)
    n = data.draw(st.integers(1, 6))
    rowoff = np.array([data.draw(st.integers(0, rows - 1)) * V for _ in range(n)], dtype=np.int64)
    src = np.array(data.draw(st.lists(st.integers(-2, V + 1), min_size=n, max_size=n)), dtype=np.int64)
    dst = np.zeros(n, dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    code = stream_kernels.advance(src, dst, rowoff, table, out, V)
    want, nxt = numpy_advance(src, rowoff, table, V)
    assert code == want
    if code >= 0:
        assert (dst == src).all() and (out == nxt).all()
    else:  # the first bad id is named; the ids before it are copied
        assert (dst[:-1 - code] == src[:-1 - code]).all()


@native
def test_advance_refuses_buffers_of_another_shape():
    ok = np.zeros(3, dtype=np.int64)
    table = np.zeros(4, dtype=np.int64)
    with pytest.raises(TypeError, match="out must be a 1-D int64"):
        stream_kernels.advance(ok, ok, ok, table, ok.astype(np.int32), 4)
    with pytest.raises(ValueError, match="differ in length"):
        stream_kernels.advance(ok, ok, ok[:2], table, ok, 4)
    with pytest.raises(IndexError, match="row offset 8"):
        stream_kernels.advance(ok, ok, np.full(3, 8, dtype=np.int64), table, ok, 4)
    with pytest.raises(ValueError, match="read-only"):  # (numpy's own refusal of a writable view)
        ro = np.zeros(3, dtype=np.int64)
        ro.flags.writeable = False
        stream_kernels.advance(ok, ro, ok, table, ok, 4)


# -- TokenStreams with the Python spellings: the same events and messages ---------------------------------------
need("tokenizers")
import test_tokens_streams as streams_tests  # noqa: E402
from token_support import toks  # noqa: E402,F401


@pytest.mark.parametrize("test", [
    streams_tests.test_streams_fast_paths_match_single_parsers,
    streams_tests.test_streams_split_characters_and_pending_runs_match_single_parsers,
    streams_tests.test_streams_long_runs,
    streams_tests.test_step_events_read_late_are_the_same,
], ids=lambda f: f.__name__)
@pytest.mark.parametrize("kernels", ["python", "native"])
def test_token_streams_with_either_kernels(toks, monkeypatch, test, kernels):  # noqa: F811
    """Tests of TokenStreams (each against the streams' own single parsers), run again with the kernels
    forced to their Python spellings, and with the native ones (the default where they are built)."""
    if kernels == "python":
        monkeypatch.setattr(stream_kernels, "advance", None)
        monkeypatch.setattr(stream_kernels, "_native_join", None)
    elif not stream_kernels.NATIVE:
        pytest.skip("chatparse.runtime.tokens._stream_kernels is not built")
    test(toks=toks)


@pytest.mark.parametrize("kernels", ["python", "native"])
def test_out_of_range_ids_with_either_kernels(toks, monkeypatch, kernels):  # noqa: F811
    """An id outside the vocabulary raises ValueError naming it and its stream, before any stream advances
    (the step can be taken again with good ids), whichever kernels run."""
    if kernels == "python":
        monkeypatch.setattr(stream_kernels, "advance", None)
    elif not stream_kernels.NATIVE:
        pytest.skip("chatparse.runtime.tokens._stream_kernels is not built")
    tok = toks["bl-plain"]
    b = streams_tests.bind(streams_tests.templates.get("qwen3"), tok)
    ids = tok.encode("<think>\nSome words.\n</think>\n\nAn answer.<|im_end|>").ids
    s, ref = b.streams(3, prefix=""), b.streams(3, prefix="")
    V = b.vocab.size
    for k, i in enumerate(ids):
        for bad in ([i, V, i], [i, i, -1], np.array([i, i, 2 ** 40], dtype=np.uint64)):
            stream = 2 if bad[1] == i else 1
            with pytest.raises(ValueError, match=f"stream {stream}"):
                s.step(bad)
        assert s.step(np.array([i] * 3, dtype=np.int32)).tolist() == ref.step([i] * 3).tolist(), k
    assert s.finalize_all() == ref.finalize_all()


@pytest.mark.parametrize("kernels", ["python", "native"])
@pytest.mark.parametrize("tokname", ["bl-plain", "sp-plain"])
def test_streams_reaching_a_close_in_one_step_catch_up_together(toks, monkeypatch, kernels, tokname):  # noqa: F811
    """Streams started together reach a region's close in the same step: their deferred texts are joined in
    one call (`TokenStreams._catch_up_many`, from `_changes`), some of them fresh (their parsers never ran),
    and each stream's events and message are still exactly its own TokenParser's."""
    if kernels == "python":
        monkeypatch.setattr(stream_kernels, "advance", None)
        monkeypatch.setattr(stream_kernels, "_native_join", None)
    elif not stream_kernels.NATIVE:
        pytest.skip("chatparse.runtime.tokens._stream_kernels is not built")
    from chatparse.runtime.tokens.streams import TokenStreams

    tok = toks[tokname]
    b = streams_tests.bind(streams_tests.templates.get("qwen3"), tok)
    words = ["alpha", "beta", "gamma", "delta", "café", "中文"]
    seqs = []
    for k in range(6):  # the same length of reasoning in tokens: the closes fall in one step
        body = tok.encode(" ".join(words[(k + j) % len(words)] for j in range(40))).ids[:60]
        seqs.append(tok.encode("<think>\n").ids + body + tok.encode("\n</think>\n\nDone.<|im_end|>").ids)
    n = min(map(len, seqs))
    seqs = [q[:n] for q in seqs]
    together = []
    real = TokenStreams._catch_up_many

    def spy(self, streams, r, rows):
        together.append(len(streams))
        return real(self, streams, r, rows)

    monkeypatch.setattr(TokenStreams, "_catch_up_many", spy)
    s = b.streams(len(seqs), prefix="", capacity=4096)
    singles = [b.parser(prefix="") for _ in seqs]
    streams_tests.step_like_single_parsers(s, singles, seqs)
    assert together and max(together) > 1, together  # (before finalize_all: from `_changes`)
    assert s.finalize_all() == [p.finalize() for p in singles]
