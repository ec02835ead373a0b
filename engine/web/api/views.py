"""Response bodies, exactly in the shapes of api.md section 2 and decisions.md.

Pure functions from store records to JSON-ready dicts; every timestamp goes through
:func:`engine.domain.timefmt.fmt` (UTC ``YYYY-MM-DD HH:MM:SS``).
"""

from __future__ import annotations

from typing import Any

from engine.db.accounts import Account
from engine.db.monitor_records import CheckRecord, MonitorRecord, StatisticsRecord, UptimeFigures
from engine.domain.domain_expiry import DOMAIN_EXPIRY
from engine.domain.timefmt import fmt
from engine.kinds.registry import SHOWN
from engine.monitors.domain_settings import shown_thresholds
from engine.monitors.requests import shown_assertions, shown_request
from engine.runtime.settings import ALLOWED_INTERVALS, Plan

CHECK_KINDS = SHOWN.names


def status_page_url(base_url: str, identifier: str) -> str:
    return f"{base_url.rstrip('/')}/{identifier}"


def _alert_settings(check: CheckRecord, out: dict[str, Any]) -> dict[str, Any]:
    """The alert settings (docs/alerts.md), added to a check object only when set (non-zero):
    a client that uses none of them sees exactly api.md's shapes."""
    if check.recovery_threshold:
        out["recovery_threshold"] = check.recovery_threshold
    if check.expiry_threshold_percent:
        out["expiry_threshold_percent"] = check.expiry_threshold_percent
    if check.kind == DOMAIN_EXPIRY:
        out["expiry_threshold_days"] = shown_thresholds(check.expiry_threshold_days)
    return out


def check_full(check: CheckRecord, figures: UptimeFigures | None) -> dict[str, Any]:
    return _alert_settings(check, {
        "id": check.id,
        "status": check.status,
        "error": check.error,
        "interval": check.interval,
        "is_enabled": check.is_enabled,
        "notification_threshold": check.notification_threshold,
        "last_check_at": fmt(check.last_check_at),
        "meta": SHOWN[check.kind].api_meta(check, figures or UptimeFigures.empty()),
    })


def check_reduced(check: CheckRecord) -> dict[str, Any]:
    """A check inside the create/update response: id, status, interval, is_enabled."""
    return {
        "id": check.id,
        "status": check.status,
        "interval": check.interval,
        "is_enabled": check.is_enabled,
    }


def monitor_full(monitor: MonitorRecord, base_url: str) -> dict[str, Any]:
    """A Monitor of the list and get responses."""
    return {
        "id": monitor.id,
        "identifier": monitor.identifier,
        "alias": monitor.alias,
        "scheme": monitor.scheme,
        "host": monitor.host,
        "port": monitor.port,
        "url": monitor.url,
        "status_page": status_page_url(base_url, monitor.identifier),
        "checks": {
            kind: check_full(monitor.checks[kind], monitor.uptime)
            for kind in CHECK_KINDS if kind in monitor.checks
        },
        **request_fields(monitor),
    }


def request_fields(monitor: MonitorRecord) -> dict[str, Any]:
    """``request`` and ``assertions`` (secrets masked) when the monitor sets
    either, else nothing, so that api.md's shapes stay exact for monitors without them."""
    if monitor.request is None and not monitor.assertions:
        return {}
    return {
        "request": shown_request(monitor.request),
        "assertions": shown_assertions(monitor.assertions),
    }


def monitor_reduced(monitor: MonitorRecord, base_url: str) -> dict[str, Any]:
    """The create/update response: no ``port``, checks reduced."""
    return {
        "id": monitor.id,
        "identifier": monitor.identifier,
        "alias": monitor.alias,
        "scheme": monitor.scheme,
        "host": monitor.host,
        "url": monitor.url,
        "status_page": status_page_url(base_url, monitor.identifier),
        "checks": {kind: check_reduced(monitor.checks[kind])
                   for kind in CHECK_KINDS if kind in monitor.checks},
        **request_fields(monitor),
    }


def check_updated(check: CheckRecord) -> dict[str, Any]:
    """The check update response."""
    return _alert_settings(check, {
        "id": check.id,
        "status": check.status,
        "interval": check.interval,
        "is_enabled": check.is_enabled,
        "notification_threshold": check.notification_threshold,
        "last_check_at": fmt(check.last_check_at),
    })


def check_toggled(check: CheckRecord) -> dict[str, Any]:
    """The enable/disable response."""
    return {"id": check.id, "is_enabled": check.is_enabled, "status": check.status}


def statistics(stats: StatisticsRecord) -> dict[str, Any]:
    """The Statistics object; an ongoing outage has ``ended_at`` null and its duration so
    far. A monitor without an uptime check: every figure null, no outages."""
    if stats.figures is None:
        return {"uptime_percentage_30d": None, "average_response_time_ms": None,
                "checks_run_30d": None, "outages": []}
    outages = []
    for o in stats.outages:
        end = o.ended_at or stats.now
        outages.append({
            "started_at": fmt(o.started_at),
            "ended_at": fmt(o.ended_at),
            "duration_seconds": max(0, int((end - o.started_at).total_seconds())),
            "http_status_code": o.http_status_code,
        })
    return {
        "uptime_percentage_30d": stats.figures.uptime_percentage,
        "average_response_time_ms": stats.figures.average_response_ms,
        "checks_run_30d": stats.figures.checks_run,
        "outages": outages,
    }


def account(acc: Account, plan: Plan) -> dict[str, Any]:
    return {
        "id": acc.id,
        "name": acc.name,
        "plan": acc.plan,
        "webhook_url": acc.webhook_url,
        "allowed_intervals": [i for i in ALLOWED_INTERVALS if i in plan.allowed_intervals],
        "monitor_limit": plan.monitor_limit,
    }
