"""The dns:// probe against a real authoritative server on loopback: every record type it
asks, answers read as text, CNAMEs followed, the default rule (NOERROR with an answer of
the type), the meta it keeps, and the private-address rule on the server's name and
address."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from engine.probes.dns import DnsProber
from tests.support.dns_zone_server import DnsZoneServer
from tests.support.fake_dns import FakeDns


@pytest.fixture
async def server() -> AsyncIterator[DnsZoneServer]:
    async with DnsZoneServer() as s:
        yield s


def prober(**kw: object) -> DnsProber:
    opts: dict[str, object] = {"timeout": 2.0, "allow_private": True}
    opts.update(kw)
    return DnsProber(**opts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "rdtype", "expected"),
    [
        ("www.zone.test", "A", ["192.0.2.1", "192.0.2.2"]),
        ("www.zone.test", "AAAA", ["2001:db8::1"]),
        ("alias.zone.test", "CNAME", ["www.zone.test."]),
        ("zone.test", "MX", ["10 mail.zone.test.", "20 backup-mail.zone.test."]),
        ("zone.test", "NS", ["ns1.zone.test.", "ns2.zone.test."]),
        ("zone.test", "TXT", ['"v=spf1 -all"']),
        ("zone.test", "SOA",
         ["ns1.zone.test. admin.zone.test. 2026010101 3600 600 86400 60"]),
        ("_sip._tcp.zone.test", "SRV", ["10 60 5060 sip.zone.test."]),
        ("zone.test", "CAA", ['0 issue "letsencrypt.org"']),
        ("192.0.2.1", "PTR", ["www.zone.test."]),
    ],
)
async def test_every_record_type_is_asked_and_read_as_text(
    server: DnsZoneServer, name: str, rdtype: str, expected: list[str]
) -> None:
    out = await prober().probe(server.url(name, rdtype))
    assert out.error is None and out.assertion_error is None, out
    assert out.status_code is None
    assert out.details is not None
    assert sorted(out.details["answers"]) == sorted(expected)
    assert out.details["rcode"] == "NOERROR"
    assert out.details["type"] == rdtype
    assert out.details["answer_count"] == len(expected)
    assert out.details["transport"] == "udp"
    assert out.ttfb_ms is not None and out.ttfb_ms <= out.total_ms
    assert out.remote_ip == "127.0.0.1"


async def test_a_cname_chain_is_followed_to_the_records_and_the_least_ttl(
    server: DnsZoneServer,
) -> None:
    out = await prober().probe(server.url("chain.zone.test", "A"))
    assert out.error is None and out.assertion_error is None
    assert out.details is not None
    assert sorted(out.details["answers"]) == ["192.0.2.1", "192.0.2.2"]
    assert out.details["min_ttl"] == 120  # www's 120 s, under the CNAMEs' 300 s


async def test_a_name_that_does_not_exist_fails_the_default_rule_in_words(
    server: DnsZoneServer,
) -> None:
    out = await prober().probe(server.url("gone.zone.test", "A"))
    assert out.error is None  # the server answered
    assert out.assertion_error == "DNS answer NXDOMAIN: no A record for gone.zone.test"
    assert out.details is not None and out.details["rcode"] == "NXDOMAIN"
    assert out.details["answers"] == [] and out.details["min_ttl"] is None


async def test_a_name_without_the_type_fails_the_default_rule(server: DnsZoneServer) -> None:
    out = await prober().probe(server.url("mail.zone.test", "AAAA"))
    assert out.assertion_error == "DNS answer NOERROR: no AAAA record for mail.zone.test"


async def test_a_cname_loop_fails_in_words(server: DnsZoneServer) -> None:
    out = await prober().probe(server.url("loop-a.zone.test", "A"))
    assert out.error is None
    assert out.assertion_error == (
        "DNS answer CNAME loop: loop-a.zone.test -> loop-b.zone.test -> loop-a.zone.test")


async def test_a_changed_record_is_seen_on_the_next_probe(server: DnsZoneServer) -> None:
    p = prober()
    url = server.url("www.zone.test", "A")
    assert (await p.probe(url)).assertion_error is None
    server.set("www", "A", [])
    out = await p.probe(url)
    assert out.assertion_error == "DNS answer NOERROR: no A record for www.zone.test"


async def test_the_server_by_name_is_looked_up_and_its_address_checked(
    server: DnsZoneServer,
) -> None:
    fake = FakeDns()
    fake.names["ns.example.test"] = [["127.0.0.1"]]
    url = f"dns://ns.example.test:{server.port}/www.zone.test?type=A"
    out = await prober(resolver=fake.resolve).probe(url)
    assert out.error is None and out.assertion_error is None
    assert out.dns_ms is not None
    assert out.details is not None and out.details["server"] == f"ns.example.test:{server.port}"
    blocked = await prober(resolver=fake.resolve, allow_private=False).probe(url)
    assert blocked.error == (
        "blocked: ns.example.test resolves to a non-public address (127.0.0.1)")
    assert server.queries["udp"] == 1  # the blocked probe asked nothing


async def test_a_private_server_address_is_refused_unless_allowed(
    server: DnsZoneServer,
) -> None:
    out = await prober(allow_private=False).probe(server.url("www.zone.test"))
    assert out.error == "blocked: 127.0.0.1 resolves to a non-public address (127.0.0.1)"
    assert server.queries["udp"] == 0


async def test_a_server_name_that_does_not_resolve_fails_in_words() -> None:
    out = await prober(resolver=FakeDns().resolve).probe("dns://nowhere.test/www.zone.test")
    assert out.error == "DNS lookup failed: nowhere.test"


async def test_a_closed_port_is_refused_in_words(server: DnsZoneServer) -> None:
    port = server.port
    await server.__aexit__(None, None, None)
    out = await prober().probe(f"dns://127.0.0.1:{port}/www.zone.test")
    assert out.error == "connection refused"


async def test_a_server_on_ipv6_loopback_is_asked_over_ipv6() -> None:
    try:
        server = DnsZoneServer(host="::1")
        await server.__aenter__()
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    try:
        url = server.url("www.zone.test", "AAAA")
        assert url.startswith("dns://[::1]:")
        out = await prober().probe(url)
        assert out.error is None and out.assertion_error is None, out
        assert out.remote_ip == "::1"
        assert out.details is not None and out.details["answers"] == ["2001:db8::1"]
        assert out.details["server"] == f"[::1]:{server.port}"
    finally:
        await server.__aexit__(None, None, None)


async def test_the_server_by_name_goes_through_the_probes_c_ares_resolver(
    server: DnsZoneServer,
) -> None:
    from tests.support.resolver import resolver

    cares = resolver(server)
    p = prober(resolver=cares)
    url = f"dns://ns-local.zone.test:{server.port}/www.zone.test?type=A"
    first = await p.probe(url)
    assert first.error is None and first.assertion_error is None, first
    assert first.dns_ms is not None and first.dns_ms > 0
    again = await p.probe(url)
    assert again.error is None and again.dns_ms == 0.0  # the resolver's cached answer
    assert cares.lookups == 1
    blocked = await prober(resolver=cares, allow_private=False).probe(url)
    assert blocked.error == (
        "blocked: ns-local.zone.test resolves to a non-public address (127.0.0.1)")
    missing = await p.probe(f"dns://nowhere.zone.test:{server.port}/www.zone.test")
    assert missing.error == "DNS lookup failed: nowhere.zone.test"
    await cares.aclose()
