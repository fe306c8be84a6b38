"""The bundled templates against real model outputs that other projects test or document.

`tests/real_outputs/<family>.json` holds, per bundled template name, outputs copied verbatim from a citable
source (vLLM's and SGLang's tool-parser and reasoning-parser tests, llama.cpp's chat tests, model cards and
chat templates; `source` names the repository, path and test), the chat prompt's end where the output needs
it (`prefix`), and the message the source expects, translated to a message dict (`expected`) or the error it
expects (`expected_error`). `tests/real_outputs/README.md` states the file layout and how a source's
assertions were translated.

For each case:

* `test_real_output` parses it with the bundled template one-shot (`parse_response`) and streamed
  (`ResponseParser`, the output fed whole, one character at a time and in seeded random pieces) and requires
  exactly the expected message (or the expected error). A case chatparse does not parse as its source expects
  carries `"xfail": "<class>:<what>"` and is a strict xfail, so a fix shows up as XPASS. The classes:
  ``gap:`` the bundled template can be fixed within the base format; ``needs:`` only a format extension can
  express it (the extension's name follows); ``malformed:`` the output is broken and a server recovers
  from it (it keeps the text as content, or drops the bad call), which the base format cannot.
* `test_real_output_with_extension` runs the cases that carry `template_overrides` (keys merged into the
  bundled template's fields: extension keys, and base keys where the source's parser cuts or joins otherwise,
  which the note says) with that template, once every extension the case `needs` is registered in
  `chatparse.runtime.values.extensions`; until then it skips, saying which is missing. The template must use exactly
  the extensions `needs` names (`needs: []`: a base-format template, which transformers' reference must then
  parse to the same message). A case whose source expects what the extension does not give carries
  ``"extension_xfail": "<why>"`` (strict).
* `test_same_as_reference` parses every case one-shot with transformers' reference interpreter
  (``transformers.utils.chat_parsing.parse_response``, the same bundled template, prefix and tools) and requires
  the outcome chatparse gives: the same message, or the same exception class and text. This holds for the
  xfail cases too, whose message differs from what the source expects but must still be the reference's: the
  corpus is real text the differential tests with generated templates never produce. A case where they differ is
  listed in `REFERENCE_DIFFERENCES` with the reason (a strict xfail); none is. Skipped without transformers.
* `test_family_wide_overrides_keep_every_passing_case_of_the_family`: the overrides listed in
  `FAMILY_WIDE_OVERRIDES` (candidates for the bundled template) parse every case of their family that the bundled
  template parses, as expected (and, when they use no extension, as the reference does).
* `test_case_files_well_formed` checks the files themselves (keys, ids, classes, families).

The whole module parses every case a few times and takes a few seconds.
"""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import pytest
from deps import need

from chatparse import ResponseParser, parse_response, templates
from chatparse.compiler.validate import load_template

DIR = Path(__file__).resolve().parent / "real_outputs"
CASE_KEYS = {"id", "source", "prefix", "output", "expected", "expected_error", "note", "xfail", "needs",
             "template_overrides", "tools", "extension_xfail"}
XFAIL_CLASSES = ("gap", "needs", "malformed")
N_RANDOM = 2  # seeded random chunkings per case, besides whole and one character at a time
# Cases on which transformers' reference gives another outcome than chatparse: case id -> the reason. None so far
# (every case agrees, messages and error texts alike); a case listed here is a strict xfail.
REFERENCE_DIFFERENCES: dict[str, str] = {}


