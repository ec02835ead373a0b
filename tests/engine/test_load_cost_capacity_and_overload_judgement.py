"""The node's load judgement (engine/scheduler/load.py), second by second: the cost per probe
by kind it learns from CPU and finished probes, the share of its core the engine takes as
the loop lags, and the overloaded flag that turns on and off once each way."""

from __future__ import annotations

import random

import pytest

from engine.scheduler.load import (
    API_KINDS,
    API_READS,
    API_WRITES,
    GROW,
    MAX_DISCOUNT,
    MAX_SHARE,
    MIN_CORE,
    MIN_SHARE,
    OFF_AFTER,
    ON_AFTER,
    SHRINK,
    CostModel,
    Figures,
    OverloadJudge,
    Share,
    capacity,
    core_available,
    overcharge,
)


def test_one_kind_learns_its_cpu_per_probe() -> None:
    model = CostModel(["uptime"])
    for _ in range(30):
        model.learn(0.5, {"uptime": 5000})  # 100 us a probe
    assert model.costs["uptime"] == pytest.approx(100e-6, rel=0.01)


def test_two_kinds_are_told_apart_by_seconds_of_different_mixes() -> None:
    model = CostModel(["uptime", "certificate_health"])
    rng = random.Random(7)
    for _ in range(400):
        up, cert = rng.randint(500, 3000), rng.randint(10, 200)
        model.learn(up * 80e-6 + cert * 1.5e-3, {"uptime": up, "certificate_health": cert})
    assert model.costs["uptime"] == pytest.approx(80e-6, rel=0.05)
    assert model.costs["certificate_health"] == pytest.approx(1.5e-3, rel=0.05)


def test_a_quiet_second_teaches_nothing() -> None:
    model = CostModel(["uptime"])
    before = dict(model.costs)
    model.learn(0.3, {"uptime": 3})  # idle overhead over three probes is no probe's cost
    assert model.costs == before


def test_capacity_is_the_share_over_the_cost_of_the_asked_mix() -> None:
    model = CostModel(["uptime", "certificate_health"])
    model.costs.update(uptime=100e-6, certificate_health=1e-3)
    mean = model.mean_cost({"uptime": 900.0, "certificate_health": 100.0})
    assert mean == pytest.approx(190e-6)
    assert capacity(0.9, mean) == pytest.approx(0.9 / 190e-6)


def test_the_engine_share_shrinks_while_the_loop_lags_and_grows_back() -> None:
    share = Share()
    assert share.value == MAX_SHARE
    for _ in range(50):
        share.step(0.2, held=True)
    assert share.value == MIN_SHARE  # never below: every check is still probed
    for _ in range(50):
        share.step(0.001, held=True)
    assert share.value == MAX_SHARE


def test_after_a_burst_the_share_is_back_in_seconds_then_probes_slowly() -> None:
    share = Share()
    for _ in range(3):
        share.step(0.001, held=True)
    steady = share.value  # 0.9
    for _ in range(10):  # a burst of API work: the loop lags for 10 s
        share.step(0.1, held=True)
    assert share.value == MIN_SHARE
    assert share.ceiling == pytest.approx(steady * SHRINK)
    seconds = 0
    while share.value < share.ceiling:
        share.step(0.01, held=True)  # a lag between the bounds does not stop the recovery
        seconds += 1
    assert seconds <= 4  # GROW alone: 11 s from 0.2 to 0.72
    share.step(0.01, held=True)
    assert share.value == pytest.approx(steady * SHRINK)  # at the ceiling such a lag holds it
    share.step(0.001, held=True)
    assert share.value == pytest.approx(steady * SHRINK + GROW)  # and a calm second probes


def test_a_core_that_stays_contended_lowers_the_ceiling() -> None:
    share = Share()
    ceilings = []
    for _ in range(4):  # each time the share comes back, the loop lags again
        for _ in range(3):
            share.step(0.1, held=True)
        ceilings.append(share.ceiling)
        while share.value < share.ceiling:
            share.step(0.001, held=True)
    assert ceilings == sorted(ceilings, reverse=True) and ceilings[-1] < ceilings[0]
    assert share.ceiling == pytest.approx(MAX_SHARE * SHRINK ** 4)


def test_a_lag_while_nothing_waits_is_not_the_engines_doing() -> None:
    share = Share()
    for _ in range(10):
        share.step(0.2, held=False)  # a slow API request, say: the budget was not in use
    assert share.value == MAX_SHARE


def test_overloaded_turns_on_and_off_once_each_way_not_every_second() -> None:
    judge = OverloadJudge()
    busy, calm = Figures(2000.0, 900.0, 1000.0), Figures(400.0, 400.0, 1000.0)
    changes = []
    timeline = [0.2] * 4 + [1.0] * (ON_AFTER + 20) + [0.9, 0.0, 1.0] * 3 + [0.0] * (OFF_AFTER + 5)
    for held in timeline:
        change = judge.step(held, busy if held >= 0.5 else calm)
        if change is not None:
            changes.append(change)
    assert [c.overloaded for c in changes] == [True, False]
    assert changes[0].figures.ratio == pytest.approx(2.0)
    assert changes[1].figures.ratio == pytest.approx(0.4)
    assert not judge.overloaded


