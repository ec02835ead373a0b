"""The one place the bench builds the engine and its probers, as the service would, and
reads their parts that the engine keeps to itself.

Every measured child that runs engine code gets it from here (roles/engine_run.py,
roles/dnscache.py, lab/tlscompare.py): when the engine's constructors or insides change,
these functions are what follows them.
"""

from __future__ import annotations

import asyncio
import socket
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.probes.http import HttpProber
    from engine.probes.resolver import ProbeResolver
    from engine.runtime.metrics import Metrics
    from engine.runtime.settings import Settings
    from engine.scheduler.engine import Engine


def build_engine(store: Any, settings: Settings, metrics: Metrics) -> Engine:
    """The engine of ``upwatch run --role engine`` over ``store``, with its kinds and their
    probers built from ``settings`` as the daemon builds them (one node: no peers, every
    check its own). Close them with :func:`close_engine` once it has stopped."""
    from engine.daemon import build_kinds
    from engine.scheduler.engine import Engine

    kinds = build_kinds(settings, metrics, store=store)
    return Engine(store, settings, metrics=metrics, kinds=kinds)


async def close_engine(engine: Engine) -> None:
    """Close the probers :func:`build_engine` built, once the engine has stopped."""
    await engine.kinds.aclose()


def build_http_prober(*, timeout: float, allow_private: bool = True,
                      **options: Any) -> HttpProber:
    """An HTTP(S) prober with the service's user agent; ``options`` go to
    :class:`~engine.probes.http.HttpProber` (``tls_sessions``, ``tls_layer``, ...)."""
    from engine import USER_AGENT
    from engine.probes.http import HttpProber

    return HttpProber(timeout=timeout, user_agent=USER_AGENT, allow_private=allow_private,
                      **options)


def build_resolver(servers: list[str] | None, max_names: int) -> ProbeResolver:
    """The probes' resolver (A and AAAA) asking ``servers`` (None: the system's)."""
    from engine.probes.resolver import ProbeResolver

    if servers is None:
        return ProbeResolver(family=socket.AF_UNSPEC, max_names=max_names)
    return ProbeResolver(servers=servers, family=socket.AF_UNSPEC, max_names=max_names)


# Readings of a running engine's parts (the bench's figures need them; the engine has no
# public accessor for these, so they stay here, in one place).


def http_prober_of(engine: Engine) -> Any | None:
    """The HTTP(S) prober the engine's uptime checks probe with."""
    kinds = getattr(engine, "kinds", None)  # None: a stand-in engine (the bench's tests)
    kind = None if kinds is None else kinds.get("uptime")
    return None if kind is None else kind.prober


def watch_loaded(engine: Engine, event: asyncio.Event) -> None:
    """Make ``event`` the one the engine sets once its first full load is done (before
    :meth:`Engine.run`): the bench reads the RSS at that moment."""
    engine._catalog.loaded = engine.loaded = event


def resolver_of(engine: Engine) -> Any | None:
    """The probes' resolver of the engine's HTTP prober (None: the prober has none)."""
    return getattr(http_prober_of(engine), "resolver", None)


def scheduled_hosts(engine: Engine) -> set[str]:
    """The host names (and IP literals) of the engine's scheduled checks."""
    return {c.host for c in engine._checks.values()}
