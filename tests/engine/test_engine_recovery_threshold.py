"""Confirmed recovery through the real engine: a target that flaps (down one probe, up the
next) for ten minutes (scaled) sends one downtime and one restored event with a recovery
threshold, and a pair per flap without one."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson

from engine.db.store import Store
from engine.scheduler.wheel import first_due
from tests.support.engine_support import (
    add_monitor,
    check_row,
    events_of,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

SCALE = 0.01
INTERVAL = 30  # s (0.3 s scaled)
FLAP_FOR = 600  # s of flapping (6 s scaled)


@contextlib.asynccontextmanager
async def flapping(site: HttpTarget, check_id: int) -> AsyncIterator[None]:
    """``site`` answers 500 for one interval of the check's phase, 200 for the next, and so
    on. It flips halfway between two scheduled probes, so that a probe and its confirmation
    (0.05 s later) always see the same answer: every scheduled probe sees a flip."""
    interval = INTERVAL * SCALE

    async def flip() -> None:
        wall = time.time()
        at = first_due(check_id, interval, wall) - interval / 2
        status = 500
        while True:
            await asyncio.sleep(max(0.0, at - time.time()))
            site.status = status
            status = 200 if status == 500 else 500
            at += interval

    task = asyncio.create_task(flip())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        site.status = 200


async def test_flapping_sends_one_downtime_and_one_restored_with_the_recovery_threshold(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, time_scale=SCALE)
    async with HttpTarget() as calm_site, HttpTarget() as noisy_site:
        _, calm, _ = await add_monitor(store, acc.id, calm_site.url("/"), interval=INTERVAL)
        _, noisy, _ = await add_monitor(store, acc.id, noisy_site.url("/"), interval=INTERVAL)
        # 120 s of good probes (four intervals) before the restore; through the API's store.
        updated = await store.update_check(acc.id, calm, recovery_threshold_s=120)
        assert updated.recovery_threshold == 120
        async with running_engine(store, settings):
            await wait_status(store, calm, "ok")
            await wait_status(store, noisy, "ok")
            async with flapping(calm_site, calm), flapping(noisy_site, noisy):
                await asyncio.sleep(FLAP_FOR * SCALE)
            # Flapping over, the site steady up: restored after the recovery threshold.
            async def restored() -> Any:
                evs = await events_of(store, calm)
                return evs if evs and evs[-1]["event"] == "uptime_restored" else None

            await wait_until(restored, timeout=10, what="the restored event")
            await wait_status(store, noisy, "ok")
            row = await check_row(store, calm)
            assert row is not None and row["status"] == "ok"
            assert row["recovering_since"] is None
        calm_events = await events_of(store, calm)
        noisy_events = await events_of(store, noisy)
    assert [e["event"] for e in calm_events] == ["downtime", "uptime_restored"]
    downtime, up = calm_events
    assert up["parent_id"] == downtime["id"]
    # One outage, counted until the recovery was confirmed (at least the threshold long
    # after the last failed probe).
    [outage] = await fetch(store, "SELECT * FROM outages WHERE check_id = $1", calm)
    assert outage["ended_at"] is not None
    body = orjson.loads(up["body"])
    assert body["check"]["meta"]["http_status_code"] == 200
    failures = await fetch(
        store, "SELECT max(at) AS last FROM probe_results WHERE check_id = $1 AND outcome = 2",
        calm)
    assert (outage["ended_at"] - failures[0]["last"]).total_seconds() >= 120 * SCALE
    # Without the threshold: a downtime and a restored per flap.
    kinds = [e["event"] for e in noisy_events]
    assert kinds.count("downtime") >= 5 and kinds.count("uptime_restored") >= 5
    print(f"\nflapping {FLAP_FOR} s, interval {INTERVAL} s: webhooks with "
          f"recovery_threshold=120: {len(calm_events)}; without: {len(noisy_events)} "
          f"({kinds.count('downtime')} downtime, {kinds.count('uptime_restored')} restored)")
