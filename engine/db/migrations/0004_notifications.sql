-- Notification channels: Apprise URLs an account's events are sent to, beside the
-- account webhook, through the same outbox (engine/db/outbox.py).
--
-- url holds passwords and tokens: it is encrypted with the installation's key
-- (engine/runtime/secretbox.py) and answers show it masked (engine/delivery/notify/urls.py).
-- group_until / group_sent are the channel's alert-storm window: the first
-- UPWATCH_NOTIFY_GROUP_MAX events of a window go one by one, the rest wait for its end and go
-- as one digest. Only the claims of the channel's rows write them (one claim at a time per
-- channel); the state changes that queue rows never lock the channel.
CREATE TABLE notification_channels (
    id              bigserial PRIMARY KEY,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    name            text        NOT NULL,
    url             text        NOT NULL,
    events          text[]      NOT NULL,
    monitor_ids     bigint[],                     -- NULL: every monitor of the account
    is_enabled      boolean     NOT NULL DEFAULT true,
    group_until     timestamptz,
    group_sent      integer     NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_channels_account_idx ON notification_channels (account_id, id);

-- One row per event and channel; ordered per channel (the claim takes only a channel's oldest
-- pending row), so a dead mail server holds back only its own channel, and a digest's rows
-- (same channel and group_until) are claimed together as one message.
CREATE TABLE notification_events (
    id              bigserial PRIMARY KEY,
    account_id      bigint      NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    channel_id      bigint      NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    -- No foreign key: an alert about a monitor deleted later is still delivered and logged.
    monitor_id      bigint      NOT NULL,
    check_id        bigint,
    event           text        NOT NULL CHECK (event IN (
                        'downtime', 'uptime_restored', 'certificate_invalid',
                        'certificate_recovered', 'certificate_renewal_due')),
    body            bytea       NOT NULL,            -- the webhook body of the same event
    identifier      text,                            -- the monitor's status page
    since           timestamptz,                     -- downtime: when the failures began
    group_until     timestamptz,                     -- set: part of the digest of that window
    status          text        NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'delivered', 'failed')),
    tries           integer     NOT NULL DEFAULT 0,
    next_try_at     timestamptz NOT NULL DEFAULT now(),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    last_status_code integer,
    last_error      text
);
CREATE INDEX notification_events_due_idx ON notification_events (next_try_at)
    WHERE status = 'pending';
CREATE INDEX notification_events_channel_pending_idx ON notification_events (channel_id, id)
    WHERE status = 'pending';

-- The tries, one row per try of a message (a digest's try is one row), newest first in
-- GET /webapi/notification-channels/{id}/deliveries.
CREATE TABLE notification_deliveries (
    id              bigserial PRIMARY KEY,
    channel_id      bigint      NOT NULL REFERENCES notification_channels (id) ON DELETE CASCADE,
    event_id        bigint      NOT NULL,
    event           text        NOT NULL,
    monitor_id      bigint,                          -- NULL for a digest
    attempt         integer     NOT NULL,
    delivered       boolean     NOT NULL,
    detail          text,
    created_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX notification_deliveries_channel_idx ON notification_deliveries (channel_id, id DESC);
