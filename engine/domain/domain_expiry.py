"""The domain expiry state machine: (state, outcome, now) -> transition. Pure.

| state | outcome | next | effects |
|---|---|---|---|
| any | no RDAP for the TLD (``unsupported``) | unsupported, the reason as error | none |
| any | no answer (and none kept) | degraded, the failure in words | none |
| not down | expired, or on hold / redemption / pending delete | down | domain_invalid |
| down | still invalid | down, error updated | none |
| down | valid | ok | domain_recovered (parent = domain_invalid) |
| not down | valid | ok | domain_renewal_due once per threshold crossed |

A threshold ``t`` is crossed when fewer than ``t`` days remain before ``expires_at``. Each
announcement is remembered as ``<expires_at>/<t>`` in the state's
``renewal_notified_fingerprints`` (the certificate kind's memory of announcements): one
arriving with several thresholds crossed at once announces the smallest and marks the others,
and a renewal (a new ``expires_at``) re-arms every threshold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from engine.domain import events
from engine.domain.evaluate import (
    DOWN,
    OK,
    CheckState,
    EventSpec,
    Outcome,
    Transition,
)
from engine.domain.rdap import Registration
from engine.domain.timefmt import fmt

DOMAIN_EXPIRY: Final = "domain_expiry"
UNSUPPORTED: Final = "unsupported"
DEGRADED: Final = "degraded"
DEFAULT_THRESHOLDS: Final = (30, 14, 7, 1)
# EPP statuses under which the domain does not resolve, or is about to be lost.
INVALID_STATUSES: Final = ("serverHold", "clientHold", "redemptionPeriod", "pendingDelete")
SOURCE: Final = "rdap"
_DAY: Final = 86400.0


@dataclass(frozen=True, slots=True)
class DomainOutcome:
    """One domain expiry probe. ``registration`` is the registry's answer (possibly the one
    shared with other monitors, fetched at ``fetched_at`` from ``server``); ``error`` says why
    there is none, or why a refresh failed when an older answer is kept; ``unsupported``
    says why the domain cannot be looked up at all."""

    domain: str | None
    registration: Registration | None
    total_ms: float
    error: str | None = None
    unsupported: str | None = None
    server: str | None = None
    fetched_at: datetime | None = None


def days_left(expires_at: datetime, now: datetime) -> int:
    """Whole days until ``expires_at`` (negative once it passed)."""
    return math.floor((expires_at - now).total_seconds() / _DAY)


def invalid_reason(reg: Registration, now: datetime) -> str | None:
    """Why the domain is not usable, in words; None when it is."""
    if reg.expires_at is not None and reg.expires_at <= now:
        return f"the domain expired on {fmt(reg.expires_at)} UTC"
    held = [s for s in INVALID_STATUSES if s in reg.statuses]
    if held:
        return f"the registry lists the domain as {', '.join(held)}"
    return None


def domain_meta(outcome: DomainOutcome, now: datetime) -> dict[str, Any]:
    """The check's meta: every key always present (null when unknown)."""
    reg = outcome.registration
    expires = reg.expires_at if reg is not None else None
    return {
        "domain": outcome.domain,
        "registrar": reg.registrar if reg is not None else None,
        "expires_at": fmt(expires),
        "days_left": days_left(expires, now) if expires is not None else None,
        "statuses": list(reg.statuses) if reg is not None else [],
        "nameservers": list(reg.nameservers) if reg is not None else [],
        "source": SOURCE if reg is not None else None,
        "rdap_server": outcome.server,
        "checked_at": fmt(outcome.fetched_at),
        "warning": outcome.error if reg is not None else None,
    }


def _key(expires_at: datetime, threshold: int) -> str:
    return f"{fmt(expires_at)}/{threshold}"


def _state(prev: CheckState, status: str, error: str | None, now: datetime, *,
           incident: int | None, notified: tuple[str, ...],
           notified_for: datetime | None) -> CheckState:
    return CheckState(status=status, error=error, last_check_at=now,
                      incident_event_id=incident, renewal_notified_for=notified_for,
                      renewal_notified_fingerprints=notified)


