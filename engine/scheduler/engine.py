"""The check engine: the parts wired together, run until stopped, drained.

- :class:`~engine.scheduler.catalog.Catalog`: the checks this node probes (load, LISTEN,
  reload by id, resync).
- :class:`~engine.scheduler.dispatch.Dispatcher`: the timing wheel and the limits; starts
  each due probe.
- :class:`~engine.scheduler.flow.Flow`: one probe, through its kind: probe, judge, result
  row, commit, confirmation.
- :class:`~engine.scheduler.transitions.TransitionWriter`: commits, and holds the backlog
  while the database is out.
- :class:`~engine.scheduler.results.ResultsWriter`: result rows and steady touches, in
  batches.

Once a second the engine judges its load (:mod:`engine.scheduler.load`): the cost per probe
by kind from its thread's CPU, the share of its core it may take (the dispatcher's budget),
probes asked and done, the capacity, and whether it is over it (one log line each way;
``metrics.load`` for /healthz and the node's heartbeat).

``run(stop)`` returns once stopped and drained: in-flight probes get ``dispatch.DRAIN_PROBES``
to finish, the backlog and the results a last write. The engine also keeps the long-lived
checks out of the cyclic GC's reach (:meth:`Engine._freeze`). State timestamps are aware
UTC.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Callable
from typing import Protocol

from engine.domain.evaluate import PENDING
from engine.kinds.base import CheckKind, Judging
from engine.kinds.registry import Kinds
from engine.kinds.scheduled import ScheduledCheck
from engine.monitors.requestspecs import SpecBuilder
from engine.runtime.metrics import Metrics, NodeLoad
from engine.runtime.schedstat import waited_s
from engine.runtime.secretbox import SecretBox
from engine.runtime.settings import Settings
from engine.scheduler.calendar import MaintenanceCalendar
from engine.scheduler.catalog import Catalog, CatalogStore
from engine.scheduler.confirm import Confirmer, LocalConfirmer
from engine.scheduler.dispatch import MIN_INTERVAL, Dispatcher
from engine.scheduler.flow import Flow
from engine.scheduler.load import (
    API_KINDS,
    CostModel,
    Figures,
    OverloadJudge,
    Share,
    capacity,
    core_available,
    overcharge,
)
from engine.scheduler.results import ResultsSink, ResultsWriter
from engine.scheduler.transitions import TransitionStore, TransitionWriter

log = logging.getLogger(__name__)

GC_YOUNG_THRESHOLD = 50_000  # allocations between young collections (see Engine._freeze)

# Scheduler sweep period (s). Probes that come due within one sweep start together, so their
# connects, reads and closes share event-loop iterations instead of waking the loop once each;
# 20 ms keeps lateness far inside the 100 ms target and is invisible at intervals of 30 s and
# more. Under accelerated time (tests) the sweep shrinks with the intervals, down to MIN_TICK.
TICK = 0.02
MIN_TICK = 0.005
RESULT_BATCH = 5000  # rows per results transaction (see engine.scheduler.results)
DRAIN_RESULTS = 2.0  # seconds the results writer and the backlog get to flush on stop


class EngineStore(CatalogStore, TransitionStore, Protocol):
    def results_session(self) -> ResultsSink: ...


class Engine:
    """The check engine component; ``run(stop)`` returns once stopped and drained.

    ``kinds`` are the kinds of checks it probes, with their probers (built and closed by
    the caller: ``engine.daemon.build_kinds``). ``owns(check_id)`` filters the checks this
    node probes (the cluster's ownership); call :meth:`request_resync` when its answer may
    have changed. ``confirmer`` defaults to a second probe from this node.
    """

    def __init__(
        self,
        store: EngineStore,
        settings: Settings,
        *,
        metrics: Metrics,
        kinds: Kinds,
        confirmer: Confirmer | None = None,
        owns: Callable[[int], bool] = lambda check_id: True,
        calendar: MaintenanceCalendar | None = None,
    ) -> None:
        # Maintenance windows by monitor (engine/scheduler/calendar.py); asked off the
        # steady path only.
        self._calendar = calendar if calendar is not None else MaintenanceCalendar(store)
        self._metrics = metrics
        self._tick = min(TICK, max(MIN_TICK, TICK * settings.time_scale))
        self.kinds = kinds
        kind_of: dict[str, CheckKind] = {k.name: k for k in kinds}
        judging = Judging(
            region=settings.region, slow_threshold_ms=float(settings.slow_threshold_ms),
            scale=settings.time_scale, quiet=self._calendar.quiet,
        )
        self.results = ResultsWriter(
            store,
            metrics=metrics,
            limit=settings.result_buffer_limit,
            flush_interval=settings.result_flush_interval,
            batch_rows=RESULT_BATCH,
            drain_timeout=DRAIN_RESULTS,
        )
        self._catalog = catalog = Catalog(
            store,
            SpecBuilder(SecretBox.from_settings(settings), settings.max_assertion_body),
            owns=owns, resync_interval=settings.resync_interval, freeze=self._freeze,
        )
        self._checks = checks = catalog.checks
        self._scale = settings.time_scale
        self._cost = CostModel([*kind_of, *API_KINDS])
        self._api_at = self._api_counts()
        self._share = Share()
        self._judge = OverloadJudge()
        self._asked: dict[str, float] = {k: 0.0 for k in kind_of}  # probes/s by kind
        self._cpu_at = time.thread_time()
        self._second_at = time.monotonic()
        self._waited_at: float | None = None  # the loop thread's run-queue wait (schedstat)
        self._dispatcher = dispatcher = Dispatcher(
            checks, kind_of, judging,
            max_in_flight=settings.max_in_flight, per_host_limit=settings.per_host_limit,
            # Bound now: whatever stands in metrics.lateness (the bench installs its
            # recorder before building the engine) sees every observation.
            observe_lateness=metrics.lateness.observe,
            costs=self._cost.costs,
        )
        dispatcher.share = self._share.value
        self._transitions = transitions = TransitionWriter(
            store, self.results, checks, dispatcher.in_flight, metrics=metrics,
            stale=catalog.stale,
        )
        if confirmer is None:
            confirmer = LocalConfirmer.from_settings(kinds.reprober, settings, metrics)
        flow = Flow(
            checks, kind_of, judging, dispatcher=dispatcher, results=self.results,
            transitions=transitions, confirmer=confirmer, metrics=metrics,
        )
        dispatcher.attach(flow.done, flow.probe)
        catalog.adopted = self._adopted
        catalog.dropped = self._dropped
        self.loaded = catalog.loaded  # set once the first full load is done
        self._gc_threshold: tuple[int, int, int] | None = None

    # -- introspection (tests, metrics) ------------------------------------------------------

    def __len__(self) -> int:
        return len(self._checks)

    def check(self, check_id: int) -> ScheduledCheck | None:
        return self._checks.get(check_id)

    @property
    def in_flight(self) -> int:
        return len(self._dispatcher.in_flight)

    @property
    def backlog(self) -> int:
        """Transitions held in memory, waiting for the database."""
        return len(self._transitions)

    def request_resync(self) -> None:
        """Resync with the database soon (e.g. the cluster's ownership changed)."""
        self._catalog.request_resync()

    async def resync(self) -> None:
        """Compare every enabled check's (id, config_version) with the catalog's now."""
        await self._catalog.resync()

    # -- wiring ----------------------------------------------------------------------------------

    def _rate(self, c: ScheduledCheck) -> float:
        """Probes per second ``c`` asks for (its scaled interval, as the dispatcher's)."""
        return 1.0 / max(MIN_INTERVAL, c.interval_s * self._scale)

    def _adopted(self, new: ScheduledCheck, old: ScheduledCheck | None) -> None:
        by_status = self._metrics.checks_by_status
        asked = self._asked
        asked[new.kind] = asked.get(new.kind, 0.0) + self._rate(new)
        if old is not None:
            asked[old.kind] = max(0.0, asked.get(old.kind, 0.0) - self._rate(old))
            self._dispatcher.cancel(old)
            self.results.forget(new.id)
            by_status.child(old.kind, old.state.status).dec()
        by_status.child(new.kind, new.state.status).inc()
        self._dispatcher.schedule(new, soon=new.state.status == PENDING)

    def _dropped(self, old: ScheduledCheck) -> None:
        """A probe of it still running finishes without writing anything (it sees it was
        dropped)."""
        self._dispatcher.cancel(old)
        self.results.forget(old.id)
        self._metrics.checks_by_status.child(old.kind, old.state.status).dec()
        asked = self._asked
        asked[old.kind] = max(0.0, asked.get(old.kind, 0.0) - self._rate(old))
        if not self._checks:
            for kind in asked:
                asked[kind] = 0.0  # no float residue once the last check is gone

    def _every_second(self) -> None:
        # The histograms' pending observations are counted then too.
        metrics = self._metrics
        metrics.fold()
        metrics.scheduled.set(len(self._checks))
        metrics.in_flight.set(len(self._dispatcher.in_flight))
        metrics.probe_polling.set(1 if self.kinds.polling else 0)
        self._judge_load()

    def _api_counts(self) -> tuple[int, int, int]:
        """Requests answered on this loop so far, in the order of ``API_KINDS``."""
        m = self._metrics
        return m.api_reads, m.api_writes, m.api_pings

    def _judge_load(self) -> None:
        """The second's load (engine/scheduler/load.py), its gauges, and one log line when
        the node goes over its capacity or comes back under it."""
        metrics, dispatcher = self._metrics, self._dispatcher
        now, cpu = time.monotonic(), time.thread_time()
        elapsed, spent = now - self._second_at, cpu - self._cpu_at
        self._second_at, self._cpu_at = now, cpu
        waited, before = waited_s(), self._waited_at
        self._waited_at = waited
        if elapsed <= 0:
            return
        done, held, short, lag = dispatcher.take_second()
        api, before_api = self._api_counts(), self._api_at
        self._api_at = api
        # Per second of wall time, so a sweep that came late does not read as a dearer probe.
        work = {k: round(n / elapsed) for k, n in done.items()}
        for name, n, was in zip(API_KINDS, api, before_api, strict=True):
            work[name] = round((n - was) / elapsed)
        self._cost.learn(spent / elapsed, work)
        # The share is of the core the loop's thread gets (less on a contended machine).
        waited_per_s = None
        if waited is not None and before is not None:
            waited_per_s = (waited - before) / elapsed
            # What the budget bought, of the core the thread got: a thread that waited for
            # a core ran less for that, not for dear costs. Unknown elsewhere: not judged.
            factor = overcharge(spent / elapsed, dispatcher.share * max(0.0, 1 - waited_per_s),
                                short)
            if factor is not None:
                self._cost.discount(factor)
        share = dispatcher.share = (self._share.step(lag, held > 0)
                                    * core_available(spent / elapsed, lag, waited_per_s))
        asked = sum(self._asked.values())
        figures = Figures(
            asked=asked, done=sum(done.values()) / elapsed,
            capacity=capacity(share, self._cost.mean_cost(self._asked)),
        )
        change = self._judge.step(held, figures)
        if change is not None:
            words = "over its capacity" if change.overloaded else "back within its capacity"
            log.warning(
                "node %s: asked %.0f probes/s, doing %.0f/s, capacity %.0f/s (ratio %.2f)",
                words, figures.asked, figures.done, figures.capacity, figures.ratio,
                extra={"overloaded": change.overloaded, "asked_per_s": round(figures.asked, 1),
                       "done_per_s": round(figures.done, 1),
                       "capacity_per_s": round(figures.capacity, 1),
                       "ratio": round(figures.ratio, 3)},
            )
        overloaded = self._judge.overloaded
        metrics.probes_asked_rate.set(figures.asked)
        metrics.probes_done_rate.set(figures.done)
        metrics.probe_capacity.set(figures.capacity)
        metrics.load_ratio.set(figures.ratio)
        metrics.overloaded.set(1 if overloaded else 0)
        metrics.engine_share.set(share)
        metrics.probes_waiting.set(dispatcher.waiting)
        costs = {k: c for k, c in self._cost.costs.items() if k not in API_KINDS}
        for kind, cost in costs.items():
            metrics.probe_cost.labels(kind=kind).set(cost)
        metrics.load = NodeLoad(
            asked=figures.asked, done=figures.done, capacity=figures.capacity,
            ratio=figures.ratio, overloaded=overloaded, share=share,
            waiting=dispatcher.waiting, cost_s=costs,
        )

    @property
    def overloaded(self) -> bool:
        """Whether the node says it is over its capacity now."""
        return self._judge.overloaded

    # -- lifecycle -------------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        """Probe until ``stop``, then wind down (:meth:`_wind_down`). A failure is held
        while the engine winds down and raised after it: this module is compiled, and a
        compiled coroutine must not await while it handles an exception
        (engine/runtime/compiled.py)."""
        self._dispatcher.loop = asyncio.get_running_loop()
        writer_stop = asyncio.Event()
        writer = asyncio.create_task(self.results.run(writer_stop), name="engine-results")
        replay_stop = asyncio.Event()
        replayer = asyncio.create_task(self._transitions.run(replay_stop), name="engine-backlog")
        helpers: list[asyncio.Task[None]] = []
        failure: BaseException | None = None
        try:
            with contextlib.suppress(Exception):  # its loop below retries
                await self._calendar.reload()  # before the first probe can alert
            await self._catalog.load(stop)
            if not stop.is_set():
                helpers = [
                    asyncio.create_task(self._calendar.run(stop), name="engine-calendar"),
                    asyncio.create_task(self._catalog.run(stop), name="engine-catalog"),
                ]
                await self._dispatcher.run(stop, self._tick, self._every_second)
        except BaseException as exc:
            failure = exc
        await self._wind_down(helpers, replay_stop, replayer, writer_stop, writer)
        if failure is not None:
            raise failure

    async def _wind_down(
        self,
        helpers: list[asyncio.Task[None]],
        replay_stop: asyncio.Event,
        replayer: asyncio.Task[None],
        writer_stop: asyncio.Event,
        writer: asyncio.Task[None],
    ) -> None:
        """Start no probe, end the helpers, let the probes in flight finish, then write the
        state-change backlog and the results, in that order. Cancelled meanwhile (the
        process's drain limit), the backlog's and the results' tasks are cancelled too:
        nothing of the engine outlives it."""
        self._dispatcher.stop_starting()
        for h in helpers:
            h.cancel()
        cut = True
        try:
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._dispatcher.drain()
            replay_stop.set()  # it stops between two writes, never in the middle of one
            with contextlib.suppress(Exception):
                await asyncio.wait_for(replayer, DRAIN_RESULTS)
            await self._transitions.drain(DRAIN_RESULTS)
            writer_stop.set()
            with contextlib.suppress(Exception):
                await writer
            cut = False
        finally:
            if cut:
                replayer.cancel()
                writer.cancel()
            self._metrics.in_flight.set(0)
            # What was frozen may become garbage once the engine is gone; let GC see it.
            gc.unfreeze()
            if self._gc_threshold is not None:
                gc.set_threshold(*self._gc_threshold)
                self._gc_threshold = None

    def _freeze(self) -> None:
        """Move every object alive now out of the cyclic GC's reach (``gc.freeze``).

        The checks are long-lived and cycle-free; left in the collected generations, each
        full collection walks all of them (scheduler lateness). Called after the first load
        and after large reloads. Young collections are made rarer too: the probe path
        allocates many short-lived, acyclic objects, at the default threshold (700) the GC
        ran every few probes and freed nothing."""
        gc.freeze()
        if self._gc_threshold is None:
            self._gc_threshold = gc.get_threshold()
            gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 100)
