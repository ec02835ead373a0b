"""The check-kind seam: the registered kinds, and a kind that probes nothing (a deadline,
as heartbeats will be) going through the engine with no branch for it anywhere."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.domain.evaluate import DOWN, OK, CheckState, Outcome, Transition
from engine.kinds.base import Fact, Judging, Phases, ResultRow, ShownCheck
from engine.kinds.registry import SHOWN, Kinds
from engine.kinds.scheduled import ScheduledCheck, Touch
from engine.runtime.metrics import Metrics
from engine.scheduler.engine import Engine
from tests.support.engine_support import fast_settings
from tests.support.wait import wait_until


def test_the_registered_kinds_are_the_stored_ones_in_the_apis_order() -> None:
    assert SHOWN.names == ("uptime", "certificate_health", "domain_expiry", "heartbeat")
    assert len({k.code for k in SHOWN}) == len(SHOWN)
    for kind in SHOWN:
        assert kind.prober is None  # shown only
        assert set(kind.words) >= {"ok", "degraded", "failing", "down", "pending", "paused"}


@dataclass(slots=True)
class Missed:
    """The deadline kind's outcome: whether the deadline passed without a ping."""

    error: str | None
    total_ms: float = 0.0


class DeadlineKind:
    """A kind with nothing to probe: its probe is pure and instantaneous."""

    def __init__(self) -> None:
        self.name = "deadline"
        self.code = 9
        self.label = "Deadline"
        self.words = {"ok": ("On time", "s-ok"), "down": ("Late", "s-bad")}
        self.prober = None
        self.start = None
        self.steady = None

    async def probe(self, check: ScheduledCheck) -> Missed:
        return Missed("no ping within the interval")

    def judge(
        self, check: ScheduledCheck, outcome: Missed, now: datetime, judging: Judging
    ) -> Transition:
        status = DOWN if outcome.error else OK
        state = CheckState(status=status, error=outcome.error, last_check_at=now)
        return Transition(state, {}, Outcome.FAILURE if outcome.error else Outcome.OK)

    def judge_again(
        self, check: ScheduledCheck, outcome: Missed, now: datetime, region: str,
        judging: Judging,
    ) -> Transition:
        return self.judge(check, outcome, now, judging)

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        return None

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: Missed, region: str,
        confirmation: bool,
    ) -> ResultRow:
        return (check_id, at, self.code, int(cls), None, outcome.total_ms, None, None, None,
                None, region, confirmation, outcome.error)

    def observe(self, outcome: Missed, phases: Phases) -> None:
        pass

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]:
        return {}

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]:
        return []

    def status_fields(self, check: ShownCheck) -> dict[str, Any]:
        return {}


class _Listener:
    def __init__(self) -> None:
        self.lost = asyncio.Event()

    async def alive(self) -> None:
        pass


class _Sink:
    def __init__(self, written: list[ResultRow]) -> None:
        self.written = written

    async def write(self, rows: Any, touches: dict[int, Touch]) -> None:
        self.written.extend(rows)

    async def close(self) -> None:
        pass


class _Store:
    """Just enough of the store for one check that never changes."""

    def __init__(self, checks: list[ScheduledCheck]) -> None:
        self.checks = checks
        self.written: list[ResultRow] = []

    async def load_checks_page(self, after_id: int, limit: int) -> list[ScheduledCheck]:
        return [c for c in self.checks if c.id > after_id][:limit]

    async def load_checks(self, ids: Iterable[int]) -> list[ScheduledCheck]:
        return []

    async def enabled_check_versions_page(
        self, after_id: int, limit: int
    ) -> list[tuple[int, int]]:
        return [(c.id, c.config_version) for c in self.checks if c.id > after_id][:limit]

    @contextlib.asynccontextmanager
    async def listen_checks(self, on_change: Callable[[int], None]) -> AsyncIterator[_Listener]:
        yield _Listener()

    async def apply_transition(self, check_id: int, config_version: int, tr: Transition) -> Any:
        return tr.state

    def results_session(self) -> _Sink:
        return _Sink(self.written)


class _Calendar:
    async def reload(self) -> None:
        pass

    async def run(self, stop: asyncio.Event) -> None:
        await stop.wait()

    def quiet(self, monitor_id: int, account_id: int, now: datetime) -> tuple[None, None]:
        return None, None


class _NoConfirmer:
    async def confirm(self, check: Any, first_outcome: Any) -> None:
        raise AssertionError("the deadline kind never asks for a confirmation")


async def test_a_kind_that_probes_nothing_runs_through_the_engine(tmp_path: Path) -> None:
    check = ScheduledCheck(
        id=1, monitor_id=1, kind="deadline", url="", host="", port=0, interval_s=30,
        threshold_s=0, config_version=1, state=CheckState(),
    )
    store = _Store([check])
    engine = Engine(
        store, fast_settings(tmp_path), metrics=Metrics(), kinds=Kinds([DeadlineKind()]),
        confirmer=_NoConfirmer(), calendar=_Calendar(),  # type: ignore[arg-type]
    )
    stop = asyncio.Event()
    task = asyncio.create_task(engine.run(stop))
    try:
        await wait_until(lambda: len(store.written) >= 2, what="two deadline rows")
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    held = engine.check(1)
    assert held is not None and held.state.status == DOWN
    assert held.state.error == "no ping within the interval"
    at = store.written[0][1]
    assert store.written[0][2:4] == (9, int(Outcome.FAILURE)) and at <= datetime.now(UTC)

