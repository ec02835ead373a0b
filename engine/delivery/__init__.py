"""Getting events to people, never losing one: the outbox runner over a durable queue
(``outbox``), its retry policy (``policy``), and its two senders: signed webhooks
(``webhooks``) and Apprise notification channels (``notify``).

May import :mod:`engine.db` and everything below it; nothing of the scheduler or the web.
"""
