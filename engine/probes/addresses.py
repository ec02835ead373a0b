"""Which addresses a probe connects to: a host resolved by the probe itself and the
private-address rule applied to every candidate, so the probes connect to an IP literal that
was checked (DNS rebinding between the check and the connect cannot get through); and the
address family a probe may use.
"""

from __future__ import annotations

import asyncio
import functools
import socket
from time import perf_counter

from engine.domain.netpolicy import Resolver, is_public_ip, literal_ip
from engine.probes.failures import ProbeFailure, short


def ip_literal(host: str) -> str | None:
    """The canonical text of ``host`` when it is an IP literal (brackets allowed), else None.

    Runs for every hop, so names are told apart without ``ipaddress`` (about 5 us a parse):
    a host name never ends in a digit (its top-level label is not numeric) and never holds a
    colon; candidates are checked with ``inet_pton``. Forms ``inet_pton`` refuses but
    ``getaddrinfo`` would accept ("0177.1") count as names: the rule is then applied to what
    they resolve to, so they cannot slip past it.
    """
    if ":" in host:
        host = host.strip("[]")
        try:
            return socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, host))
        except (OSError, ValueError):
            lit = literal_ip(host)  # scoped addresses ("fe80::1%eth0")
            return str(lit) if lit is not None else None
    if not host or not host[-1].isdigit():
        return None
    try:
        return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, host))
    except OSError:
        return None


@functools.lru_cache(maxsize=16384)
def public_address(ip: str) -> bool:
    """``is_public_ip`` with a cache: the same addresses come back probe after probe, and the
    ``ipaddress`` properties cost several microseconds per call."""
    return is_public_ip(ip)


async def resolve_checked(
    host: str,
    port: int,
    *,
    literal: str | None,
    family: int,
    allow_private: bool,
    resolver: Resolver | None = None,
) -> tuple[list[str], float | None]:
    """Addresses to connect to for ``host``, and the DNS time in ms (None for IP literals).

    ``literal`` is ``ip_literal(host)``, computed by the caller once per URL. Names are looked
    up with ``resolver`` when given (its answers filtered to ``family``), else with the event
    loop's ``getaddrinfo``; either way the answer is checked here, just before connecting,
    and the probe connects to the checked addresses only. Every candidate
    is checked against the private-address rule, not only the one we will use: a name that
    resolves to any non-public address is refused as a whole. Raises :class:`ProbeFailure`
    with the outcome's words (``DNS lookup failed: <name>``, ``blocked: <name> resolves to a
    non-public address (<ip>)``).
    """
    if literal is not None:
        return checked_literal(host, literal, allow_private), None
    else:
        t = perf_counter()
        try:
            if resolver is None:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, family=family, type=socket.SOCK_STREAM,
                    proto=socket.IPPROTO_TCP,
                )
                answer = [str(info[4][0]) for info in infos]
            else:
                answer = [
                    a for a in await resolver(host, port)
                    if family == socket.AF_UNSPEC or ip_family(a) == family
                ]
        except (OSError, UnicodeError, ValueError):
            # (A ProbeFailure from the resolver carries its own words and passes through.)
            raise ProbeFailure(f"DNS lookup failed: {short(host)}") from None
        dns_ms = (perf_counter() - t) * 1000.0
        addrs = []
        for a in answer:
            if a not in addrs:
                addrs.append(a)
        if not addrs:
            raise ProbeFailure(f"DNS lookup failed: {short(host)}")
    return checked_addresses(host, addrs, allow_private), dns_ms


def checked_literal(host: str, literal: str, allow_private: bool) -> list[str]:
    """:func:`resolve_checked` for an IP literal, without a coroutine: nothing to look up,
    only the private-address rule to apply."""
    if not allow_private and not public_address(literal):
        raise ProbeFailure(
            f"blocked: {short(host)} resolves to a non-public address ({literal})"
        )
    return [literal]


def checked_addresses(host: str, addrs: list[str], allow_private: bool) -> list[str]:
    """``addrs`` (an answer for ``host``, cached or fresh) once the private-address rule
    holds for every one of them; else :class:`ProbeFailure` naming the first that fails.
    Applied at every use of an answer, so a cached one is checked as often as a fresh one."""
    if not allow_private:
        for a in addrs:
            if not public_address(a):
                raise ProbeFailure(
                    f"blocked: {short(host)} resolves to a non-public address ({a})"
                )
    return addrs


def source_family(source_address: str | None) -> int:
    """Address family the probe may use: that of the source address, else any."""
    if source_address is None:
        return socket.AF_UNSPEC
    return socket.AF_INET6 if ":" in source_address else socket.AF_INET


def ip_family(ip: str) -> int:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET
