"""``upwatch bench network``: tcp, dns and icmp monitors in one engine, each scheme's
figures apart, and the table that reads them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from engine.probes.icmp import ping_access
from upwatch_bench.harness import start_lateness
from upwatch_bench.scenarios import table
from upwatch_bench.scenarios.network import probe_span_s, row_lateness_s


def _scheme(n: int, interval: float, p99: float) -> dict[str, object]:
    return {"monitors": n, "interval_s": interval, "rows": n, "held": 0.999,
            "lateness_ms": {"p50": 3.0, "p99": p99, "max": p99 + 1}, "error_rate": 0.0}


def test_the_table_reads_each_scheme_and_the_targets() -> None:
    rec = {"scenario": "network", "monitors": {"tcp": 10000, "dns": 10000, "icmp": 1000},
           "window_s": 60.0, "schemes": {"tcp": _scheme(10000, 30, 20.0),
                                         "dns": _scheme(10000, 60, 30.0),
                                         "icmp": _scheme(1000, 30, 120.0)},
           "scheduler_lateness_ms": {"p50": 2.0, "p99": 15.0}, "cpu_s_per_probe": 0.0004,
           "cpu_utilization": 0.2, "rss_per_monitor_bytes": 800.0,
           "rss_end_per_monitor_bytes": 1500.0, "scheduled": 21000, "held": 0.999,
           "lateness_p99_ms": 120.0,
           "target_met": {"lateness": False, "memory": True, "held": True}}
    text = table(rec)
    assert "21,000 monitors at once in one engine" in text
    assert ("  dns    10,000 at 60 s: held 0.999, lateness p50/p99/max 3.0/30.0/31.0 ms,"
            " error rate 0.0") in text
    assert "resident per idle monitor: 800.0 B (21,000 checks; target <= 1024 B: met)" in text
    assert "p99 lateness 120.0 ms (target < 100 ms: MISSED)" in text


def test_a_pings_span_counts_its_requests_apart() -> None:
    assert probe_span_s("tcp", 12.0) == pytest.approx(0.012)
    assert probe_span_s("icmp", 0.1) == pytest.approx(1.0001)  # 3 requests, 500 ms apart
    assert probe_span_s("dns", None) == 0.0
    # A ping whose estimated start falls 20 ms before its slot is on time; a tcp probe's
    # start is measured, so the same reading is an interval late.
    slot = 100 * 30.0 - (start_lateness(7, 100 * 30.0, 30.0))  # check 7's slot
    at = slot - 0.020 + 1.0001
    assert row_lateness_s("icmp", 7, at, 0.1, 30.0) == 0.0
    assert row_lateness_s("tcp", 7, slot - 0.020 + 0.012, 12.0, 30.0) > 29.0
    assert row_lateness_s("icmp", 7, slot + 0.050 + 1.0001, 0.1, 30.0) == pytest.approx(0.05)


@pytest.mark.serial  # measures timing: run alone (scripts/test)
@pytest.mark.timeout(150)
@pytest.mark.skipif(not ping_access().can_ping, reason="this node can open no ICMP socket")
def test_a_quick_run_probes_every_scheme() -> None:
    external = os.environ.get("UPWATCH_TEST_DATABASE_URL")
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "bench", "network", "--quick", "--json",
         *(["--database-url", external] if external else [])],
        capture_output=True, text=True, timeout=140, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    rec = json.loads(proc.stdout.strip().splitlines()[-1])
    assert rec["monitors"] == {"tcp": 300, "dns": 300, "icmp": 30}
    assert rec["scheduled"] == 630
    for scheme, figures in rec["schemes"].items():
        assert figures["rows"] > 0, scheme
        assert figures["error_rate"] == 0.0, scheme
    assert rec["rss_per_monitor_bytes"] > 0
