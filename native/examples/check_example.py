"""Check a libchatparse example program against Python's chatparse, at test time (CTest and
tests/test_native_examples.py run it; nothing expected is written by hand).

    python check_example.py --template qwen3 --tables tests/vectors/qwen3.cpt \\
        (--output OUT [--prompt P] [--tools T] | --case FILE.json:CASE_ID) [--chunk N ...] -- EXAMPLE [ARGS...]
    python check_example.py --expect-refused --tables BAD.cpt --output OUT -- EXAMPLE [ARGS...]

The example is run as ``EXAMPLE [ARGS...] TABLES OUTPUT --prompt P [--tools T] --chunk N`` and prints
``initial: <events>``, ``feed I (N bytes): <events>`` per feed, ``final: <events>`` and ``message: <message>``
(native/examples/README.md). For each chunk size, the check requires:

* the tables are those of the bundled template ``--template`` (same normalized template);
* the message line is, byte for byte, ``json.dumps(message, separators=(",", ":"))`` of Python's
  ``chatparse.parse_response`` on the bundled template, the same prompt, tools and text;
* each feed's events are the events of Python's ``ResponseParser`` fed the same bytes, decoded incrementally
  (a character split across feeds belongs to the feed that completes it), and so are the initial and final ones;
* where Python raises, the example exits 1 with ``error: <the same class>: ...`` on standard error.

With ``--ids`` (or a ``--case`` from a token vector, tests/vectors/*.tok-*.json), the output is token ids: the
example gets ``--ids`` and feeds N ids at a time, and Python's reference is its ``TokenParser`` (feed_tokens)
and ``parse_tokens`` over the token section of the same tables.

With ``--vllm``, the same in vLLM's serving dialect (Python's ``dialect="vllm"``, the example's ``--vllm``).

With ``--expect-refused``: the example exits 1 with ``error: ValueError: <Python's loader message>``.
``--case`` takes a case from a vector file (tests/vectors/*.json: its feeds joined) or a real-output file
(tests/real_outputs/*.json: its output), with its prefix and tools. Exit status 0 when every check passes.
"""

from __future__ import annotations

import argparse
import codecs
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def dumps(value) -> str:
    """JSON text as libchatparse writes it (Python's compact json.dumps)."""
    return json.dumps(value, separators=(",", ":"))


def load_case(spec: str) -> tuple:
    """``FILE.json:CASE_ID`` -> (prompt, output, tools); in a token vector (tests/vectors/*.tok-*.json) the output
    is a list of token ids, and so is the prompt where the case gives it as ids."""
    path, _, case_id = spec.rpartition(":")
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    for case in data["cases"]:
        if case["id"] == case_id:
            if data.get("kind") == "tokens":
                prompt = case["prefix_ids"] if "prefix_ids" in case else case["prefix"]
                return prompt, [i for f in case["feeds"] for i in f], case.get("tools")
            text = "".join(case["feeds"]) if "feeds" in case else case["output"]
            return case.get("prefix") or "", text, case.get("tools")
    raise SystemExit(f"no case {case_id!r} in {path}")


def bundled_template(name: str, tables: Path):
    """The bundled template `name`, after checking that `tables` holds it."""
    from chatparse import compile_template, templates
    from chatparse.runtime.tables.loader import compiled_from_bytes

    template = templates.get(name)
    if compiled_from_bytes(tables.read_bytes()).spec != compile_template(template).spec:
        raise SystemExit(f"{tables} does not hold the bundled template {name!r}")
    return template


