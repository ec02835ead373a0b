"""Build hook: the engine's per-probe modules (engine/runtime/compiled.py) compiled with mypyc.

Everything else about the package is in pyproject.toml. The build says what it is doing and
how long each step takes, on the terminal too (pip shows a build's output only with -v);
pip's metadata queries, which run this file as well, compile nothing. The compile is an
optimisation and
never a reason for an install to fail: without a C compiler, or with
``UPWATCH_PURE_PYTHON=1``, the package is built as pure Python (with a warning), and a
compile that fails part-way leaves no extension behind (the modules share one compiled
library: all of them or none).
"""

from __future__ import annotations

import runpy
import sys
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _warn(message: str) -> None:
    _say(f"{message}; the engine runs as pure Python (slower)")


def _say(message: str) -> None:
    """A line for the installer: on stderr (``pip install -v``, CI logs) and, since pip
    hides a build's output unless ``-v``, also on the terminal when there is one."""
    line = f"upwatch build: {message}\n"
    sys.stderr.write(line)
    sys.stderr.flush()
    if sys.stderr.isatty():
        return
    try:
        with open("/dev/tty", "w", encoding="utf-8") as tty:
            tty.write(line)
    except OSError:
        pass


def _building() -> bool:
    """True when setuptools runs this file to build (a wheel, an editable install, the
    extensions); False for pip's metadata and requirement queries, which run it too and need
    no compile."""
    return any(cmd in sys.argv for cmd in ("bdist_wheel", "editable_wheel", "build_ext",
                                            "build", "install", "develop"))


def _extensions() -> list[object]:
    compiled = runpy.run_path(str(HERE / "engine" / "runtime" / "compiled.py"))
    if compiled["pure_python_requested"]():
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        _warn("mypyc is not available")
        return []
    paths = [name.replace(".", "/") + ".py" for name in compiled["MODULES"]]
    if not _building():
        return []
    _say(f"step 1/2: mypyc turns {len(paths)} modules into C (20 to 60 s; the C compile "
         "after it takes 3 to 7 minutes on two cores; UPWATCH_PURE_PYTHON=1 skips both)")
    started = time.monotonic()
    try:
        # group_name: a predictable name for the shared library (engine__mypyc), instead of a
        # hash of the module list.
        extensions = list(mypycify(paths, opt_level="3", group_name="engine"))
    except (Exception, SystemExit) as exc:  # mypy exits on a type error
        _warn(f"mypyc could not compile the hot path ({exc})")
        return []
    _say(f"step 1/2 done in {time.monotonic() - started:.0f} s")
    return extensions


class OptionalBuildExt(build_ext):
    """``build_ext`` that falls back to pure Python when compiling fails."""

    def run(self) -> None:
        if not self.extensions:
            return
        _say("step 2/2: the C compiler builds the extension (3 to 7 minutes on two cores, "
             "without output)")
        started = time.monotonic()
        try:
            super().run()
        except Exception as exc:  # CompileError, no compiler (PlatformError), LinkError
            self._remove_built()
            _warn(f"the C compile failed ({exc})")
            return
        _say(f"step 2/2 done in {time.monotonic() - started:.0f} s: the hot path is compiled")

    def _remove_built(self) -> None:
        for ext in self.extensions:
            path = Path(self.get_ext_fullpath(ext.name))
            if path.exists():
                path.unlink()


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
