"""Columnar parsing: pyarrow tables and record batches of generations in, typed message columns out.

`parse_arrow(data, template, text_column="text", prefix=... | prefix_column=...)` parses every row of a text
column on the one-shot path (each row is exactly ``CompiledTemplate.parse``, the call `parse_batch` makes per
row) and returns the messages as columns (`MESSAGE_SCHEMA`):

* ``role``, ``reasoning_content``, ``content``: string, null where the message has no such key;
* ``tool_calls``: list<struct<name, arguments, type, id>> (all strings), null where the message has no
  ``tool_calls`` key; ``arguments`` is the JSON text of the call's arguments value (``json.loads`` gives it
  back), ``type`` / ``id`` are null where the call has no such key;
* ``extra``: JSON text of an object holding every part of the message the typed columns cannot hold
  exactly, null when there is none: message keys other than the four above, a ``role`` /
  ``reasoning_content`` / ``content`` that is not a string, and a ``tool_calls`` value that is not a list of
  ``{"type"?: str, "id"?: str, "function": {"name": str, "arguments": ...}}`` (then the whole list is here,
  under ``tool_calls``, and the ``tool_calls`` column is null). Nothing a template produces is dropped:
  `to_messages` rebuilds each message dict exactly;
* ``error``: ``"ClassName: message"`` of the exception the row's parse raised (then every other column of
  the row is null), null for rows that parsed. A bad row never raises out of the batch.

`parse_arrow_tokens(data, binding, ids_column="ids", ...)` does the same from a list<int> column of token ids
with a `chatparse.bind(...)` binding (each row is exactly ``binding.parse``, as `parse_tokens_batch`).

`compiled_of(x)` turns what users pass as a template into a `CompiledTemplate`; `table_bytes(x)` gives the
table-format bytes that worker processes load (parse-file's workers, `chatparse.integrations.ray`).

Tables give a table, record batches give a record batch. ``keep_columns=True`` returns the input's columns
followed by the message columns (``column_prefix`` renames the latter, for inputs that already have a
``content`` column). Python objects per row are only the row's text (the parser takes a `str`) and its
message; the columns are built from the messages of 1024 rows at a time: by the native module
(`chatparse.data._message_columns`, built by pip where a C compiler is) in one pass for the usual messages, else
column by column with C-level iteration (one JSON encoding per tool call), with a row-by-row builder for
messages of other shapes. ``NATIVE`` says whether the module is built; the arrays are the same either way.
"""

from __future__ import annotations

import json
import re
from functools import partial
from itertools import accumulate, chain, compress, repeat
from operator import add, eq, is_, is_not, not_, sub
from typing import Any

try:
    import pyarrow as pa
except ImportError as e:  # pragma: no cover - the error says what to install
    raise ImportError("chatparse.data.arrow needs pyarrow: pip install 'chatparse[data]'") from e

from ..compiled import CompiledTemplate, compile_template
from ..runtime.stream.collector import collector_paused

__all__ = ["MESSAGE_SCHEMA", "NATIVE", "TOOL_CALL_TYPE", "compiled_of", "error_of", "parse_arrow", "parse_arrow_tokens",
           "table_bytes", "to_messages"]

TOOL_CALL_TYPE = pa.struct([("name", pa.string()), ("arguments", pa.string()), ("type", pa.string()),
                            ("id", pa.string())])
MESSAGE_SCHEMA = pa.schema([
    ("role", pa.string()),
    ("reasoning_content", pa.string()),
    ("content", pa.string()),
    ("tool_calls", pa.list_(TOOL_CALL_TYPE)),
    ("extra", pa.string()),
    ("error", pa.string()),
])
_TEXT_KEYS = ("role", "reasoning_content", "content")
_CALL_KEYS = frozenset(("type", "id", "function"))
_KNOWN = frozenset(("role", "reasoning_content", "content", "tool_calls"))
_EXTRA_JSON = json.JSONEncoder(ensure_ascii=False, default=repr).encode  # (messages are JSON data)


def _not_json(value):
    raise TypeError(f"{type(value).__name__} is not JSON data")


def _args_encoder():
    """The strict JSON text of a call's arguments (``json.dumps(v, ensure_ascii=False, allow_nan=False)``,
    exactly): the C encoder made once, where ``JSONEncoder.encode`` makes one per call (half its time on
    ~100-byte arguments). No circular-reference check: parsed values are trees (a cycle would raise
    RecursionError, which `_Columns._calls` treats like any value it cannot encode). Returns the function
    and the raw C encoder (``encode(value, 0)`` gives the text's chunks; None without the C module)."""
    try:
        from _json import encode_basestring, make_encoder
    except ImportError:  # pragma: no cover - CPython has the C encoder
        return json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode, None
    encode = make_encoder(None, _not_json, encode_basestring, None, ": ", ", ", False, False, False)
    return (lambda value: "".join(encode(value, 0))), encode


