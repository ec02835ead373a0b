"""``upwatch bench internet`` holds the HTTPS probe to ``openssl s_time`` measured in rounds
right before and right after the engine's HTTPS-only window (upwatch_bench/bracket.py): each
figure is the median over rounds of the round's mean over the server kinds, so one round
taken while the machine was slower does not move it; every round, each side's median and
the engine window's slices stay in the record. Pure functions: no tool runs here."""

from __future__ import annotations

from typing import Any

import pytest

from upwatch_bench import bracket
from upwatch_bench.scenarios.internet_stime import S_TIME_MEANS, s_time_by_kind, s_time_figures
from upwatch_bench.world import SERVER_KINDS

TLS12 = [k for k in SERVER_KINDS if k.startswith("tls12")]


def _round(side: str, scale: float, *, missing: str | None = None) -> dict[str, Any]:
    """A round whose every figure is ``scale`` times a base cost per mode, the TLS 1.3
    kinds dearer than TLS 1.2 by 0.1 ms; bare -reuse against TLS 1.2 only, as the bench
    runs it."""
    base = {"new": 1.0e-3, "reuse": 0.3e-3, "new_www": 1.3e-3, "reuse_www": 0.7e-3}
    cpu: dict[str, dict[str, float | None]] = {}
    for mode, kinds in S_TIME_MEANS.items():
        cpu[mode] = {k: scale * (base[mode] + (1e-4 if k.startswith("tls13") else 0.0))
                     for k in kinds}
        if missing is not None and mode == "reuse_www":
            cpu[mode][missing] = None
    # A third of each figure in user time, the rest in the kernel.
    split = {part: {m: {k: None if v is None else v * share for k, v in by.items()}
                    for m, by in cpu.items()}
             for part, share in (("user_s_per_op", 1 / 3), ("sys_s_per_op", 2 / 3))}
    return {"side": side, "cpu_s_per_op": cpu, **split,
            "operations": {m: dict.fromkeys(ks, 100) for m, ks in S_TIME_MEANS.items()},
            "resumed": {m: {k: (100 if "reuse" in m else 0) for k in ks}
                        for m, ks in S_TIME_MEANS.items()}}


def test_each_figure_is_the_median_over_rounds_of_the_kinds_mean() -> None:
    # The machine slowed down across the window: 1.0, 1.1 before; 1.2, 1.3 after.
    rounds = [_round("before", 1.0), _round("before", 1.1), _round("after", 1.2),
              _round("after", 1.3)]
    figs = bracket.aggregate(rounds, S_TIME_MEANS, SERVER_KINDS)
    www = figs["reuse_www"]
    kinds_mean = 0.7e-3 + 0.5e-4  # two kinds of four are 0.1 ms dearer
    assert www["rounds"] == pytest.approx([s * kinds_mean for s in (1.0, 1.1, 1.2, 1.3)])
    assert www["median"] == pytest.approx(1.15 * kinds_mean)
    assert www["before"] == pytest.approx(1.05 * kinds_mean)
    assert www["after"] == pytest.approx(1.25 * kinds_mean)
    assert (www["min"], www["max"], www["n"]) == (
        pytest.approx(kinds_mean), pytest.approx(1.3 * kinds_mean), 4)
    assert www["spread"] == pytest.approx(0.3 / 1.15, abs=1e-4)
    assert www["by_kind"]["tls12-rsa"] == pytest.approx(1.15 * 0.7e-3)
    # Bare -reuse is the TLS 1.2 kinds' mean; TLS 1.3 has no figure (it does not resume).
    assert figs["reuse"]["median"] == pytest.approx(1.15 * 0.3e-3)
    assert figs["reuse"]["by_kind"]["tls13-ecdsa"] is None


def test_one_round_on_a_slow_moment_does_not_move_the_figure() -> None:
    steady = [_round("before", 1.0), _round("before", 1.02), _round("after", 0.98),
              _round("after", 1.0)]
    spiked = [*steady[:3], _round("after", 1.8)]
    a = bracket.aggregate(steady, S_TIME_MEANS, SERVER_KINDS)["new_www"]["median"]
    b = bracket.aggregate(spiked, S_TIME_MEANS, SERVER_KINDS)["new_www"]["median"]
    assert b == pytest.approx(a, rel=0.02)  # a mean of the four would be 20% higher


