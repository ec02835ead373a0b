"""Signed webhooks: the outbox sender and runner (``deliverer``), the HTTP client that
checks every address it connects to (``http``), and the signatures (``signing``)."""
