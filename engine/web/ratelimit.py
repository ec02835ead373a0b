"""Per-account token buckets for the API rate limit.

Pure logic: the caller passes ``now`` (a monotonic clock reading in seconds), so the buckets
are tested without a server or sleeps. Each account's bucket holds up to ``burst`` tokens and
refills at ``rate`` tokens a second; a request takes one token or is refused with the time
until one is available (the ``Retry-After`` of the 429).
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class RateLimiter:
    """Token buckets keyed by account. ``rate == 0`` disables limiting."""

    # Buckets that have refilled completely carry no information; dropping them bounds
    # memory by the number of accounts active within the last burst/rate seconds.
    _PRUNE_EVERY = 1024

    def __init__(self, rate: float, burst: int) -> None:
        if rate < 0 or burst < 1:
            raise ValueError("rate must be >= 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._buckets: dict[Hashable, _Bucket] = {}
        self._calls = 0

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def take(self, key: Hashable, now: float) -> float:
        """Take one token for ``key`` at time ``now``.

        Returns 0.0 when the request may proceed, else the seconds until a token is
        available (the request is refused and takes nothing).
        """
        if not self.enabled:
            return 0.0
        self._calls += 1
        if self._calls % self._PRUNE_EVERY == 0:
            self._prune(now)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = _Bucket(tokens=float(self.burst), at=now)
        elapsed = max(0.0, now - bucket.at)  # a clock that steps back refills nothing
        bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
        bucket.at = max(bucket.at, now)
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / self.rate

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate
        stale = [k for k, b in self._buckets.items() if now - b.at >= full_after]
        for k in stale:
            del self._buckets[k]


def retry_after_header(wait: float) -> str:
    """``Retry-After`` in whole seconds, rounded up and at least 1 (0 would invite a retry
    that is refused again)."""
    return str(max(1, math.ceil(wait)))
