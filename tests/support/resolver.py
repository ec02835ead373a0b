"""The probes' resolver for its tests: pointed at one DNS server on loopback, quick to give
up, and on a clock the test moves by hand so that TTLs pass without waiting."""

from __future__ import annotations

import socket
from typing import Protocol

from engine.probes.resolver import ProbeResolver


class Clock:
    """A clock that stands still until the test moves ``now``."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class DnsServerAddress(Protocol):
    @property
    def address(self) -> str: ...


def resolver(dns: DnsServerAddress, clock: Clock | None = None, **kw: object) -> ProbeResolver:
    """A resolver asking ``dns`` alone (0.3 s, one try, IPv4), on ``clock`` when given; ``kw``
    overrides any of its options."""
    opts: dict[str, object] = {"servers": [dns.address], "timeout": 0.3, "tries": 1,
                               "family": socket.AF_INET}
    opts.update(kw)
    if clock is not None:
        opts["clock"] = clock
    return ProbeResolver(**opts)  # type: ignore[arg-type]
