"""``upwatch bench http --names``: names against IP literals like with like.

By IP literal the bench's 10,000 monitors share 100 addresses, by name each is a host of its
own, so at the default per-host limit the literals ran 800 probes at once and the names
1,000; the pairs now run with the same cap (800) both ways, in turning order, and under
callgrind count instructions per answered probe only.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest

from engine.runtime.settings import Settings
from upwatch_bench import layout
from upwatch_bench.harness import capacity_window
from upwatch_bench.options import BenchError, Options
from upwatch_bench.roles.engine_run import answered
from upwatch_bench.scenarios.names import like_for_like, pair_orders


def _args(**kw: object) -> argparse.Namespace:
    base: dict[str, object] = {"scenario": "http", "monitors": 10_000, "duration": 10.0,
                               "quick": False, "json": True, "names": True}
    base.update(kw)
    return argparse.Namespace(**base)


def test_both_sides_of_a_pair_run_the_same_probes_at_once() -> None:
    """The cap is what the literals' 100 addresses allow at the per-host limit: names (a
    host each) reach it as literals do."""
    settings = Settings(**like_for_like())
    assert settings.max_in_flight == settings.per_host_limit * len(layout.HEALTHY_HOSTS)
    assert settings.max_in_flight < Settings().max_in_flight  # names ran more before


def test_pairs_take_turns_at_going_first() -> None:
    assert pair_orders(4) == [["literals", "names"], ["names", "literals"],
                               ["literals", "names"], ["names", "literals"]]


def test_instructions_are_counted_per_answered_probe() -> None:
    probes = {"uptime,ok": 90.0, "uptime,degraded": 4.0, "uptime,failure": 6.0,
              "certificate_health,ok": 1.0}
    assert answered(probes) == 95.0


def test_names_cost_needs_names_and_a_sane_rate() -> None:
    opts = Options.from_args(_args(names_cost=3, rate=100.0, probe_timeout=30.0))
    assert (opts.names_cost, opts.rate, opts.probe_timeout) == (3, 100.0, 30.0)
    with pytest.raises(BenchError, match="--names-cost needs --names"):
        Options.from_args(_args(names=False, names_cost=2))
    with pytest.raises(BenchError, match="--names-cost"):
        Options.from_args(_args(names_cost=0))
    with pytest.raises(BenchError, match="--rate"):
        Options.from_args(_args(rate=0.0))
    with pytest.raises(BenchError, match="--probe-timeout"):
        Options.from_args(_args(probe_timeout=-1.0))


def test_a_rate_below_the_monitors_at_30_s_stretches_the_interval() -> None:
    """Under callgrind the engine runs ~20x slower: ``--rate 100`` asks 100 probes a second
    of 10,000 monitors, an interval of 100 s (time scale above 1), not a capped 30 s."""

    class B:
        opts = Options.from_args(_args(rate=100.0))

    w = capacity_window(B(), "x", 30_000.0)  # type: ignore[arg-type]
    assert w.interval == pytest.approx(100.0)
    w = capacity_window(type("B", (), {"opts": Options.from_args(_args())})(), "x", 30_000.0)
    assert w.interval == pytest.approx(10_000 / 30_000)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
@pytest.mark.timeout(150)
def test_names_cost_reports_every_pair_in_one_line() -> None:
    external = os.environ.get("UPWATCH_TEST_DATABASE_URL")
    proc = subprocess.run(
        [sys.executable, "-m", "upwatch_bench", "http", "--names", "--names-cost", "2",
         "--monitors", "300", "--quick", "--json",
         *(["--database-url", external] if external else [])],
        capture_output=True, text=True, timeout=140, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    rec = json.loads(lines[0])
    assert rec["mode"] == "names_cost"
    assert rec["settings"] == like_for_like()
    assert [p["order"] for p in rec["pairs"]] == pair_orders(2)
    for pair in rec["pairs"]:
        names, literals = pair["names"], pair["literals"]
        assert names["error_rate"] == literals["error_rate"] == 0.0
        assert names["in_flight_mean"] is not None and literals["in_flight_mean"] is not None
        assert names["dns_queries"] == 0  # every name cached before the window
        assert pair["cpu_ratio"] == pytest.approx(
            literals["probes_per_cpu_s"] / names["probes_per_cpu_s"], rel=0.01)
    assert rec["names_cost_vs_literals_pairs"] == [p["cpu_ratio"] for p in rec["pairs"]]
    assert len(rec["loadavg_start"]) == 3 and len(rec["loadavg_end"]) == 3
