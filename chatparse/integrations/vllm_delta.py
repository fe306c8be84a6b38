"""Text-only `DeltaMessage`s for the vLLM plugin's hot path, built without pydantic's validation.

Most deltas of a generation carry only text (content, reasoning, or both). vLLM builds each with
``DeltaMessage(content=text)``, which runs pydantic's validation and vLLM's ``__log_extra_fields__`` wrap
validator: about 2.2 µs, most of what vLLM's stream processor spends per delta. The fields of a text delta
are known to be valid (strings), so the functions here fill the model's slots directly, as pydantic's own
validation leaves them (the fields, the set of fields given, no extras, no private attributes): about 0.7 µs.

That reads pydantic's internals, so it is checked once, at import, against the validated constructor: the
objects must compare equal and serialize alike (`model_dump`, ``model_dump_json(exclude_unset=True)``,
`model_fields_set`, `model_extra`, `model_copy`). If any check fails (another pydantic), every function here
is the validated constructor (`FAST` is False), and the plugin is only slower.
"""

from __future__ import annotations

from pydantic import BaseModel
from vllm.entrypoints.generate.base.protocol import DeltaMessage

__all__ = ["FAST", "content_delta", "delta_of", "reasoning_delta", "text_delta"]


def _slot_setters():
    slots = BaseModel.__dict__
    return tuple(slots[name].__set__ for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__",
                                                   "__pydantic_private__"))


def _direct_functions():
    new = object.__new__
    set_dict, set_fields, set_extra, set_private = _slot_setters()

    def one_field(name: str):
        def build(text: str, D=DeltaMessage) -> DeltaMessage:
            values = {"role": None, "content": None, "reasoning": None, "tool_calls": []}
            values[name] = text
            m = new(D)
            set_dict(m, values)
            set_fields(m, {name})
            set_extra(m, {})
            set_private(m, None)
            return m
        return build

    def text_delta(content: str | None, reasoning: str | None, D=DeltaMessage) -> DeltaMessage:
        m = new(D)
        set_dict(m, {"role": None, "content": content, "reasoning": reasoning, "tool_calls": []})
        set_fields(m, {name for name, value in (("reasoning", reasoning), ("content", content)) if value is not None})
        set_extra(m, {})
        set_private(m, None)
        return m

    return one_field("content"), one_field("reasoning"), text_delta


def _validated_functions():
    def one_field(name: str):
        return lambda text: DeltaMessage(**{name: text})

    def text_delta(content: str | None, reasoning: str | None) -> DeltaMessage:
        given = {name: value for name, value in (("reasoning", reasoning), ("content", content)) if value is not None}
        return DeltaMessage(**given)

    return one_field("content"), one_field("reasoning"), text_delta


def _same(a: DeltaMessage, b: DeltaMessage) -> bool:
    return (a == b and type(a) is type(b) and a.model_dump() == b.model_dump()
            and a.model_dump_json(exclude_unset=True) == b.model_dump_json(exclude_unset=True)
            and a.model_fields_set == b.model_fields_set and a.model_extra == b.model_extra
            and a.model_copy(update={"content": "x"}) == b.model_copy(update={"content": "x"})
            and a.__pydantic_private__ == b.__pydantic_private__)


def _agree(direct, validated) -> bool:
    """Whether the direct functions build what the validated ones build, for every shape they make."""
    try:
        return all(_same(d(*args), v(*args)) for d, v, args in (
            (direct[0], validated[0], ("a b",)), (direct[1], validated[1], ("r",)),
            (direct[2], validated[2], ("c", "r")), (direct[2], validated[2], (None, "r")),
            (direct[2], validated[2], ("c", None)), (direct[2], validated[2], ("", "r"))))
    except Exception:  # noqa: BLE001 (any failure: another pydantic; the validated constructor is used)
        return False


_VALIDATED = _validated_functions()
try:
    _DIRECT = _direct_functions()
except (KeyError, AttributeError):
    _DIRECT = None
FAST = _DIRECT is not None and _agree(_DIRECT, _VALIDATED)
content_delta, reasoning_delta, text_delta = _DIRECT if FAST else _VALIDATED


def delta_of(content: str, reasoning: str) -> DeltaMessage | None:
    """What vLLM's `_DeltaBuilder.build` gives for a delta of these texts and no tool calls: an empty text is
    a field not given; both empty, no delta (None)."""
    if reasoning:
        return text_delta(content or None, reasoning)
    return content_delta(content) if content else None
