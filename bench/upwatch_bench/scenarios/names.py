"""``upwatch bench http --names``: the same capacity windows by host name and by IP literal,
in pairs that take turns at going first, with the same probes in flight both ways;
``--names-cost PAIRS``: only those pairs."""

from __future__ import annotations

import os
import statistics
from typing import Any

from upwatch_bench import layout, report
from upwatch_bench.harness import (
    Bench,
    capacity_window,
    dns_figures,
    engine_figures,
    point_monitors,
    run_engine,
)
from upwatch_bench.stats import ratio


def like_for_like() -> dict[str, Any]:
    """Settings of both sides of a names/literals pair: by name every monitor is its own host,
    by IP literal 100 monitors share each of the 100 addresses, so at the defaults
    (``per_host_limit`` 8, ``max_in_flight`` 1,000) literals ran 800 probes at once and
    names 1,000, and the target's queue made every probe by name longer. Both now run
    ``per_host_limit`` x 100 (800): the literals' limit, the names' cap."""
    from engine.runtime.settings import Settings

    per_host = int(Settings.model_fields["per_host_limit"].default)
    return {"max_in_flight": per_host * len(layout.HEALTHY_HOSTS)}


def pair_orders(pairs: int) -> list[list[str]]:
    """The order of the windows in each names/literals pair: literals first in even pairs,
    names first in odd ones, so that neither side always runs after the other."""
    return [["literals", "names"] if i % 2 == 0 else ["names", "literals"]
            for i in range(pairs)]


async def names_pair(b: Bench, account_id: int, ports: layout.Ports, i: int, demand: float,
                      which: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pair ``i`` of capacity windows, (names, literals) figures, in the order
    :func:`pair_orders` gives, both with :func:`like_for_like` settings. With ``--rate``
    the names side's child looks its names up before its window."""
    opts = b.opts
    figs: dict[str, dict[str, Any]] = {}
    for by in pair_orders(i + 1)[i]:
        by_name = by == "names"
        if b.by_names != by_name:
            await point_monitors(b, account_id,
                                  layout.monitor_urls(opts.monitors, ports, names=by_name))
            b.by_names = by_name
        label = "engine at capacity" if by_name else "engine at capacity, IP literals"
        w = capacity_window(b, label + which, demand)
        # The literal side has no name to wait for: with the default wait (for every name
        # to be cached, at most 60 s) its child ran 60 s at capacity before its window,
        # ~600,000 result rows into the database that shares the targets' core.
        res = await run_engine(b, w, settings=like_for_like(),
                                dns_warm_s=None if by_name else 0.0,
                                dns_prewarm=by_name and opts.rate is not None)
        fig = engine_figures(res, "uptime")
        if by_name:
            fig.update(dns_figures(res, await b.dns_count(res["wall_start"], res["wall_end"]),
                                    opts.dns_ttl))
        fig["in_flight_at_end"] = res.get("in_flight_at_end")
        figs[by] = fig
    return figs["names"], figs["literals"]


_PAIR_KEYS = ("probes_per_cpu_s", "cpu_s_per_probe", "user_s_per_probe", "sys_s_per_probe",
              "cpu_utilization", "probes_per_s", "error_rate", "in_flight_mean",
              "in_flight_max", "instructions_per_probe", "instructions_per_answered_probe",
              "callgrind_probes", "callgrind_unanswered", "dns_queries",
              "dns_lookups_in_window", "dns_cache_hit_ratio")


async def names_cost(b: Bench, account_id: int, ports: layout.Ports,
                      rec: dict[str, Any]) -> dict[str, Any]:
    """``--names-cost PAIRS``: only interleaved capacity pairs, names against IP literals,
    the same probes in flight both ways: CPU per probe (probes per CPU second) and, under
    ``--callgrind``, user-space instructions per answered probe."""
    opts = b.opts
    pairs = opts.names_cost or 1
    rate = opts.rate if opts.rate is not None else 30_000.0
    rec.update(mode="names_cost", rate_asked_per_s=rate,
               probe_timeout_s=b.settings()["probe_timeout"], settings=like_for_like(),
               loadavg_start=[round(x, 2) for x in os.getloadavg()])
    rows: list[dict[str, Any]] = []
    for i in range(pairs):
        nfig, lfig = await names_pair(b, account_id, ports, i, rate,
                                       f" ({i + 1} of {pairs})")
        row: dict[str, Any] = {"order": pair_orders(i + 1)[i],
                               "names": {k: nfig.get(k) for k in _PAIR_KEYS if k in nfig},
                               "literals": {k: lfig.get(k) for k in _PAIR_KEYS if k in lfig},
                               "cpu_ratio": ratio(lfig["probes_per_cpu_s"],
                                                  nfig["probes_per_cpu_s"])}
        if nfig.get("instructions_per_answered_probe") is not None:
            row["instructions_ratio"] = ratio(nfig["instructions_per_answered_probe"],
                                              lfig.get("instructions_per_answered_probe"))
        rows.append(row)
    rec["pairs"] = rows
    cpu = [r["cpu_ratio"] for r in rows if r["cpu_ratio"] is not None]
    rec["names_cost_vs_literals_pairs"] = [r["cpu_ratio"] for r in rows]
    rec["names_cost_vs_literals"] = round(statistics.median(cpu), 3) if cpu else None
    ins = [r["instructions_ratio"] for r in rows if r.get("instructions_ratio") is not None]
    if ins:
        rec["names_instructions_vs_literals_pairs"] = ins
        rec["names_instructions_vs_literals"] = round(statistics.median(ins), 4)
    rec["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    rec["targets"] = [report.target("names vs IP literals, CPU per probe at capacity",
                                    rec["names_cost_vs_literals"], "<=", 1.15, "x")]
    if ins:
        rec["targets"].append(report.target(
            "names vs IP literals, instructions per answered probe",
            rec["names_instructions_vs_literals"], "<=", 1.15, "x"))
    return rec