_ARGS_JSON, _ARGS_CHUNKS = _args_encoder()

try:  # the native spelling of `_typed_arrays` (chatparse/data/_message_columns.c), built by pip where a compiler is
    from ._message_columns import typed_columns as _native_columns
except ImportError:  # pragma: no cover - the Python spelling gives the same arrays
    _native_columns = None
NATIVE = _native_columns is not None
_use_native = NATIVE  # (False: `_typed_arrays` takes the Python spelling; tests and the bench switch it)


def error_of(exc: BaseException) -> str:
    """The ``error`` column's text for an exception: ``"ClassName: message"``."""
    return f"{type(exc).__name__}: {exc}"


# ------------------------------------------------------------------------------------------------ inputs
def _column(data, name: str, what: str):
    """Column `name` of a table / record batch, or an error naming it and the columns there are."""
    if not isinstance(name, str):
        raise TypeError(f"`{what}` must be a column name (str), got {type(name).__name__}")
    names = data.schema.names
    if name not in names:
        raise KeyError(f"`{what}`: no column {name!r} in the input (its columns: {names})")
    return data.column(name)


def _strings(data, name: str, what: str) -> list:
    col = _column(data, name, what)
    t = col.type
    if pa.types.is_dictionary(t):
        col, t = col.cast(t.value_type), t.value_type
    if not (pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view",
                                                                                    lambda _: False)(t)
            or pa.types.is_null(t)):
        raise TypeError(f"`{what}`: column {name!r} must hold strings, it holds {t}")
    return col.to_pylist()


def _check_data(data) -> None:
    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(f"expected a pyarrow Table or RecordBatch, got {type(data).__name__}")


def _prefixes(data, n: int, prefix, prefix_column) -> list:
    if prefix_column is not None:
        if prefix is not None:
            raise ValueError("pass either `prefix` (one for all rows) or `prefix_column`, not both")
        return _strings(data, prefix_column, "prefix_column")
    if prefix is None:
        raise ValueError('parse_arrow requires `prefix` (the chat prompt, one for all rows) or `prefix_column` '
                         '(one per row), because chat templates often pre-write part of the assistant message; '
                         'pass prefix="" to opt out explicitly')
    if not isinstance(prefix, str):
        raise TypeError(f"`prefix` must be a string, got {type(prefix).__name__} (use `prefix_column` for one "
                        "prefix per row)")
    return [prefix] * n


def _tools(data, n: int, tools, tools_column) -> list:
    """Per row: a tools list, None, or an exception to report for that row."""
    if tools_column is None:
        return [tools] * n
    if tools is not None:
        raise ValueError("pass either `tools` (one list for all rows) or `tools_column`, not both")
    col = _column(data, tools_column, "tools_column")
    t = col.type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        seen: dict = {}
        out = []
        for i, s in enumerate(col.to_pylist()):
            if s is None:
                out.append(None)
                continue
            v = seen.get(s)
            if v is None:
                try:
                    v = json.loads(s)
                    if not isinstance(v, list):
                        raise ValueError(f"expected a JSON list of tool schemas, got {type(v).__name__}")
                except ValueError as e:
                    v = ValueError(f"`tools_column` {tools_column!r}: row {i}: {e}")
                seen[s] = v
            out.append(v)
        return out
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return col.to_pylist()
    raise TypeError(f"`tools_column`: column {tools_column!r} must hold JSON text or a list of tool schemas, "
                    f"it holds {t}")


