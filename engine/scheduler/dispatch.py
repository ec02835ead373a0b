"""Dispatch: when each check's probe starts, under the engine's limits.

One :class:`~engine.scheduler.wheel.TimingWheel` holds every scheduled check; one loop
(:meth:`Dispatcher.run`) sweeps it every tick and starts what is due, at most
``max_in_flight`` probes at once and ``per_host_limit`` per host. A check whose host is
busy waits in that host's queue, so one slow site cannot hold up the rest; lateness (start
- due) is observed for every probe. A probe starts without a task when its kind offers
``start`` (the kind's callback is ``done``), else in a task (``probe``); either way it ends
with :meth:`Dispatcher.finish`, which schedules the check's next run.

Each check follows a stable phase of its interval (``next_due``), so checks of the same
interval are spread evenly over it; a new, re-enabled or reset check is probed within about
a second (``soon``, paced by ``SOON_RATE``), then joins its phase. Due times are
``time.monotonic()`` values; phases are computed on the wall clock so a check keeps its
rhythm across restarts. Per-probe code: compiled (engine/runtime/compiled.py).

Admission: each probe started spends its kind's cost (CPU seconds, ``costs``, learned by the
engine: engine/scheduler/load.py) from a budget that grows by ``share`` each second, so the
engine takes at most that share of its core and the rest (the API, the database) is never
starved. Due checks the budget cannot start yet wait in the ready queue, in the order they
came due (a check of a failing monitor goes first: its confirmation keeps its place).
While checks are held back, a check's next run is due an interval after its probe started
(not at its phase), so the queue goes round in order: when demand exceeds capacity every check is
probed, each demand / capacity intervals apart, all alike; back under, checks rejoin their
phases. Each sweep counts whether checks were held
back and how late the loop woke it (:meth:`Dispatcher.take_second`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, Final

from engine.domain.evaluate import FAILING
from engine.kinds.base import Cancellable, CheckKind, Judging
from engine.kinds.scheduled import ScheduledCheck
from engine.scheduler.wheel import TimingWheel, next_due

log = logging.getLogger(__name__)

WHEEL_TICK = 0.01  # wheel bucket width (s); 4096 buckets = one 41 s revolution
WHEEL_SLOTS = 4096
SOON_RATE: Final = 1000.0  # pending (new, re-enabled, reset) checks started per second, at most
RETRY_IN_FLIGHT: Final = 0.25  # a check due while its previous probe still runs tries again then
MIN_INTERVAL: Final = 0.05  # floor of a scaled interval, so a tiny time scale cannot spin
THRESHOLD_SLACK: Final = 0.005  # re-probe this long after a threshold expires (clock rounding)
DRAIN_PROBES = 3.0  # seconds in-flight probes get to finish on stop
BURST_S: Final = 0.04  # the budget holds at most this much of a second's share (s of CPU)
UNKNOWN_COST: Final = 0.0004  # a kind the engine learned no cost for (s of CPU)


def _no_done(c: ScheduledCheck, outcome: Any) -> None:
    raise RuntimeError("the dispatcher was not attached to a flow")


async def _no_probe(c: ScheduledCheck) -> None:
    raise RuntimeError("the dispatcher was not attached to a flow")


class Dispatcher:
    """See the module docstring. ``checks`` is the catalog's (read only here); ``attach``
    the flow's ``done`` and ``probe`` before :meth:`run`."""

    def __init__(
        self,
        checks: dict[int, ScheduledCheck],
        kinds: dict[str, CheckKind],
        judging: Judging,
        *,
        max_in_flight: int,
        per_host_limit: int,
        observe_lateness: Callable[[float], Any],
        costs: dict[str, float] | None = None,
    ) -> None:
        self._checks = checks
        # Kinds whose probes start without a task (their prober offers it).
        self._starts: dict[str, Callable[..., Cancellable]] = {}
        # Each kind's decision_due, bound once.
        self._decision_due: dict[
            str, Callable[[ScheduledCheck, Judging], datetime | None]] = {}
        for name, kind in kinds.items():
            if kind.start is not None:
                self._starts[name] = kind.start
            self._decision_due[name] = kind.decision_due
        # Kinds whose starts spend no budget (``unmetered``): decisions that probe nothing
        # (heartbeats' deadlines). The budget charges the loop's
        # whole CPU (webhook delivery included) to finished probes, so it would hold a
        # burst of deadlines back for work they do not do.
        self._unmetered = frozenset(
            name for name, kind in kinds.items() if getattr(kind, "unmetered", False))
        self._judging = judging
        self._scale = judging.scale
        self._max_in_flight = max_in_flight
        self._per_host = per_host_limit
        # Bound at construction: whatever stands in metrics.lateness then (the bench installs
        # its recorder before building the engine) sees every observation.
        self._observe_lateness = observe_lateness
        self._done: Callable[[ScheduledCheck, Any], None] = _no_done
        self._probe: Callable[[ScheduledCheck], Coroutine[Any, Any, None]] = _no_probe
        # The checks themselves, each holding its due time (c.due): no index or float of
        # the wheel's own per check (engine/scheduler/wheel.py).
        self._wheel: TimingWheel[ScheduledCheck] = TimingWheel(
            tick=WHEEL_TICK, slots=WHEEL_SLOTS, start=time.monotonic()
        )
        # Check id -> its running probe (a task, or the prober's handle of a probe without
        # one); each takes itself out as it finishes (finish), so no done callback is
        # scheduled per probe.
        self.in_flight: dict[int, Cancellable] = {}
        self._drained: asyncio.Event | None = None  # set by finish once none is left
        self.loop: asyncio.AbstractEventLoop | None = None
        self._host_busy: dict[str, int] = {}
        self._host_wait: dict[str, deque[ScheduledCheck]] = {}
        self._ready: deque[ScheduledCheck] = deque()
        self._soon_next = 0.0
        self._stopping = False
        # Admission (module docstring): the engine's share of its core, the budget it
        # grows (CPU seconds), each kind's cost per probe (the engine's CostModel updates
        # this dict in place), probes finished by kind, and the sweeps' figures.
        self.share = 1.0
        self._budget = BURST_S
        self._costs: dict[str, float] = costs if costs is not None else {}
        self._unknown_cost = UNKNOWN_COST if costs is not None else 0.0  # None: no admission
        self._done_by_kind: dict[str, int] = {}
        self._sweeps = 0
        self._held = 0
        self._short = 0  # sweeps that ended held back by the budget (not max_in_flight)
        self._worst_lag = 0.0

    def attach(
        self,
        done: Callable[[ScheduledCheck, Any], None],
        probe: Callable[[ScheduledCheck], Coroutine[Any, Any, None]],
    ) -> None:
        """``done(check, outcome)``: a taskless start's callback; ``probe(check)``: a probe
        in a task. Both end by calling :meth:`finish`."""
        self._done = done
        self._probe = probe

    # -- the wheel ---------------------------------------------------------------------------

    def schedule(
        self, c: ScheduledCheck, mono: float | None = None, *, soon: bool = False
    ) -> None:
        """Put ``c`` in the wheel: at once when ``soon`` (paced by ``SOON_RATE``), else at its
        next phase (an interval from now while checks are held back), or earlier when its
        kind has a decision waiting before then (a confirmed outage's threshold, a restore).
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
            # c.due is the start of the run that just ended (_launch sets it; 0.0 for a
            # check never run), in the loop's clock.
            if self._ready:
                # Checks are held back: the next run is due an interval after this one
                # started and then waits its turn in order, so every check's gap is the
                # same (demand / capacity intervals), not its phase's luck nor its probe's
                # length. Back under capacity, the run after rejoins the phase.
                due = c.due + interval
                if due < mono:
                    due = mono
            else:
                last = c.due - mono + wall if c.due else 0.0
                due = next_due(c.id, interval, wall, last) - wall + mono
            decision_due = self._decision_due.get(c.kind)
            alert_at = decision_due(c, self._judging) if decision_due is not None else None
            if alert_at is not None:
                at = alert_at.timestamp() + THRESHOLD_SLACK - wall + mono
                if at < due:
                    due = max(at, mono)
        self._wheel.schedule(c, due)  # sets c.due

    def cancel(self, c: ScheduledCheck) -> None:
        """Take ``c`` out of the wheel (dropped or replaced)."""
        self._wheel.cancel(c)

    # -- the sweep ---------------------------------------------------------------------------

    async def run(
        self, stop: asyncio.Event, tick: float, every_second: Callable[[], None]
    ) -> None:
        """Sweep the wheel every ``tick`` until ``stop``; ``every_second`` updates gauges."""
        wheel, ready = self._wheel, self._ready
        gauge_at = 0.0
        last = time.monotonic()
        while not stop.is_set():
            now = time.monotonic()
            lag = now - last - tick
            if lag > self._worst_lag:
                self._worst_lag = lag
            budget = self._budget + (now - last) * self.share
            self._budget = budget if budget < BURST_S else BURST_S
            last = now
            due = wheel.pop_due(now)  # dropped ones were cancelled
            if ready and due:
                self._queue_due(due)
            else:
                ready.extend(due)
            if ready:
                self._start_ready(now)
            self._sweeps += 1
            if ready:
                self._held += 1
                if self._budget <= 0:
                    self._short += 1
            if now >= gauge_at:
                # Gauges once a second rather than per probe: a Prometheus set() takes a lock.
                every_second()
                gauge_at = now + 1.0
            await asyncio.sleep(tick)

    def _queue_due(self, due: list[ScheduledCheck]) -> None:
        """Checks come due while others still wait: those of a failing monitor (its
        confirmation waits on their probe) go ahead of the queue, the rest, down ones too,
        behind it: many down checks going first every time would hold the healthy ones
        back far past demand / capacity intervals."""
        ready = self._ready
        for c in due:
            if c.state.status == FAILING:
                ready.appendleft(c)
            else:
                ready.append(c)

    def take_second(self) -> tuple[dict[str, int], float, float, float]:
        """What happened since the last call, and reset: probes finished by kind, the shares
        of sweeps that ended with due checks held back (by anything; by the budget), the
        latest a sweep woke (s)."""
        done = self._done_by_kind
        self._done_by_kind = {}
        sweeps = self._sweeps
        held = self._held / sweeps if sweeps else 0.0
        short = self._short / sweeps if sweeps else 0.0
        lag = self._worst_lag
        self._sweeps = self._held = self._short = 0
        self._worst_lag = 0.0
        return done, held, short, lag

    @property
    def waiting(self) -> int:
        """Due checks waiting to start (held back by the budget or ``max_in_flight``)."""
        return len(self._ready)

    def _start_ready(self, now: float) -> None:
        """Start ready checks (in order) while the limits allow; a check whose host is busy
        waits in that host's queue. Called per sweep and per finished probe, so everything
        it uses per probe is a local."""
        ready, checks, in_flight = self._ready, self._checks, self.in_flight
        busy, per_host, limit = self._host_busy, self._per_host, self._max_in_flight
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        while ready and len(in_flight) < limit and self._budget > 0:
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
            self._launch(c, n, now)

    def _launch(self, c: ScheduledCheck, busy_now: int, now: float) -> None:
        """Start ``c``'s probe: ``c`` is the catalog's entry and not in flight, there is
        room under ``max_in_flight``, and its host has ``busy_now`` probes running, fewer
        than ``per_host_limit``. Without a task when its kind can (``start``)."""
        self._host_busy[c.host] = busy_now + 1
        kind = c.kind
        if kind not in self._unmetered:
            self._budget -= self._costs.get(kind, self._unknown_cost)
        late = now - c.due
        self._observe_lateness(late if late > 0 else 0.0)
        c.due = now  # out of the wheel until schedule(): the run's start, for its next due
        loop = self.loop
        assert loop is not None  # set by the first _start_ready
        start = self._starts.get(kind)
        if start is not None:
            if c.request is None:
                self.in_flight[c.id] = start(loop, c.url, self._done, c)
            else:
                self.in_flight[c.id] = start(loop, c.url, self._done, c, c.request)
        else:
            self.in_flight[c.id] = loop.create_task(self._probe(c))

    def finish(self, c: ScheduledCheck) -> None:
        """``c``'s probe and what follows it are done: free its slots, schedule its next
        run, start what waited for the room."""
        check_id = c.id
        in_flight = self.in_flight
        in_flight.pop(check_id, None)
        by_kind = self._done_by_kind
        by_kind[c.kind] = by_kind.get(c.kind, 0) + 1
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
            self.schedule(c, mono)
        if nxt is not None:
            if (
                self._checks.get(nxt.id) is nxt
                and nxt.id not in in_flight
                and len(in_flight) < self._max_in_flight
                and self._budget > 0
            ):
                # What _start_ready would do with it first, without the round trip through
                # the ready queue: at capacity (every host busy) that is every probe.
                self._launch(nxt, n, mono)
            else:
                self._ready.appendleft(nxt)  # _start_ready sorts it out
        if self._ready:
            self._start_ready(mono)

    # -- stop ----------------------------------------------------------------------------------

    def stop_starting(self) -> None:
        """From now on a finished probe schedules nothing and starts nothing."""
        self._stopping = True

    async def drain(self) -> None:
        """Start nothing more; let in-flight probes finish (their results still count), then
        cancel the rest: nothing is lost by that, the checks are simply probed again after a
        restart."""
        self._stopping = True
        self._ready.clear()
        self._host_wait.clear()
        if not self.in_flight:
            return
        drained = self._drained = asyncio.Event()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(drained.wait(), DRAIN_PROBES)
        if not self.in_flight:
            return
        log.info("stopping: cancelled %d probes still running", len(self.in_flight))
        tasks = []
        for check_id, running in list(self.in_flight.items()):
            running.cancel()
            if isinstance(running, asyncio.Task):
                tasks.append(running)  # takes itself out as it ends
            else:
                del self.in_flight[check_id]  # a cancelled handle never calls back
        await asyncio.gather(*tasks, return_exceptions=True)
