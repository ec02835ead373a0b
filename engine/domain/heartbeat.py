"""Heartbeats judged: pure functions of (facts, ping, config, now). No I/O, no clock.

A heartbeat is told what happens by pings (``/ping/<uuid>`` and its variants). Each ping
is folded into the heartbeat's :class:`Facts` by :func:`apply_ping` the moment it is
written, which also says whether the ping itself was good or bad (a ``fail`` ping, a
non-zero exit status, a run faster than ``min_runtime``, pings closer than
``min_interval``, a failed body assertion). :func:`verdict` then says, at any ``now``, why
the heartbeat is down (a reason in words) or None; :func:`next_decision` says when that
may change without another ping (the deadline the engine's timing wheel holds).

Schedules are a period in seconds, or a five-field cron expression in a time zone,
evaluated by cronsim (as Healthchecks does), so a job at 02:30 local time is expected
correctly across daylight-saving changes.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from engine.domain.timefmt import fmt

SUCCESS = "success"
START = "start"
FAIL = "fail"
LOG = "log"

# Open runs a heartbeat remembers (by rid); past this, new starts are not tracked (the
# oldest runs, the ones that can go past max_runtime first, are kept).
MAX_OPEN_RUNS = 64


@dataclass(frozen=True, slots=True)
class Config:
    """How a heartbeat is expected to ping. Exactly one of ``period_s`` and ``schedule``.
    ``max_runtime_s`` None: the grace. ``min_runtime_s``/``min_interval_s`` None: off."""

    grace_s: int
    period_s: int | None = None
    schedule: str | None = None
    time_zone: str = "UTC"
    max_runtime_s: int | None = None
    min_runtime_s: int | None = None
    min_interval_s: int | None = None

    @property
    def max_runtime(self) -> int:
        return self.grace_s if self.max_runtime_s is None else self.max_runtime_s


@dataclass(frozen=True, slots=True)
class Ping:
    """One ping: ``kind`` SUCCESS/START/FAIL/LOG; ``exit_status`` for ``/<exit>`` pings;
    ``reason``: a failure's own words (Kuma's ``msg``); ``assertion_error``: the first failed
    body assertion, judged by the caller."""

    kind: str
    at: datetime
    rid: str = ""
    exit_status: int | None = None
    reason: str | None = None
    assertion_error: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the pings so far left. ``runs``: open runs, rid -> start (``""``: no rid)."""

    last_ping_at: datetime | None = None
    last_success_at: datetime | None = None
    last_failure_at: datetime | None = None
    failure_reason: str | None = None
    last_start_at: datetime | None = None
    last_duration_s: float | None = None
    last_exit_status: int | None = None
    runs: dict[str, datetime] = field(default_factory=dict)


def duration_words(seconds: float) -> str:
    """``2 s``, ``90 s``, ``5 min``, ``1 h``, ``1 h 30 min``, ``2 d``: whole units, short."""
    s = round(seconds)
    if s < 120 or (s < 3600 and s % 60):
        return f"{s} s"
    if s % 86400 == 0:
        return f"{s // 86400} d"
    h, rest = divmod(s, 3600)
    m = rest // 60
    if h == 0:
        return f"{m} min"
    return f"{h} h" if m == 0 else f"{h} h {m} min"


