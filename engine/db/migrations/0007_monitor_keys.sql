-- Monitors as code (upwatch apply / PUT /webapi/monitors): a file names each monitor by its
-- URL or by an optional key of its own, so that a monitor can change its URL in the file
-- and keep its history. At most one monitor of an account has a given key.
ALTER TABLE monitors ADD COLUMN key text;
CREATE UNIQUE INDEX monitors_account_key_idx ON monitors (account_id, key) WHERE key IS NOT NULL;

-- The monitor count of account p_account under its create lock (the row lock of
-- engine/db/monitors.py SQL_LOCK_ACCOUNT), or NULL when the account does not exist.
-- A function so that a create of many monitors is ONE statement (engine/db/monitor_batches.py
-- SQL_CREATE_MONITORS): a plain statement would count with the snapshot it took before it
-- waited for the lock, missing the monitors of the create it waited for. In a VOLATILE
-- function every statement takes a fresh snapshot, so the count follows the lock.
CREATE FUNCTION upwatch_lock_monitor_count(p_account bigint) RETURNS bigint
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n bigint;
BEGIN
    PERFORM 1 FROM accounts WHERE id = p_account FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO n FROM monitors WHERE account_id = p_account;
    RETURN n;
END
$$;
