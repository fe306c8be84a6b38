"""vLLM 0.33.0's own structural tags for the bundled templates (issue #18's comparison).

Run with vLLM's interpreter (its venv; this file imports nothing from chatparse, it reads the bundled
template files):

    /work/venv-vllm/bin/python bench/grammar_vllm_tags.py > /tmp/vllm_tags.json

For every family and tool_choice ("auto": the answer may stand instead of calls; "required": calls only),
calls `vllm.parser.response_template_grammar.tool_call_structural_tag` the way vLLM's beam parser does
(strict arguments, sorted arguments, parallel calls) with bench.grammar_soundness's tools, and records the tag,
or None (vLLM derives none: it then refuses strict tools, required and named tool choice), or the error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parents[1] / "chatparse" / "templates"
TOOLS = [
    {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"], "additionalProperties": False}},
    {"name": "search", "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}, "exact": {"type": "boolean"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "additionalProperties": False}},
    {"name": "refresh", "parameters": {"type": "object", "properties": {}}},
]


def main() -> int:
    from vllm.parser.chat_parsing.response_templates import load_response_template
    from vllm.parser.response_template_grammar import tool_call_structural_tag

    out = {}
    for path in sorted(p for p in TEMPLATES.glob("*.json") if p.name != "serving_overrides.json"):
        template = load_response_template(json.loads(path.read_text()))
        fields = template.fields
        row = {}
        for choice in ("auto", "required"):
            try:
                tag = tool_call_structural_tag(
                    fields.get("tool_calls"), TOOLS, parallel_tool_calls=True,
                    thinking=fields.get("reasoning_content"),
                    answer=fields.get("content") if choice == "auto" else None,
                    sorted_arguments=True, strict_arguments=True)
                row[choice] = tag
            except Exception as e:  # noqa: BLE001 - recorded: vLLM refuses the request then
                row[choice] = {"error": f"{type(e).__name__}: {e}"}
        out[path.stem] = row
    json.dump(out, sys.stdout, ensure_ascii=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
