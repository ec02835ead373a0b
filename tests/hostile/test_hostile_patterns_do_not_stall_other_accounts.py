"""One account's patterns cannot stall another account's API, in one ``upwatch run`` process.

Account A is hostile: JSONPath monitors whose queries cost as much as the shape rules let
them on bodies built to make them cost (a megabyte of small objects, deep nesting), a
monitor set and a create full of regexes RE2 takes long to refuse, and monitor sets far
over the plan's limit and the entry cap. Meanwhile account B lists its monitors, one
request after another, and every one of those answers within :data:`BOUND`. A's requests
are refused with 422s that name the field and say why.
"""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from engine.db.store import Store
from tests.support.instances import Instance
from tests.support.latency import watched
from tests.support.wait import wait_until
from tests.support.web import serve

BOUND = 0.25  # seconds a bystander's GET may take, every one of them
ISSUE_PATH = "$..*..*..*..*..*[?@ == 'zz']"
ISSUE_BODY = b"[" * 30 + b"0" + b"]" * 30
# About a megabyte of small objects, and arrays nested 99 deep (one level short of the
# descendant segment's limit).
WIDE_BODY = orjson.dumps([{"a": {"b": i, "c": "x"}} for i in range(40_000)])
DEEP_BODY = orjson.dumps([[i, [i, [i]]] for i in range(3000)])
NESTED_BODY = b"[" * 99 + b"0" + b"]" * 99
# Random a/b text: RE2's DFA runs out of memory on the patterns below and falls back to its
# NFA, tens of nanoseconds per byte per instruction (about a second for 64 KiB).
_AB = random.Random(7)
AB_64K = "".join(_AB.choice("ab") for _ in range(64 << 10)).encode()
AB_1M = AB_64K * 16
# (target path, accepted query) pairs: each walks as much of its body as it may.
COSTLY = [
    ("/wide", "$..*[?@ == 'zz']"),
    ("/wide", "$[?@ == 'zz']"),
    ("/wide", "$..zz"),
    ("/wide", "$.*.*.*.*"),
    ("/wide", "$..[?search(@, 'z+q')]"),
    ("/deep", "$..*[?@ == 'zz']"),
    ("/nested", "$..*[?@ == 'zz']"),
    ("/issue", "$..*[?@ == 'zz']"),
]
ENV = {
    "UPWATCH_RATE_LIMIT_PER_SECOND": "0",
    "UPWATCH_TIME_SCALE": "0.05",  # a 30 s interval is 1.5 s
    "UPWATCH_PROBE_TIMEOUT": "5",
    "UPWATCH_LOG_LEVEL": "WARNING",
}


@pytest.fixture
async def target() -> AsyncIterator[str]:
    bodies = {"/issue": ISSUE_BODY, "/wide": WIDE_BODY, "/deep": DEEP_BODY,
              "/nested": NESTED_BODY, "/ab64k": AB_64K, "/ab1m": AB_1M,
              "/abjson": orjson.dumps({"text": AB_64K.decode()})}

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=bodies[request.path], content_type="application/json")

    app = web.Application()
    for path in bodies:
        app.router.add_get(path, handle)
    async with serve(app) as url:
        yield url


@pytest.fixture
async def instance(db_dsn: str, tmp_path: Path) -> AsyncIterator[Instance]:
    inst = await Instance(dsn=db_dsn, workdir=tmp_path, env=ENV).start()
    try:
        yield inst
    finally:
        await inst.stop()


def session(inst: Instance, token: str) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(base_url=inst.base_url,
                                 headers={"Authorization": f"Bearer {token}"})


async def answer(s: aiohttp.ClientSession, method: str, path: str, **kw: Any) -> tuple[int, Any]:
    async with s.request(method, path, **kw) as r:
        return r.status, await r.json(content_type=None)


