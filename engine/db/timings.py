"""Phase timings in the store: rolling closed hours of raw results into
``check_phase_rollups_hourly`` (the roll-up job), and reading one check's histograms per
hour or day (the timings endpoint, the status page's phase chart).

Layout and reasons: migration 0006 and :mod:`engine.domain.timings`. The results path
(engine/db/results.py) is not touched: the phases it already writes to ``probe_results``
are the source, rolled once per hour after the hour has ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.db.base import StoreBase
from engine.domain.timings import CODE_STRIDE, SQL_BUCKET

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)

# Per raw result, the codes it adds one to: -1 (a probe), -2 (a response) and, for a
# response, the code of each phase it measured (a NULL phase gives a NULL code, dropped).
# One array per row, unnested in the select list (a set-returning function in FROM, called
# per row, cost 5 us a row) and counted: probes, responses and the histogram come out of
# one GROUP BY (a VALUES row per phase, counted apart from the totals, took five times as
# long). Probes without a response carry no phases worth comparing (a timeout's total is
# the timeout), as in the statistics.
_PHASE_COLUMNS = ("dns_ms", "connect_ms", "tls_ms", "ttfb_ms", "total_ms")
_CODES = (
    "CASE WHEN {p}.status_code IS NULL THEN ARRAY[-1] ELSE ARRAY[-1, -2, "
    + ", ".join(f"{i * CODE_STRIDE} + " + SQL_BUCKET.format(ms="{p}." + col)
                for i, col in enumerate(_PHASE_COLUMNS))
    + "] END"
)
PROBE_CODE = -1
RESPONSE_CODE = -2
# From cells (key, code, n): per key the probes, the responses and the histogram arrays.
_FOLD = f"""
SELECT {{key}}, sum(n) FILTER (WHERE code = {PROBE_CODE})::int AS probes,
       COALESCE(sum(n) FILTER (WHERE code = {RESPONSE_CODE}), 0)::int AS responses,
       COALESCE(array_agg(code::smallint ORDER BY code) FILTER (WHERE code >= 0),
                '{{{{}}}}'::smallint[]) AS codes,
       COALESCE(array_agg(n ORDER BY code) FILTER (WHERE code >= 0), '{{{{}}}}'::int[]) AS counts
FROM cells
GROUP BY {{key}}
"""

SQL_LOCK_PROGRESS = """
SELECT rolled_until, days_rolled_until FROM phase_rollup_progress FOR UPDATE SKIP LOCKED
"""
SQL_SET_PROGRESS = "UPDATE phase_rollup_progress SET rolled_until = $1, days_rolled_until = $2"

# One hour [$1, $2) of every uptime check, from probe_results, replacing what was there.
# Driven from checks, so the planner may take one index range per check
# (probe_results_check_at_idx on that day's partition) rather than scan the whole day's
# partition, whichever it finds cheaper; checks deleted meanwhile drop out.
SQL_ROLL_HOUR = f"""
WITH cells AS (
    SELECT c.id AS check_id, r.code, count(*)::int AS n
    FROM checks c
    CROSS JOIN LATERAL (
        SELECT unnest({_CODES.format(p="p")}) AS code
        FROM probe_results p
        WHERE p.check_id = c.id AND p.at >= $1 AND p.at < $2
          AND p.kind = 1 AND NOT p.confirmation
    ) r
    WHERE c.kind = 'uptime' AND r.code IS NOT NULL
    GROUP BY 1, 2
)
INSERT INTO check_phase_rollups_hourly (check_id, hour, probes, responses, codes, counts)
SELECT f.check_id, $1, f.probes, f.responses, f.codes, f.counts
FROM ({_FOLD.format(key="check_id")}) f
ORDER BY 1
ON CONFLICT (check_id, hour) DO UPDATE SET
    probes = EXCLUDED.probes, responses = EXCLUDED.responses,
    codes = EXCLUDED.codes, counts = EXCLUDED.counts
"""
# An hour's cells are ~35 per check (10,000 checks: ~350,000 groups); the default 4 MB
# made the aggregation spill to disk.
SQL_ROLL_WORK_MEM = "SET LOCAL work_mem = '64MB'"
# One UTC day [$1, $2) of every check, summed from its rolled hours. Once a day, off the
# request path: the unnest is the costly part (~1 us a cell).
SQL_ROLL_DAY = """
WITH cells AS (
    SELECT r.check_id, u.code, sum(u.n)::int AS n
    FROM check_phase_rollups_hourly r, unnest(r.codes, r.counts) AS u(code, n)
    WHERE r.hour >= $1 AND r.hour < $2
    GROUP BY 1, 2
),
totals AS (
    SELECT check_id, sum(probes)::int AS probes, sum(responses)::int AS responses
    FROM check_phase_rollups_hourly
    WHERE hour >= $1 AND hour < $2
    GROUP BY 1
),
hists AS (
    SELECT check_id, array_agg(code ORDER BY code) AS codes, array_agg(n ORDER BY code) AS counts
    FROM cells GROUP BY 1
)
INSERT INTO check_phase_rollups_daily (check_id, day, probes, responses, codes, counts)
SELECT t.check_id, $1, t.probes, t.responses,
       COALESCE(h.codes, '{}'::smallint[]), COALESCE(h.counts, '{}'::int[])
