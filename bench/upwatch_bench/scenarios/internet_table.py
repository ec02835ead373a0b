"""The internet scenario's targets and its readable table."""

from __future__ import annotations

from typing import Any

from upwatch_bench import report
from upwatch_bench.report import fmt, lat_text, targets_text
from upwatch_bench.world import INTERVAL_S, SERVER_KINDS


def targets(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The internet world's targets."""
    t = report.target
    ttl = max(1.0, float(rec.get("dns_ttl_s") or 300))
    interval = float(rec.get("interval_s") or INTERVAL_S) / max(1e-9, rec.get("time_scale", 1))
    lat = rec.get("lateness_ms") or {}
    return [
        t("healthy probes failed", rec.get("healthy_failed"), "==", 0),
        t("held (first probes done / asked)", rec.get("held"), ">=", 0.98),
        t("scheduler lateness p99", lat.get("p99"), "<", 100.0, "ms"),
        t("engine CPU (cores)", rec.get("cpu_utilization"), "<", 1.0),
        t("vs baseline, per CPU s", rec.get("ratio_vs_baseline"), ">=", 5.0, "x"),
        t("RSS per idle monitor incl. its cache entry", rec.get(
            "rss_per_idle_monitor_with_name_bytes"), "<=", 1024, "B"),
        t("RSS per in-flight HTTPS probe", rec.get("https_inflight_bytes"), "<=", 100_000, "B"),
        t("HTTPS probe CPU vs s_time -new", rec.get("https_vs_s_time_new"), "<=", 1.0, "x"),
        t("HTTPS probe CPU vs s_time -reuse (TLS 1.2)", rec.get("https_vs_s_time_reuse"), "<=",
          1.2, "x"),
        t("HTTPS probe CPU vs s_time -www (same page; 1.0x -new, 1.2x -reuse, by resumed share)",
          rec.get("https_vs_s_time_www_targets"), "<=", 1.0, "x"),
        t("DNS questions per probe (A and AAAA once per TTL)",
          rec.get("dns_queries_per_probe"), "<=", round(2 * interval / ttl, 4)),
    ]


def table(rec: dict[str, Any]) -> str:
    """The readable report of one internet run."""
    lines = [f"== upwatch bench internet: {rec['monitors']:,} monitors at "
             f"{fmt(rec.get('interval_s'))} s, DNS {fmt(rec.get('dns_latency_s'))} s away "
             f"(TTL {rec.get('dns_ttl_s')} s), {rec['duration_s']:g} s measured =="]

    def row(label: str, value: str) -> None:
        lines.append(f"  {label:<44} {value}")  # a space even after a long label

    row("probes/s asked / done", f"{fmt(rec.get('probes_asked_per_s'))} / "
        f"{fmt(rec.get('probes_per_s'))} (held {fmt(rec.get('held'))})")
    row("CPU per probe (all / HTTPS only)", f"{fmt(rec.get('cpu_s_per_probe'), 's')} / "
        f"{fmt(rec.get('https_cpu_s_per_probe'), 's')}")
    row("engine CPU (cores)", fmt(rec.get("cpu_utilization")))
    row("lateness p50 / p99 / max", lat_text(rec.get("lateness_ms")))
    row("in flight at the end", fmt(rec.get("in_flight_at_end")))
    row("cores busy (window)", ", ".join(
        f"{k} {fmt(v)}" for k, v in (rec.get("cores_busy") or {}).items()))
    row("world's processes (cores)", ", ".join(
        f"{k} {fmt(v)}" for k, v in (rec.get("world_cpu_cores") or {}).items()))
    row("healthy failed / degraded", f"{rec.get('healthy_failed')} / "
        f"{rec.get('healthy_degraded')} {rec.get('healthy_failure_reasons') or ''}")
    for kind, g in (rec.get("by_kind") or {}).items():
        took = g.get("total_ms") or {}
        row(f"  {kind}: failed / probes (confirmations)",
            f"{g['failed']} / {g['probes']} ({g.get('confirmations')}), took p50/p99 "
            f"{fmt(took.get('p50'))}/{fmt(took.get('p99'))} ms {g['reasons'][:1]}")
    cert = rec.get("certificate_checks") or {}
    row("  badcert certificate checks failed", f"{cert.get('failed')} / {cert.get('probes')} "
        f"{(cert.get('reasons') or [])[:1]}")
    row("DNS questions per probe (window / run)", f"{fmt(rec.get('dns_queries_per_probe'))} / "
        f"{fmt(rec.get('dns_queries_per_probe_whole_run'))}")
    row("DNS cache hit ratio", fmt(rec.get("dns_cache_hit_ratio")))
    row("TLS resumed ratio", f"{fmt(rec.get('tls_resumed_ratio'))} "
        f"({rec.get('tls_resumed')} of {rec.get('tls_handshakes')})")
    row("RSS per monitor: idle + cached name = sum",
        f"{fmt(rec.get('rss_per_monitor_before_probes_bytes'), 'B')} + "
        f"{fmt(rec.get('dns_cache_bytes_per_name'), 'B')} = "
        f"{fmt(rec.get('rss_per_idle_monitor_with_name_bytes'), 'B')}")
    row("  read after the first sweep's probes",
        f"{fmt(rec.get('rss_per_monitor_bytes'), 'B')} + ... = "
        f"{fmt(rec.get('rss_per_monitor_with_name_after_wake_bytes'), 'B')}")
    row("RSS per monitor at the window's start (all)",
        fmt(rec.get("rss_per_monitor_with_names_bytes"), "B"))
    row("RSS per in-flight HTTPS probe", fmt(rec.get("https_inflight_bytes"), "B"))
    row("baseline: CPU per good probe, good/s", f"{fmt(rec.get('baseline_cpu_s_per_probe'), 's')}"
        f", {fmt(rec.get('baseline_good_probes_per_s'))}/s")
    row("engine vs baseline per CPU s", f"{fmt(rec.get('ratio_vs_baseline'))}x")
    row("wrk Connection: close, CPU per request", fmt(rec.get("limit_http_cpu_s_per_op"), "s"))
    for kind in SERVER_KINDS:
        row(f"s_time {kind} -new / -reuse CPU per op",
            f"{fmt((rec.get('s_time_new_cpu_s') or {}).get(kind), 's')} / "
            f"{fmt((rec.get('s_time_reuse_cpu_s') or {}).get(kind), 's')}")
    row("HTTPS probe vs s_time -new / -reuse", f"{fmt(rec.get('https_vs_s_time_new'))}x / "
        f"{fmt(rec.get('https_vs_s_time_reuse'))}x")
    row(f"s_time -www {rec.get('s_time_www_path')} -new / -reuse (mean)",
        f"{fmt(rec.get('s_time_new_www_cpu_s'), 's')} / "
        f"{fmt(rec.get('s_time_reuse_www_cpu_s'), 's')}")
    row("HTTPS probe vs s_time -www -new / -reuse / targets",
        f"{fmt(rec.get('https_vs_s_time_new_www'))}x / "
        f"{fmt(rec.get('https_vs_s_time_reuse_www'))}x / "
        f"{fmt(rec.get('https_vs_s_time_www_targets'))}x")
    parts = rec.get("s_time_user_sys_s") or {}
    only = rec.get("https_only") or {}
    row("user / kernel CPU: HTTPS probe; s_time -reuse -www",
        f"{fmt(only.get('user_s_per_probe'), 's')} / {fmt(only.get('sys_s_per_probe'), 's')}; "
        f"{fmt((parts.get('user') or {}).get('reuse_www'), 's')} / "
        f"{fmt((parts.get('sys') or {}).get('reuse_www'), 's')}")
    figs = rec.get("s_time_figures") or {}
    by_round = rec.get("https_vs_s_time_rounds") or {}
    for mode in ("new_www", "reuse_www"):
        fig, rat = figs.get(mode) or {}, by_round.get(mode) or {}
        row(f"  -{mode} rounds: min-max (spread, n)",
            f"{fmt(fig.get('min'), 's')} - {fmt(fig.get('max'), 's')} "
            f"({fmt(fig.get('spread'))}, {fig.get('n')})")
        row(f"  probe vs -{mode}: before/after/each",
            f"{fmt(rat.get('before'))}x / {fmt(rat.get('after'))}x / "
            + ", ".join(f"{fmt(v)}" for v in rat.get("rounds") or []))
    if only.get("instructions_per_answered_probe") is not None:  # --callgrind
        mean = rec.get("s_time_reuse_www_instructions_mean")
        row("instructions: HTTPS probe / s_time -reuse -www (mean)",
            f"{only['instructions_per_answered_probe']:,} / "
            f"{'-' if mean is None else format(mean, ',')} = "
            f"{fmt(rec.get('https_instructions_vs_s_time_reuse_www'))}x (s_time resumed "
            + " of ".join(str(n) for n in rec.get("s_time_reuse_www_instructions_resumed")
                          or ()) + ")")
    bt = only.get("beyond_think_ms") or {}
    row("HTTPS probe's time beyond think: p50 / mean / p99",
        f"{fmt(bt.get('p50'))} / {fmt(bt.get('mean'))} / {fmt(bt.get('p99'))} ms")
    sl = only.get("slice_cpu_s_per_probe") or {}
    row("HTTPS-only window in quarters: CPU a probe",
        f"{fmt(sl.get('min'), 's')} - {fmt(sl.get('max'), 's')} "
        f"(spread {fmt(sl.get('spread'))})")
    for note in rec.get("notes") or []:
        lines.append(f"  note: {note}")
    lines += targets_text(rec.get("targets") or [])
    return "\n".join(lines)

