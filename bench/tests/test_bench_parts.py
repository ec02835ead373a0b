"""The bench's pure parts: tool output parsing, percentiles, phase lateness, URL layout,
profile summaries and the report. (The whole command runs in test_bench_quick.py.)"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from engine.scheduler.wheel import first_due
from upwatch_bench import layout, report
from upwatch_bench.harness import start_lateness
from upwatch_bench.limits import parse_s_time, parse_wrk
from upwatch_bench.stats import clean, percentile, ratio, summary_ms
from upwatch_bench.tracers import callgrind
from upwatch_bench.tracers.pyspy import top_lines

WRK_OUTPUT = """Running 10s test @ http://127.0.1.1:40001/
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     3.18ms    1.02ms  20.11ms   83.40%
    Req/Sec    15.72k     1.01k   17.43k    70.00%
  Latency Distribution
     50%    3.01ms
     75%    3.47ms
     90%    4.20ms
     99%  812.00us
  156419 requests in 10.00s, 15.22MB read
  Socket errors: connect 0, read 3, write 0, timeout 1
  Non-2xx or 3xx responses: 2
Requests/sec:  15640.39
Transfer/sec:      1.52MB
"""

S_TIME_OUTPUT = """Collecting connection statistics for 10 seconds
tttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttttt

