"""Several instances on one database: node heartbeats and liveness (``nodes``), which node
owns which check (``ownership``, pure), and the signed peer protocol through which a node
of another region confirms an outage (``peer``, ``peerauth``).

May import :mod:`engine.scheduler` (the confirmer it answers with), :mod:`engine.db` and
everything below it.
"""
