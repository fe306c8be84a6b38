"""When events are handed out, against the installed transformers reference, at every one-character feed.

The rule under test is docs/differences.md's ("When events are handed out"): at every
feed, chatparse has handed out what the reference has, or more; where more, it was certain (every one-shot
run of the reference over the text so far and a continuation begins with it). chatparse is behind the
reference only

* where the reference committed something that more text can still change: one of its own one-shot runs over
  the text so far plus some continuation does not begin with the events it handed out, or commits other
  delimiters than the ones it has committed, or a delimiter inside the text it handed out as region text.
  (`regex`'s partial search takes a complete match over an earlier or higher-priority partial one:
  ``</ab>|END|<``, the reference's spelling of the literal list ``["<", "END", "</ab>"]``, longest first,
  commits ``<`` on ``"</"`` although ``"</ab>"`` would make it ``</ab>``);
* or under the stated exception, tested for its rule (`regex_hold`) rather than skipped: what holds chatparse
  is its earliest attempt, and a pattern `regex` decides (a lookaround that is not a trailing lookahead or a
  leading lookbehind, a word boundary, ``$`` before the end, a backreference, a large counted repetition):
  either `regex` waits for the characters its assertions may read after the attempt (``Pattern.horizon``),
  or only such a pattern can still match further from the attempt's state (the tables step a superset of
  its matches). chatparse then catches up within that many characters (`Mode.cap` bounds the superset).

"Certain" is checked against the reference's own one-shot runs over the text so far followed by the end of
the stream, by each one, two and three characters of a small alphabet, runs of one character, and every tail
of every delimiter literal (and of each pattern's literal runs and spelled-out alternatives).

Every generated example that the reference runs is compared: a chatparse error or hang fails the test. An
example is discarded only for the input's reasons (the template makes the reference loop, or the reference
refuses it and chatparse refuses it the same way); the discards and the exception's cases are counted and
printed at the end of the module's run. The same stages in the serving dialect (``dialect="vllm"``, spans
left out) and per token are the default dialect's per character: one scanner decides for all of them.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from deps import needs_program
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st
from transformers.utils.chat_parsing import ResponseParser as RefParser

import chatparse
from harness import RefTimeout, normalize, time_limit
from strategies import _delims, compiles, templates, texts_for
from timing_rule import regex_hold

ERRORS = (ValueError, KeyError, TypeError, RuntimeError)
PREFIX = "<|A|>"
ALPHABET = "ab<>/x\n {}\"12"
ERROR = {"type": "error"}  # a feed that raised: the last "event" of a stage (see `is_prefix`)


class RecordingRef(RefParser):
    """The reference, recording every delimiter it commits as (kind, field, start, end) in its buffer, and
    the events of the `_process` call that raised last (``events``: what it handed out before the error)."""

    def __init__(self, *args, **kwargs):
        self.decided: list = []
        self.events: list = []
        super().__init__(*args, **kwargs)

    def _scan(self, watch, eos):
        best, hold = super()._scan(watch, eos)
        if best is not None:
            self.decided.append((best[0], best[1].name, best[2].start(), best[2].end()))
        return best, hold

    def _process(self, events, eos):
        self.events = events
        super()._process(events, eos)


def recording_chatparse(template, dialect=None):
    """chatparse's parser, keeping the events of a feed that raises as ``.events`` (as `RecordingRef`)."""
    p = chatparse.ResponseParser(template, prefix=PREFIX, dialect=dialect)
    core = p._core
    process = core._process

    def _process(events, eos):
        p.events = events
        process(events, eos)

    p.events = []
    core._process = _process
    return p


def _delimiters_only(events: list) -> list:
    return [e for e in events if e["type"] != "region_chunk"]


def is_prefix(a: list, b: list) -> bool:
    """Events `a` are a prefix of events `b` (normalized; `a`'s last chunk may be a prefix of `b`'s). Where
    either ends in `ERROR` (a value that failed to parse, raised where its region closed), only delimiter
    events and the error are compared (the chunks of the feed that raised are not all known)."""
    if a[-1:] == [ERROR] or b[-1:] == [ERROR]:
        a, b = _delimiters_only(a), _delimiters_only(b)
    if len(a) > len(b):
        return False
    for k, (x, y) in enumerate(zip(a, b)):
        if x == y:
            continue
        if not (k == len(a) - 1 and x["type"] == y["type"] == "region_chunk" and x["field"] == y["field"]
                and y["text"].startswith(x["text"])):
            return False
    return True


