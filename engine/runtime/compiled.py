"""The modules every probe passes through, compiled with mypyc when the package is built.

They stay plain, typed Python; the build (``setup.py``) compiles them together into one C
extension, so that they run without the interpreter's frames and their calls to each other
are C calls. The engine at capacity spends about a fifth less user CPU per probe so (52 to
43 us, and 9% more probes per CPU second, in four rounds alternating with the pure-Python
build; docs/design.md, "Compiled hot path"). A machine without a C compiler, or
``UPWATCH_PURE_PYTHON=1`` at build time, gets the same modules as Python, which behave the
same, only slower.

``UPWATCH_PURE_PYTHON=1`` at run time loads the sources of a compiled install instead
(:func:`prefer_sources`, called by ``engine/__init__.py``): for a profiler that shows Python
functions (py-spy, cProfile), for tracebacks through every frame, and for the tests of the
pure-Python build.

This module imports nothing of the engine: ``setup.py`` reads :data:`MODULES` from it
before the package is installed.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path

# Compiled together. A class of one of them may only be subclassed in another of them
# (mypyc refuses interpreted subclasses of compiled classes): tls.py's and tcp.py's
# connections subclass _net's, so all three are here. Such a subclass must not add
# ``__call__``: mypyc then gives it a vectorcall slot ahead of the inherited fields, and
# the base class's compiled methods read the wrong fields (a crash in the garbage
# collector, seen here).
# Nor may one of them subclass a class of an interpreted library: compiled, a subclass of
# python-jsonpath's JSONPathEnvironment lost the attributes its base's __init__ sets, so such
# subclasses live in modules that are not compiled (engine/probes/patterns.py).
# Nor may a coroutine of one of them await while it handles an exception: in an ``except``
# or ``finally`` block, or at an ``async with``'s exit (``async for`` too). Compiled, it does
# not keep that exception to itself while it waits: every coroutine that runs meanwhile
# sees it as the one being handled, and a compiled ``finally`` ending after an await
# re-raises whatever is handled then, another task's exception or none (an engine's stop
# raised the LISTEN loop's CancelledError so; docs/design.md, "Compiled hot path"). Hold
# the exception in a variable and await after the handler, or move the code to a module
# that is not compiled (engine/scheduler/listening.py); a test reads these modules for it.
MODULES: tuple[str, ...] = (
    "engine.probes.reactor",
    "engine.probes._net",
    "engine.probes.addresses",
    "engine.probes.deadlines",
    "engine.probes.failures",
    "engine.probes.openssl_layer",
    "engine.probes.http",
    "engine.probes.tls",
    "engine.probes.tcp",
    "engine.probes.sessions",
    "engine.domain.outcomes",
    "engine.probes.request",
    "engine.probes.resolver",
    "engine.scheduler.engine",
    "engine.scheduler.catalog",
    "engine.scheduler.dispatch",
    "engine.scheduler.flow",
    "engine.scheduler.transitions",
    "engine.kinds.scheduled",
    "engine.kinds.base",
    "engine.kinds.registry",
    "engine.kinds.uptime",
    "engine.kinds.certificate",
    "engine.scheduler.wheel",
    "engine.scheduler.results",
    "engine.domain.evaluate",
    "engine.domain.certificate_states",
)


def is_compiled(name: str) -> bool:
    """True when the module ``name`` was loaded from a C extension, not from its source."""
    module = importlib.import_module(name)
    path = getattr(module, "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> dict[str, bool]:
    """Each module of :data:`MODULES`, and whether it runs compiled."""
    return {name: is_compiled(name) for name in MODULES}


def stale_modules() -> list[str]:
    """Modules of :data:`MODULES` compiled from an older source: an editable install whose
    ``.py`` changed after its last build runs the old code until it is rebuilt
    (``pip install -e .``, which ``./scripts/test`` runs). Imports none of them. An
    installed copy (``pip install .``) is never stale: see :func:`is_stale`."""
    out = []
    for name in MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        if origin and is_stale(name, Path(origin)):
            out.append(name)
    return out


def is_stale(name: str, built: Path) -> bool:
    """Module ``name``, loaded from ``built``, is an extension older than its source in a
    checkout being edited (the package's parent directory holds ``pyproject.toml``).

    Only a checkout's sources change after a build. A regular install copies the ``.py``
    files next to the extension in the same step, a few microseconds after it, which is no
    sign of an edit: counting it would cry wolf on every module."""
    if not built.name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return False
    parents = built.parents
    depth = name.count(".")
    if depth >= len(parents) or not (parents[depth] / "pyproject.toml").is_file():
        return False
    source = built.with_name(name.rpartition(".")[2] + ".py")
    return source.exists() and source.stat().st_mtime > built.stat().st_mtime


def pure_python_requested() -> bool:
    """``UPWATCH_PURE_PYTHON`` is set to anything but "" or "0"."""
    return os.environ.get("UPWATCH_PURE_PYTHON", "") not in ("", "0")


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the ``.py`` of each module of :data:`MODULES`, ahead of its extension."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MODULES or not path:
            return None
        name = fullname.rpartition(".")[2] + ".py"
        for entry in path:
            source = Path(entry) / name
            if source.is_file():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def prefer_sources() -> None:
    """From now on, import the modules of :data:`MODULES` from their sources even where they
    are compiled. Call it before any of them is imported (all of them must be one or the
    other: compiled classes cannot be subclassed by interpreted ones)."""
    if not any(isinstance(f, _SourcesFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourcesFirst())