FROM totals t LEFT JOIN hists h ON h.check_id = t.check_id
ORDER BY 1
ON CONFLICT (check_id, day) DO UPDATE SET
    probes = EXCLUDED.probes, responses = EXCLUDED.responses,
    codes = EXCLUDED.codes, counts = EXCLUDED.counts
"""
SQL_DELETE_OLD_HOURS = "DELETE FROM check_phase_rollups_hourly WHERE hour < $1"
SQL_DELETE_OLD_DAYS = "DELETE FROM check_phase_rollups_daily WHERE day < $1"

# One check ($1) from $2 (a slot boundary) to $3 (now), in slots of $4 seconds: rolled days
# (when $5: slots of whole days) and hours from the rollups, the rest from probe_results
# (all in one snapshot, so what the job rolls meanwhile is counted once). Rows (i, probes,
# responses, codes, counts): one per rolled day or hour, and one per slot with raw results.
# The histograms are added up by the caller: unnesting 720 hours of ~20 cells in SQL took
# longer than the rest of the query together.
_SLOT = "floor((date_part('epoch', {t}) - date_part('epoch', $2::timestamptz)) / $4)::int"
SQL_CHECK_TIMINGS = f"""
WITH prog AS (SELECT rolled_until AS u, days_rolled_until AS du FROM phase_rollup_progress),
cells AS (
    SELECT r.i, r.code, count(*)::int AS n
    FROM (SELECT {_SLOT.format(t="p.at")} AS i, unnest({_CODES.format(p="p")}) AS code
          FROM probe_results p, prog
          WHERE p.check_id = $1 AND p.at >= GREATEST($2::timestamptz, prog.u) AND p.at <= $3
            AND p.kind = 1 AND NOT p.confirmation) r
    WHERE r.code IS NOT NULL
    GROUP BY 1, 2
)
SELECT {_SLOT.format(t="d.day")} AS i, d.probes, d.responses, d.codes, d.counts
FROM check_phase_rollups_daily d, prog
WHERE $5 AND d.check_id = $1 AND d.day >= $2 AND d.day < prog.du
UNION ALL
SELECT {_SLOT.format(t="r.hour")} AS i, r.probes, r.responses, r.codes, r.counts
FROM check_phase_rollups_hourly r, prog
WHERE r.check_id = $1 AND r.hour < prog.u
  AND r.hour >= CASE WHEN $5 THEN GREATEST($2::timestamptz, prog.du) ELSE $2::timestamptz END
UNION ALL
SELECT * FROM ({_FOLD.format(key="i")}) live
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
            progress = await conn.fetchrow(SQL_LOCK_PROGRESS)
            if progress is None:
                return 0
            rolled, days = progress["rolled_until"], progress["days_rolled_until"]
            await conn.execute(SQL_ROLL_WORK_MEM)
            while rolled + HOUR <= limit and done < max_hours:
                await conn.execute(SQL_ROLL_HOUR, rolled, rolled + HOUR)
                rolled += HOUR
                done += 1
            while days + DAY <= rolled:  # every hour of the day is rolled
                await conn.execute(SQL_ROLL_DAY, days, days + DAY)
                days += DAY
            if (rolled, days) != (progress["rolled_until"], progress["days_rolled_until"]):
                await conn.execute(SQL_SET_PROGRESS, rolled, days)
            if keep is not None:
                await conn.execute(SQL_DELETE_OLD_HOURS, now - keep)
                await conn.execute(SQL_DELETE_OLD_DAYS, now - keep)
        return done

    async def check_timings(
        self, check_id: int, start: datetime, now: datetime, slot: timedelta
    ) -> dict[int, TimingCells]:
        """Slot index (0 = the slot starting at ``start``) -> figures, for slots with
        probes in them. Slots of a day or more must start at UTC midnights (they are read
        from the daily rows)."""
        rows = await self._fetch(SQL_CHECK_TIMINGS, check_id, start, now, slot.total_seconds(),
                                 slot >= DAY)
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
