"""Tools given as Python functions become JSON Schemas, as transformers converts them (`get_json_schema`, imported
only when a function is given). Everything that takes ``tools=`` (the parsers, token bindings, the grammar
export) converts through this one function, so a function and its schema always give the same answer."""

from __future__ import annotations

from inspect import isfunction, ismethod

from ..runtime.values.args import check_tools


def tool_schemas(tools) -> list:
    """Convert Python callables to JSON schemas the way transformers does (imported only when needed)."""
    check_tools(tools)
    out = []
    for tool in tools or []:
        if isfunction(tool) or ismethod(tool):
            from transformers.utils.chat_template_utils import get_json_schema

            tool = get_json_schema(tool)
        out.append(tool)
    return out
