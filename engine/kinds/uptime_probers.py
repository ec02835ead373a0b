"""The uptime probers of schemes other than http(s), registered in one place, and the one
prober everything that probes an uptime check goes through (:class:`ByScheme`).

http and https probe with :class:`engine.probes.http.HttpProber` (built by
``engine.daemon.build_kinds``, which tests may replace). Every other registered scheme
(:mod:`engine.monitors.schemes`) adds one line to :data:`FACTORIES`: its schemes and a
function ``(settings, metrics, resolver) -> prober`` in its module of ``engine/probes/``.
A prober has ``async probe(url[, spec]) -> HttpOutcome`` (``spec``: what the scheme's
``spec_rules`` built, passed only when not None) and ``async aclose()``; it never raises
for a target's fault, it returns an outcome whose ``error`` says what went wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from engine.domain.outcomes import HttpOutcome
from engine.probes import dns as dns_probe
from engine.probes import icmp, tcp
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings


class UptimeProbe(Protocol):
    async def probe(self, url: str) -> HttpOutcome: ...
    async def aclose(self) -> None: ...


# (settings, metrics, the uptime probes' shared resolver or None) -> a prober.
Factory = Callable[[Settings, Metrics, Any], UptimeProbe]

FACTORIES: Final[tuple[tuple[tuple[str, ...], Factory], ...]] = (
    (("dns",), dns_probe.build),
    (tcp.SCHEMES, tcp.from_settings),
    (("icmp",), icmp.factory),
)


def build_probers(
    settings: Settings, metrics: Metrics, resolver: Any,
    given: Mapping[str, UptimeProbe] | None = None,
) -> tuple[dict[str, UptimeProbe], list[UptimeProbe]]:
    """(scheme -> prober, the probers built here) for every scheme of :data:`FACTORIES`;
    ``given`` (tests) replaces the factories of its schemes."""
    given = given or {}
    by_scheme: dict[str, UptimeProbe] = dict(given)
    built: list[UptimeProbe] = []
    for names, factory in FACTORIES:
        if all(n in given for n in names):
            continue
        prober = factory(settings, metrics, resolver)
        built.append(prober)
        for n in names:
            by_scheme.setdefault(n, prober)
    return by_scheme, built


def scheme_of(url: str) -> str:
    return url[: url.find(":")]


def no_prober_outcome(url: str) -> HttpOutcome:
    """The outcome of a URL whose scheme has no prober on this node (a check stored by a
    newer release, say): a failure in words, not an exception."""
    return HttpOutcome(None, f"no prober for {scheme_of(url)}:// on this node", 0.0,
                       None, None, None, None)


class ByScheme:
    """One prober for every uptime scheme: ``http`` for http(s), ``others`` by scheme. What
    the local confirmer and the peer endpoint re-probe with, as the kind probes."""

    def __init__(self, http: Any, others: Mapping[str, UptimeProbe] | None = None) -> None:
        self.http = http
        self.others: dict[str, UptimeProbe] = dict(others or {})
        # The HTTP prober's resolver, shared with the certificate prober.
        self.resolver = getattr(http, "resolver", None)

    @property
    def polling(self) -> bool:
        return any(getattr(p, "polling", False) for p in (self.http, *self.others.values()))

    def prober_of(self, url: str) -> Any:
        """The prober of ``url``'s scheme (None: none on this node)."""
        if self.others:
            other = self.others.get(scheme_of(url))
            if other is not None:
                return other
        return self.http if url.startswith("http") else None

    async def probe(self, url: str, spec: Any = None) -> HttpOutcome:
        prober = self.prober_of(url)
        if prober is None:
            return no_prober_outcome(url)
        if spec is None:
            outcome: HttpOutcome = await prober.probe(url)
        else:
            outcome = await prober.probe(url, spec)
        return outcome

    async def aclose(self) -> None:
        """Nothing: the probers are closed by whoever built them (``Kinds.aclose``)."""
