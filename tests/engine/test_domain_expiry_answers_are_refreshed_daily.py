"""The shared registry answers over time (a clock the test moves): a renewal is seen at the
next daily refresh; a failed refresh keeps the last answer with a warning and is retried
after six hours, not at every probe; a second node reads what the first one fetched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from engine.db.store import Store
from engine.probes.rdap import RdapClient
from engine.scheduler.registrations import DomainProber
from tests.support.rdap_registry import RdapRegistry, Record

START = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)


async def test_renewal_failure_and_sharing_over_days(store: Store, tmp_path: Path) -> None:
    rec = Record(START + timedelta(days=5))
    registry = RdapRegistry({"shop.test": rec})
    now = [START]
    async with registry:
        url = registry.bootstrap(tmp_path / "dns.json")

        def node() -> DomainProber:
            return DomainProber(store, RdapClient(bootstrap_url=url, allow_private=True,
                                                  timeout=2), clock=lambda: now[0])

        a, b = node(), node()
        try:
            first = await a.probe("www.shop.test")
            assert first.registration is not None
            assert first.registration.expires_at == START + timedelta(days=5)
            # Another node, another host of the domain: the shared row, no query.
            other = await b.probe("api.shop.test")
            assert other.registration == first.registration and other.fetched_at == START
            assert registry.queries["shop.test"] == 1

            # Renewed at the registry: seen at the next refresh, a day after the last.
            rec.expires = START + timedelta(days=370)
            now[0] = START + timedelta(hours=23)
            assert (await a.probe("www.shop.test")).registration == first.registration
            now[0] = START + timedelta(days=1, minutes=1)
            renewed = await b.probe("www.shop.test")
            assert renewed.registration is not None
            assert renewed.registration.expires_at == START + timedelta(days=370)
            assert registry.queries["shop.test"] == 2

            # The registry turns to garbage: the last answer stays, with a warning.
            registry.domains.pop("shop.test")
            now[0] = START + timedelta(days=2, minutes=2)
            broken = await a.probe("www.shop.test")
            assert broken.registration == renewed.registration
            assert broken.error == "the registry has no record of shop.test"
            assert registry.queries["shop.test"] == 3
            # Not retried at every probe: after six hours.
            now[0] += timedelta(hours=5)
            await a.probe("www.shop.test")
            await b.probe("www.shop.test")
            assert registry.queries["shop.test"] == 3
            now[0] += timedelta(hours=1, minutes=1)
            await b.probe("www.shop.test")
            assert registry.queries["shop.test"] == 4
        finally:
            await a.aclose()
            await b.aclose()


async def test_ip_literals_and_public_suffixes_are_unsupported(
        store: Store, tmp_path: Path) -> None:
    client = RdapClient(bootstrap_url=(tmp_path / "none.json").as_uri(), timeout=1)
    prober = DomainProber(store, client)
    try:
        for host in ("127.0.0.1", "::1", "co.uk"):
            got = await prober.probe(host)
            assert got.registration is None and got.unsupported == (
                f"{host} is not a registered domain name (an IP address or a public suffix)")
    finally:
        await prober.aclose()
