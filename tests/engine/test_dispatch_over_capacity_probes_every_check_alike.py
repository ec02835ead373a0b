"""Over capacity, the dispatcher's queue goes round in order: with demand 1.5 times what its
budget admits, every check is probed about 1.5 intervals apart, each gap alike (none left to
the luck of its phase: one interval, then two), and none is starved: also when the checks'
kind has a decision waiting (a heartbeat's deadline, a failing check's alert threshold)."""

from __future__ import annotations

import asyncio
import itertools
import statistics
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any, cast

import pytest

from engine.domain.evaluate import CheckState
from engine.kinds.base import Judging
from engine.kinds.scheduled import ScheduledCheck
from engine.scheduler.dispatch import WHEEL_TICK, Dispatcher

CHECKS = 40
INTERVAL_S = 30
SCALE = 0.01  # 0.3 s
SHARE = 0.5
RATIO = 1.5  # not a whole number: joining the next phase rounds each gap to one
# The cost that makes the budget admit CHECKS / (RATIO * interval) probes a second.
COST = SHARE * RATIO * INTERVAL_S * SCALE / CHECKS
WARM_S = 1.5
RUN_S = 6.0


def _no_decision(c: ScheduledCheck, j: Judging) -> datetime | None:
    return None


def _decision_later(c: ScheduledCheck, j: Judging) -> datetime | None:
    return datetime.now(UTC) + timedelta(hours=1)  # after the next run: it changes nothing


@pytest.mark.parametrize("decision_due", [_no_decision, _decision_later],
                         ids=["no decision", "a decision waiting"])
async def test_over_capacity_every_check_is_probed_ratio_intervals_apart_alike(
    decision_due: Any,
) -> None:
    interval = INTERVAL_S * SCALE
    checks = {i: ScheduledCheck(i, i, "t", f"http://h{i}/", f"h{i}", 80, INTERVAL_S, 0, 1,
                                CheckState(status="up")) for i in range(1, CHECKS + 1)}
    kind = SimpleNamespace(start=None, decision_due=decision_due)
    judging = Judging("here", 1000.0, SCALE, cast(Any, lambda *a: (None, None)))
    d = Dispatcher(checks, {"t": cast(Any, kind)}, judging, max_in_flight=1000,
                   per_host_limit=10, observe_lateness=lambda late: None, costs={"t": COST})
    d.share = SHARE
    starts: dict[int, list[float]] = {i: [] for i in checks}

    async def probe(c: ScheduledCheck) -> None:
        starts[c.id].append(time.monotonic())
        await asyncio.sleep(interval * (c.id % 4) / 10)  # probes take 0 to 0.3 interval
        d.finish(c)

    d.attach(lambda c, outcome: None, probe)
    for c in checks.values():
        d.schedule(c)
    stop = asyncio.Event()
    began = time.monotonic()
    runner = asyncio.create_task(d.run(stop, WHEEL_TICK, lambda: None))
    try:
        await asyncio.sleep(RUN_S)
    finally:
        stop.set()
        await runner
    counted = {i: [t for t in s if t >= began + WARM_S] for i, s in starts.items()}
    assert all(len(s) >= 3 for s in counted.values()), {i: len(s) for i, s in counted.items()}
    gaps = {i: [(b - a) / interval for a, b in itertools.pairwise(s)]
            for i, s in counted.items()}
    every = sorted(g for gs in gaps.values() for g in gs)
    means = sorted(statistics.fmean(gs) for gs in gaps.values())
    # About RATIO intervals apart, every gap of every check, and each check's mean alike.
    assert statistics.median(every) == pytest.approx(RATIO, abs=0.25), every
    assert every[-1] < RATIO + 0.2, every[-10:]
    print(f"gaps p50 {statistics.median(every):.2f} max {every[-1]:.2f}; mean gaps "
          f"{means[0]:.2f}-{means[-1]:.2f}")
    assert means[-1] - means[0] < 0.1, means