def _hm(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%H:%M") + " UTC"


def _day_hm(ts: datetime) -> str:
    return ts.astimezone(UTC).strftime("%Y-%m-%d %H:%M") + " UTC"


def zone_error(name: str) -> str | None:
    """Why ``name`` is not a time zone (None: it is one)."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return f"unknown time zone: {name}"
    return None


def schedule_error(expr: str) -> str | None:
    """Why ``expr`` is not a five-field cron expression (None: it is one)."""
    if len(expr.split()) != 5:
        return "must be a cron expression of five fields (minute hour day month weekday)"
    try:
        CronSim(expr, datetime(2000, 1, 1, tzinfo=UTC))
    except CronSimError as exc:
        return f"not a valid cron expression: {exc}"
    return None


def next_expected(config: Config, after: datetime) -> datetime:
    """When the next success ping is expected after one at ``after`` (aware UTC)."""
    if config.schedule is None:
        return after + timedelta(seconds=config.period_s or 0)
    local = after.astimezone(ZoneInfo(config.time_zone))
    return next(CronSim(config.schedule, local)).astimezone(UTC)


def apply_ping(facts: Facts, ping: Ping, config: Config) -> tuple[Facts, str | None]:
    """``facts`` after ``ping``, and the ping's own failure in words (None: not a failure).
    A log ping changes nothing but ``last_ping_at``."""
    at = ping.at
    if ping.kind == LOG:
        return replace(facts, last_ping_at=at), None
    runs = facts.runs
    if ping.kind == START:
        if ping.rid in runs or len(runs) < MAX_OPEN_RUNS:
            runs = {**runs, ping.rid: at}
        return replace(facts, last_ping_at=at, last_start_at=at, runs=runs), None
    started = runs.get(ping.rid)
    if started is not None:
        runs = {k: v for k, v in runs.items() if k != ping.rid}
    duration = (at - started).total_seconds() if started is not None else None
    base = replace(
        facts, last_ping_at=at, runs=runs,
        last_duration_s=duration if duration is not None else facts.last_duration_s,
        last_exit_status=ping.exit_status,
    )
    reason = _failure(facts, ping, config, duration)
    if reason is None:
        return replace(base, last_success_at=at), None
    return replace(base, last_failure_at=at, failure_reason=reason), reason


def _failure(facts: Facts, ping: Ping, config: Config, duration: float | None) -> str | None:
    if ping.kind == FAIL:
        if ping.exit_status is not None:
            return f"exit status {ping.exit_status}"
        return ping.reason or "the job reported a failure"
    if ping.assertion_error is not None:
        return ping.assertion_error
    if config.min_runtime_s and duration is not None and duration < config.min_runtime_s:
        return (f"finished in {duration_words(duration)}, expected at least "
                f"{duration_words(config.min_runtime_s)}")
    last = facts.last_success_at
    if config.min_interval_s and last is not None:
        gap = (ping.at - last).total_seconds()
        if gap < config.min_interval_s:
            return (f"pinged {duration_words(gap)} after the previous success, expected at "
                    f"least {duration_words(config.min_interval_s)} apart")
    return None


def _overdue_run(facts: Facts, config: Config, now: datetime) -> str | None:
    if not facts.runs:
        return None
    oldest = min(facts.runs.values())
    limit = config.max_runtime
    if (now - oldest).total_seconds() >= limit:
        return (f"run started {_hm(oldest)} still running after {duration_words(limit)} "
                f"(max_runtime)")
    return None


def verdict(facts: Facts, config: Config, now: datetime) -> str | None:
    """Why the heartbeat is down at ``now`` (None: it is not). Never pinged: not down (it
    waits for its first ping, as Healthchecks' "new" checks do)."""
    if facts.last_failure_at is not None and (
        facts.last_success_at is None or facts.last_failure_at >= facts.last_success_at
    ):
        return facts.failure_reason or "the job reported a failure"
    overdue = _overdue_run(facts, config, now)
    if overdue is not None:
        return overdue
    if facts.last_success_at is None:
        return None
    deadline = next_expected(config, facts.last_success_at) + timedelta(seconds=config.grace_s)
    if now >= deadline:
        by = _hm(deadline) if deadline.date() == now.astimezone(UTC).date() else _day_hm(deadline)
        return (f"no ping since {_day_hm(facts.last_success_at)}, expected by {by} "
                f"(grace {duration_words(config.grace_s)})")
    return None


def next_decision(facts: Facts, config: Config) -> datetime | None:
    """When :func:`verdict` may next change with no ping: the success deadline (expected +
    grace) or an open run's max_runtime, whichever comes first; None when nothing is due."""
    times: list[datetime] = []
    if facts.last_success_at is not None:
        times.append(next_expected(config, facts.last_success_at)
                     + timedelta(seconds=config.grace_s))
    if facts.runs:
        times.append(min(facts.runs.values()) + timedelta(seconds=config.max_runtime))
    return min(times) if times else None


def meta(facts: Facts, config: Config, body: str | None) -> dict[str, object]:
    """The API's ``meta`` of a heartbeat check."""
    expected = (next_expected(config, facts.last_success_at)
                if facts.last_success_at is not None else None)
    return {
        "last_ping_at": fmt(facts.last_ping_at),
        "next_expected_at": fmt(expected),
        "last_start_at": fmt(facts.last_start_at),
        "last_duration_seconds": (None if facts.last_duration_s is None
                                  else round(facts.last_duration_s, 3)),
        "last_exit_status": facts.last_exit_status,
        "last_body": body,
    }


@dataclass(frozen=True, slots=True)
class Beat:
    """What the engine knows of a heartbeat: its configuration, facts and body excerpt."""

    config: Config
    facts: Facts
    body: str | None = None


def _ts(v: Any) -> datetime | None:
    if v is None or isinstance(v, datetime):
        return v
    text = str(v)
    ts = datetime.fromisoformat(text)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


# The runs of a heartbeat with none open: one shared dict (runs are replaced, never changed
# in place), as 100,000 idle heartbeats would otherwise hold 100,000 empty ones.
_NO_RUNS: dict[str, datetime] = {}


@functools.lru_cache(maxsize=4096)
def _config(grace_s: int, period_s: int | None, schedule: str | None, time_zone: str,
            max_runtime_s: int | None, min_runtime_s: int | None,
            min_interval_s: int | None) -> Config:
    """One Config object per distinct configuration: heartbeats sharing a schedule share
    it (and its values) in the engine's memory."""
    return Config(grace_s=grace_s, period_s=period_s, schedule=schedule, time_zone=time_zone,
                  max_runtime_s=max_runtime_s, min_runtime_s=min_runtime_s,
                  min_interval_s=min_interval_s)


def beat_of_row(r: Mapping[str, Any]) -> Beat:
    """A :class:`Beat` from a heartbeats row (a record, or its ``to_jsonb``)."""
    runs = r.get("runs") or {}
    return Beat(
        config=_config(r["grace_s"], r.get("period_s"), r.get("schedule"),
                       r.get("time_zone") or "UTC", r.get("max_runtime_s"),
                       r.get("min_runtime_s"), r.get("min_interval_s")),
        facts=Facts(
            last_ping_at=_ts(r.get("last_ping_at")),
            last_success_at=_ts(r.get("last_success_at")),
            last_failure_at=_ts(r.get("last_failure_at")),
            failure_reason=r.get("failure_reason"),
            last_start_at=_ts(r.get("last_start_at")),
            last_duration_s=r.get("last_duration_s"),
            last_exit_status=r.get("last_exit_status"),
            runs=({k: datetime.fromtimestamp(float(v), UTC) for k, v in runs.items()}
                  if runs else _NO_RUNS),
        ),
        body=r.get("last_body"),
    )



