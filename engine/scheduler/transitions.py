"""Transitions: each judged probe's state change, written or held.

:meth:`TransitionWriter.commit` persists a transition and advances the check's in-memory
state. Transitions with effects (outages, webhook events, failure bookkeeping: ``durable``)
are written at once, one transaction each; the others go to the results writer's batches.
While the database is unavailable a transition is held in memory instead (the backlog, in
the order they happened, bounded by ``BACKLOG_LIMIT``) and the check's state moves on, so a
site that goes down during a database outage is confirmed and alerted from its first failed
probe. Ids the store would have created meanwhile (an outage opened, the incident's event)
are negative placeholders until the backlog is written, in order, once the database is back
(:meth:`TransitionWriter.run`); the webhook events are queued then. Past the bound, a
transition is not held, DatabaseUnavailable propagates and the check's state does not move.
A transition of a check that changed meanwhile (the API wins) is discarded.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from engine.domain.evaluate import CheckState, Transition
from engine.kinds.scheduled import ScheduledCheck, Touch
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.metrics import Metrics
from engine.scheduler.results import ResultsWriter
from engine.scheduler.waiting import wait_any

log = logging.getLogger(__name__)

BACKLOG_LIMIT = 100_000  # transitions held in memory while the database is unavailable
BACKLOG_RETRY_FIRST = 0.2  # seconds before the backlog is first tried again; doubles...
BACKLOG_RETRY_MAX = 5.0  # ...up to this


class TransitionStore(Protocol):
    async def apply_transition(
        self, check_id: int, config_version: int, tr: Transition
    ) -> Any: ...


@dataclass(slots=True)
class _Unwritten:
    """A transition of ``check`` (under ``version``) held until the database is back."""

    check: ScheduledCheck
    version: int
    tr: Transition


def is_current(checks: Mapping[int, ScheduledCheck], c: ScheduledCheck, version: int) -> bool:
    """True while ``c`` is still the catalog's entry, under the version it started with."""
    return checks.get(c.id) is c and c.config_version == version


