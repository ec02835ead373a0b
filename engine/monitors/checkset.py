"""Which checks a monitor has: :func:`checks_of`, the one answer the store, the API, monitors
as code and the status page follow.

By the monitor's type and its URL's scheme and host (decisions.md): an uptime monitor has the
``uptime`` check, a ``certificate_health`` check when its scheme has one
(:attr:`engine.monitors.scheme.Scheme.has_certificate`: http and https today), and a
``domain_expiry`` check when its host is a name under a registrable domain (not an IP
literal, a bare public suffix or a single label such as ``localhost``; not for dns://, whose
host is the server asked); a heartbeat monitor
only its ``heartbeat`` check. Kinds are listed in the API's order.
"""

from __future__ import annotations

from typing import Final

from engine.domain.rdap import registrable_domain
from engine.monitors import schemes

UPTIME: Final = "uptime"
CERTIFICATE: Final = "certificate_health"
HEARTBEAT: Final = "heartbeat"  # the monitor type and its one check (engine/monitors/heartbeat.py)
DOMAIN: Final = "domain_expiry"

# Every kind a monitor may have, in the order the API, files and status pages list them.
ORDER: Final[tuple[str, ...]] = (UPTIME, CERTIFICATE, DOMAIN)


def checks_of(scheme: str, host: str, monitor_type: str = UPTIME) -> tuple[str, ...]:
    """The kinds of check of a monitor of ``monitor_type`` whose URL has ``scheme`` and
    ``host`` (as :class:`engine.monitors.validation.TargetUrl` has them), in :data:`ORDER`;
    a heartbeat monitor (no URL; stored with the scheme ``heartbeat``) has its heartbeat
    check alone."""
    if monitor_type == HEARTBEAT or scheme == HEARTBEAT:
        return (HEARTBEAT,)
    kinds = [UPTIME]
    known = schemes.get(scheme)
    if known is not None and known.has_certificate:
        kinds.append(CERTIFICATE)
    # A dns:// URL's host is the server asked, not the name watched.
    if scheme != "dns" and registrable_domain(host) is not None:
        kinds.append(DOMAIN)
    return tuple(kinds)


def enabled_on_create(kind: str, scheme: str) -> bool:
    """Whether a new monitor's check of ``kind`` starts enabled: every check but a
    certificate check of a scheme without TLS from the start (http's starts paused: a
    plain-HTTP site has no certificate to judge). Every way of creating a monitor follows
    this."""
    if kind != CERTIFICATE:
        return True
    known = schemes.get(scheme)
    return known is not None and known.tls
