"""A node asked for several times what its core can probe (a real ``upwatch run``, time
scaled a hundredfold, a thousand monitors at a 5 s interval against a target that answers
as fast as it can): the API still answers a monitor's GET quickly, every check is still
probed with gaps of about demand / capacity intervals, the node says so (``/healthz``, the
overload gauge, one log line), and says it no longer is once the load is cut, once."""

from __future__ import annotations

import asyncio
import statistics
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from engine.db.store import Store
from tests.support.busy_target import busy_target
from tests.support.cli import upwatch
from tests.support.engine_support import add_monitor
from tests.support.instances import Instance
from tests.support.latency import watched
from tests.support.metrics import sample
from tests.support.wait import wait_until

SCALE = 0.01
INTERVAL_S = 5  # 0.05 s scaled: 1,000 checks ask 20,000 probes/s, far past one core
MONITORS = 1000
KEPT = 20  # checks left enabled once the load is cut
ENV = {
    "UPWATCH_TIME_SCALE": str(SCALE),
    "UPWATCH_RESULT_FLUSH_INTERVAL": "0.2",
    "UPWATCH_PER_HOST_LIMIT": "10000",  # one target: the host limit must not be the bound
    "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
}
OVER = "over its capacity"
BACK = "back within its capacity"
# The bench holds the targets (p99 under 100 ms) on a core of its own. Here the test machine
# is shared: before the engine admitted probes by its share of the core, the median GET
# took ~150 ms in this test, ~10 ms since (docs/performance.md, "Overload").
GET_P50_BOUND_S = 0.05
GET_P99_BOUND_S = 1.0


async def healthz(http: aiohttp.ClientSession, inst: Instance) -> dict[str, Any]:
    async with http.get(f"{inst.base_url}/healthz") as r:
        assert r.status == 200, await r.text()  # the node works: overloaded is not unhealthy
        body: dict[str, Any] = await r.json()
        return body


async def metrics(http: aiohttp.ClientSession, inst: Instance) -> str:
    async with http.get(f"{inst.base_url}/metrics") as r:
        return await r.text()


def lines_with(inst: Instance, words: str) -> list[str]:
    return [line for line in inst.output if words in line]


async def largest_gaps(dsn: str, since: Any, check_ids: list[int]) -> dict[int, float]:
    """Each check's largest gap (s) between consecutive probes since ``since``, counting the
    gap from ``since`` to its first probe and from its last probe to now."""
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            """
            WITH p AS (
                SELECT c.id AS check_id, r.at FROM unnest($2::bigint[]) AS c(id)
                LEFT JOIN probe_results r ON r.check_id = c.id AND r.at >= $1
            ), bounds AS (
                SELECT check_id, at FROM p WHERE at IS NOT NULL
                UNION ALL SELECT id, $1 FROM unnest($2::bigint[]) AS c(id)
                UNION ALL SELECT id, now() FROM unnest($2::bigint[]) AS c(id)
            )
            SELECT check_id, max(gap) AS gap FROM (
                SELECT check_id, extract(epoch FROM at - lag(at) OVER w) AS gap
                FROM bounds WINDOW w AS (PARTITION BY check_id ORDER BY at)
            ) g GROUP BY check_id
            """,
            since, check_ids,
        )
        return {r["check_id"]: float(r["gap"] or 0.0) for r in rows}
    finally:
        await conn.close()


