"""Stopping the engine: probes already running get DRAIN_PROBES seconds to finish, and their
results are written; the rest are cut off and write nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from engine.db.store import Store
from engine.scheduler.dispatch import DRAIN_PROBES
from tests.support.engine_support import add_monitor, fast_settings, fetch, running_engine
from tests.support.targets import HttpTarget


async def test_stop_waits_for_running_probes_then_cuts_off_the_rest(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, probe_timeout=30.0)
    async with HttpTarget() as slow, HttpTarget(host="127.0.0.2") as stuck:
        slow.delay = 1.0  # answers during the drain
        stuck.mode = "hang"  # never answers
        _, slow_check, _ = await add_monitor(store, acc.id, slow.url("/"))
        _, stuck_check, _ = await add_monitor(store, acc.id, stuck.url("/"))
        async with running_engine(store, settings) as engine:
            await slow.wait_for_connections(1)
            await stuck.wait_for_connections(1)
            assert engine.in_flight == 2
            t0 = time.monotonic()
        took = time.monotonic() - t0
        assert engine.in_flight == 0
        # It waited for the drain (the stuck probe could not finish), and not much longer.
        assert DRAIN_PROBES - 0.1 <= took < DRAIN_PROBES + 3.0
        slow_rows = await fetch(
            store, "SELECT status_code, error FROM probe_results WHERE check_id = $1",
            slow_check,
        )
        assert [(r["status_code"], r["error"]) for r in slow_rows] == [(200, None)]
        stuck_rows = await fetch(
            store, "SELECT count(*) AS n FROM probe_results WHERE check_id = $1", stuck_check
        )
        assert stuck_rows[0]["n"] == 0