# ------------------------------------------------------------------------------------------------ outputs
class _Columns:
    """The message columns, built row by row from plain lists (`add`, `fail`), then made arrays (`arrays`).

    `add` takes the usual message (string role / reasoning_content / content, a list of well-formed calls,
    no other key) with type checks only and one C-encoder call per call's arguments; anything else goes
    through `_add_general`, which keeps it exactly in ``extra``. A string Arrow cannot hold (a lone
    surrogate, which a JSON ``\\ud800`` escape gives) is found only when the arrays fail to build, and then
    moved or escaped row by row (`_repair`): the usual batch pays nothing for it."""

    def __init__(self):
        self.role: list = []
        self.reasoning: list = []
        self.content: list = []
        self.extra: list = []
        self.error: list = []
        self.calls_valid: list = []  # per row: has a tool_calls list in the column
        self.offsets = [0]
        self.name: list = []
        self.arguments: list = []
        self.type: list = []
        self.id: list = []

    def fail(self, error: str) -> None:
        self.role.append(None)
        self.reasoning.append(None)
        self.content.append(None)
        self.extra.append(None)
        self.error.append(error)
        self.calls_valid.append(False)
        self.offsets.append(self.offsets[-1])

    def add(self, message: dict) -> None:
        if type(message) is dict and len(message) <= 4 and _KNOWN.issuperset(message):
            get = message.get
            role, reasoning, content, calls = get("role"), get("reasoning_content"), get("content"), get("tool_calls")
            if ((type(role) is str or role is None and "role" not in message)
                    and (type(reasoning) is str or reasoning is None and "reasoning_content" not in message)
                    and (type(content) is str or content is None and "content" not in message)
                    and (calls is None and "tool_calls" not in message or self._calls(calls))):
                self.role.append(role)
                self.reasoning.append(reasoning)
                self.content.append(content)
                self.calls_valid.append(calls is not None)
                self.offsets.append(len(self.name))
                self.extra.append(None)
                self.error.append(None)
                return
        self._add_general(message)

    def _add_general(self, message) -> None:
        if type(message) is not dict:  # never from a parser; reported, not guessed at
            self.fail(error_of(TypeError(f"the parser returned a {type(message).__name__}, not a message dict")))
            return
        extra = None
        texts = []
        for key in _TEXT_KEYS:
            v = message.get(key)
            if v is not None and type(v) is not str or v is None and key in message:
                extra = extra or {}
                extra[key] = v
                v = None
            texts.append(v)
        self.role.append(texts[0])
        self.reasoning.append(texts[1])
        self.content.append(texts[2])
        calls = message.get("tool_calls")
        typed = False
        if "tool_calls" in message:
            typed = self._calls(calls)
            if not typed:
                extra = extra or {}
                extra["tool_calls"] = calls
        self.calls_valid.append(typed)
        self.offsets.append(len(self.name))
        for k, v in message.items():
            if k not in _KNOWN:
                extra = extra or {}
                extra[k] = v
        self.extra.append(None if extra is None else _EXTRA_JSON(extra))
        self.error.append(None)

    def _calls(self, calls) -> bool:
        """Append the calls to the struct lists if every one fits the struct exactly; else append nothing."""
        if type(calls) is not list:
            return False
        name, arguments, types, ids = self.name, self.arguments, self.type, self.id
        start = len(name)
        for c in calls:
            if type(c) is not dict or "function" not in c or len(c) > 3 or not _CALL_KEYS.issuperset(c):
                break
            f = c["function"]
            if type(f) is not dict or len(f) != 2 or "name" not in f or "arguments" not in f:
                break
            fname, ty, cid = f["name"], c.get("type"), c.get("id")
            if type(fname) is not str or ("type" in c and type(ty) is not str) or ("id" in c and type(cid) is not str):
                break
            try:
                args = _ARGS_JSON(f["arguments"])
            except (TypeError, ValueError, RecursionError):
                break
            name.append(fname)
            arguments.append(args)
            types.append(ty)
            ids.append(cid)
        else:
            return True
        del name[start:], arguments[start:], types[start:], ids[start:]
        return False

    def arrays(self) -> list:
        try:
            return self._arrays()
        except UnicodeEncodeError:  # a lone surrogate somewhere (never in text that came from Arrow)
            self._repair()
            return self._arrays()

    def _arrays(self) -> list:
        s = pa.string()
        structs = pa.StructArray.from_arrays(
            [pa.array(self.name, s), pa.array(self.arguments, s), pa.array(self.type, s), pa.array(self.id, s)],
            fields=list(TOOL_CALL_TYPE))
        mask = pa.array([not v for v in self.calls_valid], pa.bool_())
        calls = pa.ListArray.from_arrays(pa.array(self.offsets, pa.int32()), structs, mask=mask,
                                         type=pa.list_(TOOL_CALL_TYPE))
        return [pa.array(self.role, s), pa.array(self.reasoning, s), pa.array(self.content, s), calls,
                pa.array(self.extra, s), pa.array(self.error, s)]

    def _repair(self) -> None:
        """Make every string UTF-8 encodable, keeping each message exact: JSON text (arguments, extra) gets
        its lone surrogates as ``\\uXXXX`` escapes (they can only be inside its string literals, and
        json.loads gives them back); a role / reasoning_content / content, or a call's name / type / id,
        holding one moves to ``extra`` (the whole tool_calls list for a call's); an error text gets them as
        backslash escapes (it is for people)."""
        for i in range(len(self.role)):
            if self.error[i] is not None:
                if not _encodable(self.error[i]):
                    self.error[i] = self.error[i].encode("utf-8", "backslashreplace").decode("utf-8")
                continue
            moved = {}
            for col, key in ((self.role, "role"), (self.reasoning, "reasoning_content"), (self.content, "content")):
                if col[i] is not None and not _encodable(col[i]):
                    moved[key], col[i] = col[i], None
            lo, hi = self.offsets[i], self.offsets[i + 1]
            for j in range(lo, hi):
                if not _encodable(self.arguments[j]):
                    self.arguments[j] = _escape_surrogates(self.arguments[j])
            if self.calls_valid[i] and not all(x is None or _encodable(x) for col in (self.name, self.type, self.id)
                                               for x in col[lo:hi]):
                moved["tool_calls"] = [_call({"name": self.name[j], "arguments": self.arguments[j],
                                              "type": self.type[j], "id": self.id[j]}) for j in range(lo, hi)]
                for col in (self.name, self.arguments, self.type, self.id):
                    del col[lo:hi]
                self.offsets[i + 1:] = [o - (hi - lo) for o in self.offsets[i + 1:]]
                self.calls_valid[i] = False
            if moved:
                extra = json.loads(self.extra[i]) if self.extra[i] is not None else {}
                extra.update(moved)
                self.extra[i] = _EXTRA_JSON(extra)
            if self.extra[i] is not None and not _encodable(self.extra[i]):
                self.extra[i] = _escape_surrogates(self.extra[i])


