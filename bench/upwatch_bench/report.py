"""What a scenario run reports: the JSON record's targets and the readable table.

Every record carries the common keys (null where a figure does not apply to the
scenario or a tool is absent) and a ``targets`` list: each target with the figure it is
judged on and whether it is met, so a reader of either form sees at once where the engine
stands. Ratios are per CPU second (see :mod:`upwatch_bench.limits`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# Keys every record holds, in the order they are printed.
COMMON_KEYS = (
    "scenario", "monitors", "duration_s", "probes_per_s", "cpu_s_per_probe", "lateness_ms",
    "rss_per_monitor_bytes", "error_rate", "baseline_probes_per_s", "baseline_cpu_s_per_probe",
    "limit_per_s", "ratio_vs_limit", "ratio_vs_baseline",
)


def target(name: str, value: float | None, op: str, bound: float, unit: str = "") -> dict[str, Any]:
    """One target: ``value op bound`` (op one of <, <=, >=, ==); met is None without a value."""
    ops: dict[str, Callable[[float, float], bool]] = {
        "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">=": lambda a, b: a >= b, "==": lambda a, b: a == b,
    }
    met = None if value is None else ops[op](value, bound)
    return {"name": name, "value": value, "op": op, "bound": bound, "unit": unit, "met": met}


def _lat(d: dict[str, Any] | None, key: str) -> float | None:
    return None if not d else d.get(key)


def engine_targets(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """Targets of the http, tls and mixed scenarios (issues 3 and 7). In the mixed scenario
    the general targets are judged on the healthy probes: hostile ones must fail, and the
    per-host limit must hold them back."""
    scenario = rec["scenario"]
    mixed = scenario == "mixed"
    lateness = rec.get("healthy_lateness_ms") if mixed else rec.get("lateness_ms")
    which = "healthy " if mixed else ""
    out = [
        target(f"{which}probe error rate", rec.get("error_rate"), "==", 0.0),
        target(f"{which}scheduler lateness p99", _lat(lateness, "p99"), "<", 100.0, "ms"),
        target(f"{which}probes held (done / scheduled)",
               rec.get("healthy_held") if mixed else rec.get("held"), ">=", 0.98),
        target("engine CPU (cores)", rec.get("cpu_utilization"), "<", 1.0),
    ]
    if scenario == "http":
        out += [
            target("vs baseline, per CPU s at load", rec.get("ratio_vs_baseline"),
                   ">=", 3.0, "x"),
            target("vs baseline, per CPU s at capacity",
                   rec.get("capacity_ratio_vs_baseline"), ">=", 3.0, "x"),
            target("vs wrk Connection: close, per CPU s", rec.get("ratio_vs_limit"), ">=", 0.5,
                   "x"),
        ]
    if scenario == "http":
        out += [
            target("RSS per idle scheduled monitor", rec.get("rss_per_monitor_bytes"), "<", 1024,
                   "B"),
            target("result rows written (capacity)", rec.get("rows_capacity_per_s"), ">=",
                   20_000, "/s"),
        ]
    if rec.get("names"):
        out += [
            target("names vs IP literals, CPU per probe at capacity",
                   rec.get("names_cost_vs_literals"), "<=", 1.15, "x"),
            # Two record types: the bench's engine has no source address, so it asks A and
            # AAAA (the family policy).
            target("DNS questions per probe (one per name, type and TTL)",
                   rec.get("dns_queries_per_probe"), "<=",
                   round(2 * rec.get("interval_s", 30.0) / max(1.0, rec.get("dns_ttl_s", 300)),
                         4)),
            target("most DNS questions for one name and type in the window (one per TTL)",
                   rec.get("dns_most_queries_per_name_type"), "<=",
                   rec.get("dns_queries_allowed_per_name_type") or 1),
            target("RSS per idle monitor by name, cache entry included (end of window)",
                   rec.get("rss_end_per_monitor_bytes"), "<=", 1024, "B"),
        ]
    if scenario == "tls":
        out += [
            target("vs openssl s_time -new, per CPU s", rec.get("ratio_vs_limit"), ">=", 0.9, "x"),
            target("RSS per in-flight HTTPS probe", rec.get("https_inflight_bytes"), "<=",
                   100_000, "B"),
        ]
    if scenario == "mixed":
        out += [
            target("healthy p99 lateness, hostile/clean", rec.get("healthy_p99_ratio"), "<", 2.0,
                   "x"),
        ]
    return out


def webhook_targets(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        target("deliveries per second (backlog drain)", rec.get("max_delivered_per_s"), ">=",
               1000, "/s"),
        target("delivered / queued at the offered rate", rec.get("held"), ">=", 0.98),
        target("end-to-end p99", rec.get("e2e_p99_ms"), "<", 1000, "ms"),
        target("deliverer CPU (cores)", rec.get("cpu_utilization"), "<", 1.0),
    ]


def api_targets(rec: dict[str, Any]) -> list[dict[str, Any]]:
    stats = rec.get("statistics_ms") or {}
    apply = rec.get("apply") or {}
    return [
        target("GET /webapi/monitors/{id}", rec.get("get_monitor_rps"), ">=", 2000, "req/s"),
        target("statistics p99 (30 days of history)", stats.get("p99"), "<", 50, "ms"),
        target("POST /webapi/monitors, concurrency 8, durable",
               rec.get("create_monitor_rps"), ">=", 1000, "req/s"),
        target(f"upwatch apply, {apply.get('monitors', 0):,} monitors",
               apply.get("apply_s"), "<=", 10, "s"),
        target("upwatch apply, the same file again", apply.get("reapply_unchanged_s"),
               "<=", 2, "s"),
        target("timings p99 (30 days of history)", (rec.get("timings_ms") or {}).get("p99"),
               "<", 50, "ms"),
        target("API error responses", rec.get("errors"), "==", 0),
    ]


# -- the table ------------------------------------------------------------------------------


def fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if v == 0:
            text = "0"
        elif abs(v) >= 100:
            text = f"{v:,.0f}"
        elif abs(v) >= 1:
            text = f"{v:.2f}"
        elif abs(v) >= 0.001:
            text = f"{v:.4f}"
        else:
            text = f"{v * 1e6:.1f} us" if unit == "s" else f"{v:.2e}"
            return text
    elif isinstance(v, int):
        text = f"{v:,}"
    else:
        text = str(v)
    return f"{text} {unit}".rstrip() if unit and unit != "s" else text


def lat_text(d: dict[str, Any] | None) -> str:
    if not d or d.get("p50") is None:
        return "-"
    return f"{d['p50']:.1f}/{d['p99']:.1f}/{d['max']:.0f} ms"


def targets_text(targets: list[dict[str, Any]]) -> list[str]:
    lines = ["  targets:"]
    for t in targets:
        mark = {True: "met   ", False: "MISSED", None: "n/a   "}[t["met"]]
        value = fmt(t["value"])
        lines.append(f"    [{mark}] {t['name']}: {value} (target {t['op']} "
                     f"{fmt(t['bound'])}{(' ' + t['unit']) if t['unit'] else ''})")
    return lines


def table(rec: dict[str, Any]) -> str:
    """A readable block for one record."""
    sc = rec["scenario"]
    head = (f"== upwatch bench {sc}: {rec['monitors']:,} monitors, "
            f"{rec['duration_s']:g} s measured")
    if rec.get("interval_s"):
        head += f", interval {rec['interval_s']:g} s"
    if "compiled" in rec:
        head += ", hot path " + ("compiled" if rec["compiled"] else "pure Python")
    if rec.get("probe_batch_ms") is not None:
        head += f", probe batches {rec['probe_batch_ms']:g} ms"
    lines = [head + " =="]
    if sc in ("http", "tls", "mixed"):
        def row(label: str, a: Any, b: Any, c: Any) -> None:
            lines.append(f"  {label:<30}{a:>24}{b:>24}{c:>24}")

        tool = rec.get("limit_tool") or "limit"
        row("", "engine", "naive baseline", tool)
        row("probes per second", fmt(rec.get("probes_per_s")),
            fmt(rec.get("baseline_probes_per_s")), fmt(rec.get("limit_per_s")))
        row("CPU seconds per probe", fmt(rec.get("cpu_s_per_probe"), "s"),
            fmt(rec.get("baseline_cpu_s_per_probe"), "s"),
            fmt(rec.get("limit_cpu_s_per_op"), "s"))
        row("probes per CPU second", fmt(rec.get("probes_per_cpu_s")),
            fmt(rec.get("baseline_probes_per_cpu_s")), fmt(rec.get("limit_per_cpu_s")))
        cap, bcap = rec.get("capacity") or {}, rec.get("baseline_capacity") or {}
        if cap:
            row("at capacity: probes per s", fmt(cap.get("probes_per_s")),
                fmt(bcap.get("probes_per_s")), fmt(rec.get("limit_per_s")))
            row("at capacity: per CPU second", fmt(cap.get("probes_per_cpu_s")),
                fmt(bcap.get("probes_per_cpu_s")), fmt(rec.get("limit_per_cpu_s")))
        row("lateness p50 / p99 / max", lat_text(rec.get("lateness_ms")),
            lat_text(rec.get("baseline_lateness_ms")), "")
        row("RSS per scheduled monitor", fmt(rec.get("rss_per_monitor_bytes"), "B"),
            fmt(rec.get("baseline_rss_per_monitor_bytes"), "B"), "")
        row("probe error rate", fmt(rec.get("error_rate")),
            fmt(rec.get("baseline_error_rate")), "")
        if sc == "tls":
            row("RSS per in-flight HTTPS probe", fmt(rec.get("https_inflight_bytes"), "B"),
                fmt(rec.get("baseline_https_inflight_bytes"), "B"), "")
        lines.append(f"  {'result rows written':<30}{fmt(rec.get('rows_per_s')):>22} /s"
                     f"   capacity {fmt(rec.get('rows_capacity_per_s'))} rows/s")
        lines.append(f"  {'engine CPU (cores)':<30}{fmt(rec.get('cpu_utilization')):>22}"
                     f"   load {fmt(rec.get('load_s'))} s")
        lines.append(f"  ratio vs baseline (per CPU s): {fmt(rec.get('ratio_vs_baseline'))}x"
                     f" at load, {fmt(rec.get('capacity_ratio_vs_baseline'))}x at capacity;"
                     f" vs limit: {fmt(rec.get('ratio_vs_limit'))}x")
        pairs = rec.get("ratio_vs_limit_pairs") or []
        if len(pairs) > 1:
            lines.append("  vs limit, each adjacent pair (engine at capacity, then the tool): "
                         + ", ".join(f"{fmt(r)}x" for r in pairs) + " (median above)")
        if sc == "mixed":
            clean_lat = lat_text(rec.get("reference_lateness_ms"))
            hostile_lat = lat_text(rec.get("healthy_lateness_ms"))
            lines.append(f"  healthy lateness clean:   {clean_lat}")
            lines.append(f"  healthy lateness hostile: {hostile_lat}"
                         f"   (p99 ratio {fmt(rec.get('healthy_p99_ratio'))}x)")
            lines.append(f"  hostile probe error rate: {fmt(rec.get('hostile_error_rate'))}")
    elif sc == "webhooks":
        for label, key, unit in (
            ("offered rate", "offered_per_s", "/s"), ("queued", "queued_per_s", "/s"),
            ("delivered", "delivered_per_s", "/s"),
            ("delivered (backlog drain)", "max_delivered_per_s", "/s"),
            ("end-to-end p50", "e2e_p50_ms", "ms"), ("end-to-end p99", "e2e_p99_ms", "ms"),
            ("not delivered in time", "undelivered", ""),
            ("CPU seconds per delivery", "cpu_s_per_delivery", "s"),
            ("deliverer CPU (cores)", "cpu_utilization", ""),
        ):
            lines.append(f"  {label:<30}{fmt(rec.get(key), unit):>22}")
    elif sc == "notify":
        for run in rec.get("runs") or []:
            lines.append(f"  {run['label']}:")
            lines.append(f"    all {rec['monitors']:,} down after {fmt(run.get('down_s'), 's')};"
                         f" {run.get('webhooks_delivered')} webhooks delivered by"
                         f" {fmt(run.get('webhooks_s'), 's')}")
            if run.get("channels"):
                lines.append(f"    every channel has its digest by "
                             f"{fmt(run.get('every_channel_digest_s'), 's')}: "
                             + "; ".join(f"{c['messages']} messages for {c['events']} events"
                                         for c in run.get("per_channel") or []))
            lines.append(f"    engine lateness p50/p99/max {lat_text(run.get('lateness_ms'))}"
                         f" over {run.get('probe_rows')} probes")
        lines.append(f"  p99 lateness with channels / without: "
                     f"{fmt(rec.get('p99_lateness_ratio'))}x")
    elif sc == "api":
        stats = rec.get("statistics_ms") or {}
        timings = rec.get("timings_ms") or {}
        for label, value in (
            ("GET /webapi/monitors/{id}", fmt(rec.get("get_monitor_rps"), "req/s")),
            ("GET /webapi/monitors", fmt(rec.get("list_monitors_rps"), "req/s")),
            ("statistics p50 / p99", f"{fmt(stats.get('p50'))} / {fmt(stats.get('p99'))} ms"),
            ("timings (30d) p50 / p99", f"{fmt(timings.get('p50'))} / "
                                          f"{fmt(timings.get('p99'))} ms"),
            ("CPU seconds per GET monitor", fmt(rec.get("cpu_s_per_get"), "s")),
            *((f"POST monitors, concurrency {c}",
               f"{fmt(v.get('rps'), '/s')} {fmt(v.get('p50'))}/{fmt(v.get('p99'))} ms")
              for c, v in (rec.get("create_monitor_by_concurrency") or {}).items()),
            ("apply / again / export",
             "{} / {} / {} s".format(*(fmt((rec.get("apply") or {}).get(k)) for k in
                                      ("apply_s", "reapply_unchanged_s", "export_s")))),
            ("load tool", rec.get("load_tool") or "-"),
        ):
            lines.append(f"  {label:<30}{value:>22}")
    for note in rec.get("notes") or []:
        lines.append(f"  note: {note}")
    lines += targets_text(rec.get("targets") or [])
    return "\n".join(lines)
