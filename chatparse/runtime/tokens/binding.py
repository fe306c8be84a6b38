"""`TokenBinding`: a compiled template tied to a tokenizer's token tables, and the entry points built on it.

A binding is made (once, cached) by ``chatparse.bind(template, tokenizer)``, or read from a
table file with a token section: `token_binding(compiled)` for a `CompiledTemplate` loaded from such a file
(`binding_from_data` does the work: `LoadedVocab` and `TokenTablesBase` from the file's arrays, no
tokenizer, no re-derivation).

Guarantees:

* `binding_from_data` checks everything that needs the compiled tables before trusting the file: table
  shapes, no inert or whole-delimiter tokens in a mode without a prefilter, whole-delimiter tokens only in
  modes whose patterns are all exact, and every listed whole-delimiter token re-run through the scanner
  (its captures come from that run). A bad section raises ValueError naming the problem.
* ``binding.parse`` / `parse_tokens` / `parse_tokens_batch` give the same message as
  ``chatparse.parse_response`` on the decoded text: they decode the whole sequence and feed it to a plain
  `StreamParser` (as ``chatparse.ResponseParser`` would), where ``parse_response`` takes the one-shot path
  of runtime/oneshot/parse.py to the same message. The prefix (text or ids) is required, or explicitly empty,
  because chat templates often pre-write part of the assistant message.
* ``binding.parser(...)`` / ``binding.streams(...)`` build `TokenParser` / `TokenStreams` (imported when
  called, since those modules import this one).
* ``binding.prompt_text(ids)`` gives a prompt's text as far back as its cut prefix depends on, decoded from
  the end; the short ends of prompts that decided a cut are kept (a bounded, first-come set), so that a prompt
  ending in a kept end (a chat template's header for the answer) is answered by a look-up.

Like the rest of the runtime this never imports the compiler, interegular or transformers: Python tools
are converted by the ``convert_tools`` the binder supplies.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from ..values.args import check_tools
from ..values.coerce import tool_params
from ..stream.dialect import resolve
from ..stream.parser import StreamParser, raise_malformed
from .decode import _decode_all, _ids_list, _suffix_start
from .tables import LoadedVocab, TokenTablesBase, _whole_delimiter

if TYPE_CHECKING:
    from .parser import TokenParser
    from .streams import TokenStreams

__all__ = ["TokenBinding", "binding_from_data", "token_binding", "parse_tokens", "parse_tokens_batch"]

TAIL_IDS = 64  # `TokenBinding.prompt_text`: the ids decoded first, from the end of the prompt
PROMPT_ENDS = 256  # `TokenBinding.prompt_text`: prompt ends kept per binding (the first ones seen), ...
PROMPT_END_LENGTHS = 4  # ... of at most this many different lengths (each is one look-up per prompt), ...
PROMPT_END_IDS = 32  # ... each of at most this many ids

_PREFIX_REQUIRED = (
    "`TokenParser`/`parse_tokens` requires `prefix` or `prefix_ids` (the chat prompt sent to the model before "
    "generation), because chat templates often pre-write part of the assistant message (e.g. an opening "
    "`<think>` tag) that the parser must see to parse the output correctly. If the generation already contains "
    'the complete message, pass `prefix=""` or `prefix_ids=[]` to opt out explicitly.'
)


# --------------------------------------------------------------------------------------------------------------
# The binding
# --------------------------------------------------------------------------------------------------------------
class TokenBinding:
    """A compiled template bound to a tokenizer's token tables (`chatparse.compiler.tokens.TokenVocab` and
    `TokenTables`). Build with ``chatparse.bind(template, tokenizer)``.

    `convert_tools` turns the ``tools`` argument into JSON schemas (Python functions included); the binder
    supplies transformers' conversion, so the runtime itself never imports it.
    """

    def __init__(self, compiled, vocab, tables, convert_tools=None):
        self.compiled = compiled
        self.vocab = vocab
        self.tables = tables
        self.convert_tools = convert_tools
        # ((length, {the last `length` ids of a prompt: `prompt_text`'s answer}), ...) (`_keep_end`); a tuple,
        # replaced whole when a length is added, so that a look-up never iterates over a changing container
        self._prompt_ends: tuple = ()
        self._ends_room = True  # `_prompt_ends` may take more

    def tool_params(self, tools) -> dict:
        check_tools(tools)
        tools = list(tools or [])
        if self.convert_tools is not None:
            tools = self.convert_tools(tools)
        elif any(not isinstance(t, dict) for t in tools):
            raise TypeError("this binding takes tools as JSON schemas (dicts); bind with "
                            "chatparse.bind to pass Python functions")
        return tool_params(tools)

    @property
    def size(self) -> int:
        return self.vocab.size

    def __repr__(self) -> str:
        names = [f["name"] for f in self.compiled.spec["fields"]]
        v = self.vocab
        tok = getattr(v, "name", None)
        return f"<TokenBinding fields={names} vocab={v.size} ids ({v.kind}{f', {tok}' if tok else ''})>"

    def decode(self, ids) -> str:
        """The tokenizer's decode of `ids` (the text the parser sees)."""
        return _decode_all(self.vocab, _ids_list(ids, self.vocab.size))

    def prompt_text(self, ids) -> str:
        """A prompt given as ids, as the text to pass as a parser's `prefix`: a text with the same cut prefix
        as ``self.decode(ids)`` (the text after the last start-anchor match, all a parser's state depends on),
        decoded only as far back as needed to know it. Where the anchor is a set of literals it is the cut
        prefix itself (which cutting again leaves as it is); where it is a pattern, the end of the decode from
        a token boundary before the last match (the parser cuts it). Either way a parser given it is in the
        state ``prefix=self.decode(ids)`` gives.

        The ids are decoded from the end, a window at a time: the last `TAIL_IDS`, then back to 4 times as
        many, and so on, each window's text put before the text decoded so far, until the text shows the last
        anchor match of the whole text (`Tables.tail_anchor_end`) or all is decoded (a prompt without the
        anchor costs one whole decode, as before). What a server pays per request for a long prompt is then
        the length of its last turn, not of the whole conversation. Exact: each window starts where its text
        is the end of the whole text (`decode._suffix_start`), so the pieces join to the whole text's end. The
        ids are range-checked as they are decoded, so an id before the window that shows the anchor is never
        read (in a list; an array is checked whole)."""
        ends = self._prompt_ends
        if ends and type(ids) is list:
            n = len(ids)
            for length, kept in ends:
                if length <= n:
                    hit = kept.get(tuple(ids[n - length:]))
                    if hit is not None:
                        return hit
        text = self._prompt_text(ids)
        if type(ids) is list and self._ends_room:
            self._keep_end(ids, text)
        return text

    def _keep_end(self, ids: list, answer: str) -> None:
        """Keep a short end of `ids` (`PROMPT_END_IDS` at most) that alone gives `prompt_text`'s `answer` for any
        prompt ending with it, so that a later prompt ending with the same ids (a chat template's header for
        the answer: the same for every request) is answered by one look-up. Exact: the end starts at a token
        whose decode is the end of any longer sequence's decode (`decode._suffix_start`), and its text shows the
        last start-anchor match of any text it ends (`Tables.tail_anchor_end`); the kept answer is that text,
        cut after the match where the anchor is literal (`answer` itself), else the text (the same cut).

        The end is found from `answer`'s length: the ids back from the end whose token texts cover the cut and
        the longest anchor match, then back to a token that starts a suffix; one decode checks it (none kept
        where it fails)."""
        vocab, tables, ends = self.vocab, self.compiled.tables, self._prompt_ends
        literal = tables.anchor_literals is not None
        if not literal and tables.anchor_width is None:  # (no end of a text shows its last match)
            self._ends_room = False
            return
        cut = answer if literal else tables.cut_prefix(answer, log=False)
        need = len(cut) + (max(map(len, tables.anchor_literals)) if literal else 2 * tables.anchor_width)
        size, n, tok_text = vocab.size, len(ids), vocab.tok_text
        j, have = n, 0
        while have < need:
            j -= 1
            if j < max(0, n - PROMPT_END_IDS):
                return
            i = ids[j]
            if type(i) is not int or not 0 <= i < size:
                return
            have += len(tok_text[i] or "")  # (a byte token's text is None: counted as none, so the end is longer)
        j = _suffix_start(vocab, ids, j, lookback=j - max(0, n - PROMPT_END_IDS) + 1)
        if j is None:
            return
        text = _decode_all(vocab, ids[j:])
        end = tables.tail_anchor_end(text)
        if end is None or (text[end:] if literal else tables.cut_prefix(text, log=False)) != cut:
            return
        kept = dict(ends).get(n - j)
        if kept is None:
            if len(ends) >= PROMPT_END_LENGTHS:
                self._ends_room = False
                return
            kept = {}
            self._prompt_ends = ends = ends + ((n - j, kept),)
        kept[tuple(ids[j:])] = text[end:] if literal else text
        self._ends_room = sum(len(k) for _, k in ends) < PROMPT_ENDS

    def _prompt_text(self, ids) -> str:
        vocab, tables = self.vocab, self.compiled.tables
        size = vocab.size
        checked = type(ids) is not list  # (a list's ids are checked window by window, as they are decoded)
        if checked:
            ids = _ids_list(ids, size)
        literal = tables.anchor_literals is not None
        if not literal and tables.anchor_width is None:  # (no window can show the last match)
            return _decode_all(vocab, ids if checked else _ids_list(ids, size))
        text, hi, width = "", len(ids), TAIL_IDS
        while hi:
            lo = _suffix_start(vocab, ids, len(ids) - width) if width < len(ids) else None
            if not lo or lo >= hi:
                lo = 0  # (no clean boundary found there: the rest, whole)
            part = ids[lo:hi]
            text = _decode_all(vocab, part if checked else _ids_list(part, size)) + text
            hi = lo
            end = tables.tail_anchor_end(text) if hi else tables.last_anchor_end(text)
            if end is not None:
                return text[end:] if literal else text
            width *= 4
        return text

    def parser(self, *, prefix: str | None = None, prefix_ids=None, tools=None, spans: bool = False,
               dialect=None, offsets: bool | None = None, malformed: str | None = None) -> "TokenParser":
        from .parser import TokenParser  # imports this module

        return TokenParser(self, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans, dialect=dialect,
                           offsets=offsets, malformed=malformed)

    def parse(self, ids, *, prefix: str | None = None, prefix_ids=None, tools=None, spans: bool = False,
              dialect=None, malformed: str | None = None):
        """One-shot: the message for a complete generation given as ids ((message, spans) with spans=True).
        ``dialect``/``malformed`` as for `chatparse.parse_response` (with malformed="event" the whole text
        is parsed before the first malformed region's error is raised)."""
        prefix = self._prefix_text(prefix, prefix_ids)
        d = resolve(dialect, malformed=malformed)
        if spans:
            from .parser import TokenParser

            p = TokenParser(self, prefix=prefix, tools=tools, spans=True, dialect=d)
            events = p.initial_events + p.feed_tokens(ids)
            message, final = p.finalize()
            raise_malformed(events + final)
            return message, p.spans
        text = _decode_all(self.vocab, _ids_list(ids, self.vocab.size))
        tables = self.compiled.tables
        core = StreamParser(tables, self.tool_params(tools), d)  # (ResponseParser's core; parse_response's message)
        cut = tables.cut_prefix(prefix) if prefix else ""
        events = core.feed(cut) if cut else []
        events += core.feed(text)
        message, final = core.finish()
        raise_malformed(events + final)
        return message

    def parse_batch(self, batch, *, prefix: Any = None, prefix_ids: Any = None, tools=None, spans: bool = False,
                    dialect=None, malformed: str | None = None) -> list:
        """Parse many generations (a list of id sequences or a 2-D array). The prefix (text or ids) is one for
        all items or one per item."""
        items = _batch_items(batch)
        prefixes = self._batch_prefixes(len(items), prefix, prefix_ids)
        return [self.parse(ids, prefix=p, tools=tools, spans=spans, dialect=dialect, malformed=malformed)
                for ids, p in zip(items, prefixes)]

    def streams(self, n: int, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                spans: bool = False, capacity: int = 1024, dialect=None, offsets: bool | None = None,
                malformed: str | None = None) -> "TokenStreams":
        """`TokenStreams` for `n` generations (prefix: one for all or one per stream)."""
        from .streams import TokenStreams  # imports this module

        return TokenStreams(self, n, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans,
                            capacity=capacity, dialect=dialect, offsets=offsets, malformed=malformed)

    # -- prefixes ---------------------------------------------------------------------------------------------
    def _prefix_text(self, prefix, prefix_ids) -> str:
        if prefix_ids is not None:
            if prefix is not None:
                raise ValueError("pass either `prefix` (text) or `prefix_ids` (token ids), not both")
            return _decode_all(self.vocab, _ids_list(prefix_ids, self.vocab.size))
        if prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        if not isinstance(prefix, str):
            raise TypeError(f"`prefix` must be a string (use `prefix_ids=` for token ids), got {type(prefix).__name__}")
        return prefix

    def _batch_prefixes(self, n: int, prefix, prefix_ids) -> list:
        if prefix_ids is not None:
            if prefix is not None:
                raise ValueError("pass either `prefix` (text) or `prefix_ids` (token ids), not both")
            if _is_single_ids(prefix_ids):
                return [self._prefix_text(None, prefix_ids)] * n
            texts = [self._prefix_text(None, p) for p in _batch_items(prefix_ids)]
        elif prefix is None:
            raise ValueError(_PREFIX_REQUIRED)
        elif isinstance(prefix, str):
            return [prefix] * n
        else:
            texts = list(prefix)
            for p in texts:
                if not isinstance(p, str):
                    raise TypeError("`prefix` must be a string or a list of strings (use `prefix_ids=` for ids)")
        if len(texts) != n:
            raise ValueError(f"Got {n} sequence(s) but {len(texts)} prefix(es); the prefix must be one for all "
                             "sequences or one per sequence.")
        return texts


