"""A new monitor is probed soon after it is created, and its next probe comes no sooner than
half an interval after that one: the check's phase does not add a second probe a moment
later (which, for thousands of monitors imported at once, doubled the first minute's load)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, running_engine
from tests.support.targets import HttpTarget

MONITORS = 12
INTERVAL_S = 30  # 0.3 s at fast_settings' time scale of 0.01


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_a_new_monitors_second_probe_is_half_an_interval_after_its_first(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    interval = INTERVAL_S * settings.time_scale
    seen: dict[str, list[float]] = {}
    async with HttpTarget() as site:

        async def stamp() -> None:
            n = 0
            while True:
                await site.wait_for_requests(n + 1, timeout=30)
                now = time.monotonic()
                for r in site.requests[n:]:
                    seen.setdefault(r.target, []).append(now)
                n = len(site.requests)

        for i in range(MONITORS):
            await add_monitor(store, acc.id, site.url(f"/m{i}"), interval=INTERVAL_S)
        stamper = asyncio.create_task(stamp())
        try:
            started = time.monotonic()
            async with running_engine(store, settings):
                await site.wait_for_requests(3 * MONITORS, timeout=20)
                async with asyncio.timeout(20):
                    while not all(len(seen.get(f"/m{i}", ())) >= 2 for i in range(MONITORS)):
                        await asyncio.sleep(0.01)
        finally:
            stamper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stamper
    firsts = [seen[f"/m{i}"][0] - started for i in range(MONITORS)]
    gaps = [seen[f"/m{i}"][1] - seen[f"/m{i}"][0] for i in range(MONITORS)]
    # Pending monitors are started soon, not at their phase.
    assert max(firsts) < 5.0, firsts
    # The next probe is half an interval later at least (a few ms of loop slack).
    assert min(gaps) >= interval / 2 - 0.03, (interval, sorted(gaps))
    # And no later than the phase after that.
    assert max(gaps) <= 1.5 * interval + 0.25, (interval, sorted(gaps))
