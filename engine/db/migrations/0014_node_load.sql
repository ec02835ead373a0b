-- Each node's load as of its last heartbeat (engine/scheduler/load.py): probes asked and
-- done per second, capacity, ratio, overloaded, cost per probe by kind. NULL: no engine.
ALTER TABLE nodes ADD COLUMN load jsonb;
