"""Time helpers: every timestamp Upwatch shows is UTC ``YYYY-MM-DD HH:MM:SS``."""

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def fmt(ts: datetime | None) -> str | None:
    """Format an aware or naive-UTC datetime as ``YYYY-MM-DD HH:MM:SS`` (None stays None)."""
    if ts is None:
        return None
    if ts.tzinfo is not None:
        ts = ts.astimezone(UTC)
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def hms(seconds: float) -> str:
    """Duration as ``H:i:s``: hours are not wrapped at 24 (``27:03:09``)."""
    total = max(0, int(seconds))
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"
