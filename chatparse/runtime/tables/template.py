"""The template object the runtime parses with: a normalized template and its tables.

`RuntimeTemplate` is what `chatparse.runtime.tables.loader.compiled_from_bytes` returns and what `TokenParser`,
`token_binding` and the one-shot path read (``spec``, ``raw_tables``, ``tables``). The public
`chatparse.CompiledTemplate` (chatparse/compiled.py) builds on it: it adds the parse methods of the public API
and pickling through the table writer, which live above the runtime.

The runtime never imports those layers, so it builds templates through `template_class()`: the class
chatparse/compiled.py registers with `register_template_class` when it is imported (importing any
``chatparse.*`` module imports the package, whose ``__init__`` imports chatparse/compiled.py, so a template
loaded from bytes is always a `chatparse.CompiledTemplate`). `RuntimeTemplate` itself is the fallback.
"""

from __future__ import annotations

from typing import Any, Callable

from .layout import Tables

__all__ = ["RuntimeTemplate", "register_template_class", "template_class"]


class RuntimeTemplate:
    """A response template compiled to tables: ``spec`` (the normalized template, `chatparse.runtime.tables.validate.
    load_template`'s form), ``raw_tables`` (the table dict the compiler builds or the loader reads) and
    ``tables`` (`Tables` over them)."""

    #: turns ``tools=`` into JSON schemas (Python functions included) for a binding built from this
    #: template's token tables (`chatparse.runtime.tokens.binding.token_binding`); None: dicts only.
    convert_tools: Callable[[Any], list] | None = None

    def __init__(self, spec: dict, raw_tables: dict):
        self.spec = spec
        self.raw_tables = raw_tables
        self.tables = Tables(raw_tables)

    @property
    def template(self) -> dict:
        """The normalized template this was compiled from."""
        return self.spec

    def __repr__(self) -> str:
        names = [f["name"] for f in self.spec["fields"]]
        return f"<{type(self).__name__} fields={names}>"


_template_class: list = [RuntimeTemplate]


def register_template_class(cls: type) -> None:
    """Make `cls` (a `RuntimeTemplate` subclass taking ``(spec, raw_tables)``) the class of the templates the
    runtime builds (chatparse/compiled.py registers `CompiledTemplate`)."""
    if not issubclass(cls, RuntimeTemplate):
        raise TypeError(f"{cls!r} is not a RuntimeTemplate subclass")
    _template_class[0] = cls


def template_class() -> type:
    """The class `register_template_class` set (`RuntimeTemplate` when none was)."""
    return _template_class[0]
