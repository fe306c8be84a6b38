"""What a test needs beside chatparse, asked for in one place: it skips where that is missing, and fails in CI.

Every test that cannot run without an optional package, a program or a downloaded folder asks for it here,
never with ``pytest.importorskip`` or a ``skipif`` of its own:

- ``need("xgrammar", why)`` returns the imported module; ``need_program("node", why)`` the program's path;
  ``need_library("libpcre2-8", why)`` a C library's version (pkg-config);
  ``need_folder(ENV, why)`` the folder an environment variable names; ``need_vllm(module)`` a module of
  vLLM 0.33.0, ``need_sglang(module)`` one of SGLang 0.5.23. Each skips where the thing is missing, naming how to get it.
- ``needs(...)`` / ``needs_program(...)`` are the same as marks, for a decorator (checked by tests/conftest.py
  when the test is set up).

``CHATPARSE_REQUIRE_DEPS`` turns every such skip into a failure, as ``CHATPARSE_REQUIRE_NATIVE`` does for the
native modules. `.ci/run`, which installs all of it, sets ``CHATPARSE_REQUIRE_DEPS=1`` for the suite, and
``CHATPARSE_REQUIRE_DEPS=vllm`` for the tests it runs in the venv it makes for vLLM 0.33.0. With ``1``, vLLM
itself is still not required (it cannot share a Python with the transformers the rest of the suite compares
against), so the ``tests/test_vllm_*.py`` files skip in the main Python and run in the venv; with ``vllm`` it is
required too. ``CHATPARSE_REQUIRE_DEPS=sglang`` does the same for SGLang 0.5.23 in the venv .ci/run makes for it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ENV = "CHATPARSE_REQUIRE_DEPS"
VLLM_VERSION = "0.33.0"
SGLANG_VERSION = "0.5.23"

# how to get what is not installed with `pip install -e ".[test]"` (everything else is)
PROGRAMS = {
    "node": "Node.js, for the JavaScript reader (js/): apt-get install nodejs",
    "dot": "Graphviz, for `chatparse show --format svg`: apt-get install graphviz",
    "bash": "bash: apt-get install bash",
    "cmake": "CMake, for the C runtime (native/): apt-get install cmake",
    "pkg-config": "pkg-config, for the C runtime's PCRE2 (native/): apt-get install pkg-config",
    "cargo": "Rust's cargo, for the C runtime's Rust example (native/examples/rust): apt-get install cargo",
}
# C libraries (pkg-config names) the C runtime builds against, and how to get them
LIBRARIES = {"libpcre2-8": "PCRE2, for the C runtime (native/): apt-get install libpcre2-dev"}
TEST_EXTRA = "pip install -e \".[test]\""


def _mode() -> str:
    return os.environ.get(ENV, "")


def _required(server: str | None = None) -> bool:
    mode = _mode()
    return mode == server if server else mode in ("1", "vllm")


def _missing(what: str, why: str, how: str, *, server: str | None = None, item_location: bool = False):
    """Skip (anywhere, module level included), or fail when CHATPARSE_REQUIRE_DEPS says it must be there. The
    skip is reported at the line that asked (these functions hide their own frames), or at the test's own
    line for a mark."""
    __tracebackhide__ = True
    because = f", needed for {why}" if why else ""
    if _required(server):
        pytest.fail(f"{what}{because}; {ENV}={_mode()} (set by .ci/run) requires it. {how}", pytrace=False)
    raise pytest.skip.Exception(f"{what}{because}; {how}", allow_module_level=True,
                                _use_item_location=item_location)


def need(module: str, why: str = "", how: str = TEST_EXTRA, *, _item_location: bool = False) -> ModuleType:
    """The module, imported; a skip when it cannot be imported (an ImportError: anything else it raises is a
    failure), or a failure under CHATPARSE_REQUIRE_DEPS. `how` says how to install it (by default, the test
    extra holds it)."""
    __tracebackhide__ = True
    try:
        return importlib.import_module(module)
    except ImportError as e:
        what = (f"{module} is not installed" if isinstance(e, ModuleNotFoundError) and e.name == module.split(".")[0]
                else f"{module} cannot be imported ({e})")
        _missing(what, why, how, item_location=_item_location)


def need_program(name: str, why: str = "", *, _item_location: bool = False) -> str:
    """The path of the program `name` on PATH; a skip when there is none (a failure under CHATPARSE_REQUIRE_DEPS)."""
    __tracebackhide__ = True
    path = shutil.which(name)
    if path is None:
        _missing(f"{name} is not installed", why, PROGRAMS.get(name, f"install {name}"), item_location=_item_location)
    return path


def need_library(name: str, why: str = "") -> str:
    """A C library `name` known to pkg-config (e.g. ``libpcre2-8``): its version; a skip when pkg-config does not
    know it (a failure under CHATPARSE_REQUIRE_DEPS)."""
    __tracebackhide__ = True
    pkg_config = need_program("pkg-config", why)
    out = subprocess.run([pkg_config, "--modversion", name], capture_output=True, text=True)
    if out.returncode != 0:
        _missing(f"the C library {name} is not installed", why, LIBRARIES.get(name, f"install {name}"))
    return out.stdout.strip()


def need_folder(env: str, how: str) -> Path:
    """The folder the environment variable `env` names; a skip when it is unset or not a folder."""
    __tracebackhide__ = True
    folder = os.environ.get(env)
    if not folder:
        _missing(f"{env} is not set", "", how)
    if not Path(folder).is_dir():
        _missing(f"{env}={folder!r} is not a folder", "", how)
    return Path(folder)


def _need_server(package: str, version: str, label: str, module: str) -> ModuleType:
    """`module` of `package` at `version` (a server whose tests run in a venv of their own, since it pins an older
    transformers than the suite's reference): a skip where the package is not that version or not installed,
    which is the main Python; a failure only under CHATPARSE_REQUIRE_DEPS=`package`."""
    __tracebackhide__ = True
    how = f"needs {label} {version}: run in the venv .ci/run makes"
    try:
        pkg = importlib.import_module(package)
    except ModuleNotFoundError as e:
        _missing(f"{package} is not installed" if e.name == package else f"{package} cannot be imported ({e})", "",
                 how, server=package)
    except ImportError as e:
        _missing(f"{package} cannot be imported ({e})", "", how, server=package)
    if pkg.__version__ != version:
        _missing(f"{package} is {pkg.__version__}", "", how, server=package)
    try:
        return importlib.import_module(module)
    except ImportError as e:
        _missing(f"{module} cannot be imported ({e})", "", how, server=package)


def need_vllm(module: str = "vllm") -> ModuleType:
    """A module of vLLM 0.33.0, the version the serving dialect and the plugin are tested against
    (`_need_server`: required under CHATPARSE_REQUIRE_DEPS=vllm)."""
    __tracebackhide__ = True
    return _need_server("vllm", VLLM_VERSION, "vLLM", module)


def need_sglang(module: str = "sglang") -> ModuleType:
    """A module of SGLang 0.5.23, the version its plugin is tested against (`_need_server`: required under
    CHATPARSE_REQUIRE_DEPS=sglang, as .ci/run sets it in SGLang's venv)."""
    __tracebackhide__ = True
    return _need_server("sglang", SGLANG_VERSION, "SGLang", module)


def needs(module: str, why: str = ""):
    """`need(module, why)` as a mark: ``@needs("xgrammar", "the structural-tag export")``."""
    return pytest.mark.needs("module", module, why)


def needs_program(name: str, why: str = ""):
    """`need_program(name, why)` as a mark: ``@needs_program("node", "the JavaScript reader")``."""
    return pytest.mark.needs("program", name, why)


def check_marks(item) -> None:
    """What tests/conftest.py runs when a test is set up: each of its `needs` marks asked for."""
    __tracebackhide__ = True
    for mark in item.iter_markers("needs"):
        kind, name, why = mark.args
        if kind == "module":
            need(name, why, _item_location=True)
        else:
            need_program(name, why, _item_location=True)