def python_run(template, prompt: str, text: bytes, tools, chunk: int, dialect: str | None = None) -> dict:
    """What Python's chatparse gives: {"lines": [expected output lines]} or {"error": class name}."""
    from chatparse import ResponseParser, parse_response

    kw = {"dialect": dialect} if dialect else {}
    try:
        message = parse_response(text.decode("utf-8"), template, prefix=prompt, tools=tools, **kw)
    except Exception as e:  # noqa: BLE001 - the class is what the example must report
        return {"error": type(e).__name__}
    parser = ResponseParser(template, prefix=prompt, tools=tools, **kw)
    lines = [f"initial: {dumps(parser.initial_events)}"]
    decoder = codecs.getincrementaldecoder("utf-8")()
    for i, at in enumerate(range(0, len(text), chunk), 1):
        piece = text[at:at + chunk]
        lines.append(f"feed {i} ({len(piece)} bytes): {dumps(parser.feed(decoder.decode(piece)))}")
    streamed, final = parser.finalize()
    assert streamed == message, (streamed, message)
    lines += [f"final: {dumps(final)}", f"message: {dumps(message)}"]
    return {"lines": lines}


def python_run_ids(tables: Path, prompt, ids: list, tools, chunk: int, dialect: str | None = None) -> dict:
    """`python_run` for token ids: Python's TokenParser (and parse_tokens) over the token section of `tables`;
    `prompt` is text or a list of ids."""
    from chatparse.runtime.tables.loader import compiled_from_bytes
    from chatparse.runtime.tokens import TokenParser, token_binding

    binding = token_binding(compiled_from_bytes(tables.read_bytes()))
    kw = {"prefix_ids": prompt} if isinstance(prompt, list) else {"prefix": prompt}
    try:
        message = binding.parse(ids, tools=tools, dialect=dialect, **kw)
    except Exception as e:  # noqa: BLE001 - the class is what the example must report
        return {"error": type(e).__name__}
    parser = TokenParser(binding, tools=tools, dialect=dialect, **kw)
    lines = [f"initial: {dumps(parser.initial_events)}"]
    for i, at in enumerate(range(0, len(ids), chunk), 1):
        piece = ids[at:at + chunk]
        lines.append(f"feed {i} ({len(piece)} ids): {dumps(parser.feed_tokens(piece))}")
    streamed, final = parser.finalize()
    assert streamed == message, (streamed, message)
    lines += [f"final: {dumps(final)}", f"message: {dumps(message)}"]
    return {"lines": lines}


def run_example(example: list, tables: Path, output: Path, prompt: Path | None, tools: Path | None,
                chunk: int, dialect: str | None = None, ids: bool = False,
                prompt_ids: bool = False) -> subprocess.CompletedProcess:
    cmd = [*example, str(tables), str(output), "--chunk", str(chunk)]
    if dialect == "vllm":
        cmd.append("--vllm")
    if ids:
        cmd.append("--ids")
    if prompt is not None:
        cmd += ["--prompt-ids" if prompt_ids else "--prompt", str(prompt)]
    if tools is not None:
        cmd += ["--tools", str(tools)]
    return subprocess.run(cmd, capture_output=True, timeout=120)


