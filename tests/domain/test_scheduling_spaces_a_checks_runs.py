"""A check's runs are at least half an interval apart, and a run in its phase is followed by
the next phase: a monitor started soon (new, re-enabled, imported with thousands of others)
is not probed again by its phase a moment later. Pure: no database, no clock."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from engine.scheduler.wheel import first_due, next_due, phase_fraction

ids = st.integers(min_value=1, max_value=10**9)
intervals = st.sampled_from([0.5, 1.0, 30.0, 60.0, 300.0, 3600.0])
times = st.floats(min_value=1e6, max_value=2e9, allow_nan=False)


def _in_phase(check_id: int, interval: float, t: float) -> bool:
    offset = phase_fraction(check_id) * interval
    k = (t - offset) / interval
    return math.isclose(k, round(k), abs_tol=1e-6)


@given(ids, intervals, times, st.floats(min_value=0, max_value=3, allow_nan=False))
def test_after_a_soon_run_the_next_is_in_phase_and_half_an_interval_later(
    check_id: int, interval: float, started: float, waited: float
) -> None:
    now = started + waited * interval  # the run ended this much later
    due = next_due(check_id, interval, now, started)
    assert due > now
    assert due >= started + interval / 2
    assert _in_phase(check_id, interval, due)
    assert due < max(now, started + interval / 2) + interval + 1e-6


@given(ids, intervals, times, st.floats(min_value=0, max_value=0.99, allow_nan=False))
def test_a_run_in_phase_is_followed_by_the_next_phase_however_late_it_ended(
    check_id: int, interval: float, t: float, took: float
) -> None:
    phase = first_due(check_id, interval, t)
    now = phase + took * interval
    due = next_due(check_id, interval, now, phase)
    assert math.isclose(due, phase + interval, rel_tol=0, abs_tol=1e-6)


def test_the_burst_of_a_bulk_start_is_not_doubled() -> None:
    # 6,000 checks of 60 s found pending at once, started soon at 1,000/s (the runner's
    # SOON_RATE): with the phase alone each had its phase probe within the same minute as
    # well; now no check runs twice within 30 s.
    interval, t0 = 60.0, 1_000_000.0
    for check_id in range(1, 6001):
        soon = t0 + check_id / 1000.0
        nxt = next_due(check_id, interval, soon + 0.2, soon)
        assert nxt - soon >= interval / 2
    doubled = sum(
        1 for check_id in range(1, 6001)
        if first_due(check_id, interval, t0 + check_id / 1000.0 + 0.2)
        - (t0 + check_id / 1000.0) < interval / 2
    )
    assert doubled > 2000  # what the phase alone gave: about half of them