def _durable(prev: CheckState, new: CheckState) -> bool:
    return (prev.incident_event_id != new.incident_event_id
            or prev.renewal_notified_for != new.renewal_notified_for
            or prev.renewal_notified_fingerprints != new.renewal_notified_fingerprints
            or prev.status != new.status)


def crossed(expires_at: datetime, now: datetime, thresholds: tuple[int, ...]) -> list[int]:
    """The thresholds (days) with fewer than that many days left, largest first."""
    remaining = (expires_at - now).total_seconds()
    return sorted((t for t in set(thresholds) if t > 0 and remaining < t * _DAY), reverse=True)


def evaluate_domain(
    prev: CheckState, outcome: DomainOutcome, *, now: datetime,
    thresholds: tuple[int, ...] = DEFAULT_THRESHOLDS,
) -> Transition:
    """The table of the module docstring."""
    meta = domain_meta(outcome, now)
    reg = outcome.registration
    keep = prev.renewal_notified_fingerprints
    if outcome.unsupported is not None or reg is None:
        status = UNSUPPORTED if outcome.unsupported is not None else (
            DOWN if prev.status == DOWN else DEGRADED)
        error = outcome.unsupported or outcome.error or "no answer from the registry"
        incident = prev.incident_event_id if status == DOWN else None
        new = _state(prev, status, error, now, incident=incident, notified=keep,
                     notified_for=prev.renewal_notified_for)
        cls = Outcome.FAILURE if status == DOWN else Outcome.DEGRADED
        return Transition(new, meta, cls, durable=_durable(prev, new))

    reason = invalid_reason(reg, now)
    if reason is not None:
        if prev.status == DOWN:
            new = _state(prev, DOWN, reason, now, incident=prev.incident_event_id,
                         notified=keep, notified_for=prev.renewal_notified_for)
            return Transition(new, meta, Outcome.FAILURE, durable=_durable(prev, new))
        new = _state(prev, DOWN, reason, now, incident=None, notified=keep,
                     notified_for=prev.renewal_notified_for)
        ev = EventSpec(events.DOMAIN_INVALID, {
            "last_check_at": now, "error": reason, "domain": outcome.domain,
            "expires_at": reg.expires_at, "statuses": list(reg.statuses),
        }, opens_incident=True)
        return Transition(new, meta, Outcome.FAILURE, events=[ev], durable=True)

    evs: list[EventSpec] = []
    if prev.status == DOWN and prev.incident_event_id is not None:
        evs.append(EventSpec(events.DOMAIN_RECOVERED, {
            "last_check_at": now, "domain": outcome.domain, "expires_at": reg.expires_at,
            "registrar": reg.registrar,
        }, parent_id=prev.incident_event_id))
    notified = keep
    notified_for = prev.renewal_notified_for
    if reg.expires_at is not None:
        # Announcements of another expiry date are history: a renewal re-arms them all.
        notified = tuple(k for k in keep if k.startswith(f"{fmt(reg.expires_at)}/"))
        due = crossed(reg.expires_at, now, thresholds)
        fresh = [t for t in due if _key(reg.expires_at, t) not in notified]
        if fresh:
            smallest = fresh[-1]
            evs.append(EventSpec(events.DOMAIN_RENEWAL_DUE, {
                "last_check_at": now, "domain": outcome.domain, "expires_at": reg.expires_at,
                "expires_in_days": max(0, days_left(reg.expires_at, now)),
                "threshold_days": smallest, "registrar": reg.registrar,
            }))
            notified = notified + tuple(_key(reg.expires_at, t) for t in fresh)
            notified_for = reg.expires_at
    new = _state(prev, OK, None, now, incident=None, notified=notified,
                 notified_for=notified_for)
    return Transition(new, meta, Outcome.OK, events=evs,
                      durable=bool(evs) or _durable(prev, new))
