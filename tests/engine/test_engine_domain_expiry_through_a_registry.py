"""Domain expiry checks through the engine, against a registry on loopback found through
UPWATCH_RDAP_BOOTSTRAP_URL=file://...: expiring, expired, on hold, renewed (far from expiry),
an unknown TLD, a slow registry; and the domain_invalid webhook, signed, at a local
receiver."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from engine.db.store import Store
from engine.delivery.webhooks.signing import verify
from tests.support.engine_support import (
    add_monitor,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.rdap_registry import RdapRegistry, Record
from tests.support.wait import wait_until
from tests.support.webhook_support import running, serving_receiver


async def domain_check(store: Store, account_id: int, url: str) -> tuple[int, int]:
    """A monitor whose only enabled check is its domain_expiry check: (monitor, check)."""
    monitor_id, _, _ = await add_monitor(store, account_id, url, uptime=False, notify=False)
    async with store.pool.acquire() as conn, conn.transaction():
        check_id = await conn.fetchval(
            "INSERT INTO checks (monitor_id, kind, interval_s, is_enabled, status)"
            " VALUES ($1, 'domain_expiry', 30, true, 'pending')"
            " ON CONFLICT (monitor_id, kind) DO UPDATE SET interval_s = 30, is_enabled = true,"
            "   status = 'pending' RETURNING id", monitor_id)
        await conn.execute("SELECT pg_notify('upwatch_checks', $1)", str(check_id))
    return monitor_id, check_id


async def events(store: Store, check_id: int) -> list[Any]:
    return await fetch(store, "SELECT event, body, parent_id FROM webhook_events"
                              " WHERE check_id = $1 ORDER BY id", check_id)


async def test_registry_answers_become_states_and_events(
    store: Store, account: tuple[Any, str], tmp_path: Path,
) -> None:
    acc, _ = account
    now = datetime.now(UTC)
    registry = RdapRegistry({
        "expiring.test": Record(now + timedelta(days=10, hours=1)),
        "expired.test": Record(now - timedelta(days=3), ("active",)),
        "held.test": Record(now + timedelta(days=200), ("client hold",)),
        "renewed.test": Record(now + timedelta(days=365)),
    }, slow_seconds=3.0)
    async with registry:
        settings = fast_settings(
            tmp_path, rdap_bootstrap_url=registry.bootstrap(tmp_path / "dns.json"),
            rdap_timeout=1.0)
        ids = {}
        for name in ("expiring", "expired", "held", "renewed", "slow"):
            _, ids[name] = await domain_check(store, acc.id, f"https://www.{name}.test/")
        _, ids["zz"] = await domain_check(store, acc.id, "https://shop.example.zz/")
        async with running_engine(store, settings):
            expiring = await wait_status(store, ids["expiring"], "ok")
            expired = await wait_status(store, ids["expired"], "down")
            held = await wait_status(store, ids["held"], "down")
            renewed = await wait_status(store, ids["renewed"], "ok")
            unknown = await wait_status(store, ids["zz"], "unsupported")
            slow = await wait_status(store, ids["slow"], "degraded")

    meta = expiring["meta"]
    assert meta["domain"] == "expiring.test" and meta["days_left"] == 10
    assert meta["registrar"] == "Loopback Registrar, Inc."
    assert meta["statuses"] == ["ok"]
    assert meta["nameservers"] == ["ns1.loopback.test", "ns2.loopback.test"]
    assert meta["source"] == "rdap" and meta["rdap_server"] == registry.base
    ev = await events(store, ids["expiring"])
    assert [e["event"] for e in ev] == ["domain_renewal_due"]
    body = orjson.loads(ev[0]["body"])
    assert body["check"]["meta"]["threshold_days"] == 14
    assert body["check"]["meta"]["expires_in_days"] == 10

    assert expired["error"].startswith("the domain expired on ")
    assert [e["event"] for e in await events(store, ids["expired"])] == ["domain_invalid"]
    assert held["error"] == "the registry lists the domain as clientHold"
    assert renewed["error"] is None and await events(store, ids["renewed"]) == []
    assert unknown["error"] == (
        "the .zz registry publishes no RDAP service (not in the IANA bootstrap)")
    assert slow["error"] == "the RDAP server 127.0.0.1 did not answer within 1 s"
    assert [e["event"] for e in await events(store, ids["held"])] == ["domain_invalid"]
    assert await events(store, ids["zz"]) == [] and await events(store, ids["slow"]) == []
    # One query per domain, however many probes ran; none for the unknown TLD.
    assert registry.queries["expiring.test"] == 1
    assert "example.zz" not in registry.queries
    results = await fetch(store, "SELECT DISTINCT kind FROM probe_results WHERE check_id = $1",
                          ids["expired"])
    assert [r["kind"] for r in results] == [4]


async def test_domain_invalid_webhook_is_signed_at_a_local_receiver(
    store: Store, tmp_path: Path,
) -> None:
    registry = RdapRegistry({"lapsed.test": Record(datetime.now(UTC) - timedelta(days=1))})
    async with serving_receiver() as receiver, registry:
        acc, token = await store.create_account("a", webhook_url=receiver.url())
        settings = fast_settings(
            tmp_path, rdap_bootstrap_url=registry.bootstrap(tmp_path / "dns.json"),
            webhook_timeout=2.0)
        monitor_id, check_id = await domain_check(store, acc.id, "https://lapsed.test/shop")
        async with running_engine(store, settings), running(store, settings):
            await wait_until(lambda: receiver.ok_hits(), what="the domain_invalid webhook")
    hit = receiver.ok_hits()[0]
    assert verify(hit.body, token, hit.headers["X-Service-Signature"])
    body = orjson.loads(hit.body)
    assert body["monitor"] == {"id": monitor_id, "url": "https://lapsed.test/shop",
                               "alias": "lapsed.test"}
    check = body["check"]
    assert check["name"] == "domain_expiry" and check["status"] == "nok"
    assert check["error"].startswith("the domain expired on ")
    assert check["meta"]["domain"] == "lapsed.test" and check["meta"]["statuses"] == ["ok"]
    assert hit.headers["X-Service-Webhook"] == hit.headers["X-Service-Parent-Webhook"]
    assert (await events(store, check_id))[0]["event"] == "domain_invalid"
