"""Tables: a compiled template as the runtime holds it. `loader` reads table files (FORMAT.md) and checks every
index; `validate` and `rules` are the template rules (the reference's errors), applied to every loaded file's
template too; `layout` lays the tables out as flat lists for the hot path (validation, prefilters); `template`
is the template object (`RuntimeTemplate`). After this folder has accepted a table, the engines above trust it."""
