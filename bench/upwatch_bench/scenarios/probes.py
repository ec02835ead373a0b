"""``upwatch bench http | tls | mixed``: the engine probing local targets, side by side with
the naive baseline and the limit tool (``wrk``, ``openssl s_time``).

``http``   N uptime checks (10,000) at 30 s against plain-HTTP targets; the naive baseline
           on the same URLs; ``wrk -H 'Connection: close'``; results-path capacity.
           ``--names``: by host name (upwatch_bench/scenarios/names.py); ``--assertions``:
           upwatch_bench/scenarios/assertions.py.
``tls``    N certificate checks (10,000) at 30 s against TLS targets; the baseline does
           verified HTTPS GETs; ``openssl s_time -new``; memory per in-flight HTTPS probe.
``mixed``  N uptime checks, run twice: all healthy, then 10% slow/hanging/refusing;
           healthy probes' lateness compared between the two.
"""

from __future__ import annotations

import asyncio
import statistics
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlsplit

from upwatch_bench import layout, report
from upwatch_bench.database import seed_monitors
from upwatch_bench.harness import (
    INTERVAL_S,
    Bench,
    Window,
    baseline_figures,
    capacity_window,
    dns_figures,
    engine_figures,
    finish_profile,
    kernel_trace,
    load_window,
    row_lateness,
    rows_in_window,
    run_baseline,
    run_engine,
    run_inflight,
)
from upwatch_bench.limits import ToolRun, run_s_time, run_wrk
from upwatch_bench.scenarios.names import names_cost, names_pair, pair_orders
from upwatch_bench.stats import per, ratio
from upwatch_bench.tracers import kernelprof

LIMIT_PAIRS = 2  # engine-at-capacity / limit-tool pairs, adjacent in time (1 with --quick)


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
    load = load_window(b, "engine")
    rec: dict[str, Any] = {"scenario": sc, "monitors": n, "duration_s": opts.duration,
                           "interval_s": load.interval, "time_scale": load.time_scale}
    if names:
        rec.update(names=True, dns_latency_s=opts.dns_latency, dns_ttl_s=opts.dns_ttl)
        b.by_names = True
    if opts.names_cost is not None:
        return await names_cost(b, account.id, ports, rec)

    # 1. The engine at the scheduled load (N monitors at 30 s, x time scale).
    if names:
        # The window starts after one whole interval: every name was looked up once by
        # then (a cold cache is the start, not the steady state the figures describe).
        load = Window(load.name, max(load.warmup, load.interval + 1.0), load.duration,
                      load.time_scale)
        rec["warmup_s"] = load.warmup
    res = await run_engine(b, load, write_capacity_s=(1.5 if opts.quick else 5.0)
                            if sc == "http" else 0.0)
    fig = engine_figures(res, kind)
    rec.update(fig)
    if names:
        rec.update(dns_figures(res, await b.dns_count(res["wall_start"], res["wall_end"]),
                                opts.dns_ttl))
    rec["held"] = per(fig["probes"], n * res["seconds"] / load.interval, 4)
    rec["rows_per_s"] = per(await rows_in_window(b, res["wall_start"], res["wall_end"]),
                            res["seconds"], 1)
    cap = res.get("write_capacity") or {}
    rec["rows_capacity_per_s"] = cap.get("rows_per_s")
    rec["rows_capacity_cpu_s_per_row"] = cap.get("cpu_s_per_row")
    groups = await row_lateness(b, res["wall_start"], res["wall_end"], load.interval)
    rec["lateness_rows_ms"] = groups["healthy"]["lateness_ms"]

    if sc == "mixed":
        # 1b. The same monitors again, every tenth now hostile.
        await _switch_to_hostile(b, account.id, ports)
        hostile_w = load_window(b, "engine, 10% hostile")
        res2 = await run_engine(b, hostile_w)
        fig2 = engine_figures(res2, kind)
        groups2 = await row_lateness(b, res2["wall_start"], res2["wall_end"], load.interval)
        rec.update(fig2)
        rec["held"] = per(fig2["probes"], n * res2["seconds"] / load.interval, 4)
        rec["rows_per_s"] = per(await rows_in_window(b, res2["wall_start"], res2["wall_end"]),
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
    base = baseline_figures(await run_baseline(b, load_window(b, "baseline"), ports,
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
        cap_w = capacity_window(b, "engine at capacity", demand)
        for i in range(1 if opts.quick else LIMIT_PAIRS):
            which = "" if opts.quick else f" ({i + 1} of {LIMIT_PAIRS})"
            if names:
                # The same targets by IP literal beside each names window, the order turning
                # each pair (literals, names, names, literals, ...), the same probes in flight.
                nfig, lfig = await names_pair(b, account.id, ports, i, demand, which)
                cap_runs.append(nfig)
                literal_runs.append(lfig)
            else:
                cap_runs.append(engine_figures(await run_engine(
                    b, capacity_window(b, "engine at capacity" + which, demand)), kind))
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
            if "instructions_per_probe" in literal_runs[0]:  # --callgrind
                rec["literals_capacity_runs_instructions_per_probe"] = [
                    c.get("instructions_per_probe") for c in literal_runs]
            rec["names_cost_vs_literals_pairs"] = cost
            good = [c for c in cost if c is not None]
            rec["names_cost_vs_literals"] = round(statistics.median(good), 3) if good else None
            rec["names_vs_literals_order"] = pair_orders(len(literal_runs))
            rec["names_vs_literals_in_flight_mean"] = [
                [c.get("in_flight_mean"), lit.get("in_flight_mean")]
                for c, lit in zip(cap_runs, literal_runs, strict=True)]
        if "instructions_per_probe" in cfig:  # --callgrind
            rec["capacity"]["runs_instructions_per_probe"] = [
                c.get("instructions_per_probe") for c in cap_runs]
        bcap = baseline_figures(await run_baseline(
            b, capacity_window(b, "baseline at capacity", demand), ports, tls=tls,
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
        inflight = await run_inflight(b, ports, "inflight")
        rec["https_inflight_bytes"] = inflight["bytes_per_probe"]
        rec["https_inflight_detail"] = inflight
        base_inflight = await run_inflight(b, ports, "baseline_inflight")
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
        stem, task = kernel_trace(b, pid, limit_s - 1, "wrk" + which)
        traces.append(task)

    tool = await run_wrk(b.procs, f"http://{host0}:{ports.ok}/", seconds=limit_s,
                         connections=50, cpus=b.engine_cpus,
                         headers=["Connection: close"], on_start=started)
    for task in traces:
        if task is not None:
            await finish_profile(task)
            if tool is not None:
                kernelprof.note(b.kernel_tracing, stem, requests=tool.operations,
                                seconds=tool.seconds, cpu_s=tool.cpu_s, user_s=tool.user_s,
                                sys_s=tool.sys_s)
    return tool

