"""The native runtime's character engine (issue #40; native/src/scanner.c, stream.c, engine_tables.c, regex.c,
engine_api.c) against the Python reference.

* every vector of tests/vectors through ``chatparse-vectors`` (template cases in both dialects with their one-shot
  results, token-mode cases, regex translations, values, invalid files): each case must pass, and the runner must
  have counted every case the files hold (so none is silently skipped);
* random differential vectors the Python reference writes now (``make_vectors.fuzz`` over every vector template,
  in both dialects, ``fuzz_templates`` over hypothesis-generated templates with failing bodies and
  lookbehind-led delimiters, ``fuzz_tokens`` for random ids), which the C runtime must parse exactly as Python did;
* edited expectations make the runner fail (a pass means something);
* the public parser API of native/include/chatparse.h, from a small C program: streamed one byte at a time and
  in one piece, the message and events as Python's json.dumps text, equal to Python's parse_response.

Builds native/ with CMake into build/native-engine (the library and chatparse-vectors).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

import make_vectors as mv
from native_build import build_native

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "native"
BUILD = ROOT / "build" / "native-engine"
VECTORS = ROOT / "tests" / "vectors"


def _build() -> Path:
    return build_native(BUILD, ("chatparse-vectors", "chatparse"), options=("-DCMAKE_BUILD_TYPE=RelWithDebInfo",))


@pytest.fixture(scope="module")
def build() -> Path:
    return _build()


@pytest.fixture(scope="module")
def runner(build) -> Path:
    return build / "chatparse-vectors"


def _run(runner: Path, directory: Path, *args: str) -> tuple[dict, list[str]]:
    r = subprocess.run([str(runner), str(directory), "--json", *args], capture_output=True, text=True, timeout=900)
    lines = r.stdout.strip().splitlines()
    assert lines, f"no output from chatparse-vectors (exit {r.returncode}):\n{r.stderr[-3000:]}"
    summary = json.loads(lines[-1])
    fails = [line[5:] for line in lines if line.startswith("FAIL ")]
    assert (r.returncode == 0) == (summary["failed"] == 0), r.stdout[-2000:]
    return summary, fails


def _has_astral(texts) -> bool:
    return any(ord(ch) > 0xFFFF for t in texts for ch in t)


def _expected_cases(directory: Path, kinds: set) -> int:
    """The cases the runner must count for the vector files of these kinds: every case, and for template cases
    whose text holds a character beyond U+FFFF one more (fed one byte at a time, as the JS runner feeds such
    cases one UTF-16 unit at a time)."""
    n = 0
    for f in sorted(directory.glob("*.json")):
        vec = json.loads(f.read_text(encoding="utf-8"))
        kind = vec.get("kind", "template")
        if kind not in kinds:
            continue
        if kind == "regex":
            n += sum(len(e["cases"]) for e in vec["patterns"])
        elif kind == "invalid":
            n += 1
        elif kind == "template":
            n += sum(1 + _has_astral(c["feeds"]) for c in vec["cases"])
        else:
            n += len(vec["cases"])
    return n


def _token_file(line: str) -> bool:
    return ".tok-" in line.split(" ", 1)[0]


def test_every_vector_passes(runner):
    """All of tests/vectors: template cases (both dialects, one-shot results, byte split runs), token-mode
    cases, regex and values vectors, every one counted."""
    summary, fails = _run(runner, VECTORS)
    assert not fails, "\n".join(fails[:40])
    # every case counted (the invalid files are a subdirectory: the next test)
    assert summary["passed"] == summary["total"] == _expected_cases(VECTORS, {"template", "tokens", "regex", "values"})


def test_invalid_files_refused_with_their_message(runner):
    summary, fails = _run(runner, VECTORS / "invalid")
    assert not fails, "\n".join(fails[:20])
    assert summary["passed"] == len(list((VECTORS / "invalid").glob("*.json")))


def test_token_vectors_pass(runner):
    """The token-mode vectors (tests/vectors/*.tok-*.json: three vocabularies, prompts as text or ids, split
    characters, byte-fallback runs, clean-up): decoded texts, events, messages and parse_tokens."""
    summary, fails = _run(runner, VECTORS, "--mode", "token")
    token_fails = [f for f in fails if _token_file(f)]
    assert not token_fails, "\n".join(token_fails[:30])
    assert _expected_cases(VECTORS, {"tokens"}) >= 503


def test_random_token_vectors(runner, tmp_path):
    """Random ids (a case's encoding with tokens split into bytes, random tokens inserted, or pure random ids),
    fed in random runs, either dialect, prompts as text or ids (make_vectors.fuzz_tokens), parsed by Python now
    and by C."""
    seed = random.randrange(10**6)
    n = mv.fuzz_tokens(tmp_path, per_template=10, seed=seed)
    summary, fails = _run(runner, tmp_path)
    note = (f"reproduce: python -c 'import sys; sys.path[:0] = [\"tests\"]; import make_vectors as mv; "
            f"from pathlib import Path; mv.fuzz_tokens(Path(\"/tmp/fz\"), 10, {seed})' && "
            "build/native-engine/chatparse-vectors /tmp/fz")
    assert not fails, note + "\n" + "\n".join(fails[:30])
    assert summary["passed"] == n


@pytest.mark.parametrize("dialect", [None, "vllm"])
def test_random_differential_vectors(runner, tmp_path, dialect):
    """Random texts full of partial, overlapping and interrupted delimiters for every vector template, fed in
    random pieces (make_vectors.fuzz), parsed by Python now and by C: the same per-feed events and messages."""
    seed = random.randrange(10**6)
    n = mv.fuzz(tmp_path, per_template=12, seed=seed, dialect=dialect)
    summary, fails = _run(runner, tmp_path)
    note = (f"reproduce: python tests/make_vectors.py --fuzz 12 --seed {seed}"
            f"{' --dialect vllm' if dialect else ''} --dir /tmp/fz && build/native-engine/chatparse-vectors /tmp/fz")
    assert not fails, note + "\n" + "\n".join(fails[:30])
    assert summary["passed"] >= n


def test_generated_templates_differential(runner, tmp_path):
    """Hypothesis-generated templates (tests/strategies.py: regex delimiters, bodies that fail to parse,
    lookbehind-led delimiters) in the serving dialect: C agrees with Python on every case of every template it
    accepts. A template C refuses must be refused by name ("cannot run in C"), for a translation PCRE2 cannot
    run (10.42: a lookbehind whose alternatives differ in length)."""
    from hypothesis import HealthCheck, assume, given, settings
    from hypothesis import strategies as hst

    from strategies import VALUE_PIECES, compiles, templates as gen_templates, texts_for

    items = []

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(hst.data())
    def collect(data):
        tpl = data.draw(gen_templates(failing=True))
        assume(compiles(tpl))
        texts = [(data.draw(hst.sampled_from(["", "<|A|>", "x<|A|>a<"])), data.draw(texts_for(tpl, VALUE_PIECES)))
                 for _ in range(3)]
        items.append((tpl, texts))

    collect()
    seed = random.randrange(10**6)
    mv.fuzz_templates(tmp_path, items, seed=seed, dialect="vllm")
    summary, fails = _run(runner, tmp_path)
    refused = [f for f in fails if "tables not loaded" in f]
    assert all("cannot run in C" in f for f in refused), "\n".join(refused[:10])
    other = [f for f in fails if "tables not loaded" not in f]
    assert not other, f"vectors in {tmp_path}\n" + "\n".join(other[:30])
    assert summary["passed"] > 0.9 * summary["total"], summary


def test_edited_vectors_fail(runner, tmp_path):
    """The comparisons bite: a changed chunk text, message value, dropped event, input_start, error stage and
    one-shot message each fail their case (and only those)."""
    for f in ("qwen3", "x_malformed", "glm45"):
        shutil.copy(VECTORS / f"{f}.cpt", tmp_path / f"{f}.cpt")
    q = json.loads((VECTORS / "qwen3.json").read_text(encoding="utf-8"))
    q["cases"][0]["feed_events"][0][1]["text"] += "X"
    q["cases"][1]["message"]["content"] = "nope"
    q["cases"][2]["feed_events"][0] = q["cases"][2]["feed_events"][0][:-1]
    (tmp_path / "qwen3.json").write_text(json.dumps(q), encoding="utf-8")
    g = json.loads((VECTORS / "glm45.json").read_text(encoding="utf-8"))
    vllm = next(c for c in g["cases"] if c.get("dialect") == "vllm")
    vllm["input_start"] += 1
    one = next(c for c in g["cases"] if "message" in c.get("oneshot", {}) and c is not vllm)
    one["oneshot"]["message"]["role"] = "user"
    (tmp_path / "glm45.json").write_text(json.dumps(g), encoding="utf-8")
    m = json.loads((VECTORS / "x_malformed.json").read_text(encoding="utf-8"))
    err = next(c for c in m["cases"] if c["error"])
    err["error"]["stage"] = "init" if err["error"]["stage"] != "init" else "finalize"
    (tmp_path / "x_malformed.json").write_text(json.dumps(m), encoding="utf-8")
    summary, fails = _run(runner, tmp_path)
    ids = {f.split(" ")[1].rstrip(":") for f in fails}
    want = {q["cases"][0]["id"], q["cases"][1]["id"], q["cases"][2]["id"], vllm["id"], one["id"], err["id"]}
    assert ids == want, "\n".join(fails)


API_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "chatparse.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(l ? l : 1);
    *n = fread(b, 1, l, f);
    fclose(f);
    return b;
}

int main(int argc, char **argv) {
    /* argv: tables prompt-file output-file dialect(0/1) tools-file-or-- */
    size_t tn, pn, on, toolsn = 0;
    char *tb = slurp(argv[1], &tn), *prompt = slurp(argv[2], &pn), *out = slurp(argv[3], &on);
    char *tools = strcmp(argv[5], "--") ? slurp(argv[5], &toolsn) : NULL;
    cp_error err = {0};
    cp_tables *t = cp_tables_load((const uint8_t *)tb, tn, &err);
    if (!t) { printf("LOAD %s: %s\n", err.exception, err.message); return 1; }
    cp_parser_options o = {atoi(argv[4]) ? CP_DIALECT_VLLM_EVENTS : CP_DIALECT_TRANSFORMERS_EVENTS, tools, toolsn};
    /* one piece */
    char *one = cp_parse_response(t, out, on, prompt, pn, &o, NULL, &err);
    printf("ONESHOT %s\n", one ? one : "null");
    if (!one) printf("ERROR %s: %s\n", err.exception, err.message);
    cp_free(one);
    /* streamed one byte at a time */
    cp_error e2 = {0};
    cp_parser *p = cp_parser_new(t, prompt, pn, &o, &e2);
    if (!p) { printf("NEW %s: %s\n", e2.exception, e2.message); return 1; }
    printf("INITIAL %s\n", cp_parser_initial_events(p, NULL));
    /* one character per feed (its UTF-8 bytes), then the same text one byte per feed */
    for (size_t i = 0; i < on;) {
        unsigned char c = (unsigned char)out[i];
        size_t k = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        char *ev = cp_parser_feed(p, out + i, k, NULL, &e2);
        if (!ev) { printf("FEED %s: %s\n", e2.exception, e2.message); return 1; }
        printf("FED %s\n", ev);
        cp_free(ev);
        i += k;
    }
    /* (this one over a shared engine) */
    cp_engine *engine = cp_engine_new(t, &e2);
    cp_parser *pb = engine ? cp_engine_parser(engine, prompt, pn, &o, &e2) : NULL;
    if (!pb) printf("ENGINE %s: %s\n", e2.exception, e2.message);
    for (size_t i = 0; pb && i < on; i++) {
        char *ev = cp_parser_feed(pb, out + i, 1, NULL, &e2);
        if (!ev) { printf("FEED %s: %s\n", e2.exception, e2.message); return 1; }
        if (strcmp(ev, "[]")) printf("BYTES %s\n", ev);
        cp_free(ev);
    }
    char *one2 = engine ? cp_engine_parse_response(engine, out, on, prompt, pn, &o, NULL, &e2) : NULL;
    printf("ONESHOT2 %s\n", one2 ? one2 : "null");
    cp_free(one2);
    char *mb = NULL;
    char *fb = pb ? cp_parser_finalize(pb, &mb, NULL, NULL, &e2) : NULL;
    if (fb) printf("BYTES %s\nBYTEMESSAGE %s\n", fb, mb);
    cp_free(fb);
    cp_free(mb);
    cp_parser_free(pb);
    cp_engine_free(engine);
    char *msg = NULL;
    char *fin = cp_parser_finalize(p, &msg, NULL, NULL, &e2);
    if (!fin) printf("FINAL-ERROR %s: %s\n", e2.exception, e2.message);
    else printf("EVENTS %s\nMESSAGE %s\n", fin, msg);
    /* after finalize every call fails, as Python's */
    cp_error e3 = {0};
    char *again = cp_parser_feed(p, "x", 1, NULL, &e3);
    printf("AFTER %s %s\n", again ? "ok" : e3.exception, e3.message);
    cp_free(fin);
    cp_free(msg);
    cp_parser_free(p);
    cp_tables_free(t);
    free(tb); free(prompt); free(out); free(tools);
    return 0;
}
"""


@pytest.fixture(scope="module")
def api_program(build, tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("api")
    (d / "api.c").write_text(API_PROGRAM, encoding="utf-8")
    exe = d / "api"
    pcre = subprocess.run(["pkg-config", "--libs", "libpcre2-8"], capture_output=True, text=True).stdout.split()
    r = subprocess.run([cc, "-std=c11", "-Wall", "-I", str(NATIVE / "include"), str(d / "api.c"),
                        str(build / "libchatparse.a"), *pcre, "-lm", "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def _api(exe: Path, tmp_path: Path, tables: Path, prompt: str, output: str, dialect: int, tools=None) -> dict:
    (tmp_path / "prompt").write_text(prompt, encoding="utf-8")
    (tmp_path / "out").write_text(output, encoding="utf-8")
    args = [str(exe), str(tables), str(tmp_path / "prompt"), str(tmp_path / "out"), str(dialect)]
    if tools is None:
        args.append("--")
    else:
        (tmp_path / "tools").write_text(json.dumps(tools), encoding="utf-8")
        args.append(str(tmp_path / "tools"))
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    got = {"events": [], "fed": [], "bytes": []}
    for line in r.stdout.splitlines():
        tag, _, rest = line.partition(" ")
        if tag == "EVENTS":
            got["events"] += json.loads(rest)
        elif tag == "FED":
            got["fed"].append(rest)
            got["events"] += json.loads(rest)
        elif tag == "BYTES":
            got["bytes"] += json.loads(rest)
        elif tag == "INITIAL":
            got["initial"] = json.loads(rest)
        elif tag in ("ONESHOT", "MESSAGE"):
            got[tag.lower()] = rest
        else:
            got[tag.lower()] = rest
    return got


def _merge_chunks(events: list) -> list:
    out = []
    for ev in events:
        if out and ev["type"] == "region_chunk" and out[-1]["type"] == "region_chunk" and out[-1]["field"] == ev["field"]:
            out[-1] = {**out[-1], "text": out[-1]["text"] + ev["text"]}
        else:
            out.append(ev)
    return out


@pytest.mark.parametrize("dialect", ["transformers", "vllm"])
def test_public_api_matches_python(api_program, tmp_path, dialect):
    """chatparse.h's parser API on a bundled template's tables: the one-shot message and, streamed one byte at a
    time, the events and message, as Python's json.dumps(v, separators=(",", ":")) text of what Python gives."""
    from chatparse import ResponseParser, parse_response, templates
    from chatparse.compiler.writer import dumps
    from chatparse import compile_template

    tpl = templates.get("qwen3")
    tables = tmp_path / "qwen3.cpt"
    tables.write_bytes(dumps(compile_template(tpl).raw_tables))
    prompt = "<|im_start|>user\nWeather in Paris? \U0001F600<|im_end|>\n<|im_start|>assistant\n"
    output = ("<think>\nOne call. \u00e9\U0001F600\n</think>\n\n<tool_call>\n"
              '{"name": "get_weather", "arguments": {"city": "Paris", "days": 3, "t": 1.0}}\n</tool_call><|im_end|>')
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]
    got = _api(api_program, tmp_path, tables, prompt, output, 1 if dialect == "vllm" else 0, tools)
    want_msg = parse_response(output, tpl, prefix=prompt, tools=tools, dialect=dialect)
    assert got["oneshot"] == got["oneshot2"] == json.dumps(want_msg, separators=(",", ":"))
    assert got["message"] == json.dumps(want_msg, separators=(",", ":"))
    p = ResponseParser(tpl, prefix=prompt, tools=tools, dialect=dialect)
    events = list(p.initial_events) if hasattr(p, "initial_events") else []
    fed = []
    for ch in output:
        ev = p.feed(ch)
        fed.append(json.dumps(ev, separators=(",", ":")))
        events += ev
    msg, final = p.finalize()
    events += final
    assert msg == want_msg
    # each feed's JSON text byte for byte (the quiet fast path's chunks included), then all events
    assert got["fed"] == fed
    assert _merge_chunks(got["initial"] + got["events"]) == _merge_chunks(json.loads(json.dumps(events)))
    # fed one byte at a time, by a parser over a shared cp_engine: the same regions and message
    assert got["bytemessage"] == got["message"]
    assert _merge_chunks(got["initial"] + got["bytes"]) == _merge_chunks(json.loads(json.dumps(events)))
    assert got["after"].startswith("RuntimeError ResponseParser already finalized")


