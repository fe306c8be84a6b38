"""Token tables: what each token of a tokenizer decodes to, and what it can do in each parser mode.

Two layers, both built once and cached:

* `TokenVocab` (per tokenizer): every token's bytes or text, derived from the vocabulary and the decoder
  configuration exactly as `tokenizers` decodes them, so that decoding a token sequence here gives the same
  string as the tokenizer's own ``decode(ids, skip_special_tokens=False)``:

  - byte-level BPE (``ByteLevel`` decoder; GPT-2, Llama 3, Qwen, tekken...): a token's characters are mapped
    back through the GPT-2 byte map (a token with a character outside the map is taken as its UTF-8, which is
    what the decoder does for added tokens such as ``<｜end▁of▁sentence｜>``); the text is the concatenated
    bytes decoded as UTF-8 with ``errors="replace"`` (one U+FFFD per maximal invalid subpart, the same rule as
    Rust's ``String::from_utf8_lossy``);
  - SentencePiece style (``Replace(▁→ ) + ByteFallback + Fuse + Strip`` or ``Metaspace``): a piece's ``▁``
    becomes a space; ``<0xXX>`` tokens are bytes, and a run of them decodes as UTF-8 when valid and as one
    U+FFFD per byte when not (``ByteFallback``); ``Strip`` removes leading spaces of the whole text and
    ``Metaspace`` drops the ``▁`` of the first token;
  - added and special tokens go through the same decoder as their literal content (``<think>`` decodes as
    ``<think>``); with ``skip_special_tokens=True`` special tokens vanish like in ``decode``;
  - anything else (a WordPiece decoder, no decoder, a slow tokenizer whose tokens do not decode on their own)
    is refused with a ValueError that names the decoder or the tokens whose text cannot be derived.

  A bind-time self check decodes a few random sequences both ways and refuses on any difference.

* `TokenTables` (per compiled template x vocab): for every parser mode, which tokens are *inert* (their text
  cannot touch a delimiter while the scanner is quiet: no character of it passes the mode's prefilter, so
  feeding it is O(1)), which tokens are a *whole delimiter* (a special token such as ``<think>`` or
  ``<|im_end|>`` that opens or closes a region in one step), and, lazily, what a token does to pending
  undecided attempts (so ``"\\n"`` before a ``\\s*</think>`` close and the word after it skip the engine).

`bind(compiled, tokenizer)` puts both together into the runtime's `TokenBinding` (cached); `chatparse.bind`
(`chatparse.tokenizer_dir.bind`) compiles a template dict and reads a tokenizer path first, then comes here.
Building both for a 131k-token vocabulary takes well under a second (see bench/bench_tokens.py).
"""

from __future__ import annotations

import json
import random
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import regex

from ..runtime.tokens import (TokenBinding, TokenTablesBase, VocabBase, _whole_delimiter,  # noqa: F401
                              clean_up_tokenization, decode_run)
from .tools import tool_schemas

__all__ = ["TokenVocab", "TokenTables", "bind", "vocab_for", "tables_for", "bytes_to_unicode"]

_MAX_NAMED = 12  # how many offending tokens a refusal message lists


