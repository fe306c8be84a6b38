"""Values: what a region's text becomes in the message. Content parsers (`parsers`: json, python-calls,
json-values, ...), transforms (`transform`, `unwrap`, `optional_placeholders`, `content_fallback`), `tools=`
typing (`coerce`, `schema_typing`, `args`) and the format extensions (`extensions`: the registry; `steps`,
`json_end`, `recovery`, `pycalls`, `json_values`). Each takes text or a parsed value and returns a value; none
knows about delimiters, modes or streams (they import only `runtime/regex/`)."""
