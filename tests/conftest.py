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
