-- Alerts people trust: confirmed recoveries, maintenance windows, certificates
-- judged by their lifetime and remembered by fingerprint.

-- Confirmed recovery: seconds of good probes before uptime_restored (0 = at once, the seed's
-- behaviour), and when the current run of good probes of a down check began.
ALTER TABLE checks
    ADD COLUMN recovery_threshold_s integer NOT NULL DEFAULT 0
        CHECK (recovery_threshold_s BETWEEN 0 AND 86400),
    ADD COLUMN recovering_since timestamptz,
    -- Certificate: renewal due when less than this percent of the certificate's own lifetime
    -- is left (0 = off); beside the day threshold (notification_threshold_s).
    ADD COLUMN expiry_threshold_percent smallint NOT NULL DEFAULT 0
        CHECK (expiry_threshold_percent BETWEEN 0 AND 100),
    -- SHA-256 fingerprint (hex) of the certificate a renewal-due was sent for.
    ADD COLUMN renewal_notified_fingerprint text;

-- Maintenance windows of an account: for every monitor of it (all_monitors), or for the
-- monitors listed in maintenance_window_monitors. One-off (starts_at, ends_at, UTC) or weekly
-- (weekday 0 = Monday .. 6, local start_time in time_zone, duration_s).
CREATE TABLE maintenance_windows (
    id              bigserial PRIMARY KEY,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    all_monitors    boolean     NOT NULL,
    reason          text        NOT NULL DEFAULT '',
    starts_at       timestamptz,
    ends_at         timestamptz,
    weekday         smallint    CHECK (weekday BETWEEN 0 AND 6),
    start_time      time,
    duration_s      integer     CHECK (duration_s > 0 AND duration_s <= 7 * 86400),
    time_zone       text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CHECK (
        (starts_at IS NOT NULL AND ends_at IS NOT NULL AND ends_at > starts_at
         AND weekday IS NULL AND start_time IS NULL AND duration_s IS NULL AND time_zone IS NULL)
        OR
        (starts_at IS NULL AND ends_at IS NULL AND weekday IS NOT NULL
         AND start_time IS NOT NULL AND duration_s IS NOT NULL AND time_zone IS NOT NULL)
    )
);
CREATE INDEX maintenance_windows_account_idx ON maintenance_windows (account_id, id);

CREATE TABLE maintenance_window_monitors (
    window_id       bigint      NOT NULL REFERENCES maintenance_windows (id) ON DELETE CASCADE,
    monitor_id      bigint      NOT NULL REFERENCES monitors (id) ON DELETE CASCADE,
    PRIMARY KEY (window_id, monitor_id)
);
CREATE INDEX maintenance_window_monitors_monitor_idx ON maintenance_window_monitors (monitor_id);

-- Every certificate a certificate check has seen, by SHA-256 fingerprint: a renewal, a
-- swapped issuer or a rollback shows as rows with their first and last sightings.
CREATE TABLE check_certificates (
    check_id            bigint      NOT NULL REFERENCES checks (id) ON DELETE CASCADE,
    fingerprint_sha256  text        NOT NULL,
    serial              text        NOT NULL,
    issuer              text,
    subject             text,
    key_type            text,
    signature_algorithm text,
    valid_from          timestamptz,
    valid_to            timestamptz,
    first_seen_at       timestamptz NOT NULL,
    last_seen_at        timestamptz NOT NULL,
    PRIMARY KEY (check_id, fingerprint_sha256)
);
