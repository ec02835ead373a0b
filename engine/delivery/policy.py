"""Retry policy for webhook deliveries (decisions.md "Webhooks"). Pure: every function takes
the current time and the try count; nothing here reads a clock or the database.

- After try ``n`` fails, the next try waits the nominal delay ``10 s x 2^(n-1)``, capped at
  1 h, with jitter: the actual delay is drawn uniformly from ``[0.8 d, d]``. Jitter only ever
  shortens the wait, so the 1 h cap is a hard cap and the waits still strictly grow until the
  cap (0.8 x 2d > d), while a burst of events that failed together (a receiver outage) does
  not come back as one synchronised burst.
- All durations are multiplied by ``time_scale`` (``UPWATCH_TIME_SCALE``).
- An event is retried for 24 h (x time_scale) from its creation. A retry that would fall
  after that deadline is moved onto it, so the last try happens at the deadline; a failure at
  or after the deadline gives up (the event becomes ``failed`` and is kept).
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

BASE_DELAY = 10.0          # seconds before the second try
MAX_DELAY = 3600.0         # cap of one wait
GIVE_UP_AFTER = 86400.0    # seconds from creation after which a failed try is the last
JITTER = 0.2               # fraction of the nominal delay that jitter may take off

# 2^30 x 10 s is far beyond the cap; bounding the exponent keeps the float finite for any n.
_MAX_EXPONENT = 30


def nominal_delay(tries: int) -> float:
    """Unscaled, unjittered wait after try number ``tries`` (1 = the first try) failed."""
    if tries < 1:
        raise ValueError("tries counts the tries made and starts at 1")
    return min(BASE_DELAY * 2.0 ** min(tries - 1, _MAX_EXPONENT), MAX_DELAY)


def retry_delay(tries: int, *, time_scale: float = 1.0, jitter: float | None = None) -> float:
    """Seconds to wait after try ``tries`` failed.

    ``jitter`` in ``[0, 1]`` picks the point in the jitter band (1 = the full nominal delay);
    None draws it at random. The result lies in ``[0.8 d, d] x time_scale``.
    """
    if time_scale <= 0:
        raise ValueError("time_scale must be positive")
    u = random.random() if jitter is None else min(max(jitter, 0.0), 1.0)
    d = nominal_delay(tries)
    return d * (1.0 - JITTER * (1.0 - u)) * time_scale


def max_age(time_scale: float = 1.0) -> timedelta:
    """How long after its creation an event is still retried."""
    return timedelta(seconds=GIVE_UP_AFTER * time_scale)


def deadline(created_at: datetime, time_scale: float = 1.0) -> datetime:
    """The moment after which a failed try is not retried."""
    return created_at + max_age(time_scale)


def is_expired(created_at: datetime, now: datetime, time_scale: float = 1.0) -> bool:
    """True once the event has been retried for its whole 24 h (x time_scale)."""
    return now >= deadline(created_at, time_scale)


def next_try_at(
    *,
    created_at: datetime,
    now: datetime,
    tries: int,
    time_scale: float = 1.0,
    jitter: float | None = None,
) -> datetime | None:
    """When to try again after try number ``tries`` failed at ``now``; None means give up.

    Never later than the deadline (the final try happens at it) and never before ``now``.
    """
    end = deadline(created_at, time_scale)
    if now >= end:
        return None
    at = now + timedelta(seconds=retry_delay(tries, time_scale=time_scale, jitter=jitter))
    return min(at, end)
