"""Heartbeats as the engine holds them: those on the same schedule share one configuration
object, and idle ones one empty runs map, without a start of one reaching another."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.domain import heartbeat as hb


def row(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"grace_s": 3600, "period_s": 86400, "schedule": None,
                            "time_zone": "UTC", "max_runtime_s": None, "min_runtime_s": None,
                            "min_interval_s": None, "runs": {}}
    return base | over


def test_the_same_schedule_is_one_object_and_another_is_its_own() -> None:
    a, b = hb.beat_of_row(row()), hb.beat_of_row(row())
    c = hb.beat_of_row(row(grace_s=600))
    assert a.config is b.config
    assert c.config is not a.config and c.config == hb.Config(grace_s=600, period_s=86400)


def test_a_start_on_one_idle_heartbeat_leaves_the_others_without_runs() -> None:
    a, b = hb.beat_of_row(row()), hb.beat_of_row(row())
    at = datetime(2026, 11, 28, 3, 0, tzinfo=UTC)
    started, _ = hb.apply_ping(a.facts, hb.Ping(hb.START, at, rid="r1"), a.config)
    assert started.runs == {"r1": at}
    assert a.facts.runs == {} and b.facts.runs == {}
    assert hb.beat_of_row(row(runs={"r2": at.timestamp()})).facts.runs == {"r2": at}
