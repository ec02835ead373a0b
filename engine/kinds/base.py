"""The seam every kind of check implements: how to probe, how to judge, what to show.

A kind is a plain object satisfying :class:`CheckKind` (a Protocol, so nothing inherits
from a compiled class). It answers three questions and nothing else:

- probe: ``await probe(check)`` returns an outcome whose ``error`` is None or a reason in
  words and whose ``total_ms`` (and any phases) were measured; all I/O goes through the
  prober the kind was built with. A kind with nothing to probe returns at once.
- judge: ``judge(check, outcome, now, judging)`` is pure and returns the
  :class:`~engine.domain.evaluate.Transition`; ``judge_again`` judges a confirmation's
  outcome, for kinds whose transitions may ask for one (``Transition.confirm``).
- show: ``row`` (the probe_results row), ``observe`` (phase metrics), ``api_meta`` (the API's
  check ``meta``), ``label``, ``words``, ``status_facts`` and ``status_fields`` (the status
  page).

Optional capabilities, None when a kind lacks them: ``start``, a taskless probe start (the
signature of :meth:`engine.probes.http.HttpProber.start`), and ``steady`` (:data:`Steady`),
pure: the row and touch of a probe that left the state as it was, which the flow writes
without a transition, task or await.

What kinds share, they share without a base class: :func:`plain_row` here, and what they
show alike (their status words, expiry dates, API meta keys) in :mod:`engine.kinds.shown`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from engine.domain.evaluate import Outcome, Transition
from engine.kinds.scheduled import ScheduledCheck, Touch

# One row of probe_results, in engine.db.results.RESULT_COLUMNS order:
# (check_id, at, kind, outcome, status_code, total_ms, dns_ms, connect_ms, tls_ms, ttfb_ms,
#  region, confirmation, error)
ResultRow = tuple[
    int, datetime, int, int, int | None, float | None, float | None, float | None,
    float | None, float | None, str, bool, str | None,
]

# (monitor_id, account_id, now) -> (muted_until, resumed_at): the maintenance calendar.
Quiet = Callable[[int, int, datetime], tuple[datetime | None, datetime | None]]

# A status page fact: (label, value, value is text the check's owner wrote).
Fact = tuple[str, str, bool]


@dataclass(frozen=True, slots=True)
class Judging:
    """What judging needs besides a check and an outcome: this node's settings and the
    maintenance calendar (``quiet``). ``scale`` multiplies every configured duration."""

    region: str
    slow_threshold_ms: float
    scale: float
    quiet: Quiet


# steady(check, version, outcome, judging): pure. When the outcome leaves the check's state
# as it was but for error, meta and last_check_at, its result row and the touch of the
# check's row (the Touch's error and at are the state's new error and last_check_at); else
# None.
Steady = Callable[[ScheduledCheck, int, Any, Judging], tuple[ResultRow, Touch] | None]


class Observer(Protocol):
    def observe(self, amount: float) -> None: ...


@dataclass(frozen=True, slots=True)
class Phases:
    """The probe phase histogram's children, in seconds (resolved once by the engine)."""

    total: Observer
    dns: Observer
    connect: Observer
    tls: Observer
    first_byte: Observer


class Cancellable(Protocol):
    def cancel(self) -> Any: ...


class ShownCheck(Protocol):
    """A stored check as the API and the status page read it."""

    @property
    def status(self) -> str: ...
    @property
    def interval(self) -> int: ...
    @property
    def last_check_at(self) -> datetime | None: ...
    @property
    def meta(self) -> dict[str, Any]: ...


class CheckKind(Protocol):
    """One kind of check (see the module docstring). ``name`` is the stored ``checks.kind``,
    ``code`` the ``probe_results.kind`` of its rows."""

    @property
    def name(self) -> str: ...
    @property
    def code(self) -> int: ...
    @property
    def label(self) -> str:
        """What the status page calls a check of this kind."""
        ...
    @property
    def words(self) -> Mapping[str, tuple[str, str]]:
        """Status -> (words, tone) on the status page."""
        ...
    @property
    def prober(self) -> Any:
        """What it probes with; None when it probes nothing, or is only shown."""
        ...
    @property
    def start(self) -> Callable[..., Cancellable] | None: ...
    @property
    def steady(self) -> Steady | None: ...

    async def probe(self, check: ScheduledCheck) -> Any: ...

    def judge(
        self, check: ScheduledCheck, outcome: Any, now: datetime, judging: Judging
    ) -> Transition: ...

    def judge_again(
        self, check: ScheduledCheck, outcome: Any, now: datetime, region: str,
        judging: Judging,
    ) -> Transition: ...

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        """When a waiting decision (an alert, a restore) may change before the next
        interval; None when nothing waits."""
        ...

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: Any, region: str,
        confirmation: bool,
    ) -> ResultRow: ...

    def observe(self, outcome: Any, phases: Phases) -> None: ...

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]: ...

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]: ...

    def status_fields(self, check: ShownCheck) -> dict[str, Any]: ...


def plain_row(
    check_id: int, at: datetime, code: int, cls: Outcome, total_ms: float | None, region: str,
    confirmation: bool, error: str | None,
) -> ResultRow:
    """The probe_results row of a kind whose probes have no status code and no phases: a
    total time at most (None: not measured)."""
    return (check_id, at, code, int(cls), None, total_ms, None, None, None, None, region,
            confirmation, error)


def no_prober(name: str) -> Exception:
    """The error of a kind built without the prober it probes with (presentation only)."""
    return RuntimeError(f"the {name} kind was built without a prober")
