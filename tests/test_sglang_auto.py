"""``--tool-call-parser auto`` / ``--reasoning-parser auto`` pick chatparse for every bundled family, and the
plugin then serves the checkpoint from its chat template alone.

One level below SGLang's start-up (`sglang.srt.parser.template_detection.resolve_auto_parsers`, which needs a
`ServerArgs` and loads the checkpoint's tokenizer): SGLang's own detection functions, `detect_tool_call_parser`
and `detect_reasoning_parser`, which run the rule tuples `resolve_auto_parsers` and `TemplateManager` run, on
the chat template of each bundled family (tests/chat_templates/<family>.jinja, each of which
`chatparse.templates.family_of_chat_template` recognises: tests/test_fingerprints.py). Then the plugin's
detectors, built by SGLang's `FunctionCallParser` / `ReasoningParser` for a tokenizer with that chat template,
a local path as its name and no ``response_template`` (what a fine-tuned checkpoint has), resolve that family.

Run in the SGLang venv (.ci/run makes it); elsewhere this file skips, saying so.
"""

from __future__ import annotations

import logging
import pathlib

import pytest
from deps import need_sglang


need_sglang()

from sglang.srt.entrypoints.openai.protocol import Tool  # noqa: E402
from sglang.srt.function_call.function_call_parser import FunctionCallParser  # noqa: E402
from sglang.srt.parser import template_detection  # noqa: E402
from sglang.srt.parser.reasoning_parser import ReasoningParser  # noqa: E402

from chatparse import templates  # noqa: E402
from chatparse.integrations import sglang as plugin  # noqa: E402

logging.getLogger("sglang").setLevel(logging.CRITICAL)

CHAT_TEMPLATES = pathlib.Path(__file__).resolve().parent / "chat_templates"
FAMILIES = sorted(p.stem for p in CHAT_TEMPLATES.glob("*.jinja"))
# a chat template no bundled family recognises (plain turns, no tool or reasoning markup)
PLAIN = "{% for m in messages %}<|turn|>{{ m['role'] }}\n{{ m['content'] }}\n{% endfor %}<|turn|>assistant\n"
TOOL = Tool(type="function", function={"name": "f", "parameters": {"type": "object", "properties": {}}})


def _chat_template(family: str) -> str:
    return (CHAT_TEMPLATES / f"{family}.jinja").read_text(encoding="utf-8")


class _Tokenizer:
    """What the detectors read of a tokenizer: a local checkpoint path naming no family, no response_template in
    its config, and the family's chat template."""

    def __init__(self, chat_template: str):
        self.name_or_path = "/models/fine-tuned"
        self.init_kwargs: dict = {}
        self.chat_template = chat_template


@pytest.fixture(scope="module", autouse=True)
def _registered():
    plugin.register()


def test_every_bundled_family_has_a_chat_template_here():
    assert FAMILIES == sorted(templates.names())


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_picks_chatparse(family):
    text = _chat_template(family)
    assert templates.family_of_chat_template(text) == family
    assert template_detection.detect_tool_call_parser(text, None) == plugin.NAME
    assert template_detection.detect_reasoning_parser(text, None) == plugin.NAME


@pytest.mark.parametrize("family", FAMILIES)
def test_the_picked_plugin_serves_the_family(family):
    tokenizer = _Tokenizer(_chat_template(family))
    plugin._models.clear()
    tools = FunctionCallParser([TOOL], plugin.NAME, tokenizer=tokenizer, prefix="")
    reasoning = ReasoningParser(plugin.NAME, tokenizer=tokenizer, prefix="")
    for detector in (tools.detector, reasoning.detector):
        resolution = detector._model.resolution
        assert (resolution.source, resolution.family) == ("chat template", family)


def test_auto_leaves_other_chat_templates_to_sglang():
    assert templates.family_of_chat_template(PLAIN) is None
    assert template_detection.detect_tool_call_parser(PLAIN, None) != plugin.NAME
    assert template_detection.detect_reasoning_parser(PLAIN, None) != plugin.NAME


def test_register_twice_adds_one_rule():
    plugin.register()
    for attr in ("TOOL_CALL_PARSER_RULES", "REASONING_PARSER_RULES"):
        rules = getattr(template_detection, attr)
        assert [r.name for r in rules].count(plugin.NAME) == 1
        assert rules[0].name == plugin.NAME