def assert_bounded(samples: list[float], at_least: int) -> None:
    assert len(samples) >= at_least, f"only {len(samples)} GETs completed"
    worst = max(samples)
    ordered = sorted(samples)
    print(f"bystander GETs: {len(samples)}, median {ordered[len(ordered) // 2] * 1000:.1f} ms,"
          f" p90 {ordered[len(ordered) * 9 // 10] * 1000:.1f} ms, max {worst * 1000:.1f} ms")
    assert worst < BOUND, (f"a bystander's GET took {worst * 1000:.0f} ms "
                           f"(of {len(samples)}: {sorted(samples)[-5:]})")


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_costly_json_monitors_do_not_slow_another_accounts_api(
    instance: Instance, store: Store, target: str
) -> None:
    _, a_token = await store.create_account("hostile")
    _, b_token = await store.create_account("bystander")
    async with session(instance, a_token) as a:
        status, body = await answer(a, "POST", "/webapi/monitors", json={
            "url": target + "/issue",
            "assertions": [{"source": "json", "property": ISSUE_PATH,
                            "comparison": "not_empty"}]})
        assert status == 422, body
        [why] = body["errors"]["assertions.0.property"]
        assert "one descendant segment" in why and "position 4" in why, why

        ids = []
        for path, query in COSTLY:
            status, body = await answer(a, "POST", "/webapi/monitors", json={
                "url": target + path,
                "assertions": [{"source": "json", "property": query,
                                "comparison": "not_empty"}]})
            assert status == 201, (query, body)
            ids.append(body["id"])

        async with watched(instance.base_url, b_token, "/webapi/monitors") as samples:
            seen = await wait_until(
                lambda: _all_probed(a, ids), what="every costly monitor probed", timeout=60)
            # Keep probing (every 1.5 s) while the bystander measures.
            started = time.monotonic()
            await wait_until(lambda: time.monotonic() - started > 6 and len(samples) >= 40,
                             what="six seconds of bystander GETs", timeout=60)
        by_query = dict(zip((q for _, q in COSTLY), seen, strict=False))
        over = "the JSONPath needs more than 2000 steps"
        assert over in (seen[0] or ""), seen
        assert over in (seen[1] or ""), seen
        assert "deeper than" not in str(by_query)
        assert_bounded(samples, at_least=40)


async def _all_probed(a: aiohttp.ClientSession, ids: list[int]) -> list[str | None] | None:
    """The uptime errors of monitors ``ids``, once every one has an error (each fails: its
    query finds nothing or is stopped), else None."""
    got = []
    for monitor_id in ids:
        _, m = await answer(a, "GET", f"/webapi/monitors/{monitor_id}")
        got.append(m["checks"]["uptime"]["error"])
    return got if all(got) else None


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_costly_regex_searches_do_not_slow_another_accounts_api(
    instance: Instance, store: Store, target: str
) -> None:
    _, a_token = await store.create_account("hostile")
    _, b_token = await store.create_account("bystander")
    slow = "a[ab]{1000}c"  # 1,006 instructions, accepted
    small = "[ab]*a[ab]{20}c"  # 27 instructions, and slower per instruction
    cases = [("/ab64k", "body", "", slow), ("/ab64k", "body", "", small),
             ("/abjson", "json", "$.text", slow), ("/ab1m", "body", "", slow),
             ("/ab1m", "body", "", small)]
    async with session(instance, a_token) as a:
        ids = []
        for path, source, prop, pattern in cases:
            status, body = await answer(a, "POST", "/webapi/monitors", json={
                "url": target + path,
                "assertions": [{"source": source, "property": prop, "comparison": "matches",
                                "target": pattern}]})
            assert status == 201, (path, pattern, body)
            ids.append(body["id"])

        async with watched(instance.base_url, b_token, "/webapi/monitors") as samples:
            seen = await wait_until(
                lambda: _all_probed(a, ids), what="every regex monitor probed", timeout=90)
            started = time.monotonic()
            await wait_until(lambda: time.monotonic() - started > 6 and len(samples) >= 40,
                             what="six seconds of bystander GETs", timeout=60)
    # Searched (on a worker thread), found nothing; over the cost limit: not searched.
    assert [e.split(" failed: ")[1] for e in seen[:2]] == ["no match in the body"] * 2, seen
    assert seen[2] is not None and "failed: got" in seen[2], seen
    assert seen[3] is not None and "too costly to search 1 MiB" in seen[3], seen
    assert seen[4] is not None and seen[4].endswith("failed: no match in the body"), seen
    assert_bounded(samples, at_least=40)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_one_accounts_costly_searches_do_not_delay_anothers(
    db_dsn: str, tmp_path: Path, store: Store, target: str
) -> None:
    """Account A's 24 monitors each cost a worker thread about a second per probe (far more
    than the two threads can do in a probe's 5 s, with all of them in flight at once);
    account B's one costly monitor is still judged in each of its probes, as the threads take
    the accounts in turn."""
    instance = await Instance(dsn=db_dsn, workdir=tmp_path,
                              env=ENV | {"UPWATCH_PER_HOST_LIMIT": "64"}).start()
    try:
        await _costly_searches_of_two_accounts(instance, store, target)
    finally:
        await instance.stop()


