"""Limit-tool rounds that bracket an engine window, and the robust figures taken from them.

Why: on the shared 2-core machine the CPU a fixed piece of work costs drifts by tens of per
cent over minutes (the host's other tenants, the other engineers' work), and ``openssl
s_time`` pays more per connection while the core of its server is busy (it waits, its core
goes idle and wakes). One 3 s run of ``s_time`` minutes after the engine's window therefore
said as much about that moment as about the tool: four runs of the same tree on a quiet
machine read the resumed ratio 1.135-1.675x (docs/performance.md). Rounds
run right before and right after the window, each round every server kind and mode in turn,
and the median over rounds, follow the machine as the engine saw it; every round and the
spread stay in the record.

Pure functions: a round is a dict ``{"side": "before" | "after", "cpu_s_per_op": {mode:
{kind: seconds | None}}, ...}`` (the caller adds what it measured of the machine).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SIDES = ("before", "after")


def spread(values: Iterable[float | None]) -> dict[str, Any]:
    """Median, min, max and the spread ``(max - min) / median`` of the values that are not
    None (all None when there are none)."""
    good = [v for v in values if v is not None]
    if not good:
        return {"median": None, "min": None, "max": None, "spread": None, "n": 0}
    med = statistics.median(good)
    return {"median": round(med, 9), "min": round(min(good), 9), "max": round(max(good), 9),
            "spread": round((max(good) - min(good)) / med, 4) if med > 0 else None,
            "n": len(good)}


def complete_mean(values: Iterable[float | None]) -> float | None:
    """The mean of per-kind figures, None when there are none or one is missing: a mean
    over fewer kinds would not be the same figure."""
    listed = list(values)
    if not listed or any(v is None for v in listed):
        return None
    return statistics.fmean(v for v in listed if v is not None)


def round_mean(rnd: Mapping[str, Any], mode: str, kinds: Sequence[str]) -> float | None:
    """One round's mean CPU per operation of ``mode`` over ``kinds`` (see complete_mean)."""
    by_kind = (rnd.get("cpu_s_per_op") or {}).get(mode) or {}
    return complete_mean(by_kind.get(k) for k in kinds)


def aggregate(rounds: Sequence[Mapping[str, Any]], means: Mapping[str, Sequence[str]],
              kinds: Sequence[str]) -> dict[str, Any]:
    """The robust figures of rounds of a limit tool.

    ``means``: mode -> the kinds whose mean is the mode's figure (a mode whose ``-reuse``
    does not resume on some kinds leaves them out). Per mode: each round's mean over its
    kinds, then the median over all rounds (``median``, with min/max/spread), and over each
    side's rounds apart (``before``, ``after``: a drift during the window shows as their
    difference). Per mode and kind: the median over rounds (``by_kind``)."""
    out: dict[str, Any] = {}
    for mode, over in means.items():
        per_round = [round_mean(r, mode, over) for r in rounds]
        sides = {side: spread(v for r, v in zip(rounds, per_round, strict=True)
                              if r.get("side") == side)["median"] for side in SIDES}
        by_kind = {k: spread(((r.get("cpu_s_per_op") or {}).get(mode) or {}).get(k)
                             for r in rounds)["median"] for k in kinds}
        out[mode] = {**spread(per_round),
                     "rounds": [None if v is None else round(v, 9) for v in per_round],
                     **sides, "by_kind": by_kind}
    return out


def _div(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else round(a / b, 3)


def ratios(engine: float | None, figures: Mapping[str, Mapping[str, Any]],
           halves: Sequence[float | None] = ()) -> dict[str, Any]:
    """The engine's figure against each mode's median (``ratio``), against each side's
    median (``before``, ``after``) and against every round apart (``rounds``: how far one
    round's ratio would have strayed; ``spread`` of those). ``halves``: the engine's figure
    in the first and the second half of its window; ``paired`` is then the first half
    against the rounds before and the second against those after (each beside its own)."""
    out: dict[str, Any] = {}
    for mode, fig in figures.items():
        med = fig.get("median")
        out[mode] = {"ratio": _div(engine, med),
                     **{side: _div(engine, fig.get(side)) for side in SIDES},
                     "rounds": [_div(engine, v) for v in fig.get("rounds") or []]}
        out[mode]["spread"] = spread(out[mode]["rounds"])["spread"]
        if len(halves) == 2:
            out[mode]["paired"] = [_div(h, fig.get(side)) for h, side in zip(
                halves, SIDES, strict=True)]
    return out


def halves(slices: Sequence[Mapping[str, Any]]) -> list[float | None]:
    """CPU per probe in the first and the second half of a window cut in an even number of
    slices (slice_costs); empty when it cannot be cut so."""
    if not slices or len(slices) % 2:
        return []
    mid = len(slices) // 2
    out: list[float | None] = []
    for part in (slices[:mid], slices[mid:]):
        probes = sum(s["probes"] for s in part)
        out.append(round(sum(s["cpu_s"] for s in part) / probes, 9) if probes > 0 else None)
    return out


def slice_costs(marks: Sequence[Sequence[float]]) -> list[dict[str, Any]]:
    """The engine window's slices from its cumulative readings at each slice's end
    (``[seconds, cpu_s, probes]``, as engine_run emits them): each slice's own seconds, CPU,
    probes and CPU per probe."""
    out: list[dict[str, Any]] = []
    prev = (0.0, 0.0, 0.0)
    for mark in marks:
        t, cpu, probes = float(mark[0]), float(mark[1]), float(mark[2])
        n = probes - prev[2]
        out.append({"seconds": round(t - prev[0], 3), "cpu_s": round(cpu - prev[1], 6),
                    "probes": int(n),
                    "cpu_s_per_probe": round((cpu - prev[1]) / n, 9) if n > 0 else None})
        prev = (t, cpu, probes)
    return out
