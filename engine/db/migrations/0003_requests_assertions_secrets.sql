-- What "up" means. A monitor may carry its own request (method, headers, body,
-- follow_redirects) and assertions on the answer; NULL keeps the plain GET and today's rule.
-- Secret header values are stored as Fernet tokens (engine/runtime/secretbox.py), never in clear:
-- request = {"method": "POST", "headers": [[name, value, is_secret], ...], "body": "...",
--            "follow_redirects": true}
-- assertions = [{"source": ..., "property": ..., "comparison": ..., "target": ...}, ...]
ALTER TABLE monitors ADD COLUMN request jsonb;
ALTER TABLE monitors ADD COLUMN assertions jsonb;
