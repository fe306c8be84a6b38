"""chatparse: response templates compiled to delimiter automata, parsed per character with flat cost.

Public API (call-compatible with `transformers.utils.chat_parsing`):

* `parse_response(text, template, *, prefix, tools=None)` -> message dict
* `ResponseParser(template, prefix=None, *, tools=None)` with `initial_events`, `feed()`, `finalize()`
* `compile_template(template)` -> `CompiledTemplate` (cached), accepted wherever a template dict is
"""

from .compiled import CompiledTemplate, compile_template
from .response_parser import ResponseParser, parse_response

__version__ = "0.1.0"
__all__ = ["CompiledTemplate", "ResponseParser", "compile_template", "parse_response", "__version__"]
