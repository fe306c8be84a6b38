"""Chat-template round trips (issue #17, item 3b): for every family in tests/chat_roundtrip.py's CAPS table, 500
random assistant messages rendered with tests/chat_templates/<family>.jinja are parsed back to the same message
one-shot, streamed and per token (every 10th also by the transformers reference). A case kind the family's
template has a known gap for (``Caps.xfail``) runs in a strict-xfail test of its own, so the fix shows up.
"""

from __future__ import annotations

import pytest
from deps import need

need("jinja2")
need("tokenizers")
import chat_roundtrip as cr  # noqa: E402

N = 500
FAMILIES = sorted(cr.CAPS)


def _explain(report) -> str:
    lines = [f"{report.family}: {len(report.failures)} of {report.n} messages fail ({report.kinds})"]
    for i, kind, fails, turn in report.failures[:3]:
        lines.append(f"  message {i} ({kind or 'plain'}): turn {turn[:300]!r}")
        lines += [f"    {f}" for f in fails]
    return "\n".join(lines)


@pytest.mark.parametrize("family", FAMILIES)
def test_round_trip(family):
    kinds = {k for k in cr.KINDS if not cr.known_gap(family, k)}
    report = cr.run_family(family, N, kinds=kinds, reference_every=10)
    assert report.n == N
    assert not report.failures, _explain(report)


XFAILS = [(f, kind) for f in FAMILIES for kind in cr.KINDS if cr.known_gap(f, kind)]


def test_known_gaps_still_show():
    """Each known gap (`CAPS`' xfail entries) still fails its round trip: one that no longer does must leave the
    list, so that its kind is tested again. (One test over the list rather than a strict xfail per gap: with no
    gap left, as now, an empty parametrization would be reported as a skip.)"""
    for family, kind in XFAILS:
        report = cr.run_family(family, 40, kinds={kind})
        assert report.n == 40
        assert report.failures, f"{family}/{kind}: the known gap ({cr.known_gap(family, kind)}) no longer shows"


def test_every_restriction_has_a_reason():
    for family, caps in cr.CAPS.items():
        for name, (value, reason) in caps.restrictions().items():
            assert reason, f"{family}: restriction {name}={value!r} has no reason"
        for kind, reason in caps.xfail.items():
            assert reason and kind in cr.KINDS, (family, kind)


def test_every_capability_family_has_a_chat_template():
    for family in FAMILIES:
        assert (cr.CHAT_TEMPLATES / f"{family}.jinja").exists(), family


def test_generator_covers_every_json_type():
    """Over a few hundred unrestricted messages every argument kind, 0-3 calls, and split content occur."""
    import random

    rng = random.Random(0)
    seen, ncalls, kinds = set(), set(), set()
    caps = cr.Caps()

    def walk(v):
        seen.add(type(v).__name__)
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for _ in range(300):
        s = cr.random_message(rng, caps)
        calls = s.message.get("tool_calls", [])
        ncalls.add(len(calls))
        kinds.add(s.kind)
        for c in calls:
            walk(c["function"]["arguments"])
    assert {"str", "int", "float", "bool", "NoneType", "dict", "list"} <= seen
    assert ncalls == {0, 1, 2, 3}
    assert kinds == set(cr.KINDS)


def test_a_wrong_message_is_caught():
    """The checker is not vacuous: a message that differs from the rendered one fails in all three modes."""
    import random

    family = FAMILIES[0]
    rng = random.Random(1)
    s = cr.random_message(rng, cr.CAPS[family])
    s.message["content"] = s.message.get("content", "") + " extra"
    fails = cr.check_message(family, s, rng)
    assert [f.split(":")[0] for f in fails] == ["one-shot", "streamed", "per token"]
