"""The pure parts of ``upwatch bench pings``: the wrk script pings the heartbeats it is
given, with and without keep-alive, and the targets are judged as the issue states them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from upwatch_bench.scenarios.pings import targets, write_ping_script


def test_the_ping_script_draws_the_given_ids_and_closes_without_keep_alive(
        tmp_path: Path) -> None:
    ids = ["4a142ddb-0000-4000-8000-000000000001", "4a142ddb-0000-4000-8000-000000000002"]
    on = write_ping_script(tmp_path / "on.lua", ids, keep_alive=True).read_text()
    off = write_ping_script(tmp_path / "off.lua", ids, keep_alive=False).read_text()
    for text in (on, off):
        assert all(f'"{i}"' in text for i in ids)
        assert '"/ping/" .. ids[math.random(#ids)]' in text
    assert "Connection" not in on
    assert 'wrk.headers["Connection"] = "close"' in off


def _rec(rate: float, p99: float, missing: int, within: float) -> dict[str, Any]:
    run = {"pings_per_s": rate, "latency_ms": {"p50": 1.0, "p99": p99}, "missing": missing,
           "errors": 0}
    return {"runs": {"keep_alive": run}, "url_probes": {"probed_within_2x_interval": within}}


def test_targets_are_the_issues_figures() -> None:
    assert all(targets(_rec(2000.0, 49.9, 0, 0.995)).values())
    missed = targets(_rec(1999.0, 50.0, 1, 0.98))
    assert not any(missed.values())
