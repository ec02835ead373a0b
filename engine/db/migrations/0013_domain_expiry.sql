-- The domain_expiry check: what registries said about each registrable domain (shared by
-- every monitor and account on it), the check's thresholds, and the check on existing
-- monitors whose URL has a host name (not dns://, whose host is the server asked).

-- Adds a value to the `<column> IN (...)` CHECK constraint of a table, keeping whatever
-- values other migrations added: the constraint is rebuilt from its own definition.
CREATE FUNCTION pg_temp.upwatch_allow(tbl text, col text, val text) RETURNS void AS $$
DECLARE
    con record;
    def text;
BEGIN
    FOR con IN
        SELECT c.conname, pg_get_constraintdef(c.oid) AS def
        FROM pg_constraint c
        WHERE c.conrelid = tbl::regclass AND c.contype = 'c'
          AND pg_get_constraintdef(c.oid) LIKE '%(' || col || ' = ANY (ARRAY[%'
    LOOP
        IF position(quote_literal(val) || '::text' IN con.def) > 0 THEN
            CONTINUE;
        END IF;
        def := replace(con.def, 'ARRAY[', 'ARRAY[' || quote_literal(val) || '::text, ');
        EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I', tbl, con.conname);
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', tbl, con.conname, def);
    END LOOP;
END;
$$ LANGUAGE plpgsql;

SELECT pg_temp.upwatch_allow('checks', 'kind', 'domain_expiry');
SELECT pg_temp.upwatch_allow('checks', 'status', 'unsupported');
SELECT pg_temp.upwatch_allow('webhook_events', 'event', e)
FROM unnest(ARRAY['domain_renewal_due', 'domain_invalid', 'domain_recovered']) AS e;
SELECT pg_temp.upwatch_allow('notification_events', 'event', e)
FROM unnest(ARRAY['domain_renewal_due', 'domain_invalid', 'domain_recovered']) AS e;

-- One row per registrable domain (example.co.uk), written by whichever node queried the
-- registry. A node refreshes a row only after claiming it (SELECT ... FOR UPDATE SKIP
-- LOCKED, then claimed_until), so two nodes never query for the same domain at once.
CREATE TABLE domain_registrations (
    domain          text        PRIMARY KEY,
    registrar       text,
    expires_at      timestamptz,
    statuses        text[]      NOT NULL DEFAULT '{}',   -- EPP status codes
    nameservers     text[]      NOT NULL DEFAULT '{}',
    server          text,                                -- the RDAP base URL that answered
    fetched_at      timestamptz,                         -- when the registry last answered
    tried_at        timestamptz,                         -- the last query, answered or not
    error           text,                                -- why the last query failed
    unsupported     text,                                -- why the domain has no RDAP
    claimed_until   timestamptz                          -- a node is querying until then
);

-- domain_expiry: the days before expiry a renewal-due event is sent at (NULL: 30, 14, 7, 1).
ALTER TABLE checks ADD COLUMN expiry_threshold_days smallint[];

INSERT INTO checks (monitor_id, kind, interval_s, notification_threshold_s, is_enabled, status)
SELECT m.id, 'domain_expiry', 14400, 0, true, 'pending'
FROM monitors m
WHERE m.scheme IN ('http', 'https', 'tls', 'smtp', 'imap', 'pop3', 'tcp', 'icmp')
  AND m.host !~ '^[0-9.]+$' AND position(':' IN m.host) = 0 AND position('.' IN m.host) > 0
ON CONFLICT (monitor_id, kind) DO NOTHING;
