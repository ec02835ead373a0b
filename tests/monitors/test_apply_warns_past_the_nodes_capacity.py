"""Monitors applied past what the live nodes can probe (their capacity as each measured it,
from their last heartbeat) are applied all the same, with a warning: in ``PUT
/webapi/monitors``'s answer and on ``upwatch apply``'s stderr. Within capacity, or with no
node that measured one, nothing is said."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.cli import upwatch

ALLOW = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"}


async def node_with_capacity(store: Store, capacity: float) -> None:
    await store.register_node("node-a", "local", "http://127.0.0.1:1", "test")
    assert await store.heartbeat("node-a", {
        "overloaded": False, "ratio": 0.0, "asked_per_s": 0.0, "done_per_s": 0.0,
        "capacity_per_s": capacity, "engine_share": 0.9,
        "cost_us_by_kind": {"uptime": 500.0}})


def document(n: int, prefix: str) -> dict[str, Any]:
    # 30 s each: n monitors ask n / 30 probes/s.
    return {"monitors": [{"key": f"{prefix}{i}", "url": f"http://127.0.0.1:9/{prefix}{i}",
                          "uptime": {"interval": 30}} for i in range(n)]}


async def test_put_within_capacity_says_nothing_and_past_it_warns(
    client: aiohttp.ClientSession, store: Store
) -> None:
    async with client.put("/webapi/monitors", json=document(30, "a")) as r:
        assert r.status == 200, await r.text()
        assert "warnings" not in await r.json()  # no node measured a capacity yet
    await node_with_capacity(store, 100.0)
    async with client.put("/webapi/monitors", json=document(60, "a")) as r:
        assert r.status == 200, await r.text()
        body = await r.json()
        assert "warnings" not in body  # 2 probes/s of 100
        assert len(body["created"]) == 30
    await node_with_capacity(store, 1.0)
    async with client.put("/webapi/monitors", json=document(90, "a")) as r:
        assert r.status == 200, await r.text()  # never refused
        body = await r.json()
        assert len(body["created"]) == 30
        [warning] = body["warnings"]
        assert "3 probes/s" in warning and "can hold 1/s" in warning, warning
    async with client.get("/webapi/monitors") as r:
        assert len(await r.json()) == 90


async def test_upwatch_apply_warns_on_stderr_and_applies(
    db_dsn: str, store: Store, tmp_path: Path
) -> None:
    account, _ = await store.create_account("ops")
    await node_with_capacity(store, 1.0)
    path = tmp_path / "monitors.toml"
    path.write_text("".join(f'[[monitors]]\nurl = "http://127.0.0.1:9/{i}"\n'
                            f"uptime = {{ interval = 30 }}\n\n" for i in range(60)))
    res = await asyncio.to_thread(upwatch, "apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert "upwatch apply: warning: The enabled checks ask for 2 probes/s" in res.stderr
    assert "60 monitors were created" in res.stdout, res.stdout
    dry = await asyncio.to_thread(upwatch, "apply", str(path), "--dry-run", dsn=db_dsn,
                                  env=ALLOW)
    assert dry.returncode == 0 and "warning" not in dry.stderr, dry.stderr
    assert len(await store.list_monitors(account.id)) == 60
