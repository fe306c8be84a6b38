import os
import pathlib
import sys

from hypothesis import settings

# Test helpers (harness.py, corpus loaders) live beside the tests.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

# CI replays a fixed set of generated examples (the same every run); local runs explore new ones each time.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

import deps  # noqa: E402  (tests/deps.py: what a test needs beside chatparse; CHATPARSE_REQUIRE_DEPS)


def pytest_configure(config):
    config.addinivalue_line("markers", "needs(kind, name, why): a module or program the test needs "
                                       "(tests/deps.py: needs, needs_program)")


def pytest_collection_modifyitems(config, items):
    """Tests marked `slow` (minutes each) run only when asked for with ``-m slow``: otherwise they are
    deselected, not skipped."""
    if "slow" in (config.option.markexpr or ""):
        return
    slow = [item for item in items if item.get_closest_marker("slow")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def pytest_runtest_setup(item):
    deps.check_marks(item)
