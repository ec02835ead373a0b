"""Upwatch: self-hosted website monitoring.

The packages read as the flow, top to bottom (each may import only those below it; the
import-linter contracts in ``pyproject.toml`` keep it so): ``cli`` (commands) and ``daemon``
(the composition root: builds and wires every component) -> ``web`` (API, status pages) ->
``cluster`` (nodes, ownership, confirmation by another region) -> ``scheduler`` (the engine:
wheel, dispatch, one probe's flow, transitions) and ``delivery`` (outbox: webhooks,
notifications) -> ``db`` (all SQL) -> ``kinds`` (one module per kind of check) ->
``monitors`` (what a user configures, validated) -> ``probes`` (the I/O of probing) ->
``domain`` (pure rules) -> ``runtime`` (settings, errors, logs, metrics).

A newcomer reads ``docs/design.md`` first, then ``daemon.py``.
"""

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