class TransitionWriter:
    """See the module docstring. ``checks`` is the catalog's, ``in_flight`` the
    dispatcher's (both read only here); ``stale(check_id)`` asks the catalog to reload a
    check the database has changed."""

    def __init__(
        self,
        store: TransitionStore,
        results: ResultsWriter,
        checks: Mapping[int, ScheduledCheck],
        in_flight: Mapping[int, Any],
        *,
        metrics: Metrics,
        stale: Callable[[int], None],
    ) -> None:
        self._store = store
        self._results = results
        self._checks = checks
        self._in_flight = in_flight
        self._metrics = metrics
        self._stale = stale
        self._backlog: deque[_Unwritten] = deque()
        # Check id -> entries it has in the backlog (the flow reads it: a check with held
        # transitions takes no steady path).
        self.backlog_of: dict[int, int] = {}
        self._backlog_tail: dict[int, _Unwritten] = {}  # a check's last entry, to coalesce
        self._backlog_wake = asyncio.Event()
        self._placeholders = itertools.count(-1, -1)
        self._real_ids: dict[int, int] = {}  # placeholder -> id the store gave it

    def __len__(self) -> int:
        """Transitions held in memory, waiting for the database."""
        return len(self._backlog)

    def _current(self, c: ScheduledCheck, version: int) -> bool:
        return self._checks.get(c.id) is c and c.config_version == version

    async def commit(self, c: ScheduledCheck, version: int, tr: Transition) -> bool:
        """Persist ``tr`` and advance the in-memory state; False when it was discarded
        because the check changed meanwhile (the API wins; a reload follows). While the
        database is unavailable the transition is held in the backlog instead; when that is
        full, DatabaseUnavailable propagates and the state does not move."""
        if not self._current(c, version):
            return False
        prev = c.state.status
        held = False
        self._resolve(tr)
        if c.id in self.backlog_of or (tr.durable and self._backlog):
            # Behind this check's held transitions (their order is kept), or the database
            # is known to be away: no connection attempt per probe.
            if not self._hold(c, version, tr):
                raise DatabaseUnavailable("the database is unavailable and the backlog full")
            held = True
        elif tr.durable:
            try:
                state = await self._store.apply_transition(c.id, version, tr)
            except DatabaseUnavailable as exc:
                if not self._current(c, version):
                    return False
                if not self._hold(c, version, tr):
                    raise
                log.warning("cannot write check state, holding state changes in memory until "
                            "the database is back: %s", exc)
                held = True
            else:
                if state is None:
                    self._stale(c.id)
                    return False
                if not self._current(c, version):
                    return False
                self._results.forget(c.id)  # older than what was just written
                c.state.copy_from(state)
        else:
            s = tr.state
            assert s.last_check_at is not None
            self._results.touch(c.id, Touch(version, s.last_check_at, s.status, s.error, tr.meta))
            c.state.copy_from(s)
        if c.state.status != prev:
            metrics = self._metrics
            metrics.transitions.labels(kind=c.kind, status=c.state.status).inc()
            metrics.checks_by_status.child(c.kind, prev).dec()
            metrics.checks_by_status.child(c.kind, c.state.status).inc()
            # One line per state change and per alert, with the monitor id operators search by.
            log.info(
                "check %s %s -> %s", c.kind, prev, c.state.status,
                extra={"monitor_id": c.monitor_id, "check_id": c.id, "error": c.state.error},
            )
        for ev in tr.events:
            log.warning(
                "webhook held until the database is back: %s" if held else "webhook queued: %s",
                ev.event,
                extra={"monitor_id": c.monitor_id, "check_id": c.id, "event": ev.event},
            )
        return True

    # -- the backlog: transitions held while the database is unavailable -------------------------

    def _hold(self, c: ScheduledCheck, version: int, tr: Transition) -> bool:
        """Hold ``tr`` for writing later and advance the in-memory state; False (nothing
        held, state unchanged) when the backlog is full."""
        tail = self._backlog_tail.get(c.id)
        if not tr.durable and tail is not None and tail.check is c and not tail.tr.durable:
            # Only status/error/meta/last_check_at changed, twice: the newer one stands.
            tail.tr = tr
        else:
            if len(self._backlog) >= BACKLOG_LIMIT:
                return False
            # Ids the store would create now: placeholders until the backlog is written.
            if tr.open_outage is not None:
                tr.state.outage_id = next(self._placeholders)
            if any(ev.opens_incident for ev in tr.events):
                tr.state.incident_event_id = next(self._placeholders)
            entry = _Unwritten(c, version, tr)
            self._backlog.append(entry)
            self.backlog_of[c.id] = self.backlog_of.get(c.id, 0) + 1
            self._backlog_tail[c.id] = entry
        self._results.forget(c.id)  # older than what is held
        c.state.copy_from(tr.state)
        self._backlog_wake.set()
        return True

    def _resolve(self, tr: Transition) -> None:
        """Replace placeholders in ``tr`` whose real ids are known by now."""
        ids = self._real_ids
        if not ids:
            return
        if tr.close_outage_id is not None and tr.close_outage_id < 0:
            tr.close_outage_id = ids.get(tr.close_outage_id, tr.close_outage_id)
        _resolve_state(tr.state, ids)
        for ev in tr.events:
            if ev.parent_id is not None and ev.parent_id < 0:
                ev.parent_id = ids.get(ev.parent_id, ev.parent_id)

    async def run(self, stop: asyncio.Event) -> None:
        """Writes the backlog once the database is back, retrying with back-off."""
        backoff = BACKLOG_RETRY_FIRST
        while not stop.is_set():
            if not self._backlog:
                self._backlog_wake.clear()
                await wait_any(stop, self._backlog_wake, timeout=None)
                backoff = BACKLOG_RETRY_FIRST
                continue
            await wait_any(stop, timeout=backoff)  # held because a write just failed
            if stop.is_set():
                return
            try:
                await self._replay(stop)
            except DatabaseUnavailable:
                backoff = min(backoff * 2, BACKLOG_RETRY_MAX)
            except Exception:  # this loop must outlive any one failure
                log.exception("writing held state changes failed; retrying")
                backoff = min(backoff * 2, BACKLOG_RETRY_MAX)

    async def _replay(self, stop: asyncio.Event | None = None) -> None:
        """Write the backlog in order, one transaction per transition, until it is empty
        (or ``stop``); raises DatabaseUnavailable when the database is still away."""
        written = 0
        while self._backlog and not (stop is not None and stop.is_set()):
            entry = self._backlog[0]
            c = entry.check
            if not self._current(c, entry.version):
                # Dropped or reconfigured since: the API's change wins, as for a live probe.
                self._forget_backlog(c)
                continue
            if self._backlog_tail.get(c.id) is entry:
                del self._backlog_tail[c.id]  # being written: nothing may coalesce into it
            tr = entry.tr
            self._resolve(tr)
            opened = tr.state.outage_id if tr.open_outage is not None else None
            incident = (tr.state.incident_event_id
                        if any(ev.opens_incident for ev in tr.events) else None)
            state = await self._store.apply_transition(c.id, entry.version, tr)
            self._backlog.popleft()
            n = self.backlog_of.get(c.id, 1) - 1
            if n > 0:
                self.backlog_of[c.id] = n
            else:
                self.backlog_of.pop(c.id, None)
            if state is None:  # the check changed in the database meanwhile
                self._forget_backlog(c)
                self._stale(c.id)
                continue
            written += 1
            if opened is not None and opened < 0 and state.outage_id is not None:
                self._real_ids[opened] = state.outage_id
            if incident is not None and incident < 0 and state.incident_event_id is not None:
                self._real_ids[incident] = state.incident_event_id
            if self._current(c, entry.version):
                _resolve_state(c.state, self._real_ids)
        if written:
            log.info("database back: wrote %d state changes held during the outage", written)
        if not self._backlog and not self._in_flight:
            self._real_ids.clear()  # no probe can hold a placeholder any more

    def _forget_backlog(self, check: ScheduledCheck) -> None:
        """Drop every held transition of this entry of the check (not those of an entry
        that replaced it: they were evaluated from the state the database gave it)."""
        if check.id not in self.backlog_of:
            return
        tail = self._backlog_tail.get(check.id)
        if tail is not None and tail.check is check:
            del self._backlog_tail[check.id]
        self._backlog = deque([e for e in self._backlog if e.check is not check])
        left = sum([1 for e in self._backlog if e.check.id == check.id])
        if left:
            self.backlog_of[check.id] = left
        else:
            del self.backlog_of[check.id]

    async def drain(self, timeout: float) -> None:
        """On stop: a last try (within ``timeout``) to write what is held."""
        if not self._backlog:
            return
        with contextlib.suppress(DatabaseUnavailable, TimeoutError):
            await asyncio.wait_for(self._replay(), timeout)
        if self._backlog:
            log.error("stopping with %d state changes not written (the database is "
                      "unavailable); the next probes evaluate them again", len(self._backlog))


def _resolve_state(state: CheckState, ids: dict[int, int]) -> None:
    if state.outage_id is not None and state.outage_id < 0:
        state.outage_id = ids.get(state.outage_id, state.outage_id)
    if state.incident_event_id is not None and state.incident_event_id < 0:
        state.incident_event_id = ids.get(state.incident_event_id, state.incident_event_id)

