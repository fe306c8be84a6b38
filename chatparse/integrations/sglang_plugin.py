"""SGLang's entry point (``sglang.srt.plugins``): imports the plugin only where SGLang loads plugins.

SGLang's `load_plugins` calls `register` in every process it starts, before it parses its command line;
without SGLang installed the entry point is never read. Kept apart from `chatparse.integrations.sglang`,
which imports SGLang at import time.
"""

from __future__ import annotations


def register() -> None:
    """Register ``chatparse`` as an SGLang tool-call parser and reasoning parser."""
    from .sglang import register as _register

    _register()