def stages(parser, text: str, record=None) -> tuple[list, list]:
    """Cumulative normalized events after the prefix and after each one-character feed, and ``record(parser)``
    after each. A feed that raises ends the list with the events so far (those of that feed included: the
    parser's ``events``) and `ERROR`."""
    events = list(parser.initial_events)
    out = [normalize(events)]
    extra = [record(parser)] if record else []
    for c in text:
        try:
            events += parser.feed(c)
        except ERRORS:
            out.append(normalize(events + parser.events) + [ERROR])
            if record:
                extra.append(record(parser))
            break
        out.append(normalize(events))
        if record:
            extra.append(record(parser))
    return out, extra


def _spelled(source: str) -> str:
    """A rough spelling of a pattern source: a class by its first character (a negated one by "z"), group
    syntax, quantifiers and anchors dropped; alternatives stay separated by "|". Only a source of tails."""
    s = re.sub(r"\(\?(?:P<\w+>|[:=!]|<[=!])|[()]", "", source)
    s = re.sub(r"\[\^[^\]]*\]", "z", s)
    s = re.sub(r"\[\\?([^\]])[^\]]*\]", r"\1", s)
    s = re.sub(r"\\[sSdDwW]", lambda m: {"s": " ", "d": "1", "W": "!"}.get(m.group()[1], "a"), s)
    return re.sub(r"\{\d*,?\d*\}|[?*+^$]|\\[bBAZ]", "", s).replace("\\n", "\n").replace("\\", "")


def tails(template) -> list[str]:
    """The continuations tried after the text so far (module docstring)."""
    pieces = _delims(template) + [run for f in template["fields"].values() for k, v in f.items()
                                  if k.endswith("_pattern") for run in re.findall(r"[^\\()\[\]|?*+{}.^$]+", v)]
    pieces += [alt for f in template["fields"].values() for k, v in f.items() if k.endswith("_pattern")
               for alt in _spelled(v).split("|") if alt]
    ends = {d[j:] for d in pieces for j in range(len(d))}
    short = ["".join(t) for n in (1, 2, 3) for t in itertools.product(ALPHABET if n < 3 else "ab<>/x\n", repeat=n)]
    runs = [c * n for c in ALPHABET for n in (4, 5, 6)]
    return ["", *short, *runs, *sorted(ends)]


def continuations(template, head: str, tail_list):
    """The reference's one-shot runs over `head` + each tail, then finalize: (events, committed delimiters).
    A run that raises ends in `ERROR`; a tail on which the reference loops is left out."""
    for tail in tail_list:
        try:
            with time_limit(2.0):
                p = RecordingRef(template, prefix=PREFIX)
                events = list(p.initial_events)
                try:
                    events += p.feed(head + tail)
                except ERRORS:
                    yield normalize(events + p.events) + [ERROR], p.decided
                    continue
                try:
                    events += p.finalize()[1]
                except ERRORS:
                    # (a value that fails where the end of the text closes its region: the error a feed of
                    # more text can raise as soon as the close is certain)
                    yield normalize(events + p.events) + [ERROR], p.decided
                    continue
        except RefTimeout:
            continue
        yield normalize(events), p.decided


def consistent(state, run_decided) -> bool:
    """Whether the reference's state after a feed (the delimiters it committed, and the offset up to which it
    handed everything out) agrees with the delimiters of a one-shot run: those are the run's first ones, and
    the run has no other delimiter starting in the text the reference handed out as region text."""
    decided, pos = state
    n = len(decided)
    return run_decided[:n] == decided and all(d[2] >= pos for d in run_decided[n:])


class Tally:
    def __init__(self):
        self.c: collections.Counter = collections.Counter()

    def line(self, name: str) -> str:
        return f"{name}: " + ", ".join(f"{k}={v}" for k, v in sorted(self.c.items()))


def _outcome(make, text):
    try:
        p = make()
        p.feed(text)
        return ("ok", p.finalize()[0])
    except ERRORS as e:
        return ("error", type(e).__name__)


def _without_spans(stage: list) -> list:
    return [{k: v for k, v in e.items() if k not in ("start", "end", "captures")} for e in stage]