_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(s: str) -> bool:
    return s.isascii() or _SURROGATE.search(s) is None


def _escape_surrogates(json_text: str) -> str:
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json_text)


_FAILED: dict = {}  # the message list's entry for a row that raised (its text is in the error list)
_DICT = frozenset((dict,))
_STR = frozenset((str,))
_STR_OR_NONE = frozenset((str, type(None)))
_LIST_OR_NONE = frozenset((list, type(None)))


def _message_parts(messages: list, errors: list, out: list) -> None:
    """Append to `out` the `MESSAGE_SCHEMA` arrays of a batch (one list or more, for consecutive rows): per row the
    parser's message, or `_FAILED` where `errors` holds the row's error text (else None). `_typed_arrays` when every
    message fits the typed columns exactly, or differs only by a call of another shape. Else the rows whose shape
    does not fit (`_fits`: another key, a None or non-string text) go row by row through `_Columns`, and the runs of
    rows between them column by column again; a run that still does not (a value with no strict JSON text, a lone
    surrogate) is halved, down to 32 rows, which go row by row (`_Columns` also repairs strings Arrow cannot hold).
    So one odd message costs its own row, not a re-check of the halves around it at every level."""
    arrays = _typed_arrays(messages, errors)
    if arrays is not None:
        out.append(arrays)
        return
    n = len(messages)
    if n <= 32:
        _rowwise_parts(messages, errors, out)
        return
    fits = list(map(_fits, messages))
    if all(fits):
        half = n // 2
        _message_parts(messages[:half], errors[:half], out)
        _message_parts(messages[half:], errors[half:], out)
        return
    lo = 0
    while lo < n:  # runs of rows that fit (long enough to be worth their own arrays), and what lies between
        hi = lo
        if fits[lo]:
            while hi < n and fits[hi]:
                hi += 1
            if hi - lo >= 32:
                _message_parts(messages[lo:hi], errors[lo:hi], out)
                lo = hi
                continue
        while hi < n and not (fits[hi] and all(fits[hi:hi + 32])):
            hi += 1
        _rowwise_parts(messages[lo:hi], errors[lo:hi], out)
        lo = hi


def _rowwise_parts(messages: list, errors: list, out: list) -> None:
    cols = _Columns()
    for message, error in zip(messages, errors):
        if error is None:
            cols.add(message)
        else:
            cols.fail(error)
    out.append(cols.arrays())


def _fits(message) -> bool:
    """Whether `message` has the shape `_typed_arrays` takes: a dict of string role / reasoning_content /
    content and a list of calls that `_call_fits`, no other key, no None value (whether the arguments have
    strict JSON text and the strings UTF-8 is left to `_typed_arrays`). Python steps per row: only for
    batches the column-by-column check refused for a reason other than a call's shape."""
    if type(message) is not dict:
        return False
    for key, value in message.items():
        if key == "tool_calls":
            if type(value) is not list or not all(map(_call_fits, value)):
                return False
        elif key not in _TEXT_KEYS or type(value) is not str:
            return False
    return True


def _call_fits(c) -> bool:
    """Whether a call has the struct's shape: ``{"type"?: str, "id"?: str, "function": {"name": str,
    "arguments": ...}}`` (`_Columns._calls` less the arguments' JSON text)."""
    if type(c) is not dict or not _CALL_KEYS.issuperset(c) or "function" not in c:
        return False
    f = c["function"]
    return (type(f) is dict and len(f) == 2 and type(f.get("name")) is str and "arguments" in f
            and all(type(c[k]) is str for k in c if k != "function"))  # type / id


