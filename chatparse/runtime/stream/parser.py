"""Regions and events: what happens when the scanner reports text and delimiters.

The region rules are the reference's (transformers' ResponseParser): the stream starts in the implicit field
(or a null sink that drops text when there is none); an explicit open closes the current region and opens its
field; inside an explicit field only that field's close is watched; every close returns to the implicit field,
which opens lazily on its first character; end of stream closes whatever is open. A zero-width implicit close
on an implicit region that holds nothing stops the parse (the reference stops there too; chatparse logs it),
and so does a zero-width close at the offset of the zero-width open of its region (the reference never
returns there: the same open comes again at that offset, forever; chatparse logs it).

Events are the reference's three dicts. Text for one region that arrives within one `feed` call is merged
into a single `region_chunk`, and a region's chunks always concatenate to its raw body.

`apply_delimiter` is the same delimiter step for a caller that decided the delimiter itself (the token parser,
for a token that is a whole delimiter on its own): one code path switches regions, whoever decided.

An exception raised while closing a region (a bad JSON body, a failing transform) propagates to the caller
and leaves the parser *failed*: later calls raise RuntimeError instead of continuing from a half-updated
state.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Callable

from ..values.args import text_error
from ..values.coerce import coerce_tool_calls
from .dialect import TRANSFORMERS, Dialect
from ..values.json_end import JSON_END, JsonEnd, json_end_fields
from ..values.recovery import on_error_modes, recover_region
from .scanner import Scanner, copy_slots
from ..values.schema_typing import schema_typer
from ..tables.layout import Tables, logger
from ..values.transform import value_maker
from ..values.steps import VALUE_STEP_KEYS
from ..values.parsers import content_parser


def _is_empty(v: Any) -> bool:
    return v is None or (isinstance(v, (list, dict, str)) and not v)


def field_store(field: dict) -> Callable[[dict, str, dict, dict], Any]:
    """``store(output, body, captures, tool_params)``: close one region of `field` with raw `body`: parse
    and transform it (`transform.value_maker`), type tool-call arguments, and put the value into `output`
    (joined, appended when the field repeats, else set). Returns the value (the ``region_close`` event's).
    Built once per field (`stores_for`); shared by the streaming parser and the one-shot path."""
    name = field["name"]
    join = field["join"]
    repeats = field["repeats"]
    flatten = field.get("flatten", False)  # (format extension flatten: a list value extends the field's list)
    # Without a transform the value is the parsed body: call the parser itself (for stripped text, str.strip:
    # a region body is always a str), one or two Python frames fewer per region.
    make = parse = None
    if field.get("transform") is None and not VALUE_STEP_KEYS & field.keys():
        args = field["content_args"]
        strip_text = field["content"] == "text" and type(args) is dict and args.get("strip", True)
        parse = str.strip if strip_text else content_parser(field["content"], args)
    else:
        make = value_maker(field)

    # tool-argument typing: transformers' rule, or the schema-first one (format extension argument_types)
    typer = schema_typer(field, value_maker) if field.get("argument_types") == "schema" else None

    def store(output: dict, body: str, captures: dict, tool_params: dict) -> Any:
        value = make(body, captures) if parse is None else parse(body)
        if tool_params:
            value = coerce_tool_calls(value, tool_params) if typer is None else typer(value, body, captures,
                                                                                     tool_params)
        if join is not None:
            if not isinstance(value, str):
                raise ValueError(f"Field '{name}': 'join' requires each match to parse to a string, "
                                 f"got {type(value).__name__}.")
            prev = output.get(name)
            if prev is None:
                output[name] = value
            elif type(prev) is JoinedParts:
                prev.append(value)
            elif type(prev) is str:
                output[name] = JoinedParts(join, (prev, value))
            else:  # (a default that is no string: the reference's concatenation fails, or does what it does)
                output[name] = prev + join + value
        elif repeats:
            if flatten and type(value) is list:
                output.setdefault(name, []).extend(value)
            else:
                output.setdefault(name, []).append(value)
        else:
            output[name] = value
        return value

    return store


def stores_for(tables: Tables) -> list:
    """`field_store` of each field of `tables`, built once per loaded tables."""
    stores = getattr(tables, "stores", None)
    if stores is None:
        stores = tables.stores = [field_store(f) for f in tables.fields]
    return stores


def flat_defaults(tables: Tables) -> bool:
    """Whether every default of the template is a scalar (then a plain dict copy of the defaults shares
    nothing mutable with them); computed once per loaded tables."""
    flat = getattr(tables, "flat_defaults", None)
    if flat is None:
        flat = tables.flat_defaults = all(isinstance(v, (str, int, float, bool, type(None)))
                                          for v in tables.template["defaults"].values())
    return flat


class JoinedParts(list):
    """The values of a `join` field stored so far, joined with its separator only when the message is read
    (`joined`, `final_output`): joining them at every region made each region cost the length of all the
    text before it, quadratic in the number of regions (content between many tool calls)."""

    __slots__ = ("sep",)

    def __init__(self, sep: str, parts):
        super().__init__(parts)
        self.sep = sep

    def text(self) -> str:
        return self.sep.join(self)


def joined(output: dict) -> dict:
    """`output` as the message reads so far: `JoinedParts` joined (a new dict where there are any)."""
    for v in output.values():
        if type(v) is JoinedParts:
            return {k: v.text() if type(v) is JoinedParts else v for k, v in output.items()}
    return output


def fresh_output(tables: Tables) -> dict:
    """A new message dict holding the template's defaults, sharing nothing mutable with them (a dict copy
    where `flat_defaults`, a tenth of the cost of `deepcopy`)."""
    defaults = tables.template["defaults"]
    return dict(defaults) if flat_defaults(tables) else deepcopy(defaults)


def warn_stall(offset: int) -> None:
    """Log that the parse stops at a zero-width close of the empty implicit field with text after it (the
    reference stops there too; chatparse says so instead of dropping the rest silently)."""
    logger.warning("chatparse: zero-width close of the empty implicit field at offset %d; "
                   "the reference stops parsing here, so the rest of the text is ignored", offset)


def warn_loop(offset: int, name: str) -> None:
    """Log that the parse stops where a zero-width open and a zero-width close of field `name` met at one
    offset: from there the same open would come again at that offset, forever (the reference never returns
    there)."""
    logger.warning("chatparse: field '%s' opened and closed with zero width at offset %d, and would do so "
                   "forever (the reference never returns here); the rest of the text is ignored", name, offset)


def captures_of(m: Any) -> dict:
    """The named groups of an open match that took part in it (a transform's scope); {} for None."""
    if m is None:
        return {}
    groups = m.groupdict()  # a fresh dict
    if None in groups.values():
        return {k: v for k, v in groups.items() if v is not None}
    return groups


def capture_reader(rx: Any) -> Callable[[Any], dict]:
    """`captures_of` for matches of the compiled pattern `rx` (or None, for a literal delimiter's missing
    match), cheaper where `rx` has one named group or none: ``Match.groupdict`` costs four times
    ``Match.group``. (`regex` gives every use of one group name a single group number.)"""
    names = list(rx.groupindex.items())
    if not names:
        return lambda m: {}
    if len(names) > 1:
        return captures_of
    name, index = names[0]

    def one(m: Any) -> dict:
        value = None if m is None else m.group(index)
        return {} if value is None else {name: value}

    return one


def final_output(tables: Tables, output: dict, malformed: set | None = None) -> dict:
    """The message at the end of a parse: ValueError if a required field is missing (a field in `malformed`,
    whose value failed to parse in the serving dialect, is not missing), then keys without a value dropped
    unless they come from `defaults`. Shared by the streaming parser and the one-shot path."""
    if not tables.required:  # (the usual message: nothing required, every value non-empty and whole)
        for v in output.values():
            if not v or type(v) is JoinedParts:
                break
        else:
            return output
    output = joined(output)
    for name in tables.required:
        if name not in output and not (malformed and name in malformed):
            missing = [n for n in tables.required if n not in output and not (malformed and n in malformed)]
            raise ValueError(f"Required response_template fields missing from parsed output: {missing}")
    defaults = tables.template["defaults"]
    for k, v in output.items():
        if not v and k not in defaults and _is_empty(v):  # (`not v` first: a non-empty value is kept at once)
            return {k: v for k, v in output.items() if k in defaults or not _is_empty(v)}
    return output


def raise_malformed(events: list) -> None:
    """Raise the error of the first ``region_malformed`` event in `events`, if any: how `parse_response`
    ends in the serving dialect (vLLM's copy parses the whole text first, then raises)."""
    for ev in events:
        if ev["type"] == "region_malformed" and "recovered" not in ev:  # (on_error handled the others)
            raise ev["error"]


def feed_prompt(core: "StreamParser", cut: str, dialect: Dialect) -> list[dict]:
    """Feed a fresh `core` the cut prefix (the prompt after its last start anchor: `Tables.cut_prefix`); returns
    its events, the parser's initial events. Where `dialect` keeps prompt text out of chunks, the prompt ends
    here. Every owner of a `StreamParser` primes it this way (the public parser, token parsers, the grammar
    export's start mode)."""
    if not cut:
        return []
    events = core.feed(cut)
    if not dialect.prompt_chunks:
        core.prompt_end = len(cut)
    return events


class StreamParser:
    """One generation's parse state. `feed`/`finish` return the events they produced."""

    # Slots (see `TokenParser.__slots__`)
    __slots__ = ("body", "captures", "closing", "current", "empty_open", "failed", "finished", "inputs", "json_end",
                 "json_ends", "malformed", "names", "offsets", "on_errors", "open_start", "open_text", "opened",
                 "output", "pending", "prompt_end", "recover", "scanner", "stalled", "stores", "t", "tail", "tail_len",
                 "tool_params", "usable", "__dict__")

    def __init__(self, tables: Tables, tool_params: dict | None = None, dialect: Dialect = TRANSFORMERS):
        self.t = tables
        self.tool_params = tool_params or {}
        self.output: dict = fresh_output(tables)
        self.current = tables.implicit  # field index, or None for the null sink
        self.opened = False
        self.captures: dict = {}
        # The open region's raw text: `body` holds joined blocks, `tail` the recent small pieces. Joining the
        # pieces every few KiB keeps retained memory near one byte per character instead of ~60 per 4-char feed.
        self.body: list[str] = []
        self.tail: list[str] = []
        self.tail_len = 0
        self.pending: list[str] = []
        self.scanner = Scanner(tables)
        self.stalled = False
        self.empty_open = -1  # offset of the current region's open delimiter when that was zero-width
        self.finished = False
        self.failed: BaseException | None = None
        self.usable = True  # False once finished or failed
        self.names = [f["name"] for f in tables.fields]
        self.stores = stores_for(tables)
        # close_json_end (runtime/values/json_end.py): per field, whether it closes at the end of its JSON value; the
        # open region's tracker while it is such a field's (None otherwise: the token paths then apply)
        self.json_ends = json_end_fields(tables)
        self.json_end: JsonEnd | None = None
        # on_error (runtime/values/recovery.py): per field, its mode or None; the open region's open delimiter (text,
        # offset) and, while a region is being closed by its close delimiter, that delimiter's text
        self.on_errors = on_error_modes(tables)
        self.open_text, self.open_start, self.closing = "", 0, ""
        # The serving dialect (runtime/stream/dialect.py): spans on events, malformed regions as events, prompt text
        # kept out of chunks from `prompt_end` on (set by the owner once the prefix is fed), the whole input.
        self.offsets = dialect.offsets
        self.recover = dialect.malformed == "event"
        self.malformed: set | None = None  # names of fields whose value failed to parse (with `recover`)
        self.prompt_end = 0
        self.inputs: list[str] | None = [] if dialect.input_text else None

    def input_text(self) -> str:
        """Everything this parser was given (the dialect's ``input_text``); kept only where asked for."""
        inputs = self.inputs
        if inputs is None:
            raise AttributeError("input_text is kept only in a dialect with input_text=True (dialect='vllm')")
        if len(inputs) > 1:
            inputs[:] = ["".join(inputs)]
        return inputs[0] if inputs else ""

    def fork(self, keep_input: bool = False) -> "StreamParser":
        """An independent copy of this parse state: feeding or finishing it leaves this parser as it was.

        The tables, the tool schemas and the scanner's modes are shared (they never change); everything a step
        changes is copied, and the copy keeps no `input_text` (with `keep_input`, a copy of it where this
        parser keeps it: a parser that goes on as this one would, `TokenParser.fork`). The cost is the size of
        that state: the held text and live attempts (bounded by the delimiters), the open region's body (held
        as blocks of a few KiB: about one list entry per 4 KiB) and the message so far. What a "what if the
        text ended here" question needs (`chatparse.ResponseParser.probe`)."""
        self._check_usable()
        if type(self) is not StreamParser:
            raise TypeError(f"{type(self).__name__} cannot be forked (its records belong to its owner)")
        c = copy_slots(self)
        c.body, c.tail, c.pending = list(self.body), list(self.tail), list(self.pending)
        c.captures = dict(self.captures)
        # a stored value is never changed after it is stored; only a repeated field's list grows
        c.output = {k: list(v) if type(v) is list else JoinedParts(v.sep, v) if type(v) is JoinedParts else v
                    for k, v in self.output.items()}
        c.malformed = None if self.malformed is None else set(self.malformed)
        c.inputs = list(self.inputs) if keep_input and self.inputs is not None else None
        c.scanner = self.scanner.fork()
        if self.json_end is not None:
            c.json_end = self.json_end.fork()
        return c

    # -- public steps ----------------------------------------------------------------------------------------
    def feed(self, text: str) -> list[dict]:
        if not self.usable:
            self._check_usable()
        if type(text) is not str and not isinstance(text, str):
            raise text_error(text, "feed() argument 'text'")
        if self.inputs is not None and text:
            self.inputs.append(text)
        if not text or self.stalled:
            return []
        sc = self.scanner
        if not sc.attempts and sc.scan == sc.end and sc.end and sc.mode.skip_to(text, 0) == len(text):
            if self.json_end is not None:
                return self._guarded(self._json_plain_step, text)
            # Fast path: nothing is pending and no character of `text` can begin a delimiter, so all of it is
            # region text. The scanner keeps only the few characters of history a later decision may read.
            end = sc.end = sc.end + len(text)
            sc.scan = sc.pos = end
            kept = sc.text + text
            if len(kept) > 512:
                kept = kept[-sc.keep:]
            sc.text = kept
            sc.base = end - len(kept)
            fi = self.current
            if fi is None:
                return []
            tail = self.tail
            tail.append(text)
            self.tail_len += len(text)
            if self.tail_len > 4096:
                self._keep("")
            chunk = {"type": "region_chunk", "field": self.names[fi], "text": text, "dirty": self.t.dirty[fi]}
            if self.opened:
                return [chunk]
            self.opened = True
            return [self._implicit_open(fi, end - len(text)), chunk]
        return self._guarded(self._feed_step, text)

    def _feed_step(self, events: list, text: str) -> None:
        self.scanner.push(text)
        self._process(events, eos=False)

    def _json_plain_step(self, events: list, text: str) -> None:
        """`_feed_step` in a close_json_end region for `text` in which no character can begin a delimiter,
        with nothing pending before it (the caller checked both, as for `feed`'s fast path): the JSON tracker
        reads `text`; while the value has not ended, the step `_process` takes is known (the scanner's search
        finds nothing and holds nothing, `_decide_json_end` decides nothing), so it is taken directly: the text
        up to what the tracker holds (`JsonEnd.hold`) is region text. Where the value ended in `text`,
        `_process` runs (the tracker has read it already and reads nothing twice)."""
        sc = self.scanner
        sc.push(text)
        je = self.json_end
        je.advance(sc.text, sc.base, sc.end)
        if je.end >= 0:
            self._process(events, eos=False)
            return
        sc.stop = je.end  # (what `_decide_json_end` leaves: no end known)
        upto = sc.scan = sc.end
        hold = je.hold()
        if 0 <= hold < upto:
            upto = hold
        self._text(sc.take(upto), events)

    def feed_plain(self, text: str) -> list[dict]:
        """`feed(text)` for `text` known to hold no delimiter and to leave no attempt pending: every attempt
        pending now and every one starting in `text` ends within it without a match (with `text` empty: the
        attempts pending now end without one, so the text they hold is region text). The same events and
        state as ``feed(text)``, without stepping the automaton over `text`.

        For a caller that proved it (`chatparse.runtime.tokens.parser`: the text its token tables handed out
        from a state they track). In a whitespace-led mode (``\\s*</think>``) `feed` steps an attempt at
        every whitespace run, which this does not (see bench/PERF_NOTES.md#feed-plain). An exception leaves the
        parser failed, as in `feed`."""
        if not self.usable:
            self._check_usable()
        if self.inputs is not None and text:
            self.inputs.append(text)
        return self._feed_plain(text)

    def _feed_plain(self, text: str) -> list[dict]:
        if self.stalled or not text and self.scanner.pos == self.scanner.end:
            return []
        return self._guarded(self._plain_step, text)

    def _plain_step(self, events: list, text: str) -> None:
        # What `push`, then `take` of everything, leaves, without copying `text` into the scanner's buffer:
        # the buffer keeps only the history a later decision may read back.
        if self.json_end is not None:  # (a close_json_end region: its tracker must read the text; see `feed`)
            self._feed_step(events, text)
            return
        sc = self.scanner
        held = sc.text[sc.pos - sc.base:]  # held by the attempts pending now, which end without a match
        sc.attempts = []
        end = sc.scan = sc.pos = sc.end = sc.end + len(text)
        keep = sc.keep
        kept = text if len(text) >= keep else sc.text + text
        if len(kept) > keep:
            kept = kept[len(kept) - keep:]
        sc.text = kept
        sc.base = end - len(kept)
        self._text(held + text if held else text, events)

    def feed_decided(self, text: str, s: int, e: int, pattern_index: int, match=None,
                     plain: str | None = None) -> list[dict]:
        """`feed(text)` for a caller that knows what the scanner decides first: the delimiter ``[s, e)`` of
        pattern `pattern_index` (absolute offsets; `match` for its captures, as `decide` gives it). The
        scanner must hold nothing before `s` that is not region text. The same events and state as
        ``feed(text)``: the step `_process` takes for that delimiter, then `_process` from its end, without
        stepping the automaton up to it.

        For `chatparse.runtime.tokens.parser`, whose `TokenTablesBase.decision` ran the scanner on the same
        characters once for every parser that meets them (qwen3's ``</think>`` split over ordinary tokens).
        With `plain` (a string, maybe empty): ``feed_plain(plain)`` first, its events dropped (the caller
        handed them out already).
        An exception leaves the parser failed, as in `feed`."""
        if not self.usable:
            self._check_usable()
        if self.inputs is not None:
            self.inputs.append(plain + text if plain else text)
        if not text or self.stalled:
            if plain is not None:
                self._feed_plain(plain)
            return []
        return self._guarded(self._decided_step, text, s, e, pattern_index, match, plain)

    def _decided_step(self, events: list, text: str, s: int, e: int, pattern_index: int, match, plain) -> None:
        sc = self.scanner
        if self.json_end is not None:  # (the caller's decision did not see the JSON value's end: step instead)
            if plain is not None:
                self._plain_step(events, plain)
                events.clear()
                self.pending = []
            self._feed_step(events, text)
            return
        if plain is not None and (plain or sc.pos != sc.end):
            self._plain_step(events, plain)
            events.clear()
            self.pending = []
        sc.push(text)
        sc.attempts = []
        if self._delimiter(events, s, e, pattern_index, match, eos=False):
            self._process(events, eos=False)

    def feed_held(self, text: str, attempts: list) -> list[dict]:
        """`feed(text)` for a caller that knows the scanner decides nothing in `text` and releases none of it,
        and that its attempts afterwards are `attempts` (`TokenTablesBase.decision`'s "H"): no events, and
        the state ``feed(text)`` leaves, without stepping the automaton."""
        if not self.usable:
            self._check_usable()
        if self.inputs is not None and text:
            self.inputs.append(text)
        if not text or self.stalled:
            return []
        if self.json_end is not None:  # (a close_json_end region: its tracker must read the text)
            return self._guarded(self._feed_step, text)
        sc = self.scanner
        sc.push(text)
        sc.attempts = attempts
        sc.scan = sc.end
        return []

    def finish(self) -> tuple[dict, list[dict]]:
        self._check_usable()
        events: list[dict] = []
        try:
            if not self.stalled:
                self._process(events, eos=True)
            self._flush(events)
            self.finished = True
            self.output = final_output(self.t, self.output, self.malformed)
        except BaseException as e:
            self.failed = e
            raise
        finally:
            self.usable = False
        return self.output, events

    def apply_delimiter(self, text: str, pattern_index: int, match=None) -> list[dict]:
        """Feed `text` that is known to be exactly one whole delimiter of pattern `pattern_index` (`match`: its
        match object, or anything with ``groupdict()``, for the captures; None for none), and return the events.

        For a caller that decided the delimiter without the scanner (`chatparse.runtime.tokens.parser`: a token
        that is a whole delimiter on its own). The scanner must be quiet: everything fed so far handed out, no
        attempt pending. Then the events and the state afterwards are those of ``feed(text)``: the same step
        `_process` takes for a delimiter the scanner decides (`_delimiter`), then a flush. An exception leaves
        the parser failed, as in `feed`."""
        if not self.usable:
            self._check_usable()
        if self.inputs is not None and text:
            self.inputs.append(text)
        if not text or self.stalled:
            return []
        return self._guarded(self._delimiter_step, text, pattern_index, match)

    def _delimiter_step(self, events: list, text: str, pattern_index: int, match) -> None:
        if self.json_end is not None:  # (the value may end before this delimiter: step it instead)
            self._feed_step(events, text)
            return
        sc = self.scanner
        s = sc.end
        sc.push(text)
        sc.scan = e = sc.end
        self._delimiter(events, s, e, pattern_index, match, eos=False)

    def _guarded(self, step, *args) -> list[dict]:
        """``step(events, *args)``, then a flush; returns the events. An exception leaves the parser failed:
        later calls raise RuntimeError instead of continuing from a half-updated state."""
        events: list[dict] = []
        try:
            step(events, *args)
            self._flush(events)
        except BaseException as e:
            self.failed = e
            self.usable = False
            raise
        return events

    def _check_usable(self) -> None:
        if self.finished:
            raise RuntimeError("ResponseParser already finalized")
        if self.failed is not None:
            raise RuntimeError(f"ResponseParser failed earlier ({type(self.failed).__name__}: {self.failed}); "
                               "start a new parser") from self.failed

    # -- the loop --------------------------------------------------------------------------------------------
    def _process(self, events: list, eos: bool) -> None:
        sc = self.scanner
        while True:
            je = self.json_end
            d = sc.decide(eos) if je is None else self._decide_json_end(je, eos)
            if d is None:
                break
            s, e, pi, m = d
            if pi == JSON_END:
                self._json_close(events, s)
                continue
            if not self._delimiter(events, s, e, pi, m, eos):
                return
        if eos:
            self._text(sc.take(sc.end), events)
            self._close(events, sc.end, sc.end)
        else:
            upto = sc.safe_end()
            je = self.json_end
            if je is not None:
                hold = je.hold()  # characters that may turn out to follow the value are not body yet
                if 0 <= hold < upto:
                    upto = hold
            self._text(sc.take(upto), events)

    def _decide_json_end(self, je: JsonEnd, eos: bool):
        """`Scanner.decide` for a region that closes at the end of its JSON value (`je` tracks it): the
        scanner's delimiter (the field's explicit close) if it starts at or before the value's end, else
        ``(end, end, JSON_END, None)`` once no explicit close can start at or before it; None while either is
        unknown. (At one offset the explicit close wins: it is at least as long as the empty close.)"""
        sc = self.scanner
        je.advance(sc.text, sc.base, sc.end)
        if eos:
            je.finish()
        j = je.end
        sc.stop = j  # no delimiter that starts after the value's end matters (-1: none known yet)
        d = sc.decide(eos)
        if j < 0:
            if d is None or je.dead or d[0] <= je.lowest():
                return d
            return None  # a number's end is pending before this delimiter
        if d is not None:
            return d if d[0] <= j else (j, j, JSON_END, None)
        if eos or sc.safe_end() > j:
            return j, j, JSON_END, None
        return None

    def _json_close(self, events: list, j: int) -> None:
        """Close the open region where its JSON value ends (offset `j`, an empty span) and go on in the
        implicit field from there (`close_json_end`)."""
        sc = self.scanner
        self._text(sc.take(j), events)
        if hasattr(sc, "decided"):  # (the token parser's span scanner: this is the delimiter it closes at)
            sc.decided = (j, j, JSON_END, None)
        self._close(events, j, j)
        sc.restart(0, j)

    def _delimiter(self, events: list, s: int, e: int, pi: int, m, eos: bool) -> bool:
        """One decided delimiter ``[s, e)`` of pattern `pi` (match `m`): the text before it goes to the current
        region, then the delimiter closes that region (and an open delimiter opens its field), and the scanner
        restarts after it in the new region's mode. Returns False when the parse stalls here (a zero-width
        close of the empty implicit field, or a zero-width close right at a zero-width open, see `warn_loop`)."""
        sc = self.scanner
        self._text(sc.take(s), events)
        delim = sc.take(e)
        p = self.t.patterns[pi]
        if p.kind == "open":
            self._close(events, s, s)
            self._open(p.field, m, events, s, e)
            self.open_text, self.open_start = delim, s  # (the raw text on_error="content" recovers starts here)
            self.empty_open = s if s == e else -1
            sc.restart(1 + p.field, e)
        else:
            had = self.opened
            fi = self.current
            self.closing = delim
            self._close(events, s, e)
            if not had and s == e:
                self.stalled = True
                if e < sc.end or not eos:
                    warn_stall(s)
                return False
            if s == e == self.empty_open:
                # a zero-width close right at a zero-width open: back in the outside mode at the offset where
                # that open was decided, which decides it again, and so on forever
                self.stalled = True
                warn_loop(s, self.names[fi])
                return False
            sc.restart(0, e)
        return True

    # -- regions ---------------------------------------------------------------------------------------------
    def _text(self, text: str, events: list) -> None:
        """`text`, just handed out by the scanner (it ends at ``scanner.pos``), goes to the current region."""
        if not text or self.current is None:
            return
        if not self.opened:
            events.append(self._implicit_open(self.current, self.scanner.pos - len(text)))
            self.opened = True
        self._keep(text)
        if self.prompt_end:
            start = self.scanner.pos - len(text)
            if start < self.prompt_end:  # prompt characters held back as a possible delimiter: not a chunk
                text = text[self.prompt_end - start:]
                if not text:
                    return
        self.pending.append(text)

    def _implicit_open(self, fi: int, at: int) -> dict:
        """The ``region_open`` of the implicit field `fi`, opening on its first character at offset `at`."""
        if self.offsets:
            return {"type": "region_open", "field": self.names[fi], "start": at, "end": at}
        return {"type": "region_open", "field": self.names[fi]}

    def _keep(self, text: str) -> None:
        if text:
            self.tail.append(text)
            self.tail_len += len(text)
        if self.tail_len > 4096:
            tail = self.tail
            self.body.append(tail[0] if len(tail) == 1 else "".join(tail))
            self.tail = []
            self.tail_len = 0

    def _flush(self, events: list) -> None:
        if self.pending:
            fi = self.current
            text = self.pending[0] if len(self.pending) == 1 else "".join(self.pending)
            events.append({"type": "region_chunk", "field": self.t.fields[fi]["name"], "text": text,
                           "dirty": self.t.dirty[fi]})
            self.pending = []

    def _open(self, fi: int, m, events: list, s: int, e: int) -> None:
        """Open field `fi` at its delimiter ``[s, e)`` (match `m`, for the captures)."""
        self.current = fi
        self.captures = captures_of(m)
        self.body, self.tail, self.tail_len = [], [], 0
        self.opened = True
        if self.json_ends[fi]:
            self.json_end = JsonEnd(e)
        if self.offsets:
            events.append({"type": "region_open", "field": self.names[fi], "start": s, "end": e,
                           "captures": self.captures})
        else:
            events.append({"type": "region_open", "field": self.names[fi]})

    def _close_event(self, name: str, s: int, e: int, value) -> dict:
        if self.offsets:
            return {"type": "region_close", "field": name, "start": s, "end": e, "value": value}
        return {"type": "region_close", "field": name, "value": value}

    def _malformed_event(self, events: list, name: str, s: int, e: int, error: Exception) -> None:
        if self.malformed is None:
            self.malformed = set()
        self.malformed.add(name)
        ev = {"type": "region_malformed", "field": name}
        if self.offsets:
            ev["start"], ev["end"] = s, e
        ev["error"] = error
        events.append(ev)

    def _close(self, events: list, s: int, e: int) -> None:
        """Close the current region at ``[s, e)`` (its close delimiter, or an empty span), store its value,
        and go back to the implicit field. With `recover` (malformed="event"), a value that fails to parse
        ends the region with a ``region_malformed`` event instead of raising."""
        fi = self.current
        if fi is not None and self.opened:
            self._flush(events)
            name = self.names[fi]
            body = "".join(self.body + self.tail)
            if self.recover or self.on_errors[fi] is not None:
                try:
                    value = self.stores[fi](self.output, body, self.captures, self.tool_params)
                except (KeyError, TypeError, ValueError) as error:
                    self._failed_value(events, fi, body, s, e, error)
                else:
                    events.append(self._close_event(name, s, e, value))
            else:
                value = self.stores[fi](self.output, body, self.captures, self.tool_params)
                events.append(self._close_event(name, s, e, value))
        self.current = self.t.implicit
        self.captures = {}
        self.body, self.tail, self.tail_len = [], [], 0
        self.opened = False
        self.json_end = None
        self.closing = ""

    def _failed_value(self, events: list, fi: int, body: str, s: int, e: int, error: Exception) -> None:
        """The value of field `fi`'s region (raw `body`, closed at ``[s, e)``) raised `error`: recovered as its
        ``on_error`` says (runtime/values/recovery.py), else a ``region_malformed`` event where the dialect asks for
        one (`recover`), else the error propagates."""
        mode = self.on_errors[fi]
        if mode is not None:
            try:
                recover_region(self, events, fi, mode, body, s, e, error)
                return
            except (KeyError, TypeError, ValueError):
                pass  # the recovered text failed in the implicit field too: as without on_error
        if not self.recover:
            raise error
        self._malformed_event(events, self.names[fi], s, e, error)
