"""Grammar export: a compiled template's outputs as a constrained-decoding grammar (`grammar.export`: llguidance's
Lark; `structural_tag`: xgrammar's structural tag as vLLM passes it). An export of a compiled template, not a
step of compiling one: it reads the compiled tables and the runtime's parser (for the region a prompt leaves
open), never the public API above it; `CompiledTemplate.grammar` calls it."""
