"""A pure hashed timing wheel: O(1) schedule and cancel keyed by check id.

The engine keeps every scheduled check in one wheel instead of one timer or task per check,
so 50,000 checks cost 50,000 small dict entries and the scheduler loop does work only for
the slots that come due.

Layout: ``slots`` buckets of ``tick`` seconds each, a revolution of ``slots * tick`` seconds.
An item lives in the bucket of its due tick (modulo the revolution) with its exact due time;
items due more than one revolution ahead simply stay in their bucket until a sweep finds
them due (the classic "rounds" wheel, with the round implied by the due time). A sweep over
the buckets from the cursor to ``now`` collects exactly the items whose due time has
passed, so nothing ever fires early, and sorts them by due time.

Contract:

- ``schedule(key, when)`` puts ``key`` in the wheel, replacing any earlier schedule of it.
- ``cancel(key)`` removes it; True when it was there.
- ``pop_due(now)`` removes and returns every key with ``when <= now``, in due order (ties in
  scheduling order). Time is whatever clock the caller uses, as long as it does not run
  backwards (the engine uses the event loop's monotonic clock).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from operator import itemgetter
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)

_by_due = itemgetter(0)

# Fibonacci hashing: the fractional part of id * golden ratio is spread almost perfectly
# evenly for consecutive ids, which is what database sequences hand out.
_GOLDEN: Final = 0x9E3779B97F4A7C15
_MASK64: Final = (1 << 64) - 1
_TWO64: Final = float(1 << 64)


def phase_fraction(check_id: int) -> float:
    """A stable number in [0, 1) for ``check_id``, evenly spread over consecutive ids."""
    return ((check_id * _GOLDEN) & _MASK64) / _TWO64


def first_due(check_id: int, interval: float, now: float) -> float:
    """The first time strictly after ``now`` in the check's stable phase of ``interval``.

    The phase is ``phase_fraction(check_id) * interval`` past every multiple of
    ``interval`` since the epoch of ``now``'s clock, so the due times of a check do not
    depend on when the engine started (a restart keeps the rhythm) and 10,000 checks of the
    same interval come due evenly spread over it instead of in one burst.
    """
    if interval <= 0:
        raise ValueError("interval must be positive")
    # phase_fraction(check_id), written out: this runs for every probe.
    offset = ((check_id * _GOLDEN) & _MASK64) / _TWO64 * interval
    periods = (now - offset) // interval + 1
    due = offset + periods * interval
    # Float rounding can land a hair on the wrong side of ``now``.
    if due <= now:
        due += interval
    return due


class TimingWheel(Generic[K]):
    """Hashed timing wheel; see the module docstring for the contract."""

    __slots__ = ("_cursor", "_mask", "_slots", "_tick", "_where")

    def __init__(self, *, tick: float = 0.01, slots: int = 4096, start: float = 0.0) -> None:
        if tick <= 0:
            raise ValueError("tick must be positive")
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a power of two")
        self._tick = tick
        self._mask = slots - 1
        # One dict per bucket: key -> due time. Dicts keep insertion order, which gives
        # ties their scheduling order and makes cancel O(1).
        self._slots: list[dict[K, float]] = [{} for _ in range(slots)]
        # key -> its bucket (the dict itself: no int object per entry, and O(1) removal).
        self._where: dict[K, dict[K, float]] = {}
        # The first tick not yet fully swept. Buckets of earlier ticks hold only items of
        # later revolutions.
        self._cursor = int(start // tick)

    # -- queries ------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, key: object) -> bool:
        return key in self._where

    def __iter__(self) -> Iterator[K]:
        return iter(self._where)

    def due_time(self, key: K) -> float | None:
        """When ``key`` is due, or None when it is not scheduled."""
        bucket = self._where.get(key)
        return None if bucket is None else bucket[key]

    # -- changes ------------------------------------------------------------------------

    def schedule(self, key: K, when: float) -> None:
        """Schedule ``key`` at ``when``, replacing an earlier schedule of the same key."""
        where = self._where
        old = where.get(key)
        if old is not None:
            del old[key]
        tick = int(when // self._tick)
        # Something already due goes into the cursor's bucket, the next one swept.
        if tick < self._cursor:
            tick = self._cursor
        bucket = self._slots[tick & self._mask]
        bucket[key] = when
        where[key] = bucket

    def cancel(self, key: K) -> bool:
        """Remove ``key``; True when it was scheduled."""
        bucket = self._where.pop(key, None)
        if bucket is None:
            return False
        del bucket[key]
        return True

    def clear(self) -> None:
        for bucket in self._slots:
            bucket.clear()
        self._where.clear()

    def pop_due(self, now: float) -> list[K]:
        """Remove and return every key due at or before ``now``, earliest first."""
        if not self._where:
            # Nothing to find; just move the cursor so a later sweep does not walk the gap.
            self._cursor = max(self._cursor, int(now // self._tick))
            return []
        now_tick = int(now // self._tick)
        start = self._cursor
        if now_tick < start:
            return []
        slots = self._slots
        where = self._where
        nslots = self._mask + 1
        # Past one revolution every bucket has been visited once; more laps find nothing new.
        last = min(now_tick, start + nslots - 1)
        found: list[tuple[float, K]] = []
        for t in range(start, last + 1):
            bucket = slots[t & self._mask]
            if not bucket:
                continue
            due = [(w, k) for k, w in bucket.items() if w <= now]
            if not due:
                continue
            if len(due) == len(bucket):
                bucket.clear()
            else:
                for _, k in due:
                    del bucket[k]
            for _, k in due:
                del where[k]
            found.extend(due)
        # The bucket of ``now_tick`` may still hold items due later in this tick, so it is
        # swept again next time.
        self._cursor = now_tick
        if len(found) > 1:
            found.sort(key=_by_due)  # stable: ties keep bucket (scheduling) order
        return [k for _, k in found]
