"""vLLM's entry point (``vllm.general_plugins``): imports the plugin only where vLLM loads plugins.

vLLM calls `register` in every process; without vLLM installed the entry point is never read. Kept apart
from `chatparse.integrations.vllm`, which imports vLLM at import time.
"""

from __future__ import annotations


def register() -> None:
    """Register ``chatparse`` as a vLLM tool-call parser and reasoning parser."""
    from .vllm import register as _register

    _register()
