"""Content parsers: turn the raw body of a closed region into its value.

Every parser here reproduces transformers 5.23.0 (``chat_parsing.content_parsers``) value for value and
exception class for exception class, including the places where the reference is lax or surprising:

* ``content_args`` are never validated at load time; a bad argument (no ``tag_pattern``, an invalid
  ``tag_pattern``, an unknown ``value_parser`` name, a non-dict ``args``) only fails when a body is parsed.
* Options are read by truthiness (``strip``, ``allow_non_json``, ``merge_duplicates``, ...).
* Only ``json.JSONDecodeError`` falls back under ``allow_non_json``; other ``ValueError`` s raised by
  ``json.loads`` (e.g. an integer with too many digits) propagate.

Only the standard library, ``regex`` and runtime/regex/re_compat.py are imported, so the runtime stays independent
of the compiler and of transformers. Regexes mean what the reference's ``regex`` calls mean (Unicode
``\\w``, DOTALL where it uses it); `re` runs one only where its meaning is provably the same (a tag
pattern `re_compat.same_in_re` accepts, bare keys in ASCII text, our own sentinels), because it is faster
there.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from json.encoder import encode_basestring_ascii as _encode_str
from typing import Any, Callable

import regex

from ..regex.re_compat import ascii_twin, re_twin
from .json_values import parse_json_values, too_deep_at
from .pycalls import parse_python_calls

__all__ = ["PARSERS", "PARSER_NAMES", "STREAMABLE", "content_parser", "parse_content"]

# Content types whose chunks already are part of the final value (modulo stripping): their
# ``region_chunk`` events carry ``dirty=False``. Structured types only mean something once parsed.
STREAMABLE = frozenset({"text", "int", "float", "bool"})

# Control characters used as placeholders for pre-extracted custom-delimited strings (json parser).
_SENTINEL_OPEN = "\x01"
_SENTINEL_CLOSE = "\x02"

# A bare identifier key directly after ``{`` or ``,`` and before ``:`` (no whitespace allowed), as the
# reference quotes them (it replaces ``(?<=[{,])(\w+):`` by ``"\1":``; see `_quote_bare_keys`).
_BARE_KEY = regex.compile(r"(?<=[{,])(\w+)(?=:)")

# `json.loads` for str is `JSONDecoder().scan_once` between two whitespace skips, behind two Python frames.
_scan_json = json.JSONDecoder().scan_once


def _loads(s: str) -> Any:
    """``json.loads(s)``: the same value or the same exception, with the C scanner called directly (a
    third of the time on short arguments). Anything but a clean parse of a str is redone by `json.loads`."""
    if type(s) is str:
        value = _clean_json(s)
        if value is not _MISS:
            return value
    return json.loads(s)  # (raises "Expecting value" or "Extra data" as json.loads does)


def _clean_json(s: str) -> Any:
    """The value of the str `s` when it is one JSON document with only JSON whitespace around it, found by
    json's C scanner alone (`json.loads` gives the same value); `_MISS` for anything else, where the caller
    asks `json.loads` itself for its value or exception. Other errors of the scanner (a JSONDecodeError
    inside an object, a too long integer) propagate, as from `json.loads`."""
    n, i = len(s), 0
    while i < n and s[i] in _JSON_WS:  # (runs around a body are short: a loop costs less than a regex call)
        i += 1
    try:
        value, end = _scan_json(s, i)
    except StopIteration:
        return _MISS
    if end != n and s[end:].strip(_JSON_WS):  # (a JSON value ends in no whitespace: the rest, if any, must be)
        return _MISS
    return value


def _strip_if_asked(text: str, args: dict) -> str:
    """``text`` parser: strip surrounding whitespace unless ``args["strip"]`` is falsy (default: strip).

    The scalar parsers and kv-lines reuse this with the same ``args`` so that ``strip`` affects them
    exactly as it does in the reference."""
    if args.get("strip", True):
        return text.strip()
    return text


def _parse_int(text: str, args: dict) -> int:
    """``int`` parser: Python ``int()`` of the (optionally stripped) text; ``ValueError`` otherwise."""
    return int(_strip_if_asked(text, args))


def _parse_float(text: str, args: dict) -> float:
    """``float`` parser: Python ``float()`` of the (optionally stripped) text (accepts ``nan``/``inf``)."""
    return float(_strip_if_asked(text, args))


def _parse_bool(text: str, args: dict) -> bool:
    """``bool`` parser: ``True`` iff the lower-cased text is ``"true"`` or ``"1"``; never raises on text."""
    return _strip_if_asked(text, args).lower() in ("true", "1")


def _extract_delimited(working: str, string_delims: Any, captured: list[str]) -> str:
    """Replace every ``open ... close`` span (shortest match, DOTALL) by an indexed sentinel token.

    Pairs are applied one after the other on the already-rewritten text, so a later pair sees the
    sentinels of earlier ones, as in the reference. ``captured`` receives the inner texts in order."""

    def _stash(m: Any) -> str:
        captured.append(m.group(1))
        return f"{_SENTINEL_OPEN}{len(captured) - 1}{_SENTINEL_CLOSE}"

    for pair in string_delims:
        open_d, close_d = pair
        working = _delimited_span(open_d, close_d).sub(_stash, working)
    return working


@lru_cache(maxsize=256)
def _delimited_span(open_d: str, close_d: str):
    return regex.compile(regex.escape(open_d) + "(.*?)" + regex.escape(close_d), regex.DOTALL)


# Only our own sentinels can be in the text at this point (input holding \x01/\x02 was refused).
_SENTINEL_TOKEN = re.compile("\x01([0-9]+)\x02")

# What `json.loads` can start a document with after JSON whitespace: a string, object, array, number,
# true/false/null, NaN, Infinity or -Infinity. Any other ASCII character is a certain JSONDecodeError.
_JSON_WS = " \t\n\r"
_JSON_FIRST = frozenset('"{[-0123456789tfnNI')


def _cannot_be_json(text: str) -> bool:
    """True only when `json.loads(text)` is certain to raise JSONDecodeError (empty, or an ASCII first
    character no JSON value starts with). A cheap test before a call that would build an exception."""
    head = text.lstrip(_JSON_WS)[:1]
    return not head or (head.isascii() and head not in _JSON_FIRST)


# `_BARE_KEY` for ASCII text, where `re`'s \w and `regex`'s \w are the same ten digits, 52 letters and '_'.
_BARE_KEY_ASCII = re.compile(r"(?<=[{,])(\w+)(?=:)", re.ASCII)


def _quote_bare_keys(text: str) -> str:
    """The reference's ``regex.sub(r'(?<=[{,])(\\w+):', r'"\\1":', text)``, as one split and one join: the
    split alternates text and keys, so joining with '"' quotes every key (a key's match ends before the
    ':', and no match can start at that ':' or just after it, so the matches are the reference's)."""
    return '"'.join((_BARE_KEY_ASCII if text.isascii() else _BARE_KEY).split(text))


def _pair_strings(text: str, open_d: str, close_d: str) -> tuple[list, list]:
    """The text between the delimited strings of one ``[open, close]`` pair of non-empty strings
    (``segments``, one more than ``strings``) and the strings, as the reference's ``open(.*?)close``
    (DOTALL) substitution finds them: the leftmost ``open`` with a ``close`` after it starts the leftmost
    match, and the first ``close`` after it ends the shortest (``str.find`` twice)."""
    segments, strings, pos, lo, lc = [], [], 0, len(open_d), len(close_d)
    find = text.find
    while True:
        i = find(open_d, pos)
        if i < 0:
            break
        j = find(close_d, i + lo)
        if j < 0:
            break
        segments.append(text[pos:i])
        strings.append(text[i + lo:j])
        pos = j + lc
    segments.append(text[pos:] if strings else text)
    return segments, strings


def _one_pair_split(text: str, open_d: str, close_d: str, unquoted_keys: Any) -> tuple[list, list]:
    r"""The reference's rewrite for one ``[open, close]`` pair of non-empty strings (the input holds no
    ``\x01``/``\x02``), before the strings go back in: the rewritten text split where each delimited string
    was (``parts``, one more than ``strings``), and the strings. `_join_strings` of them is the same text as
    extracting each ``open(.*?)close`` (DOTALL) to a sentinel, quoting bare keys and putting each string
    back as ``json.dumps`` of it, built in fewer passes.

    Why it is the same: `_pair_strings` finds the reference's strings; a placeholder character that is not
    \w, '{' or ',' hides each string from the bare-key pattern exactly as the numbered sentinel does;
    ``encode_basestring_ascii`` is what ``json.dumps`` returns for a str."""
    segments, strings = _pair_strings(text, open_d, close_d)
    return _quoted_parts(segments, strings, unquoted_keys), strings


def _quoted_parts(segments: list, strings: list, unquoted_keys: Any) -> list:
    """`_pair_strings`'s `segments` with bare keys quoted as the reference quotes them around sentinels."""
    if not unquoted_keys:
        return segments
    if not strings:
        return [_quote_bare_keys(segments[0])]
    return _quote_bare_keys(_SENTINEL_OPEN.join(segments)).split(_SENTINEL_OPEN)


def _one_pair_text(text: str, open_d: str, close_d: str, unquoted_keys: Any) -> str:
    """`_join_strings(*_one_pair_split(...))`, with fewer passes where no delimited string holds '{' or ',':
    the strings go in as JSON strings first and bare keys are quoted after, because a bare key needs a '{'
    or ',' right before it, which no such JSON string holds, and a JSON string starts and ends with '"',
    which ends a key's run without the ':' it needs, as the sentinel does."""
    segments, strings = _pair_strings(text, open_d, close_d)
    if not strings:
        return _quote_bare_keys(text) if unquoted_keys else text
    out = [segments[0]]
    for x, segment in zip(strings, segments[1:]):
        if unquoted_keys and ("{" in x or "," in x):
            return _join_strings(_quoted_parts(segments, strings, unquoted_keys), strings)
        out.append(_encode_str(x))
        out.append(segment)
    return _quote_bare_keys("".join(out)) if unquoted_keys else "".join(out)


def _join_strings(parts: list, strings: list) -> str:
    out = [parts[0]]
    for value, part in zip(strings, parts[1:]):
        out.append(_encode_str(value))
        out.append(part)
    return "".join(out)


_PLACEHOLDER_MIN = 256  # characters of delimited strings from which `_with_placeholders` pays off
_MISS = object()


def _with_placeholders(parts: list, strings: list) -> Any:
    r"""The value `_loads` gives for `_join_strings(parts, strings)`, or `_MISS` (then the caller parses that
    text, for the exact value or exception). Each string goes in as the JSON string ``"\u0001<index>"`` and
    is put back into the parsed value, so long strings are neither encoded nor decoded.

    Why it is the same value: both texts hold a JSON string token at the same places and are otherwise
    equal, so they parse to the same structure, or both fail (then `_MISS`); every such token becomes a
    key or a value, which is put back. Not taken (`_MISS`) where a placeholder could be confused: the text
    already spells ``\u0001``, or a string put back as a key equals a key written in the text (the parse
    merged duplicates of that key before the string was known)."""
    for part in parts:
        if "\\u0001" in part:
            return _MISS
    out = [parts[0]]
    for k, part in enumerate(parts[1:]):
        out.append('"\\u0001%d"' % k)
        out.append(part)
    try:
        value = _loads("".join(out))
    except ValueError:
        return _MISS
    try:
        return _put_back(value, strings)
    except (_KeyClash, RecursionError):
        return _MISS


class _KeyClash(Exception):
    pass


def _put_back(value: Any, strings: list) -> Any:
    t = type(value)
    if t is str:
        return strings[int(value[1:])] if value[:1] == "\x01" else value
    if t is list:
        return [_put_back(v, strings) for v in value]
    if t is dict:
        out = {}
        for k, v in value.items():
            if k[:1] == "\x01":
                k = strings[int(k[1:])]
                if k in value:
                    raise _KeyClash()
            out[k] = _put_back(v, strings)
        return out
    return value


def _parse_json(text: str, args: dict) -> Any:
    """``json`` parser with the reference's dialect knobs.

    * ``string_delims``: ``[[open, close], ...]`` custom string markers, turned into JSON strings.
      When set (truthy), text containing ``\\x01``/``\\x02`` is rejected with ``ValueError`` because
      those characters are the placeholders.
    * ``unquoted_keys``: quote bare ``word:`` keys that follow ``{`` or ``,`` directly.
    * ``allow_non_json``: on a JSON syntax error return the (optionally stripped) original text.

    Otherwise a syntax error raises ``ValueError`` quoting the text (and the rewritten text when a
    dialect knob changed it), with the same message shape as the reference."""
    return _json_knobs(args)(text)


def _json_knobs(args: dict) -> Callable[[str], Any]:
    """`_parse_json` with `args` read once: the knobs are looked up here, the text is parsed by the
    function returned. Reading a dict's values has no effect, so reading them before the text is known
    changes neither value nor exception."""
    string_delims = args.get("string_delims", [])
    unquoted_keys = args.get("unquoted_keys", False)
    allow_non_json = args.get("allow_non_json")
    pair = string_delims[0] if type(string_delims) is list and len(string_delims) == 1 else None
    if not (type(pair) in (list, tuple) and len(pair) == 2 and type(pair[0]) is str and type(pair[1]) is str
            and pair[0] and pair[1]):
        pair = None
    if not string_delims and type(string_delims) in (list, tuple, str, dict) and not unquoted_keys:
        # no rewrite at all (a falsy non-iterable `string_delims` fails in the general path, as it should)
        # (on short arguments the frames count: a clean document takes one call of the C scanner)
        def plain(text: str) -> Any:
            if type(text) is str:
                try:
                    value = _clean_json(text)
                except json.JSONDecodeError:
                    value = _MISS  # (the reference's handling of it is below)
                if value is not _MISS:
                    return value
                if allow_non_json and _cannot_be_json(text):
                    return _strip_if_asked(text, args)
                # (the C scanner said no: `json.loads` gives the error, or the value of a document it took)
                return _json_or_text(text, args, loads=json.loads) if allow_non_json else _json_or_raise(
                    text, text, loads=json.loads)
            return _json_or_text(text, args) if allow_non_json else _json_or_raise(text, text)

        return plain

    def parse(text: str) -> Any:
        if string_delims and (_SENTINEL_OPEN in text or _SENTINEL_CLOSE in text):
            raise ValueError(
                "json: input contains reserved sentinel characters (\\x01/\\x02); cannot parse safely."
            )
        if pair is not None:
            working = None
            if len(text) >= _PLACEHOLDER_MIN:
                parts, strings = _one_pair_split(text, pair[0], pair[1], unquoted_keys)
                if len(strings) <= 64 and strings and sum(map(len, strings)) >= _PLACEHOLDER_MIN:
                    value = _with_placeholders(parts, strings)
                    if value is not _MISS:
                        return value
                working = _join_strings(parts, strings)
            if working is None:
                working = _one_pair_text(text, pair[0], pair[1], unquoted_keys)
        else:
            captured: list[str] = []
            working = _extract_delimited(text, string_delims, captured)
            if unquoted_keys:
                working = _quote_bare_keys(working)
            if captured:
                # One pass instead of one `replace` per string: the sentinels are unique and `json.dumps`
                # output never contains a raw \x01/\x02, so this is the reference's sequential replacement.
                working = _SENTINEL_TOKEN.sub(lambda m: json.dumps(captured[int(m.group(1))]), working)
        if allow_non_json:
            if type(working) is str and _cannot_be_json(working):
                return _strip_if_asked(text, args)
            return _json_or_text(working, args, text)
        return _json_or_raise(working, text)

    return parse


def _json_or_text(working: str, args: dict, text: str | None = None, loads=_loads) -> Any:
    """`loads(working)` (`_loads`, or `json.loads` where `_clean_json` already had its look), or on a JSON
    syntax error the original `text` (default: `working`) stripped as the ``text`` parser would
    (``allow_non_json``)."""
    try:
        return loads(working)
    except json.JSONDecodeError:
        return _strip_if_asked(working if text is None else text, args)


def _json_or_raise(working: str, text: str, loads=_loads) -> Any:
    """`loads(working)` (as in `_json_or_text`), or on a JSON syntax error the reference's ValueError quoting
    the original `text` (and `working`, when a dialect knob rewrote it)."""
    try:
        return loads(working)
    except json.JSONDecodeError as err:
        if working == text:
            raise ValueError(
                f"json parser could not parse region as JSON.\nContent: {text!r}\nError: {err}"
            ) from err
        raise ValueError(
            "json: could not parse after dialect transforms.\n"
            f"Original: {text!r}\nTransformed: {working!r}\nError: {err}"
        ) from err


def _nested_parser(value_parser: Any) -> Callable[[Any], Any]:
    """The function an optional nested ``value_parser`` (``{"name": ..., "args": ...}``, name defaulting to
    ``"text"``) applies to each captured value; ``None`` keeps the raw string. Built by the caller at a
    body's first value, where the reference first reads the value parser, so a malformed one fails at the
    same point (an unknown name raises ``KeyError`` when a value is parsed, like the reference). Built once
    per value parser object (`_NESTED`): building a json parser's knobs costs as much as parsing a short value,
    and a template's value parser is part of its loaded spec, which nothing changes."""
    if value_parser is None:
        return _raw
    hit = _NESTED.get(id(value_parser))
    if hit is not None and hit[0] is value_parser:
        return hit[1]
    name = value_parser.get("name", "text")
    if type(name) is str and name in EXTENSION_PARSERS:  # not a value parser: unknown here, as in the reference
        fn = lambda raw: PARSERS[name](raw, {})  # noqa: E731
    else:
        fn = content_parser(name, value_parser.get("args", {}))
    if len(_NESTED) < 1024:  # (the entry keeps `value_parser` alive, so its id is not reused)
        _NESTED[id(value_parser)] = (value_parser, fn)
    return fn


_NESTED: dict = {}  # id(value parser dict) -> (it, its function): `_nested_parser`


def _raw(raw: Any) -> Any:
    return raw


def _unescaped_json(raw: Any) -> Any:
    """Format extension escaped_json_values: the value of `raw` read as the inside of a JSON string literal and
    that string read as JSON (``json.loads(json.loads('"' + raw + '"'))``), or `_MISS` when either step fails
    or the string's brackets nest deeper than 512 (so no recursion limit decides)."""
    if type(raw) is not str:
        return _MISS
    try:
        inner = json.loads('"' + raw + '"')
        if too_deep_at(inner) >= 0:
            return _MISS
        return json.loads(inner)
    except ValueError:
        return _MISS


def _unescaping(nested: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """`nested` (a ``json`` value parser), except that where it raises ValueError or gives a string (the
    text it kept under ``allow_non_json``, or a JSON string), `_unescaped_json` of the value's text wins
    when it reads (FORMAT.md, ``escaped_json_values``). A JSON string literal never reads (``'""..""'`` is
    no JSON document), so only text that is not JSON changes."""
    def parse(raw: Any) -> Any:
        try:
            value = nested(raw)
        except ValueError:
            value = _unescaped_json(raw)
            if value is _MISS:
                raise
            return value
        if type(value) is str:
            again = _unescaped_json(raw)
            if again is not _MISS:
                return again
        return value

    return parse


def _json_value_parser(value_parser: Any) -> bool:
    """Whether a ``value_parser`` entry names the ``json`` parser (escaped_json_values acts on those only)."""
    return type(value_parser) is dict and value_parser.get("name", "text") == "json"


def _parse_xml_inline(text: str, args: dict, unescape: bool = False) -> dict:
    """``xml-inline`` parser: every match of ``tag_pattern`` (DOTALL; named groups ``key`` and
    ``value``; backreferences allowed) becomes one dict entry, in match order.

    A missing ``tag_pattern`` raises ``ValueError`` here (parse time). A match whose ``key`` group is
    absent or did not participate raises ``ValueError``. Without ``merge_duplicates`` a repeated key keeps
    the last value; with it, values are gathered into a list (appending to the first value itself when
    that value already is a list, as the reference does)."""
    tag_pattern = args.get("tag_pattern")
    if tag_pattern is None:
        raise ValueError("xml-inline: 'tag_pattern' content_arg is required")
    value_parser = args.get("value_parser")
    merge = args.get("merge_duplicates", False)
    result: dict[str, Any] = {}
    nested = None
    for match in _tag_matches(tag_pattern, text):
        groups = match.groupdict()
        key = groups.get("key")
        if key is None:
            raise ValueError(
                f"xml-inline: tag_pattern must have a named group 'key'. Pattern: {tag_pattern}"
            )
        if nested is None:
            nested = _nested_parser(value_parser)
            if unescape and _json_value_parser(value_parser):
                nested = _unescaping(nested)
        value = nested(groups.get("value", ""))
        if merge and key in result:
            existing = result[key]
            if not isinstance(existing, list):
                existing = result[key] = [existing]
            existing.append(value)
        else:
            result[key] = value
    return result


@lru_cache(maxsize=256)
def _tag_regexes(tag_pattern: str):
    """(`regex` compile, `re` compile or None, `re` compile for ASCII text or None). The `regex` compile comes
    first so that an invalid pattern raises `regex`'s error, as in the reference."""
    rx = regex.compile(tag_pattern, regex.DOTALL)
    return rx, re_twin(tag_pattern), ascii_twin(tag_pattern)


def _tag_matches(tag_pattern: Any, text: str) -> list:
    """``regex.finditer(tag_pattern, text, flags=DOTALL)``'s matches, found by `re` when it means the same
    (about 3x faster on lazy ``.*?`` bodies; on ASCII text, also for patterns with ``\\s`` and the like,
    glm-4.5's among them: `re_compat`), whose matches are also cheaper to read (``groupdict``: a fifth of
    `regex`'s time). Should `re` find an empty match (where the two modules' iteration rules could differ),
    `regex` redoes the search."""
    if not isinstance(tag_pattern, str):
        return list(regex.finditer(tag_pattern, text, flags=regex.DOTALL))
    rx, fast, ascii_fast = _tag_regexes(tag_pattern)
    if fast is None and text.isascii():
        fast = ascii_fast
    if fast is not None:
        found = list(fast.finditer(text))
        if all(m.end() > m.start() for m in found):
            return found
    return list(rx.finditer(text))


def _parse_kv_lines(text: str, args: dict, unescape: bool = False) -> dict:
    """``kv-lines`` parser: split on ``line_sep`` (default newline), split each line on the first
    ``kv_sep`` (default ``:``), strip per ``strip``, skip empty lines and lines without the separator,
    and apply the optional ``value_parser``. Later duplicates overwrite earlier ones."""
    line_sep = args.get("line_sep", "\n")
    kv_sep = args.get("kv_sep", ":")
    value_parser = args.get("value_parser")
    result: dict[str, Any] = {}
    nested = None
    for raw_line in text.split(line_sep):
        line = _strip_if_asked(raw_line, args)
        if not line or kv_sep not in line:
            continue
        key, value = line.split(kv_sep, 1)
        if nested is None:
            nested = _nested_parser(value_parser)
            if unescape and _json_value_parser(value_parser):
                nested = _unescaping(nested)
        result[_strip_if_asked(key, args)] = nested(_strip_if_asked(value, args))
    return result


PARSERS: dict[str, Callable[[str, dict], Any]] = {
    "text": _strip_if_asked,
    "int": _parse_int,
    "float": _parse_float,
    "bool": _parse_bool,
    "json": _parse_json,
    "xml-inline": _parse_xml_inline,
    "kv-lines": _parse_kv_lines,
}

# The names a template may use in ``content`` (and a ``value_parser`` may use in ``name``).
PARSER_NAMES = frozenset(PARSERS)

# Content parsers of format extensions (runtime/values/extensions.py): a field's ``content`` only, never a nested
# ``value_parser``; transformers does not know them.
EXTENSION_PARSERS: dict[str, Callable[[str, Any], Any]] = {"python-calls": parse_python_calls,
                                                         "json-values": parse_json_values}


def parse_content(text: str, name: str, args: dict) -> Any:
    """Parse ``text`` with the content parser ``name`` configured by ``args``.

    Guarantees the reference's value or exception class for every input. An unknown ``name`` raises
    ``KeyError`` (the loader rejects unknown top-level names earlier; nested ``value_parser`` names are
    only checked here, as in the reference)."""
    return PARSERS[name](text, args)


def content_parser(name: str, args: Any, unescape: bool = False) -> Callable[[str], Any]:
    """``lambda text: parse_content(text, name, args)`` for a field whose `name` and `args` never change,
    with what can be read ahead read once: the ``strip`` flag of ``text``, the knobs of ``json``.

    Why: a region's value is parsed once per region, and on short bodies (a tool call's arguments) looking
    the options up again each time costs as much as the parse. Arguments that are not a dict keep the
    generic call, so they still fail only when a body is parsed, as in the reference."""
    if type(name) is str and name in EXTENSION_PARSERS:
        fn = EXTENSION_PARSERS[name]
        return lambda text: fn(text, args)
    if unescape and name in ("xml-inline", "kv-lines"):  # format extension escaped_json_values
        fn = PARSERS[name]
        return lambda text: fn(text, args, True)
    if type(args) is not dict or name not in PARSERS:
        return lambda text: PARSERS[name](text, args)
    if name == "text":  # (a nested value may be None: None.strip() fails as in the reference, or None stays)
        return (lambda text: text.strip()) if args.get("strip", True) else (lambda text: text)
    if name == "json":
        return _json_knobs(args)
    fn = PARSERS[name]
    return lambda text: fn(text, args)
