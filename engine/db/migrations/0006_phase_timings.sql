-- Per-phase timings: where a probe's time goes (DNS, connect, TLS, first byte,
-- total), kept per check and hour as a small fixed histogram, for the timings endpoint and
-- the status page's phase chart. docs/design.md, "Phase timings", says why it looks so.
--
-- Why a table of its own, filled after the hour ends, and not more columns on
-- check_rollups_hourly: the hot rollup row is rewritten by every results batch (once per
-- probe, in the steady state); five histograms on it made that upsert about twice as
-- expensive, and a wider row costs every rewrite even when only its counters change. The
-- raw probe_results rows already carry the phases, so a job rolls each closed hour from them
-- once (engine/db/rollups.py) and the results path does not change at all. Hours not yet
-- rolled are read from probe_results, which keeps them for results_retention_days.
--
-- The histogram is sparse: only buckets with probes in them, as two parallel arrays sorted
-- by code. code = phase * 128 + bucket, phase 0 dns, 1 connect, 2 tls, 3 ttfb, 4 total;
-- bucket 0 holds [0, 0.25 ms), bucket k >= 1 holds [0.25 * 2^((k-1)/4), 0.25 * 2^(k/4)) ms
-- (four buckets an octave: a quantile read from it is within 9% of the true value), bucket
-- 100 everything from ~9.5 hours up. Only probes that got a response count; probes and
-- responses are the hour's uptime probes (confirmations excluded, as in the statistics).
CREATE TABLE check_phase_rollups_hourly (
    check_id        bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    hour            timestamptz NOT NULL,
    probes          integer     NOT NULL,
    responses       integer     NOT NULL,
    codes           smallint[]  NOT NULL,
    counts          integer[]   NOT NULL,
    PRIMARY KEY (check_id, hour)
);
-- For the retention delete (hours older than the endpoint's 30 days go).
CREATE INDEX check_phase_rollups_hourly_hour_idx ON check_phase_rollups_hourly (hour);

-- The same per UTC day (day = its midnight), summed from the hourly rows once the day's
-- last hour is rolled: the 7- and 30-day views read 30 rows instead of 720.
CREATE TABLE check_phase_rollups_daily (
    check_id        bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    day             timestamptz NOT NULL,
    probes          integer     NOT NULL,
    responses       integer     NOT NULL,
    codes           smallint[]  NOT NULL,
    counts          integer[]   NOT NULL,
    PRIMARY KEY (check_id, day)
);
CREATE INDEX check_phase_rollups_daily_day_idx ON check_phase_rollups_daily (day);

-- Every hour before rolled_until has been rolled (for every check), and every day before
-- days_rolled_until (<= rolled_until); later hours are read from probe_results. One row;
-- the roll-up job locks it, so nodes never roll an hour twice at once. Starts a week back,
-- so an existing install's recent raw results are rolled too.
CREATE TABLE phase_rollup_progress (
    singleton           boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    rolled_until        timestamptz NOT NULL,
    days_rolled_until   timestamptz NOT NULL
);
INSERT INTO phase_rollup_progress (rolled_until, days_rolled_until)
VALUES (date_trunc('hour', now(), 'UTC') - interval '7 days',
        date_trunc('day', now(), 'UTC') - interval '7 days');
