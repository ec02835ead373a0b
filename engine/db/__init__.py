"""PostgreSQL, the only store: the pool, numbered ``.sql`` migrations, the embedded server
and its lease, the store's areas (one mixin per area, combined in ``store.Store``), the
durable outbox queue, upkeep (result partitions, roll-ups), and backup and restore
through PostgreSQL's own tools.

All SQL lives here, as named queries; only public store methods open transactions. May
import :mod:`engine.kinds`, :mod:`engine.monitors`, :mod:`engine.domain` and
:mod:`engine.runtime`.
"""
