"""Benchmark: parsing token ids (issue 3), side by side with decoding each token and feeding text.

    python bench/bench_tokens.py [--template qwen3] [--lengths 1024,4096,16384,65536,131072] [--window 512]
                                 [--reps 3] [--streams 256] [--stream-steps 2048] [--no-reference]
                                 [--no-tekken] [--json out.json]

A thin wrapper: the measurements are `bench.pertoken`'s, the same ones the suite (``python -m bench``) reports
in its "Per-token cost" section; this prints them instead. See bench/pertoken.py for the vocabulary (tekken
from mistral-common when installed, else a byte-level BPE trained here; CHATPARSE_BENCH_NO_TEKKEN=1 or
--no-tekken forces the latter), the generations and the method.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.pertoken import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
