"""The one-shot path: the whole text is known, so delimiters are decided by `str` tests, `regex` or one automaton
attempt at each candidate instead of by stepping (`parse.parse_whole`). `plan` builds the per-template candidate
finders once; `lean_regions` (with its C half `_lean_regions.c`) runs the lean path's delimiter loop natively
where string tests decide every mode. Same answer as the character engine in `runtime/stream/`."""
