"""The harness every scenario runs in: one run's resources and the measured runs of its
children, with the figures read from them.

The parent process only orchestrates: it pins itself (and so the embedded database it
starts) to the cores the engine does not use, starts the targets, seeds the database, runs
each measured component in its own child pinned to the engine core, one after the other,
and reads the database between runs.

- :class:`Bench`: work directory, processes, database and store of a run (async context);
  its targets, DNS server and the settings of the measured components.
- :class:`Window`, :func:`load_window`, :func:`capacity_window`: what one measured run is.
- :func:`run_engine`, :func:`run_baseline`, :func:`run_inflight`: one child measured
  (upwatch_bench/roles/), with the opt-in tracers attached (upwatch_bench/tracers/).
- :func:`engine_figures`, :func:`baseline_figures`, :func:`dns_figures`,
  :func:`row_lateness`, :func:`rows_in_window`: figures from a child's result and from the
  result rows.

The harness imports no scenario: :mod:`upwatch_bench.scenarios` is the registry of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from cryptography.fernet import Fernet

from upwatch_bench import layout
from upwatch_bench.certs import CertFiles, make_certs
from upwatch_bench.database import BenchDatabase, seed_monitors
from upwatch_bench.options import BenchError, Options
from upwatch_bench.procs import Child, Procs
from upwatch_bench.stats import Progress, per, summary_ms
from upwatch_bench.tracers import callgrind, kernelprof, pyspy

INTERVAL_S = 30  # the monitors' configured interval (the API's shortest)

__all__ = ["INTERVAL_S", "Bench", "BenchError", "Options", "Window"]


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
        self.db = BenchDatabase(self.workdir, external=opts.database_url)
        self.kernel_tracing = kernelprof.KernelTracing(
            perf=opts.perf_dir, strace=opts.strace_dir, callgraph=opts.perf_callgraph)
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

    def describe(self, rec: dict[str, Any]) -> None:
        """Add to a scenario's record what ran: the compiled hot path or pure Python
        (engine/runtime/compiled.py) and whether any compiled module is older than its
        source (figures of code no longer there), the engine's polling interval under load
        (engine/probes/reactor.py), the notes, the cores and the load average."""
        from engine.runtime.compiled import compiled_modules, stale_modules
        from engine.runtime.settings import Settings

        compiled = compiled_modules()
        rec["compiled"] = all(compiled.values())
        if not rec["compiled"]:
            self.notes.append("the hot path runs as pure Python: "
                              + ", ".join(n for n, c in compiled.items() if not c))
        stale = stale_modules()
        if stale:
            self.notes.append("compiled modules older than their source (rebuild with "
                              "pip install -e .): " + ", ".join(stale))
        rec["notes"] = self.notes
        batch = self.opts.probe_batch_ms
        rec["probe_batch_ms"] = (
            batch if batch is not None else Settings.model_fields["probe_batch_ms"].default)
        rec["cores"] = {"engine": sorted(self.engine_cpus), "others": sorted(self.other_cpus)}
        rec["load_average"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None

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



def cprofile_path(b: Bench, w: Window) -> str | None:
    """``--cprofile DIR``: the pstats file of this window in DIR (None without the flag)."""
    out_dir = b.opts.cprofile_dir
    if out_dir is None:
        return None
    out_dir.mkdir(parents=True, exist_ok=True)
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")
    return str(out_dir / f"{b.opts.scenario}-{name}.pstats")


def load_window(b: Bench, name: str) -> Window:
    return Window(name, b.opts.warmup, b.opts.duration, b.opts.time_scale)


def capacity_window(b: Bench, name: str, demand_per_s: float) -> Window:
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


def profile_window(b: Bench, child: Child, w: Window) -> asyncio.Task[Any] | None:
    """With ``--profile DIR``: py-spy over the child's measured window (it starts
    ``warmup`` seconds after the child said ``loaded``)."""
    out_dir = b.opts.profile_dir
    if out_dir is None:
        return None
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")

    async def go() -> Any:
        await asyncio.sleep(w.warmup)
        return await pyspy.record(
            b.procs, child.pid, w.duration, out_dir / f"{b.opts.scenario}-{name}.txt",
            b.other_cpus, native=b.opts.profile_native)

    return asyncio.create_task(go())


def kernel_trace(b: Bench, pid: int, seconds: float, name: str, *,
                  delay: float = 0.0) -> tuple[str, asyncio.Task[Any] | None]:
    """With ``--perf DIR`` or ``--strace DIR``: perf or strace over ``pid``
    for ``seconds``, ``delay`` seconds from now (upwatch_bench/tracers/kernelprof.py)."""
    b.seq += 1
    stem = f"{b.opts.scenario}-{b.seq:02d}-" + "".join(
        c if c.isalnum() else "-" for c in name).strip("-")
    if not b.kernel_tracing.enabled:
        return stem, None

    async def go() -> None:
        await asyncio.sleep(delay)
        await kernelprof.trace(b.kernel_tracing, b.procs, pid, seconds, stem, b.other_cpus)

    return stem, asyncio.create_task(go())


async def finish_profile(task: asyncio.Task[Any] | None) -> None:
    if task is not None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 120)


async def run_engine(b: Bench, w: Window, *, write_capacity_s: float = 0.0,
                      dns_warm_s: float | None = None,
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
           "write_capacity_s": write_capacity_s,
           "cprofile": cprofile_path(b, w), "callgrind": cg_out is not None,
           "slices": slices, "dns_prewarm": dns_prewarm}
    child = await b.procs.spawn("engine", "engine", cfg, b.engine_cpus,
                                prefix=callgrind.wrapper(cg_out) if cg_out else None)
    try:
        await b.wait(child, "loaded", f"{w.name}: loading {b.opts.monitors:,} checks", 5, 300)
        prof = profile_window(b, child, w)
        kstem, ktrace = kernel_trace(b, child.pid, w.duration, w.name,
                                      delay=w.warmup + dns_warm_s)
        res = await b.wait(child, "result", f"{w.name}: measuring",
                           w.warmup + w.duration + write_capacity_s + 2 + dns_warm_s,
                           slack=600.0 if cg_out else 60.0)
        await finish_profile(prof)
        if ktrace is not None:
            await finish_profile(ktrace)
            kernelprof.note(b.kernel_tracing, kstem, probes=sum(res["probes"].values()),
                            seconds=res["seconds"], cpu_s=res["cpu_s"],
                            user_s=res.get("user_s"), sys_s=res.get("sys_s"))
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
    """``--callgrind DIR``: the callgrind output file of this engine window."""
    out_dir = b.opts.callgrind_dir
    if out_dir is None:
        return None
    if not callgrind.available():
        raise BenchError("--callgrind needs valgrind (Debian: apt-get install valgrind)")
    out_dir.mkdir(parents=True, exist_ok=True)
    b.seq += 1
    name = w.name.replace(" ", "-").replace(",", "").replace("%", "pct")
    return (out_dir / f"{b.opts.scenario}-{b.seq:02d}-{name}.callgrind").resolve()


async def run_baseline(b: Bench, w: Window, ports: layout.Ports, *, tls: bool,
                        mixed: bool) -> dict[str, Any]:
    cfg = {"monitors": b.opts.monitors, "ports": ports.to_dict(), "tls": tls, "mixed": mixed,
           "dns_server": b.dns_address, "interval_s": w.interval, "warmup_s": w.warmup,
           "duration_s": w.duration,
           "timeout_s": b.settings()["probe_timeout"],
           "cafile": str(b.cert_files().ca) if tls else None}
    child = await b.procs.spawn("baseline", "baseline", cfg, b.engine_cpus)
    try:
        await b.wait(child, "loaded", f"{w.name}: one task per monitor", 5, 300)
        prof = profile_window(b, child, w)
        res = await b.wait(child, "result", f"{w.name}: measuring", w.warmup + w.duration)
        await finish_profile(prof)
        return res
    finally:
        await b.procs.stop(child)


async def run_inflight(b: Bench, ports: layout.Ports, role: str) -> dict[str, Any]:
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


async def rows_in_window(b: Bench, wall0: float, wall1: float) -> int:
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


async def row_lateness(b: Bench, wall0: float, wall1: float,
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


def engine_figures(res: dict[str, Any], kind: str) -> dict[str, Any]:
    probes = res["probes"]
    total = sum(v for k, v in probes.items() if k.startswith(kind + ","))
    ok = probes.get(f"{kind},ok", 0.0)
    extra = {}
    if res.get("instructions_per_probe") is not None:  # --callgrind
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


def baseline_figures(base: dict[str, Any]) -> dict[str, Any]:
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


async def point_monitors(b: Bench, account_id: int, urls: list[str]) -> None:
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


async def seed_uptime(b: Bench, account: str, urls: list[str]) -> None:
    """A new account named ``account`` with a monitor per URL, each with its uptime check
    at ``INTERVAL_S``; the result partitions from yesterday on."""
    acct, _ = await b.store.create_account(account)
    await b.store.ensure_result_partitions(date.today() - timedelta(days=1), 3)
    async with b.store.pool.acquire() as conn:
        await seed_monitors(conn, acct.id, urls, uptime=True, certificate=False,
                            interval=INTERVAL_S)


def dns_figures(res: dict[str, Any], count: dict[str, Any] | int,
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
