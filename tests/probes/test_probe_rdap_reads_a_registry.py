"""The RDAP client against a registry on loopback, found through a file:// bootstrap: what
it reads (registrar, expiry, EPP statuses, nameservers), unknown TLDs, the bundled bootstrap."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from engine.domain.rdap import registrable_domain
from engine.probes.rdap import RdapClient
from tests.support.rdap_registry import RdapRegistry, Record

EXPIRES = datetime(2027, 3, 1, 12, 0, tzinfo=UTC)


async def test_a_registry_answer_is_read(tmp_path: Path) -> None:
    async with RdapRegistry({"example.test": Record(
            EXPIRES, ("client transfer prohibited", "active"))}) as reg:
        client = RdapClient(bootstrap_url=reg.bootstrap(tmp_path / "dns.json"),
                            allow_private=True, timeout=5)
        try:
            got = await client.lookup("example.test")
        finally:
            await client.aclose()
    assert got.error is None and got.unsupported is None
    assert got.server == reg.base
    r = got.registration
    assert r is not None
    assert r.registrar == "Loopback Registrar, Inc."
    assert r.expires_at == EXPIRES
    assert r.statuses == ("clientTransferProhibited", "ok")
    assert r.nameservers == ("ns1.loopback.test", "ns2.loopback.test")
    assert reg.queries == {"example.test": 1}


async def test_unknown_domain_and_unknown_tld_fail_in_words(tmp_path: Path) -> None:
    async with RdapRegistry() as reg:
        client = RdapClient(bootstrap_url=reg.bootstrap(tmp_path / "dns.json"),
                            allow_private=True, timeout=5)
        try:
            missing = await client.lookup("nobody.test")
            zz = await client.lookup("example.zz")
        finally:
            await client.aclose()
    assert missing.registration is None
    assert missing.error == "the registry has no record of nobody.test"
    assert zz.registration is None and zz.error is None
    assert zz.unsupported == (
        "the .zz registry publishes no RDAP service (not in the IANA bootstrap)")
    assert "example.zz" not in reg.queries


async def test_bundled_bootstrap_serves_when_the_configured_one_cannot_be_read(
        tmp_path: Path) -> None:
    client = RdapClient(bootstrap_url=(tmp_path / "missing.json").as_uri(), timeout=2)
    try:
        servers = await client.servers()
    finally:
        await client.aclose()
    assert servers["com"] == "https://rdap.verisign.com/com/v1/"
    assert client.bootstrap_note is not None and "the bundled copy serves" in client.bootstrap_note


async def test_a_registry_on_a_private_address_is_refused_without_the_setting(
        tmp_path: Path) -> None:
    async with RdapRegistry({"example.test": Record(EXPIRES)}) as reg:
        client = RdapClient(bootstrap_url=reg.bootstrap(tmp_path / "dns.json"),
                            allow_private=False, timeout=5)
        try:
            got = await client.lookup("example.test")
        finally:
            await client.aclose()
    assert got.registration is None
    assert got.error == "the RDAP server 127.0.0.1 is a non-public address"
    assert not reg.queries


def test_registrable_domain_comes_from_the_public_suffix_list() -> None:
    assert registrable_domain("www.example.co.uk") == "example.co.uk"
    assert registrable_domain("a.b.Example.COM.") == "example.com"
    assert registrable_domain("status.github.io") == "github.io"
    assert registrable_domain("bücher.example.de") == "example.de"
    assert registrable_domain("www.bücher.de") == "xn--bcher-kva.de"
    for no in ("127.0.0.1", "[::1]", "::1", "co.uk", "com", "localhost", ""):
        assert registrable_domain(no) is None, no