def _is_single_ids(x) -> bool:
    if isinstance(x, (list, tuple)):
        return not x or not isinstance(x[0], (list, tuple, np.ndarray)) and not hasattr(x[0], "__len__")
    arr = np.asarray(x)
    return arr.ndim <= 1


def _batch_items(batch) -> list:
    if isinstance(batch, (list, tuple)):
        return list(batch)
    arr = np.asarray(batch)
    if arr.ndim != 2:
        raise ValueError(f"a batch of token ids must be 2-D (or a list of sequences), got shape {arr.shape}")
    return list(arr)


# --------------------------------------------------------------------------------------------------------------
# A binding from a table file's token section
# --------------------------------------------------------------------------------------------------------------
def _bad_tokens(msg: str):
    raise ValueError(f"chatparse table file: token section: {msg}")


def binding_from_data(compiled, data: dict, convert_tools=None) -> "TokenBinding":
    """A `TokenBinding` from the token section of a table file (``loads(...)["tokens"]``) and the
    `CompiledTemplate` of the same file: no compiler, no tokenizer, no re-derivation of the vocabulary.

    Checks what needs the compiled tables (the loader checked everything else): no inert tokens and no
    whole-delimiter tokens in a mode without a prefilter, whole-delimiter tokens only in modes whose patterns
    are all exact, and every listed whole-delimiter token really is that delimiter on its own (the scanner
    runs each one; its captures come from that run)."""
    t = compiled.tables
    n_modes = len(t.modes)
    size = int(data["meta"]["size"])
    inert = np.asarray(data["inert"])
    if inert.shape != (n_modes, size):
        _bad_tokens(f"inert table has shape {inert.shape}, expected ({n_modes}, {size}) for this template")
    vocab = LoadedVocab(data)
    exact_modes = [all(t.patterns[p].exact for p in m.patterns) for m in t.modes]
    delims: list = [{} for _ in range(n_modes)]
    texts = vocab.tok_text
    for m, i, pi in np.asarray(data["delims"]).reshape(-1, 3).tolist():
        if m >= n_modes or i >= size:
            _bad_tokens(f"whole-delimiter entry ({m}, {i}) out of range")
        if t.modes[m].first_re is None or not exact_modes[m]:
            _bad_tokens(f"mode {m} cannot have whole-delimiter tokens")
        d = _whole_delimiter(t, m, texts[i]) if texts[i] else None
        if d is None or d[0] != pi:
            _bad_tokens(f"token {i} is not a whole delimiter (pattern {pi}) in mode {m}")
        delims[m][i] = d
    for m, mode in enumerate(t.modes):
        if mode.first_re is None and inert[m].any():
            _bad_tokens(f"mode {m} has no prefilter, so no token can be inert in it")
    tables = TokenTablesBase(compiled, vocab, inert, delims)
    return TokenBinding(compiled, vocab, tables, convert_tools=convert_tools)


