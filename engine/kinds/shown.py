"""What the kinds show alike: the status words table, durations, expiry dates, timestamps,
and the API meta whose every key is present.

Pure functions; :mod:`engine.web.status.view` uses them too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from engine.domain.domain_expiry import days_left
from engine.domain.timefmt import fmt
from engine.domain.words import plural

# A status's tone on the status page, the same for every kind; a kind's words are listed in
# this order.
_TONES: Final = {
    "ok": "s-ok",
    "degraded": "s-warn",
    "failing": "s-warn",
    "down": "s-bad",
    "unsupported": "s-idle",
    "pending": "s-idle",
    "paused": "s-idle",
}


def status_words(
    *, ok: str, down: str, degraded: str = "Degraded", failing: str = "Failing",
    pending: str = "Not checked yet", unsupported: str | None = None,
) -> dict[str, tuple[str, str]]:
    """A kind's ``words`` (:class:`engine.kinds.base.CheckKind`): status -> (words, tone).
    A kind names only its own words; the tone is the status's. ``unsupported``: for a kind
    with that status."""
    words = {"ok": ok, "degraded": degraded, "failing": failing, "down": down,
             "unsupported": unsupported, "pending": pending, "paused": "Paused"}
    return {status: (text, _TONES[status]) for status, text in words.items() if text is not None}


def every_key(meta: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """Each of ``keys`` with its value in ``meta``, None where it has none: an API meta whose
    every key is always present."""
    return {k: meta.get(k) for k in keys}


def expiry_text(at: datetime, now: datetime) -> str:
    """An expiry date and the whole days left before it: ``2026-03-01 12:00:00 UTC (in 3
    days)``, ``(expires today)``, ``(expired 2 days ago)``."""
    days = days_left(at, now)
    left = (f"expired {plural(-days, 'day')} ago" if days < 0 else
            "expires today" if days == 0 else f"in {plural(days, 'day')}")
    return f"{fmt(at)} UTC ({left})"


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
