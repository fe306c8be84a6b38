"""Checks of the arguments callers pass in, with errors that name the argument.

The reference (transformers' `parse_response` / `ResponseParser`) raises TypeError for these calls too, but
from deep inside (``can only concatenate str (not "bytes") to str``); here the message says which argument
is wrong and how. A check is one type comparison where the argument is right, so the per-feed path keeps it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["text_error", "check_tools"]


def text_error(value: Any, what: str) -> TypeError:
    """The TypeError for a `what` (e.g. ``"parse_response() argument 'text'"``) that is not a str."""
    hint = ""
    if isinstance(value, (bytes, bytearray, memoryview)):
        hint = " (decode the bytes first, e.g. value.decode('utf-8'))"
    elif value is None:
        hint = " (pass \"\" for no text)"
    return TypeError(f"{what} must be a str, not {type(value).__name__}{hint}")


def check_tools(tools: Any) -> None:
    """`tools` is None or a list (or tuple) of tool schemas or functions, as for `apply_chat_template`."""
    if tools is None or type(tools) in (list, tuple) or isinstance(tools, (list, tuple)):
        return
    hint = " (wrap one tool in a list: tools=[tool])" if isinstance(tools, dict) else ""
    raise TypeError(f"`tools` must be a list of tool schemas (dicts) or functions, not "
                    f"{type(tools).__name__}{hint}")
