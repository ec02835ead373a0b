"""The check engine: every enabled check this node owns in one timing wheel, due checks
probed through their kind under bounded concurrency, outcomes judged, results written in
batches and state changes with their events in one transaction each.

``engine`` wires the parts: ``catalog`` (which checks: load, LISTEN through ``listening``,
resync), ``dispatch`` (when: the wheel, in-flight and per-host limits), ``flow`` (one probe:
kind, judge, row, confirmation through ``confirm``), ``transitions`` (commits, and the
backlog while the database is out), ``results`` (the batched writer), ``load`` (cost per
probe, the engine's share of its core, capacity and overload, judged once a second);
``wheel`` and ``calendar`` (maintenance windows) are theirs. Decisions stay pure in
:mod:`engine.domain`.

May import :mod:`engine.db` and everything below it; never cluster, delivery or web.
"""
