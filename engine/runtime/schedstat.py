"""How long this thread waited for a core: the kernel's run-queue wait, from
``/proc/thread-self/schedstat`` (Linux). It tells a core shared with other processes (the
thread was runnable and waited) from a loop kept busy by its own work (it ran), which a late
timer alone cannot."""

from __future__ import annotations

from typing import Final

_PATH: Final = "/proc/thread-self/schedstat"


def waited_s() -> float | None:
    """Seconds the calling thread has spent runnable but waiting for a core since it began;
    None where the kernel does not say. A read of procfs: microseconds, no disk."""
    try:
        with open(_PATH, "rb") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None
