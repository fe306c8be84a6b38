"""chatparse: response templates compiled to delimiter automata, parsed per character with flat cost.

Public API (call-compatible with `transformers.utils.chat_parsing`):

* `parse_response(text, template, *, prefix, tools=None)` -> message dict
* `ResponseParser(template, prefix=None, *, tools=None)` with `initial_events`, `feed()`, `finalize()`
* ``dialect="vllm"`` (or a `Dialect`) on any of them: vLLM 0.33.0's serving dialect of the events
* `compile_template(template)` -> `CompiledTemplate` (cached), accepted wherever a template dict is
* `bind(template, tokenizer)`, `TokenParser.feed_tokens(ids)`, `parse_tokens`, `TokenStreams`: per token id
"""

from ._version import __version__
from .compiled import CompiledTemplate, ResponseParser, compile_template, parse_response
from .runtime.stream.dialect import Dialect
from .runtime.tokens import TokenParser, TokenStreams, parse_tokens, parse_tokens_batch


def bind(template, tokenizer, *, skip_special_tokens: bool = False):
    """Bind a template to a tokenizer for per-token-id parsing (see `chatparse.tokenizer_dir.bind`)."""
    from .tokenizer_dir import bind as _bind

    return _bind(template, tokenizer, skip_special_tokens=skip_special_tokens)


__all__ = [
    "CompiledTemplate", "Dialect", "ResponseParser", "TokenParser", "TokenStreams", "bind", "compile_template",
    "parse_response", "parse_tokens", "parse_tokens_batch", "__version__",
]