def bytes_to_unicode() -> dict[int, str]:
    """The GPT-2 byte map: every byte to a printable character (the ByteLevel pre-tokenizer's alphabet)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


_BYTE_OF = {c: b for b, c in bytes_to_unicode().items()}
_TO_LATIN1 = {ord(c): chr(b) for c, b in _BYTE_OF.items()}
_OUTSIDE_MAP = regex.compile("[^" + "".join(regex.escape(c) for c in sorted(_BYTE_OF)) + "]")
_BYTE_TOKEN = regex.compile(r"<0x(?:[0-9A-Fa-f]{2}|\+[0-9A-Fa-f])>")


def _byte_level_bytes(token: str) -> bytes:
    """What the ByteLevel decoder turns one token string into."""
    if _OUTSIDE_MAP.search(token) is None:
        return token.translate(_TO_LATIN1).encode("latin-1")
    return token.encode("utf-8")


# --------------------------------------------------------------------------------------------------------------
# The vocabulary
# --------------------------------------------------------------------------------------------------------------
class TokenVocab(VocabBase):
    """Every token's contribution to the decoded text, for one tokenizer (see the module docstring).

    Attributes used by the runtime:

    * ``kind``: ``"bytes"`` (text = lossy UTF-8 of the concatenated token bytes) or ``"pieces"`` (text =
      pieces concatenated, runs of byte tokens decoded strictly or as one U+FFFD per byte).
    * ``size``: number of ids (ids ``0 <= id < size`` are valid; an id without a token decodes to nothing,
      as in ``decode``).
    * ``tok_bytes[id]``: the token's bytes (``bytes`` kind) or the UTF-8 of its piece (``pieces`` kind).
    * ``tok_text[id]``: the token's text when it decodes the same on its own as in any context (complete
      UTF-8, not a byte token), else None. ``""`` for tokens that decode to nothing.
    * ``byte_val[id]``: for ``pieces``: the byte of a ``<0xXX>`` token, else -1.
    * ``skip[id]``: the token is dropped before decoding (no token for that id, or a skipped special token).
    * ``first_text``: ``pieces`` with a Metaspace decoder: the text of a token when it is the first one.
    * ``strip_char`` / ``strip_start``: up to ``strip_start`` leading ``strip_char`` of the whole text go.
    * ``cleanup``: transformers' ``clean_up_tokenization`` runs on the decoded text.
    """

    def __init__(self, *, kind: str, tok_bytes: list, byte_val: np.ndarray | None, skip: np.ndarray,
                 strip_char: str = " ", strip_start: int = 0, first_text: dict | None = None,
                 cleanup: bool = False, name: str = "tokenizer"):
        self.kind = kind
        self.size = len(tok_bytes)
        if kind == "bytes":  # a skipped token decodes to nothing: its bytes are none (every decoder reads them)
            tok_bytes = [b"" if skip[i] else b for i, b in enumerate(tok_bytes)]
        self.tok_bytes = tok_bytes
        self.skip = skip
        self.strip_char = strip_char
        self.strip_start = strip_start
        self.cleanup = cleanup
        self.name = name
        self.byte_val = byte_val if byte_val is not None else np.full(self.size, -1, dtype=np.int16)
        self.byte_val_list = self.byte_val.tolist()
        texts: list = []
        if kind == "bytes":
            for i, b in enumerate(tok_bytes):
                try:
                    texts.append(b.decode("utf-8"))
                except UnicodeDecodeError:
                    texts.append(None)
        else:
            bv = self.byte_val_list
            texts = [None if bv[i] >= 0 else b.decode("utf-8") for i, b in enumerate(tok_bytes)]
        for i in np.flatnonzero(skip).tolist():
            texts[i] = ""
        self.tok_text = texts
        # Metaspace: the first token of a decode drops its "▁" instead of turning them into spaces.
        self.first_text: dict = dict(first_text or {})
        self.has_bytes_tokens = bool((self.byte_val >= 0).any())
        # Tokens whose text is not available on its own (incomplete UTF-8, byte tokens).
        self.n_partial = sum(1 for t in texts if t is None)

    # `decode(ids)` (the reference for the incremental decoders) is `VocabBase.decode` in runtime/tokens/__init__.py.


# -- building a vocab from a tokenizer ----------------------------------------------------------------------------
def _decoder_steps(state: dict) -> list[dict]:
    if state is None:
        return []
    if state.get("type") == "Sequence":
        out = []
        for d in state.get("decoders", []):
            out.extend(_decoder_steps(d))
        return out
    return [state]


def _describe(steps: list[dict]) -> str:
    return " + ".join(s.get("type", "?") for s in steps) or "no decoder"


def _plan(steps: list[dict]) -> dict:
    """Recognise the decoder chain; raise ValueError for one chatparse cannot reproduce incrementally.

    Supported (after flattening Sequences):
    ``ByteLevel [Strip]``, ``[Replace(▁→ )] [ByteFallback] [Fuse] [Strip]`` and ``Metaspace [Fuse] [Strip]``,
    where Strip removes leading characters only and, for pieces, comes after Fuse (it then sees the whole text).
    """
    names = [s.get("type") for s in steps]
    why = f"chatparse cannot derive token text for a tokenizer with decoder {_describe(steps)}"
    if not steps:
        raise ValueError(why + " (tokenizers then joins tokens with spaces); only byte-level BPE and "
                         "SentencePiece-style decoders are supported")
    plan = {"kind": "pieces", "replace": False, "byte_fallback": False, "strip_start": 0, "strip_char": " ",
            "metaspace_first": False}
    i = 0

    def at(name):
        return i < len(steps) and names[i] == name

    if at("ByteLevel"):
        plan["kind"] = "bytes"
        i += 1
    elif at("Metaspace"):
        s = steps[i]
        if s.get("replacement") != "\u2581":
            raise ValueError(why + " (Metaspace must use the replacement '▁')")
        plan["replace"] = True
        plan["metaspace_first"] = s.get("prepend_scheme", "always") != "never"
        i += 1
    else:
        if at("Replace"):
            s = steps[i]
            if s.get("pattern", {}).get("String") != "\u2581" or s.get("content") != " ":
                raise ValueError(why + " (only Replace('▁', ' ') is supported)")
            plan["replace"] = True
            i += 1
        if at("ByteFallback"):
            plan["byte_fallback"] = True
            i += 1
    fused = plan["kind"] == "bytes"
    if at("Fuse"):
        fused = True
        i += 1
    if at("Strip"):
        s = steps[i]
        if s.get("stop", 0) != 0 or len(s.get("content", " ")) != 1 or not fused:
            raise ValueError(why + " (only a Strip of leading characters after Fuse is supported)")
        plan["strip_start"] = int(s.get("start", 0))
        plan["strip_char"] = s.get("content", " ")
        i += 1
    if i != len(steps):
        raise ValueError(why + f" (unsupported step {names[i]!r} at position {i})")
    return plan


def _vocab_from_backend(tok, *, skip_special_tokens: bool, cleanup: bool, name: str) -> TokenVocab:
    """Build from a `tokenizers.Tokenizer`."""
    state = json.loads(tok.decoder.__getstate__()) if tok.decoder is not None else None
    model_state = type(tok.model).__name__
    plan = _plan(_decoder_steps(state))
    vocab = tok.get_vocab(with_added_tokens=True)
    added = tok.get_added_tokens_decoder()
    size = max(list(vocab.values()) + list(added.keys()) + [tok.get_vocab_size(with_added_tokens=True) - 1]) + 1
    while tok.id_to_token(size) is not None:
        size += 1
    # id_to_token is what decode uses (added vocabulary first, then the model); get_vocab can lose ids
    # whose string is also an added token.
    id_to_token = tok.id_to_token
    strings: list = [id_to_token(i) for i in range(size)]
    skip = np.zeros(size, dtype=bool)
    for i, s in enumerate(strings):
        if s is None:
            skip[i] = True
    if skip_special_tokens:
        for i, at in added.items():
            if at.special:
                skip[i] = True
    byte_val = None
    if plan["kind"] == "bytes":
        tok_bytes = [b"" if s is None else _byte_level_bytes(s) for s in strings]
    else:
        byte_val = np.full(size, -1, dtype=np.int16)
        if plan["byte_fallback"]:
            for i, s in enumerate(strings):
                if s is not None and len(s) == 6 and _BYTE_TOKEN.fullmatch(s):
                    byte_val[i] = int(s[3:5], 16)
        pieces = ["" if s is None else s for s in strings]
        raw = pieces
        if plan["replace"]:
            pieces = [p.replace("\u2581", " ") for p in pieces]
        tok_bytes = [p.encode("utf-8") for p in pieces]
        for i in np.flatnonzero(byte_val >= 0).tolist():
            tok_bytes[i] = bytes([int(byte_val[i])])
    first_text = None
    if plan["kind"] == "pieces" and plan["metaspace_first"]:
        first_text = {i: p.replace("\u2581", "") for i, p in enumerate(raw) if "\u2581" in p and not skip[i]}
    v = TokenVocab(kind=plan["kind"], tok_bytes=tok_bytes, byte_val=byte_val, skip=skip,
                   strip_char=plan["strip_char"], strip_start=plan["strip_start"], first_text=first_text,
                   cleanup=cleanup, name=name)
    v.model_type = model_state
    return v


def _vocab_from_texts(decode_one, size: int, *, skip: np.ndarray, name: str) -> TokenVocab:
    """Generic fallback: every token must decode on its own to a fixed text (checked later by self-check)."""
    tok_bytes = []
    bad = []
    for i in range(size):
        if skip[i]:
            tok_bytes.append(b"")
            continue
        t = decode_one(i)
        if not isinstance(t, str) or "\ufffd" in t:
            bad.append(i)
            tok_bytes.append(b"")
        else:
            tok_bytes.append(t.encode("utf-8"))
    if bad:
        raise ValueError(_refusal(name, bad, "do not decode to text on their own and the tokenizer exposes no "
                                  "vocabulary/decoder chatparse can read"))
    return TokenVocab(kind="pieces", tok_bytes=tok_bytes, byte_val=None, skip=skip, name=name)


def _refusal(name: str, ids: list, what: str) -> str:
    shown = ", ".join(str(i) for i in ids[:_MAX_NAMED])
    more = f" and {len(ids) - _MAX_NAMED} more" if len(ids) > _MAX_NAMED else ""
    return f"chatparse cannot derive the bytes of {len(ids)} token(s) of {name}: ids {shown}{more} {what}"


def _describe_tokenizer(tokenizer) -> str:
    return type(tokenizer).__name__


def _make_vocab(tokenizer, skip_special_tokens: bool):
    """(vocab, decode_fn) for a `tokenizers.Tokenizer` or a transformers tokenizer."""
    name = _describe_tokenizer(tokenizer)
    try:
        from tokenizers import Tokenizer as _RawTokenizer
    except ImportError:  # pragma: no cover - tokenizers is a transformers dependency
        _RawTokenizer = ()
    if isinstance(tokenizer, _RawTokenizer):
        v = _vocab_from_backend(tokenizer, skip_special_tokens=skip_special_tokens, cleanup=False, name=name)

        def decode(ids):
            return tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

        return v, decode
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and isinstance(backend, _RawTokenizer):
        cleanup = bool(getattr(tokenizer, "clean_up_tokenization_spaces", False))
        if cleanup and type(backend.model).__name__ == "BPE" and not getattr(
                tokenizer, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", False):
            cleanup = False  # transformers ignores the flag for BPE models
        v = _vocab_from_backend(backend, skip_special_tokens=skip_special_tokens, cleanup=cleanup, name=name)
        # Ids the transformers tokenizer knows beyond the backend's (rare) are refused by range checks.
        return v, (lambda ids: tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens))
    if hasattr(tokenizer, "decode") and hasattr(tokenizer, "__len__"):
        size = len(tokenizer)
        skip = np.zeros(size, dtype=bool)
        if skip_special_tokens:
            for i in getattr(tokenizer, "all_special_ids", []) or []:
                if 0 <= i < size:
                    skip[i] = True

        def decode(ids):
            return tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

        v = _vocab_from_texts(lambda i: tokenizer.decode([i], skip_special_tokens=skip_special_tokens), size,
                              skip=skip, name=name)
        return v, decode
    raise TypeError(f"chatparse needs a tokenizers.Tokenizer or a transformers tokenizer, got {name}")


def self_check(vocab: TokenVocab, decode_fn, seed: int = 0, n_seqs: int = 12, length: int = 40) -> None:
    """Decode random sequences with the tokenizer and with `vocab`; refuse on any difference."""
    rng = random.Random(seed)
    size = vocab.size
    if size == 0:
        raise ValueError(f"{vocab.name} has an empty vocabulary")
    interesting = np.flatnonzero((vocab.byte_val >= 0) | vocab.skip).tolist()[:512]
    partial = [i for i, t in enumerate(vocab.tok_text[: min(size, 50000)]) if t is None][:512]
    pools = [list(range(size)), interesting or list(range(size)), partial or list(range(size))]
    for k in range(n_seqs):
        ids = []
        for _ in range(length):
            pool = pools[rng.randrange(3)] if k % 2 else pools[0]
            ids.append(pool[rng.randrange(len(pool))])
        want = decode_fn(ids)
        got = vocab.decode(ids)
        if want != got:
            raise ValueError(
                f"chatparse cannot reproduce the decode of {vocab.name}: for ids {ids} the tokenizer gives "
                f"{want!r} but the derived token bytes give {got!r}; this tokenizer's decoder is not supported")


# --------------------------------------------------------------------------------------------------------------
# Caches
# --------------------------------------------------------------------------------------------------------------
_lock = threading.Lock()
_vocab_cache: "OrderedDict[tuple, tuple]" = OrderedDict()
_tables_cache: "OrderedDict[tuple, tuple]" = OrderedDict()
_CACHE = 8


def _size_key(tokenizer) -> Any:
    try:
        return tokenizer.get_vocab_size(with_added_tokens=True)
    except Exception:  # transformers tokenizers
        try:
            return len(tokenizer)
        except Exception:
            return None


def vocab_for(tokenizer, *, skip_special_tokens: bool = False) -> TokenVocab:
    """The (cached) `TokenVocab` of a tokenizer; a `TokenVocab` (or a vocab read from a table file,
    `chatparse.runtime.tokens.LoadedVocab`) is returned as is."""
    if isinstance(tokenizer, VocabBase):
        return tokenizer
    key = (id(tokenizer), bool(skip_special_tokens), _size_key(tokenizer))
    with _lock:
        hit = _vocab_cache.get(key)
        if hit is not None and hit[0] is tokenizer:
            _vocab_cache.move_to_end(key)
            return hit[1]
    vocab, decode_fn = _make_vocab(tokenizer, skip_special_tokens)
    self_check(vocab, decode_fn)
    vocab.decode_fn = decode_fn
    with _lock:
        _vocab_cache[key] = (tokenizer, vocab)  # keeps the tokenizer alive, so its id stays unique
        while len(_vocab_cache) > _CACHE:
            _vocab_cache.popitem(last=False)
    return vocab


# --------------------------------------------------------------------------------------------------------------
# Per-mode token tables
# --------------------------------------------------------------------------------------------------------------
class TokenTables(TokenTablesBase):
    """Per-mode token tables of one compiled template bound to one vocab: computes which tokens are inert in
    each mode (non-empty, complete text, no character passes the mode's prefilter) and which are a whole
    delimiter on their own; the attributes and methods the runtime uses are `TokenTablesBase`'s (the same
    object a table file's token section gives, see `chatparse.runtime.tokens.binding_from_data`).
    """

    def __init__(self, compiled, vocab: TokenVocab):
        t = compiled.tables
        size = vocab.size
        texts = vocab.tok_text
        inert = np.zeros((len(t.modes), size), dtype=np.uint8)
        delims: list = []
        exact_modes = [all(t.patterns[p].exact for p in m.patterns) for m in t.modes]
        for k, mode in enumerate(t.modes):
            first = mode.first_re
            if first is None:
                delims.append({})
                continue
            search = first.search
            row = [s if (s and search(s) is None) else None for s in texts]
            inert[k] = np.fromiter((s is not None for s in row), dtype=np.uint8, count=size)
            # Whole-delimiter tokens: candidates must be able to start an attempt at their first character.
            found = {}
            if exact_modes[k]:
                match0 = first.match
                for i, s in enumerate(texts):
                    if s and row[i] is None and len(s) <= 256 and match0(s) is not None:
                        d = _whole_delimiter(t, k, s)
                        if d is not None:
                            found[i] = d
            delims.append(found)
        super().__init__(compiled, vocab, inert, delims)


def tables_for(compiled, vocab: TokenVocab) -> TokenTables:
    key = (id(compiled), id(vocab))
    with _lock:
        hit = _tables_cache.get(key)
        if hit is not None and hit[0] is compiled and hit[1] is vocab:
            _tables_cache.move_to_end(key)
            return hit[2]
    tables = TokenTables(compiled, vocab)
    with _lock:
        _tables_cache[key] = (compiled, vocab, tables)
        while len(_tables_cache) > _CACHE:
            _tables_cache.popitem(last=False)
    return tables


_bindings: "OrderedDict[tuple, TokenBinding]" = OrderedDict()


def bind(compiled, tokenizer, *, skip_special_tokens: bool = False) -> TokenBinding:
    """Bind a compiled template (a `RuntimeTemplate`: ``chatparse.compile_template(template)``) to a tokenizer
    (`tokenizers.Tokenizer`, a transformers tokenizer or a `TokenVocab`): the runtime `TokenBinding` that
    parses token ids. Cached per (template, tokenizer); the token tables are built once. `chatparse.bind`
    takes a template dict or a tokenizer path too and comes here.

    ``skip_special_tokens=True`` decodes like ``decode(ids, skip_special_tokens=True)`` (special tokens
    vanish); the default keeps them, as transformers' ``decode`` and ``parse_response`` do.
    """
    if isinstance(compiled, TokenBinding):
        return compiled
    vocab = vocab_for(tokenizer, skip_special_tokens=skip_special_tokens)
    key = (id(compiled), id(vocab))
    with _lock:
        hit = _bindings.get(key)
        if hit is not None and hit.compiled is compiled and hit.vocab is vocab:
            _bindings.move_to_end(key)
            return hit
    b = TokenBinding(compiled, vocab, tables_for(compiled, vocab), convert_tools=tool_schemas)
    with _lock:
        _bindings[key] = b
        while len(_bindings) > 16:
            _bindings.popitem(last=False)
    return b
