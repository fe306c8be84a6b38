"""Kept path: `chatparse.runtime.loader` is `chatparse.runtime.tables.loader` (the table-file reader: `compiled_from_bytes`, FORMAT.md).

The documentation has named this path, so it stays importable; it is the same module object, not a copy
(an attribute set through one name is set through the other). Code in chatparse imports the real path."""

import sys

from .tables import loader as _module

sys.modules[__name__] = _module
