"""The ``python-calls`` content parser (format extension ``python_calls``): Python call syntax to a list of
``{"name": str, "arguments": dict}``.

What lfm2, Llama 4 / Llama 3.2 "pythonic" and OLMo 3 emit: ``[get_weather(city='LA'), search(q="x")]``, a
bare ``f(a=1)``, or several calls separated by commas or one per line. The grammar (FORMAT.md, "Extensions",
states it in full; a value is always a list, even for one bare call):

* the body, with surrounding whitespace (space, tab, form feed, CR, LF) removed, is empty (``[]``), a list
  ``[call, call, ...]`` (optional trailing comma; whitespace anywhere between tokens), or bare calls: one
  per line and/or separated by commas (optional trailing comma). In the bare form a call's name is on one
  line; inside brackets newlines are free, as in Python;
* a call is ``name(kw=value, ...)``: ``name`` is ASCII identifiers joined by ``.`` (``functions.get``), no
  Python keyword; arguments are keyword only (a positional argument, ``*args`` or ``**kw`` is an error naming
  its offset), each keyword once;
* a value is a Python literal: strings (``'..'``, ``".."``, triple-quoted, no prefix; adjacent strings
  concatenate; escapes ``\\\\ \\' \\" \\a \\b \\f \\n \\r \\t \\v \\ooo \\xhh \\uXXXX \\UXXXXXXXX``,
  backslash-newline; an unknown escape keeps its backslash; ``\\N{..}`` is an error), numbers (Python's
  decimal, ``0x``/``0o``/``0b`` integers and floats, ``_`` separators, one optional sign; imaginary numbers
  are errors), ``True``/``False``/``None`` and JSON's ``true``/``false``/``null``, lists, tuples (become
  lists), parenthesized values, dicts whose keys are strings. Anything else - names, calls as values,
  expressions, f-strings, sets, comments - is a ValueError naming the offset in the body.

Bounded: one left-to-right pass (each character is looked at a bounded number of times), and values nest at
most `MAX_DEPTH` brackets deep (a ValueError beyond), so no recursion error and no quadratic time. Hand
written, without ``ast``/``eval``, so that js/chatparse.mjs can do exactly the same. Integers follow
Python's limit of 4300 digits.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_python_calls", "MAX_DEPTH"]

#: the deepest bracket nesting (the call list's bracket and the call's parentheses count) a body may have
MAX_DEPTH = 100

_WS = " \t\f\r\n"
_INLINE_WS = " \t\f"
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYWORDS = frozenset(
    "False None True and as assert async await break class continue def del elif else except finally for "
    "from global if import in is lambda nonlocal not or pass raise return try while with yield".split())
_CONSTANTS = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}

# Python's number literals (the language reference's lexical grammar), longest first: imaginary, float, int.
_DIGITS = r"[0-9](?:_?[0-9])*"
_POINTFLOAT = rf"(?:(?:{_DIGITS})?\.{_DIGITS}|{_DIGITS}\.)"
_EXPONENT = rf"[eE][+-]?{_DIGITS}"
_FLOAT = rf"(?:{_POINTFLOAT}(?:{_EXPONENT})?|{_DIGITS}{_EXPONENT})"
_INT = r"(?:0[xX](?:_?[0-9a-fA-F])+|0[oO](?:_?[0-7])+|0[bB](?:_?[01])+|[1-9](?:_?[0-9])*|0+(?:_?0)*)"
_NUMBER = re.compile(rf"(?P<imag>(?:{_FLOAT}|{_DIGITS})[jJ])|(?P<float>{_FLOAT})|(?P<int>{_INT})")
_MAX_INT_DIGITS = 4300

_SIMPLE_ESCAPES = {"\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r",
                   "t": "\t", "v": "\v"}
_HEX = re.compile(r"[0-9a-fA-F]+")
_OCT = re.compile(r"[0-7]{1,3}")


class _Parser:
    """One parse of one body; `pos` only moves forward."""

    __slots__ = ("text", "pos", "n")

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.pos = 0

    def error(self, what: str, at: int | None = None) -> ValueError:
        return ValueError(f"python-calls: {what} at offset {self.pos if at is None else at}")

    def skip(self, chars: str = _WS) -> None:
        t, i, n = self.text, self.pos, self.n
        while i < n and t[i] in chars:
            i += 1
        self.pos = i

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < self.n else ""

    def expect(self, ch: str, what: str) -> None:
        if self.peek() != ch:
            raise self.error(f"expected {what}, found {self.found()}")
        self.pos += 1

    def found(self) -> str:
        return repr(self.text[self.pos]) if self.pos < self.n else "the end of the text"

    # ------------------------------------------------------------------------------------------ calls

    def body(self) -> list:
        self.skip()
        if self.pos == self.n:
            return []
        calls: list = []
        if self.peek() == "[":
            self.pos += 1
            self.skip()
            while self.peek() != "]":
                calls.append(self.call(1, _WS))
                self.skip()
                if self.peek() == ",":
                    self.pos += 1
                    self.skip()
                elif self.peek() != "]":
                    raise self.error(f"expected ',' or ']' after a call, found {self.found()}")
            self.pos += 1
            self.skip()
            if self.pos != self.n:
                raise self.error(f"unexpected {self.found()} after the list of calls")
            return calls
        while True:
            calls.append(self.call(0, _INLINE_WS))
            self.skip(_INLINE_WS)
            if self.pos == self.n:
                return calls
            ch = self.peek()
            if ch == ",":
                self.pos += 1
            elif ch not in "\r\n":
                raise self.error(f"expected ',' or a new line after a call, found {self.found()}")
            self.skip()
            if self.pos == self.n:
                return calls

    def ident(self, what: str) -> str:
        m = _IDENT.match(self.text, self.pos)
        if m is None:
            raise self.error(f"expected {what}, found {self.found()}")
        word = m.group()
        if word in _KEYWORDS:
            raise self.error(f"{what} {word!r} is a Python keyword")
        self.pos = m.end()
        return word

    def call(self, depth: int, ws: str) -> dict:
        parts = [self.ident("a function name")]
        self.skip(ws)
        while self.peek() == ".":
            self.pos += 1
            self.skip(ws)
            parts.append(self.ident("a function name"))
            self.skip(ws)
        name = ".".join(parts)
        if self.peek() != "(":
            raise self.error(f"expected '(' after the function name {name!r}, found {self.found()}")
        depth = self.enter(depth)
        self.pos += 1
        arguments: dict = {}
        self.skip()
        while self.peek() != ")":
            at = self.pos
            if self.peek() == "*":
                raise self.error(f"*args and **kwargs are not supported (call {name!r})")
            m = _IDENT.match(self.text, self.pos)
            if m is None or not self.text.startswith("=", _after_ws(self.text, m.end())) \
                    or self.text.startswith("==", _after_ws(self.text, m.end())):
                raise self.error(f"positional argument {len(arguments) + 1} in the call to {name!r}; only "
                                 "keyword arguments (name=value) are supported")
            key = self.ident("an argument name")
            if key in arguments:
                raise self.error(f"keyword argument {key!r} repeated in the call to {name!r}", at)
            self.skip()
            self.pos += 1  # '='
            self.skip()
            arguments[key] = self.value(depth)
            self.skip()
            if self.peek() == ",":
                self.pos += 1
                self.skip()
            elif self.peek() != ")":
                raise self.error(f"expected ',' or ')' in the call to {name!r}, found {self.found()}")
        self.pos += 1
        return {"name": name, "arguments": arguments}

    def enter(self, depth: int) -> int:
        if depth >= MAX_DEPTH:
            raise self.error(f"brackets nested more than {MAX_DEPTH} deep")
        return depth + 1

    # ------------------------------------------------------------------------------------------ values

    def value(self, depth: int) -> Any:
        ch = self.peek()
        start = self.pos
        if ch in ("'", '"'):
            out = [self.string()]
            while True:  # adjacent string literals concatenate
                save = self.pos
                self.skip()
                if self.peek() not in ("'", '"'):
                    self.pos = save
                    return "".join(out)
                out.append(self.string())
        if ch in "+-":
            self.pos += 1
            self.skip()
            if self.peek() not in "0123456789." or not self.peek():
                raise self.error(f"a sign must be followed by a number, found {self.found()}")
            number = self.number()
            return -number if ch == "-" else number
        if ch and ch in "0123456789.":
            return self.number()
        if ch == "[":
            depth = self.enter(depth)
            self.pos += 1
            return self.sequence(depth, "]")
        if ch == "(":
            depth = self.enter(depth)
            self.pos += 1
            self.skip()
            if self.peek() == ")":
                self.pos += 1
                return []
            first = self.value(depth)
            self.skip()
            if self.peek() == ")":  # a parenthesized value
                self.pos += 1
                return first
            if self.peek() != ",":
                raise self.error(f"expected ',' or ')', found {self.found()}")
            self.pos += 1
            return [first] + self.sequence(depth, ")")
        if ch == "{":
            depth = self.enter(depth)
            self.pos += 1
            return self.dict(depth)
        m = _IDENT.match(self.text, self.pos)
        if m is not None and m.group() in _CONSTANTS:
            self.pos = m.end()
            return _CONSTANTS[m.group()]
        if m is not None:
            word = m.group()
            if self.text.startswith(("'", '"'), m.end()):
                raise self.error(f"string prefix {word!r} is not supported (f-strings, raw and byte strings)")
            raise self.error(f"{word!r} is not a literal value (names, calls and expressions are not supported)",
                             start)
        raise self.error(f"expected a value, found {self.found()}")

    def sequence(self, depth: int, end: str) -> list:
        items: list = []
        self.skip()
        while self.peek() != end:
            items.append(self.value(depth))
            self.skip()
            if self.peek() == ",":
                self.pos += 1
                self.skip()
            elif self.peek() != end:
                raise self.error(f"expected ',' or {end!r}, found {self.found()}")
        self.pos += 1
        return items

    def dict(self, depth: int) -> dict:
        out: dict = {}
        self.skip()
        while self.peek() != "}":
            at = self.pos
            key = self.value(depth)
            self.skip()
            if self.peek() != ":":
                if self.peek() in (",", "}"):
                    raise self.error("sets are not supported (expected ':' after a dict key)")
                raise self.error(f"expected ':' after a dict key, found {self.found()}")
            if not isinstance(key, str):
                raise self.error("dict keys must be strings", at)
            self.pos += 1
            self.skip()
            out[key] = self.value(depth)
            self.skip()
            if self.peek() == ",":
                self.pos += 1
                self.skip()
            elif self.peek() != "}":
                raise self.error(f"expected ',' or '}}', found {self.found()}")
        self.pos += 1
        return out

    def number(self) -> Any:
        start = self.pos
        m = _NUMBER.match(self.text, start)
        if m is None:
            raise self.error(f"expected a number, found {self.found()}")
        end = m.end()
        if end < self.n and (self.text[end].isascii() and self.text[end].isalnum() or self.text[end] in "_."):
            raise self.error("invalid number literal", start)
        self.pos = end
        if m.group("imag") is not None:
            raise self.error("imaginary numbers are not supported", start)
        lexeme = m.group().replace("_", "")
        if m.group("float") is not None:
            return float(lexeme)
        base = {"x": 16, "o": 8, "b": 2}.get(lexeme[1:2].lower(), 10)
        if base == 10 and len(lexeme) > _MAX_INT_DIGITS:
            raise self.error(f"an integer of more than {_MAX_INT_DIGITS} digits", start)
        return int(lexeme, base) if base == 10 else int(lexeme[2:], base)

    def string(self) -> str:
        t = self.text
        start = self.pos
        quote = t[start]
        triple = t.startswith(quote * 3, start)
        i = start + (3 if triple else 1)
        out: list = []
        n = self.n
        while True:
            if i >= n:
                raise self.error("unterminated string", start)
            c = t[i]
            if c == quote and (not triple or t.startswith(quote * 3, i)):
                self.pos = i + (3 if triple else 1)
                return "".join(out)
            if c == "\\":
                i = self._escape(i, out, start)
                continue
            if c in "\r\n":
                if not triple:
                    raise self.error("unterminated string (a new line inside a quoted string)", start)
                out.append("\n")  # Python reads CR LF and a lone CR as LF
                i += 2 if t.startswith("\r\n", i) else 1
                continue
            out.append(c)
            i += 1

    def _escape(self, i: int, out: list, start: int) -> int:
        """One backslash escape at `i` (the backslash); appends its text, returns the offset after it."""
        t = self.text
        if i + 1 >= self.n:
            raise self.error("unterminated string", start)
        c = t[i + 1]
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
            return i + 2
        if c == "\n":
            return i + 2
        if c == "\r":
            return i + 3 if t.startswith("\n", i + 2) else i + 2
        if c in "01234567":
            m = _OCT.match(t, i + 1)
            out.append(chr(int(m.group(), 8)))
            return m.end()
        if c in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = t[i + 2:i + 2 + width]
            if len(digits) != width or _HEX.fullmatch(digits) is None:
                raise self.error(f"truncated \\{c} escape (needs {width} hex digits)", i)
            code = int(digits, 16)
            if code > 0x10FFFF:
                raise self.error(f"\\{c} escape out of range", i)
            out.append(chr(code))
            return i + 2 + width
        if c == "N":
            raise self.error("\\N{...} escapes are not supported", i)
        out.append("\\")  # an unknown escape keeps its backslash (the next character is read normally)
        return i + 1


def _after_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n and text[i] in _WS:
        i += 1
    return i


def parse_python_calls(text: str, args: Any = None) -> list:
    """The calls in `text` as ``[{"name": str, "arguments": {kw: value}}, ...]`` (the module docstring's
    grammar); ValueError naming the offset for anything else. `args` (the field's content_args, which
    template validation requires to be empty) is ignored."""
    return _Parser(text).body()
