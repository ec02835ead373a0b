"""The uptime state machine, and what every check state machine speaks: (state, outcome,
now) -> transition. Pure: no I/O, no clock.

The shared part is the persisted :class:`CheckState`, the statuses, the probe's
:class:`Outcome` class and the :class:`Transition`, with the steps that keep or clear a
state; the other kinds' machines (:mod:`engine.domain.certificate_states`,
:mod:`engine.domain.heartbeat_states`, :mod:`engine.domain.domain_expiry`) build on them.

The tables in docs/design.md are the specification; each branch below names its row. A
:class:`Transition` says what to persist and what else must happen with it:

- ``state``: the check's new persisted state. ``outage_id`` and ``incident_event_id`` are
  final except where an effect creates the row they point to: the store fills in the id of an
  outage it opens (``open_outage``) and of an event marked ``opens_incident``.
- ``open_outage`` / ``close_outage_id`` / ``alert_outage``: outage rows to write.
- ``events``: webhook events to queue in the same transaction, with the fields their
  :mod:`engine.domain.payloads` builders take.
- ``confirm``: the runner must run the confirmation step next.
- ``durable``: the change must go through one transaction (effects, or a change of the
  failure bookkeeping). When False only status/error/meta/last_check_at change and the runner
  may batch the write.

Thresholds arrive in real seconds (already multiplied by the time scale); ``now`` is aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import IntEnum
from typing import Any, Final

from engine.domain import payloads
from engine.domain.outcomes import CertOutcome, HttpOutcome
from engine.domain.timefmt import fmt

# Final: compiled (engine/runtime/compiled.py), a Final constant is read without a dict lookup.
PENDING: Final = "pending"
OK: Final = "ok"
DEGRADED: Final = "degraded"
FAILING: Final = "failing"
DOWN: Final = "down"
PAUSED: Final = "paused"

UPTIME: Final = "uptime"


class Outcome(IntEnum):
    """Class of one probe; the values are what ``probe_results.outcome`` stores."""

    OK = 0
    DEGRADED = 1
    FAILURE = 2


# The members as plain module globals for the per-probe functions: on Python 3.11 reading
# ``Outcome.OK`` goes through enum's Python-level member descriptor (~0.25 us, measured),
# and the steady path of every probe read three of them.
_OK: Final = Outcome.OK
_DEGRADED: Final = Outcome.DEGRADED
_FAILURE: Final = Outcome.FAILURE

_STATUS_OF: Final = {_OK: OK, _DEGRADED: DEGRADED}


@dataclass(slots=True)
class CheckState:
    """The state machine's persisted state of one check (columns of ``checks``).

    ``verified_via`` belongs to the open outage (stored on its row); it is kept here so a
    downtime alert that waits for the threshold can name the confirming region.
    """

    status: str = PENDING
    error: str | None = None
    last_check_at: datetime | None = None
    failing_since: datetime | None = None
    detected_by: str | None = None
    verified_via: str | None = None
    outage_id: int | None = None
    incident_event_id: int | None = None
    renewal_notified_for: datetime | None = None
    # Down, and good probes since then: the restore waits for the recovery threshold.
    recovering_since: datetime | None = None
    # SHA-256 fingerprints of the certificates a renewal-due was sent for, oldest first, at
    # most engine.domain.certificate_states.RENEWAL_MEMORY.
    renewal_notified_fingerprints: tuple[str, ...] = ()

    @property
    def confirmed(self) -> bool:
        """Failing with a confirmed (opened) outage."""
        return self.outage_id is not None

    def copy_from(self, other: CheckState) -> None:
        """Take ``other``'s values in place. The engine keeps one state object per check for
        its lifetime, so long-lived objects stay few and frozen out of the cyclic GC."""
        self.status = other.status
        self.error = other.error
        self.last_check_at = other.last_check_at
        self.failing_since = other.failing_since
        self.detected_by = other.detected_by
        self.verified_via = other.verified_via
        self.outage_id = other.outage_id
        self.incident_event_id = other.incident_event_id
        self.renewal_notified_for = other.renewal_notified_for
        self.recovering_since = other.recovering_since
        self.renewal_notified_fingerprints = other.renewal_notified_fingerprints


@dataclass(slots=True)
class OutageOpen:
    started_at: datetime
    http_status_code: int | None
    error: str | None
    detected_by: str | None
    verified_via: str | None


@dataclass(slots=True)
class EventSpec:
    """One webhook event: ``event`` names the payload builder, ``fields`` are its keywords
    (without the monitor). ``parent_id`` is the event that opened the incident (restored and
    recovered events). ``opens_incident`` makes its id the check's ``incident_event_id``."""

    event: str
    fields: dict[str, Any]
    parent_id: int | None = None
    opens_incident: bool = False