def test_public_api_errors(api_program, tmp_path):
    """A missing required field is Python's ValueError with its message, in the one-shot and streamed paths;
    the parser is then finalized, as Python's is (a later feed: RuntimeError "already finalized")."""
    from chatparse import compile_template
    from chatparse.compiler.writer import dumps

    tpl = {"defaults": {"role": "assistant"}, "start_anchor": "<s>",
           "fields": {"content": {"close": "</s>"}, "answer": {"open": "<a>", "close": "</a>", "optional": False}}}
    tables = tmp_path / "t.cpt"
    tables.write_bytes(dumps(compile_template(tpl).raw_tables))
    got = _api(api_program, tmp_path, tables, "<s>", "just text</s>", 0)
    msg = "ValueError: Required response_template fields missing from parsed output: ['answer']"
    assert got["error"] == msg
    assert got["final-error"] == msg
    assert got["after"].startswith("RuntimeError ResponseParser already finalized")


API_IDS_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "chatparse.h"

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long l = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc(l + 1);
    *n = fread(b, 1, l, f);
    b[*n] = 0;
    fclose(f);
    return b;
}

/* ids of one line: "1 2 3" */
static size_t parse_ids(char *line, int64_t *out) {
    size_t n = 0;
    for (char *t = strtok(line, " "); t; t = strtok(NULL, " ")) out[n++] = strtoll(t, NULL, 10);
    return n;
}

