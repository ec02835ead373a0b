"""Phase timings in the store: rolling closed hours of raw results into
``check_phase_rollups_hourly`` (the roll-up job), and reading one check's histograms per
hour or day (the timings endpoint, the status page's phase chart).

Layout and reasons: migration 0006 and :mod:`engine.timings`. The results path
(engine/db/probing.py) is not touched: the phases it already writes to ``probe_results``
are the source, rolled once per hour after the hour has ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.db.base import StoreBase
from engine.timings import CODE_STRIDE, SQL_BUCKET

HOUR = timedelta(hours=1)

# (code, probes) cells of the phases of the rows of ``{src}`` (an alias with the phase
# columns and status_code), grouped by ``{keys}``. Probes without a response carry no
# phases worth comparing (a timeout's total is the timeout), as in the statistics.
_CELLS = f"""
SELECT {{keys}}, (v.phase * {CODE_STRIDE} + {SQL_BUCKET.format(ms="v.ms")})::smallint AS code,
       count(*)::int AS n
FROM {{src}}
CROSS JOIN LATERAL (VALUES (0, {{src}}.dns_ms), (1, {{src}}.connect_ms), (2, {{src}}.tls_ms),
                           (3, {{src}}.ttfb_ms), (4, {{src}}.total_ms)) AS v(phase, ms)
WHERE {{src}}.status_code IS NOT NULL AND v.ms IS NOT NULL
GROUP BY {{keys}}, 2
"""

SQL_LOCK_PROGRESS = """
SELECT rolled_until FROM phase_rollup_progress FOR UPDATE SKIP LOCKED
"""
SQL_SET_PROGRESS = "UPDATE phase_rollup_progress SET rolled_until = $1"

# One hour [$1, $2) of every uptime check, from probe_results, replacing what was there.
# One index range per check (probe_results_check_at_idx, on the partition of that day)
# rather than a scan of the day's partition, which holds the other 23 hours too.
SQL_ROLL_HOUR = f"""
WITH r AS MATERIALIZED (
    SELECT p.check_id, p.status_code, p.dns_ms, p.connect_ms, p.tls_ms, p.ttfb_ms, p.total_ms
    FROM checks c
    CROSS JOIN LATERAL (
        SELECT p.check_id, p.status_code, p.dns_ms, p.connect_ms, p.tls_ms, p.ttfb_ms,
               p.total_ms
        FROM probe_results p
        WHERE p.check_id = c.id AND p.at >= $1 AND p.at < $2
          AND p.kind = 1 AND NOT p.confirmation
    ) p
    WHERE c.kind = 'uptime'
),
totals AS (
    SELECT r.check_id, count(*)::int AS probes, count(r.status_code)::int AS responses
    FROM r GROUP BY 1
),
cells AS ({_CELLS.format(keys="r.check_id", src="r")}),
hists AS (
    SELECT check_id, array_agg(code ORDER BY code) AS codes, array_agg(n ORDER BY code) AS counts
    FROM cells GROUP BY 1
)
INSERT INTO check_phase_rollups_hourly (check_id, hour, probes, responses, codes, counts)
SELECT t.check_id, $1, t.probes, t.responses,
       COALESCE(h.codes, '{{}}'::smallint[]), COALESCE(h.counts, '{{}}'::int[])
FROM totals t LEFT JOIN hists h ON h.check_id = t.check_id
ORDER BY 1
ON CONFLICT (check_id, hour) DO UPDATE SET
    probes = EXCLUDED.probes, responses = EXCLUDED.responses,
    codes = EXCLUDED.codes, counts = EXCLUDED.counts
