-- Heartbeat monitors: jobs that ping Upwatch, and silence is the alert.
--
-- A heartbeat monitor has one check of kind 'heartbeat'; its configuration and what the
-- pings so far left (the facts engine/domain/heartbeat.py judges) live on its heartbeats
-- row, so a batch of pings is one UPDATE of those rows and one INSERT of the pings.

ALTER TABLE checks DROP CONSTRAINT IF EXISTS checks_kind_check;
ALTER TABLE checks ADD CONSTRAINT checks_kind_check
    CHECK (kind IN ('uptime', 'certificate_health', 'heartbeat', 'domain_expiry'));

-- The per-account key of slug pings (/ping/<ping_key>/<slug>); made on first use.
ALTER TABLE accounts ADD COLUMN ping_key text UNIQUE;

CREATE TABLE heartbeats (
    check_id        bigint      PRIMARY KEY REFERENCES checks (id) ON DELETE CASCADE,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- The secret of the ping URL (UUID4); an importer may keep a given one.
    ping_uuid       uuid        NOT NULL UNIQUE,
    slug            text,
    period_s        integer     CHECK (period_s BETWEEN 60 AND 31536000),
    schedule        text,
    time_zone       text        NOT NULL DEFAULT 'UTC',
    grace_s         integer     NOT NULL CHECK (grace_s BETWEEN 60 AND 31536000),
    max_runtime_s   integer     CHECK (max_runtime_s BETWEEN 1 AND 31536000),
    min_runtime_s   integer     CHECK (min_runtime_s BETWEEN 1 AND 31536000),
    min_interval_s  integer     CHECK (min_interval_s BETWEEN 1 AND 31536000),
    -- What the pings left (engine.domain.heartbeat.Facts).
    last_ping_at    timestamptz,
    last_success_at timestamptz,
    last_failure_at timestamptz,
    failure_reason  text,
    last_start_at   timestamptz,
    last_duration_s double precision,
    last_exit_status smallint,
    runs            jsonb       NOT NULL DEFAULT '{}'::jsonb,   -- rid -> start (epoch s)
    last_body       text,
    CHECK ((period_s IS NULL) <> (schedule IS NULL))
);
CREATE UNIQUE INDEX heartbeats_slug_idx ON heartbeats (account_id, slug) WHERE slug IS NOT NULL;

-- Every ping, as received (the body cut at the limit, marked by body_cut).
CREATE TABLE heartbeat_pings (
    id              bigserial   PRIMARY KEY,
    check_id        bigint      NOT NULL REFERENCES heartbeats (check_id) ON DELETE CASCADE,
    at              timestamptz NOT NULL,
    kind            text        NOT NULL CHECK (kind IN ('success', 'start', 'fail', 'log')),
    exit_status     smallint,
    rid             text,
    method          text        NOT NULL,
    remote_addr     text,
    body            text,
    body_cut        boolean     NOT NULL DEFAULT false,
    failure         text        -- the ping's own failure in words, if it was one
);
CREATE INDEX heartbeat_pings_check_idx ON heartbeat_pings (check_id, id DESC);
