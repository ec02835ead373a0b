"""``upwatch bench dns``'s two sides, small: our dns:// prober and blackbox_exporter's dns
module ask the same loopback server, every probe succeeds, and each side's CPU per probe
is measured (the exporter's only where it is installed)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from upwatch_bench.roles.dnsserver import DnsServer
from upwatch_bench.scenarios.dnsprobes import ours, table, theirs


async def test_our_side_probes_the_loopback_server_and_counts_its_cpu() -> None:
    async with DnsServer(zone="names.test", addresses=["192.0.2.1"]) as server:
        for keep in (True, False):
            got = await ours(server.address, 100, keep)
            assert got["probes"] == 100 and got["failed"] == 0
            assert got["cpu_us_per_probe"] > 0


@pytest.mark.skipif(shutil.which("prometheus-blackbox-exporter") is None,
                    reason="prometheus-blackbox-exporter is not installed")
async def test_blackbox_exporters_side_probes_the_same_server(tmp_path: Path) -> None:
    async with DnsServer(zone="names.test", addresses=["192.0.2.1"]) as server:
        got = await theirs(server.address, 60, tmp_path)
    assert got["probes"] == 60 and got["failed"] == 0
    assert got["cpu_us_per_probe"] > 0


def test_the_record_reads_as_a_table() -> None:
    side = {"probes": 10, "failed": 0, "wall_s": 0.1}
    rec = {"server": "127.0.0.1:53", "query": "m1.names.test A", "concurrency": 50,
           "best": {"upwatch": {**side, "cpu_us_per_probe": 100.0},
                    "upwatch_every_reply_parsed": {**side, "cpu_us_per_probe": 120.0},
                    "blackbox_exporter": {**side, "cpu_us_per_probe": 800.0}},
           "cpu_ratio": 0.125, "cpu_ratio_every_reply_parsed": 0.15}
    text = table(rec)
    assert "ratio upwatch/blackbox_exporter: 0.125 (every reply parsed: 0.15)" in text
    assert "blackbox_exporter" in text and "800.0 us CPU/probe" in text
