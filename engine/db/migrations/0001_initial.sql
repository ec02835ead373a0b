-- Upwatch schema, version 1.
--
-- Sizing: 10,000 monitors probed every 30 s is ~864 million uptime results in 30 days.
-- Raw results therefore live in daily range partitions (probe_results_YYYYMMDD) that the
-- retention job creates ahead and drops whole; every figure the API shows comes from the
-- hourly rollups (check_rollups_hourly, one row per check and hour, maintained with each
-- results batch), outages and enabled periods, never from a scan of raw results.

CREATE TABLE accounts (
    id              bigserial PRIMARY KEY,
    name            text        NOT NULL,
    -- The token signs webhooks (api.md section 5), so it must be kept readable; lookups go
    -- through its SHA-256 (indexed) and are compared in constant time in the application.
    token           text        NOT NULL,
    token_sha256    bytea       NOT NULL UNIQUE,
    plan            text        NOT NULL DEFAULT 'default',
    webhook_url     text,
    is_operator     boolean     NOT NULL DEFAULT false,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE monitors (
    id              bigserial PRIMARY KEY,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    identifier      text        NOT NULL UNIQUE,
    alias           text        NOT NULL,
    url             text        NOT NULL,
    scheme          text        NOT NULL,
    host            text        NOT NULL,
    port            text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX monitors_account_idx ON monitors (account_id, id);

-- One row per check (two per monitor). Configuration and the state machine's state live
-- together so that a state change is one row update.
CREATE TABLE checks (
    id                      bigserial PRIMARY KEY,
    monitor_id              bigint      NOT NULL REFERENCES monitors (id) ON DELETE CASCADE,
    kind                    text        NOT NULL CHECK (kind IN ('uptime', 'certificate_health')),
    interval_s              integer     NOT NULL,
    -- Uptime: seconds of confirmed downtime before the alert. Certificate: expiry threshold
    -- in days x 86400 (0 = off), shown as notification_threshold.
    notification_threshold_s integer    NOT NULL DEFAULT 0,
    is_enabled              boolean     NOT NULL DEFAULT true,
    -- Bumped by every configuration change (API); the engine discards a state write whose
    -- probe started under an older version, so a disable or delete always wins.
    config_version          bigint      NOT NULL DEFAULT 1,

    status                  text        NOT NULL DEFAULT 'pending'
                            CHECK (status IN ('pending', 'ok', 'degraded', 'failing', 'down', 'paused')),
    error                   text,
    last_check_at           timestamptz,
    -- Last probe's facts: uptime {http_status_code}, certificate {issuer, signature_algorithm,
    -- is_self_signed, valid_from, valid_to}.
    meta                    jsonb       NOT NULL DEFAULT '{}'::jsonb,

    -- State machine (see engine/domain/evaluate.py).
    failing_since           timestamptz,          -- first failed probe of the current episode
    detected_by             text,                 -- region of that first failed probe
    outage_id               bigint,               -- open confirmed outage, if any
    incident_event_id       bigint,               -- downtime / certificate-invalid webhook sent
    renewal_notified_for    timestamptz,          -- valid_to of the certificate a renewal-due was sent for
    state_version           bigint      NOT NULL DEFAULT 0,   -- bumped by every engine state write

    updated_at              timestamptz NOT NULL DEFAULT now(),
    UNIQUE (monitor_id, kind)
);
CREATE INDEX checks_enabled_idx ON checks (id) WHERE is_enabled;

-- When each check was enabled: the denominator of uptime_percentage_30d.
CREATE TABLE check_periods (
    check_id        bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    started_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    PRIMARY KEY (check_id, started_at)
);
CREATE UNIQUE INDEX check_periods_open_idx ON check_periods (check_id) WHERE ended_at IS NULL;

-- Confirmed outages. started_at is the first failed probe; ended_at null while ongoing.
CREATE TABLE outages (
    id              bigserial PRIMARY KEY,
    check_id        bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    started_at      timestamptz NOT NULL,
    ended_at        timestamptz,
    http_status_code integer,
    error           text,
    detected_by     text,
    verified_via    text,
    alerted         boolean     NOT NULL DEFAULT false
);
CREATE INDEX outages_check_idx ON outages (check_id, started_at DESC);

-- Raw probe results, one daily partition each. No foreign key: COPY stays fast, and rows
-- of a deleted check are removed with it (and by retention if any arrive late).
CREATE TABLE probe_results (
    check_id        bigint      NOT NULL,
    at              timestamptz NOT NULL,
    kind            smallint    NOT NULL,          -- 1 uptime, 2 certificate
    outcome         smallint    NOT NULL,          -- 0 ok, 1 degraded, 2 failure
    status_code     smallint,
    total_ms        real,
    dns_ms          real,
    connect_ms      real,
    tls_ms          real,
    ttfb_ms         real,
    region          text        NOT NULL,
    confirmation    boolean     NOT NULL DEFAULT false,
    error           text
) PARTITION BY RANGE (at);
-- Safety net: rows for a day whose partition the maintenance job has not yet made.
CREATE TABLE probe_results_default PARTITION OF probe_results DEFAULT;
CREATE INDEX probe_results_check_at_idx ON probe_results (check_id, at);

-- Hourly rollups of uptime probes (all figures of statistics, meta and the status page).
CREATE TABLE check_rollups_hourly (
    check_id        bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    hour            timestamptz NOT NULL,
    probes          integer     NOT NULL DEFAULT 0,
    responses       integer     NOT NULL DEFAULT 0,   -- probes that got an HTTP response
    failures        integer     NOT NULL DEFAULT 0,
    response_ms_sum double precision NOT NULL DEFAULT 0,
    response_ms_max real        NOT NULL DEFAULT 0,
    PRIMARY KEY (check_id, hour)
);

-- Cluster nodes (one per running engine instance).
CREATE TABLE nodes (
    id              text        PRIMARY KEY,
    region          text        NOT NULL,
    url             text        NOT NULL,
    version         text        NOT NULL,
    started_at      timestamptz NOT NULL DEFAULT now(),
    heartbeat_at    timestamptz NOT NULL DEFAULT now(),
    stopping        boolean     NOT NULL DEFAULT false
);

-- Durable webhook queue: one row per event, written in the transaction of the state change.
CREATE TABLE webhook_events (
    id              bigserial PRIMARY KEY,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    -- No foreign key: an alert about a monitor deleted later is still delivered and logged.
    monitor_id      bigint      NOT NULL,
    check_id        bigint,
    event           text        NOT NULL CHECK (event IN (
                        'downtime', 'uptime_restored', 'certificate_invalid',
                        'certificate_recovered', 'certificate_renewal_due')),
    -- For uptime_restored / certificate_recovered: the event that opened the incident.
    -- Null otherwise (X-Service-Parent-Webhook is then the event's own id).
    parent_id       bigint,
    body            bytea       NOT NULL,            -- the exact bytes signed and sent
    status          text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    tries           integer     NOT NULL DEFAULT 0,
    next_try_at     timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_status_code integer,
    last_error      text
);
CREATE INDEX webhook_events_due_idx ON webhook_events (next_try_at) WHERE status = 'pending';
CREATE INDEX webhook_events_monitor_pending_idx ON webhook_events (monitor_id, id) WHERE status = 'pending';
CREATE INDEX webhook_events_account_idx ON webhook_events (account_id, id DESC);
