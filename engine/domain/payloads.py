"""Webhook bodies, exactly as api.md section 6 draws them. Pure functions.

The body is serialised once, when the event is queued, and those exact bytes are what is
signed and sent on every try.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from engine.domain.events import (  # noqa: F401  (re-exported: the names' old home)
    CERTIFICATE_INVALID,
    CERTIFICATE_RECOVERED,
    CERTIFICATE_RENEWAL_DUE,
    DOMAIN_INVALID,
    DOMAIN_RECOVERED,
    DOMAIN_RENEWAL_DUE,
    DOWNTIME,
    EVENTS,
    UPTIME_RESTORED,
)
from engine.domain.timefmt import fmt, hms


@dataclass(frozen=True, slots=True)
class MonitorRef:
    id: int
    url: str
    alias: str


def _body(monitor: MonitorRef, check: dict[str, Any]) -> bytes:
    return orjson.dumps(
        {"check": check, "monitor": {"id": monitor.id, "url": monitor.url, "alias": monitor.alias}}
    )


def downtime(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    error: str,
    http_status_code: int | None,
    detected_by: str,
    verified_via: str,
    name: str = "uptime",
) -> bytes:
    return _body(
        monitor,
        {
            "name": name,
            "status": "nok",
            "last_check_at": fmt(last_check_at),
            "error": error,
            "meta": {
                # No HTTP response (refused, timed out, ...) is reported as 0.
                "http_status_code": http_status_code or 0,
                "detected_by": detected_by,
                "verified_via": verified_via,
            },
        },
    )


def uptime_restored(
    monitor: MonitorRef, *, last_check_at: datetime, http_status_code: int,
    downtime_seconds: float, name: str = "uptime",
) -> bytes:
    """``name``: the check's type (``uptime``, or ``heartbeat``)."""
    return _body(
        monitor,
        {
            "name": name,
            "status": "ok",
            "last_check_at": fmt(last_check_at),
            "meta": {"http_status_code": http_status_code, "downtime": hms(downtime_seconds)},
        },
    )


def certificate_invalid(monitor: MonitorRef, *, last_check_at: datetime, error: str) -> bytes:
    return _body(
        monitor,
        {
            "name": "certificate_health",
            "status": "nok",
            "last_check_at": fmt(last_check_at),
            "error": error,
        },
    )


def _cert_meta(
    issuer: str, signature_algorithm: str, valid_from: datetime, valid_to: datetime
) -> dict[str, Any]:
    return {
        "issuer": issuer,
        "signature_algorithm": signature_algorithm,
        "valid_from": fmt(valid_from),
        "valid_to": fmt(valid_to),
    }


def certificate_recovered(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    issuer: str,
    signature_algorithm: str,
    valid_from: datetime,
    valid_to: datetime,
) -> bytes:
    return _body(
        monitor,
        {
            "name": "certificate_health",
            "status": "ok",
            "last_check_at": fmt(last_check_at),
            "meta": _cert_meta(issuer, signature_algorithm, valid_from, valid_to),
        },
    )


def certificate_renewal_due(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    expires_in_days: int,
    issuer: str,
    signature_algorithm: str,
    valid_from: datetime,
    valid_to: datetime,
) -> bytes:
    return _body(
        monitor,
        {
            "name": "certificate_health",
            "status": "ok",
            "last_check_at": fmt(last_check_at),
            "meta": {
                "expires_in_days": expires_in_days,
                **_cert_meta(issuer, signature_algorithm, valid_from, valid_to),
            },
        },
    )


def _domain_meta(domain: str, expires_at: datetime | None) -> dict[str, Any]:
    return {"domain": domain, "expires_at": fmt(expires_at)}


def domain_renewal_due(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    domain: str,
    expires_at: datetime,
    expires_in_days: int,
    threshold_days: int,
    registrar: str | None,
) -> bytes:
    return _body(
        monitor,
        {
            "name": "domain_expiry",
            "status": "ok",
            "last_check_at": fmt(last_check_at),
            "meta": {
                "expires_in_days": expires_in_days,
                "threshold_days": threshold_days,
                "registrar": registrar,
                **_domain_meta(domain, expires_at),
            },
        },
    )


def domain_invalid(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    error: str,
    domain: str,
    expires_at: datetime | None,
    statuses: list[str],
) -> bytes:
    return _body(
        monitor,
        {
            "name": "domain_expiry",
            "status": "nok",
            "last_check_at": fmt(last_check_at),
            "error": error,
            "meta": {**_domain_meta(domain, expires_at), "statuses": statuses},
        },
    )


def domain_recovered(
    monitor: MonitorRef,
    *,
    last_check_at: datetime,
    domain: str,
    expires_at: datetime | None,
    registrar: str | None,
) -> bytes:
    return _body(
        monitor,
        {
            "name": "domain_expiry",
            "status": "ok",
            "last_check_at": fmt(last_check_at),
            "meta": {**_domain_meta(domain, expires_at), "registrar": registrar},
        },
    )
