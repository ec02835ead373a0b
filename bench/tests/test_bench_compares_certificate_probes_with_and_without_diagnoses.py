"""``upwatch bench tls --diagnoses``: both probers run against the same served chain, the
diagnosed one judging revocation from one CRL fetch, the windows alternating, and the
figure is a ratio of the two."""

from __future__ import annotations

import shutil
from types import SimpleNamespace
from typing import Any

import pytest

from upwatch_bench.options import BenchError, Options
from upwatch_bench.scenarios.certdiag import scenario_diagnoses, table

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs openssl")


class _Progress:
    def phase(self, *args: Any) -> None:
        pass


async def test_a_small_run_compares_like_with_like() -> None:
    b = SimpleNamespace(opts=SimpleNamespace(monitors=60), progress=_Progress(),
                        engine_cpus=set())
    rec = await scenario_diagnoses(b, 2)
    assert rec["failures"] == 0
    assert rec["revocation_statuses"] == ["good"]  # the diagnosed side judged the CRL
    assert rec["crl_fetches"] == 1  # fetched once, then cached
    assert len(rec["reference_cpu_s_per_probe"]) == len(rec["diagnosed_cpu_s_per_probe"]) == 2
    assert rec["ratio"] is not None and rec["ratio"] > 0
    assert "ratio (median)" in table(rec)


def test_the_flag_belongs_to_the_tls_scenario() -> None:
    from upwatch_bench.cli import parser

    args = parser().parse_args(["http", "--diagnoses", "2"])
    with pytest.raises(BenchError, match="tls scenario"):
        Options.from_args(args)
    assert Options.from_args(parser().parse_args(["tls", "--diagnoses", "3"])).diagnoses == 3
