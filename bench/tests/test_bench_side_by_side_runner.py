"""The side-by-side runner's own parts (upwatch_bench/sidebyside.py, roles/rounds.py): one
side's record as tcp and icmp print it, and a round of probes that counts every probe and
each failure by its words. (The scenarios run end to end with ``--quick``.)"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from upwatch_bench.roles.rounds import probe_round
from upwatch_bench.sidebyside import cpu_figures


def test_a_side_reads_per_probe_and_per_request_only_when_asked() -> None:
    plain = cpu_figures(1000, 0.25, 1.23456, {"refused": 2})
    assert plain == {"probes": 1000, "cpu_s": 0.25, "cpu_us_per_probe": 250.0,
                     "wall_s": 1.235, "errors": {"refused": 2}}
    assert list(plain) == ["probes", "cpu_s", "cpu_us_per_probe", "wall_s", "errors"]
    three = cpu_figures(1000, 0.3, 2.0, {}, requests=3)
    assert list(three) == ["probes", "requests_per_probe", "cpu_s", "cpu_us_per_probe",
                           "cpu_us_per_request", "wall_s", "errors"]
    assert three["cpu_us_per_probe"] == 300.0 and three["cpu_us_per_request"] == 100.0


@dataclass
class _Out:
    error: str | None


async def test_a_round_makes_every_probe_round_robin_and_counts_failures() -> None:
    asked: list[str] = []

    async def probe(target: str) -> _Out:
        asked.append(target)
        await asyncio.sleep(0)
        return _Out("no reply" if target == "b" else None)

    errors = await probe_round(probe, ["a", "b", "c"], 10, 4)
    assert sorted(asked) == sorted(["a", "b", "c"] * 3 + ["a"])
    assert errors == {"no reply": 3}
