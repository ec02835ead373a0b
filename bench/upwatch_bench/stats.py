"""Readings and summaries shared by the parent and the children.

CPU time is ``getrusage`` user+sys of the calling process (all its threads), or of another
process from ``/proc/PID/stat``; RSS is read from ``/proc/self/statm`` (resident pages): each
costs a system call, so a reading taken at the edges of a measured window does not disturb it.
"""

from __future__ import annotations

import math
import os
import resource
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, TextIO

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def cpu_seconds() -> float:
    """User+system CPU seconds of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def cpu_split() -> tuple[float, float]:
    """User and system CPU seconds of this process so far, apart: the probes' cost is half
    in the kernel, and the split says which half a change moved (tick-sampled by the kernel:
    the sum is exact, the split good to a few percent over seconds)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes(pid: int | str = "self") -> int:
    """Resident set size of a process in bytes (0 when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm", encoding="ascii") as fh:
            return int(fh.read().split()[1]) * _PAGE
    except (OSError, ValueError, IndexError):
        return 0


def time_wait_sockets() -> int | None:
    """TCP sockets in TIME_WAIT on the machine (IPv4 and IPv6; None when unreadable): a
    connect's port choice and lookups cost more among tens of thousands of them, so a
    limit tool measured beside the engine should find about as many as the engine did."""
    total, seen = 0, False
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path, encoding="ascii") as fh:
                next(fh, None)
                total += sum(1 for line in fh if line.split(None, 4)[3] == "06")
            seen = True
        except (OSError, IndexError):
            continue
    return total if seen else None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0..100) of already sorted values; nan when empty."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * n))
    return float(sorted_values[min(n, rank) - 1])


def summary_ms(seconds: Iterable[float]) -> dict[str, float | int | None]:
    """``{"p50", "p99", "max", "count"}`` in milliseconds of durations given in seconds.

    Negative values (clock rounding) count as 0. Empty input gives None figures."""
    values = sorted(max(0.0, v) * 1000.0 for v in seconds)
    if not values:
        return {"p50": None, "p99": None, "max": None, "count": 0}
    return {
        "p50": round(percentile(values, 50), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(values[-1], 3),
        "count": len(values),
    }


def ratio(a: float | None, b: float | None) -> float | None:
    """``a / b`` rounded, or None when either is missing or b is not positive."""
    if a is None or b is None or not b > 0 or math.isnan(a) or math.isnan(b):
        return None
    return round(a / b, 3)


def per(a: float | None, b: float | None, digits: int = 9) -> float | None:
    """``a / b`` (None when b is 0 or either is missing), for rates and per-unit costs."""
    if a is None or b is None or not b > 0:
        return None
    return round(a / b, digits)


def clean(obj: Any) -> Any:
    """Replace nan/inf floats with None so the result is valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean(v) for v in obj]
    return obj


class Progress:
    """A one-line progress bar on stderr: ``[#####.....]  45%  http: engine  12/30 s``.

    Drawn only on a terminal; elsewhere (CI logs, tests) each phase is one plain line, so
    logs stay readable. ``phase`` starts a timed phase; ``tick`` redraws (cheap, call often).
    """

    WIDTH = 24

    def __init__(self, stream: TextIO | None = None, *, enabled: bool = True) -> None:
        self._out = stream or sys.stderr
        self._tty = enabled and self._out.isatty()
        self._enabled = enabled
        self._label = ""
        self._total = 0.0
        self._start = 0.0
        self._drawn = False

    def phase(self, label: str, seconds: float) -> None:
        self._label = label
        self._total = max(0.0, seconds)
        self._start = time.monotonic()
        if not self._enabled:
            return
        if self._tty:
            self.tick()
        else:
            self._out.write(f"upwatch bench: {label} (~{seconds:.0f} s)\n")
            self._out.flush()

    def tick(self) -> None:
        if not (self._tty and self._label):
            return
        elapsed = time.monotonic() - self._start
        frac = min(1.0, elapsed / self._total) if self._total > 0 else 1.0
        filled = int(frac * self.WIDTH)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self._out.write(
            f"\r[{bar}] {frac * 100:3.0f}%  {self._label[:48]:<48} "
            f"{elapsed:5.0f}/{self._total:.0f} s"
        )
        self._out.flush()
        self._drawn = True

    def note(self, text: str) -> None:
        """A message that stays (the bar is redrawn under it)."""
        if not self._enabled:
            return
        self.clear()
        self._out.write(f"upwatch bench: {text}\n")
        self._out.flush()

    def clear(self) -> None:
        if self._drawn:
            self._out.write("\r" + " " * (self.WIDTH + 80) + "\r")
            self._out.flush()
            self._drawn = False
