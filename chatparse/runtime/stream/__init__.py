"""The character engine: text fed in any pieces gives the same events and message as the unsplit text.
`scanner` steps the delimiter automaton (attempts, hold-back, exact decisions: a delimiter is committed only
when no continuation could change it), `parser` turns delimiters into regions, events and the message,
`dialect` picks transformers' or vLLM's events, `collector` pauses the cyclic GC around hot loops."""