8123 connections in 5.41s; 1501.48 connections/user sec, bytes read 0
8123 connections in 11 real seconds, 0 bytes read per connection
"""


def test_wrk_report_is_parsed() -> None:
    parsed = parse_wrk(WRK_OUTPUT)
    assert parsed["requests"] == 156419
    assert parsed["seconds"] == pytest.approx(10.0)
    assert parsed["errors"] == 3 + 1 + 2
    assert parsed["latency_ms"] == {"p50": 3.01, "p99": 0.812}


def test_wrk_without_errors_or_latency() -> None:
    parsed = parse_wrk("  100 requests in 1.50s, 1.00MB read\nRequests/sec: 66.6\n")
    assert parsed == {"requests": 100, "seconds": 1.5, "errors": 0, "latency_ms": None}


def test_s_time_report_is_parsed() -> None:
    assert parse_s_time(S_TIME_OUTPUT) == {"handshakes": 8123, "seconds": 11.0, "resumed": 0}
    # -reuse: one untimed full handshake, then the timed connections, "r" for each resumed.
    reuse = "\n\nNow timing with session id reuse.\nstarting\nrrrrrrr*rr\n\n" \
        "10 connections in 0.01s; 1000 connections/user sec, bytes read 46720\n" \
        "10 connections in 1 real seconds, 4672 bytes read per connection\n"
    assert parse_s_time(reuse) == {"handshakes": 10, "seconds": 1.0, "resumed": 9}
    assert parse_s_time("garbage") == {"handshakes": 0, "seconds": 0.0}


def test_percentiles_are_nearest_rank() -> None:
    values = [float(i) for i in range(1, 101)]
    assert percentile(values, 50) == 50.0
    assert percentile(values, 99) == 99.0
    assert percentile(values, 100) == 100.0
    assert math.isnan(percentile([], 50))
    s = summary_ms([0.001, 0.002, -0.0001, 0.004])
    assert s == {"p50": 1.0, "p99": 4.0, "max": 4.0, "count": 4}
    assert summary_ms([]) == {"p50": None, "p99": None, "max": None, "count": 0}


def test_ratio_and_clean_never_divide_by_zero_or_emit_nan() -> None:
    assert ratio(3.0, 2.0) == 1.5
    assert ratio(1.0, 0.0) is None
    assert ratio(None, 1.0) is None
    assert clean({"a": [math.nan, 1.0, math.inf], "b": {"c": -math.inf}}) == {
        "a": [None, 1.0, None], "b": {"c": None}}


@pytest.mark.parametrize("check_id", [1, 2, 77, 12345, 99999])
@pytest.mark.parametrize("late", [0.0, 0.0031, 0.25, 2.5])
def test_start_lateness_recovers_the_engine_phase(check_id: int, late: float) -> None:
    interval = 30.0
    due = first_due(check_id, interval, 1_700_000_000.0)
    assert start_lateness(check_id, due + late, interval) == pytest.approx(late, abs=1e-6)


def test_start_lateness_counts_a_hair_early_as_on_time() -> None:
    due = first_due(5, 30.0, 1_700_000_000.0)
    assert start_lateness(5, due - 0.001, 30.0) == 0.0


def test_layout_is_deterministic_and_spreads_hosts() -> None:
    ports = layout.Ports(ok=1001, tls=1002, tls_hang=1003, slow=1004, hang=1005, refuse=1006)
    urls = layout.monitor_urls(1000, ports)
    assert urls == layout.monitor_urls(1000, ports)
    assert len(set(urls)) == 1000
    assert len({u.split("/")[2] for u in urls}) == len(layout.HEALTHY_HOSTS)
    assert all(u.startswith("http://127.0.1.") for u in urls)
    tls = layout.monitor_urls(10, ports, tls=True)
    assert all(u.startswith("https://127.0.1.") and ":1002/" in u for u in tls)
    mixed = layout.monitor_urls(1000, ports, mixed=True)
    hostile = [u for u in mixed if u.startswith("http://127.0.3.")]
    assert len(hostile) == 100
    kinds = {layout.hostile_kind(i) for i in range(1000)} - {None}
    assert kinds == set(layout.HOSTILE_KINDS)
    assert layout.Ports.from_dict(ports.to_dict()) == ports


def test_every_target_is_on_loopback() -> None:
    ports = layout.pick_ports()
    assert len(set(ports.to_dict().values())) == 6
    for host, _port, mode in layout.target_binds(ports):
        assert host.startswith("127.")
        assert mode in {"ok", "tls", "tls_hang", "slow", "hang", "refuse"}


def test_top_lines_sums_self_and_total() -> None:
    collapsed = "main (a.py:1);f (a.py:2);g (a.py:3) 3\nmain (a.py:1);f (a.py:2) 1\n"
    text = top_lines(collapsed)
    assert "4 samples" in text
    assert " 75.00  g (a.py:3)" in text
    assert "100.00  main (a.py:1)" in text
    assert top_lines("") == "no samples\n"


def test_report_names_met_and_missed_targets() -> None:
    rec = {
        "scenario": "http", "monitors": 10, "duration_s": 3.0, "interval_s": 3.0,
        "probes_per_s": 3.3, "cpu_s_per_probe": 0.0002, "probes_per_cpu_s": 5000.0,
        "error_rate": 0.0, "lateness_ms": {"p50": 1.0, "p99": 150.0, "max": 200.0},
        "held": 1.0, "cpu_utilization": 0.1, "ratio_vs_baseline": 3.5,
        "ratio_vs_limit": None, "rss_per_monitor_bytes": 900.0,
    }
    rec["targets"] = report.engine_targets(rec)
    by_name = {t["name"]: t["met"] for t in rec["targets"]}
    assert by_name["scheduler lateness p99"] is False
    assert by_name["probe error rate"] is True
    assert by_name["vs wrk Connection: close, per CPU s"] is None
    text = report.table(rec)
    assert "[MISSED] scheduler lateness p99" in text
    assert "[n/a   ] vs wrk" in text


def test_callgrind_totals_are_read_from_the_end_of_its_output() -> None:
    text = "version: 1\nevents: Ir\nsummary: 0\nfn=(1) main\n5 120\n\ntotals: 1129166622\n"
    assert callgrind.total_instructions(text) == 1129166622
    assert callgrind.total_instructions("events: Ir\n") is None  # cut short: no figure
    assert callgrind.wrapper(Path("/tmp/x.out"))[-1] == "--callgrind-out-file=/tmp/x.out"


def test_the_dns_server_counts_questions_per_name_and_type_in_a_window() -> None:
    import time

    import dns.message

    from upwatch_bench.roles.dnsserver import DnsServer

    server = DnsServer(zone="names.test", addresses=["127.0.1.1"])
    t0 = time.time()
    for name, rdtype in [("m1", "A"), ("m1", "AAAA"), ("m1", "A"), ("m2", "A")]:
        q = dns.message.make_query(f"{name}.names.test", rdtype)
        assert server.answer(q.to_wire(), tcp=False) is not None
    assert server.most_per_name_type(t0, time.time() + 1) == (2, 3)
    assert server.most_per_name_type(time.time() + 1, time.time() + 2) == (0, 0)


def test_one_dns_question_per_ttl_allows_a_start_of_a_ttl_in_each_ttl_of_the_window() -> None:
    from upwatch_bench.harness import dns_figures

    res = {"seconds": 70.0, "probes": {"uptime,ok": 100.0}, "dns": {"hits": 90, "lookups": 10}}
    count = {"window": 6, "most_per_name_type": 3, "name_types": 2}
    fig = dns_figures(res, count, 30)
    assert fig["dns_queries_allowed_per_name_type"] == 3  # starts at ~0, 30 and 60 s
    assert fig["dns_most_queries_per_name_type"] == 3 and fig["dns_queries_per_probe"] == 0.06
    assert fig["dns_cache_hit_ratio"] == 0.9


def test_load_only_is_for_the_engine_scenarios() -> None:
    import argparse

    from upwatch_bench.options import BenchError, Options

    def args(scenario: str) -> argparse.Namespace:
        return argparse.Namespace(scenario=scenario, monitors=None, duration=None, quick=True,
                                  json=True, load_only=True)

    assert Options.from_args(args("http")).load_only
    assert Options.from_args(args("internet")).load_only
    with pytest.raises(BenchError, match="--load-only"):
        Options.from_args(args("webhooks"))


def test_https_only_is_for_the_internet_scenario() -> None:
    import argparse

    from upwatch_bench.options import BenchError, Options

    def args(scenario: str, https_only: bool) -> argparse.Namespace:
        return argparse.Namespace(scenario=scenario, monitors=None, duration=None, quick=True,
                                  json=True, https_only=https_only)

    assert Options.from_args(args("internet", True)).https_only
    assert not Options.from_args(args("internet", False)).https_only
    with pytest.raises(BenchError, match="--https-only"):
        Options.from_args(args("http", True))


def test_the_world_dns_fast_path_counts_questions_per_name_and_type_too() -> None:
    import time

    import dns.message

    from upwatch_bench.roles.dnsserver import DnsServer

    server = DnsServer(zone="names.test")
    server.address_of = lambda name: "127.0.1.1"
    t0 = time.time()
    for rdtype in ("A", "A", "AAAA"):
        q = dns.message.make_query("m7.names.test", rdtype)
        assert server.answer(q.to_wire(), tcp=False) is not None
    assert server.most_per_name_type(t0, time.time() + 1) == (2, 2)
