"""Phase timings: the fixed histogram the database keeps per check and hour, and the
quantiles read from it. Pure functions; the SQL twin of :func:`bucket_of` is
:data:`SQL_BUCKET` (engine/db/timings.py uses it, the migration 0006 explains the layout).

A histogram here is a mapping ``code -> probes`` with ``code = phase * CODE_STRIDE +
bucket``. Bucket 0 holds ``[0, 0.25 ms)``; bucket ``k >= 1`` holds ``[0.25 * 2^((k-1)/4),
0.25 * 2^(k/4))`` ms, up to bucket :data:`TOP_BUCKET`, which holds everything above. Four
buckets an octave: a quantile interpolated inside its bucket is off by at most the bucket's
width, 19%, and by half that (9%) from the bucket's geometric centre.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

PHASES: Final = ("dns", "connect", "tls", "ttfb", "total")
CODE_STRIDE: Final = 128
BASE_MS: Final = 0.25
PER_OCTAVE: Final = 4
TOP_BUCKET: Final = 100

# The same function in SQL, over a column or expression ``{ms}`` (real or double), in the
# same float arithmetic as bucket_of: 4 / ln 2 as one constant. NULL stays NULL (LEAST
# alone would make it the top bucket: it ignores NULL arguments).
_SCALE: Final = PER_OCTAVE / math.log(2)
SQL_BUCKET: Final = (
    "CASE WHEN {ms} IS NULL THEN NULL WHEN {ms} < 0.25 THEN 0 "
    f"ELSE LEAST({TOP_BUCKET}, 1 + floor(ln(({{ms}})::float8 / 0.25) * {_SCALE!r})::int) END"
)

PERIODS: Final = {
    # name: (slot width, number of slots)
    "24h": (timedelta(hours=1), 24),
    "7d": (timedelta(days=1), 7),
    "30d": (timedelta(days=1), 30),
}
QUANTILES: Final = (("p50", 0.50), ("p95", 0.95))


def bucket_of(ms: float) -> int:
    """The bucket of a duration in milliseconds (see the module docstring)."""
    if ms < BASE_MS:
        return 0
    return min(TOP_BUCKET, 1 + math.floor(math.log(ms / BASE_MS) * _SCALE))


def bucket_bounds(k: int) -> tuple[float, float]:
    """``[low, high)`` of bucket ``k`` in ms; the top bucket's ``high`` is its ``low``."""
    if k <= 0:
        return 0.0, BASE_MS
    low = BASE_MS * 2 ** ((k - 1) / PER_OCTAVE)
    return (low, low) if k >= TOP_BUCKET else (low, BASE_MS * 2 ** (k / PER_OCTAVE))


def quantile(buckets: Mapping[int, int], q: float) -> float | None:
    """The ``q`` quantile (0 < q <= 1) of a one-phase histogram ``bucket -> count``, or None
    when it is empty. Interpolated inside the bucket that holds it: linearly in bucket 0,
    geometrically (even steps on the log scale the buckets are cut on) above."""
    total = sum(n for n in buckets.values() if n > 0)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for k in sorted(buckets):
        n = buckets[k]
        if n <= 0:
            continue
        if seen + n >= rank:
            frac = min(1.0, max(0.0, (rank - seen) / n))
            low, high = bucket_bounds(k)
            if k == 0:
                return low + (high - low) * frac
            return low * (high / low) ** frac
        seen += n
    low, _ = bucket_bounds(max(buckets))
    return low


def split_phases(cells: Iterable[tuple[int, int]]) -> list[dict[int, int]]:
    """``(code, count)`` cells as one ``bucket -> count`` histogram per phase."""
    out: list[dict[int, int]] = [{} for _ in PHASES]
    for code, n in cells:
        phase, k = divmod(code, CODE_STRIDE)
        if 0 <= phase < len(PHASES):
            hist = out[phase]
            hist[k] = hist.get(k, 0) + n
    return out


@dataclass(frozen=True, slots=True)
class Slot:
    """One hour or day of a period: its start, the uptime probes in it, those that got a
    response (the phases are theirs), and each phase's quantiles (None: no such phase)."""

    start: datetime
    probes: int
    responses: int
    phases: dict[str, dict[str, float | None]]


def round_ms(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def summarize(start: datetime, probes: int, responses: int,
              cells: Iterable[tuple[int, int]]) -> Slot:
    """A slot's figures from its histogram cells."""
    phases = {
        name: {label: round_ms(quantile(hist, q)) for label, q in QUANTILES}
        for name, hist in zip(PHASES, split_phases(cells), strict=True)
    }
    return Slot(start, probes, responses, phases)


def period_window(period: str, now: datetime) -> tuple[datetime, timedelta, int]:
    """``(start, slot width, slots)`` of a period ending with the slot that holds ``now``:
    the last 24 whole UTC hours counting the current one, or the last 7 or 30 UTC days
    counting today. KeyError for an unknown period."""
    width, count = PERIODS[period]
    now = now.astimezone(UTC)
    if width == timedelta(hours=1):
        current = now.replace(minute=0, second=0, microsecond=0)
    else:
        current = now.replace(hour=0, minute=0, second=0, microsecond=0)
    return current - width * (count - 1), width, count
