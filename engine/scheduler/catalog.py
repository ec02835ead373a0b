"""The catalog: which checks this node probes, and their configuration.

Loads every enabled check this node owns at start (in pages, probes of the first pages
starting while the rest load), then follows changes: LISTEN ``upwatch_checks`` names a
changed check, reloaded by id within ~50 ms of the notification; a periodic cheap resync of
(id, config_version) pairs, which also runs after every (re)connection of the listener, finds
what a lost notification hid. A check loaded anew (new, reconfigured) replaces the old entry
(a new object: ``config_version`` never changes in place) and is handed to ``adopted``; a
deleted, disabled or no longer owned one is forgotten and handed to ``dropped``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from engine.kinds.scheduled import ScheduledCheck
from engine.monitors.requestspecs import SpecBuilder
from engine.runtime.errors import DatabaseUnavailable
from engine.scheduler.listening import hold
from engine.scheduler.waiting import wait_any

log = logging.getLogger(__name__)

PAGE = 5000  # checks per page when loading or resyncing
RELOAD_COALESCE = 0.02  # gather a burst of notifications into one reload query
FREEZE_AFTER = 5000  # checks adopted by reloads before the GC is told to skip them again


class CatalogStore(Protocol):
    async def load_checks_page(self, after_id: int, limit: int) -> list[ScheduledCheck]: ...
    async def load_checks(self, ids: Iterable[int]) -> list[ScheduledCheck]: ...
    async def enabled_check_versions_page(
        self, after_id: int, limit: int
    ) -> list[tuple[int, int]]: ...
    def listen_checks(
        self, on_change: Callable[[int], None]
    ) -> contextlib.AbstractAsyncContextManager[Any]: ...


def _nothing(*args: Any) -> None:
    return None


class Catalog:
    """See the module docstring. ``checks`` (id -> check) is read by the other parts;
    only the catalog changes it. ``owns(check_id)`` filters the checks this node probes;
    ``freeze`` is called after the first load and after large reloads (long-lived objects
    to move out of the GC's reach)."""

    def __init__(
        self,
        store: CatalogStore,
        specs: SpecBuilder,
        *,
        owns: Callable[[int], bool],
        resync_interval: float,
        freeze: Callable[[], None] = _nothing,
    ) -> None:
        self._store = store
        self._specs = specs
        self._owns = owns
        self._resync_interval = resync_interval
        self._freeze = freeze
        self.checks: dict[int, ScheduledCheck] = {}
        # (new, old or None): a check to schedule; (old): a check to forget.
        self.adopted: Callable[[ScheduledCheck, ScheduledCheck | None], None] = _nothing
        self.dropped: Callable[[ScheduledCheck], None] = _nothing
        self._reload_ids: set[int] = set()
        self._reload_wake = asyncio.Event()
        self._resync_wake = asyncio.Event()
        self._adopted_unfrozen = 0
        self.loaded = asyncio.Event()  # set once the first full load is done

    def request_resync(self) -> None:
        """Resync with the database soon (e.g. the cluster's ownership changed)."""
        self._resync_wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Follow changes (LISTEN, reloads, resyncs) until ``stop``; after :meth:`load`."""
        await asyncio.gather(self._listener(stop), self._reloader(stop), self._resyncer(stop))

    async def load(self, stop: asyncio.Event) -> None:
        backoff = 0.2
        while not stop.is_set():
            try:
                after = 0
                while True:
                    page = await self._store.load_checks_page(after, PAGE)
                    for c in page:
                        self._adopt(c)
                    if len(page) < PAGE:
                        break
                    after = page[-1].id
                    await asyncio.sleep(0)  # let probes of the first pages start
                self.loaded.set()
                log.info("engine loaded %d checks", len(self.checks))
                self._adopted_unfrozen = 0
                self._freeze()
                return
            except DatabaseUnavailable as exc:
                log.warning("cannot load checks, retrying: %s", exc)
            await wait_any(stop, timeout=backoff)  # outside the handler: see _reloader
            backoff = min(backoff * 2, 5.0)

    def _adopt(self, new: ScheduledCheck) -> None:
        """Install a check as loaded from the database (new, reconfigured or unchanged)."""
        if not self._owns(new.id):
            self._drop(new.id)
            return
        old = self.checks.get(new.id)
        if old is not None and old.config_version == new.config_version:
            # Unchanged: the in-memory state may be ahead of batched writes, keep it.
            return
        self._adopted_unfrozen += 1
        if new.configured is not None:
            new.request = self._specs.build(new.configured, new.account_id, new.url)
        # A monitor's two checks share its URL string. They are created together, ids one
        # apart; URLs are not interned, which cost an entry of the interpreter's table
        # (~45 B) per monitor, most of which have one enabled check.
        for sibling_id in (new.id - 1, new.id + 1):
            sibling = self.checks.get(sibling_id)
            if sibling is not None and sibling.monitor_id == new.monitor_id:
                if sibling.url == new.url:
                    new.url = sibling.url
                break
        self.checks[new.id] = new
        self.adopted(new, old)

    def _drop(self, check_id: int) -> None:
        """Forget a deleted, disabled or no longer owned check. A probe of it still running
        finishes without writing anything (it sees it was dropped)."""
        old = self.checks.pop(check_id, None)
        if old is not None:
            self.dropped(old)

    def stale(self, check_id: int) -> None:
        """Reload ``check_id`` soon (a notification, or the database refused a write)."""
        self._reload_ids.add(check_id)
        self._reload_wake.set()

    async def _reloader(self, stop: asyncio.Event) -> None:
        """Reloads the checks named by notifications (and by the resync), in batches."""
        backoff = 0.2
        while not stop.is_set():
            await wait_any(stop, self._reload_wake, timeout=None)
            if stop.is_set():
                return
            await asyncio.sleep(RELOAD_COALESCE)
            self._reload_wake.clear()
            ids, self._reload_ids = self._reload_ids, set()
            try:
                await self._reload(ids)
                backoff = 0.2
                continue
            except Exception as exc:  # this loop must outlive any one failure
                if isinstance(exc, DatabaseUnavailable):
                    log.warning("cannot reload checks, retrying: %s", exc)
                else:
                    log.exception("reloading checks failed; retrying")
                self._reload_ids |= ids
            # The backoff waits outside the handler: this module is compiled, and a compiled
            # coroutine must not await while it handles an exception (runtime/compiled.py).
            await wait_any(stop, timeout=backoff)
            backoff = min(backoff * 2, 5.0)
            self._reload_wake.set()

    async def _reload(self, ids: set[int]) -> None:
        todo = sorted(ids)
        for i in range(0, len(todo), PAGE):
            chunk = todo[i : i + PAGE]
            found = await self._store.load_checks(chunk)
            seen = set()
            for c in found:
                seen.add(c.id)
                self._adopt(c)
            for check_id in chunk:
                if check_id not in seen:
                    self._drop(check_id)
        if self._adopted_unfrozen >= FREEZE_AFTER:
            self._adopted_unfrozen = 0
            self._freeze()

    async def _resyncer(self, stop: asyncio.Event) -> None:
        interval = self._resync_interval
        while not stop.is_set():
            await wait_any(stop, self._resync_wake, timeout=interval)
            if stop.is_set():
                return
            self._resync_wake.clear()
            try:
                await self.resync()
            except DatabaseUnavailable as exc:
                log.warning("resync failed, will retry: %s", exc)
            except Exception:
                log.exception("resync failed; will retry")

    async def resync(self) -> None:
        """Compare (id, config_version) of every enabled check with what the engine holds and
        queue a reload of each difference; the reload by id is what adds, changes or drops."""
        enabled: set[int] = set()
        stale: set[int] = set()
        after = 0
        while True:
            page = await self._store.enabled_check_versions_page(after, PAGE * 2)
            for check_id, version in page:
                if not self._owns(check_id):
                    continue
                enabled.add(check_id)
                c = self.checks.get(check_id)
                if c is None or c.config_version != version:
                    stale.add(check_id)
            if len(page) < PAGE * 2:
                break
            after = page[-1][0]
            await asyncio.sleep(0)
        for check_id in list(self.checks):
            if not self._owns(check_id):
                self._drop(check_id)
            elif check_id not in enabled:
                stale.add(check_id)  # probably gone; the reload by id decides
        if stale:
            self._reload_ids |= stale
            self._reload_wake.set()

    async def _listener(self, stop: asyncio.Event) -> None:
        """Holds LISTEN upwatch_checks; after every (re)connection a full resync runs, since
        notifications sent while not listening are lost."""
        await hold(lambda: self._store.listen_checks(self.stale), self._resync_wake.set, stop,
                   "check changes")
