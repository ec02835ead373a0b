"""Rounds of ``openssl s_time`` against the internet world's TLS servers right before and
right after the engine's HTTPS-only window (upwatch_bench/bracket.py says why), and the
record's s_time figures and the HTTPS probe's ratios to them; under ``--callgrind``, the
same in instructions."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from upwatch_bench import bracket
from upwatch_bench.certs import WorldCerts
from upwatch_bench.harness import Bench
from upwatch_bench.limits import run_s_time
from upwatch_bench.sampler import Sampler
from upwatch_bench.stats import per, ratio, time_wait_sockets
from upwatch_bench.world import ADDRESS, BODY_BYTES, SERVER_KINDS, World

MEAN_BODY = sum(BODY_BYTES) // 2  # the world's mean body (uniform sizes)
# s_time rounds on each side of the HTTPS-only window (--quick: one, after it), each run of a
# round ``-time 1`` (s_time counts whole seconds: a run lasts 1-2 s; its CPU and its
# connections are both counted exactly, so CPU per connection does not depend on it).
S_TIME_ROUNDS = 2
S_TIME_RUN_S = 1.0
# Under --callgrind: seconds of the short and the long s_time run per kind.
S_TIME_CALLGRIND_RUNS_S = (2, 6)
# What each s_time run of a round does: (mode, -reuse, -www of the mean page).
S_TIME_MODES = (("new", False, False), ("reuse", True, False), ("new_www", False, True),
                ("reuse_www", True, True))
# The kinds each mode runs against, whose mean is the mode's figure: without -www, s_time
# -reuse resumes TLS 1.2 only (it takes its session before a TLS 1.3 ticket arrives), so
# it is not run against TLS 1.3 (its figure there is None).
S_TIME_MEANS = {"new": SERVER_KINDS,
                "reuse": tuple(k for k in SERVER_KINDS if k.startswith("tls12")),
                "new_www": SERVER_KINDS, "reuse_www": SERVER_KINDS}


async def _round(b: Bench, world: World, certs: WorldCerts, sampler: Sampler,
                        side: str, reverse: bool) -> dict[str, Any]:
    """One round of s_time runs (every mode of S_TIME_MODES against every TLS server kind,
    ``reverse``: the kinds in the other order, so that a drift inside a round does not
    always fall on the same kind), pinned to the engine's core: per mode and kind the CPU
    per connection, the connections and how many resumed; the machine around it (the
    cores' busy shares, the world's processes, TIME_WAIT sockets at its start and end)."""
    page = f"/w/0/{MEAN_BODY}"
    kinds = SERVER_KINDS[::-1] if reverse else SERVER_KINDS
    cpu: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    user: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    system: dict[str, dict[str, float | None]] = {m[0]: {} for m in S_TIME_MODES}
    ops: dict[str, dict[str, int]] = {m[0]: {} for m in S_TIME_MODES}
    resumed: dict[str, dict[str, int | None]] = {m[0]: {} for m in S_TIME_MODES}
    wall0, tw0 = time.time(), time_wait_sockets()
    for kind in kinds:
        for mode, reuse, www in S_TIME_MODES:
            if kind not in S_TIME_MEANS[mode]:
                continue
            b.progress.phase(f"limit: openssl s_time -{mode} ({kind}), {side} the HTTPS "
                             "window", S_TIME_RUN_S + 0.5)
            tool = await run_s_time(b.procs, ADDRESS[kind], world.https_port,
                                    seconds=S_TIME_RUN_S, cpus=b.engine_cpus, cafile=certs.ca,
                                    reuse=reuse, www=page if www else None)
            cpu[mode][kind] = None if tool is None else per(tool.cpu_s, tool.operations)
            user[mode][kind] = None if tool is None else per(tool.user_s, tool.operations)
            system[mode][kind] = None if tool is None else per(tool.sys_s, tool.operations)
            ops[mode][kind] = 0 if tool is None else tool.operations
            resumed[mode][kind] = None if tool is None else tool.resumed
    wall1 = time.time()
    return {"side": side, "wall": [round(wall0, 3), round(wall1, 3)],
            "time_wait": [tw0, time_wait_sockets()], "cpu_s_per_op": cpu,
            "user_s_per_op": user, "sys_s_per_op": system,
            "operations": ops, "resumed": resumed, **sampler.window(wall0, wall1)}


async def s_time_rounds(b: Bench, world: World, certs: WorldCerts, sampler: Sampler,
                         side: str, count: int) -> list[dict[str, Any]]:
    """``count`` rounds; the kinds' order alternates, mirrored after the window (before:
    forward, reversed; after: reversed, forward)."""
    first = side == "after"
    return [await _round(b, world, certs, sampler, side, (i % 2 == 0) == first)
            for i in range(count)]


def s_time_figures(https: float | None, share: float | None, rounds: list[dict[str, Any]],
                   halves: list[float | None] | None = None) -> dict[str, Any]:
    """The record's s_time figures and the HTTPS probe's ratios to them (``https``: its CPU
    per probe; ``share``: its resumed share; ``halves``: its CPU per probe in each half of
    its window) from the rounds bracketing its window: each mode's figure is the median
    over rounds of the round's mean over its kinds (S_TIME_MEANS), each kind's the median
    of its runs."""
    figs = bracket.aggregate(rounds, S_TIME_MEANS, SERVER_KINDS)
    new, reuse = figs["new"]["by_kind"], figs["reuse"]["by_kind"]
    new_www, reuse_www = figs["new_www"]["median"], figs["reuse_www"]["median"]
    out: dict[str, Any] = {
        "s_time_new_cpu_s": new,
        "s_time_reuse_cpu_s": reuse,
        # The engine's HTTPS probes spread evenly over the four kinds: against the kinds' mean.
        "https_vs_s_time_new": ratio(https, figs["new"]["median"]),
        "https_vs_s_time_new_by_kind": {k: ratio(https, v) for k, v in new.items()},
        "https_vs_s_time_reuse": ratio(https, figs["reuse"]["median"]),
        # Like with like: s_time fetching the world's mean page, full and resumed, weighted
        # by the HTTPS window's resumed share and by the targets (1.0x -new, 1.2x -reuse).
        "s_time_www_path": f"/w/0/{MEAN_BODY}",
        "s_time_new_www_cpu_s": new_www,
        "s_time_reuse_www_cpu_s": reuse_www,
        "https_vs_s_time_new_www": ratio(https, new_www),
        "https_vs_s_time_reuse_www": ratio(https, reuse_www),
        "https_vs_s_time_www_targets": (
            ratio(https, (1 - share) * new_www + share * 1.2 * reuse_www)
            if share is not None and new_www is not None and reuse_www is not None
            else None),
        # User and kernel time apart (medians over rounds as above): where the probe's
        # surplus over s_time lies.
        "s_time_user_sys_s": {part: {m: f["median"] for m, f in bracket.aggregate(
            [{"side": r.get("side"), "cpu_s_per_op": r.get(f"{part}_s_per_op") or {}}
             for r in rounds], S_TIME_MEANS, SERVER_KINDS).items()}
            for part in ("user", "sys")},
        # Every round's figures, their spread, and the ratio to each side and each round.
        "s_time_figures": figs,
        "https_vs_s_time_rounds": bracket.ratios(https, figs, halves or []),
    }
    return out


def s_time_by_kind(figs: dict[str, Any], rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Per TLS server kind and s_time mode: the median CPU per connection over the rounds,
    and the connections made and resumed in all of them."""
    return {kind: {mode: {"cpu_s_per_op": figs[mode]["by_kind"][kind],
                          "operations": sum(r["operations"][mode].get(kind) or 0
                                            for r in rounds),
                          "resumed": sum(r["resumed"][mode].get(kind) or 0 for r in rounds)}
                   for mode, _, _ in S_TIME_MODES}
            for kind in SERVER_KINDS}



