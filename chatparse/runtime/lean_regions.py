"""Kept path: `chatparse.runtime.lean_regions` is `chatparse.runtime.oneshot.lean_regions` (whether the one-shot path's C half is built: `NATIVE`).

The documentation has named this path, so it stays importable; it is the same module object, not a copy
(an attribute set through one name is set through the other). Code in chatparse imports the real path."""

import sys

from .oneshot import lean_regions as _module

sys.modules[__name__] = _module
