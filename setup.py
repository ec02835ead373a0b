"""Build hook: the engine's per-probe modules (engine/runtime/compiled.py) compiled with mypyc.

Everything else about the package is in pyproject.toml. The compile is an optimisation and
never a reason for an install to fail: without a C compiler, or with
``UPWATCH_PURE_PYTHON=1``, the package is built as pure Python (with a warning), and a
compile that fails part-way leaves no extension behind (the modules share one compiled
library: all of them or none).
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def _warn(message: str) -> None:
    print(f"upwatch build: {message}; the engine runs as pure Python (slower)", file=sys.stderr)


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
    try:
        # group_name: a predictable name for the shared library (engine__mypyc), instead of a
        # hash of the module list.
        return list(mypycify(paths, opt_level="3", group_name="engine"))
    except (Exception, SystemExit) as exc:  # mypy exits on a type error
        _warn(f"mypyc could not compile the hot path ({exc})")
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` that falls back to pure Python when compiling fails."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # CompileError, no compiler (PlatformError), LinkError
            self._remove_built()
            _warn(f"the C compile failed ({exc})")

    def _remove_built(self) -> None:
        for ext in self.extensions:
            path = Path(self.get_ext_fullpath(ext.name))
            if path.exists():
                path.unlink()


setup(ext_modules=_extensions(), cmdclass={"build_ext": OptionalBuildExt})