def test_asking_more_than_the_capacity_is_an_overload_even_with_nothing_waiting() -> None:
    judge = OverloadJudge()
    over = Figures(3000.0, 1000.0, 1000.0)  # every check in flight, each probe slow
    changes = [judge.step(0.0, over) for _ in range(ON_AFTER)]
    assert changes[-1] is not None and changes[-1].overloaded
    near = Figures(980.0, 900.0, 1000.0)  # under 1 but not under RATIO_OFF, still behind
    assert all(judge.step(0.0, near) is None for _ in range(3 * OFF_AFTER))
    assert judge.overloaded


def test_the_estimate_alone_never_says_overloaded_while_every_probe_is_done() -> None:
    # A cost model thrown off (a burst of API work read as dearer probes) says the node can
    # hold 400/s; it does the 500/s asked, nothing waits: it is not over its capacity.
    judge = OverloadJudge()
    estimate_off = Figures(500.0, 505.0, 400.0)
    assert all(judge.step(0.0, estimate_off) is None for _ in range(3 * ON_AFTER))
    assert not judge.overloaded
    # Over it (checks wait), then back doing all that is asked with nothing waiting: off,
    # though the estimate still reads over 1.
    changes = [judge.step(1.0, Figures(2000.0, 900.0, 1000.0)) for _ in range(ON_AFTER)]
    assert changes[-1] is not None and changes[-1].overloaded
    changes = [judge.step(0.0, estimate_off) for _ in range(OFF_AFTER)]
    assert changes[-1] is not None and not changes[-1].overloaded


def test_a_short_burst_is_not_an_overload() -> None:
    judge = OverloadJudge()
    calm = Figures(100.0, 100.0, 1000.0)
    for held in [1.0] * (ON_AFTER - 1) + [0.0] + [1.0] * (ON_AFTER - 1) + [0.0]:
        assert judge.step(held, calm) is None
    assert not judge.overloaded


def test_the_apis_cpu_on_the_loop_is_not_read_as_a_dearer_probe() -> None:
    # The engine admits what its capacity says, the API answers 40-120 requests a second
    # on the same loop: the capacity settles at the share over the probe's own cost. Read
    # as probe cost, the API's 0.12 s a second would take 120 of the 200 probes a second.
    model = CostModel(["uptime", *API_KINDS])
    rng = random.Random(3)
    share, probe_s, request_s = 0.2, 1e-3, 1.5e-3
    for _ in range(120):
        probes = round(capacity(share, model.mean_cost({"uptime": 1.0})) * rng.uniform(0.8, 1.0))
        requests = rng.randint(40, 120)
        model.learn(probes * probe_s + requests * request_s,
                    {"uptime": probes, API_READS: requests})
    assert model.costs["uptime"] == pytest.approx(probe_s, rel=0.15)
    assert capacity(share, model.mean_cost({"uptime": 1.0})) == pytest.approx(200, rel=0.15)


@pytest.mark.parametrize("split", [True, False], ids=["writes apart", "one api figure"])
def test_a_burst_of_creates_does_not_change_what_a_probe_costs(split: bool) -> None:
    # A minute of probes and reads, then 10 s of creates, each as dear as a few reads (what
    # `upwatch bench overload` saw: POSTs at ~300/s beside GETs). Counted apart, the creates
    # learn their own cost and the probe's stays; counted as reads, the one API figure
    # cannot fit both and the probe's cost is thrown off: what the split is for.
    model = CostModel(["uptime", *API_KINDS])
    rng = random.Random(5)
    probe_s, read_s, write_s = 0.8e-3, 1.2e-3, 3e-3
    for t in range(80):
        probes, reads = rng.gauss(450, 20), rng.gauss(380, 30)
        writes = rng.gauss(300, 20) if 60 <= t < 70 else 0.0
        cpu = 0.03 + probes * probe_s + reads * read_s + writes * write_s + rng.gauss(0, 0.01)
        work = {"uptime": round(probes), API_READS: round(reads + (0 if split else writes))}
        if split:
            work[API_WRITES] = round(writes)
        model.learn(cpu, work)
        if t >= 60:
            off = abs(model.costs["uptime"] / probe_s - 1)
            if split:
                assert off < 0.2, (t, model.costs)
    assert split or off > 0.5


def _closed_loop(quiet_first: int, seconds: int) -> list[float]:
    """Probes started each second by a node asked for 440/s (0.85 ms each, on the share
    at the cost it learned), after ``quiet_first`` seconds with no API, then beside an API
    client that asks again as soon as it is answered (0.9 ms a read), so the loop's CPU is
    always 0.97: as many reads as the probes leave room for. Then the learned cost is
    thrown to 5 ms (what a drift came to): each second fits that (fewer probes, dearer;
    more reads, cheaper) as well as it fits the truth, so nothing the full fit learns
    moves it back."""
    model = CostModel(["uptime", *API_KINDS])
    share, started_each = Share(), []
    for t in range(seconds):
        if t == quiet_first:
            model.costs.update({"uptime": 5e-3, API_READS: 10e-6})
        started = min(440.0, capacity(share.value, model.costs["uptime"]))
        reads = (0.97 - started * 0.85e-3) / 0.9e-3 if t >= quiet_first else 0.0
        cpu = 0.97 if t >= quiet_first else 0.02 + started * 0.85e-3
        model.learn(cpu, {"uptime": round(started), API_READS: round(reads)})
        share.step(0.002, started < 440)
        started_each.append(started)
    return started_each


