"""How evenly a window's probes came, from their result rows: what the overload and pings
scenarios read to judge fair degradation (gaps between a check's probes, in intervals)."""

from __future__ import annotations

import statistics
from datetime import UTC, datetime
from typing import Any

DISPATCH_TICK_S = 0.01  # the dispatcher's sweep (engine.scheduler.dispatch.WHEEL_TICK)


async def probe_gaps(pool: Any, ids: list[int], w0: float, w1: float,
                    interval: float, ratio: float) -> dict[str, Any]:
    """From the window's result rows of ``ids``: the gaps between a check's consecutive
    probes, in intervals (p50, p99, max, over every gap of every check), each check's mean
    gap (least, median, most: fairness), and the share of checks whose every gap, and the
    time from the window's start to its first probe and from its last to the window's end
    (lower bounds of real gaps), is at most ``ratio`` intervals plus one dispatch tick (the
    promise: demand / capacity intervals apart), and at most two intervals plus a tick."""
    t0, t1 = datetime.fromtimestamp(w0, UTC), datetime.fromtimestamp(w1, UTC)
    rows = await pool.fetch(
        """
        WITH p AS (
            SELECT c.id AS check_id, r.at FROM unnest($1::bigint[]) AS c(id)
            JOIN probe_results r ON r.check_id = c.id AND r.at >= $2 AND r.at < $3
        ), g AS (
            SELECT check_id, at, extract(epoch FROM at - lag(at) OVER w) AS gap
            FROM p WINDOW w AS (PARTITION BY check_id ORDER BY at)
        )
        SELECT c.id AS check_id, coalesce(array_agg(g.gap) FILTER (WHERE g.gap IS NOT NULL),
                                          '{}') AS gaps,
               extract(epoch FROM min(g.at) - $2) AS head,
               extract(epoch FROM $3 - max(g.at)) AS tail
        FROM unnest($1::bigint[]) AS c(id) LEFT JOIN g ON g.check_id = c.id
        GROUP BY c.id
        """, ids, t0, t1)
    span = w1 - w0
    tick = DISPATCH_TICK_S  # the sweep runs on the real clock, whatever the time scale
    gaps = sorted(float(x) / interval for r in rows for x in r["gaps"])

    def within(bound: float) -> float | None:
        ok = 0
        for r in rows:
            head = float(r["head"]) if r["head"] is not None else span
            tail = float(r["tail"]) if r["tail"] is not None else span
            if max([head, tail, *(float(x) for x in r["gaps"])]) <= bound * interval + tick:
                ok += 1
        return round(ok / len(rows), 4) if rows else None

    mean_gap = sorted(statistics.fmean(r["gaps"]) / interval for r in rows if r["gaps"])
    # The checks' probes a second over the window (whole seconds): how steady the node's rate
    # was, which is what spreads one check's gaps around the mean.
    counts = {int(r["i"]): int(r["n"]) for r in await pool.fetch(
        """SELECT floor(extract(epoch FROM r.at - $2)) AS i, count(*) AS n
           FROM probe_results r
           WHERE r.check_id = ANY($1::bigint[]) AND r.at >= $2 AND r.at < $3
           GROUP BY 1""", ids, t0, t1)}
    per_second = sorted(counts.get(i, 0) for i in range(int(span)))
    never = sum(1 for r in rows if r["head"] is None)
    return {
        "checks": len(rows),
        "gap_intervals": {
            "p50": round(percentile(gaps, 0.5), 2) if gaps else None,
            "p99": round(percentile(gaps, 0.99), 2) if gaps else None,
            "max": round(gaps[-1], 2) if gaps else None,
        },
        "demand_over_capacity": round(ratio, 2),
        "bound_intervals": round(max(ratio, 1.0), 2),
        "probed_within_ratio_intervals": within(max(ratio, 1.0)),
        "probed_within_2x_interval": within(2.0),
        "never_probed": never,
        "mean_gap_intervals": {
            "least_late": round(mean_gap[0], 2) if mean_gap else None,
            "median": round(statistics.median(mean_gap), 2) if mean_gap else None,
            "most_late": round(mean_gap[-1], 2) if mean_gap else None,
        },
        "lateness_spread_intervals": round(mean_gap[-1] - mean_gap[0], 2) if mean_gap else None,
        "probes_per_s": {
            "least": per_second[0] if per_second else None,
            "median": statistics.median(per_second) if per_second else None,
            "most": per_second[-1] if per_second else None,
        },
    }


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile of already sorted values (nearest rank, no interpolation)."""
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]
