"""The statistics rules of decisions.md ("Statistics"), shared by the API and the status
page. Pure."""

from __future__ import annotations


def uptime_percentage(outage_seconds: float, enabled_seconds: float, checks_run: int) -> float:
    """``100 x (1 - outage / enabled)`` over the window, clamped to [0, 100], 3 decimals.

    100 when the check has not run in the window (nothing is known against it). Any outage
    at all keeps the figure below 100, so rounding never hides downtime.
    """
    if checks_run <= 0 or enabled_seconds <= 0:
        return 100.0
    value = 100.0 * (1.0 - max(0.0, outage_seconds) / enabled_seconds)
    rounded = round(min(100.0, max(0.0, value)), 3)
    if outage_seconds > 0 and rounded >= 100.0:
        return 99.999
    return rounded


def average_ms(total_ms: float, responses: int) -> float:
    """Mean response time in milliseconds, 3 decimals; 0 when nothing answered."""
    return round(total_ms / responses, 3) if responses > 0 else 0.0
