"""Kept path: `chatparse.arrow` is `chatparse.data.arrow` (columnar parsing of pyarrow tables: `parse_arrow`,
`to_messages`, `NATIVE`).

The documentation has named this path, so it stays importable; it is the same module object, not a copy
(an attribute set through one name is set through the other). Code in chatparse imports the real path."""

import sys

from .data import arrow as _module

sys.modules[__name__] = _module
