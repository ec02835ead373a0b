"""``upwatch bench SCENARIO [--monitors N] [--duration S] [--quick] [--json]``.

One invocation runs one scenario and prints one record (a table, or one JSON line with
``--json``). The parent process only orchestrates: it pins itself (and so the embedded
database it starts) to the cores the engine does not use, starts the targets, seeds the
database, runs each measured component in its own child pinned to the engine core, one
after the other, and reads the database between runs. See ``upwatch_bench/__init__.py`` for
the layout and ``docs`` of each role for what exactly is measured.

Scenarios (defaults; ``--quick`` makes a short smoke run of each):

``http``      N uptime checks (10,000) at 30 s against plain-HTTP targets; the naive
              baseline on the same URLs; ``wrk -H 'Connection: close'``; results-path
              capacity.
``tls``       N certificate checks (10,000) at 30 s against TLS targets; the baseline does
              verified HTTPS GETs; ``openssl s_time -new``; memory per in-flight HTTPS probe.
``mixed``     N uptime checks, run twice: all healthy, then 10% slow/hanging/refusing;
              healthy probes' lateness compared between the two.
``webhooks``  events queued at 1,000/s over N monitors (1,000) and delivered by the real
              Deliverer to a local receiver; then a backlog drained as fast as it goes.
``api``       ``create_app`` on one core: GET /webapi/monitors/{id} and GET /webapi/monitors
              with N monitors (1,000); statistics latency with 30 days of history.
``internet``  N uptime checks (50,000) at 60 s, each a distinct host name behind the bench's
              DNS server, 80% HTTPS through nginx, think times, bodies and failing kinds
              (upwatch_bench/scenarios/internet.py, upwatch_bench/world.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from cryptography.fernet import Fernet

from engine.runtime.compiled import compiled_modules, stale_modules
from upwatch_bench import SCENARIOS, layout, report
from upwatch_bench.certs import CertFiles, make_certs
from upwatch_bench.database import BenchDatabase, seed_history, seed_monitors
from upwatch_bench.limits import ToolRun, run_s_time, run_wrk, write_id_script
from upwatch_bench.procs import Child, ChildFailed, Procs
from upwatch_bench.stats import Progress, clean, per, ratio, summary_ms
from upwatch_bench.tracers import callgrind, kernelprof, pyspy

INTERVAL_S = 30  # the monitors' configured interval (the API's shortest)
LIMIT_PAIRS = 2  # engine-at-capacity / limit-tool pairs, adjacent in time (1 with --quick)


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
    rate: float | None = None  # http, tls: probes a second asked at capacity (None: default)
    probe_timeout: float | None = None  # the engine's probe timeout (None: 10 s, quick 2 s)
    # The engine's probe_batch_ms (engine/probes/reactor.py); None: the engine's default.
    probe_batch_ms: float | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Options:
        quick = bool(args.quick)
        scenario = args.scenario
        default_monitors = {"webhooks": 1000, "api": 1000, "notify": 1000,
                            "internet": 50_000}.get(scenario, 10_000)
        if quick:
            default_monitors = {"webhooks": 100, "api": 100, "notify": 200,
                                "internet": 2000}.get(scenario, 300)
        monitors = args.monitors if args.monitors is not None else default_monitors
        duration = args.duration if args.duration is not None else (2.0 if quick else 30.0)
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
            rate=_positive(getattr(args, "rate", None), "--rate", 1_000_000.0),
            probe_timeout=_positive(getattr(args, "probe_timeout", None), "--probe-timeout",
                                    300.0),
            probe_batch_ms=_batch_ms(getattr(args, "probe_batch_ms", None)),
        )


def _names_cost_pairs(value: int | None, names: bool) -> int | None:
    if value is None:
        return None
    if not names:
        raise BenchError("--names-cost needs --names")
    if not 1 <= value <= 20:
        raise BenchError("--names-cost must be between 1 and 20 pairs")
    return int(value)


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


def _cores() -> tuple[set[int], set[int]]:
    """(engine core, the others). The measured process gets a core of its own; targets,
    database and load tools share the rest. One core: everything shares it."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    if len(cpus) < 2:
        return set(cpus), set(cpus)
    return {cpus[-1]}, set(cpus[:-1])


