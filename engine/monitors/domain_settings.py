"""The settings of a domain_expiry check (which monitors have one:
:func:`engine.monitors.checkset.checks_of`): ``interval`` and ``expiry_threshold_days``, the
days before the domain's expiry at which ``domain_renewal_due`` is sent.

A list of whole days (each 1..365, at most :data:`MAX_THRESHOLDS`), kept largest first
without repeats; ``[]`` sends none; absent (or null) leaves it as it is, and a new check has
the defaults (30, 14, 7, 1), stored as NULL. :func:`engine.monitors.validation
.validate_check_update` reads a domain check's body through :func:`domain_fields`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from engine.domain.domain_expiry import DEFAULT_THRESHOLDS
from engine.runtime.errors import ValidationFailed

# A new domain check's interval: the answer it reads is refreshed once a day.
DOMAIN_INTERVAL: Final = 14400
FIELD: Final = "expiry_threshold_days"
MAX_THRESHOLDS: Final = 8
MAX_DAYS: Final = 365

# Settings other kinds have, and the kind that has each.
_OTHERS: Final = {
    "notification_threshold": "uptime",
    "recovery_threshold": "uptime",
    "expiry_threshold_percent": "certificate_health",
}


def _day(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationFailed({FIELD: [f"Each of the {FIELD} must be an integer."]})
    if not 1 <= value <= MAX_DAYS:
        raise ValidationFailed({FIELD: [f"Each of the {FIELD} must be between 1 and {MAX_DAYS}."]})
    return value


def validate_domain_thresholds(value: Any) -> tuple[int, ...]:
    """A list of days, largest first without repeats; raises ValidationFailed naming the
    field."""
    if not isinstance(value, list):
        raise ValidationFailed({FIELD: [
            f"The {FIELD} of a domain_expiry check must be a list of days, e.g. [30, 14, 7, 1]."]})
    if len(value) > MAX_THRESHOLDS:
        raise ValidationFailed({FIELD: [f"The {FIELD} may hold at most {MAX_THRESHOLDS} values."]})
    return tuple(sorted({_day(v) for v in value}, reverse=True))


def domain_fields(body: Mapping[str, Any]) -> tuple[tuple[int, ...] | None, dict[str, list[str]]]:
    """A domain check update body's thresholds (None: not given) and its errors, by field:
    another kind's setting is refused naming it."""
    errors: dict[str, list[str]] = {}
    days = None
    if body.get(FIELD) is not None:
        try:
            days = validate_domain_thresholds(body[FIELD])
        except ValidationFailed as exc:
            errors.update(exc.errors)
    for name, kind in _OTHERS.items():
        if body.get(name) is not None:
            errors[name] = [f"The {name} field applies to {kind} checks only; a "
                            f"domain_expiry check takes {FIELD} (a list of days)."]
    return days, errors


def interval_on_create(kind: str, other: int) -> int:
    """The interval of a new check of ``kind`` that is not an uptime check: ``other`` (the
    certificate check's hourly default), or :data:`DOMAIN_INTERVAL` for a domain check."""
    return DOMAIN_INTERVAL if kind == "domain_expiry" else other


def stored_thresholds(days: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """What ``checks.expiry_threshold_days`` keeps: None for the defaults, however given,
    so that a file exported with them and applied back changes nothing."""
    return None if days is None or days == DEFAULT_THRESHOLDS else days


def shown_thresholds(stored: tuple[int, ...] | list[int] | None) -> list[int]:
    """What the API and monitors files show: the stored list, or the defaults."""
    return list(DEFAULT_THRESHOLDS if stored is None else stored)
