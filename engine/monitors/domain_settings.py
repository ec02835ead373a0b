"""The settings of a domain_expiry check: ``expiry_threshold_days``, the days before the
domain's expiry at which ``domain_renewal_due`` is sent.

A list of whole days (each 1..365, at most :data:`MAX_THRESHOLDS`), stored largest first
without repeats; ``[]`` sends none; null (or absent) means the defaults (30, 14, 7, 1).
"""

from __future__ import annotations

from typing import Any, Final

from engine.domain.domain_expiry import DEFAULT_THRESHOLDS
from engine.monitors.validation import MAX_EXPIRY_DAYS, as_int
from engine.runtime.errors import ValidationFailed

FIELD: Final = "expiry_threshold_days"
MAX_THRESHOLDS: Final = 8


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
