"""The package's version: written into every table file's header (`compiler/writer.py`) and shown by
`chatparse --version`. A leaf module (it imports nothing), so that every room may read it without importing
the rooms above it (`chatparse/__init__.py` re-exports it as `chatparse.__version__`)."""

__version__ = "0.1.0"