def _call_columns(calls: list):
    """``(functions, types, ids, names)`` of the calls, where every call and every call's ``function`` is a dict
    (else None): the columns `_typed_arrays` builds from and checks with `_call_fit_flags`."""
    get = dict.get
    if not _DICT.issuperset(map(type, calls)):
        return None
    functions = list(map(get, calls, repeat("function")))  # (a call without "function" gives None)
    if not _DICT.issuperset(map(type, functions)):
        return None
    return (functions, list(map(get, calls, repeat("type"))), list(map(get, calls, repeat("id"))),
            list(map(get, functions, repeat("name"))))


def _call_fit_flags(calls: list, functions: list, types: list, ids: list, names: list):
    """Per call, `_call_fits` given `_call_columns` (an iterator of bools), by C-level passes: the call has as
    many keys as "function" (there: its value is a dict) and the non-None values of type and id (so no other
    key, and no type or id holding None), type and id are str or absent, the function is exactly a str name
    and arguments."""
    expected = map(sub, repeat(3), map(add, map(is_, types, repeat(None)), map(is_, ids, repeat(None))))
    return map(all, zip(map(eq, map(len, calls), expected),
                        map(_STR_OR_NONE.__contains__, map(type, types)),
                        map(_STR_OR_NONE.__contains__, map(type, ids)),
                        map(_STR.__contains__, map(type, names)), map(eq, map(len, functions), repeat(2)),
                        map(dict.__contains__, functions, repeat("arguments"))))


def _typed_arrays(messages: list, errors: list):
    """The arrays `_Columns` gives, or None where it might not give these (then the caller goes row by
    row): every message a dict of string role / reasoning_content / content and a list of
    ``{"type"?: str, "id"?: str, "function": {"name": str, "arguments": JSON data}}``, no other key, no
    None value; every string UTF-8 encodable. The native module builds the usual batch's buffers in one
    pass (`_native_arrays`); otherwise, and where it declines, they are checked and built column by column
    with C-level iteration (map, sets, counts) instead of Python steps per row; only the arguments' JSON
    text is made per call. A row whose calls do not all have that shape (a generated key inside a malformed
    call, about one row in 2,000 of bench/datasets_gen.py's mix, in half the chunks) has its whole list in
    ``extra``, as `_Columns` puts it, without leaving this way: the per-call flags (`_call_fit_flags`) find
    it, and the other rows' calls are kept from the columns already made."""
    if _use_native:
        arrays = _native_arrays(messages, errors)
        if arrays is not None:
            return arrays
    if _ARGS_CHUNKS is None or not _DICT.issuperset(map(type, messages)):
        return None
    get, n = dict.get, len(messages)
    role, reasoning, content, row_calls = (list(map(get, messages, repeat(k))) for k in
                                           ("role", "reasoning_content", "content", "tool_calls"))
    present = 4 * n - role.count(None) - reasoning.count(None) - content.count(None) - row_calls.count(None)
    if (sum(map(len, messages)) != present  # a key besides the four, or one holding None
            or not (_STR_OR_NONE.issuperset(map(type, role)) and _STR_OR_NONE.issuperset(map(type, reasoning))
                    and _STR_OR_NONE.issuperset(map(type, content))
                    and _LIST_OR_NONE.issuperset(map(type, row_calls)))):
        return None
    calls = list(chain.from_iterable(filter(None, row_calls)))
    columns = _call_columns(calls)
    fits = list(map(_call_fits, calls) if columns is None else _call_fit_flags(calls, *columns))
    extra = None
    if not all(fits):  # some row has a call of another shape: its whole list goes to `extra`, as in _Columns
        counts = [0 if c is None else len(c) for c in row_calls]
        owners = list(chain.from_iterable(map(repeat, range(n), counts)))
        extra = [None] * n
        for i in set(compress(owners, map(not_, fits))):
            extra[i] = _EXTRA_JSON({"tool_calls": row_calls[i]})
            row_calls[i] = None
        keep = list(map(is_not, map(row_calls.__getitem__, owners), repeat(None)))  # calls of the rows kept
        calls = list(compress(calls, keep))
        if columns is None:
            columns = _call_columns(calls)
            if columns is None:  # (cannot happen: every call left fits)
                return None
        else:
            columns = [list(compress(col, keep)) for col in columns]
    functions, types, ids, names = columns
    s = pa.string()
    try:
        arguments = list(map("".join, map(_ARGS_CHUNKS, map(get, functions, repeat("arguments")), repeat(0))))
        structs = pa.StructArray.from_arrays(
            [pa.array(names, s), pa.array(arguments, s), pa.array(types, s), pa.array(ids, s)],
            fields=list(TOOL_CALL_TYPE))
        offsets = list(accumulate([0 if c is None else len(c) for c in row_calls], initial=0))
        mask = pa.array([c is None for c in row_calls], pa.bool_())
        tool_calls = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), structs, mask=mask,
                                              type=pa.list_(TOOL_CALL_TYPE))
        return [pa.array(role, s), pa.array(reasoning, s), pa.array(content, s), tool_calls,
                pa.nulls(n, s) if extra is None else pa.array(extra, s), pa.array(errors, s)]
    except (TypeError, ValueError, RecursionError, UnicodeEncodeError):  # arguments `_Columns` keeps in
        return None  # ``extra``, a lone surrogate somewhere: row by row


