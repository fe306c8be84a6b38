"""Parsing token IDs directly: the public entry points, re-exported from the modules that implement them.

This module is a facade so that ``from chatparse.runtime.tokens import ...`` keeps working; the code lives in
one module per concept:

* `decode`: token ids validated and decoded incrementally, exactly as the tokenizer's ``decode``
  (bytes of a character split across tokens held until complete; ``clean_up_tokenization`` streamed).
* `tables`: the runtime side of a vocabulary (`VocabBase`, `LoadedVocab` from a table file) and of the
  per-mode token tables (`TokenTablesBase`: inert tokens, whole-delimiter tokens, the transition probe).
* `binding`: `TokenBinding` (a compiled template tied to those tables; build it with
  ``chatparse.bind(template, tokenizer)``), `binding_from_data` / `token_binding` (from a
  table file with a token section, FORMAT.md section 8) and the one-shot `parse_tokens` /
  `parse_tokens_batch`.
* `parser`: `TokenParser`, one generation fed token ids (per-token fast paths, lazy transitions,
  whole-delimiter tokens, opt-in token spans); its events equal `chatparse.ResponseParser`'s on the decoded
  text.
* `streams`: `TokenStreams` / `StepEvents`, many generations stepped together with numpy.

Token ids must be ``0 <= id < vocab size``; anything else raises ValueError naming the id (an id inside the
range that has no token decodes to nothing, as in ``decode``). Like the rest of the runtime, none of these
modules imports the compiler, interegular or transformers.
"""

from __future__ import annotations

from .binding import TokenBinding, binding_from_data, parse_tokens, parse_tokens_batch, token_binding
from .decode import CLEANUP_RULES, _Decoder, clean_up_tokenization, decode_run  # noqa: F401
from .parser import TokenParser
from .streams import StepEvents, TokenStreams
from .tables import (TOKEN_BYTE, TOKEN_SKIP, TOKEN_TEXT, LoadedVocab, TokenTablesBase,  # noqa: F401
                           VocabBase, _whole_delimiter)

__all__ = ["TokenBinding", "TokenParser", "TokenStreams", "StepEvents", "parse_tokens", "parse_tokens_batch",
           "decode_run", "CLEANUP_RULES", "VocabBase", "TokenTablesBase", "LoadedVocab", "binding_from_data",
           "token_binding", "clean_up_tokenization", "TOKEN_SKIP", "TOKEN_TEXT", "TOKEN_BYTE"]
