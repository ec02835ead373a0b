"""The flow of one probe: the kind probes, the kind judges, the row is written, the
transition committed, and a confirmation follows when the transition asks for one.

Reached only through the check's kind (:mod:`engine.kinds`). A kind with a taskless
``start`` calls :meth:`Flow.done` back; a kind with ``steady`` ends most probes there, with
no task and no await (the result row and the check's touch go to the results writer's
batches). Anything else runs in a short-lived task (:meth:`Flow.probe`). Either way the
probe ends with the dispatcher's ``finish``. A probe of a check that was dropped or
reconfigured meanwhile writes nothing. Per-probe code: compiled
(engine/runtime/compiled.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from engine.domain.evaluate import Outcome
from engine.kinds.base import CheckKind, Judging, Phases, Steady
from engine.kinds.scheduled import ScheduledCheck
from engine.runtime.errors import DatabaseUnavailable
from engine.runtime.metrics import Metrics
from engine.scheduler.confirm import Confirmer
from engine.scheduler.dispatch import Dispatcher
from engine.scheduler.results import ResultsWriter
from engine.scheduler.transitions import TransitionWriter, is_current

log = logging.getLogger(__name__)

UNWRITTEN_LOG_EVERY = 10.0  # seconds between warnings about state writes lost to an outage


class _Path:
    """What the flow uses of one kind per probe, read once: a native class's fields (when
    compiled) rather than attribute lookups through the kind's protocol."""

    def __init__(self, kind: CheckKind, counters: tuple[Any, ...]) -> None:
        self.kind = kind
        self.steady: Steady | None = kind.steady
        self.counters = counters
        self.observe: Callable[[Any, Phases], None] = kind.observe


class Flow:
    """See the module docstring. ``checks`` is the catalog's (read only here)."""

    def __init__(
        self,
        checks: dict[int, ScheduledCheck],
        kinds: dict[str, CheckKind],
        judging: Judging,
        *,
        dispatcher: Dispatcher,
        results: ResultsWriter,
        transitions: TransitionWriter,
        confirmer: Confirmer,
        metrics: Metrics,
    ) -> None:
        self._checks = checks
        self._judging = judging
        self._region = judging.region
        self._dispatcher = dispatcher
        self._in_flight = dispatcher.in_flight
        self._results = results
        self._transitions = transitions
        self._backlog_of = transitions.backlog_of
        self._confirmer = confirmer
        # Prometheus children resolved once: labels() costs a dict lookup and a lock.
        phase = metrics.probe_phase
        self._phases = Phases(
            total=phase.labels(phase="total"), dns=phase.labels(phase="dns"),
            connect=phase.labels(phase="connect"), tls=phase.labels(phase="tls"),
            first_byte=phase.labels(phase="first_byte"),
        )
        # The counters per kind, indexed by the outcome itself (an int): no key tuple to
        # build and hash per probe.
        self._paths: dict[str, _Path] = {
            name: _Path(kind, tuple(
                metrics.probes.labels(kind=name, outcome=cls.name.lower()) for cls in Outcome))
            for name, kind in kinds.items()
        }
        self._unwritten = 0
        self._unwritten_logged = -UNWRITTEN_LOG_EVERY

    def done(self, c: ScheduledCheck, outcome: Any) -> None:
        """A probe started without a task ended (the kind's ``start`` calls this back).

        The steady case ends here; anything that must wait (a transition to write, a
        confirmation) goes on in a task. ``c.config_version`` is the version the probe
        started with: the catalog never changes it in place (a reconfigured check is a new
        object)."""
        version = c.config_version
        try:
            # is_current(c, version), inlined: the version was read just above.
            if self._checks.get(c.id) is c and not self._steady(
                self._paths[c.kind], c, version, outcome
            ):
                loop = self._dispatcher.loop
                assert loop is not None
                self._in_flight[c.id] = loop.create_task(self.probe(c, outcome))
                return
        except Exception:
            log.exception("check %d: probe failed unexpectedly", c.id)
        self._dispatcher.finish(c)

    async def probe(self, c: ScheduledCheck, outcome: Any = None) -> None:
        """A probe in a task, and what follows it; with ``outcome``, a probe that ran
        without a task and is not steady (see :meth:`done`): only what follows."""
        version = c.config_version
        try:
            path = self._paths[c.kind]
            if outcome is None:
                outcome = await path.kind.probe(c)
                if not is_current(self._checks, c, version) or self._steady(
                    path, c, version, outcome
                ):
                    return
            await self._judged(path, c, version, outcome)
        except DatabaseUnavailable as exc:
            # The transition is not persisted and the in-memory state not advanced: the next
            # probe evaluates again from the last state the database holds.
            self._note_unwritten(c.id, exc)
        except Exception:
            log.exception("check %d: probe failed unexpectedly", c.id)
        finally:
            self._dispatcher.finish(c)

    def _steady(self, path: _Path, c: ScheduledCheck, version: int, outcome: Any) -> bool:
        """The kind's steady path, when it has one: a probe that left the check as it was.
        False (nothing done) for anything else, which takes :meth:`_judged`; also while the
        check has transitions held (their order is kept)."""
        steady = path.steady
        if steady is None or c.id in self._backlog_of:
            return False
        got = steady(c, version, outcome, self._judging)
        if got is None:
            return False
        row, touch = got
        results = self._results
        if not results.offer(row):
            return False  # the buffer is full: _judged waits for room (or drops)
        path.counters[row[3]].inc()
        path.observe(outcome, self._phases)
        state = c.state
        state.error = touch.error
        state.last_check_at = touch.at
        results.touch(c.id, touch)
        return True

    async def _judged(self, path: _Path, c: ScheduledCheck, version: int, outcome: Any) -> None:
        """Judge ``outcome``, write its row, commit the transition; then the confirmation
        the transition asks for, judged and committed the same way."""
        kind = path.kind
        now = datetime.now(UTC)
        tr = kind.judge(c, outcome, now, self._judging)
        path.counters[tr.outcome].inc()
        path.observe(outcome, self._phases)
        await self._results.put(kind.row(c.id, now, tr.outcome, outcome, self._region, False))
        if not await self._transitions.commit(c, version, tr) or not tr.confirm:
            return
        confirmation = await self._confirmer.confirm(c, outcome)
        if confirmation is None or not is_current(self._checks, c, version):
            return  # no verdict: the check stays failing and the next probe asks again
        now = datetime.now(UTC)
        tr = kind.judge_again(c, confirmation.outcome, now, confirmation.region, self._judging)
        await self._results.put(
            kind.row(c.id, now, tr.outcome, confirmation.outcome, confirmation.region, True)
        )
        await self._transitions.commit(c, version, tr)

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