_binding_lock = threading.Lock()


def token_binding(compiled) -> "TokenBinding":
    """The `TokenBinding` of a `CompiledTemplate` that carries token tables: one loaded from a table file with
    a token section (``chatparse.tokenizer_dir.load_dir``, or ``CompiledTemplate(raw["template"], raw)`` of
    ``loads``), or one `load_dir` bound to a tokenizer. Built once per object (its cost: see
    bench/PERF_NOTES.md#token-binding). `TokenParser(compiled, ...)` calls this."""
    b = getattr(compiled, "_token_binding", None)
    if b is not None:
        return b
    data = (getattr(compiled, "raw_tables", None) or {}).get("tokens")
    if data is None:
        raise ValueError("this compiled template carries no token tables: bind it to a tokenizer with "
                         "chatparse.bind(template, tokenizer), or load a table file written "
                         "with token tables (`chatparse compile DIR` with a tokenizer.json)")
    with _binding_lock:
        b = getattr(compiled, "_token_binding", None)
        if b is None:
            # the template's conversion of Python tools (chatparse.CompiledTemplate: transformers', lazily)
            b = binding_from_data(compiled, data, convert_tools=getattr(compiled, "convert_tools", None))
            compiled._token_binding = b
    return b


# --------------------------------------------------------------------------------------------------------------
# One-shot helpers
# --------------------------------------------------------------------------------------------------------------
def parse_tokens(ids, binding: TokenBinding, *, prefix: str | None = None, prefix_ids=None, tools=None,
                 spans: bool = False, dialect=None, malformed: str | None = None):
    """Parse a complete generation given as token ids. Returns the message, or `(message, spans)`."""
    return binding.parse(ids, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans, dialect=dialect,
                         malformed=malformed)


def parse_tokens_batch(batch, binding: TokenBinding, *, prefix: Any = None, prefix_ids: Any = None, tools=None,
                       spans: bool = False, dialect=None, malformed: str | None = None) -> list:
    """Parse many generations (list of id sequences or a 2-D array); prefix one for all or one per item."""
    return binding.parse_batch(batch, prefix=prefix, prefix_ids=prefix_ids, tools=tools, spans=spans,
                               dialect=dialect, malformed=malformed)

