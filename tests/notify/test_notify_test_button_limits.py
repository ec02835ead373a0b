"""The channel test button's limits through the real app on a real socket, to real local
receivers: one test per channel at a time, a few per channel and per account in a row, two
at a time per account; over a limit a 429 at once naming it, with Retry-After; another
account is not held by them; a storm of tests reaches a receiver only a few times."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.delivery.notify.testgate import Limits
from engine.runtime.settings import Settings
from tests.support.notify_support import HttpReceiver, SilentHost
from tests.support.wait import wait_until

BASE = "/webapi/notification-channels"
LIMITS = Limits()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # A test to a host that never answers gives up after 3 s.
    return Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0,
                    notify_timeout=3.0)


async def new_channel(client: aiohttp.ClientSession, url: str) -> int:
    async with client.post(BASE, json={"name": "c", "url": url}) as r:
        assert r.status == 201, await r.text()
        return int((await r.json())["id"])


async def press(client: aiohttp.ClientSession, cid: int) -> tuple[int, Any, str | None]:
    async with client.post(f"{BASE}/{cid}/test") as r:
        return r.status, await r.json(), r.headers.get("Retry-After")




async def test_one_test_per_channel_at_a_time_the_second_is_a_429_at_once(
    client: aiohttp.ClientSession,
) -> None:
    async with SilentHost() as host:
        cid = await new_channel(client, host.json_url())
        first = asyncio.create_task(press(client, cid))
        await wait_until(lambda: host.accepted >= 1, what="the first test's connection")
        loop = asyncio.get_running_loop()
        started = loop.time()
        status, body, retry = await press(client, cid)
        assert loop.time() - started < 1.0
        assert status == 429 and body["limit"] == "channel"
        assert "one test per channel at a time" in body["message"]
        assert retry is not None and 1 <= int(retry) <= 3
        status, body, _ = await first
        assert status == 200 and body["delivered"] is False and "timed out" in body["error"]


async def test_a_storm_of_tests_reaches_the_receiver_only_a_few_times(
    client: aiohttp.ClientSession,
) -> None:
    async with HttpReceiver() as receiver:
        one = await new_channel(client, receiver.json_url("/one"))
        answers = [await press(client, one) for _ in range(20)]
        ok = [a for a in answers if a[0] == 200]
        assert len(ok) == LIMITS.channel_burst and all(a[1]["delivered"] for a in ok)
        refused = [a for a in answers if a[0] == 429]
        assert len(refused) == 20 - LIMITS.channel_burst
        _, body, retry = refused[0]
        assert body["limit"] == "channel" and "then one every 20 s" in body["message"]
        assert retry is not None and 1 <= int(retry) <= LIMITS.channel_every
        # Spread over many channels, the account's limit holds.
        many = [await new_channel(client, receiver.json_url(f"/c{i}")) for i in range(10)]
        answers = [await press(client, c) for c in many for _ in range(2)]
        # The account had used channel_burst of its tests on the first channel.
        assert sum(a[0] == 200 for a in answers) == LIMITS.account_burst - LIMITS.channel_burst
        assert {a[1]["limit"] for a in answers if a[0] == 429} == {"account"}
        assert len(receiver.delivered()) == LIMITS.account_burst


async def test_an_account_runs_two_tests_at_a_time_and_another_account_is_not_held(
    client: aiohttp.ClientSession, api: str, store: Store,
) -> None:
    async with SilentHost() as host, HttpReceiver() as receiver:
        channels = [await new_channel(client, host.json_url(f"/h{i}")) for i in range(3)]
        running = [asyncio.create_task(press(client, c)) for c in channels[:2]]
        await wait_until(lambda: host.accepted >= 2, what="two tests' connections")
        status, body, retry = await press(client, channels[2])
        assert status == 429 and body["limit"] == "account"
        assert "at most 2 at a time" in body["message"] and retry is not None
        # Another account tests its channel meanwhile, and at once.
        _, token = await store.create_account("other")
        async with aiohttp.ClientSession(
            base_url=api, headers={"Authorization": f"Bearer {token}"}
        ) as other:
            theirs = await new_channel(other, receiver.json_url("/theirs"))
            loop = asyncio.get_running_loop()
            started = loop.time()
            assert (await press(other, theirs))[:2] == (200, {"delivered": True})
            assert loop.time() - started < 1.0
            # Account A's channel is a 404 to them.
            async with other.post(f"{BASE}/{channels[0]}/test") as r:
                assert r.status == 404
        for task in running:
            assert (await task)[0] == 200
