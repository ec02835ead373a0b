"""Requests and assertions through the real engine: monitors created through the
API, probed by the engine against real local targets, alerts sent by the real deliverer,
confirmations (local and by a peer region) running the same request and assertions, and
secrets that never show up in an answer, a webhook, a log line or a database row."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from engine.cluster.nodes import Membership
from engine.cluster.peer import CONFIRM_PATH, _outcome_from_json, peer_routes
from engine.cluster.peerauth import H_NONCE, sign_request, verify_response
from engine.db.store import Store
from engine.delivery.webhooks.deliverer import Deliverer
from engine.probes.http import HttpProber
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.engine_support import fast_settings, fetch, running_engine, wait_status
from tests.support.instances import WebhookReceiver
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until
from tests.support.web import serve

SECRET = "Bearer TOPSECRET-7f3a"
KEYWORD = "Database connection failed"


async def create(client: aiohttp.ClientSession, **body: Any) -> dict[str, Any]:
    async with client.post("/webapi/monitors", json=body) as r:
        assert r.status == 201, await r.text()
        data: dict[str, Any] = await r.json()
        return data


@contextlib.asynccontextmanager
async def delivering(store: Store, settings: Settings) -> AsyncIterator[None]:
    deliverer = Deliverer(store, settings, metrics=Metrics())
    stop = asyncio.Event()
    task = asyncio.create_task(deliverer.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def uptime_hits(hook: WebhookReceiver, n: int) -> list[Any]:
    """The uptime check's webhooks, once there are ``n`` (the certificate check of an
    http:// target alerts too)."""
    hits = [h for h in hook.hits if orjson.loads(h.body)["check"]["name"] == "uptime"]
    return hits if len(hits) >= n else []


