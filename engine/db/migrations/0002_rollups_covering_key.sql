-- The hourly rollups' primary key carries the summed columns, so the 30-day figures of the
-- API (monitor list, get, statistics) and the status page's bars are index-only scans.
--
-- Why: the rollups of one hour for every check are written together, so one check's rows
-- sit one to a heap page. Summing 720 hours (30 days) read 720 heap pages per check: 0.5 ms
-- of database time per GET /webapi/monitors/{id}, 0.5 s per list of 1,000 monitors. From
-- the key's leaf pages the same sums read ~10 pages.
--
-- Why the primary key rather than a second index: rollup upserts (ON CONFLICT (check_id,
-- hour), engine/db/results.py) then still maintain one index, not two. The INCLUDE columns
-- are not key columns, so the conflict target and uniqueness are unchanged.
--
-- The index is built before the swap: CREATE INDEX holds a SHARE lock (rollup writes wait,
-- reads go on) for the build; the swap itself is a catalogue change. On ~1 million rows the
-- build takes about a second.
CREATE UNIQUE INDEX check_rollups_hourly_covering_key
    ON check_rollups_hourly (check_id, hour)
    INCLUDE (probes, responses, failures, response_ms_sum);

-- USING INDEX renames the index to the constraint's name (a NOTICE says so).
ALTER TABLE check_rollups_hourly
    DROP CONSTRAINT check_rollups_hourly_pkey,
    ADD CONSTRAINT check_rollups_hourly_pkey PRIMARY KEY USING INDEX check_rollups_hourly_covering_key;
