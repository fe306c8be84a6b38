"""Token ids to text: validating ids and decoding them exactly as the tokenizer's own ``decode`` does.

Guarantees:

* `_ids_list` turns an int, a sequence, a numpy array or a tensor into a flat list of Python ints and refuses
  (ValueError naming the id) any id outside ``0 <= id < vocab size``; an id inside the range that has no token
  decodes to nothing, as in ``decode``.
* `_Decoder` is incremental: the text released by successive ``feed(ids)`` calls plus ``finish()`` is exactly
  ``vocab.decode(all ids)``. Bytes of a character split across tokens are held until the character is
  complete (or turns out invalid), so a U+FFFD appears exactly where ``decode`` puts one and never earlier;
  transformers' ``clean_up_tokenization`` is applied as a streaming chain of replaces that holds back only
  what could still begin a pattern. With ``track=True`` it also records, per released character, the token
  indexes of its first and last byte (what token spans are built from).
* `_decode_all` is the whole-sequence decode with fast paths, the same text as `VocabBase.decode`.

Why a module of its own: the decoder is the one place where token boundaries and character boundaries meet;
the parser, the binding and the batched streams all read text through it, and none of them needs to know how
UTF-8 or ByteFallback runs are reassembled. It imports nothing but numpy.
"""

from __future__ import annotations

from codecs import utf_8_decode
from operator import index as _index

import numpy as np

from ..stream.scanner import copy_slots

__all__ = ["CLEANUP_RULES", "decode_run", "clean_up_tokenization"]