def check_timing(template, text: str, tally: Tally, strict: bool = True):
    """Compare chatparse's events with the reference's at every one-character feed (the module's rule).
    Returns the list of (feed, kind) where they differ, or None for a discarded example; with `strict`,
    asserts the rule."""
    try:
        with time_limit(2.0):
            ref = RecordingRef(template, prefix=PREFIX)
    except RefTimeout:
        tally.c["discarded: the reference loops"] += 1
        return None
    except ERRORS as e:
        with pytest.raises(type(e)):
            chatparse.ResponseParser(template, prefix=PREFIX)
        tally.c["discarded: the reference refuses the template"] += 1
        return None
    try:
        with time_limit(2.0):
            theirs, decided = stages(ref, text, lambda p: (list(p.decided), p._pos))
            one_shot = _outcome(lambda: RefParser(template, prefix=PREFIX), text)
    except RefTimeout:
        tally.c["discarded: the reference loops"] += 1
        return None
    # chatparse's own stages: an error other than the reference's or a hang fails the test
    with time_limit(20.0):
        ours, holds = stages(recording_chatparse(template), text, regex_hold)
        served, _ = stages(recording_chatparse(template, "vllm"), text)
        final = _outcome(lambda: chatparse.ResponseParser(template, prefix=PREFIX), text)
    assert final == one_shot
    for k, (o, s) in enumerate(zip(ours, served)):
        s = _without_spans(s)
        if o[-1:] == [ERROR] or any(e["type"] == "region_malformed" for e in s):
            break  # (the serving dialect turns a value that fails to parse into an event and goes on)
        assert s == o, ("the serving dialect hands out other events", k)
    if theirs[-1][-1:] == [ERROR] or ours[-1][-1:] == [ERROR]:
        tally.c["examples ending in an error"] += 1
        n = min(len(ours), len(theirs))  # (compared up to the first raise)
        theirs, ours = theirs[:n], ours[:n]
    tally.c["examples"] += 1
    found = []
    tail_list = tails(template)
    for k, (v, c) in enumerate(zip(theirs, ours)):
        if v == c:
            continue
        runs = list(continuations(template, text[:k], tail_list))
        if is_prefix(v, c):
            bad = [r for r, _ in runs if not is_prefix(c, r)]
            if strict:
                assert not bad, ("chatparse handed out what more text changes", k, c, bad[:1])
            found.append((k, "earlier"))
            continue
        if not all(is_prefix(v, r) and consistent(decided[k], d) for r, d in runs):
            found.append((k, "the reference committed what more text changes"))
            continue
        bound = holds[k]
        caught = next((j for j in range(k + 1, len(ours)) if is_prefix(v, ours[j])), None)
        if bound is not None and (caught - k <= bound if caught is not None else len(ours) - 1 - k <= bound):
            found.append((k, "exception: held by a regex-decided pattern"))
            continue
        if strict:
            note(f"feed {k} {text[:k]!r}: reference {v!r}\nchatparse {c!r}")
            raise AssertionError(f"chatparse later than the reference at feed {k}: {text[:k]!r}")
        found.append((k, "LATER"))
    for kind in {kind for _, kind in found}:
        tally.c[f"examples with feeds where: {kind}"] += 1
    tally.c["feeds where: exception"] += sum(kind.startswith("exception") for _, kind in found)
    return found


TALLY = Tally()


@pytest.fixture(scope="module", autouse=True)
def _print_tally(request):
    yield
    if not TALLY.c:
        return
    line = TALLY.line("event timing against transformers, one-character feeds")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():  # (in the run's output whatever the capture mode)
        print("\n" + line)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_one_character_feeds_hand_out_events_no_later_than_the_reference(data):
    template = data.draw(templates())
    if not compiles(template):
        TALLY.c["discarded: the template makes the reference loop"] += 1
        return
    text = data.draw(texts_for(template))
    note(f"template={template!r}\ntext={text!r}")
    check_timing(template, text, TALLY)


# -- the cases behind the rule ----------------------------------------------------------------------------------

ISSUE_37 = {"start_anchor": ["<|start|>", "<|s2|>"], "defaults": {"role": "assistant"}, "fields": {
    "x": {"open": ["]]", "<a"], "close": "[["},
    "content": {"open": "::", "close": ["[[", "<b>"]},
    "y": {"open": ["<", "END", "</ab>"], "close": "END", "repeats": True, "content_args": {"strip": False}}}}