@dataclass(slots=True)
class Transition:
    state: CheckState
    meta: dict[str, Any]
    outcome: Outcome
    open_outage: OutageOpen | None = None
    close_outage_id: int | None = None
    alert_outage: bool = False
    events: list[EventSpec] = field(default_factory=list)
    confirm: bool = False
    durable: bool = False
    # A certificate probe's leaf, for the check's certificate history (first/last seen).
    certificate: CertOutcome | None = None


# -- what every state machine keeps or clears ---------------------------------------------


def bookkeeping_changed(prev: CheckState, new: CheckState) -> bool:
    """Whether the failure bookkeeping changed (status/error/timestamps alone do not count):
    a transition that changes it is ``durable``."""
    return (
        prev.failing_since != new.failing_since
        or prev.detected_by != new.detected_by
        or prev.verified_via != new.verified_via
        or prev.outage_id != new.outage_id
        or prev.incident_event_id != new.incident_event_id
        or prev.renewal_notified_for != new.renewal_notified_for
        or prev.recovering_since != new.recovering_since
        or prev.renewal_notified_fingerprints != new.renewal_notified_fingerprints
    )


def cleared(status: str, error: str | None, now: datetime, prev: CheckState) -> CheckState:
    """The next state with ``status`` and ``error``: failure bookkeeping gone, certificate
    renewal memory kept."""
    return CheckState(
        status=status,
        error=error,
        last_check_at=now,
        renewal_notified_for=prev.renewal_notified_for,
        renewal_notified_fingerprints=prev.renewal_notified_fingerprints,
    )


def kept(prev: CheckState, status: str, error: str | None, now: datetime) -> CheckState:
    """The next state with ``status`` and ``error``: everything else as in ``prev``."""
    return CheckState(
        status=status,
        error=error,
        last_check_at=now,
        failing_since=prev.failing_since,
        detected_by=prev.detected_by,
        verified_via=prev.verified_via,
        outage_id=prev.outage_id,
        incident_event_id=prev.incident_event_id,
        renewal_notified_for=prev.renewal_notified_for,
        recovering_since=prev.recovering_since,
        renewal_notified_fingerprints=prev.renewal_notified_fingerprints,
    )


# -- uptime ------------------------------------------------------------------------------


def classify(outcome: HttpOutcome, slow_threshold_ms: float) -> Outcome:
    """decisions.md: 2xx/3xx within the slow threshold is ok; a slow or 4xx response is
    degraded; no response or a 5xx is a failure. A failed assertion is a
    failure; a status_code assertion that held replaces the 2xx/3xx rule. A probe of another
    scheme (no status code) that answered (no error) is ok unless an assertion failed
    or it was slow."""
    code = outcome.status_code
    if code is None and outcome.error is None:
        if outcome.assertion_error is not None:
            return _FAILURE
        return _DEGRADED if outcome.total_ms > slow_threshold_ms else _OK
    if code is None or code >= 500:
        if code is not None and outcome.status_asserted and outcome.assertion_error is None:
            return _DEGRADED if outcome.total_ms > slow_threshold_ms else _OK
        return _FAILURE
    if outcome.assertion_error is not None:
        return _FAILURE  # any failed assertion fails the probe
    if (code >= 400 and not outcome.status_asserted) or outcome.total_ms > slow_threshold_ms:
        return _DEGRADED
    return _OK


def uptime_error(outcome: HttpOutcome, cls: Outcome, slow_threshold_ms: float) -> str | None:
    """The check's ``error``: None when ok, else a short phrase saying what was wrong."""
    if cls is _OK:
        return None
    code = outcome.status_code
    if code is None and outcome.error is not None:
        return outcome.error
    if outcome.assertion_error is not None:
        return outcome.assertion_error
    if code is not None and code >= 400 and not outcome.status_asserted:
        return f"HTTP {code}"
    return f"slow response: {outcome.total_ms:.0f} ms (threshold {slow_threshold_ms:.0f} ms)"


def uptime_meta(outcome: HttpOutcome) -> dict[str, Any]:
    """The uptime check's meta: the status code, and a non-HTTP probe's ``details``."""
    if outcome.details is None:
        return {"http_status_code": outcome.status_code}
    return {"http_status_code": outcome.status_code, **outcome.details}


def _seconds(a: datetime, b: datetime) -> float:
    return (a - b).total_seconds()


def _waited(now: datetime, start: datetime, resumed_at: datetime | None) -> float:
    """Seconds a wait that began at ``start`` has lasted; a maintenance window that ended
    after ``start`` (``resumed_at``) starts it afresh at its end."""
    if resumed_at is not None and resumed_at > start:
        start = resumed_at
    return _seconds(now, start)