_TOOL_CALLS_TYPE = pa.list_(TOOL_CALL_TYPE)


def _string_array(rows: int, parts: tuple):
    valid, offsets, data, nulls = parts
    return pa.Array.from_buffers(pa.string(), rows, [None if valid is None else pa.py_buffer(valid),
                                                     pa.py_buffer(offsets), pa.py_buffer(data)], null_count=nulls)


def _native_arrays(messages: list, errors: list):
    """`_typed_arrays`' arrays from the buffers the native module builds (`_message_columns.typed_columns`,
    whose source says what it takes), or None where it declines the batch: any message or value outside the
    usual shape but a call of another shape, which the Python spelling then takes as before. The same arrays, about
    five times sooner on short rows (bench/PERF_NOTES.md#message-columns)."""
    got = _native_columns(messages, errors, _ARGS_JSON)
    if got is None:
        return None
    role, reasoning, content, error, (valid, offsets, nulls), name, arguments, types, ids, odd = got
    n, calls = len(messages), len(name[1]) // 4 - 1
    extra = pa.nulls(n, pa.string())
    if odd:  # rows with a call of another shape: the whole list in ``extra``, as `_Columns` puts it
        texts = [None] * n
        for i in odd:
            texts[i] = _EXTRA_JSON({"tool_calls": messages[i]["tool_calls"]})
        try:
            extra = pa.array(texts, pa.string())
        except UnicodeEncodeError:  # (a lone surrogate: the Python spelling takes the batch, and goes row by row)
            return None
    structs = pa.StructArray.from_arrays([_string_array(calls, c) for c in (name, arguments, types, ids)],
                                         fields=list(TOOL_CALL_TYPE))
    tool_calls = pa.Array.from_buffers(_TOOL_CALLS_TYPE, n, [None if valid is None else pa.py_buffer(valid),
                                                             pa.py_buffer(offsets)], null_count=nulls,
                                       children=[structs])
    return [_string_array(n, role), _string_array(n, reasoning), _string_array(n, content), tool_calls, extra,
            _string_array(n, error)]


_CHUNK = 1024  # rows whose messages are held at once (then made columns and dropped)


def _parse_rows(parse_row, *columns) -> list:
    """The `MESSAGE_SCHEMA` columns, each a list of arrays (consecutive rows), of ``parse_row(*row)`` over
    the rows of the lists `columns`, a row that raises reported in its ``error`` and never lost with the
    batch. Chunks of `_CHUNK` rows: the messages of one are held, made columns, dropped, with the garbage
    collector paused (`runtime.collector.collector_paused`)."""
    parts: list = []
    for lo in range(0, len(columns[0]), _CHUNK):
        with collector_paused():
            _chunk_parts(parse_row, [c[lo:lo + _CHUNK] for c in columns], parts)
    if not parts:
        parts.append([pa.array([], f.type) for f in MESSAGE_SCHEMA])
    return [list(column) for column in zip(*parts)]


def _chunk_parts(parse_row, columns: list, out: list) -> None:
    messages: list = []
    errors: list = [None] * len(columns[0])
    append = messages.append
    for row in zip(*columns):
        try:
            message = parse_row(*row)
        except Exception as e:  # noqa: BLE001 - a bad row is reported in its row, never lost with the batch
            errors[len(messages)] = error_of(e)
            message = _FAILED
        append(message)
    _message_parts(messages, errors, out)  # (the messages die here, before the collector is back)


