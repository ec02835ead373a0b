"""Which monitors have a domain_expiry check (:func:`has_domain_check`), and its settings:
``expiry_threshold_days``, the days before the domain's expiry at which
``domain_renewal_due`` is sent.

A list of whole days (each 1..365, at most :data:`MAX_THRESHOLDS`), stored largest first
without repeats; ``[]`` sends none; null (or absent) means the defaults (30, 14, 7, 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from engine.domain.domain_expiry import DEFAULT_THRESHOLDS
from engine.domain.rdap import registrable_domain
from engine.monitors.validation import (
    MAX_EXPIRY_DAYS,
    as_int,
    present,
    validate_interval,
)
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Plan

FIELD: Final = "expiry_threshold_days"
MAX_THRESHOLDS: Final = 8
# A new domain check's interval: the answer it reads is refreshed once a day.
DOMAIN_INTERVAL: Final = 14400


def has_domain_check(scheme: str, host: str) -> bool:
    """A monitor has a domain check when its URL's host is a name under a registrable
    domain: not an IP literal, not a bare suffix or a single label (``localhost``);
    heartbeat monitors have no host."""
    return scheme != "heartbeat" and registrable_domain(host) is not None


def validate_domain_thresholds(value: Any, field: str = FIELD) -> tuple[int, ...]:
    """A list of days; raises ValidationFailed naming ``field``."""
    if not isinstance(value, list):
        raise ValidationFailed({field: [
            f"The {field} of a domain_expiry check must be a list of days, "
            f"e.g. [30, 14, 7, 1]."]})
    if len(value) > MAX_THRESHOLDS:
        raise ValidationFailed({field: [
            f"The {field} may hold at most {MAX_THRESHOLDS} values."]})
    days = {as_int(v, field) for v in value}
    if any(not 1 <= d <= MAX_EXPIRY_DAYS for d in days):
        raise ValidationFailed({field: [
            f"Each of the {field} must be between 1 and {MAX_EXPIRY_DAYS}."]})
    return tuple(sorted(days, reverse=True))


def shown_thresholds(stored: tuple[int, ...] | list[int] | None) -> list[int]:
    """What the API and monitors files show: the stored list, or the defaults."""
    return list(DEFAULT_THRESHOLDS if stored is None else stored)


@dataclass(frozen=True, slots=True)
class DomainCheckUpdate:
    """A domain_expiry check's update: None leaves a setting as it is."""

    interval: int | None
    thresholds: tuple[int, ...] | None


# Settings other kinds have, and what to use on a domain_expiry check instead.
_OTHERS: Final = {
    "notification_threshold": "uptime",
    "recovery_threshold": "uptime",
    "expiry_threshold_percent": "certificate_health",
}


def validate_domain_check_update(body: Mapping[str, Any], plan: Plan) -> DomainCheckUpdate:
    """``PUT /webapi/checks/{id}`` on a domain_expiry check: ``interval`` (the plan's
    list) and ``expiry_threshold_days``; another kind's setting is a 422 naming it. Every
    field's error is reported at once."""
    errors: dict[str, list[str]] = {}
    interval = thresholds = None
    if present(body, "interval"):
        try:
            interval = validate_interval(body["interval"], plan)
        except ValidationFailed as exc:
            errors.update(exc.errors)
    if FIELD in body:
        try:
            thresholds = validate_domain_thresholds(body[FIELD])
        except ValidationFailed as exc:
            errors.update(exc.errors)
    for name, kind in _OTHERS.items():
        if present(body, name):
            errors[name] = [f"The {name} field applies to {kind} checks only; a "
                            f"domain_expiry check takes {FIELD} (a list of days)."]
    if errors:
        raise ValidationFailed(errors)
    return DomainCheckUpdate(interval, thresholds)