@pytest.mark.serial
@pytest.mark.timeout(300)
async def test_overloaded_node_answers_degrades_fairly_and_says_so(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    account, token = await store.create_account("busy")
    _, operator_token = await store.create_account("ops", is_operator=True)
    async with busy_target() as base:
        ids = []
        for i in range(MONITORS):
            _, uptime_id, _ = await add_monitor(
                store, account.id, f"{base}/{i}", interval=INTERVAL_S, notify=False)
            ids.append(uptime_id)
        watched_monitor, _, _ = await add_monitor(
            store, account.id, f"{base}/watched", interval=INTERVAL_S, notify=False)
        inst = Instance(db_dsn, tmp_path, env=ENV)
        try:
            await inst.start(timeout=60)
            async with aiohttp.ClientSession() as http:
                over = await wait_until(
                    lambda: _overloaded(http, inst, True), timeout=60,
                    what="/healthz saying the node is overloaded")
                load = over["load"]
                # Asked far past what it does, and it says it is over its capacity.
                assert load["asked_per_s"] > 1.5 * load["done_per_s"], load
                assert load["ratio"] > 1, load
                assert load["asked_per_s"] == pytest.approx(
                    (MONITORS + 1) / (INTERVAL_S * SCALE), rel=0.01)
                assert load["capacity_per_s"] > 0 and load["cost_us_by_kind"]["uptime"] > 0
                page = await metrics(http, inst)
                assert sample(page, "upwatch_overloaded") == 1
                assert sample(page, "upwatch_probe_load_ratio") > 1
                assert sample(page, "upwatch_probe_cost_seconds", kind="uptime") > 0

                # The cluster's view and the command line show the node's load too.
                nodes = await wait_until(lambda: _nodes_overloaded(http, inst, operator_token),
                                         timeout=20, what="GET /webapi/nodes showing it")
                assert nodes[0]["load"]["capacity_per_s"] > 0, nodes
                status = await asyncio.to_thread(upwatch, "status", dsn=db_dsn)
                assert status.returncode == 0, status.stderr
                assert "OVERLOADED: asked" in status.stdout, status.stdout
                assert "CPU per probe: uptime" in status.stdout, status.stdout

                # The API answers while the engine is saturated.
                async with watched(inst.base_url, token,
                                   f"/webapi/monitors/{watched_monitor}") as took:
                    await wait_until(lambda: len(took) >= 400, timeout=60,
                                     what="400 GETs of a monitor")
                    still = await healthz(http, inst)
                assert still["overloaded"], still
                took.sort()
                p50, p99 = statistics.median(took), took[int(len(took) * 0.99)]
                assert p50 < GET_P50_BOUND_S and p99 < GET_P99_BOUND_S, (p50, p99)

                # Every check is probed, none starved: gaps of about ratio intervals.
                since = await store.pool.fetchval("SELECT now()")
                ratio = (await healthz(http, inst))["load"]["ratio"]
                await wait_until(lambda: _all_probed(db_dsn, since, ids, times=3), timeout=60,
                                 what="every check probed three times")
                gaps = await largest_gaps(db_dsn, since, ids)
                bound = 3 * ratio * INTERVAL_S * SCALE + 0.5
                starved = {k: g for k, g in gaps.items() if g > bound}
                assert not starved, (bound, sorted(starved.values())[-5:], len(starved))
                assert len(gaps) == MONITORS

                # Cut the load: the node says it is back, once.
                async with store.pool.acquire() as conn, conn.transaction():
                    await conn.execute(
                        "UPDATE checks SET is_enabled = false, status = 'paused',"
                        " config_version = config_version + 1 WHERE id = ANY($1::bigint[])",
                        ids[KEPT:])
                    await conn.execute(
                        "SELECT pg_notify('upwatch_checks', id::text)"
                        " FROM unnest($1::bigint[]) AS c(id)", ids[KEPT:])
                back = await wait_until(
                    lambda: _overloaded(http, inst, False), timeout=60,
                    what="/healthz saying the node is no longer overloaded")
                assert back["load"]["ratio"] < 1, back
                assert sample(await metrics(http, inst), "upwatch_overloaded") == 0
        finally:
            await inst.stop()
    assert len(lines_with(inst, OVER)) == 1, lines_with(inst, OVER)
    assert len(lines_with(inst, BACK)) == 1, lines_with(inst, BACK)
    said = lines_with(inst, OVER)[0]
    assert "asked" in said and "capacity" in said  # with the figures


async def _all_probed(dsn: str, since: Any, ids: list[int], *, times: int) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        short = await conn.fetchval(
            """SELECT count(*) FROM unnest($2::bigint[]) AS c(id)
               WHERE (SELECT count(*) FROM probe_results r
                      WHERE r.check_id = c.id AND r.at >= $1) < $3""", since, ids, times)
    finally:
        await conn.close()
    return bool(short == 0)


async def _nodes_overloaded(
    http: aiohttp.ClientSession, inst: Instance, token: str
) -> list[dict[str, Any]] | None:
    async with http.get(f"{inst.base_url}/webapi/nodes",
                        headers={"Authorization": f"Bearer {token}"}) as r:
        assert r.status == 200, await r.text()
        nodes: list[dict[str, Any]] = await r.json()
    live = [n for n in nodes if n["live"]]
    return live if live and live[0]["load"] and live[0]["load"]["overloaded"] else None


async def _overloaded(
    http: aiohttp.ClientSession, inst: Instance, want: bool
) -> dict[str, Any] | None:
    body = await healthz(http, inst)
    return body if body["overloaded"] is want and "load" in body else None