def recovering_error(since: datetime) -> str:
    """The ``error`` of a down check whose recovery is not confirmed yet."""
    return f"responding again since {fmt(since)}; recovery not confirmed yet"


def _downtime_event(
    state: CheckState, now: datetime, error: str, code: int | None, verified_via: str
) -> EventSpec:
    return EventSpec(
        payloads.DOWNTIME,
        {
            "last_check_at": now,
            "error": error,
            "http_status_code": code,
            "detected_by": state.detected_by or verified_via,
            "verified_via": verified_via,
        },
        opens_incident=True,
    )


def steady_class(
    prev: CheckState, outcome: HttpOutcome, slow_threshold_ms: float
) -> Outcome | None:
    """``classify(outcome)`` when :func:`evaluate_uptime` of it would change nothing but
    ``error``, ``meta`` and ``last_check_at``, else None. Steady means: not a failure, the
    status stays what it is (ok -> ok, degraded -> degraded) and no failure bookkeeping is
    left to clear. Its transition is then non-durable, with the state ``prev`` with those
    three fields set (tests compare the two); the runner takes this path for most probes
    without building one."""
    cls = classify(outcome, slow_threshold_ms)
    if (
        cls is not _FAILURE
        and prev.status == _STATUS_OF[cls]
        and prev.outage_id is None
        and prev.failing_since is None
        and prev.detected_by is None
        and prev.verified_via is None
        and prev.incident_event_id is None
    ):
        return cls
    return None


def evaluate_uptime(
    prev: CheckState,
    outcome: HttpOutcome,
    *,
    now: datetime,
    region: str,
    threshold: float,
    slow_threshold_ms: float,
    recovery: float = 0.0,
    muted_until: datetime | None = None,
    resumed_at: datetime | None = None,
) -> Transition:
    """A scheduled uptime probe's outcome (design.md, uptime table).

    ``recovery``: seconds of good probes (the recovery threshold, scaled) before a down
    check is restored. ``muted_until``: the end of the maintenance window the monitor is in
    now (None: none), during which nothing goes down or is restored. ``resumed_at``: the end
    of the monitor's last window before ``now``; thresholds count from it when it is later
    than what they count from (an outage still open when a window ends is judged afresh)."""
    cls = classify(outcome, slow_threshold_ms)
    error = uptime_error(outcome, cls, slow_threshold_ms)
    meta = uptime_meta(outcome)
    code = outcome.status_code

    if cls is not Outcome.FAILURE:
        status = _STATUS_OF[cls]
        if prev.status == DOWN:
            since = prev.recovering_since or now
            if muted_until is not None or _waited(now, since, resumed_at) < recovery:
                # down | ok/degraded, recovery not confirmed yet (or a window is on): down,
                # counting good probes from the first of them.
                new = kept(prev, DOWN, recovering_error(since), now)
                new.recovering_since = since
                return Transition(new, meta, cls, durable=bookkeeping_changed(prev, new))
            # down | ok/degraded -> ok/degraded; outage closed; uptime_restored.
            new = cleared(status, error, now, prev)
            tr = Transition(new, meta, cls, close_outage_id=prev.outage_id, durable=True)
            if prev.incident_event_id is not None:
                since = prev.failing_since or now
                tr.events.append(EventSpec(
                    payloads.UPTIME_RESTORED,
                    {
                        "last_check_at": now,
                        "http_status_code": code or 0,  # 0: a probe without HTTP, as downtime
                        "downtime_seconds": max(0.0, _seconds(now, since)),
                    },
                    parent_id=prev.incident_event_id,
                ))
            return tr
        if prev.status == FAILING:
            # failing, confirmed | ok -> outage closed, nothing sent (no alert went out).
            # failing, unconfirmed | ok -> back to health, nothing sent.
            new = cleared(status, error, now, prev)
            return Transition(new, meta, cls, close_outage_id=prev.outage_id, durable=True)
        # any not failing/down | ok/degraded -> ok/degraded. Failure bookkeeping cannot be
        # there in these states unless a disable/enable cycle left it behind: it is dropped,
        # and an outage left open is closed.
        new = cleared(status, error, now, prev)
        return Transition(
            new, meta, cls, close_outage_id=prev.outage_id,
            durable=bookkeeping_changed(prev, new),
        )

    assert error is not None
    if prev.status == DOWN:
        # down | failure -> down, error updated; a recovery being confirmed relapses (the
        # outage stays the one it was).
        new = kept(prev, DOWN, error, now)
        new.recovering_since = None
        return Transition(new, meta, cls, durable=prev.recovering_since is not None)
    if prev.status == FAILING and prev.confirmed:
        # failing, confirmed | failure -> down once the threshold has passed (never during
        # a maintenance window).
        since = prev.failing_since or now
        if muted_until is None and _waited(now, since, resumed_at) >= threshold:
            new = kept(prev, DOWN, error, now)
            ev = _downtime_event(prev, now, error, code, prev.verified_via or region)
            return Transition(new, meta, cls, alert_outage=True, events=[ev], durable=True)
        return Transition(kept(prev, FAILING, error, now), meta, cls)
    if prev.status == FAILING:
        # failing, unconfirmed (e.g. a restart between probe and confirmation): the episode
        # goes on from its first failure and is confirmed again.
        return Transition(kept(prev, FAILING, error, now), meta, cls, confirm=True)
    # pending/ok/degraded | failure -> failing; ask for confirmation. (A stale open outage,
    # see above, is closed: this is a new episode.)
    new = CheckState(
        status=FAILING,
        error=error,
        last_check_at=now,
        failing_since=now,
        detected_by=region,
        renewal_notified_for=prev.renewal_notified_for,
    )
    return Transition(
        new, meta, cls, close_outage_id=prev.outage_id, confirm=True, durable=True
    )