def _result(data, columns: list, keep_columns: bool, column_prefix: str):
    """The output: `columns` (from `_parse_rows`), each made one array (a table of many small chunks costs
    its readers per chunk: Ray's serializer of a 4096-row batch's 27 chunks, 7.8 ms against 0.4 ms)."""
    arrays = [chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks) for chunks in columns]
    if isinstance(data, pa.Table):
        arrays = [pa.chunked_array([a]) for a in arrays]
    fields = [f.with_name(column_prefix + f.name) for f in MESSAGE_SCHEMA]
    if keep_columns:
        taken = set(data.schema.names)
        clash = [f.name for f in fields if f.name in taken]
        if clash:
            raise ValueError(f"keep_columns: the input already has column(s) {clash}; pass column_prefix= "
                             "(e.g. 'parsed_') to name the message columns apart")
        fields = list(data.schema) + fields
        arrays = list(data.columns) + arrays
    schema = pa.schema(fields)
    if isinstance(data, pa.Table):
        return pa.Table.from_arrays(arrays, schema=schema)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


# ------------------------------------------------------------------------------------------------ entry points
def parse_arrow(data, template: Any, *, text_column: str = "text", prefix: str | None = None,
                prefix_column: str | None = None, tools=None, tools_column: str | None = None,
                keep_columns: bool = False, column_prefix: str = "", dialect=None, malformed: str | None = None):
    """Parse the `text_column` of a pyarrow Table / RecordBatch with `template` (anything `compiled_of`
    takes: a `CompiledTemplate`, a template dict, a bundled template's name, table bytes, a file). The prompt is `prefix` (one for all rows; ""
    opts out) or `prefix_column` (one per row); tools are `tools` (one list for all rows) or
    `tools_column` (JSON text of a list of tool schemas, or a list column; null: none). ``dialect`` /
    ``malformed`` as for `chatparse.parse_response`. Returns `MESSAGE_SCHEMA` columns (see the module)."""
    _check_data(data)
    compiled = _compiled(template)
    n = data.num_rows
    texts = _strings(data, text_column, "text_column")
    prefixes = _prefixes(data, n, prefix, prefix_column)
    row_tools = _tools(data, n, tools, tools_column)
    if dialect is None and malformed is None:  # what CompiledTemplate.parse calls then, without its layer
        from ..compiled import parse_compiled
    else:
        def parse_compiled(compiled, text, p, t):
            return compiled.parse(text, prefix=p, tools=t, dialect=dialect, malformed=malformed)
    if None not in texts and not any(map(isinstance, row_tools, repeat(Exception))):
        parse_row = partial(parse_compiled, compiled)  # (no Python frame of its own per row)
    else:
        def parse_row(text, p, t):
            if text is None:
                raise ValueError(f"`text_column` {text_column!r} is null in this row")
            if isinstance(t, Exception):
                raise t
            return parse_compiled(compiled, text, p, t)
    return _result(data, _parse_rows(parse_row, texts, prefixes, row_tools), keep_columns, column_prefix)


def parse_arrow_tokens(data, binding, *, ids_column: str = "ids", prefix: str | None = None,
                       prefix_column: str | None = None, prefix_ids=None, prefix_ids_column: str | None = None,
                       tools=None, tools_column: str | None = None, keep_columns: bool = False,
                       column_prefix: str = "", dialect=None, malformed: str | None = None):
    """`parse_arrow` from a list<int> column of generated token ids, with a `chatparse.bind(...)` binding
    (or a `CompiledTemplate` carrying token tables). The prompt is text (`prefix` / `prefix_column`) or ids
    (`prefix_ids` / `prefix_ids_column`), one for all rows or one per row."""
    import numpy as np

    from ..runtime.tokens.binding import TokenBinding, token_binding

    _check_data(data)
    if isinstance(binding, CompiledTemplate):
        binding = token_binding(binding)
    if not isinstance(binding, TokenBinding):
        raise TypeError(f"`binding` must be a chatparse.bind(...) binding, got {type(binding).__name__}")
    n = data.num_rows
    ids = _id_rows(data, ids_column, "ids_column")
    given = [x is not None for x in (prefix, prefix_column, prefix_ids, prefix_ids_column)]
    if sum(given) > 1:
        raise ValueError("pass one of `prefix`, `prefix_column`, `prefix_ids`, `prefix_ids_column`")
    if prefix_ids_column is not None:
        pid = _id_rows(data, prefix_ids_column, "prefix_ids_column")
        text_prefix = [None] * n
    elif prefix_ids is not None:
        shared = np.asarray(prefix_ids).reshape(-1)
        pid = [shared] * n
        text_prefix = [None] * n
    else:
        pid = [None] * n
        text_prefix = _prefixes(data, n, prefix, prefix_column)
    row_tools = _tools(data, n, tools, tools_column)
    parse = binding.parse

    def parse_row(seq, text_prefix, prefix_ids, t):
        if seq is None:
            raise ValueError(f"`ids_column` {ids_column!r} is null in this row")
        if isinstance(t, Exception):
            raise t
        if prefix_ids is None and prefix_ids_column is not None:
            raise ValueError(f"`prefix_ids_column` {prefix_ids_column!r} is null in this row")
        return parse(seq, prefix=text_prefix, prefix_ids=prefix_ids, tools=t, dialect=dialect, malformed=malformed)

    return _result(data, _parse_rows(parse_row, ids, text_prefix, pid, row_tools), keep_columns, column_prefix)


