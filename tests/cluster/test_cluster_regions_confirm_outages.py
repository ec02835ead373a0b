"""Two real instances, regions ``eu`` (probing from 127.0.0.2) and ``us`` (127.0.0.3), on one
database: no downtime alert goes out on the word of one region, a failure both see alerts
once with both regions named, checks are split without overlap, and a killed node's checks
are taken over within the bound."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from engine.db.store import Store
from tests.support.instances import Hit, Instance, RegionalTarget, WebhookReceiver, fetch, metric
from tests.support.wait import wait_until

EU, US = "127.0.0.2", "127.0.0.3"
HEARTBEAT = 0.5
SCALE = 0.02  # a 30 s interval is 0.6 s
SECRET = "test-cluster-secret"


def cluster_env() -> dict[str, str]:
    return {
        "UPWATCH_CLUSTER_SECRET": SECRET,
        "UPWATCH_TIME_SCALE": str(SCALE),
        "UPWATCH_HEARTBEAT_INTERVAL": str(HEARTBEAT),
        "UPWATCH_PROBE_TIMEOUT": "2",
        "UPWATCH_RESULT_FLUSH_INTERVAL": "0.1",
    }


@pytest.fixture
async def cluster(db_dsn: str, tmp_path: Path) -> AsyncIterator[dict[str, Instance]]:
    eu = Instance(db_dsn, tmp_path, region="eu", source_address=EU, env=cluster_env())
    us = Instance(db_dsn, tmp_path, region="us", source_address=US, env=cluster_env())
    await eu.start()
    await us.start()
    try:
        # Ready is not yet "sees the other": a check created before eu's membership has us
        # in it is probed by eu alone, then handed over, and both regions have probed it.
        await wait_until(lambda: _all_see(2, eu, us),
                         timeout=10, what="both nodes to see each other live")
        yield {"eu": eu, "us": us}
    finally:
        for inst in (eu, us):
            await inst.kill()


async def _all_see(n: int, *instances: Instance) -> bool:
    """Every instance's ``upwatch_live_nodes`` gauge (its own membership's size) is ``n``."""
    async with aiohttp.ClientSession() as http:
        for inst in instances:
            if await metric(http, inst, "upwatch_live_nodes") != n:
                return False
    return True


async def create_monitor(base_url: str, token: str, url: str) -> dict[str, Any]:
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        async with http.post(f"{base_url}/webapi/monitors", json={"url": url}) as r:
            assert r.status == 201, await r.text()
            monitor: dict[str, Any] = await r.json()
    return monitor


async def owner_region(dsn: str, check_id: int) -> str:
    """The region whose node probes the check (its scheduled, non-confirmation probes)."""
    rows: list[Any] = []

    async def probed() -> bool:
        nonlocal rows
        rows = await fetch(
            dsn,
            "SELECT DISTINCT region FROM probe_results WHERE check_id = $1 AND NOT confirmation",
            check_id,
        )
        return bool(rows)

    await wait_until(probed, timeout=20, what="a first probe")
    assert len(rows) == 1, rows
    return str(rows[0]["region"])


def uptime_hits(receiver: WebhookReceiver) -> list[Hit]:
    return [h for h in receiver.hits if orjson.loads(h.body)["check"]["name"] == "uptime"]


async def wait_for_probes(dsn: str, check_ids: list[int], n: int, *, since: float) -> None:
    """Until each check has ``n`` scheduled probes recorded after ``since``."""

    async def enough() -> bool:
        rows = await fetch(
            dsn,
            "SELECT check_id, count(*) AS n FROM probe_results "
            "WHERE NOT confirmation AND check_id = ANY($1) AND "
            "at > to_timestamp($2) GROUP BY check_id",
            check_ids,
            since,
        )
        return len(rows) == len(check_ids) and all(r["n"] >= n for r in rows)

    await wait_until(enough, timeout=30, what=f"{n} more probes of {len(check_ids)} checks")


async def test_a_failure_seen_by_one_region_only_never_alerts_and_ends_ok(
    cluster: dict[str, Instance], store: Store, db_dsn: str
) -> None:
    async with RegionalTarget() as target, WebhookReceiver() as receiver:
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        monitor = await create_monitor(cluster["eu"].base_url, token, target.url("/"))
        check_id = monitor["checks"]["uptime"]["id"]
        owner = await owner_region(db_dsn, check_id)
        other = "us" if owner == "eu" else "eu"
        target.failing_for = {EU if owner == "eu" else US}

        async def confirmed_ok_by_other_region() -> bool:
            rows = await fetch(
                db_dsn,
                "SELECT count(*) AS n FROM probe_results WHERE check_id = $1 AND confirmation "
                "AND region = $2 AND outcome = 0",
                check_id,
                other,
            )
            return int(rows[0]["n"]) >= 3

        await wait_until(confirmed_ok_by_other_region, timeout=30,
                         what="three confirmations from the peer")

        async def status_ok() -> bool:
            rows = await fetch(db_dsn, "SELECT status FROM checks WHERE id = $1", check_id)
            return bool(rows[0]["status"] == "ok")

        await wait_until(status_ok, timeout=10, what="the check back to ok", every=0.01)
        # Only uptime counts (this plain-HTTP site's certificate check is created paused).
        events = await fetch(
            db_dsn, "SELECT event FROM webhook_events WHERE check_id = $1", check_id
        )
        outages = await fetch(db_dsn, "SELECT id FROM outages WHERE check_id = $1", check_id)
        assert events == [] and outages == []
        assert uptime_hits(receiver) == []
        # The owner's own probes did fail: this was a real one-region failure.
        failed = await fetch(
            db_dsn,
            "SELECT count(*) AS n FROM probe_results WHERE check_id = $1 "
            "AND NOT confirmation AND outcome = 2",
            check_id,
        )
        assert failed[0]["n"] >= 3


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_a_failure_seen_by_both_regions_alerts_once_naming_both(
    cluster: dict[str, Instance], store: Store, db_dsn: str
) -> None:
    async with RegionalTarget() as target, WebhookReceiver() as receiver:
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        monitor = await create_monitor(cluster["us"].base_url, token, target.url("/shop"))
        check_id = monitor["checks"]["uptime"]["id"]
        owner = await owner_region(db_dsn, check_id)
        failed_at = time.time()
        target.failing_for = {EU, US}

        async def alerted() -> bool:
            return bool(uptime_hits(receiver))

        await wait_until(alerted, timeout=30, what="the downtime webhook")
        alert_latency = time.time() - failed_at
        hit = uptime_hits(receiver)[0]
        body = orjson.loads(hit.body)
        assert body["check"]["status"] == "nok"
        meta = body["check"]["meta"]
        assert meta["detected_by"] == owner
        assert meta["verified_via"] == ("us" if owner == "eu" else "eu")
        assert meta["http_status_code"] == 503
        assert body["monitor"]["id"] == monitor["id"]

        # The event is queued in the transaction that records the confirmation: measure from
        # the confirming probe's result to the queued row, and on to the receiver's 200.
        # (Result rows are written in batches, so the confirming probe's row may land after
        # the event: wait for it.)
        timing: list[Any] = []

        async def timed() -> bool:
            nonlocal timing
            timing = await fetch(
                db_dsn,
                "SELECT extract(epoch FROM e.created_at) AS queued, "
                "       (SELECT extract(epoch FROM min(r.at)) FROM probe_results r "
                "         WHERE r.check_id = $1 AND r.confirmation AND r.outcome = 2) "
                "       AS confirmed "
                "FROM webhook_events e WHERE e.check_id = $1 AND e.event = 'downtime'",
                check_id,
            )
            return timing[0]["confirmed"] is not None

        await wait_until(timed, timeout=10, what="the confirming probe's result row")
        queued_after = float(timing[0]["queued"]) - float(timing[0]["confirmed"])
        delivered_after = hit.at - float(timing[0]["queued"])
        assert -0.05 < queued_after < 1.0 and delivered_after < 1.0
        print(f"confirmed failure -> queued webhook: {queued_after * 1000:.1f} ms; "
              f"queued -> receiver: {delivered_after * 1000:.0f} ms; "
              f"first failure -> receiver: {alert_latency:.2f} s")

        # Three more failing probes of the owner: still exactly one downtime event.
        await wait_for_probes(db_dsn, [check_id], 3, since=time.time())
        events = await fetch(
            db_dsn, "SELECT event FROM webhook_events WHERE check_id = $1", check_id
        )
        assert [e["event"] for e in events] == ["downtime"]
        status = await fetch(db_dsn, "SELECT status FROM checks WHERE id = $1", check_id)
        assert status[0]["status"] == "down"

        # Recovery: uptime restored, parent = the downtime event.
        target.failing_for = set()

        async def restored() -> bool:
            return len(uptime_hits(receiver)) >= 2

        await wait_until(restored, timeout=30, what="the uptime-restored webhook")
        restored_hit = uptime_hits(receiver)[1]
        assert orjson.loads(restored_hit.body)["check"]["status"] == "ok"
        assert restored_hit.headers["X-Service-Parent-Webhook"] == hit.headers["X-Service-Webhook"]


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_checks_are_split_without_overlap_and_a_killed_node_is_taken_over(
    cluster: dict[str, Instance], store: Store, db_dsn: str
) -> None:
    async with RegionalTarget() as target:
        _, token = await store.create_account("acme")
        ids = []
        # Node ids are random, so the rendezvous split is too: with 8 checks one node got
        # none once in 128 runs (a CI run failed so); with 16, once in 32,768.
        for i in range(16):
            m = await create_monitor(cluster["eu"].base_url, token, target.url(f"/site/{i}"))
            ids.append(m["checks"]["uptime"]["id"])

        # Steady state: each check is probed by exactly one region, none is orphaned.
        async def all_probed_thrice() -> bool:
            rows = await fetch(
                db_dsn,
                "SELECT check_id, count(*) AS n FROM probe_results "
                "WHERE NOT confirmation AND check_id = ANY($1) "
                "GROUP BY check_id",
                ids,
            )
            return len(rows) == len(ids) and all(r["n"] >= 3 for r in rows)

        await wait_until(all_probed_thrice, timeout=30, what="every check probed three times")
        window_start = time.time()
        await wait_for_probes(db_dsn, ids, 3, since=window_start)
        rows = await fetch(
            db_dsn,
            "SELECT check_id, array_agg(DISTINCT region) AS regions "
            "FROM probe_results WHERE NOT confirmation AND "
            "at > to_timestamp($2) AND check_id = ANY($1) "
            "GROUP BY check_id",
            ids,
            window_start,
        )
        assert len(rows) == len(ids)
        assert all(len(r["regions"]) == 1 for r in rows), rows
        owners = {r["check_id"]: r["regions"][0] for r in rows}
        assert set(owners.values()) == {"eu", "us"}, "sixteen checks should land on both nodes"

        # SIGKILL the eu node: its checks are probed by us within three heartbeats (+ one
        # interval to come due, + the result flush).
        victim_checks = [c for c, region in owners.items() if region == "eu"]
        killed_at = time.time()
        await cluster["eu"].kill()

        async def taken_over() -> bool:
            rows = await fetch(
                db_dsn,
                "SELECT count(DISTINCT check_id) AS n FROM probe_results "
                "WHERE region = 'us' AND NOT confirmation AND "
                "check_id = ANY($1) AND at > to_timestamp($2)",
                victim_checks,
                killed_at,
            )
            return int(rows[0]["n"]) == len(victim_checks)

        start = time.monotonic()
        await wait_until(taken_over, timeout=15, what="the us node to take over eu's checks")
        took = time.monotonic() - start
        bound = 3 * HEARTBEAT + 30 * SCALE + 1.0
        print(f"takeover after SIGKILL: {took:.2f} s (bound {bound:.2f} s)")
        assert took <= bound
