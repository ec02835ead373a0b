"""PostgreSQL access: the pool, migrations, the embedded server and the store.

Only :mod:`engine.db.store` runs SQL; everything else calls its public methods.
"""
