"""Kept path: `chatparse.runtime.stream_kernels` is `chatparse.runtime.tokens.kernels` (whether the token engine's C half is built: `NATIVE`).

The documentation has named this path, so it stays importable; it is the same module object, not a copy
(an attribute set through one name is set through the other). Code in chatparse imports the real path."""

import sys

from .tokens import kernels as _module

sys.modules[__name__] = _module