def evaluate_confirmation(
    prev: CheckState,
    outcome: HttpOutcome,
    *,
    now: datetime,
    verified_via: str,
    threshold: float,
    slow_threshold_ms: float,
    recovery: float = 0.0,
    muted_until: datetime | None = None,
    resumed_at: datetime | None = None,
) -> Transition:
    """The confirmation probe's outcome for a check that is failing and unconfirmed
    (the keywords as for :func:`evaluate_uptime`).

    Anything else (the state moved on meanwhile) is evaluated as an ordinary probe.
    """
    if prev.status != FAILING or prev.confirmed:
        return evaluate_uptime(
            prev, outcome, now=now, region=verified_via, threshold=threshold,
            slow_threshold_ms=slow_threshold_ms, recovery=recovery, muted_until=muted_until,
            resumed_at=resumed_at,
        )
    cls = classify(outcome, slow_threshold_ms)
    meta = uptime_meta(outcome)
    if cls is not Outcome.FAILURE:
        # failing, unconfirmed | confirmation ok/degraded -> ok/degraded, nothing sent.
        new = cleared(_STATUS_OF[cls], uptime_error(outcome, cls, slow_threshold_ms), now, prev)
        return Transition(new, meta, cls, durable=True)
    # failing, unconfirmed | confirmation failure -> outage opened (from the first failure);
    # down with the downtime event at once when the threshold has already passed.
    error = uptime_error(outcome, cls, slow_threshold_ms) or "no response"
    since = prev.failing_since or now
    outage = OutageOpen(
        started_at=since,
        http_status_code=outcome.status_code,
        error=error,
        detected_by=prev.detected_by,
        verified_via=verified_via,
    )
    new = kept(prev, FAILING, error, now)
    new.failing_since = since
    new.verified_via = verified_via
    tr = Transition(new, meta, cls, open_outage=outage, durable=True)
    if muted_until is None and _waited(now, since, resumed_at) >= threshold:
        new.status = DOWN
        tr.alert_outage = True
        tr.events.append(_downtime_event(prev, now, error, outcome.status_code, verified_via))
    return tr


def threshold_due(state: CheckState, threshold: float) -> datetime | None:
    """When a confirmed outage that is still waiting for its threshold becomes alertable;
    None when nothing waits. The runner probes again then if that is before the interval."""
    if state.status != FAILING or not state.confirmed or state.failing_since is None:
        return None
    return state.failing_since + timedelta(seconds=threshold)


def decision_due(
    state: CheckState,
    threshold: float,
    recovery: float,
    muted_until: datetime | None,
    resumed_at: datetime | None,
) -> datetime | None:
    """When a probe can next change a waiting decision: a confirmed outage's alert
    (``threshold``) or a down check's restore (``recovery``), counted as the evaluation
    counts them (from the end of a window that is on, or that ended after the wait began);
    None when nothing waits. The runner probes again then if that is before the interval."""
    if state.status == FAILING and state.confirmed and state.failing_since is not None:
        start = state.failing_since
        wait = threshold
    elif state.status == DOWN and state.recovering_since is not None:
        start = state.recovering_since
        wait = recovery
    else:
        return None
    if muted_until is not None:
        if muted_until > start:
            start = muted_until
    elif resumed_at is not None and resumed_at > start:
        start = resumed_at
    return start + timedelta(seconds=wait)
