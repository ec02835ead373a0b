"""The figure: 10,000 monitors on 2,000 registrable domains make at most 2,000 RDAP queries a
day, counted at a loopback registry, with two nodes sharing the answers through the
database (domain_registrations)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.db.store import Store
from engine.probes.rdap import RdapClient
from engine.scheduler.registrations import DomainProber
from tests.support.rdap_registry import RdapRegistry, Record

START = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
DOMAINS = 2_000
MONITORS = 10_000


@pytest.mark.timeout(300)
async def test_ten_thousand_monitors_on_two_thousand_domains_query_each_once_a_day(
        store: Store, tmp_path: Path) -> None:
    expires = START + timedelta(days=200)
    registry = RdapRegistry({f"d{i}.test": Record(expires) for i in range(DOMAINS)})
    now = [START]
    async with registry:
        url = registry.bootstrap(tmp_path / "dns.json")
        nodes = [DomainProber(store, RdapClient(bootstrap_url=url, allow_private=True,
                                                timeout=10), clock=lambda: now[0])
                 for _ in range(2)]
        hosts = [f"m{j}.d{j % DOMAINS}.test" for j in range(MONITORS)]

        async def round_() -> list[bool]:
            # Each monitor's check is owned by one node; 500 probes in flight at a time.
            answered: list[bool] = []
            for lo in range(0, MONITORS, 500):
                outs = await asyncio.gather(*(nodes[j % 2].probe(hosts[j])
                                              for j in range(lo, lo + 500)))
                answered += [o.registration is not None for o in outs]
            return answered

        try:
            # A day of the default four-hourly interval.
            for hour in range(0, 24, 4):
                now[0] = START + timedelta(hours=hour)
                answered = await round_()
                if hour:
                    assert all(answered), hour
            first_day = sum(registry.queries.values())
            # A day later each domain is due once more.
            now[0] = START + timedelta(days=1, minutes=1)
            await round_()
            second = sum(registry.queries.values()) - first_day
        finally:
            for n in nodes:
                await n.aclose()
    assert first_day == DOMAINS
    assert max(registry.queries.values()) <= 2
    assert second == DOMAINS
    rows = await store.pool.fetchval(
        "SELECT count(*) FROM domain_registrations WHERE fetched_at IS NOT NULL")
    assert rows == DOMAINS
