"""The check engine: every enabled check in one timing wheel, due probes run under limits.

Shape (why it scales to 50,000+ checks on one core):

- One :class:`~engine.scheduler.wheel.TimingWheel` holds every scheduled check; one
  scheduler loop sweeps it every 20 ms, pops what is due and starts a probe per due check:
  a probe without a task when its kind can (an uptime probe: ``HttpProber.start`` calls
  :meth:`Engine._started_done` back), else, and for whatever must wait on the database
  after a probe, a short-lived task. No check owns a timer or a long-lived task.
- Each check follows a stable phase of its interval (``first_due``), so checks of the same
  interval are spread evenly over it; a new, re-enabled or reset (``pending``) check is
  probed within about a second, then joins its phase.
- Limits: at most ``max_in_flight`` probes at once and ``per_host_limit`` per host. A check
  whose host is busy waits in that host's queue, so one slow site cannot hold up the rest;
  lateness (start - due) is measured for every probe.
- Probes whose outcome changes only status/error/meta/last_check_at are written in batches
  by the results writer (:mod:`engine.scheduler.results`); transitions with effects (outages,
  webhook events, failure bookkeeping) are written at once, in one transaction each.
- While the database is unavailable the engine goes on probing AND evaluating: a transition
  it cannot write is held in memory (the backlog, in the order they happened, bounded by
  ``BACKLOG_LIMIT``) and the check's state moves on in memory, so a site that goes down
  during a database outage is confirmed and alerted from its first failed probe. Ids the
  store would have created meanwhile (an outage opened, the incident's event) are negative
  placeholders until the backlog is written, in order, once the database is back; the
  webhook events are queued then. Past the bound, a transition is not held and the check's
  state does not move: its next probe after the outage evaluates it again.
- Configuration changes arrive by LISTEN ``upwatch_checks`` (reload by id within ~50 ms of
  the notification) and a periodic cheap resync of (id, config_version) pairs, which also
  runs after every (re)connection of the listener, so nothing the API does is missed.

Clocks: due times are ``time.monotonic()`` values; phases are computed on the wall clock
(``time.time()``) so a check keeps its rhythm across restarts; state timestamps are aware UTC.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from engine import USER_AGENT
from engine.domain.evaluate import PENDING, CheckState, Outcome, Transition
from engine.kinds.base import Cancellable, CheckKind, Judging, Phases
from engine.kinds.certificate import CertProbe
from engine.kinds.registry import registered
from engine.kinds.scheduled import ScheduledCheck, Touch
from engine.kinds.uptime import HttpProbe
from engine.monitors.requestspecs import SpecBuilder
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.metrics import Metrics
from engine.runtime.secretbox import SecretBox
from engine.runtime.settings import Settings
from engine.scheduler.calendar import MaintenanceCalendar
from engine.scheduler.confirm import Confirmer, LocalConfirmer
from engine.scheduler.results import ResultsSink, ResultsWriter
from engine.scheduler.waiting import wait_any
from engine.scheduler.wheel import TimingWheel, next_due

log = logging.getLogger(__name__)

GC_YOUNG_THRESHOLD = 50_000  # allocations between young collections (see Engine._freeze)

# Scheduler sweep period (s). Probes that come due within one sweep start together, so their
# connects, reads and closes share event-loop iterations instead of waking the loop once each.
# Measured at 10,000 checks / 30 s (333 probes/s): engine CPU per probe 521 us with a 5 ms
# sweep, 330 us with 20 ms, 244 us with 50 ms, at a start lateness of about one sweep
# (p99 5.7, 20, 50 ms). 20 ms keeps lateness far inside the 100 ms target and is invisible
# at intervals of 30 s and more. Under accelerated time (tests) the sweep shrinks with the
# intervals, down to MIN_TICK.
TICK = 0.02
MIN_TICK = 0.005
WHEEL_TICK = 0.01  # wheel bucket width (s); 4096 buckets = one 41 s revolution
WHEEL_SLOTS = 4096
SOON_RATE: Final = 1000.0  # pending (new, re-enabled, reset) checks started per second, at most
RETRY_IN_FLIGHT: Final = 0.25  # a check due while its previous probe still runs tries again then
MIN_INTERVAL: Final = 0.05  # floor of a scaled interval, so a tiny time scale cannot spin
THRESHOLD_SLACK: Final = 0.005  # re-probe this long after a threshold expires (clock rounding)
PAGE = 5000  # checks per page when loading or resyncing
RELOAD_COALESCE = 0.02  # gather a burst of notifications into one reload query
LISTEN_PING = 15.0  # seconds between liveness round trips on the LISTEN connection
DRAIN_PROBES = 3.0  # seconds in-flight probes get to finish on stop
RESULT_BATCH = 5000  # rows per results transaction (see engine.scheduler.results)
DRAIN_RESULTS = 2.0  # seconds the results writer gets to flush on stop
FREEZE_AFTER = 5000  # checks adopted by reloads before the GC is told to skip them again
UNWRITTEN_LOG_EVERY = 10.0  # seconds between warnings about state writes lost to an outage
BACKLOG_LIMIT = 100_000  # transitions held in memory while the database is unavailable
BACKLOG_RETRY_FIRST = 0.2  # seconds before the backlog is first tried again; doubles...
BACKLOG_RETRY_MAX = 5.0  # ...up to this


class EngineStore(Protocol):
    async def load_checks_page(self, after_id: int, limit: int) -> list[ScheduledCheck]: ...
    async def load_checks(self, ids: Iterable[int]) -> list[ScheduledCheck]: ...
    async def enabled_check_versions_page(
        self, after_id: int, limit: int
    ) -> list[tuple[int, int]]: ...
    def listen_checks(
        self, on_change: Callable[[int], None]
    ) -> contextlib.AbstractAsyncContextManager[Any]: ...
    async def apply_transition(
        self, check_id: int, config_version: int, tr: Transition
    ) -> Any: ...
    def results_session(self) -> ResultsSink: ...


@dataclass(slots=True)
class _Unwritten:
    """A transition of ``check`` (under ``version``) held until the database is back."""

    check: ScheduledCheck
    version: int
    tr: Transition


class Engine:
    """The check engine component; ``run(stop)`` returns once stopped and drained.

    ``owns(check_id)`` filters the checks this node probes (the cluster's ownership); call
    :meth:`request_resync` when its answer may have changed.
    """

    def __init__(
        self,
        store: EngineStore,
        settings: Settings,
        *,
        metrics: Metrics,
        confirmer: Confirmer | None = None,
        http_prober: HttpProbe | None = None,
        cert_prober: CertProbe | None = None,
        owns: Callable[[int], bool] = lambda check_id: True,
        calendar: MaintenanceCalendar | None = None,
    ) -> None:
        self._store = store
        # Maintenance windows by monitor (engine/scheduler/calendar.py); asked off the
        # steady path only.
        self._calendar = calendar if calendar is not None else MaintenanceCalendar(store)
        self._settings = settings
        self._metrics = metrics
        self._owns = owns
        self._scale = settings.time_scale
        self._tick = min(TICK, max(MIN_TICK, TICK * settings.time_scale))
        self._region = settings.region
        self._max_in_flight = settings.max_in_flight
        self._per_host = settings.per_host_limit
        owned = http_prober is None, cert_prober is None
        if http_prober is None:
            from engine.probes.http import HttpProber
            from engine.probes.resolver import from_settings

            http_prober = HttpProber(
                timeout=settings.probe_timeout,
                user_agent=USER_AGENT,
                source_address=settings.probe_source_address,
                allow_private=settings.allow_private_targets,
                resolver=from_settings(settings, metrics),
                tls_sessions=settings.tls_sessions,
                metrics=metrics,
                batch=settings.probe_batch_ms / 1000.0,
            )
        if cert_prober is None:
            from engine.probes.tls import CertProber

            cert_prober = CertProber(
                timeout=settings.probe_timeout,
                source_address=settings.probe_source_address,
                allow_private=settings.allow_private_targets,
                ca_bundle=settings.ca_bundle,
                # The uptime probes' resolver and cache, when theirs is one.
                resolver=getattr(http_prober, "resolver", None),
                batch=settings.probe_batch_ms / 1000.0,
            )
        self._http = http_prober
        kinds = registered(http_prober, cert_prober)
        self._owned_kinds = [k for k, own in zip(kinds, owned, strict=True) if own]
        self._kinds = kinds
        self._kind_of: dict[str, CheckKind] = {k.name: k for k in kinds}
        # Kinds whose probes start without a task (their prober offers it).
        self._starts: dict[str, Callable[..., Cancellable]] = {
            k.name: k.start for k in kinds if k.start is not None
        }
        self._judging = Judging(
            region=settings.region, slow_threshold_ms=float(settings.slow_threshold_ms),
            scale=settings.time_scale, quiet=self._calendar.quiet,
        )
        self._specs = SpecBuilder(SecretBox.from_settings(settings), settings.max_assertion_body)
        self._confirmer: Confirmer = confirmer or LocalConfirmer.from_settings(
            http_prober, settings, metrics
        )
        self.results = ResultsWriter(
            store,
            metrics=metrics,
            limit=settings.result_buffer_limit,
            flush_interval=settings.result_flush_interval,
            batch_rows=RESULT_BATCH,
            drain_timeout=DRAIN_RESULTS,
        )

        self._checks: dict[int, ScheduledCheck] = {}
        # The checks themselves, each holding its due time (c.due): no index or float of
        # the wheel's own per check (engine/scheduler/wheel.py).
        self._wheel: TimingWheel[ScheduledCheck] = TimingWheel(
            tick=WHEEL_TICK, slots=WHEEL_SLOTS, start=time.monotonic()
        )
        # Check id -> its running probe (a task, or the prober's handle of a probe without
        # one); each takes itself out as it finishes (_finish), so no done callback is
        # scheduled per probe.
        self._in_flight: dict[int, Cancellable] = {}
        self._drained: asyncio.Event | None = None  # set by _finish once none is left
        self._loop: asyncio.AbstractEventLoop | None = None
        self._host_busy: dict[str, int] = {}
        self._host_wait: dict[str, deque[ScheduledCheck]] = {}
        self._ready: deque[ScheduledCheck] = deque()
        self._reload_ids: set[int] = set()
        self._reload_wake = asyncio.Event()
        self._resync_wake = asyncio.Event()
        self._stopping = False
        self._unwritten = 0
        self._adopted_unfrozen = 0
        self._soon_next = 0.0
        self._unwritten_logged = -UNWRITTEN_LOG_EVERY
        # Transitions held while the database is unavailable (see the module docstring).
        self._backlog: deque[_Unwritten] = deque()
        self._backlog_of: dict[int, int] = {}  # check id -> entries it has in the backlog
        self._backlog_tail: dict[int, _Unwritten] = {}  # a check's last entry, to coalesce
        self._backlog_wake = asyncio.Event()
        self._placeholders = itertools.count(-1, -1)
        self._real_ids: dict[int, int] = {}  # placeholder -> id the store gave it
        self._gc_threshold: tuple[int, int, int] | None = None
        self.loaded = asyncio.Event()  # set once the first full load is done
        # Prometheus children resolved once: labels() costs a dict lookup and a lock.
        phase = metrics.probe_phase
        self._phases = Phases(
            total=phase.labels(phase="total"), dns=phase.labels(phase="dns"),
            connect=phase.labels(phase="connect"), tls=phase.labels(phase="tls"),
            first_byte=phase.labels(phase="first_byte"),
        )
        # Per kind, indexed by the outcome itself (an int): no key tuple to build and hash
        # per probe.
        self._counters: dict[str, tuple[Any, ...]] = {
            k.name: tuple(
                metrics.probes.labels(kind=k.name, outcome=cls.name.lower()) for cls in Outcome)
            for k in kinds
        }
        # Bound at construction: whatever stands in metrics.lateness now (the bench installs
        # its recorder before building the engine) sees every observation.
        self._observe_lateness = metrics.lateness.observe

    # -- introspection (tests, metrics) ------------------------------------------------------

    def __len__(self) -> int:
        return len(self._checks)

    def check(self, check_id: int) -> ScheduledCheck | None:
        return self._checks.get(check_id)

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def request_resync(self) -> None:
        """Resync with the database soon (e.g. the cluster's ownership changed)."""
        self._resync_wake.set()

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def backlog(self) -> int:
        """Transitions held in memory, waiting for the database."""
        return len(self._backlog)

    async def run(self, stop: asyncio.Event) -> None:
        self._loop = asyncio.get_running_loop()
        writer_stop = asyncio.Event()
        writer = asyncio.create_task(self.results.run(writer_stop), name="engine-results")
        replay_stop = asyncio.Event()
        replayer = asyncio.create_task(self._replayer(replay_stop), name="engine-backlog")
        helpers: list[asyncio.Task[None]] = []
        try:
            with contextlib.suppress(Exception):  # its loop below retries
                await self._calendar.reload()  # before the first probe can alert
            await self._initial_load(stop)
            if not stop.is_set():
                helpers = [
                    asyncio.create_task(self._calendar.run(stop), name="engine-calendar"),
                    asyncio.create_task(self._listener(stop), name="engine-listen"),
                    asyncio.create_task(self._reloader(stop), name="engine-reload"),
                    asyncio.create_task(self._resyncer(stop), name="engine-resync"),
                ]
                await self._scheduler(stop)
        finally:
            self._stopping = True
            for h in helpers:
                h.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._drain_probes()
            replay_stop.set()  # it stops between two writes, never in the middle of one
            with contextlib.suppress(Exception):
                await asyncio.wait_for(replayer, DRAIN_RESULTS)
            await self._drain_backlog()
            writer_stop.set()
            with contextlib.suppress(Exception):
                await writer
            for k in self._owned_kinds:
                with contextlib.suppress(Exception):
                    await k.aclose()
            self._metrics.in_flight.set(0)
            # What was frozen may become garbage once the engine is gone; let GC see it.
            gc.unfreeze()
            if self._gc_threshold is not None:
                gc.set_threshold(*self._gc_threshold)
                self._gc_threshold = None

    async def _drain_probes(self) -> None:
        """Let in-flight probes finish (their results still count), then cancel the rest:
        nothing is lost by that, the checks are simply probed again after a restart."""
        self._ready.clear()
        self._host_wait.clear()
        if not self._in_flight:
            return
        drained = self._drained = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drained.wait(), DRAIN_PROBES)
        if not self._in_flight:
            return
        log.info("stopping: cancelled %d probes still running", len(self._in_flight))
        tasks = []
        for check_id, running in list(self._in_flight.items()):
            running.cancel()
            if isinstance(running, asyncio.Task):
                tasks.append(running)  # takes itself out as it ends
            else:
                del self._in_flight[check_id]  # a cancelled handle never calls back
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- loading and configuration changes ----------------------------------------------------

    async def _initial_load(self, stop: asyncio.Event) -> None:
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
                log.info("engine loaded %d checks", len(self._checks))
                self._freeze()
                return
            except DatabaseUnavailable as exc:
                log.warning("cannot load checks, retrying: %s", exc)
                await wait_any(stop, timeout=backoff)
                backoff = min(backoff * 2, 5.0)

    def _freeze(self) -> None:
        """Move every object alive now out of the cyclic GC's reach (``gc.freeze``).

        The checks are long-lived and cycle-free; left in the collected generations, each
        full collection walks all of them (a 250 ms pause with 50,000 checks, which is
        scheduler lateness). Called after the first load and after large reloads.

        Young collections are made rarer too: the probe path allocates many short-lived,
        acyclic objects, so at the default threshold (700) the GC ran every few probes, took
        12-16 % of the engine's CPU and freed nothing (upwatch bench; +15 % probes per CPU
        second at 50,000 allocations)."""
        gc.freeze()
        if self._gc_threshold is None:
            self._gc_threshold = gc.get_threshold()
            gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 100)
        self._adopted_unfrozen = 0

    def _adopt(self, new: ScheduledCheck) -> None:
        """Install a check as loaded from the database (new, reconfigured or unchanged)."""
        if not self._owns(new.id):
            self._drop(new.id)
            return
        old = self._checks.get(new.id)
        if old is not None and old.config_version == new.config_version:
            # Unchanged: the in-memory state may be ahead of batched writes, keep it.
            return
        self._adopted_unfrozen += 1
        if new.configured is not None:
            new.request = self._specs.build(new.configured)
        # A monitor's two checks share its URL string. They are created together, ids one
        # apart; URLs are not interned, which cost an entry of the interpreter's table
        # (~45 B) per monitor, most of which have one enabled check.
        for sibling_id in (new.id - 1, new.id + 1):
            sibling = self._checks.get(sibling_id)
            if sibling is not None and sibling.monitor_id == new.monitor_id:
                if sibling.url == new.url:
                    new.url = sibling.url
                break
        self._checks[new.id] = new
        if old is not None:
            self._wheel.cancel(old)
            self.results.forget(new.id)
        self._schedule(new, soon=new.state.status == PENDING)

    def _drop(self, check_id: int) -> None:
        """Forget a deleted, disabled or no longer owned check. A probe of it still running
        finishes without writing anything (it sees it was dropped)."""
        old = self._checks.pop(check_id, None)
        if old is not None:
            self._wheel.cancel(old)
            self.results.forget(check_id)

    def _on_notify(self, check_id: int) -> None:
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
            except Exception as exc:  # this loop must outlive any one failure
                if isinstance(exc, DatabaseUnavailable):
                    log.warning("cannot reload checks, retrying: %s", exc)
                else:
                    log.exception("reloading checks failed; retrying")
                self._reload_ids |= ids
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
            self._freeze()

    async def _resyncer(self, stop: asyncio.Event) -> None:
        interval = self._settings.resync_interval
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
                c = self._checks.get(check_id)
                if c is None or c.config_version != version:
                    stale.add(check_id)
            if len(page) < PAGE * 2:
                break
            after = page[-1][0]
            await asyncio.sleep(0)
        for check_id in list(self._checks):
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
        backoff = 0.5
        while not stop.is_set():
            try:
                async with self._store.listen_checks(self._on_notify) as listener:
                    backoff = 0.5
                    self._resync_wake.set()
                    while not stop.is_set() and not listener.lost.is_set():
                        await wait_any(stop, listener.lost, timeout=LISTEN_PING)
                        if not stop.is_set() and not listener.lost.is_set():
                            await listener.alive()
                if not stop.is_set():
                    log.warning("lost the LISTEN connection; reconnecting")
            except DatabaseUnavailable as exc:
                log.warning("cannot LISTEN for check changes, retrying: %s", exc)
            except Exception:
                log.exception("LISTEN connection failed; retrying")
            await wait_any(stop, timeout=backoff)
            backoff = min(backoff * 2, 10.0)

    # -- scheduling ------------------------------------------------------------------------------

    def _schedule(
        self, c: ScheduledCheck, mono: float | None = None, *, soon: bool = False
    ) -> None:
        """Put ``c`` in the wheel: at once when ``soon`` (paced by ``SOON_RATE``), else at its
        next phase, or earlier when a confirmed outage's threshold expires before then.
        ``mono`` is ``time.monotonic()`` when the caller has just read it."""
        if mono is None:
            mono = time.monotonic()
        if soon:
            # As soon as possible, but a bulk of them (thousands of checks created at once,
            # or found pending at start) is spread at SOON_RATE so it cannot burst.
            due = max(mono, self._soon_next)
            self._soon_next = due + 1.0 / SOON_RATE
        else:
            interval = c.interval_s * self._scale
            if interval < MIN_INTERVAL:
                interval = MIN_INTERVAL  # a tiny time scale must not spin
            wall = time.time()
            # c.due is still the due time of the run that just ended (0.0 for a check
            # never scheduled), in the loop's clock: the wheel sets it only in schedule().
            last = c.due - mono + wall if c.due else 0.0
            due = next_due(c.id, interval, wall, last) - wall + mono
            # An alert or a restore may wait: sooner then.
            kind = self._kind_of.get(c.kind)
            alert_at = kind.decision_due(c, self._judging) if kind is not None else None
            if alert_at is not None:
                at = alert_at.timestamp() + THRESHOLD_SLACK - wall + mono
                if at < due:
                    due = max(at, mono)
        self._wheel.schedule(c, due)  # sets c.due

    async def _scheduler(self, stop: asyncio.Event) -> None:
        wheel, checks, ready = self._wheel, self._checks, self._ready
        gauge_at = 0.0
        while not stop.is_set():
            now = time.monotonic()
            ready.extend(wheel.pop_due(now))  # dropped ones were cancelled
            if ready:
                self._start_ready(now)
            if now >= gauge_at:
                # Gauges once a second rather than per probe: a Prometheus set() takes a lock.
                # The histograms' pending observations are counted then too.
                self._metrics.fold()
                self._metrics.scheduled.set(len(checks))
                self._metrics.in_flight.set(len(self._in_flight))
                self._metrics.probe_polling.set(1 if getattr(self._http, "polling", False) else 0)
                gauge_at = now + 1.0
            await asyncio.sleep(self._tick)

    def _start_ready(self, now: float) -> None:
        """Start ready checks (in order) while the limits allow; a check whose host is busy
        waits in that host's queue. Called per sweep and per finished probe, so everything
        it uses per probe is a local."""
        ready, checks, in_flight = self._ready, self._checks, self._in_flight
        busy, per_host, limit = self._host_busy, self._per_host, self._max_in_flight
        launch = self._launch
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        while ready and len(in_flight) < limit:
            c = ready.popleft()
            check_id = c.id
            if checks.get(check_id) is not c:
                continue  # dropped or replaced since it came due
            if check_id in in_flight:
                # A reload replaced the entry while its previous probe still runs.
                self._wheel.schedule(c, now + RETRY_IN_FLIGHT)
                continue
            host = c.host
            n = busy.get(host, 0)
            if n >= per_host:
                waiting = self._host_wait.get(host)
                if waiting is None:
                    waiting = self._host_wait[host] = deque()
                waiting.append(c)
                continue
            launch(c, n, now)

    def _launch(self, c: ScheduledCheck, busy_now: int, now: float) -> None:
        """Start ``c``'s probe: ``c`` is the engine's entry and not in flight, there is room
        under ``max_in_flight``, and its host has ``busy_now`` probes running, fewer than
        ``per_host_limit``. Without a task when its kind can (``start``)."""
        self._host_busy[c.host] = busy_now + 1
        late = now - c.due
        self._observe_lateness(late if late > 0 else 0.0)
        loop = self._loop
        assert loop is not None  # set by the first _start_ready
        start = self._starts.get(c.kind)
        if start is not None:
            if c.request is None:
                self._in_flight[c.id] = start(loop, c.url, self._started_done, c)
            else:
                self._in_flight[c.id] = start(loop, c.url, self._started_done, c, c.request)
        else:
            self._in_flight[c.id] = loop.create_task(self._probe(c))

    def _finish(self, c: ScheduledCheck) -> None:
        check_id = c.id
        in_flight = self._in_flight
        in_flight.pop(check_id, None)
        host = c.host
        busy = self._host_busy
        n = busy.get(host, 1) - 1
        if n > 0:
            busy[host] = n
        else:
            busy.pop(host, None)
        nxt = None
        if self._host_wait:  # usually empty: no lookup per probe then
            waiting = self._host_wait.get(host)
            if waiting:
                nxt = waiting.popleft()  # the host's next waiting check: first in line
                if not waiting:
                    del self._host_wait[host]
        if self._stopping:
            if nxt is not None:
                self._ready.appendleft(nxt)
            if not in_flight and self._drained is not None:
                self._drained.set()
            return
        mono = time.monotonic()
        if self._checks.get(check_id) is c:
            self._schedule(c, mono)
        if nxt is not None:
            if (
                self._checks.get(nxt.id) is nxt
                and nxt.id not in in_flight
                and len(in_flight) < self._max_in_flight
            ):
                # What _start_ready would do with it first, without the round trip through
                # the ready queue: at capacity (every host busy) that is every probe.
                self._launch(nxt, n, mono)
            else:
                self._ready.appendleft(nxt)  # _start_ready sorts it out
        if self._ready:
            self._start_ready(mono)

    # -- one probe ---------------------------------------------------------------------------------

    def _started_done(self, c: ScheduledCheck, outcome: Any) -> None:
        """A probe started without a task ended (the kind's ``start`` calls this back).

        The steady case ends here; anything that must wait (a transition to write, a
        confirmation) goes on in a task. ``c.config_version`` is the version the probe
        started with: the engine never changes it in place (a reconfigured check is a new
        object)."""
        version = c.config_version
        try:
            # _current(c, version), inlined: the version was read just above.
            if self._checks.get(c.id) is c and not self._steady(
                self._kind_of[c.kind], c, version, outcome
            ):
                assert self._loop is not None
                self._in_flight[c.id] = self._loop.create_task(self._probe(c, outcome))
                return
        except Exception:
            log.exception("check %d: probe failed unexpectedly", c.id)
        self._finish(c)

    async def _probe(self, c: ScheduledCheck, outcome: Any = None) -> None:
        """A probe in a task, and what follows it; with ``outcome``, a probe that ran
        without a task and is not steady (see _started_done): only what follows."""
        version = c.config_version
        kind = self._kind_of[c.kind]
        try:
            if outcome is None:
                outcome = await kind.probe(c)
                if not self._current(c, version) or self._steady(kind, c, version, outcome):
                    return
            await self._judged(kind, c, version, outcome)
        except DatabaseUnavailable as exc:
            # The transition is not persisted and the in-memory state not advanced: the next
            # probe evaluates again from the last state the database holds.
            self._note_unwritten(c.id, exc)
        except Exception:
            log.exception("check %d: probe failed unexpectedly", c.id)
        finally:
            self._finish(c)

    def _note_unwritten(self, check_id: int, exc: Exception) -> None:
        """Log transitions lost to a database outage, at most once per interval: during an
        outage every failing check would otherwise log on every probe."""
        self._unwritten += 1
        now = time.monotonic()
        if now - self._unwritten_logged >= UNWRITTEN_LOG_EVERY:
            log.warning(
                "cannot write check state (%d transitions deferred, e.g. check %d): %s",
                self._unwritten, check_id, exc,
            )
            self._unwritten = 0
            self._unwritten_logged = now

    def _current(self, c: ScheduledCheck, version: int) -> bool:
        """True while ``c`` is still the engine's entry, under the version it started with."""
        return self._checks.get(c.id) is c and c.config_version == version

    def _steady(self, kind: CheckKind, c: ScheduledCheck, version: int, outcome: Any) -> bool:
        """The kind's steady path, when it has one (see ``CheckKind.steady``): a probe that
        left the check as it was, written in the results writer's batches. False (nothing
        done) for anything else, which takes _judged."""
        steady = kind.steady
        if steady is None or c.id in self._backlog_of:
            return False
        cls = steady(c, version, outcome, self.results, self._judging)
        if cls is None:
            return False  # not steady, or the buffer is full: _judged waits for room
        self._counters[kind.name][cls].inc()
        kind.observe(outcome, self._phases)
        return True

    async def _judged(
        self, kind: CheckKind, c: ScheduledCheck, version: int, outcome: Any
    ) -> None:
        """Judge ``outcome``, write its row, commit the transition; then the confirmation
        the transition asks for, judged and committed the same way."""
        now = datetime.now(UTC)
        tr = kind.judge(c, outcome, now, self._judging)
        self._counters[kind.name][tr.outcome].inc()
        kind.observe(outcome, self._phases)
        await self.results.put(kind.row(c.id, now, tr.outcome, outcome, self._region, False))
        if not await self._commit(c, version, tr) or not tr.confirm:
            return
        confirmation = await self._confirmer.confirm(c, outcome)
        if confirmation is None or not self._current(c, version):
            return  # no verdict: the check stays failing and the next probe asks again
        now = datetime.now(UTC)
        tr = kind.judge_again(c, confirmation.outcome, now, confirmation.region, self._judging)
        await self.results.put(
            kind.row(c.id, now, tr.outcome, confirmation.outcome, confirmation.region, True)
        )
        await self._commit(c, version, tr)

    async def _commit(self, c: ScheduledCheck, version: int, tr: Transition) -> bool:
        """Persist ``tr`` and advance the in-memory state; False when it was discarded
        because the check changed meanwhile (the API wins; a reload follows). While the
        database is unavailable the transition is held in the backlog instead; when that is
        full, DatabaseUnavailable propagates and the state does not move."""
        if not self._current(c, version):
            return False
        prev = c.state.status
        held = False
        self._resolve(tr)
        if c.id in self._backlog_of or (tr.durable and self._backlog):
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
                    self._on_notify(c.id)
                    return False
                if not self._current(c, version):
                    return False
                self.results.forget(c.id)  # older than what was just written
                c.state.copy_from(state)
        else:
            s = tr.state
            assert s.last_check_at is not None
            self.results.touch(c.id, Touch(version, s.last_check_at, s.status, s.error, tr.meta))
            c.state.copy_from(s)
        if c.state.status != prev:
            self._metrics.transitions.labels(kind=c.kind, status=c.state.status).inc()
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
            self._backlog_of[c.id] = self._backlog_of.get(c.id, 0) + 1
            self._backlog_tail[c.id] = entry
        self.results.forget(c.id)  # older than what is held
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

    async def _replayer(self, stop: asyncio.Event) -> None:
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
            n = self._backlog_of.get(c.id, 1) - 1
            if n > 0:
                self._backlog_of[c.id] = n
            else:
                self._backlog_of.pop(c.id, None)
            if state is None:  # the check changed in the database meanwhile
                self._forget_backlog(c)
                self._on_notify(c.id)
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
        if check.id not in self._backlog_of:
            return
        tail = self._backlog_tail.get(check.id)
        if tail is not None and tail.check is check:
            del self._backlog_tail[check.id]
        self._backlog = deque([e for e in self._backlog if e.check is not check])
        left = sum([1 for e in self._backlog if e.check.id == check.id])
        if left:
            self._backlog_of[check.id] = left
        else:
            del self._backlog_of[check.id]

    async def _drain_backlog(self) -> None:
        """On stop: a last try to write what is held."""
        if not self._backlog:
            return
        with contextlib.suppress(DatabaseUnavailable, TimeoutError):
            await asyncio.wait_for(self._replay(), DRAIN_RESULTS)
        if self._backlog:
            log.error("stopping with %d state changes not written (the database is "
                      "unavailable); the next probes evaluate them again", len(self._backlog))


def _resolve_state(state: CheckState, ids: dict[int, int]) -> None:
    if state.outage_id is not None and state.outage_id < 0:
        state.outage_id = ids.get(state.outage_id, state.outage_id)
    if state.incident_event_id is not None and state.incident_event_id < 0:
        state.incident_event_id = ids.get(state.incident_event_id, state.incident_event_id)