async def every_row_text(store: Store) -> str:
    """Every row of every table, as text: what a dump would hold."""
    tables = [r["tablename"] for r in await fetch(
        store, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    parts = []
    for t in tables:
        rows = await fetch(store, f'SELECT t::text AS x FROM "{t}" t')
        parts.extend(r["x"] for r in rows)
    return "\n".join(parts)


async def test_a_keyword_on_a_200_page_alerts_with_the_reason_and_recovers(
    store: Store, client: aiohttp.ClientSession, settings: Settings, tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    fast = fast_settings(tmp_path, region="eu-west")
    async with HttpTarget() as site, WebhookReceiver() as hook:
        async with client.put("/webapi/account", json={"webhook_url": hook.url}) as r:
            assert r.status == 200, await r.text()
        site.body = b"<h1>Welcome</h1>"
        created = await create(
            client, url=site.url("/shop"), alias="Shop",
            request={"headers": {"Authorization": SECRET, "X-Trace": "visible"}},
            assertions=[{"source": "body", "comparison": "not_contains", "target": KEYWORD}],
        )
        check_id = created["checks"]["uptime"]["id"]
        assert created["request"]["headers"] == {"Authorization": "********",
                                                 "X-Trace": "visible"}
        async with running_engine(store, fast), delivering(store, fast):
            await wait_status(store, check_id, "ok")
            seen = site.requests[-1]
            assert seen.headers["authorization"] == SECRET  # decrypted for the probe only
            site.body = f"<h1>Error</h1><p>{KEYWORD}</p>".encode()
            down = await wait_status(store, check_id, "down")
            reason = f'body not_contains "{KEYWORD}" failed: found in the body'
            assert down["error"] == reason
            hits = await wait_until(lambda: uptime_hits(hook, 1), what="the downtime webhook")
            body = orjson.loads(hits[0].body)
            assert body["check"]["error"] == reason
            assert body["check"]["status"] == "nok"
            assert body["check"]["meta"]["http_status_code"] == 200
            site.body = b"<h1>Welcome back</h1>"
            await wait_status(store, check_id, "ok")
            hits = await wait_until(lambda: uptime_hits(hook, 2), what="the restored webhook")
            assert orjson.loads(hits[1].body)["check"]["status"] == "ok"

        async with client.get(f"/webapi/monitors/{created['id']}") as r:
            got = await r.json()
            shown = await r.text()
        assert got["request"]["headers"]["Authorization"] == "********"
        assert got["assertions"] == [{"source": "body", "property": None,
                                      "comparison": "not_contains", "target": KEYWORD}]
        async with client.get("/webapi/monitors") as r:
            shown += await r.text()
        secret_parts = ("TOPSECRET", "7f3a")
        for text in (shown, *(h.body.decode() for h in hook.hits),
                     *(str(h.headers) for h in hook.hits), caplog.text,
                     await every_row_text(store)):
            for part in secret_parts:
                assert part not in text


async def test_a_post_with_its_body_is_confirmed_by_the_same_request(
    store: Store, client: aiohttp.ClientSession, settings: Settings, tmp_path: Path
) -> None:
    fast = fast_settings(tmp_path)
    payload = '{"ping": "\u00e9t\u00e9", "n": 1}'
    async with HttpTarget() as site:
        site.body = b'{"status": "UP"}'
        created = await create(
            client, url=site.url("/health"),
            request={"method": "POST", "body": payload,
                     "headers": {"Content-Type": "application/json"}},
            assertions=[{"source": "json", "property": "$.status", "comparison": "equals",
                         "target": "UP"}],
        )
        check_id = created["checks"]["uptime"]["id"]
        async with running_engine(store, fast):
            await wait_status(store, check_id, "ok")
            site.body = b'{"status": "DOWN"}'
            before = len(site.requests)
            down = await wait_status(store, check_id, "down")
            assert down["error"] == 'json $.status equals "UP" failed: got "DOWN"'
        failing = site.requests[before:]
        assert len(failing) >= 2  # the probe and its confirmation
        for seen in site.requests:
            assert seen.method == "POST" and seen.body == payload.encode("utf-8")
            assert seen.headers["content-type"] == "application/json"
        [confirmation] = await fetch(
            store, "SELECT * FROM probe_results WHERE check_id = $1 AND confirmation",
            check_id)
        assert confirmation["error"] == 'json $.status equals "UP" failed: got "DOWN"'
        assert confirmation["status_code"] == 200


async def test_the_confirming_region_applies_the_same_request_and_assertions(
    store: Store, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    secret = "a cluster secret long enough to sign with"
    peer_settings = Settings(data_dir=tmp_path / "data", port=0, region="us",
                             cluster_secret=secret, base_url="http://127.0.0.1:8080",
                             allow_private_targets=True)
    prober = HttpProber(timeout=3.0, user_agent="Upwatch/peer", allow_private=True)
    app = web.Application()
    app.router.add_routes(peer_routes(store, peer_settings, prober,
                                      Membership("node-us", "us"), Metrics()))
    try:
        async with serve(app) as peer_url, HttpTarget() as site:
            site.body = b'{"status": "DOWN"}'
            created = await create(
                client, url=site.url("/health"),
                request={"method": "PUT", "body": "x=1", "headers": {"X-Api-Key": "k-SECRET"}},
                assertions=[{"source": "json", "property": "$.status",
                             "comparison": "equals", "target": "UP"}],
            )
            check_id = created["checks"]["uptime"]["id"]
            body = orjson.dumps({"check_id": check_id})
            headers = sign_request(secret.encode(), "POST", CONFIRM_PATH, body, time.time())
            async with aiohttp.ClientSession() as s, s.post(
                peer_url + CONFIRM_PATH, data=body,
                headers={**headers, "Content-Type": "application/json"},
            ) as r:
                answer = await r.read()
                assert r.status == 200, answer
                verify_response(secret.encode(), 200, headers[H_NONCE], answer,
                                r.headers, time.time())
            outcome = _outcome_from_json(orjson.loads(answer))
            assert outcome.status_code == 200
            assert outcome.assertion_error == 'json $.status equals "UP" failed: got "DOWN"'
            [seen] = site.requests
            assert seen.method == "PUT" and seen.body == b"x=1"
            assert seen.headers["x-api-key"] == "k-SECRET"
    finally:
        await prober.aclose()


JSON_BODY = b'{"status": "DOWN", "n": 7, "items": [{"id": 1}, {"id": 2}], "e": ""}'


def _a(source: str, comparison: str, target: Any = None, prop: str | None = None) -> Any:
    return {"source": source, "property": prop, "comparison": comparison, "target": target}


# Per source and comparison: an assertion that holds on the target's answer, and one that
# fails with these words.
EVERY: list[tuple[Any | None, Any | None, str]] = [
    (_a("status_code", "equals", 200), _a("status_code", "equals", 201),
     "status_code equals 201 failed: got 200"),
    (_a("status_code", "not_equals", 500), _a("status_code", "not_equals", 200),
     "status_code not_equals 200 failed: got 200"),
    (_a("status_code", "less_than", 300), _a("status_code", "less_than", 200),
     "status_code less_than 200 failed: got 200"),
    (_a("status_code", "greater_than", 199), _a("status_code", "greater_than", 200),
     "status_code greater_than 200 failed: got 200"),
    (_a("response_time", "less_than", 60000), _a("response_time", "less_than", 0),
     "response_time less_than 0 failed: got "),
    (_a("response_time", "greater_than", -1), _a("response_time", "greater_than", 60000),
     "response_time greater_than 60000 failed: got "),
    (_a("header", "equals", "42", "X-Count"), _a("header", "equals", "41", "X-Count"),
     'header X-Count equals "41" failed: got "42"'),
    (_a("header", "not_equals", "41", "X-Count"), _a("header", "not_equals", "42", "X-Count"),
     'header X-Count not_equals "42" failed: got "42"'),
    (_a("header", "contains", "json", "Content-Type"),
     _a("header", "contains", "html", "Content-Type"),
     'header Content-Type contains "html" failed: got "application/json"'),
    (_a("header", "not_contains", "html", "Content-Type"),
     _a("header", "not_contains", "json", "Content-Type"),
     'header Content-Type not_contains "json" failed: got "application/json"'),
    (_a("header", "less_than", 100, "X-Count"), _a("header", "less_than", 10, "X-Count"),
     'header X-Count less_than 10 failed: got "42"'),
    (_a("header", "greater_than", 10, "X-Count"), _a("header", "greater_than", 100, "X-Count"),
     'header X-Count greater_than 100 failed: got "42"'),
    (_a("header", "is_empty", None, "X-None"), _a("header", "is_empty", None, "X-Count"),
     'header X-Count is_empty failed: got "42"'),
    (_a("header", "not_empty", None, "X-Count"), _a("header", "not_empty", None, "X-None"),
     "header X-None not_empty failed: not found"),
    (_a("header", "matches", "^app.*json$", "Content-Type"),
     _a("header", "matches", "^text/", "Content-Type"),
     'header Content-Type matches "^text/" failed: got "application/json"'),
    (_a("body", "equals", JSON_BODY.decode()), _a("body", "equals", "{}"),
     'body equals "{}" failed: got '),
    (_a("body", "not_equals", "{}"), _a("body", "not_equals", JSON_BODY.decode()),
     "body not_equals "),
    (_a("body", "contains", "DOWN"), _a("body", "contains", "Welcome"),
     'body contains "Welcome" failed: not in the body'),
    (_a("body", "not_contains", "Welcome"), _a("body", "not_contains", "DOWN"),
     'body not_contains "DOWN" failed: found in the body'),
    (None, _a("body", "is_empty"), "body is_empty failed: got "),  # cannot hold here
    (_a("body", "not_empty"), None, ""),  # cannot fail here
    (_a("body", "matches", r'"n": \d'), _a("body", "matches", r"^\["),
     'body matches "^\\\\[" failed: no match in the body'),
    (_a("json", "equals", "DOWN", "$.status"), _a("json", "equals", "UP", "$.status"),
     'json $.status equals "UP" failed: got "DOWN"'),
    (_a("json", "not_equals", "UP", "$.status"), _a("json", "not_equals", "DOWN", "$.status"),
     'json $.status not_equals "DOWN" failed: got "DOWN"'),
    (_a("json", "contains", "OW", "$.status"), _a("json", "contains", "UP", "$.status"),
     'json $.status contains "UP" failed: got "DOWN"'),
    (_a("json", "not_contains", "UP", "$.status"), _a("json", "not_contains", "OW", "$.status"),
     'json $.status not_contains "OW" failed: got "DOWN"'),
    (_a("json", "less_than", 10, "$.n"), _a("json", "less_than", 5, "$.n"),
     'json $.n less_than 5 failed: got "7"'),
    (_a("json", "greater_than", 5, "$.n"), _a("json", "greater_than", 10, "$.n"),
     'json $.n greater_than 10 failed: got "7"'),
    (_a("json", "is_empty", None, "$.missing"), _a("json", "is_empty", None, "$.status"),
     'json $.status is_empty failed: got "DOWN"'),
    (_a("json", "not_empty", None, "$.items[?@.id > 1].id"),
     _a("json", "not_empty", None, "$.e"), "json $.e not_empty failed: empty"),
    (_a("json", "matches", "^D", "$.status"), _a("json", "matches", "^U", "$.status"),
     'json $.status matches "^U" failed: got "DOWN"'),
]


async def test_every_source_and_comparison_through_the_engine(
    store: Store, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Each (source, comparison) once holding (the check is ok) and once failing (down,
    with the assertion's words as the check's error), in one engine run."""
    fast = fast_settings(tmp_path)
    async with HttpTarget() as site:
        site.body = JSON_BODY
        site.headers = {"Content-Type": "application/json", "X-Count": "42"}
        expect: dict[int, tuple[str, str]] = {}
        for i, (holds, fails, words) in enumerate(EVERY):
            for assertion, status in ((holds, "ok"), (fails, "down")):
                if assertion is None:
                    continue
                m = await create(client, url=site.url(f"/c/{i}/{status}"),
                                 assertions=[assertion])
                expect[m["checks"]["uptime"]["id"]] = (status, words)
        async with running_engine(store, fast):
            async def settled() -> bool:
                rows = await fetch(store, "SELECT id, status FROM checks WHERE id = ANY($1)",
                                   list(expect))
                return all(r["status"] == expect[r["id"]][0] for r in rows)

            await wait_until(settled, timeout=30, what="every check in its expected status")
        rows = await fetch(store, "SELECT id, status, error FROM checks WHERE id = ANY($1)",
                           list(expect))
        for r in rows:
            status, words = expect[r["id"]]
            if status == "ok":
                assert r["error"] is None, r
            else:
                assert r["error"].startswith(words), (r, words)
                assert " failed: " in r["error"]
