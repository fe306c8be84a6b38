"""Kept path: `chatparse.runtime.extensions` is `chatparse.runtime.values.extensions` (the format extensions registry: `EXTENSIONS`).

The documentation has named this path, so it stays importable; it is the same module object, not a copy
(an attribute set through one name is set through the other). Code in chatparse imports the real path."""

import sys

from .values import extensions as _module

sys.modules[__name__] = _module