# --------------------------------------------------------------------------------------------------------------
# Whole-run helpers shared with the vocabulary's reference decode
# --------------------------------------------------------------------------------------------------------------
CLEANUP_RULES = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                 (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
"""transformers' ``clean_up_tokenization``: these replaces, in this order, over the whole text."""


def decode_run(run) -> str:
    """A run of ByteFallback byte tokens: strict UTF-8, or one U+FFFD per byte when invalid."""
    try:
        return bytes(run).decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd" * len(run)


def clean_up_tokenization(text: str) -> str:
    """transformers' `clean_up_tokenization` (the same chain of replaces)."""
    for old, new in CLEANUP_RULES:
        text = text.replace(old, new)
    return text


# --------------------------------------------------------------------------------------------------------------
# Token ids in, validated
# --------------------------------------------------------------------------------------------------------------
def _out_of_range(i, size: int, where: str = "") -> ValueError:
    return ValueError(f"token id {i}{where} is out of range for this tokenizer (valid ids: 0..{size - 1})")


def _ids_list(x, size: int) -> list:
    """A flat list of Python ints from an int, a sequence, a numpy array or a tensor; range-checked."""
    if isinstance(x, list) or isinstance(x, tuple):
        ids = list(x) if isinstance(x, tuple) else x
        if ids and not (type(ids[0]) is int):
            ids = [_index(i) for i in ids]
    elif hasattr(x, "__array__") or isinstance(x, np.ndarray):
        arr = np.asarray(x)
        if arr.ndim > 1:
            raise ValueError(f"expected one sequence of token ids, got an array of shape {arr.shape}")
        if arr.dtype.kind not in "iub" and arr.size:  # (``np.array([])`` is float64: no ids, as for a list)
            raise TypeError(f"token ids must be integers, got an array of dtype {arr.dtype}")
        if arr.size:
            lo, hi = arr.min(), arr.max()
            if lo < 0 or hi >= size:
                bad = int(lo) if lo < 0 else int(hi)
                raise _out_of_range(bad, size)
        return arr.reshape(-1).tolist()
    else:
        try:
            return _ids_list([_index(x)], size)
        except TypeError:
            pass
        try:
            ids = [_index(i) for i in x]
        except TypeError as e:
            raise TypeError(f"token ids must be integers or a sequence of integers, got {type(x).__name__}") from e
    if ids:
        try:
            lo, hi = min(ids), max(ids)
        except TypeError as e:
            raise TypeError("token ids must be integers") from e
        if lo < 0 or hi >= size:
            raise _out_of_range(lo if lo < 0 else hi, size)
    return ids


# --------------------------------------------------------------------------------------------------------------
# Incremental decoders
# --------------------------------------------------------------------------------------------------------------
def _utf8_char_lengths(data: bytes, n: int) -> list:
    """Byte lengths of the characters `data[:n].decode("utf-8", "replace")` produces (a U+FFFD counts its
    maximal invalid subpart)."""
    out = []
    i = 0
    while i < n:
        b = data[i]
        if b < 0x80:
            out.append(1)
            i += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, lo, hi = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= b <= 0xEC or 0xEE <= b <= 0xEF:
            need, lo, hi = 2, 0x80, 0xBF
        elif b == 0xED:
            need, lo, hi = 2, 0x80, 0x9F
        elif b == 0xF0:
            need, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= b <= 0xF3:
            need, lo, hi = 3, 0x80, 0xBF
        elif b == 0xF4:
            need, lo, hi = 3, 0x80, 0x8F
        else:
            out.append(1)
            i += 1
            continue
        k = 0
        if i + 1 < n and lo <= data[i + 1] <= hi:
            k = 1
            while k < need and i + 1 + k < n and 0x80 <= data[i + 1 + k] <= 0xBF:
                k += 1
        out.append(1 + k)
        i += 1 + k
    return out


class _Cleanup:
    """transformers' clean_up_tokenization as a chain of streaming replaces (exact: each stage holds back the
    characters that could still begin its pattern)."""

    def __init__(self):
        self.held = [""] * len(CLEANUP_RULES)

    def feed(self, text: str, final: bool) -> str:
        for k, (old, new) in enumerate(CLEANUP_RULES):
            buf = self.held[k] + text
            if final:
                text = buf.replace(old, new)
                self.held[k] = ""
                continue
            keep = len(old) - 1
            # Replace every occurrence that is complete; hold the tail that could begin one.
            out = []
            pos = 0
            while True:
                j = buf.find(old, pos)
                if j < 0:
                    break
                out.append(buf[pos:j])
                out.append(new)
                pos = j + len(old)
            cut = max(pos, len(buf) - keep)
            out.append(buf[pos:cut])
            self.held[k] = buf[cut:]
            text = "".join(out)
        return text

    def clean(self) -> bool:
        return not any(self.held)


class _Decoder:
    """Incremental decode of one generation: `feed(ids)` returns the text those ids complete.

    With `track` on, it also records for every released character the index of the token holding its first
    byte and of the token holding its last byte (`cfirst`, `clast`).
    """

    # Slots (see `TokenParser.__slots__`)
    __slots__ = ("bv", "bytes_kind", "cfirst", "clast", "cleanup", "first", "held", "held_tok", "ntok", "run",
                 "run_tok", "skip", "strip_left", "tb", "track", "tt", "v", "__dict__")

    def __init__(self, vocab, track: bool = False):
        self.v = vocab
        self.bytes_kind = vocab.kind == "bytes"
        self.tb = vocab.tok_bytes
        self.tt = vocab.tok_text
        self.bv = vocab.byte_val_list
        self.skip = vocab.skip
        self.held = b""  # bytes kind: an incomplete UTF-8 sequence
        self.held_tok: list = []  # its bytes' token indexes (track)
        self.run = bytearray()  # pieces kind: pending ByteFallback run
        self.run_tok: list = []
        self.first = bool(vocab.first_text)  # Metaspace: the next non-skipped token is the first one
        self.strip_left = vocab.strip_start
        self.cleanup = _Cleanup() if vocab.cleanup else None
        self.track = track
        self.ntok = 0  # tokens fed (indexes for spans)
        self.cfirst: list = []
        self.clast: list = []

    def fork(self) -> "_Decoder":
        """An independent copy (the vocabulary shared; what a step changes copied): `TokenParser.fork`."""
        c = copy_slots(self)
        c.held_tok, c.run, c.run_tok = list(self.held_tok), bytearray(self.run), list(self.run_tok)
        c.cfirst, c.clast = list(self.cfirst), list(self.clast)
        if self.cleanup is not None:
            c.cleanup = _Cleanup()
            c.cleanup.held = list(self.cleanup.held)
        return c

    def clean(self) -> bool:
        """Nothing held: the next complete token decodes to its own text."""
        return (not self.held and not self.run and not self.first and not self.strip_left
                and self.cleanup is None)

    # -- feeding ---------------------------------------------------------------------------------------------
    def feed(self, ids: list) -> str:
        if self.bytes_kind:
            text = self._feed_bytes(ids, final=False)
        else:
            text = self._feed_pieces(ids, final=False)
        return self._post(text, final=False)

    def finish(self) -> str:
        if self.bytes_kind:
            text = self._feed_bytes([], final=True)
        else:
            text = self._feed_pieces([], final=True)
        return self._post(text, final=True)

    def _post(self, text: str, final: bool) -> str:
        if self.strip_left and text:
            n = 0
            c = self.v.strip_char
            while n < self.strip_left and n < len(text) and text[n] == c:
                n += 1
            if n < len(text):
                self.strip_left = 0
            else:
                self.strip_left -= n
            if n:
                text = text[n:]
                if self.track:
                    del self.cfirst[len(self.cfirst) - len(text) - n:len(self.cfirst) - len(text)]
                    del self.clast[len(self.clast) - len(text) - n:len(self.clast) - len(text)]
        if self.cleanup is not None:
            text = self.cleanup.feed(text, final)
        return text

    def _feed_bytes(self, ids: list, final: bool) -> str:
        tb = self.tb
        if len(ids) == 1:
            data = tb[ids[0]]
        else:
            data = b"".join([tb[i] for i in ids])
        held = self.held
        if held:
            data = held + data
        text, n = utf_8_decode(data, "replace", final)
        self.held = data[n:]
        if self.track:
            self._track_bytes(ids, data, n, text)
        else:
            self.ntok += len(ids)
        return text

    def _track_bytes(self, ids: list, data: bytes, n: int, text: str) -> None:
        # Token index of every byte of `data` (held bytes first).
        base = self.ntok
        origin = list(self.held_tok)
        tb = self.tb
        for k, i in enumerate(ids):
            origin.extend([base + k] * len(tb[i]))
        self.ntok = base + len(ids)
        if "\ufffd" in text:
            lengths = _utf8_char_lengths(data, n)
        else:
            lengths = None
        if lengths is None and n == len(text):  # all ASCII
            self.cfirst.extend(origin[:n])
            self.clast.extend(origin[:n])
        else:
            if lengths is None:
                arr = np.frombuffer(data, dtype=np.uint8, count=n)
                starts = np.flatnonzero((arr & 0xC0) != 0x80)
                ends = np.append(starts[1:], n) - 1
                o = np.asarray(origin, dtype=np.int64)
                self.cfirst.extend(o[starts].tolist())
                self.clast.extend(o[ends].tolist())
            else:
                p = 0
                for L in lengths:
                    self.cfirst.append(origin[p])
                    self.clast.append(origin[p + L - 1])
                    p += L
        self.held_tok = origin[n:]

    def _feed_pieces(self, ids: list, final: bool) -> str:
        out = []
        bv, tt, skip = self.bv, self.tt, self.skip
        run = self.run
        track = self.track
        base = self.ntok
        for k, i in enumerate(ids):
            if skip[i]:
                continue
            b = bv[i]
            if b >= 0:
                run.append(b)
                if track:
                    self.run_tok.append(base + k)
                self.first = False
                continue
            if run:
                out.append(self._flush_run())
            if self.first:
                self.first = False
                s = self.v.first_text.get(i, tt[i])
            else:
                s = tt[i]
            out.append(s)
            if track and s:
                self.cfirst.extend([base + k] * len(s))
                self.clast.extend([base + k] * len(s))
        self.ntok = base + len(ids)
        if final and run:
            out.append(self._flush_run())
        return "".join(out)

    def _flush_run(self) -> str:
        run = self.run
        s = decode_run(run)
        if self.track:
            toks = self.run_tok
            if len(s) == len(run):  # ASCII or one U+FFFD per byte
                self.cfirst.extend(toks)
                self.clast.extend(toks)
            else:
                p = 0
                for L in _utf8_char_lengths(bytes(run), len(run)):
                    self.cfirst.append(toks[p])
                    self.clast.append(toks[p + L - 1])
                    p += L
            self.run_tok = []
        run.clear()  # in place: `_feed_pieces` holds a reference
        return s



# --------------------------------------------------------------------------------------------------------------
# Whole-sequence decode
# --------------------------------------------------------------------------------------------------------------
def _decode_all(vocab, ids: list) -> str:
    """Whole-sequence decode, fast paths first (the same text as `vocab.decode`)."""
    if vocab.kind == "bytes" and not vocab.strip_start and not vocab.cleanup:
        tb = vocab.tok_bytes
        return b"".join(map(tb.__getitem__, ids)).decode("utf-8", "replace")
    if vocab.kind == "pieces" and not vocab.cleanup and not vocab.strip_start and not vocab.first_text:
        parts = list(map(vocab.tok_text.__getitem__, ids))
        if None not in parts:
            return "".join(parts)
    return vocab.decode(ids)


def _suffix_start(vocab, ids: list, k: int, lookback: int = 16) -> int | None:
    """The largest index ``j`` in ``(k - lookback, k]``, ``j >= 0``, such that ``vocab.decode(ids[j:])`` is
    exactly the end of ``vocab.decode(ids)`` whatever ids come before ``ids[j]`` (so that a text search over the
    end of a long sequence need not decode the rest); None if no such index is found there (`starts_suffix`
    says which tokens qualify), or an id met on the way is not a valid id. Not with transformers' clean-up (it
    rewrites across token boundaries)."""
    if vocab.cleanup:
        return None
    size = vocab.size
    for j in range(k, max(-1, k - lookback), -1):
        i = ids[j]
        if type(i) is not int or not 0 <= i < size:
            return None  # (not checked yet: the caller's whole decode raises the error)
        if starts_suffix(vocab, i):
            return j
    return None


def starts_suffix(vocab, i: int) -> bool:
    """Whether token `i` (a valid id) starts a suffix of any id sequence whose decode is exactly the end of the
    whole sequence's decode, whatever ids come before it.

    Decoding is per token (`VocabBase.decode`), so the texts differ only where the suffix's first token is
    treated as a first token, or continues what came before. Hence the token must not be skipped, must begin a
    character on its own (bytes: its first byte is not a UTF-8 continuation byte; pieces: it is not a
    ``<0xXX>`` byte token, which would join the run before it), have no first-token text of its own
    (Metaspace's ``first_text``), and not begin with the character the decoder strips from the start of the
    text (``strip_start``); and the vocabulary must do no clean-up (it rewrites across token boundaries)."""
    if vocab.cleanup or vocab.skip[i]:
        return False
    strip = vocab.strip_char if vocab.strip_start else None
    if vocab.kind == "bytes":
        b = vocab.tok_bytes[i]
        return (bool(b) and (b[0] & 0xC0) != 0x80
                and (strip is None or not b.decode("utf-8", "replace").startswith(strip)))
    t = vocab.tok_text[i]
    return (vocab.byte_val_list[i] < 0 and bool(t) and vocab.first_text.get(i, t) == t
            and (strip is None or t[0] != strip))