def test_a_steady_api_cannot_talk_the_budget_into_holding_probes_back() -> None:
    # With quiet seconds behind it, the fit is bounded by what a probe cost then: every
    # probe asked is started at once. Without any (the API busy since the start), the trap
    # holds: what the bound is for.
    assert all(n == 440 for n in _closed_loop(20, 80)[21:])
    assert all(n < 200 for n in _closed_loop(0, 80)[1:])


def test_the_quiet_bound_leaves_a_fit_of_quiet_seconds_alone() -> None:
    # Every second quiet (no API): the bound is the fit itself, so kinds are told apart
    # as before, and an API busy for a while later does not undo them.
    model = CostModel(["uptime", "certificate_health", *API_KINDS])
    rng = random.Random(11)
    for t in range(400):
        up, cert = rng.randint(500, 3000), rng.randint(10, 200)
        reads = rng.randint(100, 300) if t >= 300 else 0
        model.learn(up * 80e-6 + cert * 1.5e-3 + reads * 1e-3,
                    {"uptime": up, "certificate_health": cert, API_READS: reads})
    assert model.costs["uptime"] == pytest.approx(80e-6, rel=0.1)
    assert model.costs["certificate_health"] == pytest.approx(1.5e-3, rel=0.1)


def _after_a_start(discounting: bool, seconds: int) -> list[float]:
    """Probes started each second by a node asked for 440/s (0.85 ms each, on the budget
    at the cost it learned) whose first 10 s were its start: 0.6 s a second of other work
    and a first round of full handshakes (2.05 ms a probe). The learned cost carries that
    long after: the fit has been sure of it for 10 s."""
    model, share, started_each = CostModel(["uptime", *API_KINDS]), 0.9, []
    for t in range(seconds):
        started = min(440.0, capacity(share, model.costs["uptime"]))
        short = 1.0 if started < 440 else 0.0
        cpu = 0.6 + started * 2.05e-3 if t < 10 else 0.02 + started * 0.85e-3
        model.learn(cpu, {"uptime": round(started)})
        factor = overcharge(cpu, share, short)
        if discounting and factor is not None:
            model.discount(factor)
        started_each.append(started)
    return started_each


def test_a_cost_kept_dear_by_a_past_second_is_taken_down_by_the_cpu_the_budget_bought() -> None:
    assert all(n == 440 for n in _after_a_start(True, 40)[12:])
    assert any(n < 300 for n in _after_a_start(False, 40)[12:])  # what it gets out of


def test_only_a_budget_bound_second_short_of_its_cpu_is_overcharged() -> None:
    assert overcharge(0.45, 0.9, 1.0) == pytest.approx(0.5)
    assert overcharge(0.2, 0.9, 1.0) == MAX_DISCOUNT  # a step at a time
    assert overcharge(0.88, 0.9, 1.0) is None  # the CPU the budget bought: right
    assert overcharge(1.0, 0.9, 1.0) is None  # more (the API's too): not too dear
    assert overcharge(0.3, 0.9, 0.0) is None  # not bound by the budget (or max_in_flight)
    model = CostModel(["uptime", *API_KINDS])
    before = dict(model.costs)
    model.discount(0.5)
    assert model.costs["uptime"] == pytest.approx(before["uptime"] * 0.5)
    assert all(model.costs[k] == before[k] for k in API_KINDS)  # the API's own stay


def test_the_share_is_of_the_core_the_node_gets() -> None:
    # On time: a whole core, however little the thread ran (it had nothing to do).
    assert core_available(0.05, 0.004) == 1.0
    # Late sweeps while the thread ran 0.3 s a second: it waited for a core it shares.
    assert core_available(0.3, 0.08) == pytest.approx(0.3)
    assert core_available(1.2, 0.08) == 1.0
    assert core_available(0.01, 0.5) == MIN_CORE  # never nothing: every check still probed


def test_where_the_kernel_says_how_long_the_thread_waited_the_core_is_the_rest() -> None:
    # A late sweep with the thread idle part of the second: a burst of its own work, not a
    # shared core, when the kernel says the thread never waited for one.
    assert core_available(0.6, 0.08, waited_per_s=0.0) == 1.0
    assert core_available(0.5, 0.08, waited_per_s=0.5) == pytest.approx(0.5)
    # On time, a whole core, whatever the waits: the loop is not short of one.
    assert core_available(0.9, 0.001, waited_per_s=0.3) == 1.0
    assert core_available(0.01, 0.5, waited_per_s=0.99) == MIN_CORE
