"""Side-by-side benchmarks of chatparse against the transformers reference parser.

Run ``python -m bench`` (full suite, writes bench/results/RESULTS.md and PNG plots) or ``python -m bench --quick``
(under a minute, writes to a temporary directory unless ``--out`` is given). One concept per module:
`scenarios` (what is parsed), `measure` (how it is timed), `pertoken` (the per-token measurements, also run
alone by ``python bench/bench_tokens.py``), `plots` (figures), `report` (RESULTS.md).
"""