def check(example: list, template_name: str, tables: Path, prompt: str, text: str, tools, chunks=(3,),
          dialect: str | None = None) -> list:
    """Run `example` on the case at each chunk size (in vLLM's serving dialect with ``dialect="vllm"``); the
    list of what differs from Python (empty: all agree). A list of ints as `text` is token ids (the example gets
    ``--ids``), and so is one as `prompt` (``--prompt-ids``)."""
    template = bundled_template(template_name, tables)
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        out_file, prompt_file = Path(tmp, "output.txt"), Path(tmp, "prompt.txt")
        ids, prompt_ids = isinstance(text, list), isinstance(prompt, list)
        out_file.write_text(json.dumps(text) if ids else text, encoding="utf-8")
        prompt_file.write_text(json.dumps(prompt) if prompt_ids else prompt, encoding="utf-8")
        tools_file = None
        if tools is not None:
            tools_file = Path(tmp, "tools.json")
            tools_file.write_text(json.dumps(tools), encoding="utf-8")
        for chunk in chunks:
            want = (python_run_ids(tables, prompt, text, tools, chunk, dialect) if ids
                    else python_run(template, prompt, text.encode("utf-8"), tools, chunk, dialect))
            got = run_example(example, tables, out_file, prompt_file, tools_file, chunk, dialect, ids, prompt_ids)
            stdout = got.stdout.decode("utf-8", "replace")
            stderr = got.stderr.decode("utf-8", "replace")
            where = f"{Path(example[-1]).name} --chunk {chunk}" + (" --vllm" if dialect else "") + (
                " --ids" if ids else "")
            if "error" in want:
                if got.returncode != 1 or not stderr.startswith(f"error: {want['error']}: "):
                    problems.append(f"{where}: Python raises {want['error']}; the example exited "
                                    f"{got.returncode}, stderr {stderr[-500:]!r}")
                continue
            if got.returncode != 0:
                problems.append(f"{where}: exit status {got.returncode}: {stderr[-1000:]}")
                continue
            lines = stdout.splitlines()
            if lines == want["lines"]:
                continue
            message = [x for x in lines if x.startswith("message: ")]
            if message != want["lines"][-1:]:
                problems.append(f"{where}: message\n  got  {message}\n  want {want['lines'][-1]}")
            for g, w in zip(lines, want["lines"]):
                if g != w:
                    problems.append(f"{where}: first differing line\n  got  {g}\n  want {w}")
                    break
            if len(lines) != len(want["lines"]):
                problems.append(f"{where}: {len(lines)} lines, Python gives {len(want['lines'])}")
    return problems


def check_refused(example: list, tables: Path, output: Path) -> list:
    """The example refuses `tables` as Python's loader does: exit 1, ``error: ValueError: <message>``."""
    from chatparse.runtime.tables.loader import loads

    try:
        loads(tables.read_bytes())
    except ValueError as e:
        want = f"error: ValueError: {e}"
    else:
        raise SystemExit(f"{tables} loads in Python: not a refused file")
    got = run_example(example, tables, output, None, None, 3)
    stderr = got.stderr.decode("utf-8", "replace").splitlines()
    if got.returncode != 1 or stderr[:1] != [want]:
        return [f"{Path(example[-1]).name}: exit {got.returncode}, stderr {stderr[:3]}; want exit 1 and {want!r}"]
    return []


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        raise SystemExit("usage: check_example.py [options] -- EXAMPLE [ARGS...]")
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--template", help="bundled template name (chatparse.templates.names())")
    ap.add_argument("--tables", type=Path, required=True)
    ap.add_argument("--output", type=Path)
    ap.add_argument("--prompt", type=Path)
    ap.add_argument("--tools", type=Path)
    ap.add_argument("--ids", action="store_true", help="--output (and --prompt-ids) hold token ids (a JSON list)")
    ap.add_argument("--prompt-ids", type=Path, help="with --ids: the prompt as token ids (a JSON list)")
    ap.add_argument("--case", help="FILE.json:CASE_ID instead of --output/--prompt/--tools")
    ap.add_argument("--chunk", type=int, action="append", help="bytes per feed (repeatable; default 3)")
    ap.add_argument("--vllm", action="store_true", help="vLLM's serving dialect (the example gets --vllm)")
    ap.add_argument("--expect-refused", action="store_true", help="the tables are invalid: check the refusal")
    args = ap.parse_args(argv[:split])
    example = argv[split + 1:]
    if args.expect_refused:
        problems = check_refused(example, args.tables, args.output)
    else:
        if args.case:
            prompt, text, tools = load_case(args.case)
        else:
            prompt = args.prompt.read_text(encoding="utf-8") if args.prompt else ""
            if args.prompt_ids:
                prompt = json.loads(args.prompt_ids.read_text(encoding="utf-8"))
            text = args.output.read_text(encoding="utf-8")
            if args.ids:
                text = json.loads(text)
            tools = json.loads(args.tools.read_text(encoding="utf-8")) if args.tools else None
        problems = check(example, args.template, args.tables, prompt, text, tools, tuple(args.chunk or (3,)),
                         "vllm" if args.vllm else None)
    for p in problems:
        print(p)
    print("ok" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
