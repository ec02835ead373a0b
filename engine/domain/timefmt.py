"""Time helpers: every timestamp Upwatch shows is UTC ``YYYY-MM-DD HH:MM:SS``."""

from datetime import UTC, datetime


def utcnow() -> datetime:
    return datetime.now(UTC)


def fmt(ts: datetime | None) -> str | None:
    """Format an aware or naive-UTC datetime as ``YYYY-MM-DD HH:MM:SS`` (None stays None)."""
    if ts is None:
        return None
    if ts.tzinfo is not None and ts.tzinfo is not UTC:
        ts = ts.astimezone(UTC)
    # isoformat is C and about half the cost of strftime, on a path (every timestamp of
    # every monitor of a list) where that shows; "YYYY-MM-DD HH:MM:SS" is its first 19
    # characters whatever follows (microseconds are cut by "seconds", then the offset).
    return ts.isoformat(" ", "seconds")[:19]


def hms(seconds: float) -> str:
    """Duration as ``H:i:s``: hours are not wrapped at 24 (``27:03:09``)."""
    total = max(0, int(seconds))
    h, rem = divmod(total, 3600)
    m, s = divmod(rem, 60)
    return f"{h:02d}:{m:02d}:{s:02d}"
