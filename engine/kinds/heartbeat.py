"""The heartbeat kind: nothing to probe on the network; pings tell what happened.

The engine holds each heartbeat it owns in its timing wheel at the heartbeat's next
decision (:meth:`HeartbeatKind.decision_due`: the success deadline, expected + grace, or an
open run's max_runtime; at once when a ping the check's row was bumped for is not judged
yet). Its "probe" reads the heartbeat's current facts from the database through the
``reader`` it was built with (one indexed row: a plain success ping moves the deadline
without notifying anyone, so the wheel's deadline may be early, never late), and
:func:`engine.domain.heartbeat_states.evaluate_heartbeat` judges
:func:`engine.domain.heartbeat.verdict`. No confirmation, no taskless start, no steady path;
its starts spend none of the dispatcher's CPU budget (``unmetered``).

Configured durations are multiplied by the time scale (``judging.scale``), as intervals
and thresholds are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from engine.domain import heartbeat as hb
from engine.domain.evaluate import DOWN, FAILING, PENDING, Outcome, Transition
from engine.domain.heartbeat import Beat, beat_of_row
from engine.domain.heartbeat_states import HEARTBEAT, evaluate_heartbeat
from engine.kinds.base import (
    Cancellable,
    Fact,
    Judging,
    Phases,
    ResultRow,
    ShownCheck,
    Steady,
    no_prober,
    plain_row,
)
from engine.kinds.scheduled import ScheduledCheck
from engine.kinds.shown import every_key, last_checked, meta_text, status_words

CODE: Final = 3  # probe_results.kind

_WORDS: Final = status_words(
    ok="On time", failing="Late (maintenance)", down="Down",
    pending="Waiting for the first ping",
)
# The API meta's keys, every one always present (null before the first ping).
_META_KEYS: Final = ("last_ping_at", "next_expected_at", "last_start_at",
                     "last_duration_seconds", "last_exit_status", "last_body")


class HeartbeatReader(Protocol):
    """Reads a heartbeat's current configuration and facts (the store)."""

    async def heartbeat_beat(self, check_id: int) -> Beat | None: ...


@dataclass(slots=True)
class HeartbeatOutcome:
    beat: Beat | None
    error: str | None = None
    total_ms: float = 0.0


def scaled(config: hb.Config, scale: float) -> hb.Config:
    """``config`` with its durations multiplied by ``scale`` (tests and demos run fast)."""
    if scale == 1.0:
        return config

    def s(v: int | None) -> int | None:
        return None if v is None else max(1, round(v * scale))

    return replace(config, grace_s=s(config.grace_s) or 1, period_s=s(config.period_s),
                   max_runtime_s=s(config.max_runtime_s), min_runtime_s=s(config.min_runtime_s),
                   min_interval_s=s(config.min_interval_s))


class HeartbeatKind:
    """See the module docstring; ``reader`` None builds a kind for presentation only."""

    def __init__(self, reader: HeartbeatReader | None = None) -> None:
        self.name: str = HEARTBEAT
        self.code: int = CODE
        self.label: str = "Heartbeat"
        self.words: Mapping[str, tuple[str, str]] = _WORDS
        self.prober = reader
        self.start: Callable[..., Cancellable] | None = None
        self.steady: Steady | None = None
        # A deadline probes nothing (one indexed read, then its verdict): the dispatcher's
        # CPU budget, which is for probes, does not hold it back.
        self.unmetered = True

    async def probe(self, check: ScheduledCheck) -> HeartbeatOutcome:
        if self.prober is None:
            raise no_prober(self.name)
        beat = await self.prober.heartbeat_beat(check.id)
        if beat is not None:
            # The next decision follows the facts just read; the body (up to 1,000
            # characters, for the meta only) is not kept with the check.
            check.heartbeat = Beat(beat.config, beat.facts)
        return HeartbeatOutcome(beat)

    def judge(
        self, check: ScheduledCheck, outcome: HeartbeatOutcome, now: datetime, judging: Judging
    ) -> Transition:
        beat = outcome.beat
        muted_until, resumed_at = judging.quiet(check.monitor_id, check.account_id, now)
        if beat is None:  # deleted meanwhile: the catalog drops it; nothing to judge
            return evaluate_heartbeat(check.state, None, now=now, pinged=False,
                                      region=judging.region)
        config = scaled(beat.config, judging.scale)
        reason = hb.verdict(beat.facts, config, now)
        outcome.error = reason
        tr = evaluate_heartbeat(
            check.state, reason, now=now, pinged=beat.facts.last_ping_at is not None,
            region=judging.region, recovery=check.recovery_s * judging.scale,
            muted_until=muted_until, resumed_at=resumed_at,
        )
        tr.meta = hb.meta(beat.facts, config, beat.body)
        return tr

    def judge_again(
        self, check: ScheduledCheck, outcome: HeartbeatOutcome, now: datetime, region: str,
        judging: Judging,
    ) -> Transition:
        return self.judge(check, outcome, now, judging)  # never asks for a confirmation

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        """When the heartbeat's state may next change: now when a ping is not judged yet
        (pending with a ping, ok with a failure, down with a success); a down heartbeat
        counting its recovery at the end of the recovery threshold; one held back by a
        maintenance window at the window's end; an ok one at its next deadline. A down
        heartbeat waits for a ping (its row is bumped and the engine reloads it)."""
        beat = check.heartbeat
        if not isinstance(beat, Beat):
            return None
        now = datetime.now(UTC)
        config = scaled(beat.config, judging.scale)
        state = check.state
        status = state.status
        reason = hb.verdict(beat.facts, config, now)
        if status == PENDING:
            return now if beat.facts.last_ping_at is not None else None
        if status in (FAILING, DOWN):
            muted_until, _ = judging.quiet(check.monitor_id, check.account_id, now)
            if status == DOWN and reason is not None:
                return None
            if muted_until is not None:
                return muted_until
            if status == DOWN and state.recovering_since is not None:
                return state.recovering_since + timedelta(
                    seconds=check.recovery_s * judging.scale)
            return now
        if reason is not None:
            return now
        return hb.next_decision(beat.facts, config)

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: HeartbeatOutcome,
        region: str, confirmation: bool,
    ) -> ResultRow:
        return plain_row(check_id, at, CODE, cls, None, region, confirmation, outcome.error)

    def observe(self, outcome: HeartbeatOutcome, phases: Phases) -> None:
        pass

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]:
        """Every key always present (null before the first ping); the API fills in the
        heartbeat's current facts over what the last judgment stored."""
        return every_key(check.meta, _META_KEYS)

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]:
        last = meta_text(check.meta, "last_ping_at")
        nxt = meta_text(check.meta, "next_expected_at")
        return [
            ("Last ping", f"{last} UTC" if last else "Never", False),
            ("Next expected", f"{nxt} UTC" if nxt else "Unknown", False),
            ("Last judged", last_checked(check.last_check_at), False),
        ]

    def status_fields(self, check: ShownCheck) -> dict[str, Any]:
        return every_key(check.meta, ("last_ping_at", "next_expected_at"))


__all__ = ["Beat", "HeartbeatKind", "HeartbeatReader", "beat_of_row"]