def test_a_round_missing_a_kind_is_left_out_not_averaged_over_fewer_kinds() -> None:
    rounds = [_round("before", 1.0), _round("after", 1.0, missing="tls13-rsa"),
              _round("after", 1.0)]
    www = bracket.aggregate(rounds, S_TIME_MEANS, SERVER_KINDS)["reuse_www"]
    assert www["rounds"][1] is None
    assert www["n"] == 2
    assert www["median"] == pytest.approx(0.75e-3)


def test_no_rounds_give_no_figures_and_no_ratios() -> None:
    figs = bracket.aggregate([], S_TIME_MEANS, SERVER_KINDS)
    assert figs["new"]["median"] is None and figs["new"]["spread"] is None
    rec = s_time_figures(0.8e-3, 1.0, [])
    assert rec["https_vs_s_time_reuse_www"] is None
    assert rec["https_vs_s_time_www_targets"] is None


def test_the_record_keeps_its_keys_computed_from_the_medians() -> None:
    rounds = [_round("before", 1.0), _round("before", 1.1), _round("after", 1.2),
              _round("after", 1.3)]
    https = 0.9e-3
    rec = s_time_figures(https, 0.75, rounds, [0.85e-3, 0.95e-3])
    new = 1.15 * (1.0e-3 + 0.5e-4)
    new_www, reuse_www = 1.15 * (1.3e-3 + 0.5e-4), 1.15 * (0.7e-3 + 0.5e-4)
    assert rec["https_vs_s_time_new"] == pytest.approx(https / new, abs=1e-3)
    assert rec["https_vs_s_time_reuse"] == pytest.approx(https / (1.15 * 0.3e-3), abs=1e-3)
    assert rec["https_vs_s_time_new_www"] == pytest.approx(https / new_www, abs=1e-3)
    assert rec["https_vs_s_time_reuse_www"] == pytest.approx(https / reuse_www, abs=1e-3)
    assert rec["https_vs_s_time_www_targets"] == pytest.approx(
        https / (0.25 * new_www + 0.75 * 1.2 * reuse_www), abs=1e-3)
    assert rec["s_time_new_www_cpu_s"] == pytest.approx(new_www)
    assert rec["s_time_reuse_cpu_s"]["tls12-ecdsa"] == pytest.approx(1.15 * 0.3e-3)
    assert rec["https_vs_s_time_new_by_kind"]["tls13-rsa"] == pytest.approx(
        https / (1.15 * 1.1e-3), abs=1e-3)
    # Each round's ratio, each side's, and each half of the window beside its own side.
    r = rec["https_vs_s_time_rounds"]["reuse_www"]
    assert r["rounds"] == pytest.approx(
        [https / (s * 0.75e-3) for s in (1.0, 1.1, 1.2, 1.3)], abs=1e-3)
    assert r["before"] == pytest.approx(https / (1.05 * 0.75e-3), abs=1e-3)
    assert r["after"] == pytest.approx(https / (1.25 * 0.75e-3), abs=1e-3)
    assert r["paired"] == pytest.approx(
        [0.85e-3 / (1.05 * 0.75e-3), 0.95e-3 / (1.25 * 0.75e-3)], abs=1e-3)
    assert r["spread"] == pytest.approx((r["rounds"][0] - r["rounds"][3]) / r["ratio"],
                                        abs=0.01)
    # User and kernel time apart, medians over the rounds as the whole.
    parts = rec["s_time_user_sys_s"]
    assert parts["user"]["reuse_www"] == pytest.approx(reuse_www / 3)
    assert parts["sys"]["reuse_www"] == pytest.approx(reuse_www * 2 / 3)
    totals = s_time_by_kind(rec["s_time_figures"], rounds)
    assert totals["tls13-ecdsa"]["reuse_www"]["operations"] == 400
    assert totals["tls13-ecdsa"]["reuse"] == {"cpu_s_per_op": None, "operations": 0,
                                              "resumed": 0}


