"""The metrics the Grafana dashboard adds to the engine, read from the ``/metrics`` of real
``upwatch run`` processes: checks by kind and status follow a monitor through up, down and
deleted; API requests are timed by route; each engine node names itself; a node joining
counts an ownership change, and every check stays counted on exactly one node."""

from __future__ import annotations

from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from engine.db.store import Store
from tests.support.instances import Instance
from tests.support.metrics import sample, sample_value
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

FAST = {"UPWATCH_TIME_SCALE": "0.02", "UPWATCH_RESULT_FLUSH_INTERVAL": "0.1"}
CLUSTER = {**FAST, "UPWATCH_CLUSTER_SECRET": "test-cluster-secret",
           "UPWATCH_HEARTBEAT_INTERVAL": "0.5"}
BY_STATUS = "upwatch_checks_by_status"


async def scrape(http: aiohttp.ClientSession, inst: Instance) -> str:
    async with http.get(f"{inst.base_url}/metrics") as r:
        assert r.status == 200
        return await r.text()


def by_status(text: str) -> dict[tuple[str, str], float]:
    """(kind, status) -> value of every ``upwatch_checks_by_status`` sample on the page."""
    return {
        (s.labels["kind"], s.labels["status"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == BY_STATUS
    }


async def test_checks_by_status_follow_a_monitor_and_requests_are_timed(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    async with HttpTarget() as target:
        target.status = 200
        _, token = await store.create_account("acme")
        inst = Instance(db_dsn, tmp_path, env=FAST)
        try:
            await inst.start()
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(base_url=inst.base_url, headers=headers) as http:
                before = await scrape(http, inst)
                assert by_status(before) == {}  # no check held yet
                async with http.post("/webapi/monitors", json={"url": target.url("/")}) as r:
                    assert r.status == 201, await r.text()
                    monitor_id = (await r.json())["id"]

                async def statuses(expected: dict[tuple[str, str], float]) -> bool:
                    seen = {k: v for k, v in by_status(await scrape(http, inst)).items() if v}
                    return seen == expected

                # Pending when adopted, ok after its first probe; the http URL's certificate
                # check starts paused, so no engine holds it.
                await wait_until(lambda: statuses({("uptime", "ok"): 1}), timeout=20,
                                 what="one uptime check counted ok")
                target.status = 500
                await wait_until(lambda: statuses({("uptime", "down"): 1}), timeout=20,
                                 what="the check counted down, and only down")
                down = by_status(await scrape(http, inst))
                # A status left stays exposed at 0: "down" can be graphed and alerted on
                # through the recovery too.
                assert down[("uptime", "ok")] == 0
                async with http.delete(f"/webapi/monitors/{monitor_id}") as r:
                    assert r.status in (200, 204), await r.text()
                await wait_until(lambda: statuses({}), timeout=20,
                                 what="the deleted monitor's check no longer counted")
                after = await scrape(http, inst)
            route = "/webapi/monitors"
            count = sample_value(after, "upwatch_http_request_duration_seconds_count",
                                 route=route)
            assert count is not None and count >= 1
            assert sample(after, "upwatch_http_request_duration_seconds_bucket",
                          route=route, le="+Inf") == count
            assert 0 < sample(after, "upwatch_http_request_duration_seconds_sum",
                              route=route) < 10 * count
            assert sample(after, "upwatch_http_request_duration_seconds_count",
                          route="/webapi/monitors/{id}") >= 1
            infos = [
                s for family in text_string_to_metric_families(after) for s in family.samples
                if s.name == "upwatch_node_info"
            ]
            assert len(infos) == 1 and infos[0].value == 1
            assert infos[0].labels["region"] == "local"
            assert infos[0].labels["node"].startswith("local-")
            assert infos[0].labels["version"]
            await inst.stop()
        finally:
            await inst.kill()


async def test_a_node_joining_counts_an_ownership_change_and_each_check_once(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    monitors = 20  # both nodes get some: one owning all has odds of 2 in 2**20
    async with HttpTarget() as target:
        target.status = 200
        _, token = await store.create_account("acme")
        first = Instance(db_dsn, tmp_path, region="eu", env=CLUSTER)
        second = Instance(db_dsn, tmp_path, region="us", env=CLUSTER)
        try:
            await first.start()
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(headers=headers) as http:
                for i in range(monitors):
                    async with http.post(f"{first.base_url}/webapi/monitors",
                                         json={"url": target.url(f"/{i}")}) as r:
                        assert r.status == 201, await r.text()

                async def held(inst: Instance) -> float:
                    return sum(by_status(await scrape(http, inst)).values())

                async def first_holds_all() -> bool:
                    return await held(first) == monitors

                await wait_until(first_holds_all, timeout=20, what="every check on eu")
                changes_before = sample(await scrape(http, first),
                                        "upwatch_ownership_changes_total")
                await second.start()

                async def split() -> bool:
                    texts = [await scrape(http, first), await scrape(http, second)]
                    counts = [sum(by_status(t).values()) for t in texts]
                    return (
                        all(sample(t, "upwatch_live_nodes") == 2 for t in texts)
                        and sum(counts) == monitors and all(counts)
                        and all(sample(t, "upwatch_checks_scheduled") == n
                                for t, n in zip(texts, counts, strict=True))
                    )

                await wait_until(split, timeout=20,
                                 what="the checks split over both nodes, each counted once")
                first_text = await scrape(http, first)
                second_text = await scrape(http, second)
            assert sample(first_text, "upwatch_ownership_changes_total") > changes_before
            nodes = {
                s.labels["region"]: s.labels["node"]
                for text in (first_text, second_text)
                for family in text_string_to_metric_families(text) for s in family.samples
                if s.name == "upwatch_node_info"
            }
            assert set(nodes) == {"eu", "us"} and nodes["eu"] != nodes["us"]
        finally:
            await second.kill()
            await first.kill()