def _load() -> list[dict]:
    """Every case of every family file, each with its family name under `family`, in file and case order."""
    out = []
    for path in sorted(DIR.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for case in data["cases"]:
            out.append(dict(case, family=data["family"], file=path.name))
    return out


CASES = _load()


def registered_extensions() -> set[str]:
    """Names under which extensions are registered in `chatparse.runtime.values.extensions`: each registry name
    (``python_calls``), each field key that opts into one (``key_aliases``) and each content parser name
    (``python-calls``), so a case may name an extension either way. Empty when the registry does not exist."""
    try:
        from chatparse.runtime.values import extensions
    except ImportError:
        return set()
    return set(extensions.EXTENSIONS) | set(extensions.field_keys()) | set(extensions.content_names())


def same(a, b) -> bool:
    """Equal values of identical types (1 != 1.0 != True); dict key order does not matter (a source does not
    fix the order of a message's fields)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def chunkings(text: str, case_id: str) -> list[list[str]]:
    """The output whole, one character at a time, and `N_RANDOM` seeded random cuts into 1..7-character
    pieces (seeded by the case id, so a failure reproduces)."""
    rng = random.Random(zlib.crc32(case_id.encode()))
    out = [[text], list(text)]
    for _ in range(N_RANDOM):
        pieces, i = [], 0
        while i < len(text):
            n = rng.randint(1, 7)
            pieces.append(text[i:i + n])
            i += n
        out.append(pieces)
    return out


def template_for(case: dict, with_overrides: bool) -> dict:
    """The bundled template of the case's family; with `with_overrides`, each field of `template_overrides`
    merged into it key by key (a `null` value removes the key; a field not in the template is added)."""
    template = templates.get(case["family"])
    if with_overrides:
        templates.merge_fields(template, case["template_overrides"])
    return template


def check(case: dict, template: dict) -> None:
    """Parse the case one-shot and in every chunking; each must give the expected message or error."""
    kwargs = {"prefix": case["prefix"]}
    if "tools" in case:
        kwargs["tools"] = case["tools"]
    if "expected_error" in case:
        want = case["expected_error"]
        exc = {"ValueError": ValueError, "KeyError": KeyError, "TypeError": TypeError}[want["type"]]
        with pytest.raises(exc, match=want.get("match")):
            parse_response(case["output"], template, **kwargs)
        for pieces in chunkings(case["output"], case["id"]):
            with pytest.raises(exc, match=want.get("match")):
                parser = ResponseParser(template, **kwargs)
                for piece in pieces:
                    parser.feed(piece)
                parser.finalize()
        return
    want = case["expected"]
    got = parse_response(case["output"], template, **kwargs)
    assert same(got, want), _mismatch("one-shot", case, got)
    for n, pieces in enumerate(chunkings(case["output"], case["id"])):
        parser = ResponseParser(template, **kwargs)
        for piece in pieces:
            parser.feed(piece)
        got, _ = parser.finalize()
        assert same(got, want), _mismatch(f"streamed (chunking {n}, {len(pieces)} pieces)", case, got)


def _mismatch(what: str, case: dict, got) -> str:
    return (f"{what} [{case['id']}] ({case['source']})\n  output:   {case['output']!r}\n"
            f"  expected: {json.dumps(case['expected'], ensure_ascii=False)}\n"
            f"  got:      {json.dumps(got, ensure_ascii=False, default=repr)}")


def _params():
    out = []
    for case in CASES:
        marks = []
        if case.get("xfail"):
            marks.append(pytest.mark.xfail(strict=True, reason=case["xfail"]))
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_real_output(case):
    check(case, template_for(case, with_overrides=False))


def _override_params():
    cases = [c for c in CASES if "template_overrides" in c]
    return [pytest.param(c, id=c["id"], marks=[pytest.mark.xfail(strict=True, reason=c["extension_xfail"])]
                         if "extension_xfail" in c else []) for c in cases] or [
        pytest.param(None, id="none", marks=pytest.mark.skip(reason="no case has template_overrides"))]


@pytest.mark.parametrize("case", _override_params())
def test_real_output_with_extension(case):
    have = registered_extensions()
    missing = [name for name in case["needs"] if name not in have]
    assert not missing, f"extension(s) {', '.join(missing)} not registered in chatparse's extensions"
    template = template_for(case, with_overrides=True)
    assert extension_names(case["needs"]) == load_template(template).get("extensions", []), (
        f"{case['id']}: the overridden template does not use exactly the extensions it needs")
    check(case, template)
    if not case["needs"]:  # a base-format template: the reference must agree
        ref = need("transformers.utils.chat_parsing")
        ours, theirs = outcome(parse_response, case, template), outcome(ref.parse_response, case, template)
        assert ours[0] == theirs[0] == "message" and same(ours[1], theirs[1]), (case["id"], ours, theirs)


def extension_names(needs: list) -> list:
    """The sorted extension names (what a normalized template's ``extensions`` lists) of `needs`, whose entries
    may name an extension, one of its field keys or its content parser."""
    from chatparse.runtime.values import extensions
    by = {**{n: n for n in extensions.EXTENSIONS}, **extensions.field_keys(), **extensions.content_names()}
    return sorted({by[n] for n in needs})


# Cases whose template_overrides are meant for their whole family (a candidate for the bundled template, not a
# per-case choice such as a source's raw joining): every case of the family the bundled template passes must
# pass with them too (one-shot and streamed), and with a base-format override transformers' reference must agree.
FAMILY_WIDE_OVERRIDES = ["deepseek_v3-vllm-malformed-1", "deepseek_v31-vllm-missing-call-markers", "kimi_k2-sglang-invalid",
                         "minimax_m1-vllm-invalid-json-line", "qwen3-sglang-two-calls-one-block",
                         "glm45-sglang-array-escaped-json-raw", "glm47-sglang-array-escaped-json-raw"]
# (not qwen3_coder's override without its value parser: it passes this corpus, but other corpora want typed values
# without tools, so it stays a per-case choice, like granite4's and longcat's raw joining)


@pytest.mark.parametrize("source_id", FAMILY_WIDE_OVERRIDES)
def test_family_wide_overrides_keep_every_passing_case_of_the_family(source_id):
    source = next(c for c in CASES if c["id"] == source_id)
    ref = need("transformers.utils.chat_parsing") if not source["needs"] else None
    checked = 0
    for case in CASES:
        if case["family"] != source["family"] or case.get("xfail"):
            continue
        with_override = dict(case, template_overrides=source["template_overrides"])
        template = template_for(with_override, with_overrides=True)
        check(case, template)
        if ref is not None:
            ours, theirs = outcome(parse_response, case, template), outcome(ref.parse_response, case, template)
            assert ours[0] == theirs[0] and (same(ours[1], theirs[1]) if ours[0] == "message" else ours == theirs), \
                (case["id"], ours, theirs)
        checked += 1
    assert checked >= 3, source_id


def outcome(parse, case: dict, template: dict):
    """What `parse` (chatparse's or the reference's ``parse_response``) makes of the case: ``("message", dict)``
    or ``("error", exception class name, exception text)``. Any exception counts: the point is that both sides
    fail alike, not which failures are expected."""
    kwargs = {"prefix": case["prefix"]}
    if "tools" in case:
        kwargs["tools"] = case["tools"]
    try:
        return ("message", parse(case["output"], template, **kwargs))
    except Exception as exc:  # noqa: BLE001 - compared with the reference's, not handled
        return ("error", type(exc).__name__, str(exc))


def _reference_params():
    out = []
    for case in CASES:
        marks = []
        if case["id"] in REFERENCE_DIFFERENCES:
            marks.append(pytest.mark.xfail(strict=True, reason=REFERENCE_DIFFERENCES[case["id"]]))
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.parametrize("case", _reference_params())
def test_same_as_reference(case):
    ref = need("transformers.utils.chat_parsing")
    ours = outcome(parse_response, case, template_for(case, with_overrides=False))
    theirs = outcome(ref.parse_response, case, template_for(case, with_overrides=False))
    if ours[0] == theirs[0] == "message":
        assert same(ours[1], theirs[1]), (
            f"[{case['id']}] ({case['source']}) chatparse and transformers' reference differ\n"
            f"  output:    {case['output']!r}\n  chatparse: {json.dumps(ours[1], ensure_ascii=False, default=repr)}\n"
            f"  reference: {json.dumps(theirs[1], ensure_ascii=False, default=repr)}")
    else:
        assert ours == theirs, (f"[{case['id']}] ({case['source']}) chatparse and transformers' reference differ\n"
                                f"  output:    {case['output']!r}\n  chatparse: {ours!r}\n  reference: {theirs!r}")


def test_case_files_well_formed():
    assert CASES, f"no case files in {DIR}"
    names = set(templates.names())
    seen = set()
    unknown_ids = set(REFERENCE_DIFFERENCES) - {case["id"] for case in CASES}
    assert not unknown_ids, f"REFERENCE_DIFFERENCES names no case: {sorted(unknown_ids)}"
    for case in CASES:
        cid = case["id"]
        assert case["file"] == f"{case['family']}.json", f"{case['file']}: family {case['family']!r}"
        assert case["family"] in names, f"{cid}: no bundled template {case['family']!r}"
        assert cid.startswith(case["family"] + "-") and cid not in seen, f"duplicate or misnamed id {cid}"
        seen.add(cid)
        unknown = set(case) - CASE_KEYS - {"family", "file"}
        assert not unknown, f"{cid}: unknown keys {sorted(unknown)}"
        assert case["source"].strip() and isinstance(case["output"], str) and isinstance(case["prefix"], str), cid
        assert ("expected" in case) != ("expected_error" in case), f"{cid}: needs exactly one of expected / expected_error"
        if "expected" in case:
            assert case["expected"].get("role") == "assistant", f"{cid}: expected message without role"
        xfail = case.get("xfail")
        if xfail:
            cls, _, what = xfail.partition(":")
            assert cls in XFAIL_CLASSES and what, f"{cid}: xfail {xfail!r} is not '<gap|needs|malformed>:<what>'"
        if "template_overrides" in case:
            assert isinstance(case.get("needs"), list), f"{cid}: template_overrides without 'needs' (a list)"
        if case.get("needs"):
            assert "template_overrides" in case or (xfail or "").startswith("needs:"), cid


def summary() -> str:
    """Per family: cases, cases expected to pass, and xfails by class (what the report counts)."""
    rows: dict[str, dict[str, int]] = {}
    for case in CASES:
        row = rows.setdefault(case["family"], {"cases": 0, "pass": 0, "gap": 0, "needs": 0, "malformed": 0})
        row["cases"] += 1
        cls = (case.get("xfail") or "pass").split(":")[0]
        row[cls] += 1
    lines = ["| family | cases | pass | gap | needs | malformed |", "|---|---|---|---|---|---|"]
    total = dict.fromkeys(["cases", "pass", "gap", "needs", "malformed"], 0)
    for name in sorted(rows):
        r = rows[name]
        lines.append(f"| {name} | " + " | ".join(str(r[k]) for k in total) + " |")
        for k in total:
            total[k] += r[k]
    lines.append("| total | " + " | ".join(str(total[k]) for k in total) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary())