int main(int argc, char **argv) {
    /* argv: tables dialect(0/1) prompt-mode(text|ids) prompt-file feeds-file shared-engine(0/1) */
    (void)argc;
    size_t tn, pn, fn;
    char *tb = slurp(argv[1], &tn), *prompt = slurp(argv[4], &pn), *feeds = slurp(argv[5], &fn);
    cp_error err = {0};
    cp_tables *t = cp_tables_load((const uint8_t *)tb, tn, &err);
    if (!t) { printf("LOAD %s: %s\n", err.exception, err.message); return 1; }
    cp_parser_options o = {atoi(argv[2]) ? CP_DIALECT_VLLM_EVENTS : CP_DIALECT_TRANSFORMERS_EVENTS, NULL, 0};
    int by_ids = strcmp(argv[3], "ids") == 0;
    int64_t *pids = calloc(pn + 1, sizeof *pids);
    size_t npids = by_ids ? parse_ids(prompt, pids) : 0;
    int64_t *all = calloc(fn + 1, sizeof *all);
    size_t nall = 0;
    /* odd cases over a shared engine (cp_engine_parser_ids), even ones with cp_parser_new_ids */
    cp_engine *engine = atoi(argv[6]) ? cp_engine_new(t, &err) : NULL;
    cp_parser *p = engine ? cp_engine_parser_ids(engine, by_ids ? NULL : prompt, by_ids ? 0 : pn, by_ids ? pids : NULL,
                                                 npids, &o, &err)
                          : cp_parser_new_ids(t, by_ids ? NULL : prompt, by_ids ? 0 : pn, by_ids ? pids : NULL, npids,
                                              &o, &err);
    if (!p) { printf("NEW %s: %s\n", err.exception, err.message); return 1; }
    printf("EVENTS %s\n", cp_parser_initial_events(p, NULL));
    int64_t *ids = calloc(fn + 1, sizeof *ids);
    char *save = NULL;
    for (char *line = strtok_r(feeds, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char copy[65536];
        snprintf(copy, sizeof copy, "%s", line);
        size_t n = parse_ids(copy, ids);
        memcpy(all + nall, ids, n * sizeof *ids);
        nall += n;
        char *ev;
        if (engine) {
            /* the struct API: its events as JSON (cp_events_json) are the JSON API's; each struct's own members
             * (type, field, text length, dirty) printed for the test to check against the JSON */
            const cp_event *evs = NULL;
            size_t k = 0;
            if (cp_parser_feed_ids_events(p, ids, n, &evs, &k, &err) < 0) {
                printf("FEED %s: %s\n", err.exception, err.message);
                return 1;
            }
            ev = cp_events_json(evs, k, NULL, &err);
            if (!ev) { printf("FEED %s: %s\n", err.exception, err.message); return 1; }
            printf("EVENTS %s\n", ev);
            printf("STRUCTS [");
            for (size_t i = 0; i < k; i++) {
                size_t fl = 0;
                const char *fname = cp_parser_field_name(p, evs[i].field, &fl);
                int name_ok = evs[i].field < 0 ? evs[i].field_name == NULL
                                               : fname == evs[i].field_name && fl == evs[i].field_name_len;
                printf("%s[%d,%ld,%d,%lld,%d]", i ? "," : "", (int)evs[i].type, evs[i].field, name_ok,
                       evs[i].text ? (long long)evs[i].text_len : -1LL, evs[i].dirty);
            }
            printf("]\n");
        } else {
            ev = cp_parser_feed_ids(p, ids, n, NULL, &err);
            if (!ev) { printf("FEED %s: %s\n", err.exception, err.message); return 1; }
            printf("EVENTS %s\n", ev);
        }
        cp_free(ev);
    }
    char *msg = NULL;
    char *fin = cp_parser_finalize(p, &msg, NULL, NULL, &err);
    if (!fin) { printf("FINAL %s: %s\n", err.exception, err.message); return 1; }
    printf("EVENTS %s\nMESSAGE %s\n", fin, msg);
    char *one = engine ? cp_engine_parse_ids(engine, all, nall, by_ids ? NULL : prompt, by_ids ? 0 : pn,
                                             by_ids ? pids : NULL, npids, &o, NULL, &err)
                       : cp_parse_ids(t, all, nall, by_ids ? NULL : prompt, by_ids ? 0 : pn, by_ids ? pids : NULL,
                                      npids, &o, NULL, &err);
    printf("ONESHOT %s\n", one ? one : "null");
    cp_free(fin); cp_free(msg); cp_free(one);
    cp_parser_free(p);
    cp_engine_free(engine);
    cp_tables_free(t);
    free(tb); free(prompt); free(feeds); free(pids); free(all); free(ids);
    return 0;
}
"""


@pytest.fixture(scope="module")
def api_ids_program(api_program) -> Path:
    d = api_program.parent
    (d / "api_ids.c").write_text(API_IDS_PROGRAM, encoding="utf-8")
    exe = d / "api_ids"
    cc = shutil.which("cc") or shutil.which("gcc")
    pcre = subprocess.run(["pkg-config", "--libs", "libpcre2-8"], capture_output=True, text=True).stdout.split()
    r = subprocess.run([cc, "-std=gnu11", "-Wall", "-I", str(NATIVE / "include"), str(d / "api_ids.c"),
                        str(BUILD / "libchatparse.a"), *pcre, "-lm", "-o", str(exe)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


def test_public_api_token_ids(api_ids_program, tmp_path):
    """cp_parser_new_ids / cp_parser_feed_ids / cp_parse_ids on token vectors' tables: the events, message and
    one-shot message of every case without an error, prompts as text and as ids; each feed's JSON text byte for
    byte Python's json.dumps of its events. Over a shared engine the feeds go through the struct API
    (cp_parser_feed_ids_events): its events written by cp_events_json are that same text, and each struct's
    type, field, text length and dirty flag are its JSON event's."""
    checked = exact = 0
    structs_checked = [0]
    for f in ("qwen3.tok-bl.json", "qwen3.tok-sp.json", "hermes.tok-uc.json", "x_malformed.tok-bl.json"):
        vec = json.loads((VECTORS / f).read_text(encoding="utf-8"))
        for c in vec["cases"]:
            if c["error"] is not None or "oneshot" not in c or "message" not in c["oneshot"] or c["tools"]:
                continue
            by_ids = "prefix_ids" in c
            (tmp_path / "prompt").write_text(" ".join(map(str, c["prefix_ids"])) if by_ids else c["prefix"],
                                             encoding="utf-8")
            (tmp_path / "feeds").write_text("\n".join(" ".join(map(str, ids)) or " " for ids in c["feeds"]),
                                            encoding="utf-8")
            r = subprocess.run([str(api_ids_program), str(VECTORS / vec["tables"]),
                                "1" if c.get("dialect") == "vllm" else "0", "ids" if by_ids else "text",
                                str(tmp_path / "prompt"), str(tmp_path / "feeds"), str(checked % 2)],
                               capture_output=True, text=True, timeout=60)
            assert r.returncode == 0, f"{f} {c['id']}: {r.stdout[-2000:]}"
            events, got, texts = [], {}, []
            types = {"region_open": 1, "region_chunk": 2, "region_close": 3, "region_malformed": 4}
            for line in r.stdout.splitlines():
                tag, _, rest = line.partition(" ")
                if tag == "EVENTS":
                    events += json.loads(rest)
                    texts.append(rest)
                elif tag == "STRUCTS":
                    # the struct events of the feed just printed as JSON: the same events, member by member
                    fed = json.loads(texts[-1])
                    structs = json.loads(rest)
                    assert len(structs) == len(fed), f"{f} {c['id']}"
                    for (typ, field, name_ok, text_len, dirty), e in zip(structs, fed):
                        assert typ == types.get(e["type"], 0) and name_ok == 1, (f, c["id"], e)
                        assert (field >= 0) == ("field" in e), (f, c["id"], e)
                        assert text_len == (len(e["text"].encode("utf-8")) if "text" in e else -1), (f, c["id"], e)
                        assert dirty == int(bool(e.get("dirty", False))), (f, c["id"], e)
                    structs_checked[0] += 1
                else:
                    got[tag] = json.loads(rest)
            want_events = c["initial_events"] + [e for fe in c["feed_events"] for e in fe] + c["final_events"]
            assert _merge_chunks(events) == _merge_chunks(want_events), f"{f} {c['id']}"
            # byte for byte Python's json.dumps(events, separators=(",", ":")), feed by feed (the fast path's
            # events included), where the vector holds Python's values as they are
            want_texts = [json.dumps(x, separators=(",", ":"))
                          for x in [c["initial_events"], *c["feed_events"], c["final_events"]]]
            if not any("$py" in w or "region_malformed" in w for w in want_texts):
                assert texts == want_texts, f"{f} {c['id']}"
                exact += 1
            assert got["MESSAGE"] == c["message"], f"{f} {c['id']}"
            assert got["ONESHOT"] == c["oneshot"]["message"], f"{f} {c['id']}"
            checked += 1
    assert checked >= 10 and exact >= 10 and structs_checked[0] >= 10


def test_lookbehinds(runner, tmp_path):
    """Lookbehinds: alternatives of different lengths ((?<=ab|c), translated (?<=(?:ab|c))) run on PCRE2 and give
    Python's parse, leading ones guarding attempt starts too; one PCRE2 10.42 cannot run (a counted repetition
    of varying length) is refused by name when the parser is made ("cannot run in C"), never misparsed."""
    from chatparse import compile_template

    rng = random.Random(5)
    run = {"alt": (r"(?<=ab|c)d", r"(?<=</|\n)end"), "lead": (r"(?<=\n|;)\n?", r"(?<![\w.])@"),
           "varying": (r"(?<=a{1,3})b", None)}
    texts = ["xaab tail abd cd </end x\nend ;\n\nq @a b.@c", "abdabd;\n\ncd\nend", "aaab ab b"]
    for name, (close, open_) in run.items():
        fields = {"content": {"close_pattern": close}}
        if open_:
            fields = {"content": {"close_pattern": r"\Z"}, "tool": {"open_pattern": open_, "close_pattern": close}}
        tpl = {"defaults": {"role": "assistant"}, "start_anchor": "<s>", "fields": fields}
        c = compile_template(tpl)
        cases = [mv.random_case(c, rng, f"{name}-{k}", "<s>", t, d)
                 for k, (t, d) in enumerate((t, d) for t in texts for d in (None, "vllm"))]
        mv.write_vector(tmp_path, name, tpl, c, cases)
    summary, fails = _run(runner, tmp_path)
    assert all(f.startswith("varying.json") for f in fails), "\n".join(fails)
    assert fails and all("cannot run in C" in f and "(?<=a{1,3})b" in f for f in fails), "\n".join(fails)
    assert summary["passed"] >= 2 * 2 * len(texts)


def test_vectors_with_the_text_trimmed_at_every_feed(tmp_path):
    """A scanner drops the text before the `history + 1` code points a pattern may read back from its first
    undecided offset (in a normal build only once that frees 4 kB and half the buffer, which no vector's text
    reaches). Built with CP_SCANNER_TRIM_MIN=1 it trims at every feed: every vector must still pass, lookbehinds,
    start anchors (^ must not hold at a cut buffer's start) and close_json_end included."""
    build = build_native(ROOT / "build" / "native-engine-trim", ("chatparse-vectors",),
                         options=("-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DCMAKE_C_FLAGS=-DCP_SCANNER_TRIM_MIN=1"))
    summary, fails = _run(build / "chatparse-vectors", VECTORS)
    assert not fails, "\n".join(fails[:30])
    n = mv.fuzz(tmp_path, per_template=6, seed=random.randrange(10**6), dialect="vllm")
    summary, fails = _run(build / "chatparse-vectors", tmp_path)
    assert not fails and summary["passed"] >= n, "\n".join(fails[:30])
