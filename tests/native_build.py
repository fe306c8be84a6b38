"""Builds of the C runtime (native/) for the tests: one function, so that every test file builds the same way
and no two pytest workers (pytest-xdist, `-n 2`) configure or build one directory at the same time.

`build_native` runs CMake's configure and build steps for the given targets into `build_dir`, holding an
exclusive lock (``fcntl.flock`` on ``<build_dir>.lock``) for both: CMake does not guard a build tree against two
concurrent builds, and two test files share build/native-pytest and build/native-asan. The build is
incremental, so the second worker to take the lock finds the targets up to date. A missing CMake or PCRE2 is a
skip, or a failure under ``CHATPARSE_REQUIRE_DEPS`` (tests/deps.py); a failed step fails the test with
CMake's output.
"""

from __future__ import annotations

import fcntl
import subprocess
from pathlib import Path

from deps import need_library, need_program

ROOT = Path(__file__).resolve().parents[1]
WHY = "the C runtime (native/)"


def build_native(build_dir: Path, targets: tuple, *, sanitize: bool = False, options: tuple = (),
                 source: Path = ROOT / "native") -> Path:
    """Configure `source` into `build_dir` (``-DCHATPARSE_SANITIZE`` from `sanitize`, then `options`, each a
    ``-D...`` argument) and build `targets`; return `build_dir`."""
    cmake = need_program("cmake", WHY)
    need_library("libpcre2-8", WHY)
    build_dir = Path(build_dir)
    build_dir.parent.mkdir(parents=True, exist_ok=True)
    steps = ([cmake, "-S", str(source), "-B", str(build_dir), f"-DCHATPARSE_SANITIZE={'ON' if sanitize else 'OFF'}",
              *options],
             [cmake, "--build", str(build_dir), "-j", "2", "--target", *targets])
    with open(build_dir.with_name(build_dir.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for cmd in steps:
            out = subprocess.run(cmd, capture_output=True, text=True)
            assert out.returncode == 0, f"{' '.join(cmd)}:\n{(out.stdout + out.stderr)[-4000:]}"
    return build_dir