class Bench:
    """One run's resources: work directory, processes, database, store. Async context:
    everything is released on the way out, whatever happened."""

    def __init__(self, opts: Options, progress: Progress) -> None:
        self.opts = opts
        self.progress = progress
        self.engine_cpus, self.other_cpus = _cores()
        self.workdir = Path(tempfile.mkdtemp(prefix="upwatch-bench-"))
        self.procs = Procs(self.workdir)
        self.db = BenchDatabase(self.workdir)
        self.store: Any = None
        self.notes: list[str] = []
        self.certs: CertFiles | None = None
        self.seq = 0  # numbers the callgrind files of a run
        self.dns: Child | None = None  # the DNS server child (--names)
        self.dns_address: str | None = None
        self.by_names = False  # --names: the monitors point at host names now
        self.secret_key = Fernet.generate_key().decode("ascii")

    async def __aenter__(self) -> Bench:
        from engine.db.store import Store
        from engine.runtime.secretbox import SecretBox
        from upwatch_bench.procs import pin_pid

        # Before anything is started: the embedded server inherits this affinity.
        pin_pid(0, self.other_cpus)
        self.progress.phase("starting a fresh database", 5)
        try:
            await self.db.start()
            # One key per run, given to the children's settings too: none generates its
            # own, so none warns of it (an operator's warning, noise in a bench).
            self.store = await Store.connect(
                self.db.dsn, min_size=1, max_size=4,
                secrets=SecretBox(self.secret_key.encode("ascii")))
        except BaseException:
            await self._release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._release()

    async def _release(self) -> None:
        self.progress.clear()
        with contextlib.suppress(Exception):
            await self.procs.close()
        if self.store is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.store.close(), 10)
            self.store = None
        await self.db.close()
        shutil.rmtree(self.workdir, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def cert_files(self) -> CertFiles:
        if self.certs is None:
            self.certs = make_certs(self.workdir / "certs",
                                    layout.HEALTHY_HOSTS + layout.HOSTILE_HOSTS)
        return self.certs

    async def start_targets(self, ports: layout.Ports, *, slow_s: float) -> None:
        """Target processes on the other cores, all serving every socket (SO_REUSEPORT)."""
        certs = self.cert_files()
        count = max(2, len(self.other_cpus))
        cfg = {"binds": layout.target_binds(ports), "cert": str(certs.cert),
               "key": str(certs.key), "slow_s": slow_s, "hang_cap_s": 120.0}
        children = [await self.procs.spawn(f"targets{i}", "targets", cfg, self.other_cpus)
                    for i in range(count)]
        for c in children:
            await c.expect("ready", 30)

    async def start_dns(self, addresses: list[str], zone: str, **extra: Any) -> None:
        """The DNS server child (upwatch_bench/roles/dnsserver.py) on the other cores; ``extra``
        goes into its config (``world``: the internet world's answers)."""
        self.dns = await self.procs.spawn(
            "dns", "dns", {"addresses": addresses, "zone": zone,
                           "latency_s": self.opts.dns_latency, "ttl": self.opts.dns_ttl,
                           **extra},
            self.other_cpus)
        ready = await self.dns.expect("ready", 30)
        self.dns_address = str(ready["address"])

    async def dns_queries(self, start: float, end: float) -> int:
        """Questions the DNS server received between two wall times."""
        return int((await self.dns_count(start, end))["window"])

    async def dns_count(self, start: float, end: float) -> dict[str, Any]:
        """The DNS server's questions between two wall times: ``window`` (all of them),
        ``most_per_name_type`` (the most any one name and record type got), ``name_types``
        (the (name, type) pairs asked for)."""
        assert self.dns is not None
        self.dns.send(cmd="count", start=start, end=end)
        return await self.dns.expect("count", 10)

    async def wait(self, child: Child, event: str, label: str, seconds: float,
                   slack: float = 60.0) -> dict[str, Any]:
        self.progress.phase(label, seconds)
        return await child.expect(event, seconds + slack, tick=self.progress.tick)

    def settings(self, **extra: Any) -> dict[str, Any]:
        """Settings of the measured components (their environment has no UPWATCH_*)."""
        quick = self.opts.quick
        values: dict[str, Any] = {
            "data_dir": str(self.workdir / "data"),
            "allow_private_targets": True,
            "time_scale": self.opts.time_scale,
            "probe_timeout": self.opts.probe_timeout or (2.0 if quick else 10.0),
            "slow_threshold_ms": 500 if quick else 3000,
            "ca_bundle": str(self.cert_files().ca),
            "base_url": "http://127.0.0.1:8080",
            "log_level": "WARNING",
            "secret_key": self.secret_key,
        }
        if self.dns_address is not None:
            values["dns_servers"] = self.dns_address
        if self.opts.probe_batch_ms is not None:
            values["probe_batch_ms"] = self.opts.probe_batch_ms
        values.update(extra)
        return values


# -- engine scenarios (http, tls, mixed) ------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """One measured run of a child: warm-up, measured seconds and the time scale of the
    monitors' 30 s interval during it. ``name`` labels the progress line and profile."""

    name: str
    warmup: float
    duration: float
    time_scale: float

    @property
    def interval(self) -> float:
        return INTERVAL_S * self.time_scale


def _gc_experiment() -> list[int] | None:
    """``UPWATCH_BENCH_GC_THRESHOLD=a,b,c``: run the engine child with ``gc.set_threshold``
    (a what-if for proposals; the engine itself is unchanged)."""
    value = os.environ.get("UPWATCH_BENCH_GC_THRESHOLD")
    if not value:
        return None
    return [int(x) for x in value.split(",")]


def _cprofile_path(b: Bench, w: Window) -> str | None:
    """``UPWATCH_BENCH_CPROFILE=DIR``: cProfile each engine window into DIR (pstats files)."""
    value = os.environ.get("UPWATCH_BENCH_CPROFILE")
    if not value:
        return None
    Path(value).mkdir(parents=True, exist_ok=True)
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")
    return str(Path(value) / f"{b.opts.scenario}-{name}.pstats")


def _load_window(b: Bench, name: str) -> Window:
    return Window(name, b.opts.warmup, b.opts.duration, b.opts.time_scale)


def _capacity_window(b: Bench, name: str, demand_per_s: float) -> Window:
    """The same monitors at an interval so short that they ask for ``demand_per_s`` probes
    a second, more than one core can do: what gets done is the capacity. ``--rate`` asks
    for that many instead, also fewer than the monitors at 30 s (then the interval is
    longer than 30 s): under callgrind the engine runs some twenty times slower, and probes
    asked for faster than it runs them would wait in its queue and time out."""
    opts = b.opts
    if opts.rate is not None:
        demand_per_s = opts.rate
    interval = max(0.05, opts.monitors / demand_per_s)  # 0.05 s: the engine's floor
    scale = interval / INTERVAL_S
    return Window(name, 0.5 if opts.quick else 3.0,
                  min(opts.duration, 1.5 if opts.quick else 10.0),
                  scale if opts.rate is not None else min(1.0, scale))


def _profile_window(b: Bench, child: Child, w: Window) -> asyncio.Task[Any] | None:
    """With UPWATCH_BENCH_PROFILE set: py-spy over the child's measured window (it starts
    ``warmup`` seconds after the child said ``loaded``)."""
    out_dir = pyspy.profile_dir()
    if out_dir is None:
        return None
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")

    async def go() -> Any:
        await asyncio.sleep(w.warmup)
        return await pyspy.record(
            b.procs, child.pid, w.duration, out_dir / f"{b.opts.scenario}-{name}.txt",
            b.other_cpus, native=bool(os.environ.get(pyspy.ENV_PROFILE + "_NATIVE")))

    return asyncio.create_task(go())


def _kernel_trace(b: Bench, pid: int, seconds: float, name: str, *,
                  delay: float = 0.0) -> tuple[str, asyncio.Task[Any] | None]:
    """With UPWATCH_BENCH_PERF or UPWATCH_BENCH_STRACE set: perf or strace over ``pid``
    for ``seconds``, ``delay`` seconds from now (upwatch_bench/tracers/kernelprof.py)."""
    b.seq += 1
    stem = f"{b.opts.scenario}-{b.seq:02d}-" + "".join(
        c if c.isalnum() else "-" for c in name).strip("-")
    if not kernelprof.enabled():
        return stem, None

    async def go() -> None:
        await asyncio.sleep(delay)
        await kernelprof.trace(b.procs, pid, seconds, stem, b.other_cpus)

    return stem, asyncio.create_task(go())


async def _finish_profile(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 120)


async def _run_engine(b: Bench, w: Window, *, write_capacity_s: float = 0.0,
                      python: str | None = None, dns_warm_s: float | None = None,
                      settings: dict[str, Any] | None = None,
                      slices: int = 1, dns_prewarm: bool = False) -> dict[str, Any]:
    """``dns_warm_s``: how long the child waits for its resolver to hold every name before
    the window (default: 60 s with the bench's DNS server); ``settings``: extra settings;
    ``slices``: the window is read at the end of each of that many equal parts too (the
    result's ``slices``: cumulative seconds, CPU seconds and probes); ``dns_prewarm``: the
    child looks every name up itself before that wait (a rate too low for its probes to
    have asked for every name by then)."""
    cg_out = _callgrind_path(b, w)
    if dns_warm_s is None:
        dns_warm_s = 60.0 if b.dns_address is not None else 0.0
    cfg = {"dsn": b.db.dsn,
           "settings": b.settings(time_scale=w.time_scale, **(settings or {})),
           "warmup_s": w.warmup, "duration_s": w.duration, "load_timeout_s": 300,
           "dns_warm_s": dns_warm_s,
           "write_capacity_s": write_capacity_s, "gc_threshold": _gc_experiment(),
           "cprofile": _cprofile_path(b, w), "callgrind": cg_out is not None,
           "slices": slices, "dns_prewarm": dns_prewarm}
    child = await b.procs.spawn("engine", "engine", cfg, b.engine_cpus,
                                prefix=callgrind.wrapper(cg_out) if cg_out else None,
                                python=python)
    try:
        await b.wait(child, "loaded", f"{w.name}: loading {b.opts.monitors:,} checks", 5, 300)
        prof = _profile_window(b, child, w)
        kstem, ktrace = _kernel_trace(b, child.pid, w.duration, w.name,
                                      delay=w.warmup + dns_warm_s)
        res = await b.wait(child, "result", f"{w.name}: measuring",
                           w.warmup + w.duration + write_capacity_s + 2 + dns_warm_s,
                           slack=600.0 if cg_out else 60.0)
        await _finish_profile(prof)
        if ktrace is not None:
            await _finish_profile(ktrace)
            kernelprof.note(kstem, probes=sum(res["probes"].values()), seconds=res["seconds"],
                            cpu_s=res["cpu_s"], user_s=res.get("user_s"),
                            sys_s=res.get("sys_s"))
    finally:
        await b.procs.stop(child)
    if cg_out is not None:
        # valgrind writes the file as the child exits.
        text = cg_out.read_text(errors="replace") if cg_out.exists() else ""
        ir, n = callgrind.total_instructions(text), res.get("callgrind_probes")
        res["instructions_per_probe"] = round(ir / n) if ir and n else None
        answered = res.get("callgrind_answered")
        res["instructions_per_answered_probe"] = round(ir / answered) if ir and answered else None
        res["callgrind_unanswered"] = (n - answered) if n is not None and answered is not None \
            else None
    return res


def _callgrind_path(b: Bench, w: Window) -> Path | None:
    """``UPWATCH_BENCH_CALLGRIND=DIR``: the callgrind output file of this engine window."""
    out_dir = callgrind.callgrind_dir()
    if out_dir is None:
        return None
    if not callgrind.available():
        raise BenchError(f"{callgrind.ENV_CALLGRIND} needs valgrind (Debian: apt-get install"
                         " valgrind)")
    out_dir.mkdir(parents=True, exist_ok=True)
    b.seq += 1
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")
    return (out_dir / f"{b.opts.scenario}-{b.seq:02d}-{name}.callgrind").resolve()


async def _run_baseline(b: Bench, w: Window, ports: layout.Ports, *, tls: bool,
                        mixed: bool) -> dict[str, Any]:
    cfg = {"monitors": b.opts.monitors, "ports": ports.to_dict(), "tls": tls, "mixed": mixed,
           "dns_server": b.dns_address, "interval_s": w.interval, "warmup_s": w.warmup,
           "duration_s": w.duration,
           "timeout_s": b.settings()["probe_timeout"],
           "cafile": str(b.cert_files().ca) if tls else None}
    child = await b.procs.spawn("baseline", "baseline", cfg, b.engine_cpus)
    try:
        await b.wait(child, "loaded", f"{w.name}: one task per monitor", 5, 300)
        prof = _profile_window(b, child, w)
        res = await b.wait(child, "result", f"{w.name}: measuring", w.warmup + w.duration)
        await _finish_profile(prof)
        return res
    finally:
        await b.procs.stop(child)


async def _run_inflight(b: Bench, ports: layout.Ports, role: str) -> dict[str, Any]:
    k = 100 if b.opts.quick else 1000
    hosts = layout.HEALTHY_HOSTS
    cfg = {
        "warm_urls": [f"https://{hosts[i % len(hosts)]}:{ports.tls}/warm/{i}" for i in range(20)],
        "hang_urls": [f"https://{hosts[i % len(hosts)]}:{ports.tls_hang}/h/{i}" for i in range(k)],
        "cafile": str(b.cert_files().ca),
        "settle_max_s": 15.0,
    }
    child = await b.procs.spawn(role, role, cfg, b.engine_cpus)
    try:
        return await b.wait(child, "result", f"{role}: {k} HTTPS probes in flight", 5, 60)
    finally:
        await b.procs.stop(child)


async def _rows_in_window(b: Bench, wall0: float, wall1: float) -> int:
    return int(await b.store.pool.fetchval(
        "SELECT count(*) FROM probe_results WHERE at >= $1 AND at < $2",
        datetime.fromtimestamp(wall0, UTC), datetime.fromtimestamp(wall1, UTC)))


def start_lateness(check_id: int, start: float, interval: float) -> float:
    """How late a probe that started at wall time ``start`` was for its phase slot.

    The engine schedules check ``id`` at ``phase_fraction(id) * interval`` past every
    multiple of ``interval`` (wall clock, :func:`engine.scheduler.wheel.first_due`). A start
    a hair before its slot (clock rounding between the wall and monotonic clocks) is on
    time, not an interval late."""
    from engine.scheduler.wheel import phase_fraction

    offset = phase_fraction(check_id) * interval
    late = (start - offset) % interval
    if late > interval - 0.005:
        late -= interval
    return max(0.0, late)


async def _row_lateness(b: Bench, wall0: float, wall1: float,
                        interval: float) -> dict[str, dict[str, Any]]:
    """Per-probe start lateness and errors from the result rows of the window, for healthy
    and hostile checks apart (the engine's histogram does not tell them apart). The start is
    the row's time minus the probe's total time."""
    rows = await b.store.pool.fetch(
        """SELECT r.check_id, extract(epoch FROM r.at)::float8 AS at, r.total_ms, r.outcome,
                  m.host LIKE '127.0.3.%' AS hostile
           FROM probe_results r JOIN checks c ON c.id = r.check_id
           JOIN monitors m ON m.id = c.monitor_id
           WHERE r.at >= $1 AND r.at < $2 AND NOT r.confirmation""",
        datetime.fromtimestamp(wall0, UTC), datetime.fromtimestamp(wall1, UTC))
    groups: dict[str, dict[str, Any]] = {}
    for name in ("healthy", "hostile"):
        sel = [r for r in rows if r["hostile"] == (name == "hostile")]
        late = [start_lateness(r["check_id"], r["at"] - (r["total_ms"] or 0) / 1000.0, interval)
                for r in sel]
        errors = sum(1 for r in sel if r["outcome"] != 0)
        groups[name] = {"lateness_ms": summary_ms(late), "rows": len(sel),
                        "error_rate": per(errors, len(sel), 6)}
    return groups


def _engine_figures(res: dict[str, Any], kind: str) -> dict[str, Any]:
    probes = res["probes"]
    total = sum(v for k, v in probes.items() if k.startswith(kind + ","))
    ok = probes.get(f"{kind},ok", 0.0)
    extra = {}
    if res.get("instructions_per_probe") is not None:  # UPWATCH_BENCH_CALLGRIND
        for key in ("instructions_per_probe", "instructions_per_answered_probe",
                    "callgrind_probes", "callgrind_unanswered"):
            extra[key] = res.get(key)
    if res.get("in_flight_mean") is not None:
        extra["in_flight_mean"] = res["in_flight_mean"]
        extra["in_flight_max"] = res.get("in_flight_max")
    return extra | {
        "probes": total,
        "probes_per_s": per(total, res["seconds"], 2),
        "cpu_s_per_probe": per(res["cpu_s"], total),
        # The same CPU apart (None from an engine_run that does not report it).
        "user_s_per_probe": per(res.get("user_s"), total),
        "sys_s_per_probe": per(res.get("sys_s"), total),
        "probes_per_cpu_s": per(total, res["cpu_s"], 1),
        "cpu_utilization": per(res["cpu_s"], res["seconds"], 3),
        "error_rate": per(total - ok, total, 6),
        "lateness_ms": res["lateness_ms"],
        "rss_per_monitor_bytes": per(res["rss_loaded"] - res["rss_base"], res["scheduled"], 1),
        "rss_end_per_monitor_bytes": per(res["rss_end"] - res["rss_base"], res["scheduled"], 1),
        "load_s": res["load_s"],
        "scheduled": res["scheduled"],
        "results_written_per_s": per(res["results_written"], res["seconds"], 1),
        "gc": res.get("gc"),
    }


def _baseline_figures(base: dict[str, Any]) -> dict[str, Any]:
    """The baseline's figures. CPU per probe counts successful probes only: an overloaded
    baseline fails fast (timeouts waiting for a connection slot) and would otherwise look
    cheaper the more it fails."""
    good = base["probes"] - base["errors"]
    return {
        "probes_per_s": per(base["probes"], base["seconds"], 2),
        "good_probes_per_s": per(good, base["seconds"], 2),
        "cpu_s_per_probe": per(base["cpu_s"], good),
        "probes_per_cpu_s": per(good, base["cpu_s"], 1),
        "cpu_utilization": per(base["cpu_s"], base["seconds"], 3),
        "lateness_ms": base["lateness_ms"],
        "rss_per_monitor_bytes": per(base["rss_loaded"] - base["rss_base"], base["scheduled"], 1),
        "error_rate": per(base["errors"], base["probes"], 6),
    }


async def _point_monitors(b: Bench, account_id: int, urls: list[str]) -> None:
    """Give the account's monitors (in id order) these URLs."""
    async with b.store.pool.acquire() as conn:
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM monitors WHERE account_id = $1 ORDER BY id", account_id)]
        await conn.execute(
            """UPDATE monitors m SET url = u.url, host = u.host, port = u.port
               FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
                    AS u(id, url, host, port)
               WHERE m.id = u.id""",
            ids, urls, [urlsplit(u).hostname or "" for u in urls],
            [str(urlsplit(u).port) for u in urls])


def _dns_figures(res: dict[str, Any], count: dict[str, Any] | int,
                 ttl: float | None = None) -> dict[str, Any]:
    """``--names``: DNS questions the server received per probe in the measured window,
    the share of the window's name lookups the engine's cache answered, and the most
    questions one name and record type got in the window against what one per TTL allows
    there (a window of W seconds holds at most floor(W / TTL) + 1 starts of a TTL)."""
    dns = res.get("dns") or {}
    hits, lookups = dns.get("hits", 0), dns.get("lookups", 0)
    probes = sum(res["probes"].values())
    if isinstance(count, int):  # the questions only (Bench.dns_queries)
        count = {"window": count}
    queries = int(count["window"])
    return {
        "dns_queries": queries,
        "dns_queries_per_probe": per(queries, probes, 6),
        "dns_cache_hit_ratio": per(hits, hits + lookups, 6),
        "dns_lookups_in_window": lookups,
        "dns_most_queries_per_name_type": count.get("most_per_name_type"),
        "dns_name_types_asked": count.get("name_types"),
        "dns_queries_allowed_per_name_type": (
            None if ttl is None else int(res["seconds"] // max(ttl, 1e-9)) + 1),
    }


def _like_for_like() -> dict[str, Any]:
    """Settings of both sides of a names/literals pair: by name every monitor is its own host,
    by IP literal 100 monitors share each of the 100 addresses, so at the defaults
    (``per_host_limit`` 8, ``max_in_flight`` 1,000) literals ran 800 probes at once and
    names 1,000, and the target's queue made every probe by name longer. Both now run
    ``per_host_limit`` x 100 (800): the literals' limit, the names' cap."""
    from engine.runtime.settings import Settings

    per_host = int(Settings.model_fields["per_host_limit"].default)
    return {"max_in_flight": per_host * len(layout.HEALTHY_HOSTS)}


def _pair_orders(pairs: int) -> list[list[str]]:
    """The order of the windows in each names/literals pair: literals first in even pairs,
    names first in odd ones, so that neither side always runs after the other."""
    return [["literals", "names"] if i % 2 == 0 else ["names", "literals"]
            for i in range(pairs)]


async def _names_pair(b: Bench, account_id: int, ports: layout.Ports, i: int, demand: float,
                      which: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Pair ``i`` of capacity windows, (names, literals) figures, in the order
    :func:`_pair_orders` gives, both with :func:`_like_for_like` settings. With ``--rate``
    the names side's child looks its names up before its window."""
    opts = b.opts
    figs: dict[str, dict[str, Any]] = {}
    for by in _pair_orders(i + 1)[i]:
        by_name = by == "names"
        if b.by_names != by_name:
            await _point_monitors(b, account_id,
                                  layout.monitor_urls(opts.monitors, ports, names=by_name))
            b.by_names = by_name
        label = "engine at capacity" if by_name else "engine at capacity, IP literals"
        w = _capacity_window(b, label + which, demand)
        # The literal side has no name to wait for: with the default wait (for every name
        # to be cached, at most 60 s) its child ran 60 s at capacity before its window,
        # ~600,000 result rows into the database that shares the targets' core.
        res = await _run_engine(b, w, settings=_like_for_like(),
                                dns_warm_s=None if by_name else 0.0,
                                dns_prewarm=by_name and opts.rate is not None)
        fig = _engine_figures(res, "uptime")
        if by_name:
            fig.update(_dns_figures(res, await b.dns_count(res["wall_start"], res["wall_end"]),
                                    opts.dns_ttl))
        fig["in_flight_at_end"] = res.get("in_flight_at_end")
        figs[by] = fig
    return figs["names"], figs["literals"]


_PAIR_KEYS = ("probes_per_cpu_s", "cpu_s_per_probe", "user_s_per_probe", "sys_s_per_probe",
              "cpu_utilization", "probes_per_s", "error_rate", "in_flight_mean",
              "in_flight_max", "instructions_per_probe", "instructions_per_answered_probe",
              "callgrind_probes", "callgrind_unanswered", "dns_queries",
              "dns_lookups_in_window", "dns_cache_hit_ratio")


async def _names_cost(b: Bench, account_id: int, ports: layout.Ports,
                      rec: dict[str, Any]) -> dict[str, Any]:
    """``--names-cost PAIRS``: only interleaved capacity pairs, names against IP literals,
    the same probes in flight both ways: CPU per probe (probes per CPU second) and, under
    ``UPWATCH_BENCH_CALLGRIND``, user-space instructions per answered probe."""
    opts = b.opts
    pairs = opts.names_cost or 1
    rate = opts.rate if opts.rate is not None else 30_000.0
    rec.update(mode="names_cost", rate_asked_per_s=rate,
               probe_timeout_s=b.settings()["probe_timeout"], settings=_like_for_like(),
               loadavg_start=[round(x, 2) for x in os.getloadavg()])
    rows: list[dict[str, Any]] = []
    for i in range(pairs):
        nfig, lfig = await _names_pair(b, account_id, ports, i, rate,
                                       f" ({i + 1} of {pairs})")
        row: dict[str, Any] = {"order": _pair_orders(i + 1)[i],
                               "names": {k: nfig.get(k) for k in _PAIR_KEYS if k in nfig},
                               "literals": {k: lfig.get(k) for k in _PAIR_KEYS if k in lfig},
                               "cpu_ratio": ratio(lfig["probes_per_cpu_s"],
                                                  nfig["probes_per_cpu_s"])}
        if nfig.get("instructions_per_answered_probe") is not None:
            row["instructions_ratio"] = ratio(nfig["instructions_per_answered_probe"],
                                              lfig.get("instructions_per_answered_probe"))
        rows.append(row)
    rec["pairs"] = rows
    cpu = [r["cpu_ratio"] for r in rows if r["cpu_ratio"] is not None]
    rec["names_cost_vs_literals_pairs"] = [r["cpu_ratio"] for r in rows]
    rec["names_cost_vs_literals"] = round(statistics.median(cpu), 3) if cpu else None
    ins = [r["instructions_ratio"] for r in rows if r.get("instructions_ratio") is not None]
    if ins:
        rec["names_instructions_vs_literals_pairs"] = ins
        rec["names_instructions_vs_literals"] = round(statistics.median(ins), 4)
    rec["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    rec["targets"] = [report.target("names vs IP literals, CPU per probe at capacity (issue 15)",
                                    rec["names_cost_vs_literals"], "<=", 1.15, "x")]
    if ins:
        rec["targets"].append(report.target(
            "names vs IP literals, instructions per answered probe (issue 15)",
            rec["names_instructions_vs_literals"], "<=", 1.15, "x"))
    return rec


async def _switch_to_hostile(b: Bench, account_id: int, ports: layout.Ports) -> None:
    """Point every tenth monitor at a slow, hanging or refusing target."""
    n = b.opts.monitors
    async with b.store.pool.acquire() as conn:
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM monitors WHERE account_id = $1 ORDER BY id", account_id)]
        hostile = [i for i in range(n) if layout.hostile_kind(i)]
        urls = [layout.monitor_url(i, ports, mixed=True) for i in hostile]
        await conn.execute(
            """UPDATE monitors m SET url = u.url, host = u.host, port = u.port
               FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
                    AS u(id, url, host, port)
               WHERE m.id = u.id""",
            [ids[i] for i in hostile], urls,
            [urlsplit(u).hostname or "" for u in urls], [str(urlsplit(u).port) for u in urls])


async def scenario_engine(b: Bench) -> dict[str, Any]:
    """http, tls and mixed: the engine at the scheduled load, then (http, tls) at capacity;
    the baseline the same two ways; then the limit tool; tls adds in-flight memory."""
    opts = b.opts
    sc = opts.scenario
    tls = sc == "tls"
    n = opts.monitors
    ports = layout.pick_ports()
    b.progress.phase("starting targets", 3)
    await b.start_targets(ports, slow_s=1.0 if opts.quick else 4.0)
    names = opts.names
    if names:
        b.progress.phase("starting the DNS server", 2)
        await b.start_dns(list(layout.HEALTHY_HOSTS), layout.NAMES_ZONE)
    account, _ = await b.store.create_account("bench")
    today = date.today()
    await b.store.ensure_result_partitions(today - timedelta(days=1), 3)
    b.progress.phase(f"seeding {n:,} monitors", max(1.0, n / 20_000))
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, layout.monitor_urls(n, ports, tls=tls,
                                                                  names=names),
                            uptime=not tls, certificate=tls, interval=INTERVAL_S)
    kind = "certificate_health" if tls else "uptime"
    load = _load_window(b, "engine")
    rec: dict[str, Any] = {"scenario": sc, "monitors": n, "duration_s": opts.duration,
                           "interval_s": load.interval, "time_scale": load.time_scale}
    if names:
        rec.update(names=True, dns_latency_s=opts.dns_latency, dns_ttl_s=opts.dns_ttl)
        b.by_names = True
    if opts.names_cost is not None:
        return await _names_cost(b, account.id, ports, rec)

    # 1. The engine at the scheduled load (N monitors at 30 s, x time scale).
    if names:
        # The window starts after one whole interval: every name was looked up once by
        # then (a cold cache is the start, not the steady state the figures describe).
        load = Window(load.name, max(load.warmup, load.interval + 1.0), load.duration,
                      load.time_scale)
        rec["warmup_s"] = load.warmup
    res = await _run_engine(b, load, write_capacity_s=(1.5 if opts.quick else 5.0)
                            if sc == "http" else 0.0)
    fig = _engine_figures(res, kind)
    rec.update(fig)
    if names:
        rec.update(_dns_figures(res, await b.dns_count(res["wall_start"], res["wall_end"]),
                                opts.dns_ttl))
    rec["held"] = per(fig["probes"], n * res["seconds"] / load.interval, 4)
    rec["rows_per_s"] = per(await _rows_in_window(b, res["wall_start"], res["wall_end"]),
                            res["seconds"], 1)
    cap = res.get("write_capacity") or {}
    rec["rows_capacity_per_s"] = cap.get("rows_per_s")
    rec["rows_capacity_cpu_s_per_row"] = cap.get("cpu_s_per_row")
    groups = await _row_lateness(b, res["wall_start"], res["wall_end"], load.interval)
    rec["lateness_rows_ms"] = groups["healthy"]["lateness_ms"]

    if sc == "mixed":
        # 1b. The same monitors again, every tenth now hostile.
        await _switch_to_hostile(b, account.id, ports)
        hostile_w = _load_window(b, "engine, 10% hostile")
        res2 = await _run_engine(b, hostile_w)
        fig2 = _engine_figures(res2, kind)
        groups2 = await _row_lateness(b, res2["wall_start"], res2["wall_end"], load.interval)
        rec.update(fig2)
        rec["held"] = per(fig2["probes"], n * res2["seconds"] / load.interval, 4)
        rec["rows_per_s"] = per(await _rows_in_window(b, res2["wall_start"], res2["wall_end"]),
                                res2["seconds"], 1)
        healthy_n = sum(1 for i in range(n) if layout.hostile_kind(i) is None)
        rec["healthy_held"] = per(groups2["healthy"]["rows"],
                                  healthy_n * res2["seconds"] / load.interval, 4)
        rec["reference_lateness_ms"] = groups["healthy"]["lateness_ms"]
        rec["healthy_lateness_ms"] = groups2["healthy"]["lateness_ms"]
        rec["lateness_rows_ms"] = groups2["healthy"]["lateness_ms"]
        rec["healthy_error_rate"] = groups2["healthy"]["error_rate"]
        rec["hostile_error_rate"] = groups2["hostile"]["error_rate"]
        # The engine-wide error rate would count the hostile probes, which must fail.
        rec["error_rate"] = groups2["healthy"]["error_rate"]
        rec["healthy_p99_ratio"] = ratio(groups2["healthy"]["lateness_ms"]["p99"],
                                         groups["healthy"]["lateness_ms"]["p99"])

    if opts.load_only:
        # --load-only: a large run (50,000 monitors by name behind a slow resolver) within a
        # few minutes; no baseline, capacity or limit runs, so no ratios.
        rec["load_only"] = True
        rec["targets"] = report.engine_targets(rec)
        return rec

    # 2. The naive baseline at the same load.
    base = _baseline_figures(await _run_baseline(b, _load_window(b, "baseline"), ports,
                                                 tls=tls, mixed=sc == "mixed"))
    for key, value in base.items():
        rec["baseline_" + key] = value
    rec["ratio_vs_baseline"] = ratio(rec["probes_per_cpu_s"], base["probes_per_cpu_s"])

    # 3. Both at capacity: more probes asked for than one core can do. The engine's capacity
    # and the limit tool are measured in adjacent pairs (engine, tool, engine, tool): the
    # machine's speed drifts by more than the changes we measure, and a ratio whose two
    # sides ran a minute apart took that drift in whole.
    tools: list[ToolRun] = []
    pair_ratios: list[float | None] = []
    tool_absent = False
    if sc in ("http", "tls"):
        demand = 8000.0 if tls else 30_000.0
        cap_runs: list[dict[str, Any]] = []
        literal_runs: list[dict[str, Any]] = []
        cap_w = _capacity_window(b, "engine at capacity", demand)
        for i in range(1 if opts.quick else LIMIT_PAIRS):
            which = "" if opts.quick else f" ({i + 1} of {LIMIT_PAIRS})"
            if names:
                # The same targets by IP literal beside each names window, the order turning
                # each pair (literals, names, names, literals, ...), the same probes in flight.
                nfig, lfig = await _names_pair(b, account.id, ports, i, demand, which)
                cap_runs.append(nfig)
                literal_runs.append(lfig)
            else:
                cap_runs.append(_engine_figures(await _run_engine(
                    b, _capacity_window(b, "engine at capacity" + which, demand)), kind))
            tool = await _run_limit(b, ports, tls=tls, quick=opts.quick, which=which)
            if tool is None:
                tool_absent = True
                continue
            tools.append(tool)
            pair_ratios.append(ratio(cap_runs[-1]["probes_per_cpu_s"], tool.per_cpu_s))
        cfig = cap_runs[0]
        rec["capacity"] = {
            "interval_s": round(cap_w.interval, 4),
            "asked_per_s": round(n / cap_w.interval, 1),
            "probes_per_s": cfig["probes_per_s"],
            "cpu_s_per_probe": cfig["cpu_s_per_probe"],
            "probes_per_cpu_s": cfig["probes_per_cpu_s"],
            "cpu_utilization": cfig["cpu_utilization"],
            "error_rate": cfig["error_rate"],
            "lateness_ms": cfig["lateness_ms"],
            "gc": cfig["gc"],
            "runs_probes_per_cpu_s": [c["probes_per_cpu_s"] for c in cap_runs],
            "runs_user_s_per_probe": [c["user_s_per_probe"] for c in cap_runs],
            "runs_sys_s_per_probe": [c["sys_s_per_probe"] for c in cap_runs],
        }
        if names:
            rec["capacity"].update({k: cfig.get(k) for k in (
                "dns_queries", "dns_queries_per_probe", "dns_cache_hit_ratio",
                "in_flight_at_end")})
        if literal_runs:
            cost = [ratio(lit["probes_per_cpu_s"], c["probes_per_cpu_s"])
                    for c, lit in zip(cap_runs, literal_runs, strict=True)]
            rec["literals_capacity_runs_probes_per_cpu_s"] = [
                c["probes_per_cpu_s"] for c in literal_runs]
            rec["literals_capacity_error_rates"] = [c["error_rate"] for c in literal_runs]
            if "instructions_per_probe" in literal_runs[0]:  # UPWATCH_BENCH_CALLGRIND
                rec["literals_capacity_runs_instructions_per_probe"] = [
                    c.get("instructions_per_probe") for c in literal_runs]
            rec["names_cost_vs_literals_pairs"] = cost
            good = [c for c in cost if c is not None]
            rec["names_cost_vs_literals"] = round(statistics.median(good), 3) if good else None
            rec["names_vs_literals_order"] = _pair_orders(len(literal_runs))
            rec["names_vs_literals_in_flight_mean"] = [
                [c.get("in_flight_mean"), lit.get("in_flight_mean")]
                for c, lit in zip(cap_runs, literal_runs, strict=True)]
        if "instructions_per_probe" in cfig:  # UPWATCH_BENCH_CALLGRIND
            rec["capacity"]["runs_instructions_per_probe"] = [
                c.get("instructions_per_probe") for c in cap_runs]
        bcap = _baseline_figures(await _run_baseline(
            b, _capacity_window(b, "baseline at capacity", demand), ports, tls=tls,
            mixed=False))
        rec["baseline_capacity"] = {k: bcap[k] for k in (
            "probes_per_s", "good_probes_per_s", "cpu_s_per_probe", "probes_per_cpu_s",
            "cpu_utilization", "error_rate")}
        rec["capacity_ratio_vs_baseline"] = ratio(cfig["probes_per_cpu_s"],
                                                  bcap["probes_per_cpu_s"])
    else:
        tool = await _run_limit(b, ports, tls=tls, quick=opts.quick, which="")
        if tool is None:
            tool_absent = True
        else:
            tools.append(tool)
            pair_ratios.append(ratio(rec["probes_per_cpu_s"], tool.per_cpu_s))

    if tls:
        inflight = await _run_inflight(b, ports, "inflight")
        rec["https_inflight_bytes"] = inflight["bytes_per_probe"]
        rec["https_inflight_detail"] = inflight
        base_inflight = await _run_inflight(b, ports, "baseline_inflight")
        rec["baseline_https_inflight_bytes"] = base_inflight["bytes_per_probe"]

    # 4. The machine's limit, from the tool runs above.
    if not tools:
        absent = ("openssl is not installed" if tls
                  else "wrk is not installed (Debian: apt-get install wrk)")
        if tool_absent:
            b.notes.append(f"limit skipped: {absent}")
        rec.update(limit_tool=None, limit_per_s=None, limit_per_cpu_s=None,
                   limit_cpu_s_per_op=None, ratio_vs_limit=None)
    else:
        # Per CPU second: a tool that saturates its core against the engine saturating its
        # core (at capacity; mixed has no capacity run and compares its load run). The
        # ratio is the median of the pairs' ratios; the tool's figures are its median run.
        tool = sorted(tools, key=lambda t: t.per_cpu_s or 0.0)[len(tools) // 2]
        ratios = [r for r in pair_ratios if r is not None]
        rec.update(
            limit_tool=tool.tool,
            limit_per_s=round(tool.per_s, 1) if tool.per_s else None,
            limit_per_cpu_s=round(tool.per_cpu_s, 1) if tool.per_cpu_s else None,
            limit_cpu_s_per_op=per(tool.cpu_s, tool.operations),
            limit_errors=sum(t.errors for t in tools),
            ratio_vs_limit=round(statistics.median(ratios), 3) if ratios else None,
            ratio_vs_limit_pairs=pair_ratios,
            limit_runs_per_cpu_s=[
                round(t.per_cpu_s, 1) if t.per_cpu_s else None for t in tools
            ],
            limit_runs_user_s_per_op=[per(t.user_s, t.operations) for t in tools],
            limit_runs_sys_s_per_op=[per(t.sys_s, t.operations) for t in tools],
            ratio_vs_limit_at_load=ratio(rec["probes_per_cpu_s"], tool.per_cpu_s),
        )
    rec["targets"] = report.engine_targets(rec)
    return rec


async def _run_limit(
    b: Bench, ports: layout.Ports, *, tls: bool, quick: bool, which: str
) -> ToolRun | None:
    """One run of the limit tool on the engine's core: wrk ``Connection: close``, or four
    ``openssl s_time -new`` for TLS; None when the tool is not installed."""
    limit_s = 1.0 if quick else 10.0
    host0 = layout.HEALTHY_HOSTS[0]
    if tls:
        b.progress.phase("limit: openssl s_time -new" + which, limit_s)
        return await run_s_time(b.procs, host0, ports.tls, seconds=limit_s,
                                cpus=b.engine_cpus, cafile=b.cert_files().ca)
    b.progress.phase("limit: wrk -H 'Connection: close'" + which, limit_s)
    traces: list[asyncio.Task[Any] | None] = []
    stem = ""

    def started(pid: int) -> None:
        nonlocal stem
        stem, task = _kernel_trace(b, pid, limit_s - 1, "wrk" + which)
        traces.append(task)

    tool = await run_wrk(b.procs, f"http://{host0}:{ports.ok}/", seconds=limit_s,
                         connections=50, cpus=b.engine_cpus,
                         headers=["Connection: close"], on_start=started)
    for task in traces:
        if task is not None:
            await _finish_profile(task)
            if tool is not None:
                kernelprof.note(stem, requests=tool.operations, seconds=tool.seconds,
                                cpu_s=tool.cpu_s, user_s=tool.user_s, sys_s=tool.sys_s)
    return tool


# -- webhooks -----------------------------------------------------------------------------------


async def scenario_webhooks(b: Bench) -> dict[str, Any]:
    opts = b.opts
    m = opts.monitors
    rate = 200.0 if opts.quick else 1000.0
    backlog = 1000 if opts.quick else 5000
    port = layout.free_port(layout.RECEIVER_HOST)
    record_path = b.workdir / "receiver.json"
    b.progress.phase("starting the receiver", 2)
    receiver = await b.procs.spawn(
        "receiver", "targets",
        {"binds": [(layout.RECEIVER_HOST, port, "hook")], "record": str(record_path)},
        b.other_cpus)
    await receiver.expect("ready", 30)
    account, _ = await b.store.create_account(
        "bench-hooks", webhook_url=f"http://{layout.RECEIVER_HOST}:{port}/hook")
    window = Window("window", opts.warmup, opts.duration, 1.0)
    deliverer = await b.procs.spawn(
        "deliverer", "deliverer",
        {"dsn": b.db.dsn, "settings": b.settings(time_scale=1.0),
         "cprofile": _cprofile_path(b, window)}, b.engine_cpus)
    await deliverer.expect("ready", 60)

    start_wall = time.time() + 1.0
    w0 = start_wall + opts.warmup
    w1 = w0 + opts.duration
    producer = await b.procs.spawn(
        "producer", "producer",
        {"dsn": b.db.dsn, "account_id": account.id, "monitors": m, "rate": rate,
         "start_wall": start_wall, "end_wall": w1}, b.other_cpus)
    # py-spy over the window (UPWATCH_BENCH_PROFILE); cProfile runs between the marks.
    profiling = _profile_window(b, deliverer, Window(
        window.name, start_wall - time.time() + opts.warmup, opts.duration, 1.0))

    async def mark_at(wall: float, tag: str) -> dict[str, Any]:
        while (left := wall - time.time()) > 0:
            await asyncio.sleep(min(0.25, left))
            b.progress.tick()
        deliverer.send(cmd="mark", tag=tag)
        return await deliverer.expect("mark", 30)

    b.progress.phase(f"webhooks: {rate:.0f} events/s offered", w1 - time.time())
    m0 = await mark_at(w0, "start")
    m1 = await mark_at(w1, "end")
    produced = await producer.expect("result", 60)
    await b.procs.stop(producer)
    await _finish_profile(profiling)

    async def pending() -> int:
        return int(await b.store.pool.fetchval(
            "SELECT count(*) FROM webhook_events WHERE status = 'pending'"))

    # Let what was queued in the window arrive (bounded), so late deliveries count as late.
    for _ in range(100):  # 10 s at most
        if not await pending():
            break
        await asyncio.sleep(0.1)

    # Capacity: a backlog queued at once, drained as fast as the deliverer goes.
    b.progress.phase(f"webhooks: draining a backlog of {backlog:,}", backlog / 1000)
    body = b'{"check":{"name":"uptime","status":"nok"},"monitor":{"id":1}}'
    mb0 = await mark_at(time.time(), "backlog-start")
    async with b.store.pool.acquire() as conn, conn.transaction():
        ids = await conn.fetch(
            """INSERT INTO webhook_events (account_id, monitor_id, check_id, event, body)
               SELECT $1, g % $2 + 1, NULL, 'downtime', $3::bytea
               FROM generate_series(0, $4 - 1) AS g RETURNING id""",
            account.id, m, body, backlog)
        await conn.execute("SELECT pg_notify('upwatch_webhooks', '')")
    backlog_wall = time.time()
    backlog_ids = {r["id"] for r in ids}
    for _ in range(2400):  # 120 s at most
        if not await pending():
            break
        await asyncio.sleep(0.05)
        b.progress.tick()
    mb1 = await mark_at(time.time(), "backlog-end")

    receiver.send(cmd="dump")
    await receiver.expect("dumped", 30)
    received = orjson.loads(record_path.read_bytes())
    first_200: dict[int, float] = {}
    for event_id, at in zip(received["ids"], received["times"], strict=True):
        first_200.setdefault(event_id, at)

    rows = await b.store.pool.fetch(
        "SELECT id, extract(epoch FROM created_at)::float8 AS created FROM webhook_events"
        " WHERE created_at >= $1 AND created_at < $2",
        datetime.fromtimestamp(w0, UTC), datetime.fromtimestamp(w1, UTC))
    e2e = [first_200[r["id"]] - r["created"] for r in rows if r["id"] in first_200]
    undelivered = sum(1 for r in rows if r["id"] not in first_200)
    e2e_ms = summary_ms(e2e)
    delivered_in_window = sum(1 for t in first_200.values() if w0 <= t < w1)
    drained = [first_200[i] for i in backlog_ids if i in first_200]
    drain_s = (max(drained) - backlog_wall) if drained else None
    cpu = m1["cpu_s"] - m0["cpu_s"]
    delivered = m1["delivered"] - m0["delivered"]
    seconds = m1["wall"] - m0["wall"]
    rec: dict[str, Any] = {
        "scenario": "webhooks", "monitors": m, "duration_s": opts.duration,
        "offered_per_s": rate,
        "queued_per_s": per(len(rows), opts.duration, 1),
        "delivered_per_s": per(delivered_in_window, opts.duration, 1),
        "held": ratio(delivered_in_window, len(rows)),
        "e2e_p50_ms": e2e_ms["p50"],
        "e2e_p99_ms": e2e_ms["p99"] if not undelivered else None,
        "e2e_ms": e2e_ms,
        "undelivered": undelivered,
        "cpu_s_per_delivery": per(cpu, delivered),
        "cpu_utilization": per(cpu, seconds, 3),
        "max_delivered_per_s": per(len(drained), drain_s, 1),
        "backlog": {"events": backlog, "delivered": len(drained),
                    "seconds": round(drain_s, 3) if drain_s else None,
                    "cpu_s_per_delivery": per(mb1["cpu_s"] - mb0["cpu_s"],
                                              mb1["delivered"] - mb0["delivered"])},
        "producer": produced,
        "probes_per_s": None, "cpu_s_per_probe": None, "lateness_ms": None,
        "rss_per_monitor_bytes": None, "error_rate": per(m1["tries"] - m0["tries"] - delivered,
                                                         m1["tries"] - m0["tries"], 6),
        "baseline_probes_per_s": None, "baseline_cpu_s_per_probe": None,
        "limit_per_s": None, "ratio_vs_limit": None, "ratio_vs_baseline": None,
    }
    if undelivered:
        b.notes.append(f"{undelivered} events queued in the window were not delivered within "
                       "10 s after it; e2e p99 is not reported")
    rec["targets"] = report.webhook_targets(rec)
    return rec


# -- api -------------------------------------------------------------------------------------------


async def _settle_history(conn: Any) -> None:
    """Vacuum the seeded rollups, as autovacuum has long done to a real 30-day history: the
    figures are index-only scans, which read the heap for pages not yet marked all-visible.
    The checkpoint first: the embedded server commits asynchronously, and VACUUM marks no
    page all-visible while the inserting commit is not yet flushed."""
    import asyncpg

    try:
        await conn.execute("CHECKPOINT")
    except asyncpg.InsufficientPrivilegeError:
        await asyncio.sleep(1.0)  # the WAL writer flushes within wal_writer_delay (200 ms)
    await conn.execute("VACUUM (ANALYZE) check_rollups_hourly")


CREATE_CONCURRENCY = 8  # the concurrency of create_monitor_rps and create_monitor_ms
CREATE_CONCURRENCIES = (1, CREATE_CONCURRENCY, 32)


async def _measure_creates(b: Bench, base: str, ports: Any, mark: Any) -> dict[str, Any]:
    """``POST /webapi/monitors`` from one account at concurrency 1, 8 and 32 (a fresh
    account each, monitors an hour apart so nothing is due), with the embedded server's
    fsync and synchronous commit on: a 201 means a durable commit, as in the service."""
    durable = await b.db.set_durable(True)
    if not durable:
        b.notes.append("creates measured on an external server, durable as it is configured")
    seconds = min(b.opts.duration, 10.0)
    out: dict[str, Any] = {"by_concurrency": {}, "errors": 0, "durable": durable or None}
    try:
        for c in CREATE_CONCURRENCIES:
            _account, token = await b.store.create_account(f"bench-create-{c}")
            b.progress.phase(f"api: POST /webapi/monitors at concurrency {c}", seconds)
            db0 = b.db.cpu_seconds()
            before = await mark(f"create-{c}-start")
            gen = await b.procs.spawn(
                f"creates-{c}", "loadgen",
                {"urls": [base + "/webapi/monitors"],
                 "headers": {"Authorization": f"Bearer {token}"},
                 "create_url_prefix": f"http://{layout.HEALTHY_HOSTS[0]}:{ports.ok}/c{c}/",
                 "create_fields": {"interval": 3600},
                 "concurrency": c, "duration_s": seconds}, b.other_cpus)
            try:
                res = await gen.expect("result", seconds + 60, tick=b.progress.tick)
            finally:
                await b.procs.stop(gen)
            after = await mark(f"create-{c}-end")
            db1 = b.db.cpu_seconds()
            lat = res["latency_ms"]
            n = res["requests"]
            out["by_concurrency"][str(c)] = {
                "rps": round(res["rps"] or 0.0, 1), "p50": lat["p50"], "p99": lat["p99"],
                "requests": n, "errors": res["errors"],
                # Includes the load generator's start-up and warm-up requests: an upper
                # bound, good for comparing runs.
                "api_cpu_s_per_create": per(after["cpu_s"] - before["cpu_s"], n),
                "db_cpu_s_per_create": per(db1 - db0, n) if db0 is not None and db1 else None}
            out["errors"] += res["errors"]
        out["apply"] = await _measure_apply(b, ports)
    finally:
        if durable:
            await b.db.set_durable(False)
    return out


async def _cli(b: Bench, *args: str, timeout: float = 120) -> tuple[float, float]:
    """Run ``upwatch ARGS`` against the bench database, pinned to the measured core, as an
    operator would beside the service; its wall time and CPU time (user + system) in
    seconds, start-up included. On a busy machine the CPU time is the steadier figure."""
    import resource

    from upwatch_bench.procs import pin_pid

    def children_cpu() -> float:
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        return ru.ru_utime + ru.ru_stime

    cpu0 = children_cpu()

    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env.update(UPWATCH_DATABASE_URL=b.db.dsn, UPWATCH_ALLOW_PRIVATE_TARGETS="true",
               UPWATCH_DATA_DIR=str(b.workdir / "cli"), UPWATCH_LOG_LEVEL="WARNING")
    t0 = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "engine", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    with contextlib.suppress(OSError):
        pin_pid(proc.pid, b.engine_cpus)
    try:
        _, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise BenchError(f"upwatch {args[0]} did not finish in {timeout:.0f} s") from None
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise BenchError(f"upwatch {' '.join(args[:1])}: exit {proc.returncode}: "
                         f"{err.decode(errors='replace')[-500:]}")
    return seconds, children_cpu() - cpu0


async def _measure_apply(b: Bench, ports: Any) -> dict[str, Any]:
    """``upwatch apply`` of a file of N monitors (10,000; --quick 1,000) to a fresh account,
    then of the same file again (nothing to write), then ``upwatch export``; wall seconds
    of each process, start-up included."""
    from engine.monitors.file import render_toml

    n = 1000 if b.opts.quick else 10_000
    account, _ = await b.store.create_account("bench-apply")
    doc = {"monitors": [
        {"key": f"site-{i}", "url": layout.monitor_url(i, ports), "alias": f"site {i}",
         "uptime": {"interval": 3600, "notification_threshold": 60},
         "certificate_health": {"interval": 86400, "expiry_threshold_days": 14,
                                "enabled": i % 2 == 0}}
        for i in range(n)]}
    path = b.workdir / "monitors.toml"
    path.write_text(render_toml(doc), encoding="utf-8")
    b.progress.phase(f"api: upwatch apply of {n:,} monitors", 10)
    first = await _cli(b, "apply", str(path), "--account", str(account.id))
    made = await b.store.count_monitors(account.id)
    if made != n:
        raise BenchError(f"upwatch apply made {made} monitors of {n}")
    b.progress.phase(f"api: upwatch apply of the same {n:,} monitors again", 3)
    again = await _cli(b, "apply", str(path), "--account", str(account.id))
    b.progress.phase(f"api: upwatch export of {n:,} monitors", 3)
    exported = await _cli(b, "export", "--account", str(account.id), str(b.workdir / "out.toml"))
    return {"monitors": n, "apply_s": round(first[0], 2),
            "reapply_unchanged_s": round(again[0], 2), "export_s": round(exported[0], 2),
            "apply_cpu_s": round(first[1], 2), "reapply_unchanged_cpu_s": round(again[1], 2),
            "export_cpu_s": round(exported[1], 2)}


async def _roll_phase_history(b: Bench, conn: Any) -> int:
    """The phase roll-up job over the seeded 30 days of raw results, as it would have run
    hour by hour (the same store method, from a progress mark 31 days back)."""
    from engine.db.rollups import GRACE

    await conn.execute("UPDATE phase_rollup_progress"
                       " SET rolled_until = date_trunc('hour', now(), 'UTC') - interval '31 days',"
                       " days_rolled_until = date_trunc('day', now(), 'UTC') - interval '31 days'")
    rolled = await b.store.roll_phase_timings(datetime.now(UTC), grace=GRACE, max_hours=800)
    await conn.execute("VACUUM (ANALYZE) check_phase_rollups_hourly, check_phase_rollups_daily")
    return rolled


async def scenario_api(b: Bench) -> dict[str, Any]:
    import aiohttp

    opts = b.opts
    m = opts.monitors
    ports = layout.pick_ports()  # URLs only: nothing is probed in this scenario
    account, token = await b.store.create_account("bench-api")
    today = date.today()
    b.progress.phase(f"seeding {m:,} monitors with 30 days of history", max(2.0, m / 200))
    await b.store.ensure_result_partitions(today - timedelta(days=31), 33)
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, account.id, layout.monitor_urls(m, ports), uptime=True,
                            certificate=True, interval=INTERVAL_S, period_days=31)
        ids = [r["id"] for r in await conn.fetch(
            "SELECT id FROM monitors WHERE account_id = $1 ORDER BY id", account.id)]
        stats_monitor = ids[0]
        stats_check = await conn.fetchval(
            "SELECT id FROM checks WHERE monitor_id = $1 AND kind = 'uptime'", stats_monitor)
        history = await seed_history(conn, account.id, stats_check, days=30)
        history["phase_hours_rolled"] = await _roll_phase_history(b, conn)
        await _settle_history(conn)

    port = layout.free_port(layout.API_HOST)
    base = f"http://{layout.API_HOST}:{port}"
    cprofile_dir = os.environ.get("UPWATCH_BENCH_CPROFILE")
    if cprofile_dir:
        os.makedirs(cprofile_dir, exist_ok=True)
    server = await b.procs.spawn(
        "apiserver", "apiserver",
        {"dsn": b.db.dsn, "host": layout.API_HOST, "port": port,
         # A plan limit above what the create runs make (the default stops at 10,000).
         "settings": b.settings(rate_limit_per_second=0, base_url=base, port=port,
                                plans={"default": {"monitor_limit": 1_000_000}}),
         "cprofile": cprofile_dir},
        b.engine_cpus)
    await server.expect("ready", 60)
    auth = f"Bearer {token}"
    # Fail early, with the API's own words, if a request does not work at all.
    async with aiohttp.ClientSession(headers={"Authorization": auth}) as session:
        for path in (f"/webapi/monitors/{stats_monitor}", "/webapi/monitors",
                     f"/webapi/monitors/{stats_monitor}/statistics"):
            async with session.get(base + path) as resp:
                if resp.status != 200:
                    raise BenchError(f"GET {path}: {resp.status} {(await resp.text())[:300]}")

    async def mark(tag: str) -> dict[str, Any]:
        server.send(cmd="mark", tag=tag)
        return await server.expect("mark", 30)

    db_cpu: dict[str, float | None] = {}

    async def load(path_or_script: Any, connections: int, label: str) -> tuple[float, int, float]:
        """(requests per second, errors, API CPU s per request) of one load run; the
        database's CPU per request goes into ``db_cpu``."""
        b.progress.phase(label, opts.duration)
        what = "get" if isinstance(path_or_script, Path) else "list"
        db0 = b.db.cpu_seconds()
        before = await mark(f"{what}-start")
        if isinstance(path_or_script, Path):
            tool = await run_wrk(b.procs, base + "/", seconds=opts.duration,
                                 connections=connections, cpus=b.other_cpus,
                                 headers=[f"Authorization: {auth}"], script=path_or_script)
        else:
            tool = await run_wrk(b.procs, base + path_or_script, seconds=opts.duration,
                                 connections=connections, cpus=b.other_cpus,
                                 headers=[f"Authorization: {auth}"])
        if tool is not None:
            after = await mark(f"{what}-end")
            db1 = b.db.cpu_seconds()
            db_cpu[what] = per(db1 - db0, tool.operations) if db0 is not None and db1 else None
            db_cpu[what + "_client"] = per(tool.cpu_s, tool.operations)
            rps = tool.per_s or 0.0
            return rps, tool.errors, per(after["cpu_s"] - before["cpu_s"], tool.operations) or 0.0
        # No wrk: the aiohttp load generator in another process.
        urls = ([f"{base}/webapi/monitors/{i}" for i in ids]
                if isinstance(path_or_script, Path) else [base + path_or_script])
        gen = await b.procs.spawn("loadgen", "loadgen",
                                  {"urls": urls, "headers": {"Authorization": auth},
                                   "concurrency": connections, "duration_s": opts.duration},
                                  b.other_cpus)
        try:
            res = await gen.expect("result", opts.duration + 60, tick=b.progress.tick)
        finally:
            await b.procs.stop(gen)
        after = await mark(f"{what}-end")
        return (res["rps"] or 0.0, res["errors"],
                per(after["cpu_s"] - before["cpu_s"], res["requests"]) or 0.0)

    script = write_id_script(b.workdir / "monitor_ids.lua", "/webapi/monitors/", ids)
    get_rps, get_errors, get_cpu = await load(script, 32, "api: GET /webapi/monitors/{id}")
    list_rps, list_errors, list_cpu = await load("/webapi/monitors", 4, "api: GET /webapi/monitors")
    async def one_at_a_time(name: str, what: str, path: str) -> dict[str, Any]:
        """Latency of ``path`` requested one at a time (the load generator's result)."""
        b.progress.phase(f"api: {what} latency, one request at a time", opts.duration)
        gen = await b.procs.spawn(
            name, "loadgen",
            {"urls": [f"{base}/webapi/monitors/{stats_monitor}/{path}"],
             "headers": {"Authorization": auth}, "concurrency": 1, "duration_s": opts.duration,
             "max_requests": 5000}, b.other_cpus)
        try:
            result: dict[str, Any] = await gen.expect(
                "result", opts.duration + 60, tick=b.progress.tick)
        finally:
            await b.procs.stop(gen)
        return result

    stats = await one_at_a_time("statistics", "statistics", "statistics")
    timings = await one_at_a_time("timings", "timings (30 days)", "timings?period=30d")
    creates = await _measure_creates(b, base, ports, mark)
    by_c = creates["by_concurrency"]
    from upwatch_bench.limits import wrk_available

    rec: dict[str, Any] = {
        "scenario": "api", "monitors": m, "duration_s": opts.duration,
        "get_monitor_rps": round(get_rps, 1),
        "list_monitors_rps": round(list_rps, 1),
        "statistics_ms": {"p50": stats["latency_ms"]["p50"], "p99": stats["latency_ms"]["p99"]},
        "statistics_requests": stats["requests"],
        "timings_ms": {"p50": timings["latency_ms"]["p50"],
                       "p99": timings["latency_ms"]["p99"]},
        "timings_requests": timings["requests"],
        "cpu_s_per_get": get_cpu, "cpu_s_per_list": list_cpu,
        "db_cpu_s_per_get": db_cpu.get("get"), "db_cpu_s_per_list": db_cpu.get("list"),
        "load_tool_cpu_s_per_get": db_cpu.get("get_client"),
        "create_monitor_rps": by_c[str(CREATE_CONCURRENCY)]["rps"],
        "create_monitor_ms": {k: by_c[str(CREATE_CONCURRENCY)][k] for k in ("p50", "p99")},
        "create_monitor_by_concurrency": by_c,
        "create_monitor_durable": creates["durable"],
        "apply": creates["apply"],
        "errors": get_errors + list_errors + stats["errors"] + timings["errors"]
                  + creates["errors"],
        "load_tool": "wrk" if wrk_available() else "aiohttp load generator",
        "history": history,
        "probes_per_s": None, "cpu_s_per_probe": None, "lateness_ms": None,
        "rss_per_monitor_bytes": None, "error_rate": None,
        "baseline_probes_per_s": None, "baseline_cpu_s_per_probe": None,
        "limit_per_s": None, "ratio_vs_limit": None, "ratio_vs_baseline": None,
    }
    rec["targets"] = report.api_targets(rec)
    return rec


# -- entry ---------------------------------------------------------------------------------------


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; everything the run started has been stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


async def _run(opts: Options, progress: Progress) -> dict[str, Any]:
    """One scenario run. SIGINT and SIGTERM cancel it once (a second signal is ignored so the
    cleanup, bounded in time, is not cut short): children, database and files are released
    on the way out either way."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if not received:
            received.append(signum)
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        return await _scenario(opts, progress)
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


async def _scenario(opts: Options, progress: Progress) -> dict[str, Any]:
    async with Bench(opts, progress) as b:
        if opts.scenario == "http" and opts.assertions:
            from upwatch_bench.scenarios.assertions import scenario_assertions

            rec = await scenario_assertions(b, opts.assertions)
        elif opts.scenario == "webhooks":
            rec = await scenario_webhooks(b)
        elif opts.scenario == "notify":
            from upwatch_bench.scenarios.notify import scenario_notify

            rec = await scenario_notify(b)
        elif opts.scenario == "api":
            rec = await scenario_api(b)
        elif opts.scenario == "internet":
            from upwatch_bench.scenarios.internet import scenario_internet

            rec = await scenario_internet(b)
        else:
            rec = await scenario_engine(b)
        # What ran: compiled hot path or pure Python (engine/runtime/compiled.py), and whether any
        # compiled module is older than its source (figures of code no longer there).
        compiled = compiled_modules()
        rec["compiled"] = all(compiled.values())
        if not rec["compiled"]:
            b.notes.append("the hot path runs as pure Python: "
                           + ", ".join(n for n, c in compiled.items() if not c))
        stale = stale_modules()
        if stale:
            b.notes.append("compiled modules older than their source (rebuild with "
                           "pip install -e .): " + ", ".join(stale))
        rec["notes"] = b.notes
        # The engine's polling interval under load (engine/probes/reactor.py), as it ran.
        from engine.runtime.settings import Settings

        batch = opts.probe_batch_ms
        rec["probe_batch_ms"] = (
            batch if batch is not None else Settings.model_fields["probe_batch_ms"].default)
        rec["cores"] = {"engine": sorted(b.engine_cpus), "others": sorted(b.other_cpus)}
        rec["load_average"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        return rec


def run(args: argparse.Namespace) -> int:
    """Entry of ``upwatch bench``; returns the exit code."""
    import uvloop

    if args.scenario not in SCENARIOS:
        sys.stderr.write(f"upwatch bench: unknown scenario {args.scenario!r}\n")
        return 2
    try:
        opts = Options.from_args(args)
    except BenchError as exc:
        sys.stderr.write(f"upwatch bench: {exc}\n")
        return 2
    # The bench's own progress line says what happens; the store's INFO lines (embedded
    # server started, migration applied) would only interleave with it.
    logging.getLogger("engine").setLevel(logging.WARNING)
    progress = Progress()
    try:
        rec = uvloop.run(_run(opts, progress))
    except (KeyboardInterrupt, Interrupted) as exc:
        progress.clear()
        sys.stderr.write("upwatch bench: interrupted; everything it started is stopped\n")
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except (BenchError, ChildFailed, RuntimeError, OSError) as exc:
        progress.clear()
        sys.stderr.write(f"upwatch bench: {exc}\n")
        return 1
    progress.clear()
    rec = clean(rec)
    if opts.json:
        sys.stdout.write(orjson.dumps(rec).decode() + "\n")
    else:
        sys.stdout.write(report.table(rec) + "\n")
    sys.stdout.flush()
    return 0
