"""A pure hashed timing wheel: O(1) schedule and cancel of items that carry their due time.

The engine keeps every scheduled check in one wheel instead of one timer or task per check,
so 50,000 checks cost 50,000 small dict entries and the scheduler loop does work only for
the slots that come due.

Layout: ``slots`` buckets of ``tick`` seconds each, a revolution of ``slots * tick`` seconds.
An item lives in the bucket of its due tick (modulo the revolution); its exact due time is
its own ``due`` attribute, which the wheel keeps while the item is in it. Items due more
than one revolution ahead simply stay in their bucket until a sweep finds them due (the
classic "rounds" wheel, with the round implied by the due time). A sweep over the buckets
from the cursor to ``now`` collects exactly the items whose due time has passed, so nothing
ever fires early, and sorts them by due time.

Why the item holds its due time (a check's ``ScheduledCheck.due``): the wheel then needs no
index of its own. An item is in the bucket of its ``due``, or, when it was scheduled
already due, in the cursor's bucket, where it stays only until the next sweep (the cursor
moves only in a sweep, and that sweep takes it). Keyed by check ids instead, the wheel kept
an id -> bucket dict, a float object per item for its due time and, compiled, boxed ids of
its own: ~115 B per check of the ~900 B an idle monitor costs (docs/performance.md,
"Memory").

Contract (items are hashable; equal items must be the same item, as with identity):

- ``schedule(item, when)`` puts ``item`` in the wheel, replacing any earlier schedule of it,
  and sets ``item.due = when``.
- ``item.due`` belongs to the wheel while the item is in it: change it only through
  ``schedule`` (an item whose ``due`` was changed behind the wheel's back is lost to
  ``cancel`` and fires at its old time).
- ``cancel(item)`` removes it; True when it was there.
- ``pop_due(now)`` removes and returns every item with ``due <= now``, in due order (ties in
  scheduling order). Time is whatever clock the caller uses, as long as it does not run
  backwards (the engine uses the event loop's monotonic clock).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from operator import itemgetter
from typing import Final, Generic, Protocol, TypeVar


class Timed(Protocol):
    """What the wheel holds: a hashable item with a settable due time."""

    due: float


K = TypeVar("K", bound=Timed)

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


def next_due(check_id: int, interval: float, now: float, last_due: float) -> float:
    """The check's next due time after a run that was due at ``last_due`` (same clock as
    ``now``; 0.0: it never ran): its first phase after ``now`` that is at least half an
    interval after ``last_due``.

    A run in the check's own phase is followed by the next phase, as :func:`first_due`
    gives, however late it started or long it took. A run outside the phase (a new or
    re-enabled check started soon, an alert's threshold) is not followed by its phase a
    moment later: 50,000 monitors imported at once were each probed twice within their
    first interval, the phase's probe on top of the soon one, which doubled the first
    interval's load (docs/performance.md). The gap that results
    is between half an interval and one and a half.
    """
    return first_due(check_id, interval, max(now, last_due + interval * 0.5))


class TimingWheel(Generic[K]):
    """Hashed timing wheel; see the module docstring for the contract."""

    __slots__ = ("_count", "_cursor", "_mask", "_slots", "_tick")

    def __init__(self, *, tick: float = 0.01, slots: int = 4096, start: float = 0.0) -> None:
        if tick <= 0:
            raise ValueError("tick must be positive")
        if slots < 1 or slots & (slots - 1):
            raise ValueError("slots must be a power of two")
        self._tick = tick
        self._mask = slots - 1
        # One dict per bucket, its items as keys: dicts keep insertion order, which gives
        # ties their scheduling order and makes cancel O(1).
        self._slots: list[dict[K, None]] = [{} for _ in range(slots)]
        self._count = 0
        # The first tick not yet fully swept. Buckets of earlier ticks hold only items of
        # later revolutions, and items scheduled already due wait in this tick's bucket.
        self._cursor = int(start // tick)

    def _bucket_of(self, item: K) -> dict[K, None] | None:
        """The bucket holding ``item``, or None when it is not in the wheel."""
        bucket = self._slots[int(item.due // self._tick) & self._mask]
        if item in bucket:
            return bucket
        bucket = self._slots[self._cursor & self._mask]  # scheduled when already due
        if item in bucket:
            return bucket
        return None

    # -- queries ------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def __contains__(self, item: K) -> bool:
        return self._bucket_of(item) is not None

    def __iter__(self) -> Iterator[K]:
        return itertools.chain.from_iterable(self._slots)

    def due_time(self, item: K) -> float | None:
        """When ``item`` is due, or None when it is not scheduled."""
        return item.due if self._bucket_of(item) is not None else None

    # -- changes ------------------------------------------------------------------------

    def schedule(self, item: K, when: float) -> None:
        """Schedule ``item`` at ``when`` (``item.due = when``), replacing an earlier schedule
        of it."""
        old = self._bucket_of(item)
        if old is not None:
            del old[item]
        else:
            self._count += 1
        tick = int(when // self._tick)
        # Something already due goes into the cursor's bucket, the next one swept.
        if tick < self._cursor:
            tick = self._cursor
        item.due = when
        self._slots[tick & self._mask][item] = None

    def cancel(self, item: K) -> bool:
        """Remove ``item``; True when it was scheduled."""
        bucket = self._bucket_of(item)
        if bucket is None:
            return False
        del bucket[item]
        self._count -= 1
        return True

    def clear(self) -> None:
        for bucket in self._slots:
            bucket.clear()
        self._count = 0

    def pop_due(self, now: float) -> list[K]:
        """Remove and return every item due at or before ``now``, earliest first."""
        if not self._count:
            # Nothing to find; just move the cursor so a later sweep does not walk the gap.
            self._cursor = max(self._cursor, int(now // self._tick))
            return []
        now_tick = int(now // self._tick)
        start = self._cursor
        if now_tick < start:
            return []
        slots = self._slots
        nslots = self._mask + 1
        # Past one revolution every bucket has been visited once; more laps find nothing new.
        last = min(now_tick, start + nslots - 1)
        found: list[tuple[float, K]] = []
        for t in range(start, last + 1):
            bucket = slots[t & self._mask]
            if not bucket:
                continue
            due: list[tuple[float, K]] = []
            for item in bucket:
                when = item.due
                if when <= now:
                    due.append((when, item))
            if not due:
                continue
            if len(due) == len(bucket):
                bucket.clear()
            else:
                for _, item in due:
                    del bucket[item]
            self._count -= len(due)
            found.extend(due)
        # The bucket of ``now_tick`` may still hold items due later in this tick, so it is
        # swept again next time.
        self._cursor = now_tick
        if len(found) > 1:
            found.sort(key=_by_due)  # stable: ties keep bucket (scheduling) order
        return [item for _, item in found]
