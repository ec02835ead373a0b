"""Words the kinds' API meta and status rows share: durations, plurals, timestamps.

Pure functions; :mod:`engine.web.status.view` uses them too.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from engine.domain.timefmt import fmt


def duration_text(seconds: float) -> str:
    """``42 s``, ``5 min 12 s``, ``2 h 5 min``, ``3 d 4 h``: the two largest units, the
    smaller left out when zero (``1 h``, ``30 min``)."""
    total = max(0, int(seconds))
    days, rem = divmod(total, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    for big, big_unit, small, small_unit in (
        (days, "d", hours, "h"), (hours, "h", minutes, "min"), (minutes, "min", secs, "s")
    ):
        if big:
            return f"{big} {big_unit} {small} {small_unit}" if small else f"{big} {big_unit}"
    return f"{secs} s"


def parse_timestamp(value: Any) -> datetime | None:
    """A meta timestamp (``YYYY-MM-DD HH:MM:SS`` UTC, or ISO 8601) as an aware datetime."""
    if not isinstance(value, str) or not value:
        return None
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        return None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def meta_text(meta: Mapping[str, Any], key: str) -> str | None:
    value = meta.get(key)
    return value if isinstance(value, str) and value else None


def last_checked(at: datetime | None) -> str:
    return f"{fmt(at)} UTC" if at else "Never"


def api_timestamp(value: Any) -> str | None:
    """A stored timestamp (a datetime, or ISO text the engine wrote into ``meta``) in the
    API format; text that is not a timestamp is passed through rather than lost."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return fmt(value)
    if isinstance(value, str):
        try:
            return fmt(datetime.fromisoformat(value))
        except ValueError:
            return value
    return str(value)


def status_code(meta: Mapping[str, Any]) -> int | None:
    """``http_status_code`` of a meta, when it is an integer."""
    code = meta.get("http_status_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None