def _id_rows(data, name: str, what: str) -> list:
    """Per row: a numpy view of its ids (no Python int per token), or None for a null row."""
    col = _column(data, name, what)
    t = col.type
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)) or not pa.types.is_integer(t.value_type):
        raise TypeError(f"`{what}`: column {name!r} must be a list of integers, it holds {t}")
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    out: list = []
    for chunk in chunks:
        offsets = chunk.offsets.to_numpy()
        values = chunk.values.to_numpy(zero_copy_only=False)
        valid = chunk.is_valid().to_numpy(zero_copy_only=False)
        for i in range(len(chunk)):
            out.append(values[offsets[i]:offsets[i + 1]] if valid[i] else None)
    return out


def compiled_of(template: Any, what: str = "template") -> CompiledTemplate:
    """A `CompiledTemplate` from what users pass as a template: a `CompiledTemplate`, a template dict, the
    name of a bundled template, table-format bytes (`table_bytes`), or a path: a tokenizer directory
    (`chatparse.tokenizer_dir.load_dir`), a table file (.cpt), or a JSON file holding a response template or a
    tokenizer_config.json with a ``response_template`` key. Errors name `what`."""
    import os
    from pathlib import Path

    if isinstance(template, (bytes, bytearray, memoryview)):
        from ..runtime.tables.loader import compiled_from_bytes

        try:
            return compiled_from_bytes(bytes(template))
        except ValueError as e:
            raise ValueError(f"`{what}`: not valid table-format bytes: {e}") from None
    if isinstance(template, (str, os.PathLike)):
        from .. import templates

        if templates.is_name(template):
            return compile_template(templates.by_name(template))
        path = Path(template)
        if path.is_dir():
            from ..tokenizer_dir import load_dir

            return load_dir(path)
        if path.is_file():
            if path.suffix == ".cpt":
                from ..runtime.tables.loader import load

                raw = load(path)
                return CompiledTemplate(raw["template"], raw)
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as e:
                raise ValueError(f"`{what}`: {path} is not JSON: {e}") from None
            if isinstance(obj, dict) and "response_template" in obj:
                obj = obj["response_template"]
            try:
                return compile_template(obj)
            except (TypeError, ValueError) as e:
                raise ValueError(f"`{what}`: {path}: {e}") from None
        raise ValueError(f"`{what}`: {str(template)!r} is neither a bundled template ({', '.join(templates.names())})"
                         " nor an existing file or tokenizer directory")
    return compile_template(template)


_compiled = compiled_of


def table_bytes(template: Any) -> bytes:
    """The table-format bytes of `template` (anything `compiled_of` takes): what worker processes load the
    compiled tables from (`compiled_of(bytes)`), with no pickle of Python objects. Token tables stay out."""
    from ..compiler.writer import dumps

    compiled = compiled_of(template)
    try:
        return dumps(compiled.raw_tables, js=False, tokens=False)
    except ValueError as e:
        raise ValueError(f"`template`: the table format cannot hold this template ({e})") from None


# ------------------------------------------------------------------------------------------------ back to dicts
def to_messages(parsed, *, column_prefix: str = "") -> list:
    """The rows of `parse_arrow`'s result as Python: the message dict exactly as the parser returned it, or,
    for a failed row, the ``error`` string. (For checks and small outputs; not needed to use the columns.)"""
    p = column_prefix
    cols = {k: parsed.column(p + k).to_pylist() for k in MESSAGE_SCHEMA.names}
    out = []
    for i in range(parsed.num_rows):
        if cols["error"][i] is not None:
            out.append(cols["error"][i])
            continue
        extra = json.loads(cols["extra"][i]) if cols["extra"][i] is not None else {}
        msg: dict = {}
        for k in (*_TEXT_KEYS, "tool_calls"):
            v = cols[k][i]
            if v is not None:
                if k == "tool_calls":
                    v = [_call(c) for c in v]
                msg[k] = v
        msg.update(extra)
        out.append(msg)
    return out


def _call(c: dict) -> dict:
    out: dict = {}
    if c["type"] is not None:
        out["type"] = c["type"]
    if c["id"] is not None:
        out["id"] = c["id"]
    out["function"] = {"name": c["name"], "arguments": json.loads(c["arguments"])}
    return out