def test_a_literal_that_a_longer_one_of_its_list_extends_is_held():
    """Issue 37's example: fed ``][</`` after the prompt, the reference opens `y` on ``<`` and hands out
    ``/``; chatparse holds both until ``]`` arrives. The reference spells the literal list longest first
    (``</ab>|END|<``), so ``</ab>`` comes before ``<``, and ``"</"`` can still become it: fed one character
    at a time, ``][</ab>zzEND`` gives the reference ``/ab>zz`` where the whole text gives it ``zz``;
    chatparse gives ``zz`` for every split."""
    prefix = "junk<|start|>"
    text = "][</ab>zzEND"
    whole = _outcome(lambda: RefParser(ISSUE_37, prefix=prefix), text)
    assert whole == ("ok", {"role": "assistant", "y": ["zz"]})
    ref = RefParser(ISSUE_37, prefix=prefix)
    for c in text:
        ref.feed(c)
    assert ref.finalize()[0] == {"role": "assistant", "y": ["/ab>zz"]}
    for cuts in (list(text), [text[:4], text[4:]], [text]):
        p = chatparse.ResponseParser(ISSUE_37, prefix=prefix)
        events = [e for c in cuts for e in p.feed(c)]
        assert p.finalize()[0] == {"role": "assistant", "y": ["zz"]}, cuts
    # and the issue's own text: at "][</" the reference was not certain, at "][</]" chatparse hands it out
    p = chatparse.ResponseParser(ISSUE_37, prefix=prefix)
    assert [p.feed(c) for c in "][</"] == [[], [], [], []]
    events = normalize(p.feed("]"))
    assert events == [{"type": "region_open", "field": "y"},
                      {"type": "region_chunk", "field": "y", "text": "/]", "dirty": False}]
    found = check_timing(ISSUE_37 | {"start_anchor": PREFIX}, "][</]|]:] ]]/xa<a]x[[a>[x]", Tally())
    assert found == [(4, "the reference committed what more text changes")]


NO_HOLD = [
    # a lookbehind that fails where the attempt starts, beside a pattern without one: the attempt is decided
    # by the other pattern alone (`lead_assert`: the start state leaves the failing pattern out)
    ({"b": {"open": "b", "close_pattern": "(?:>/<x|/b)"},
      "content": {"close_pattern": "(?<=[ab])(?P<g>.{0,2}?[ab]>)", "transform": {"g": "{g}", "c": "{content}"},
                  "repeats": True}}, "/>/bb\n/a<b/\n<>aba>bb\n\na "),
    ({"tool": {"open_pattern": "(?<=[ab])(?P<g><b<<[^>]??)", "transform": {"g": "{g}", "c": "{content}"}},
      "b": {"open": ["<"], "close": "<", "repeats": True},
      "c": {"open": ">b", "close": ["<"], "content_args": {"strip": False}}}, "<>b"),
    # a pattern that is regex-decided only for its leading lookbehind: its tables are pruned as an exact
    # pattern's (`compiler/build.py`), so the lazy run ends at once
    ({"a": {"open": "b", "close_pattern": "(?<=[ab])/*?", "repeats": True}}, "bbbxb\nb/abb>bbb"),
    ({"c": {"open_pattern": "xb>*?b", "close_pattern": "/.<*?"},
      "b": {"open_pattern": "(?<=[ab])(?P<g>>??[ab]+/{0,2}?)", "close": "a",
            "transform": {"g": "{g}", "c": "{content}"}}}, "aab/<//"),
    # a trailing lookahead, read as consumed text, orders matches as `regex` does: pruned too (before, the
    # superset `.*[ab\n]` of the open held the whole rest of the stream until the end)
    ({"c": {"open_pattern": ".*?(?=[ab\\n])", "close_pattern": "abb\\s*"},
      "b": {"open": "</<b", "close": "bxb>", "repeats": True}, "tool": {"open": ["xx<"], "close": "<b"}},
     "x<ba/ / bxb> b abxb</<b<b\n>b\n<>bb b<\n"),
    ({"b": {"open_pattern": "(?P<g>[ab]*?)(?=[ab\\n])", "close": "!", "transform": {"g": "{g}", "c": "{content}"}},
      "content": {}}, "xxab\nb!xa!"),
]


@pytest.mark.parametrize("template, text", NO_HOLD)
def test_regex_decided_patterns_that_no_longer_hold_text(template, text):
    """Cases that were later than the reference (the stated exception) before the start states of
    `lead_assert` and the pruned tables of patterns whose only assertions are a leading lookbehind or a
    trailing lookahead: now at every feed no later."""
    template = {"defaults": {"role": "assistant"}, "start_anchor": PREFIX, "fields": template}
    found = check_timing(template, text, Tally())
    assert all(kind in ("earlier", "the reference committed what more text changes") for _, kind in found), found


