"""Per-probe deadlines without a timer per probe (:class:`Deadlines`)."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any, Final, Protocol, cast

log = logging.getLogger(__name__)


class Expiring(Protocol):
    def expire(self) -> None: ...


class Deadlines:
    """Per-probe deadlines at a fraction of ``asyncio.timeout``'s cost.

    ``asyncio.timeout`` arms one event-loop timer per probe (under uvloop a libuv timer handle
    created, started, stopped and closed each time) plus its own bookkeeping: about 10 us of
    CPU per probe, a tenth of a whole plain-HTTP probe. Here a probe only adds its task to
    the set of the 4 ms slot its deadline falls in; one timer per slot that holds a task
    cancels whatever is still there when the slot ends. A probe can therefore run up to one
    slot (4 ms) past its timeout, which the probe contract allows ("+ a few ms").

    Use::

        task, slot, cancelling = deadlines.arm(timeout)
        try:
            ... awaits ...
        except asyncio.CancelledError:
            if not deadlines.expired(task, cancelling):
                raise               # cancelled from outside: not ours to swallow
            ... timed out ...
        finally:
            slot.discard(task)      # no await between here and the end of the probe

    A task is in a slot only while it is suspended inside the guarded block, so the timer's
    ``cancel()`` is always delivered inside it (as with ``asyncio.timeout``). Probes without
    a task register themselves with :meth:`arm_expiry` instead, and the timer calls their
    ``expire()``. One instance serves one event loop.
    """

    GRANULARITY: Final = 0.004

    __slots__ = ("_fired", "_last_end", "_last_slot", "_last_timeout", "_loop", "_slots")

    def __init__(self) -> None:
        self._slots: dict[int, set[Any]] = {}  # tasks (arm) and Expiring (arm_expiry)
        self._fired: set[asyncio.Task[object]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # The last slot handed out, for the probes that start before it ends (most of them:
        # hundreds a slot at capacity): their deadline falls in it without a lookup.
        self._last_slot: set[Any] = set()
        self._last_end = -math.inf
        self._last_timeout = 0.0

    def arm(
        self, timeout: float, loop: asyncio.AbstractEventLoop | None = None
    ) -> tuple[asyncio.Task[object], set[asyncio.Task[object]], int]:
        """Register the current task; returns (task, its slot, its cancel count now).

        ``loop`` is the running loop when the caller has it already: on Python 3.11 each
        lookup of the running loop costs a ``getpid`` system call."""
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("probes must run inside an asyncio task")
        if loop is None:
            loop = task.get_loop()
        slot = self._slot(timeout, loop)
        slot.add(task)
        return task, slot, task.cancelling()

    def expired(self, task: asyncio.Task[object], cancelling: int) -> bool:
        """After a CancelledError: True when it was this deadline's and nothing else's."""
        if task not in self._fired:
            return False
        self._fired.discard(task)
        # Also cancelled from outside meanwhile: the caller must see that cancellation.
        return task.uncancel() <= cancelling

    def arm_expiry(
        self, timeout: float, loop: asyncio.AbstractEventLoop, target: Expiring
    ) -> set[Expiring]:
        """Register ``target``, whose ``expire()`` is called when its deadline passes unless
        the caller took it out of the returned slot first (``slot.discard(target)``). For
        probes driven by callbacks, without a task to cancel."""
        slot = self._slot(timeout, loop)
        slot.add(target)
        return slot

    def _slot(self, timeout: float, loop: asyncio.AbstractEventLoop) -> set[Any]:
        """The slot a deadline ``timeout`` from now falls in, with its timer."""
        if loop is not self._loop:
            # A new event loop (tests make one per test): slots of the old one are dead and
            # must not swallow this loop's deadlines.
            self._loop = loop
            self._slots = {}
            self._fired = set()
            self._last_end = -math.inf
        due = loop.time() + timeout
        # Time only moves on, so with the same timeout a deadline up to the last slot's end
        # falls in that slot (which _fire forgets as it fires).
        if due <= self._last_end and timeout == self._last_timeout:
            return self._last_slot
        key = math.ceil(due / self.GRANULARITY)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = set()
            loop.call_at(key * self.GRANULARITY, self._fire, key, slot)
        self._last_slot = slot
        self._last_end = key * self.GRANULARITY
        self._last_timeout = timeout
        return slot

    def _fire(self, key: int, slot: set[object]) -> None:
        if self._slots.get(key) is slot:
            del self._slots[key]
        if slot is self._last_slot:
            self._last_end = -math.inf
        items = list(slot)
        slot.clear()
        for item in items:
            if isinstance(item, asyncio.Task):
                self._fired.add(item)
                item.cancel()
                continue
            try:
                cast(Expiring, item).expire()
            except Exception:
                # One faulty target must not keep the others of its slot running forever.
                log.exception("probe deadline handler failed")
