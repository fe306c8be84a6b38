import pathlib
import sys

# Test helpers (harness.py, corpus loaders) live beside the tests.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
