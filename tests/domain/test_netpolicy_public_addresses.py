"""Which addresses the private-address rule lets a probe, webhook or notification reach:
every range of the IANA special-purpose registries (IPv4 and IPv6), the IPv6 forms that
carry an IPv4 address, and ordinary public addresses on either side of each edge."""

from __future__ import annotations

import ipaddress

import pytest

from engine.domain.netpolicy import ensure_public, is_public_ip
from engine.runtime.errors import BlockedAddress

NOT_PUBLIC_V4 = [
    ("0.0.0.0", "this network"), ("0.255.255.255", "this network, last"),
    ("10.0.0.1", "private"), ("10.255.255.255", "private, last"),
    ("100.64.0.1", "shared (CGN)"), ("100.127.255.254", "shared, last"),
    ("127.0.0.1", "loopback"), ("127.255.255.254", "loopback, last"),
    ("169.254.169.254", "link-local (cloud metadata)"),
    ("172.16.0.1", "private"), ("172.31.255.255", "private, last"),
    ("192.0.0.1", "IETF protocol assignments"), ("192.0.0.8", "IPv4 dummy address"),
    ("192.0.0.170", "NAT64 discovery"), ("192.0.0.255", "IETF protocol assignments, last"),
    ("192.0.2.1", "TEST-NET-1"), ("192.88.99.1", "6to4 relay anycast (deprecated)"),
    ("192.168.1.1", "private"), ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking, last"), ("198.51.100.7", "TEST-NET-2"),
    ("203.0.113.9", "TEST-NET-3"), ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast (SSDP)"), ("240.0.0.1", "reserved"),
    ("255.255.255.255", "limited broadcast"),
]
PUBLIC_V4 = [
    ("8.8.8.8", "ordinary"), ("1.1.1.1", "ordinary"), ("9.255.255.255", "before 10/8"),
    ("11.0.0.0", "after 10/8"), ("100.63.255.255", "before 100.64/10"),
    ("100.128.0.0", "after 100.64/10"), ("172.15.255.255", "before 172.16/12"),
    ("172.32.0.0", "after 172.16/12"), ("192.0.0.9", "PCP anycast (globally reachable)"),
    ("192.0.0.10", "TURN anycast (globally reachable)"), ("192.0.1.1", "after 192.0.0/24"),
    ("192.31.196.1", "AS112-v4"), ("192.52.193.1", "AMT"), ("192.175.48.1", "AS112"),
    ("198.17.255.255", "before 198.18/15"), ("198.20.0.0", "after 198.18/15"),
    ("223.255.255.255", "before multicast"),
]
NOT_PUBLIC_V6 = [
    ("::", "unspecified"), ("::1", "loopback"), ("::a00:1", "IPv4-compatible (deprecated)"),
    ("::8.8.8.8", "IPv4-compatible of a public address"),
    ("::ffff:10.0.0.1", "IPv4-mapped private"), ("::ffff:127.0.0.1", "IPv4-mapped loopback"),
    ("::ffff:169.254.169.254", "IPv4-mapped link-local"),
    ("::ffff:0:808:808", "IPv4-translated (SIIT)"),
    ("64:ff9b::a00:1", "NAT64 of a private address"),
    ("64:ff9b::7f00:1", "NAT64 of loopback"), ("64:ff9b::6440:1", "NAT64 of 100.64/10"),
    ("64:ff9b:1::808:808", "local-use NAT64"), ("100::1", "discard-only"),
    ("2001::1", "Teredo"), ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo, any"),
    ("2001:2::1", "benchmarking"), ("2001:10::1", "ORCHID (deprecated)"),
    ("2001:1ff::1", "IETF protocol assignments, last /32"),
    ("2001:db8::1", "documentation"), ("2001:db8:ffff::1", "documentation"),
    ("2002:a00:1::", "6to4 of a private address"), ("2002:7f00:1::1", "6to4 of loopback"),
    ("2002:c000:201::", "6to4 of TEST-NET-1"), ("3fff::1", "documentation (3fff::/20)"),
    ("3fff:fff::1", "documentation, last"), ("5f00::1", "SRv6 SIDs"),
    ("fc00::1", "unique local"), ("fd12:3456::1", "unique local"),
    ("fe80::1", "link-local"), ("febf::1", "link-local, last"),
    ("fec0::1", "site-local (deprecated)"), ("feff:ffff::1", "site-local, last"),
    ("ff02::1", "multicast"), ("ff0e::1", "global multicast"),
    ("4000::1", "unassigned, above 2000::/3"), ("1fff:ffff::1", "unassigned, below 2000::/3"),
]
PUBLIC_V6 = [
    ("2606:4700:4700::1111", "ordinary"), ("2001:4860:4860::8888", "ordinary"),
    ("2001:200::1", "after 2001::/23"), ("2001:1::1", "PCP anycast (globally reachable)"),
    ("2001:1::3", "DNS-SD SRP anycast"), ("2001:3::1", "AMT"),
    ("2001:4:112::1", "AS112-v6"), ("2001:20::1", "ORCHIDv2"),
    ("2620:4f:8000::1", "AS112 direct delegation"), ("2002:808:808::1", "6to4 of public"),
    ("64:ff9b::808:808", "NAT64 of a public address (DNS64)"),
    ("::ffff:8.8.8.8", "IPv4-mapped public"), ("3fff:1000::1", "after 3fff::/20"),
    ("2000::1", "first of 2000::/3"), ("3ffe::1", "in 2000::/3"),
]


@pytest.mark.parametrize(("ip", "why"), NOT_PUBLIC_V4 + NOT_PUBLIC_V6)
def test_not_public(ip: str, why: str) -> None:
    assert not is_public_ip(ip), why
    assert not is_public_ip(ipaddress.ip_address(ip)), why
    with pytest.raises(BlockedAddress, match=f"non-public address \\({ip}\\)"):
        ensure_public(["8.8.8.8", ip], allow_private=False)
    ensure_public([ip], allow_private=True)


@pytest.mark.parametrize(("ip", "why"), PUBLIC_V4 + PUBLIC_V6)
def test_public(ip: str, why: str) -> None:
    assert is_public_ip(ip), why
    assert is_public_ip(ipaddress.ip_address(ip)), why
    ensure_public([ip], allow_private=False)