async def _costly_searches_of_two_accounts(instance: Instance, store: Store, target: str) -> None:
    _, a_token = await store.create_account("hostile")
    _, b_token = await store.create_account("bystander")
    slow = {"source": "body", "comparison": "matches", "target": "a[ab]{1000}c"}
    async with session(instance, a_token) as a:
        for i in range(24):
            status, body = await answer(a, "POST", "/webapi/monitors", json={
                "url": f"{target}/ab64k?{i}", "assertions": [slow]})
            assert status == 201, body
    async with session(instance, b_token) as b:
        status, body = await answer(b, "POST", "/webapi/monitors", json={
            "url": f"{target}/ab64k?b", "assertions": [slow]})
        assert status == 201, body
        b_id = body["id"]

        async def judged() -> list[str]:
            rows = await store.pool.fetch(
                "SELECT r.error FROM probe_results r JOIN checks c ON c.id = r.check_id"
                " WHERE c.monitor_id = $1 AND r.error IS NOT NULL", b_id)
            errors = [r["error"] for r in rows]
            return errors if len(errors) >= 3 else []

        errors = await wait_until(judged, what="three of B's probes judged", timeout=90)
    assert all(e.endswith("failed: no match in the body") for e in errors), errors


def _pattern_entry(i: int) -> dict[str, Any]:
    return {"url": f"https://p{i}.example/", "assertions": [
        {"source": "body", "comparison": "matches", "target": f"\\p{{L}}{{{1000 - i}}}"}]}


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_sets_of_costly_patterns_do_not_slow_another_accounts_api(
    instance: Instance, store: Store
) -> None:
    _, a_token = await store.create_account("hostile")
    _, b_token = await store.create_account("bystander")
    async with session(instance, a_token) as a:
        async with watched(instance.base_url, b_token, "/webapi/monitors") as samples:
            for round_ in range(3):
                # Distinct patterns each round: nothing comes from the cache.
                entries = [_pattern_entry(round_ * 100 + i) for i in range(40)]
                status, body = await answer(a, "PUT", "/webapi/monitors?dry_run=true",
                                            json={"monitors": entries})
                assert status == 422, body
                assert len(body["errors"]) == 40
                [why] = body["errors"][f"monitors[{7}].assertions.0.target"]
                assert "too large once compiled" in why, why
                status, body = await answer(a, "POST", "/webapi/monitors", json={
                    "url": "https://one.example/",
                    "assertions": [
                        {"source": "body", "comparison": "matches",
                         "target": f"\\p{{Lu}}{{{900 - round_ * 20 - i}}}"}
                        for i in range(20)]})
                assert status == 422, body
                assert sorted(body["errors"]) == sorted(
                    f"assertions.{i}.target" for i in range(20))
            await wait_until(lambda: len(samples) >= 30, what="30 bystander GETs", timeout=30)
        assert_bounded(samples, at_least=30)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_huge_monitor_sets_are_refused_before_their_entries_are_read(
    instance: Instance, store: Store
) -> None:
    _, a_token = await store.create_account("hostile")
    _, b_token = await store.create_account("bystander")
    over_limit = orjson.dumps({"monitors": [_pattern_entry(i % 900) | {
        "url": f"https://m{i}.example/"} for i in range(12_000)]})
    over_cap = orjson.dumps({"monitors": [{"url": f"https://c{i}.example/"}
                                          for i in range(20_001)]})
    # The set of the first report: 140,000 entries in 32 MiB.
    huge = orjson.dumps({"monitors": [{"url": f"https://h{i}.example/{'p' * 180}"}
                                      for i in range(140_000)]})
    async with session(instance, a_token) as a:
        async with watched(instance.base_url, b_token, "/webapi/monitors") as samples:
            started = time.perf_counter()
            status, body = await answer(a, "PUT", "/webapi/monitors", data=over_limit,
                                        headers={"Content-Type": "application/json"})
            limit_took = time.perf_counter() - started
            assert status == 422, body
            assert list(body["errors"]) == ["monitor_limit"], body
            assert "12000 monitors" in body["errors"]["monitor_limit"][0]
            started = time.perf_counter()
            status, body = await answer(a, "PUT", "/webapi/monitors", data=over_cap,
                                        headers={"Content-Type": "application/json"})
            cap_took = time.perf_counter() - started
            assert status == 422, body
            assert body["errors"] == {"monitors": [
                "A file may hold at most 20000 monitors; this one holds 20001."]}
            async with a.put("/webapi/monitors", data=huge,
                             headers={"Content-Type": "application/json"}) as r:
                assert r.status == 413, await r.text()
            await wait_until(lambda: len(samples) >= 20, what="20 bystander GETs", timeout=30)
        # Nothing of either entry list was validated: both answers come at once.
        assert limit_took < 2.0 and cap_took < 3.0, (limit_took, cap_took)
        assert_bounded(samples, at_least=20)
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0
