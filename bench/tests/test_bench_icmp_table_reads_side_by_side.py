"""``upwatch bench icmp``'s table: every contender side by side, a missing one named."""

from __future__ import annotations

from upwatch_bench.scenarios import table


def _figures(cpu_us: float, requests: int = 1) -> dict[str, object]:
    return {"probes": 100, "requests_per_probe": requests, "cpu_s": cpu_us * 100 / 1e6,
            "cpu_us_per_probe": cpu_us, "cpu_us_per_request": cpu_us / requests,
            "wall_s": 1.0, "errors": {}}


def test_the_table_puts_the_contenders_side_by_side() -> None:
    rec = {"scenario": "icmp", "monitors": 100, "concurrency": 64,
           "upwatch": _figures(50.0), "upwatch_3": _figures(120.0, 3),
           "icmplib": {"missing": "icmplib is not installed (pip install icmplib)"},
           "blackbox_exporter": {**_figures(1000.0), "errors": {"probe_success 0": 2}},
           "cpu_ratio": 0.05, "target_ratio": 0.5, "target_met": True,
           "load": {"monitors": 1000, "interval_s": 30.0, "held": 0.999, "error_rate": 0.0,
                    "lateness_ms": {"p50": 2.5, "p99": 20.1, "max": 31.0},
                    "rss_per_monitor_bytes": 900.5, "target_met": True}}
    text = table(rec)
    assert "icmplib: icmplib is not installed (pip install icmplib)" in text
    per_probe = next(line for line in text.splitlines() if "CPU us per probe" in line)
    assert per_probe.split()[-4:] == ["50.0", "120.0", "-", "1000.0"]
    failed = next(line for line in text.splitlines() if "failed probes" in line)
    assert failed.split()[-4:] == ["0", "0", "0", "2"]
    assert "CPU ratio upwatch / blackbox_exporter: 0.05 (target <= 0.5: met)" in text
    assert ("engine, 1,000 icmp:// monitors at 30 s: held 0.999, errors 0.0, lateness "
            "p50/p99/max 2.5/20.1/31.0 ms, 900.5 B per monitor (p99 < 100 ms: met)") in text