async def s_time_instructions(b: Bench, world: World, directory: Path,
                               probe: int | None) -> dict[str, Any]:
    """Under ``--callgrind``: ``s_time -reuse -www`` of the world's mean page,
    under callgrind against each TLS server kind, and the HTTPS-only window's instructions
    per answered probe against their mean (its probes spread evenly over the kinds, as in
    s_time_figures). Instructions do not move with the machine's load as its CPU seconds
    do; they do not see the kernel or cache misses. ``GLIBC_TUNABLES`` set to
    ``tlsinstr.VECTOR_COPIES`` for the whole bench counts copies alike on both sides."""
    from upwatch_bench.lab.tlsinstr import STimeFailed, measure_s_time

    page = f"/w/0/{MEAN_BODY}"
    by_kind: dict[str, dict[str, Any] | None] = {}
    failed: dict[str, str] = {}
    for kind in SERVER_KINDS:
        b.progress.phase(f"s_time -reuse -www ({kind}) under callgrind", 40)
        try:
            by_kind[kind] = await asyncio.to_thread(
                measure_s_time, world.https_port, "reuse", page, S_TIME_CALLGRIND_RUNS_S,
                directory, f"reuse-www-{kind}", ADDRESS[kind])
        except STimeFailed as e:  # recorded, not fatal to the rest of the run
            by_kind[kind] = None
            failed[kind] = str(e)
    return {**s_time_instruction_figures(by_kind, probe),
            "s_time_reuse_www_instructions_failed": failed}


def s_time_instruction_figures(by_kind: dict[str, dict[str, Any] | None],
                               probe: int | None) -> dict[str, Any]:
    """The record's figures from ``s_time -reuse -www`` under callgrind per server kind
    (None: that run failed) and the probe's instructions: the mean over the kinds (None
    unless every kind was measured) and the probe's ratio to it."""
    runs = [v for v in by_kind.values() if v is not None]
    mean = bracket.complete_mean(None if (v := by_kind.get(k)) is None else v["instructions"]
                                 for k in SERVER_KINDS)
    return {"s_time_reuse_www_instructions": by_kind,
            "s_time_reuse_www_instructions_mean": None if mean is None else round(mean),
            # Connections counted and how many of them resumed (all, unless a server
            # refused a ticket).
            "s_time_reuse_www_instructions_resumed": [sum(v["resumed"] for v in runs),
                                                      sum(v["connections"] for v in runs)],
            "https_instructions_vs_s_time_reuse_www": ratio(probe, mean)}

