"""Where a JSON value ends, found incrementally: the runtime of the ``close_json_end`` format extension.

A field with ``"close_json_end": true`` closes right after the JSON value its body starts with (FORMAT.md,
"Extensions"). That end is not a regular language (brackets nest), so no delimiter automaton can find it;
`JsonEnd` is a small pushdown recognizer that reads the body once, as it arrives, and says where the value
ends, or that it never will.

Guarantees:

* **Exactly Python's json.** The value is what ``json.JSONDecoder().raw_decode(body, i)`` reads, where ``i``
  skips leading JSON whitespace (space, tab, ``\\n``, ``\\r``): the grammar of CPython's C scanner, strict
  strings (no raw control characters), ``NaN``, ``Infinity``, ``-Infinity``, and its number rule (``1.``,
  ``1e``, ``1e+`` end the number before the ``.``/``e``; ``01`` is the number ``0``). `end` is raw_decode's end
  offset; where raw_decode raises, `dead` is set and the value never ends. One difference, for bounded
  memory: a value nested deeper than `MAX_DEPTH` containers is not a value here (`dead`); raw_decode raises
  RecursionError somewhat deeper. The integer digit limit of ``int()`` is not applied (the grammar is).
* **Split-invariant.** `advance` may be called with any cut of the text; the state after the same characters
  is the same. A top-level number is the one value whose end needs look-ahead: after ``12.`` the value ends
  before the ``.`` unless a digit follows. Until the character that decides it arrives, `hold` says where the
  undecided characters start, so that the parser hands them out neither as body nor as text after the value;
  `finish` (end of stream) decides them.
* **Flat cost, bounded memory.** Each character is read once, in O(1) (runs of string characters,
  whitespace and digits in C), and the state is a few integers plus one entry per open container, at most
  `MAX_DEPTH`. Once the value has ended or is known not to be JSON, `advance` returns at once.

Offsets are absolute (the scanner's): `advance(text, base, upto)` reads ``text[pos - base : upto - base]``.
"""

from __future__ import annotations

import re

__all__ = ["JsonEnd", "MAX_DEPTH", "JSON_END", "json_end_fields"]

JSON_END = -1  # the pattern index of the close at the end of a JSON value, where the parser has one

MAX_DEPTH = 512  # containers open at once; deeper is not a value for this close (never fires)

# States (small ints; `_step` dispatches on them)
_BEFORE = 0  # leading whitespace, then the value
_VALUE = 1  # a value is expected (after '[', ',' in an array, ':' in an object)
_ARR_FIRST = 2  # after '[' (and whitespace): ']' or a value
_ARR_AFTER = 3  # after a value in an array: ',' or ']'
_OBJ_FIRST = 4  # after '{': '"' (a key) or '}'
_OBJ_KEY = 5  # after ',' in an object: '"' (a key)
_OBJ_COLON = 6  # after a key: ':'
_OBJ_AFTER = 7  # after a value in an object: ',' or '}'
_STR = 8  # inside a string
_ESC = 9  # after a backslash in a string
_HEX = 10  # inside \uXXXX (`need` hex digits left)
_LIT = 11  # inside a literal (`lit`, `need` characters of it matched so far)
_MINUS = 12  # after a leading '-': a digit, or 'I' of -Infinity
_ZERO = 13  # after the leading '0' of a number
_INT = 14  # after integer digits (not starting with 0)
_DOT = 15  # after '.', a digit must follow for a fraction
_FRAC = 16  # in fraction digits
_EXP = 17  # after 'e'/'E': a sign or a digit must follow for an exponent
_ESIGN = 18  # after the exponent sign: a digit must follow
_EDIG = 19  # in exponent digits
_DONE = 20
_DEAD = 21

_WS = " \t\n\r"
_ws_run = re.compile(r"[ \t\n\r]*").match
_str_run = re.compile(r'[^"\\\x00-\x1f]*').match
_digit_run = re.compile(r"[0-9]*").match
_HEXDIGITS = frozenset("0123456789abcdefABCDEF")
_ESCAPES = frozenset('"\\/bfnrt')
_LITERALS = {"n": "null", "t": "true", "f": "false", "N": "NaN", "I": "Infinity"}


