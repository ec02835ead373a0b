"""``upwatch bench SCENARIO --quick --json`` end to end, so the command cannot rot.

Each run starts its own database (or uses ``UPWATCH_TEST_DATABASE_URL``'s server for a fresh
database), targets, engine, baseline and, when installed, ``wrk``; the test checks the
record's shape and that its figures are sane, not that targets are met (a loaded CI machine
may miss them; the figures belong in a report, not a test).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

COMMON = (
    "scenario", "monitors", "duration_s", "probes_per_s", "cpu_s_per_probe", "lateness_ms",
    "rss_per_monitor_bytes", "error_rate", "baseline_probes_per_s", "baseline_cpu_s_per_probe",
    "limit_per_s", "ratio_vs_limit", "ratio_vs_baseline", "targets",
)


def _bench(*args: str, timeout: float = 80) -> dict[str, Any]:
    external = os.environ.get("UPWATCH_TEST_DATABASE_URL")
    proc = subprocess.run(
        [sys.executable, "-m", "engine", "bench", *args, "--quick", "--json",
         *(["--database-url", external] if external else [])],
        capture_output=True, text=True, timeout=timeout, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    # The bench gives its components one key: no operator's warning of a generated one.
    assert "generated a secret key" not in proc.stderr, proc.stderr[-4000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    rec: dict[str, Any] = json.loads(lines[0])
    for key in COMMON:
        assert key in rec, key
    return rec


@pytest.mark.serial  # measures timing: run alone (scripts/test)
@pytest.mark.timeout(100)
def test_http_quick_reports_engine_baseline_and_limit() -> None:
    rec = _bench("http")
    assert rec["scenario"] == "http"
    assert rec["monitors"] == 300
    assert rec["probes_per_s"] > 0
    assert 0 < rec["cpu_s_per_probe"] < 0.05
    lat = rec["lateness_ms"]
    assert 0 <= lat["p50"] <= lat["p99"] <= lat["max"]
    assert rec["error_rate"] == 0.0  # healthy targets
    assert rec["held"] > 0.9
    assert rec["rss_per_monitor_bytes"] > 0
    assert rec["rows_per_s"] > 0
    assert rec["rows_capacity_per_s"] > 0
    assert rec["baseline_probes_per_s"] > 0
    assert rec["baseline_cpu_s_per_probe"] > 0
    assert rec["baseline_error_rate"] == 0.0
    assert rec["ratio_vs_baseline"] > 0
    assert rec["capacity"]["probes_per_s"] > 0
    # User and system CPU apart, adding up to the whole (kernel time per probe).
    assert rec["user_s_per_probe"] + rec["sys_s_per_probe"] == pytest.approx(
        rec["cpu_s_per_probe"], rel=0.01)
    assert len(rec["capacity"]["runs_sys_s_per_probe"]) == 1
    if shutil.which("wrk"):
        assert rec["limit_runs_sys_s_per_op"][0] > 0
        assert rec["limit_per_s"] > 0
        assert rec["ratio_vs_limit"] > 0
        # --quick measures one pair (engine at capacity, then wrk); the ratio is that pair's.
        assert rec["ratio_vs_limit_pairs"] == [rec["ratio_vs_limit"]]
        assert rec["limit_runs_per_cpu_s"] == [rec["limit_per_cpu_s"]]
    else:
        assert rec["limit_per_s"] is None
        assert any("wrk" in note for note in rec["notes"])
    assert {t["name"] for t in rec["targets"]} >= {"probe error rate", "scheduler lateness p99"}


@pytest.mark.serial  # measures timing: run alone (scripts/test)
@pytest.mark.timeout(100)
def test_api_quick_reports_request_rates_and_statistics_latency() -> None:
    rec = _bench("api")
    assert rec["scenario"] == "api"
    assert rec["monitors"] == 100
    assert rec["get_monitor_rps"] > 0
    assert rec["list_monitors_rps"] > 0
    stats = rec["statistics_ms"]
    assert 0 < stats["p50"] <= stats["p99"]
    timings = rec["timings_ms"]
    assert 0 < timings["p50"] <= timings["p99"]
    assert rec["history"]["phase_hours_rolled"] >= 30 * 24
    assert rec["errors"] == 0
    assert rec["history"]["result_rows"] >= 30 * 2880
    # Creates at concurrency 1, 8 and 32 with durable commits, and monitors as code.
    assert rec["create_monitor_rps"] > 0
    assert 0 < rec["create_monitor_ms"]["p50"] <= rec["create_monitor_ms"]["p99"]
    assert set(rec["create_monitor_by_concurrency"]) == {"1", "8", "32"}
    assert rec["create_monitor_durable"] in (True, None)
    assert rec["apply"]["monitors"] == 1000
    assert 0 < rec["apply"]["reapply_unchanged_s"] and 0 < rec["apply"]["apply_s"]
    assert rec["probes_per_s"] is None  # no probes in this scenario


def _cmdlines() -> dict[int, tuple[int, str]]:
    """pid -> (ppid, command line) of every process now."""
    out: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out[int(entry)] = (ppid, cmd)
    return out


@pytest.mark.serial  # measures timing: run alone (scripts/test)
@pytest.mark.timeout(100)
def test_an_interrupted_run_leaves_nothing_behind() -> None:
    import re
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "bench", "http", "--monitors", "2000"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    workdir = None
    deadline = time.monotonic() + 60
    while workdir is None and time.monotonic() < deadline and proc.poll() is None:
        for ppid, cmd in _cmdlines().values():
            m = re.search(r"upwatch_bench\.child (/\S*/upwatch-bench-[^/\s]+)/\S*engine\.json", cmd)
            if ppid == proc.pid and m:
                workdir = m.group(1)
        time.sleep(0.2)
    assert workdir is not None, "the engine child never started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted" in err
    left = [cmd for _, cmd in _cmdlines().values() if workdir in cmd]
    assert left == []
    assert not os.path.exists(workdir)
