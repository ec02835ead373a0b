"""The options of one bench run, read from the command line's flags and checked together
(which flag applies to which scenario, sane ranges); :class:`BenchError` says what is wrong."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class BenchError(Exception):
    """The bench cannot run or a step failed; the message says which."""


@dataclass
class Options:
    scenario: str
    monitors: int
    duration: float
    quick: bool
    json: bool
    warmup: float
    time_scale: float
    names: bool = False
    dns_latency: float = 0.0
    dns_ttl: int = 300
    assertions: float | None = None  # http: the share of monitors with assertions
    load_only: bool = False  # http, tls, mixed, internet: the engine at the scheduled load only
    warmup_intervals: int = 2  # internet: whole intervals before the window starts
    https_only: bool = False  # internet: only the HTTPS-only window and its s_time rounds
    # http --names: only this many interleaved pairs of capacity windows, names against
    # IP literals (no load window, baseline or limit tool); None: the full run.
    names_cost: int | None = None
    diagnoses: int | None = None  # tls: pairs of windows, certificate diagnoses against none
    rate: float | None = None  # http, tls: probes a second asked at capacity (None: default)
    probe_timeout: float | None = None  # the engine's probe timeout (None: 10 s, quick 2 s)
    # The engine's probe_batch_ms (engine/probes/reactor.py); None: the engine's default.
    probe_batch_ms: float | None = None
    # An existing PostgreSQL server instead of a fresh embedded one (None: embedded).
    database_url: str | None = None
    # Opt-in tracers of the measured windows (upwatch_bench/tracers/): output directories.
    profile_dir: Path | None = None  # py-spy
    profile_native: bool = False  # py-spy with C frames
    cprofile_dir: Path | None = None
    perf_dir: Path | None = None
    perf_callgraph: str | None = None  # perf record --call-graph MODE (None: -g)
    strace_dir: Path | None = None
    callgrind_dir: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        quick = bool(args.quick)
        scenario = args.scenario
        default_monitors = {"webhooks": 1000, "api": 1000, "notify": 1000,
                            "internet": 50_000, "overload": 10_000,
                            "pings": 5000, "heartbeats": 100_000}.get(scenario, 10_000)
        if quick:
            default_monitors = {"webhooks": 100, "api": 100, "notify": 200,
                                "internet": 2000, "overload": 1500,
                                "heartbeats": 2000}.get(scenario, 300)
        monitors = args.monitors if args.monitors is not None else default_monitors
        default_duration = (2.0 if quick else 30.0) if scenario != "overload" else (
            10.0 if quick else 60.0)
        duration = args.duration if args.duration is not None else default_duration
        if monitors < 1 or monitors > 1_000_000:
            raise BenchError("--monitors must be between 1 and 1,000,000")
        if duration <= 0 or duration > 3600:
            raise BenchError("--duration must be between 0 and 3600 seconds")
        names = bool(getattr(args, "names", False))
        if names and scenario != "http":
            raise BenchError("--names is for the http scenario")
        dns_latency = getattr(args, "dns_latency", None)
        dns_ttl = getattr(args, "dns_ttl", None)
        return cls(
            scenario=scenario,
            monitors=monitors,
            duration=float(duration),
            quick=quick,
            json=bool(args.json),
            warmup=0.5 if quick else 5.0,
            # Quick runs compress time tenfold: a 30 s interval lasts 3 s, so a few seconds
            # see every monitor probed.
            time_scale=0.1 if quick else 1.0,
            names=names,
            dns_latency=float(dns_latency) if dns_latency is not None else (
                0.02 if scenario == "internet" else 0.0),  # the internet: 20 ms away
            dns_ttl=int(dns_ttl) if dns_ttl is not None else 300,
            assertions=_share(getattr(args, "assertions", None), scenario),
            load_only=_load_only(bool(getattr(args, "load_only", False)), scenario),
            https_only=_https_only(bool(getattr(args, "https_only", False)), scenario),
            warmup_intervals=_warmup_intervals(getattr(args, "warmup_intervals", None),
                                               scenario),
            names_cost=_names_cost_pairs(getattr(args, "names_cost", None), names),
            diagnoses=_diagnoses_pairs(getattr(args, "diagnoses", None), scenario),
            rate=_positive(getattr(args, "rate", None), "--rate", 1_000_000.0),
            probe_timeout=_positive(getattr(args, "probe_timeout", None), "--probe-timeout",
                                    300.0),
            probe_batch_ms=_batch_ms(getattr(args, "probe_batch_ms", None)),
            database_url=getattr(args, "database_url", None) or None,
            profile_dir=_path(getattr(args, "profile", None)),
            profile_native=_needs(bool(getattr(args, "profile_native", False)),
                                  getattr(args, "profile", None), "--profile-native", "--profile"),
            cprofile_dir=_path(getattr(args, "cprofile", None)),
            perf_dir=_path(getattr(args, "perf", None)),
            perf_callgraph=_needs(getattr(args, "perf_callgraph", None),
                                  getattr(args, "perf", None), "--perf-callgraph", "--perf"),
            strace_dir=_path(getattr(args, "strace", None)),
            callgrind_dir=_path(getattr(args, "callgrind", None)),
        )


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _needs(value: Any, other: str | None, flag: str, needed: str) -> Any:
    if value and not other:
        raise BenchError(f"{flag} needs {needed}")
    return value


def _names_cost_pairs(value: int | None, names: bool) -> int | None:
    if value is None:
        return None
    if not names:
        raise BenchError("--names-cost needs --names")
    if not 1 <= value <= 20:
        raise BenchError("--names-cost must be between 1 and 20 pairs")
    return int(value)


def _diagnoses_pairs(value: int | None, scenario: str) -> int | None:
    if value is None:
        return None
    if scenario != "tls":
        raise BenchError("--diagnoses is for the tls scenario")
    if value < 1 or value > 50:
        raise BenchError("--diagnoses is a number of pairs, 1 to 50")
    return value


def _positive(value: float | None, flag: str, most: float) -> float | None:
    if value is None:
        return None
    if not 0 < value <= most:
        raise BenchError(f"{flag} must be above 0 and at most {most:g}")
    return float(value)


def _batch_ms(value: float | None) -> float | None:
    if value is None:
        return None
    if not 0 <= value <= 50:
        raise BenchError("--probe-batch-ms must be between 0 and 50")
    return float(value)


def _warmup_intervals(value: int | None, scenario: str) -> int:
    if value is None:
        return 2
    if scenario != "internet":
        raise BenchError("--warmup-intervals is for the internet scenario")
    if not 1 <= value <= 10:
        raise BenchError("--warmup-intervals must be between 1 and 10")
    return int(value)


def _https_only(value: bool, scenario: str) -> bool:
    if value and scenario != "internet":
        raise BenchError("--https-only is for the internet scenario")
    return value


def _load_only(value: bool, scenario: str) -> bool:
    if value and scenario not in ("http", "tls", "mixed", "internet"):
        raise BenchError("--load-only applies to the http, tls, mixed and internet scenarios")
    return value


def _share(value: float | None, scenario: str) -> float | None:
    if value is None:
        return None
    if scenario != "http":
        raise BenchError("--assertions applies to the http scenario")
    if not 0 < value <= 1:
        raise BenchError("--assertions is a share of the monitors, above 0 and at most 1")
    return float(value)