@pytest.mark.parametrize("template, text, feeds", [
    # the tables step both alternatives and decide after "<b"; `regex` then reads one character after that
    # (the lookahead's), where the reference knew at "<b" that the first alternative matched
    ({"b": {"open_pattern": "<(?!x)|<b", "close": ">"}, "content": {}}, "z<b>z", {3}),
    # a word boundary: decided after "<b>", then one more character (here the end of the text)
    ({"b": {"open_pattern": "<b\\b|<bc", "close": ">"}, "content": {}}, "x<bc>z<b>", {9}),
    # a lookahead in the middle that the tables decide with the reference (no feed behind)
    ({"b": {"open_pattern": "<(?=[ab])[ab]", "close": ">"}, "content": {}}, "x<a>y<b>z", set()),
])
def test_the_stated_exception_holds_only_what_its_rule_says(template, text, feeds):
    """A delimiter `regex` decides is asked once the tables decide its attempt and the characters its
    assertions may read after that have arrived: chatparse is behind there, under `regex_hold`'s rule (and
    catches up within those characters, or at the end of the text), and nowhere else."""
    template = {"defaults": {"role": "assistant"}, "start_anchor": PREFIX, "fields": template}
    found = check_timing(template, text, Tally())
    assert {k for k, kind in found if kind.startswith("exception")} == feeds


@functools.lru_cache(maxsize=1)
def _byte_level():
    from token_support import byte_level_tokenizer

    return byte_level_tokenizer([])


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_per_token_events_are_the_per_character_ones(data):
    """Per token the same holding rule: `TokenParser` fed one id at a time hands out what `ResponseParser`
    fed the newly decoded text hands out (tests/token_support.py `run_tokens` checks every step), on the
    timing test's generated templates (lookbehind start states and pruned regex-decided patterns among them:
    the token paths' caches must not reuse a start that a lookbehind decided)."""
    from token_support import run_tokens

    template = data.draw(templates())
    if not compiles(template):
        return
    text = data.draw(texts_for(template))
    tok = _byte_level()
    b = chatparse.bind(template, tok)
    ids = tok.encode(text).ids
    try:
        run_tokens(b, PREFIX, ids)
    except (ValueError, KeyError, TypeError):
        with pytest.raises((ValueError, KeyError, TypeError)):
            chatparse.parse_response(text, template, prefix=PREFIX)


# -- the JavaScript runtime starts attempts as Python does --------------------------------------------------------

def _projected(compiled) -> bool:
    """Whether some mode starts attempts in a projected state (`lead_assert`), not only by the old rule."""
    for mode in compiled.tables.modes:
        for lead in (mode.lead_starts, mode.lead_starts0):
            if lead and any(g is not None and not g[2] for g in lead):
                return True
    return False


@needs_program("node", "the JavaScript reader")
def test_javascript_runtime_starts_attempts_where_python_does(tmp_path):
    """js/chatparse.mjs projects out the patterns whose leading lookbehind fails where an attempt starts, as
    `lead_assert` does (FORMAT.md, "Start guards"): conformance vectors of one-character feeds, in both
    dialects, for generated templates where that changes a start state and for the cases above, pass in
    node."""
    import make_vectors as mv
    from hypothesis import Phase

    from strategies import VALUE_PIECES

    items = [({"defaults": {"role": "assistant"}, "start_anchor": PREFIX, "fields": fields}, [text])
             for fields, text in NO_HOLD]

    # Templates with a projected start state are a few percent of the drawn ones, and how many varies: six runs
    # of 1,500 draws found 44-115 (12-81 in their first 800; a suite run of 800 found 10, under the 11 then asked)
    @settings(max_examples=1500, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def collect(data):
        template = data.draw(templates(failing=True))
        if compiles(template) and _projected(chatparse.compile_template(template)):
            texts = [data.draw(texts_for(template, VALUE_PIECES)) for _ in range(2)]
            if len(items) < len(NO_HOLD) + 40:
                items.append((template, texts))

    collect()
    assert len(items) >= len(NO_HOLD) + 20
    n = 0
    for i, (template, texts) in enumerate(items):
        compiled = chatparse.compile_template(template)
        cases = []
        for k, text in enumerate(texts):
            for dialect in (None, "vllm"):
                feeds = list(text) or [""]
                case = {"id": f"gen{i}-{k}-{dialect}", **({"dialect": dialect} if dialect else {}), "prefix": PREFIX,
                        "tools": None, "feeds": feeds, **mv.run_case(compiled, PREFIX, None, feeds, dialect)}
                if dialect:
                    case["oneshot"] = mv.run_oneshot(compiled, PREFIX, None, text, dialect)
                cases.append(case)
        mv.write_vector(tmp_path, f"gen{i}", template, compiled, cases)
        n += len(cases)
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([shutil.which("node"), str(root / "js" / "run_vectors.mjs"), str(tmp_path), "--json"],
                         capture_output=True, text=True, timeout=600, cwd=root)
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert out.returncode == 0 and summary["failed"] == 0 and summary["passed"] >= n, out.stdout[-3000:]
