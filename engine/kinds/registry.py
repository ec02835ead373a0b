"""Every kind of check, registered in one place: :func:`registered`.

The engine, the results path, the API's check JSON and the status page reach a kind only
through a :class:`Kinds` (by ``name``, in registration order). :data:`SHOWN` holds the
kinds without probers, for what only shows checks (the API, the status page); the daemon
builds the engine's with their probers (``engine.daemon.build_kinds``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, Protocol

from engine.kinds.base import CheckKind
from engine.kinds.certificate import CertificateKind, CertProbe
from engine.kinds.domain_expiry import DomainExpiryKind, DomainProbe
from engine.kinds.heartbeat import HeartbeatKind, HeartbeatReader
from engine.kinds.uptime import HttpProbe, UptimeKind
from engine.kinds.uptime_probers import UptimeProbe


def registered(
    http: HttpProbe | None = None,
    tls: CertProbe | None = None,
    heartbeats: HeartbeatReader | None = None,
    domain: DomainProbe | None = None,
    *,
    uptime: Mapping[str, UptimeProbe] | None = None,
    owned: Iterable[Closable] = (),
) -> Kinds:
    """Every kind, each with the prober it probes with (None: it can only be shown);
    ``uptime``: the probers of uptime schemes other than http(s), by scheme
    (:mod:`engine.kinds.uptime_probers`); ``heartbeats``: what the heartbeat kind reads
    its facts with; ``domain``: the domain expiry kind's prober. ``owned``: the probers
    :meth:`Kinds.aclose` closes (those built for these kinds)."""
    up = UptimeKind(http, uptime)
    reprober = (up.by_scheme if uptime else http) if http is not None or uptime else None
    kinds = (up, CertificateKind(tls), DomainExpiryKind(domain), HeartbeatKind(heartbeats))
    return Kinds(kinds, reprober=reprober, owned=owned)


class Closable(Protocol):
    async def aclose(self) -> None: ...


class Kinds:
    """Kinds by name, in registration order (the order the API and status page list them)."""

    def __init__(
        self,
        kinds: Iterable[CheckKind],
        *,
        reprober: Any = None,
        owned: Iterable[Closable] = (),
    ) -> None:
        self._all: tuple[CheckKind, ...] = tuple(kinds)
        self._by_name: dict[str, CheckKind] = {k.name: k for k in self._all}
        # What a local confirmation and the peer endpoint probe again with (confirmations
        # are of uptime outcomes, any scheme: engine.scheduler.confirm); None when no kind
        # asks for one.
        self.reprober = reprober
        self._owned = tuple(owned)

    def __iter__(self) -> Iterator[CheckKind]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __getitem__(self, name: str) -> CheckKind:
        return self._by_name[name]

    def get(self, name: str) -> CheckKind | None:
        return self._by_name.get(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self._all)

    @property
    def polling(self) -> bool:
        """A kind's prober polls its sockets (under load) rather than being woken."""
        return any(getattr(k.prober, "polling", False) for k in self._all) or bool(
            getattr(self.reprober, "polling", False))

    async def aclose(self) -> None:
        """Close the probers these kinds own; one failing does not keep the others open."""
        for p in self._owned:
            try:
                await p.aclose()
            except Exception:  # noqa: S112 - closing on the way out, nothing to do about it
                continue


SHOWN: Final = registered()