def test_the_engine_window_in_slices_and_halves() -> None:
    # Cumulative readings at each quarter's end: seconds, CPU seconds, probes.
    marks = [[5.0, 3.0, 4000], [10.0, 6.2, 8000], [15.0, 9.6, 12000], [20.0, 13.0, 16000]]
    slices = bracket.slice_costs(marks)
    assert [s["probes"] for s in slices] == [4000] * 4
    assert [s["cpu_s_per_probe"] for s in slices] == pytest.approx(
        [0.75e-3, 0.8e-3, 0.85e-3, 0.85e-3])
    assert bracket.halves(slices) == pytest.approx([6.2 / 8000, 6.8 / 8000])
    assert bracket.halves(slices[:3]) == []  # an odd count has no halves
    assert bracket.spread(s["cpu_s_per_probe"] for s in slices)["spread"] == pytest.approx(
        0.1 / 0.825, abs=1e-4)


def test_the_rounds_before_wait_for_the_database_to_settle_within_a_limit() -> None:
    import asyncio

    from upwatch_bench.sampler import Sampler

    sampler = Sampler(lambda: {}, lambda: None)
    # The database used 0.5 cores, then went quiet: 0.05 cores over the last 2 s.
    for i in range(9):
        sampler.samples.append((100.0 + 0.5 * i, {}, {"database": 0.5 * min(i, 4) * 0.5
                                                      + 0.025 * max(0, i - 4)}))
    assert sampler.recent_cores("database", 2.0) == pytest.approx(0.05)
    assert sampler.recent_cores("database", 10.0) is None  # not sampled that long
    assert sampler.recent_cores("nginx", 2.0) is None
    assert asyncio.run(sampler.settle("database", 0.1, 2.0, 5.0)) == 0.0
    # Still busy: waits its limit and no more.
    assert asyncio.run(sampler.settle("database", 0.01, 2.0, 1.0)) == pytest.approx(1.0,
                                                                                   abs=0.6)
    # Not sampled at all (a database elsewhere): no wait.
    elsewhere = Sampler(lambda: {}, lambda: None)
    elsewhere.samples.append((100.0, {}, {"nginx": 1.0}))
    assert asyncio.run(elsewhere.settle("database", 0.1, 2.0, 5.0)) == 0.0


def test_under_callgrind_the_probe_is_held_to_s_time_in_instructions_over_every_kind() -> None:
    from upwatch_bench.scenarios.internet_stime import s_time_instruction_figures
    from upwatch_bench.scenarios.internet_table import table

    by_kind: dict[str, dict[str, Any] | None] = {
        k: {"instructions": 1_000_000.0 * (2 if k.startswith("tls13") else 1),
            "connections": 50, "resumed": 50} for k in SERVER_KINDS}
    figs = s_time_instruction_figures(by_kind, 1_350_000)
    assert figs["s_time_reuse_www_instructions_mean"] == 1_500_000
    assert figs["https_instructions_vs_s_time_reuse_www"] == pytest.approx(0.9)
    assert figs["s_time_reuse_www_instructions_resumed"] == [200, 200]
    bare = {"monitors": 100, "duration_s": 20.0}
    rec = {**bare, "https_only": {"instructions_per_answered_probe": 1_350_000}, **figs}
    assert "1,350,000 / 1,500,000 = 0.9000x (s_time resumed 200 of 200)" in table(rec)
    # A kind whose run failed leaves no mean (not one over fewer kinds), and no ratio.
    by_kind["tls12-rsa"] = None
    partial = s_time_instruction_figures(by_kind, 1_350_000)
    assert partial["s_time_reuse_www_instructions_mean"] is None
    assert partial["https_instructions_vs_s_time_reuse_www"] is None
    # Without callgrind the row is not there.
    assert "instructions:" not in table({**bare, "https_only": {}})
