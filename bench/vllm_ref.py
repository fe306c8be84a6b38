"""vLLM 0.33.0's copy of the response-template interpreter (`vllm.parser.chat_parsing`), the reference for
chatparse's serving dialect (``dialect="vllm"``), loaded by file path.

vllm==0.33.0 pins transformers < 5.21, so it cannot share an environment with the transformers 5.23 reference
the rest of the suite needs; it lives in a venv of its own (/work/venv-vllm here and in CI). Its
``vllm/parser/chat_parsing/`` package is three pure-Python modules that import only json, copy, logging,
`regex` and each other (relatively), so it loads on its own, without importing `vllm` (whose ``__init__``
pulls in torch and the engine): `load` executes that package's files under the private module name
``_vllm_chat_parsing``, with this environment's `regex`. Nothing of vLLM is copied into this repository.

Where it is looked for, first found wins:

1. ``$CHATPARSE_VLLM_SITE``: a site-packages directory holding ``vllm/`` (or the ``chat_parsing`` directory
   itself); ``CHATPARSE_VLLM_SITE=none`` looks nowhere (the bench then runs as where vLLM is absent);
2. a `vllm` importable in this environment (located with `importlib.util.find_spec`, not imported);
3. the venv `.ci/run` makes: ``$CHATPARSE_VLLM_VENV``, else ``~/.cache/chatparse/venv-vllm``
   (``lib/python3*/site-packages`` inside it);
4. ``/work/venv-vllm/lib/python3*/site-packages``.

`load()` never raises: it returns a `VllmReference` or None, and `status()` says which and why.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

ENV = "CHATPARSE_VLLM_SITE"
CI_VENV_ENV = "CHATPARSE_VLLM_VENV"  # as .ci/run names it
CI_VENV = "~/.cache/chatparse/venv-vllm"
SITE_GLOB = "lib/python3*/site-packages"
VENV_GLOB = "/work/venv-vllm/" + SITE_GLOB
MODULE = "_vllm_chat_parsing"
SUBDIR = Path("vllm", "parser", "chat_parsing")
FILES = ("__init__.py", "response_parser.py", "content_parsers.py", "response_templates.py")


@dataclass
class VllmReference:
    module: object  # the loaded package: ResponseParser, parse_response
    templates: object  # its response_templates module: load_response_template
    path: str  # the chat_parsing directory loaded
    version: str  # vllm's version from the dist-info beside it ("?" when none)
    found_by: str  # "$CHATPARSE_VLLM_SITE", "importable vllm" or the venv it is in

    @property
    def label(self) -> str:
        return f"vLLM {self.version} `vllm.parser.chat_parsing`"

    def load_template(self, template: dict):
        """vLLM's `ResponseTemplate` for a template dict (compiled once, as the bench does for every side)."""
        return self.templates.load_response_template(template)

    def parser(self, rt, prefix: str):
        return self.module.ResponseParser(rt, prefix=prefix)

    def parse(self, text: str, rt, prefix: str) -> dict:
        return self.module.parse_response(text, rt, prefix=prefix)


_state: dict = {}


def _candidates() -> list[tuple[str, Path]]:
    out = []
    env = os.environ.get(ENV)
    if env and env.lower() == "none":
        return out
    if env:
        p = Path(env)
        out.append((f"${ENV}", p if (p / "response_parser.py").exists() else p / SUBDIR))
    try:
        spec = importlib.util.find_spec("vllm")  # locates the package without running its __init__
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        out.append(("importable vllm", Path(list(spec.submodule_search_locations)[0]) / SUBDIR.relative_to("vllm")))
    venvs = [(f"${CI_VENV_ENV}", os.environ.get(CI_VENV_ENV)), (CI_VENV, os.path.expanduser(CI_VENV)),
             ("/work/venv-vllm", "/work/venv-vllm")]
    for how, venv in venvs:
        if venv:
            for site in sorted(glob.glob(os.path.join(venv, SITE_GLOB))):
                out.append((how, Path(site) / SUBDIR))
    seen, unique = set(), []
    for how, pkg in out:  # ~/.cache/chatparse/venv-vllm may be /work/venv-vllm under another name
        key = os.path.realpath(pkg)
        if key not in seen:
            seen.add(key)
            unique.append((how, pkg))
    return unique


def _version(pkg_dir: Path) -> str:
    """vllm's version from the ``vllm-*.dist-info`` in the site-packages above `pkg_dir`."""
    from importlib import metadata

    site = pkg_dir.parents[2] if len(pkg_dir.parents) > 2 else pkg_dir
    try:
        for dist in metadata.distributions(path=[str(site)]):
            if (dist.metadata["Name"] or "").lower() == "vllm":
                return dist.version
    except Exception:  # noqa: BLE001 - a version is only a label
        pass
    return "?"


def _exec(pkg_dir: Path):
    spec = importlib.util.spec_from_file_location(MODULE, pkg_dir / "__init__.py",
                                                  submodule_search_locations=[str(pkg_dir)])
    mod = importlib.util.module_from_spec(spec)
    sys.modules[MODULE] = mod  # the package's relative imports resolve under this name
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        for name in [n for n in sys.modules if n == MODULE or n.startswith(MODULE + ".")]:
            del sys.modules[name]
        raise
    return mod, sys.modules[f"{MODULE}.response_templates"]


def load() -> VllmReference | None:
    """The vLLM reference, loaded once per process; None when it is not found or does not load (`status`
    says why)."""
    if "ref" in _state:
        return _state["ref"]
    ref, tried = None, []
    for how, pkg in _candidates():
        if not all((pkg / f).exists() for f in FILES):
            tried.append(f"{how}: no {pkg}")
            continue
        try:
            mod, rts = _exec(pkg)
            ref = VllmReference(mod, rts, str(pkg), _version(pkg), how)
            break
        except Exception as e:  # noqa: BLE001 - the bench runs on without it
            tried.append(f"{how}: {pkg} did not load ({type(e).__name__}: {e})")
    _state["ref"] = ref
    if os.environ.get(ENV, "").lower() == "none":
        tried = [f"${ENV}=none"]
    _state["why"] = ("; ".join(tried) if tried else
                     f"no ${ENV}, no importable vllm, no venv at ${CI_VENV_ENV}, {CI_VENV} or /work/venv-vllm")
    return ref


def why() -> str:
    """Where it was looked for and what was there (after `load`)."""
    load()
    return _state["why"]


def status() -> str:
    """One sentence for the bench's output and RESULTS.md."""
    ref = load()
    if ref is not None:
        return f"{ref.label} loaded from {ref.path} (found by {ref.found_by})"
    return (f"the vLLM reference (vllm.parser.chat_parsing) was not found ({why()}); the serving-dialect "
            f"rows are chatparse alone, without a ratio (set ${ENV} to a site-packages holding vllm==0.33.0)")
