"""The private-address rule.

Unless ``UPWATCH_ALLOW_PRIVATE_TARGETS`` is set, monitor and webhook URLs must not reach
loopback, private, link-local, shared, multicast, reserved or otherwise non-public addresses.
The rule is checked on the API side (a 422) and again on the address actually connected to
(probes and deliveries), so a DNS answer that changes after validation cannot get through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

from engine.runtime.errors import BlockedAddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# A name lookup: every address ``host`` resolves to, or OSError when it does not resolve.
# Probes and webhook deliveries take one (default: the system resolver) and apply the rule
# to whatever it answers, so a stand-in for DNS (tests, or an embedder with its own
# resolver) can never get past the rule.
Resolver = Callable[[str, int], Awaitable[list[str]]]


def is_public_ip(ip: str | IPAddress) -> bool:
    """True when ``ip`` is a globally routable unicast address."""
    addr = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    if isinstance(addr, ipaddress.IPv6Address):
        mapped = addr.ipv4_mapped or addr.sixtofour
        if mapped is not None:
            return is_public_ip(mapped)
        if addr.teredo is not None:
            return False
    return bool(
        addr.is_global
        and not addr.is_multicast
        and not addr.is_reserved
        and not addr.is_loopback
        and not addr.is_link_local
        and not addr.is_unspecified
    )


def literal_ip(host: str) -> IPAddress | None:
    """The address when ``host`` is an IP literal (brackets allowed), else None."""
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


async def resolve(host: str, port: int, *, timeout: float = 5.0) -> list[str]:
    """All addresses ``host`` resolves to (IP literals resolve to themselves)."""
    lit = literal_ip(host)
    if lit is not None:
        return [str(lit)]
    loop = asyncio.get_running_loop()
    infos = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP),
        timeout,
    )
    seen: dict[str, None] = {}
    for _family, _type, _proto, _canon, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]).split("%", 1)[0], None)
    return list(seen)


def ensure_public(addresses: list[str], *, allow_private: bool) -> None:
    """Raise BlockedAddress naming the first non-public address, unless allowed."""
    if allow_private:
        return
    for a in addresses:
        if not is_public_ip(a):
            raise BlockedAddress(f"resolves to a non-public address ({a})")


async def check_host(
    host: str, port: int, *, allow_private: bool, timeout: float = 5.0
) -> list[str]:
    """Resolve ``host`` and apply the rule; returns the addresses. Raises BlockedAddress, or
    OSError / TimeoutError when the name does not resolve."""
    addrs = await resolve(host, port, timeout=timeout)
    ensure_public(addrs, allow_private=allow_private)
    return addrs
