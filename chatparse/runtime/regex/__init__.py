"""Regex helpers of the runtime: what a delimiter pattern's matches start with (`literals`), which patterns can
make `regex` backtrack badly (`backtrack`), lookbehind-led patterns (`lead_assert`), and where the faster `re`
means what `regex` means (`re_compat`). Pure functions of a pattern's source; they import nothing of chatparse
outside this folder."""