"""
SQL_DELETE_OLD = "DELETE FROM check_phase_rollups_hourly WHERE hour < $1"

# One check ($1) from $2 (a slot boundary) to $3 (now), in slots of $4 seconds: rolled hours
# from the rollups, the rest from probe_results (both in one snapshot, so an hour the job
# rolls meanwhile is counted once). Rows (i, probes, responses, codes, counts): one per
# rolled hour, and one per slot with raw results. The histograms are added up by the caller:
# unnesting 720 hours of ~20 cells in SQL took longer than the rest of the query together.
_SLOT = "floor((date_part('epoch', {t}) - date_part('epoch', $2::timestamptz)) / $4)::int"
SQL_CHECK_TIMINGS = f"""
WITH prog AS (SELECT rolled_until AS u FROM phase_rollup_progress),
live AS MATERIALIZED (
    SELECT {_SLOT.format(t="p.at")} AS i, p.status_code, p.dns_ms, p.connect_ms, p.tls_ms,
           p.ttfb_ms, p.total_ms
    FROM probe_results p, prog
    WHERE p.check_id = $1 AND p.at >= GREATEST($2::timestamptz, prog.u) AND p.at <= $3
      AND p.kind = 1 AND NOT p.confirmation
),
live_totals AS (
    SELECT i, count(*)::int AS probes, count(status_code)::int AS responses FROM live GROUP BY i
),
live_cells AS ({_CELLS.format(keys="live.i", src="live")}),
live_hists AS (
    SELECT i, array_agg(code ORDER BY code) AS codes, array_agg(n ORDER BY code) AS counts
    FROM live_cells GROUP BY i
)
SELECT {_SLOT.format(t="r.hour")} AS i, r.probes, r.responses, r.codes, r.counts
FROM check_phase_rollups_hourly r, prog
WHERE r.check_id = $1 AND r.hour >= $2 AND r.hour < prog.u
UNION ALL
SELECT t.i, t.probes, t.responses, COALESCE(h.codes, '{{}}'::smallint[]),
       COALESCE(h.counts, '{{}}'::int[])
FROM live_totals t LEFT JOIN live_hists h ON h.i = t.i
"""


@dataclass(frozen=True, slots=True)
class TimingCells:
    """One slot's raw figures: probes, responses and ``(code, count)`` histogram cells."""

    probes: int
    responses: int
    cells: list[tuple[int, int]]


class TimingsMixin(StoreBase):
    async def roll_phase_timings(
        self, now: datetime, *, grace: timedelta, max_hours: int = 24,
        keep: timedelta | None = None,
    ) -> int:
        """Roll every hour that ended at least ``grace`` before ``now`` and is not rolled
        yet, oldest first, at most ``max_hours`` of them; returns how many. 0 without
        waiting when another node is rolling (it holds the progress row). ``keep``: delete
        rolled hours older than ``now - keep``."""
        limit = now - grace
        done = 0
        async with self._tx() as conn:
            rolled = await conn.fetchval(SQL_LOCK_PROGRESS)
            if rolled is None:
                return 0
            while rolled + HOUR <= limit and done < max_hours:
                await conn.execute(SQL_ROLL_HOUR, rolled, rolled + HOUR)
                rolled += HOUR
                done += 1
            if done:
                await conn.execute(SQL_SET_PROGRESS, rolled)
            if keep is not None:
                await conn.execute(SQL_DELETE_OLD, now - keep)
        return done

    async def check_timings(
        self, check_id: int, start: datetime, now: datetime, slot: timedelta
    ) -> dict[int, TimingCells]:
        """Slot index (0 = the slot starting at ``start``) -> figures, for slots with
        probes in them."""
        rows = await self._fetch(SQL_CHECK_TIMINGS, check_id, start, now, slot.total_seconds())
        acc: dict[int, tuple[list[int], dict[int, int]]] = {}
        for i, probes, responses, codes, counts in rows:
            entry = acc.get(i)
            if entry is None:
                entry = acc[i] = ([0, 0], {})
            entry[0][0] += probes
            entry[0][1] += responses
            cells = entry[1]
            for code, n in zip(codes, counts, strict=True):
                cells[code] = cells.get(code, 0) + n
        return {i: TimingCells(t[0], t[1], list(cells.items())) for i, (t, cells) in acc.items()}
