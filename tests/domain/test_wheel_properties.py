"""The timing wheel against a plain model: every scheduled item fires exactly once, in due
order, never early; cancel removes; scheduling again replaces. Items carry their due time
(``due``, kept by the wheel), as the engine's checks do."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.scheduler.wheel import TimingWheel, first_due, phase_fraction

TICK = 0.01
SLOTS = 64  # small, so tests cover items many revolutions ahead


class Item:
    """A wheel item (hashed by identity, as a check is)."""

    __slots__ = ("due", "name")

    def __init__(self, name: Any) -> None:
        self.name = name
        self.due = 0.0

    def __repr__(self) -> str:
        return f"Item({self.name!r})"


def items(n: int = 31) -> list[Item]:
    return [Item(k) for k in range(n)]


def names(out: list[Item]) -> list[Any]:
    return [i.name for i in out]

times = st.floats(min_value=0.0, max_value=50.0, allow_nan=False, allow_infinity=False)
keys = st.integers(min_value=0, max_value=30)

# Operations: ("s", key, when) schedule, ("c", key) cancel, ("p", dt) advance time and pop.
ops = st.lists(
    st.one_of(
        st.tuples(st.just("s"), keys, times),
        st.tuples(st.just("c"), keys),
        st.tuples(st.just("p"), st.floats(min_value=0.0, max_value=3.0, allow_nan=False)),
    ),
    max_size=120,
)


@settings(max_examples=400, deadline=None)
@given(ops)
def test_matches_a_model_of_due_times(program: list[tuple]) -> None:
    wheel: TimingWheel[Item] = TimingWheel(tick=TICK, slots=SLOTS)
    item = items()
    model: dict[int, float] = {}
    now = 0.0
    fired: Counter[int] = Counter()
    for op in program:
        if op[0] == "s":
            _, key, when = op
            wheel.schedule(item[key], when)
            model[key] = when
            assert item[key].due == when
        elif op[0] == "c":
            _, key = op
            assert wheel.cancel(item[key]) == (key in model)
            model.pop(key, None)
        else:
            now += op[1]
            out = names(wheel.pop_due(now))
            expected = sorted((w, k) for k, w in model.items() if w <= now)
            # Never early, nothing due left behind, and in due order.
            assert all(model[k] <= now for k in out)
            assert sorted(out) == sorted(k for _, k in expected)
            dues = [model[k] for k in out]
            assert dues == sorted(dues)
            for k in out:
                fired[k] += 1
                del model[k]
        assert len(wheel) == len(model)
        assert all((item[k] in wheel) == (k in model) for k in range(31))
        assert all(wheel.due_time(item[k]) == model.get(k) for k in range(31))
        assert sorted(i.name for i in wheel) == sorted(model)
    # Drain: whatever is left fires exactly once, later.
    out = names(wheel.pop_due(now + 1e6))
    assert sorted(out) == sorted(model)
    assert len(wheel) == 0
    assert wheel.pop_due(now + 2e6) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(times, min_size=1, max_size=200), st.floats(min_value=0.001, max_value=0.5))
def test_each_item_fires_once_in_order_with_steady_ticks(whens: list[float], step: float) -> None:
    wheel: TimingWheel[Item] = TimingWheel(tick=TICK, slots=SLOTS)
    item = items(len(whens))
    for i, w in enumerate(whens):
        wheel.schedule(item[i], w)
    seen: list[int] = []
    now = 0.0
    while len(wheel):
        now += step
        for k in names(wheel.pop_due(now)):
            assert whens[k] <= now
            # Not late by more than one step of the caller's clock.
            assert now - whens[k] <= step + 1e-9
            seen.append(k)
    assert sorted(seen) == list(range(len(whens)))
    assert [whens[k] for k in seen] == sorted(whens)


def test_reschedule_replaces_and_cancel_is_idempotent() -> None:
    wheel: TimingWheel[Item] = TimingWheel(tick=TICK, slots=SLOTS)
    a, b = Item("a"), Item("b")
    wheel.schedule(a, 1.0)
    wheel.schedule(a, 5.0)
    assert len(wheel) == 1 and wheel.due_time(a) == 5.0 and a.due == 5.0
    assert wheel.pop_due(4.99) == []
    assert wheel.pop_due(5.0) == [a]
    assert wheel.due_time(a) is None and a not in wheel
    wheel.schedule(b, 1.0)
    assert wheel.cancel(b) is True
    assert wheel.cancel(b) is False
    assert wheel.pop_due(100.0) == []


def test_items_scheduled_in_the_past_fire_on_the_next_pop() -> None:
    wheel: TimingWheel[Item] = TimingWheel(tick=TICK, slots=SLOTS)
    assert wheel.pop_due(10.0) == []
    one, two, three = Item(1), Item(2), Item(3)
    wheel.schedule(one, 3.0)
    wheel.schedule(two, 2.0)
    wheel.schedule(three, 1.0)
    # Waiting in the cursor's bucket, not their due tick's: still found, moved, cancelled.
    assert three in wheel and wheel.due_time(three) == 1.0
    wheel.schedule(two, 2.5)
    wheel.schedule(one, 9.0)  # in the past still
    assert wheel.cancel(three) is True and three not in wheel and len(wheel) == 2
    assert wheel.pop_due(10.0) == [two, one]
    assert len(wheel) == 0


def test_ties_keep_scheduling_order() -> None:
    wheel: TimingWheel[Item] = TimingWheel(tick=TICK, slots=SLOTS)
    item = items(10)
    for k in (5, 3, 9):
        wheel.schedule(item[k], 1.0)
    assert names(wheel.pop_due(1.0)) == [5, 3, 9]


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        TimingWheel(tick=0)
    with pytest.raises(ValueError):
        TimingWheel(slots=100)
    with pytest.raises(ValueError):
        first_due(1, 0, 0.0)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(min_value=1, max_value=2**40),
    st.sampled_from([0.3, 30.0, 60.0, 86400.0]),
    st.floats(min_value=0.0, max_value=2e9, allow_nan=False),
)
def test_first_due_is_stable_phase_after_now(check_id: int, interval: float, now: float) -> None:
    due = first_due(check_id, interval, now)
    assert now < due <= now + interval * (1 + 1e-9)
    # The same check lands on the same phase whatever "now" is.
    phase = phase_fraction(check_id) * interval
    k = (due - phase) / interval
    assert math.isclose(k, round(k), abs_tol=1e-6 * max(1.0, abs(k)))
    later = first_due(check_id, interval, due)
    assert math.isclose(later - due, interval, rel_tol=1e-9, abs_tol=1e-6)


def test_ten_thousand_checks_spread_evenly_over_the_interval() -> None:
    """Consecutive ids (as a sequence hands them out) fill every 100 ms of a 30 s interval
    about equally: no burst."""
    interval, now = 30.0, 1_700_000_000.0
    buckets = Counter(
        int(((first_due(i, interval, now) - now) % interval) / 0.1) for i in range(1, 10_001)
    )
    assert len(buckets) == 300
    expected = 10_000 / 300
    assert max(buckets.values()) <= expected * 1.5
    assert min(buckets.values()) >= expected * 0.5
