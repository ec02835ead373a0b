"""Heartbeats judged as pure functions: each down reason in words, runs keyed by rid,
recovery on the next good ping, and cron schedules across a daylight-saving change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain.heartbeat import (
    FAIL,
    LOG,
    START,
    SUCCESS,
    Config,
    Facts,
    Ping,
    apply_ping,
    duration_words,
    next_decision,
    next_expected,
    schedule_error,
    verdict,
    zone_error,
)

T0 = datetime(2026, 11, 27, 3, 0, tzinfo=UTC)
HOURLY = Config(period_s=3600, grace_s=600)


def _fold(config: Config, *pings: Ping) -> tuple[Facts, list[str | None]]:
    facts, reasons = Facts(), []
    for p in pings:
        facts, reason = apply_ping(facts, p, config)
        reasons.append(reason)
    return facts, reasons


def test_a_heartbeat_never_pinged_waits_and_is_not_down() -> None:
    assert verdict(Facts(), HOURLY, T0 + timedelta(days=3)) is None
    assert next_decision(Facts(), HOURLY) is None


def test_no_ping_by_expected_plus_grace_is_down_in_words() -> None:
    daily = Config(schedule="0 3 * * *", time_zone="UTC", grace_s=3600)
    facts, _ = _fold(daily, Ping(SUCCESS, T0))
    deadline = datetime(2026, 11, 28, 4, 0, tzinfo=UTC)
    assert next_decision(facts, daily) == deadline
    assert verdict(facts, daily, deadline - timedelta(seconds=1)) is None
    assert verdict(facts, daily, deadline) == (
        "no ping since 2026-11-27 03:00 UTC, expected by 04:00 UTC (grace 1 h)")


def test_a_run_past_max_runtime_is_down_even_while_other_runs_succeed() -> None:
    config = Config(period_s=3600, grace_s=3600, max_runtime_s=7200)
    start = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
    facts, reasons = _fold(
        config,
        Ping(START, start, rid="a"),
        Ping(START, start + timedelta(minutes=10), rid="b"),
        Ping(SUCCESS, start + timedelta(minutes=20), rid="b"),
        Ping(SUCCESS, start + timedelta(minutes=80)),
    )
    assert reasons == [None, None, None, None]
    assert facts.last_duration_s == 600.0  # run b, timed apart from run a
    assert next_decision(facts, config) == start + timedelta(hours=2)
    at = start + timedelta(hours=2)
    assert verdict(facts, config, at - timedelta(seconds=1)) is None
    assert verdict(facts, config, at) == (
        "run started 02:00 UTC still running after 2 h (max_runtime)")
    # Its finish ends it.
    done, _ = apply_ping(facts, Ping(SUCCESS, at + timedelta(minutes=1), rid="a"), config)
    assert verdict(done, config, at + timedelta(minutes=1)) is None


def test_max_runtime_defaults_to_the_grace() -> None:
    facts, _ = _fold(HOURLY, Ping(START, T0))
    assert verdict(facts, HOURLY, T0 + timedelta(seconds=600)) == (
        "run started 03:00 UTC still running after 10 min (max_runtime)")


def test_fail_ping_and_non_zero_exit_status_are_down_and_the_next_good_ping_recovers() -> None:
    facts, reasons = _fold(HOURLY, Ping(SUCCESS, T0), Ping(FAIL, T0 + timedelta(minutes=1),
                                                         exit_status=2))
    assert reasons[1] == "exit status 2"
    assert verdict(facts, HOURLY, T0 + timedelta(minutes=2)) == "exit status 2"
    facts, reason = apply_ping(facts, Ping(FAIL, T0 + timedelta(minutes=3)), HOURLY)
    assert reason == "the job reported a failure"
    facts, reason = apply_ping(facts, Ping(SUCCESS, T0 + timedelta(minutes=4)), HOURLY)
    assert reason is None
    assert verdict(facts, HOURLY, T0 + timedelta(minutes=5)) is None


def test_kuma_down_message_is_the_reason() -> None:
    _, [reason] = _fold(HOURLY, Ping(FAIL, T0, reason="disk full"))
    assert reason == "disk full"


def test_a_run_faster_than_min_runtime_is_a_failure() -> None:
    config = Config(period_s=86400, grace_s=3600, min_runtime_s=60)
    _, reasons = _fold(config, Ping(START, T0, rid="r"),
                       Ping(SUCCESS, T0 + timedelta(seconds=2), rid="r"))
    assert reasons[1] == "finished in 2 s, expected at least 60 s"


def test_pings_closer_than_min_interval_are_a_failure() -> None:
    config = Config(period_s=3600, grace_s=600, min_interval_s=1800)
    _, reasons = _fold(config, Ping(SUCCESS, T0), Ping(SUCCESS, T0 + timedelta(seconds=10)))
    assert reasons[1] == "pinged 10 s after the previous success, expected at least 30 min apart"


def test_a_failed_body_assertion_is_the_reason() -> None:
    _, [reason] = _fold(HOURLY, Ping(SUCCESS, T0, assertion_error="$.errors is 3, expected 0"))
    assert reason == "$.errors is 3, expected 0"


def test_log_pings_change_nothing_but_the_last_ping() -> None:
    facts, _ = _fold(HOURLY, Ping(SUCCESS, T0), Ping(LOG, T0 + timedelta(minutes=5)))
    assert facts.last_success_at == T0
    assert facts.last_ping_at == T0 + timedelta(minutes=5)


def test_cron_in_a_zone_is_expected_at_local_time_across_the_dst_change() -> None:
    # Europe/Berlin leaves summer time on 2026-10-25 at 03:00 CEST -> 02:00 CET.
    nightly = Config(schedule="30 2 * * *", time_zone="Europe/Berlin", grace_s=600)
    before = datetime(2026, 10, 24, 0, 30, tzinfo=UTC)  # 02:30 CEST
    assert next_expected(nightly, before) == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    # The next night is on CET: 02:30 local is 01:30 UTC.
    after = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert next_expected(nightly, after) == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    # Spring: 2026-03-29 02:30 does not exist in Berlin; cron runs it at 03:00 CEST.
    spring = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)
    assert next_expected(nightly, spring) == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_bad_expressions_and_zones_are_told_apart() -> None:
    assert schedule_error("0 3 * * *") is None
    assert schedule_error("0 3 * *") is not None
    assert schedule_error("61 3 * * *") is not None
    assert zone_error("Europe/Berlin") is None
    assert zone_error("Mars/Olympus") == "unknown time zone: Mars/Olympus"


def test_durations_in_words() -> None:
    assert [duration_words(s) for s in (2, 60, 119, 600, 3600, 5400, 7200, 86400)] == [
        "2 s", "60 s", "119 s", "10 min", "1 h", "1 h 30 min", "2 h", "1 d"]
