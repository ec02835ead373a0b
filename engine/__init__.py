"""Upwatch: self-hosted website monitoring engine."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("upwatch")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

USER_AGENT = f"Upwatch/{__version__}"

# UPWATCH_PURE_PYTHON=1: run the sources of the compiled modules (see engine/runtime/compiled.py),
# decided here, before any of them can be imported.
from engine.runtime.compiled import prefer_sources, pure_python_requested  # noqa: E402

if pure_python_requested():
    prefer_sources()
