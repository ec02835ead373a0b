-- A certificate check remembers every certificate a renewal-due webhook was sent for, not
-- only the last, so that a server going back to an earlier certificate does not announce
-- it again. SHA-256 fingerprints (hex), oldest first, bounded by the engine
-- (engine/domain/evaluate.py RENEWAL_MEMORY).
ALTER TABLE checks
    ADD COLUMN renewal_notified_fingerprints text[] NOT NULL DEFAULT '{}';

UPDATE checks
SET renewal_notified_fingerprints = ARRAY[renewal_notified_fingerprint]
WHERE renewal_notified_fingerprint IS NOT NULL;

ALTER TABLE checks DROP COLUMN renewal_notified_fingerprint;