class JsonEnd:
    """The end of the JSON value a region body starts with (see the module docstring).

    Public state: `end` (absolute offset just past the value, -1 while unknown), `dead` (the body is not a
    JSON value: `end` stays -1 for good), `pos` (the next offset to read)."""

    __slots__ = ("pos", "state", "stack", "key", "lit", "need", "cand", "end", "dead")

    def __init__(self, start: int):
        self.pos = start
        self.state = _BEFORE
        self.stack: list = []  # open containers: True for an object, False for an array
        self.key = False  # the string being read is an object key
        self.lit = ""  # the literal being matched (_LIT)
        self.need = 0  # _LIT: characters matched; _HEX: hex digits left
        self.cand = -1  # a top-level number's end if its pending '.'/'e' part comes to nothing
        self.end = -1
        self.dead = False

    def fork(self) -> "JsonEnd":
        """An independent copy (`StreamParser.fork`)."""
        c = JsonEnd(self.pos)
        c.state, c.stack, c.key, c.lit, c.need = self.state, list(self.stack), self.key, self.lit, self.need
        c.cand, c.end, c.dead = self.cand, self.end, self.dead
        return c

    def decided(self) -> bool:
        """True once `end` is known or the body is known not to be a value."""
        return self.state >= _DONE

    def hold(self) -> int:
        """The first offset read so far that may not be body: `end` once known; where a top-level number
        waits for the character that decides whether its ``.``/``e`` part belongs to it, that part's start;
        else `pos` (nothing read is held). -1 when `dead` (the whole rest is body)."""
        if self.state == _DONE:
            return self.end
        if self.state == _DEAD:
            return -1
        return self.cand if self.cand >= 0 else self.pos

    def lowest(self) -> int:
        """While undecided: the smallest offset at which the value may still end (`hold`)."""
        return self.cand if self.cand >= 0 else self.pos

    # -- reading ---------------------------------------------------------------------------------------------
    def advance(self, text: str, base: int, upto: int) -> None:
        """Read ``text[pos - base : upto - base]`` (stopping early once decided)."""
        state = self.state
        if state >= _DONE or upto <= self.pos:
            return
        i = self.pos - base
        n = upto - base
        while i < n:
            if state == _STR:
                i = _str_run(text, i, n).end()
                if i >= n:
                    break
                c = text[i]
                if c == '"':
                    i += 1
                    if self.key:
                        self.key = False
                        state = _OBJ_COLON
                    else:
                        state = self._value_done(i + base)
                        if state >= _DONE:
                            break
                elif c == "\\":
                    i += 1
                    state = _ESC
                else:  # a raw control character
                    state = self._die()
                    break
                continue
            if state in (_ARR_AFTER, _OBJ_AFTER, _OBJ_COLON, _BEFORE, _VALUE, _ARR_FIRST, _OBJ_FIRST, _OBJ_KEY):
                i = _ws_run(text, i, n).end()
                if i >= n:
                    break
            elif state in (_INT, _FRAC, _EDIG):
                i = _digit_run(text, i, n).end()
                if i >= n:
                    break
            self.state = state
            state = self._step(text[i], i + base)
            if state == _DONE and self.end <= i + base:
                break  # (the character at i was not part of the value)
            i += 1
            if state >= _DONE:
                break
        self.state = state
        if state < _DONE:
            self.pos = n + base
        elif state == _DONE:
            self.pos = self.end

    def finish(self) -> None:
        """End of the stream: a top-level number ends (before a pending ``.``/``e`` part); anything else not
        complete is not a value."""
        state = self.state
        if state >= _DONE:
            return
        if not self.stack and state in (_ZERO, _INT, _FRAC, _EDIG):
            self.end = self.pos
            self.state = _DONE
        elif not self.stack and state in (_DOT, _EXP, _ESIGN):
            self.end = self.cand
            self.state = _DONE
        else:
            self._die()

    # -- one character ---------------------------------------------------------------------------------------
    def _die(self) -> int:
        self.dead = True
        self.state = _DEAD
        self.stack = []
        return _DEAD

    def _value_done(self, at: int) -> int:
        """A value ended just before offset `at`: the whole value if no container is open, else the state after
        a value in the innermost container."""
        if not self.stack:
            self.end = at
            self.state = _DONE
            return _DONE
        return _OBJ_AFTER if self.stack[-1] else _ARR_AFTER

    def _begin_value(self, c: str, at: int) -> int:
        """The state after `c` (at offset `at`) starts a value."""
        if c == '"':
            self.key = False
            return _STR
        if c == "{" or c == "[":
            if len(self.stack) >= MAX_DEPTH:
                return self._die()
            self.stack.append(c == "{")
            return _OBJ_FIRST if c == "{" else _ARR_FIRST
        if c == "-":
            return _MINUS
        if c == "0":
            return _ZERO
        if "1" <= c <= "9":
            return _INT
        lit = _LITERALS.get(c)
        if lit is not None:
            self.lit, self.need = lit, 1
            return _LIT
        return self._die()

    def _number_end(self, c: str, at: int, cand: int) -> int:
        """A number ended: before the character `c` at `at` (cand < 0), or before its pending part starting at
        `cand`. At the top level that is the value's end; in a container the character goes on in it (a
        pending ``.``/``e``/sign can never follow a value there)."""
        self.cand = -1
        if not self.stack:
            self.end = at if cand < 0 else cand
            self.state = _DONE
            return _DONE
        if cand >= 0:
            return self._die()
        self.state = _OBJ_AFTER if self.stack[-1] else _ARR_AFTER
        if c in _WS:
            return self.state
        return self._step(c, at)

    def _step(self, c: str, at: int) -> int:
        """The state after character `c` at offset `at` (whitespace runs and string/digit runs are consumed
        by `advance`; a number that ends here hands `c` on to its container)."""
        state = self.state
        if state == _BEFORE or state == _VALUE:
            return self._begin_value(c, at)
        if state == _ARR_FIRST:
            if c == "]":
                self.stack.pop()
                return self._value_done(at + 1)
            return self._begin_value(c, at)
        if state == _ARR_AFTER:
            if c == ",":
                return _VALUE
            if c == "]":
                self.stack.pop()
                return self._value_done(at + 1)
            return self._die()
        if state == _OBJ_FIRST or state == _OBJ_KEY:
            if c == '"':
                self.key = True
                return _STR
            if c == "}" and state == _OBJ_FIRST:
                self.stack.pop()
                return self._value_done(at + 1)
            return self._die()
        if state == _OBJ_COLON:
            return _VALUE if c == ":" else self._die()
        if state == _OBJ_AFTER:
            if c == ",":
                return _OBJ_KEY
            if c == "}":
                self.stack.pop()
                return self._value_done(at + 1)
            return self._die()
        if state == _ESC:
            if c == "u":
                self.need = 4
                return _HEX
            return _STR if c in _ESCAPES else self._die()
        if state == _HEX:
            if c not in _HEXDIGITS:
                return self._die()
            self.need -= 1
            return _STR if self.need == 0 else _HEX
        if state == _LIT:
            lit = self.lit
            if c != lit[self.need]:
                return self._die()
            self.need += 1
            if self.need == len(lit):
                return self._value_done(at + 1)
            return _LIT
        if state == _MINUS:
            if c == "0":
                return _ZERO
            if "1" <= c <= "9":
                return _INT
            if c == "I":
                self.lit, self.need = "-Infinity", 2
                return _LIT
            return self._die()
        if state == _ZERO or state == _INT or state == _FRAC:
            # (digit runs are consumed by `advance`; an _INT/_FRAC digit never reaches here, a _ZERO one may)
            if c == "." and state != _FRAC:
                self.cand = at
                return _DOT
            if c == "e" or c == "E":
                self.cand = at
                return _EXP
            return self._number_end(c, at, -1)
        if state == _DOT:
            if "0" <= c <= "9":
                self.cand = -1
                return _FRAC
            return self._number_end(c, at, self.cand)
        if state == _EXP:
            if "0" <= c <= "9":
                self.cand = -1
                return _EDIG
            if c == "+" or c == "-":
                return _ESIGN
            return self._number_end(c, at, self.cand)
        if state == _ESIGN:
            if "0" <= c <= "9":
                self.cand = -1
                return _EDIG
            return self._number_end(c, at, self.cand)
        if state == _EDIG:
            return self._number_end(c, at, -1)
        raise AssertionError(f"JsonEnd: unexpected state {state}")


def json_end_fields(tables) -> tuple:
    """Per field of `tables`, whether it closes at the end of its JSON value (``"close_json_end": true``);
    computed once per loaded tables."""
    flags = getattr(tables, "json_end_flags", None)
    if flags is None:
        flags = tables.json_end_flags = tuple(bool(f.get("close_json_end")) for f in tables.fields)
    return flags
