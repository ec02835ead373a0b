"""Hostile RDAP servers: slow, garbage, a redirect loop, 50 MB. Each lookup ends in words,
within its time budget, having read at most the size bound."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.probes.rdap import RdapClient
from tests.support.rdap_registry import RdapRegistry


@pytest.mark.parametrize(("name", "error"), [
    ("slow.test", "the RDAP server 127.0.0.1 did not answer within 1 s"),
    ("garbage.test", "the RDAP answer is not JSON"),
    ("loop.test", "the RDAP server 127.0.0.1 redirects in a loop"),
    ("huge.test", "the RDAP server 127.0.0.1 sent more than 1024 KB"),
])
async def test_hostile_registry_fails_in_words_within_bounds(
        tmp_path: Path, name: str, error: str) -> None:
    async with RdapRegistry() as reg:
        client = RdapClient(bootstrap_url=reg.bootstrap(tmp_path / "dns.json"),
                            allow_private=True, timeout=1.0)
        try:
            start = time.monotonic()
            got = await client.lookup(name)
            took = time.monotonic() - start
        finally:
            await client.aclose()
    assert got.registration is None
    assert got.error == error
    assert took < 3.0
    # A redirect loop is cut at its first repeat, not followed forever.
    assert reg.queries[name] <= 2


async def test_a_garbage_bootstrap_falls_back_to_the_bundled_copy(tmp_path: Path) -> None:
    bad = tmp_path / "dns.json"
    bad.write_bytes(b"\x00\xff not json at all")
    client = RdapClient(bootstrap_url=bad.as_uri(), timeout=1.0)
    try:
        servers = await client.servers()
    finally:
        await client.aclose()
    assert "org" in servers
    assert client.bootstrap_note == (
        f"the RDAP bootstrap at {bad.as_uri()} could not be read "
        "(the RDAP bootstrap is not JSON); the bundled copy serves")


async def test_a_registry_name_resolving_to_a_private_address_is_refused(
        tmp_path: Path) -> None:
    boot = tmp_path / "dns.json"
    boot.write_bytes(b'{"services": [[["test"], ["https://rdap.registry.test/"]]]}')
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["93.184.215.14", "10.1.2.3"]

    client = RdapClient(bootstrap_url=boot.as_uri(), timeout=2.0, resolver=resolver)
    try:
        got = await client.lookup("example.test")
    finally:
        await client.aclose()
    assert asked == ["rdap.registry.test"]
    assert got.registration is None
    assert got.error == (
        "the RDAP server rdap.registry.test resolves to a non-public address (10.1.2.3)")
