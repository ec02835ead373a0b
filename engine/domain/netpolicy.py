"""The private-address rule.

Unless ``UPWATCH_ALLOW_PRIVATE_TARGETS`` is set, monitor and webhook URLs must not reach
loopback, private, link-local, shared, multicast, reserved or otherwise non-public addresses
(:func:`is_public_ip`: the IANA special-purpose registries, written out).
The rule is checked on the API side (a 422) and again on the address actually connected to
(probes and deliveries), so a DNS answer that changes after validation cannot get through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from typing import Final

from engine.runtime.errors import BlockedAddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# A name lookup: every address ``host`` resolves to, or OSError when it does not resolve.
# Probes and webhook deliveries take one (default: the system resolver) and apply the rule
# to whatever it answers, so a stand-in for DNS (tests, or an embedder with its own
# resolver) can never get past the rule.
Resolver = Callable[[str, int], Awaitable[list[str]]]


# The IANA special-purpose address registries (IPv4 and IPv6, as of 2025), with what is
# refused beyond them. Written out rather than read from ``ipaddress``'s properties, whose
# answers change between Python versions (3.11 calls fec0::/10, 5f00::/16 and 3fff::/20
# global).
_V4_NOT_PUBLIC: Final = (
    "0.0.0.0/8",  # "this network"
    "10.0.0.0/8",  # private
    "100.64.0.0/10",  # shared address space (carrier-grade NAT)
    "127.0.0.0/8",  # loopback
    "169.254.0.0/16",  # link-local
    "172.16.0.0/12",  # private
    "192.0.0.0/24",  # IETF protocol assignments (DS-Lite, NAT64 discovery, ...)
    "192.0.2.0/24",  # documentation (TEST-NET-1)
    "192.88.99.0/24",  # 6to4 relay anycast, deprecated
    "192.168.0.0/16",  # private
    "198.18.0.0/15",  # benchmarking
    "198.51.100.0/24",  # documentation (TEST-NET-2)
    "203.0.113.0/24",  # documentation (TEST-NET-3)
    "224.0.0.0/4",  # multicast
    "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
)
# Inside those, what the registry marks globally reachable: the PCP and TURN anycast
# addresses.
_V4_PUBLIC_INSIDE: Final = ("192.0.0.9/32", "192.0.0.10/32")
# IPv6 is public only inside 2000::/3, the global unicast space (after the forms that
# embed an IPv4 address are judged by that address). Outside it: ::/128, ::1, the
# deprecated IPv4-compatible ::/96, 64:ff9b:1::/48 (local-use translation), 100::/64
# (discard), 5f00::/16 (SRv6 SIDs), fc00::/7 (unique local), fe80::/10 (link-local),
# fec0::/10 (site-local, deprecated), ff00::/8 (multicast) and the unassigned rest.
_V6_GLOBAL_UNICAST: Final = "2000::/3"
_V6_NOT_PUBLIC: Final = (
    "2001::/23",  # IETF protocol assignments (Teredo 2001::/32, benchmarking, ORCHID, ...)
    "2001:db8::/32",  # documentation
    "3fff::/20",  # documentation
)
_V6_PUBLIC_INSIDE: Final = (
    "2001:1::1/128",  # PCP anycast
    "2001:1::2/128",  # TURN anycast
    "2001:1::3/128",  # DNS-SD service registration anycast
    "2001:3::/32",  # AMT
    "2001:4:112::/48",  # AS112-v6
    "2001:20::/28",  # ORCHIDv2
)
# Forms that carry an IPv4 address in their last 32 bits, judged by it: IPv4-mapped and
# the well-known NAT64 prefix (a probe behind DNS64 reaches public IPv4 sites there).
_V6_EMBEDDING_V4: Final = ("::ffff:0:0/96", "64:ff9b::/96")


def _ranges(nets: tuple[str, ...]) -> tuple[tuple[int, int], ...]:
    return tuple(
        (int(n.network_address), int(n.broadcast_address))
        for n in map(ipaddress.ip_network, nets)
    )


_V4_NOT_PUBLIC_R: Final = _ranges(_V4_NOT_PUBLIC)
_V4_PUBLIC_INSIDE_R: Final = _ranges(_V4_PUBLIC_INSIDE)
_V6_GLOBAL_UNICAST_R: Final = _ranges((_V6_GLOBAL_UNICAST,))[0]
_V6_NOT_PUBLIC_R: Final = _ranges(_V6_NOT_PUBLIC)
_V6_PUBLIC_INSIDE_R: Final = _ranges(_V6_PUBLIC_INSIDE)
_V6_EMBEDDING_V4_R: Final = _ranges(_V6_EMBEDDING_V4)
_V6_6TO4: Final = _ranges(("2002::/16",))[0]


def _inside(n: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= n <= hi for lo, hi in ranges)


def is_public_ip(ip: str | IPAddress) -> bool:
    """True when ``ip`` is a globally reachable unicast address: not in a range the IANA
    special-purpose registries mark not globally reachable (or deprecated), not multicast
    or reserved; an IPv6 address outside 2000::/3 never is. IPv4-mapped, NAT64
    (64:ff9b::/96) and 6to4 (2002::/16) addresses are judged by the IPv4 address they
    carry."""
    addr = ipaddress.ip_address(ip) if isinstance(ip, str) else ip
    n = int(addr)
    if isinstance(addr, ipaddress.IPv4Address):
        return not _inside(n, _V4_NOT_PUBLIC_R) or _inside(n, _V4_PUBLIC_INSIDE_R)
    if _inside(n, _V6_EMBEDDING_V4_R):
        return is_public_ip(ipaddress.IPv4Address(n & 0xFFFFFFFF))
    lo, hi = _V6_6TO4
    if lo <= n <= hi:
        return is_public_ip(ipaddress.IPv4Address((n >> 80) & 0xFFFFFFFF))
    lo, hi = _V6_GLOBAL_UNICAST_R
    if not lo <= n <= hi:
        return False
    return not _inside(n, _V6_NOT_PUBLIC_R) or _inside(n, _V6_PUBLIC_INSIDE_R)


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
