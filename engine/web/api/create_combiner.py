"""Concurrent ``POST /webapi/monitors`` of one account share a transaction.

Why: a create holds its account's row lock (engine.db.monitors ``SQL_LOCK_ACCOUNT``) until
its commit has been flushed to disk, so that two creates at once cannot both pass the
monitor limit. Creates of one account therefore run one after the other, each waiting for
its own fsync: about 125 a second however many clients send them. Here the creates that
arrive while one account's transaction runs wait for it and then go together in the next
one (:meth:`engine.db.monitor_batches.MonitorBatchesMixin.create_monitors`): one lock, one
count, a few statements and ONE flush for the batch. The limit stays exact (the batch
counts under the lock and refuses, in arrival order, what would pass it) and every 201 still
follows a durable commit that holds that monitor.

One request at a time pays nothing: it finds nobody ahead and runs alone at once.

Batches run in a task of their own, not in any request: a client that goes away mid-batch
(aiohttp may cancel its handler) must not roll back the monitors of the others.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from engine.db.monitor_records import MonitorRecord
from engine.db.store import Store
from engine.monitors.checkset import UPTIME, checks_of, enabled_on_create
from engine.monitors.domain_settings import interval_on_create
from engine.monitors.plan import CheckSettings, MonitorSpec
from engine.monitors.validation import MonitorCreate
from engine.runtime.errors import LimitReached

# Creates per transaction at most: bounds one transaction's time and arrays; far above what
# api_concurrency lets wait at once.
MAX_BATCH = 500

# Loop turns a batch waits for more creates when the previous batch had several.
LINGER_TURNS = 3

_Outcome = tuple[MonitorRecord | None, BaseException | None]


@dataclass(slots=True)
class _Waiting:
    spec: MonitorSpec
    limit: int
    done: asyncio.Future[_Outcome]


@dataclass(slots=True)
class _Account:
    queue: list[_Waiting] = field(default_factory=list)
    task: asyncio.Task[None] | None = None  # the account's batches, one after the other
    last_batch: int = 0


class CreateCombiner:
    """``await combiner.create(account_id, spec, limit)``: a MonitorRecord, or the store's
    exception (LimitReached, NotFound, DatabaseUnavailable, ...) for this create alone.

    An account with creates waiting has one task that runs their batches one after the
    other and ends when none wait; a request waits only for the batch that holds it."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._accounts: dict[int, _Account] = {}

    async def create(self, account_id: int, spec: MonitorSpec, limit: int) -> MonitorRecord:
        acc = self._accounts.get(account_id)
        if acc is None:
            acc = self._accounts[account_id] = _Account()
        me = _Waiting(spec, limit, asyncio.get_running_loop().create_future())
        acc.queue.append(me)
        if acc.task is None:
            acc.task = asyncio.create_task(
                self._drain(account_id, acc), name=f"monitor-creates-{account_id}")
        # Shielded: a client that goes away leaves its create to its batch (it may still
        # be made, as a create whose answer was lost), and the batch to the others.
        record, exc = await asyncio.shield(me.done)
        if exc is not None:
            raise exc
        assert record is not None
        return record

    async def _drain(self, account_id: int, acc: _Account) -> None:
        first = True
        try:
            while acc.queue:
                if not first or acc.last_batch > 1:
                    # Creates come several at a time (some arrived while the last batch
                    # ran): let the requests already on their way reach the queue (a few
                    # turns of the loop, no timer), so that one statement and one flush
                    # serve more of them. A lone create, the usual case, never waits.
                    for _ in range(LINGER_TURNS):
                        await asyncio.sleep(0)
                first = False
                batch, acc.queue[:MAX_BATCH] = acc.queue[:MAX_BATCH], []
                acc.last_batch = len(batch)
                await self._run(account_id, batch)
        finally:
            acc.task = None
            if self._accounts.get(account_id) is acc:
                del self._accounts[account_id]
            for w in acc.queue:  # only when cancelled (shutdown): nobody will run these
                if not w.done.done():
                    w.done.set_result((None, asyncio.CancelledError()))

    async def _run(self, account_id: int, batch: list[_Waiting]) -> None:
        """Run one batch and give each waiter its outcome; never raises but to be
        cancelled (each waiter raises its own outcome)."""
        try:
            results = await self._store.create_monitors(
                account_id, [(w.spec, w.limit) for w in batch])
        except BaseException as exc:
            for w in batch:
                if not w.done.done():
                    w.done.set_result((None, exc))
            if isinstance(exc, Exception):
                return
            raise
        for w, result in zip(batch, results, strict=True):
            if not w.done.done():
                if isinstance(result, LimitReached):
                    w.done.set_result((None, result))
                else:
                    w.done.set_result((result, None))


def spec_of(command: MonitorCreate, request: Any = None, assertions: Any = None
            ) -> MonitorSpec:
    """A validated create body as the monitor it makes, with the checks
    ``checkset.checks_of`` gives it: the uptime check enabled with the body's settings,
    the others at ``certificate_interval``, enabled as ``checkset.enabled_on_create``
    says (a certificate check: for an https URL only), no threshold, no key;
    ``request``/``assertions`` in their stored forms."""
    t = command.target
    checks = {
        kind: CheckSettings(command.interval, command.notification_threshold, True)
        if kind == UPTIME else
        CheckSettings(interval_on_create(kind, command.certificate_interval), 0,
                      enabled_on_create(kind, t.scheme))
        for kind in checks_of(t.scheme, t.host)
    }
    return MonitorSpec(
        key=None, url=t.url, scheme=t.scheme, host=t.host, port=t.port, alias=command.alias,
        checks=checks, request=request, assertions=assertions)


CREATE_COMBINER = web.AppKey("create_combiner", CreateCombiner)
