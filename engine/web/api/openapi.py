"""The OpenAPI 3.0 document of the API (``GET /webapi/openapi.json``).

Schemas are as precise as the API is strict, so a schema-driven fuzzer (schemathesis) can
generate valid requests and check every response: ids are int64 >= 1, intervals and
thresholds are enums, every response property is listed as required, nullable ones say so.
Optional request fields are ``nullable`` because the API treats null as absent.

Other modules contribute path items through ``extra_paths``; they may reference the shared
components here: ``#/components/schemas/Error``, ``ValidationError``, and the responses
``Unauthenticated``, ``NotFound``, ``ValidationFailed``, ``RequestTimeout``, ``TooLarge``,
``TooManyRequests``, ``Unavailable``, and the parameter ``#/components/parameters/Id``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from engine import __version__ as _version
from engine.monitors import schemes
from engine.monitors.validation import (
    MAX_ALIAS_LENGTH,
    MAX_EXPIRY_DAYS,
    MAX_EXPIRY_PERCENT,
    MAX_ID,
    MAX_RECOVERY_THRESHOLD,
    MAX_URL_LENGTH,
)
from engine.runtime.settings import ALLOWED_INTERVALS, ALLOWED_THRESHOLDS
from engine.web.api import heartbeat_openapi

STATUSES = ["ok", "degraded", "failing", "down", "pending", "paused", "unsupported"]
TIMESTAMP_PATTERN = r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"
# A strict subset of the URLs the API accepts, for generators: a lower-case DNS name of at
# most three labels whose last starts with a letter (a numeric one would be read as an IPv4
# address), an optional port and a plain path. The API accepts more (IDN, upper case,
# queries, IP literals), so a string outside the pattern is not necessarily refused.
URL_PATTERN = (
    r"^https?://([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.){0,2}[a-z]([a-z0-9-]{0,61}[a-z0-9])?"
    r"(:[1-9][0-9]{0,3})?(/[A-Za-z0-9._~/-]*)?$"
)
# No control characters or line separators, and at least one non-space character (the API
# trims).
ALIAS_PATTERN = (
    r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*"
    r"[^\s\u0000-\u001f\u007f-\u009f\u2028\u2029][^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"
)


# What the URL of each scheme looks like, and which checks and assertions it brings
# (docs/api.md; docs/monitors-tcp.md, monitors-dns.md, monitors-icmp.md).
_URL_WORDS = (
    "http(s)://host[:port]/path; tcp://host:port and tls://host:port; smtp://, imap://,"
    " pop3://host[:port]; dns://server[:port]/name?type=A (A, AAAA, CNAME, MX, NS, TXT, SOA,"
    " SRV, CAA, PTR); icmp://host[?count=N&interval_ms=M]. The pattern is a subset (http and"
    " https) for generators. A url of another scheme on an update must come with request and"
    " assertions that scheme accepts, unless the stored ones do.")
_CHECKS_WORDS = (
    "Exactly the checks the monitor has: uptime for every scheme; certificate_health for"
    " http, https, tls, smtp, imap and pop3 (paused on create for http); domain_expiry when"
    " the host is a name under a registrable domain (not for dns).")
_SOURCE_WORDS = (
    "http(s): status_code, response_time, header, body, json. tcp, tls, smtp, imap, pop3:"
    " response, response_time, connect_time. dns: rcode, answers, answer_count, min_ttl,"
    " response_time. icmp: packet_loss, rtt_avg, rtt_max, jitter.")


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": list(props) if required is None else required,
    }


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_INT64 = {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID}
_TIMESTAMP = {"type": "string", "pattern": TIMESTAMP_PATTERN, "example": "2026-01-31 12:00:00"}
_INTERVAL = {"type": "integer", "enum": list(ALLOWED_INTERVALS)}
# A monitor's public identifier in the status page paths.
_IDENTIFIER = {
    "name": "identifier", "in": "path", "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{10,64}$"},
}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"application/json": {"schema": schema}}


def _response(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = _json(schema)
    return out


def _r(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/responses/{name}"}


# The alert settings of docs/alerts.md: listed only when set (non-zero), so not required.
_RECOVERY: dict[str, Any] = {
    "type": "integer", "minimum": 0, "maximum": MAX_RECOVERY_THRESHOLD,
    "description": "Seconds of good probes before uptime_restored (0: the first one); "
                   "shown only when not 0.",
}
_PERCENT: dict[str, Any] = {
    "type": "integer", "minimum": 0, "maximum": MAX_EXPIRY_PERCENT,
    "description": "Renewal due when less than this percent of the certificate's own "
                   "lifetime is left (0: off); shown only when not 0.",
}


_DOMAIN_DAYS: dict[str, Any] = {
    "type": "array", "maxItems": 8,
    "items": {"type": "integer", "minimum": 1, "maximum": MAX_EXPIRY_DAYS},
    "description": "domain_expiry checks: days before the domain's expiry at which "
                   "domain_renewal_due is sent (default [30, 14, 7, 1]; [] for none).",
}


def _schemas() -> dict[str, Any]:
    check_common = {
        "id": _INT64,
        "status": {"type": "string", "enum": STATUSES},
        "error": _nullable({"type": "string"}),
        "interval": _INTERVAL,
        "is_enabled": {"type": "boolean"},
        "notification_threshold": {"type": "integer", "minimum": 0},
        "last_check_at": _nullable(_TIMESTAMP),
    }
    return {
        "Error": _obj({"message": {"type": "string"}}),
        "ValidationError": _obj({
            "message": {"type": "string"},
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        }),
        "UptimeMeta": _obj({
            "http_status_code": _nullable({"type": "integer"}),
            "average_uptime_percentage": {"type": "number", "minimum": 0, "maximum": 100},
            "average_response_time": {
                "type": "number", "minimum": 0, "description": "Milliseconds, 30 days."},
            "offline_since": _nullable({
                **_TIMESTAMP,
                "description": "First failed probe of the current confirmed outage.",
            }),
        }),
        "CertificateMeta": _obj({
            "issuer": _nullable({"type": "string"}),
            "signature_algorithm": _nullable({"type": "string"}),
            "is_self_signed": _nullable({"type": "boolean"}),
            "valid_from": _nullable({"type": "string"}),
            "valid_to": _nullable({"type": "string"}),
            # Present once the check has read a certificate.
            "fingerprint_sha256": {"type": "string", "description": "SHA-256 of the leaf "
                                   "(lower-case hex); present once a certificate was read."},
            "serial": {"type": "string", "description": "Lower-case hexadecimal."},
            "key_type": {"type": "string", "example": "EC-secp256r1"},
            "lifetime_days": {"type": "number", "minimum": 0,
                              "description": "valid_to - valid_from, in days."},
            # Present once the check has read a chain (docs/certificates.md).
            "diagnosis": _nullable({"type": "string", "example": "incomplete_chain"}),
            "warnings": _nullable({"type": "array", "items": _obj(
                {"code": {"type": "string"}, "message": {"type": "string"}})}),
            "chain": _nullable({"type": "array", "items": _obj({
                "subject": {"type": "string"}, "issuer": {"type": "string"},
                "not_after": _nullable({"type": "string"}),
                "key_type": {"type": "string"}, "key_bits": {"type": "integer"},
                "signature_algorithm": {"type": "string"}})}),
            "revocation": _nullable(_obj({
                "method": {"type": "string"}, "status": {"type": "string"},
                "url": {"type": "string"}, "revoked_at": _nullable({"type": "string"}),
                "reason": _nullable({"type": "string"}),
                "error": _nullable({"type": "string"})})),
        }, required=["issuer", "signature_algorithm", "is_self_signed", "valid_from",
                     "valid_to"]),
        "DomainMeta": _obj({
            "domain": _nullable({"type": "string", "description": "The registrable domain."}),
            "registrar": _nullable({"type": "string"}),
            "expires_at": _nullable(_TIMESTAMP),
            "days_left": _nullable({"type": "integer"}),
            "statuses": {"type": "array", "items": {"type": "string"},
                         "description": "EPP status codes."},
            "nameservers": {"type": "array", "items": {"type": "string"}},
            "source": _nullable({"type": "string", "enum": ["rdap"]}),
            "rdap_server": _nullable({"type": "string"}),
            "checked_at": _nullable(_TIMESTAMP),
            "warning": _nullable({"type": "string"}),
        }),
        "DomainCheck": _obj({
            **check_common, "meta": _ref("DomainMeta"),
            "expiry_threshold_days": _DOMAIN_DAYS,
        }),
        "UptimeCheck": _obj(
            {**check_common, "meta": _ref("UptimeMeta"), "recovery_threshold": _RECOVERY},
            required=[*check_common, "meta"]),
        "CertificateCheck": _obj({
            **check_common,
            "notification_threshold": {
                "type": "integer", "minimum": 0,
                "description": "expiry_threshold_days x 86400 (0: no renewal-due webhook).",
            },
            "meta": _ref("CertificateMeta"),
            "expiry_threshold_percent": _PERCENT,
        }, required=[*check_common, "meta"]),
        "Monitor": _obj({
            "id": _INT64,
            "identifier": {"type": "string", "minLength": 10},
            "alias": {"type": "string"},
            "scheme": {"type": "string", "enum": list(schemes.names())},
            "host": {"type": "string"},
            "port": {"type": "string", "description": "Empty unless the URL names a port."},
            "url": {"type": "string"},
            "status_page": {"type": "string"},
            "checks": _obj({
                "uptime": _ref("UptimeCheck"),
                "certificate_health": _ref("CertificateCheck"),
                "domain_expiry": _ref("DomainCheck"),
            }, required=[]) | {"description": _CHECKS_WORDS},
        }),
        "ReducedCheck": _obj({
            "id": _INT64,
            "status": {"type": "string", "enum": STATUSES},
            "interval": _INTERVAL,
            "is_enabled": {"type": "boolean"},
        }),
        "ReducedMonitor": _obj({
            "id": _INT64,
            "identifier": {"type": "string", "minLength": 10},
            "alias": {"type": "string"},
            "scheme": {"type": "string", "enum": list(schemes.names())},
            "host": {"type": "string"},
            "url": {"type": "string"},
            "status_page": {"type": "string"},
            "checks": _obj({
                "uptime": _ref("ReducedCheck"),
                "certificate_health": _ref("ReducedCheck"),
                "domain_expiry": _ref("ReducedCheck"),
            }, required=[]) | {"description": _CHECKS_WORDS},
        }),
        "MonitorCreate": _obj({
            "url": {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN,
                    "description": _URL_WORDS},
            "alias": _nullable({
                "type": "string", "minLength": 1, "maxLength": MAX_ALIAS_LENGTH,
                "pattern": ALIAS_PATTERN,
            }),
            "interval": _nullable({**_INTERVAL, "default": 30}),
            "notification_threshold": _nullable(
                {"type": "integer", "enum": list(ALLOWED_THRESHOLDS), "default": 0}),
        }, required=["url"]),
        "MonitorUpdate": _obj({
            "url": _nullable(
                {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN,
                 "description": _URL_WORDS}),
            "alias": _nullable({
                "type": "string", "minLength": 1, "maxLength": MAX_ALIAS_LENGTH,
                "pattern": ALIAS_PATTERN,
            }),
        }, required=[]),
        "CheckUpdate": _obj({
            "interval": _nullable(_INTERVAL),
            "notification_threshold": _nullable({
                "type": "integer", "enum": list(ALLOWED_THRESHOLDS),
                "description": "Uptime checks only (422 on a certificate_health check).",
            }),
            "expiry_threshold_days": _nullable({
                "oneOf": [
                    {"type": "integer", "minimum": 0, "maximum": MAX_EXPIRY_DAYS},
                    _DOMAIN_DAYS,
                ],
                "description": "certificate_health checks: an integer (days); domain_expiry "
                               "checks: a list of days. 422 on an uptime check.",
            }),
            "recovery_threshold": _nullable({
                **_RECOVERY, "description": "Uptime checks only: " + _RECOVERY["description"]}),
            "expiry_threshold_percent": _nullable({
                **_PERCENT,
                "description": "certificate_health checks only: " + _PERCENT["description"]}),
        }, required=[]),
        "CheckUpdated": _obj({
            **{k: check_common[k]
               for k in ("id", "status", "interval", "is_enabled",
                         "notification_threshold", "last_check_at")},
            "recovery_threshold": _RECOVERY,
            "expiry_threshold_percent": _PERCENT,
            "expiry_threshold_days": _DOMAIN_DAYS,
        }, required=["id", "status", "interval", "is_enabled", "notification_threshold",
                     "last_check_at"]),
        "CheckToggled": _obj({
            "id": _INT64,
            "is_enabled": {"type": "boolean"},
            "status": {"type": "string", "enum": STATUSES},
        }),
        "Outage": _obj({
            "started_at": _TIMESTAMP,
            "ended_at": _nullable(_TIMESTAMP),
            "duration_seconds": {"type": "integer", "minimum": 0},
            "http_status_code": _nullable({"type": "integer"}),
        }),
        "Statistics": _obj({
            "uptime_percentage_30d": {"type": "number", "minimum": 0, "maximum": 100},
            "average_response_time_ms": {"type": "number", "minimum": 0},
            "checks_run_30d": {"type": "integer", "minimum": 0},
            "outages": {"type": "array", "items": _ref("Outage")},
            "maintenance_seconds": {
                "type": "integer", "minimum": 0,
                "description": "Seconds of maintenance windows in the 30 days, left out of "
                               "uptime_percentage_30d. Present only when there were any.",
            },
        }, required=["uptime_percentage_30d", "average_response_time_ms", "checks_run_30d",
                     "outages"]),
        "Account": _obj({
            "id": _INT64,
            "name": {"type": "string"},
            "plan": {"type": "string"},
            "webhook_url": _nullable({"type": "string"}),
            "allowed_intervals": {"type": "array", "items": _INTERVAL},
            "monitor_limit": {"type": "integer", "minimum": 0},
        }),
        "AccountUpdate": _obj({
            "webhook_url": _nullable(
                {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN}),
        }, required=[]),
        "Health": _obj({"status": {"type": "string", "enum": ["ok", "unavailable"]},
                        "overloaded": {"type": "boolean"},
                        "load": {"$ref": "#/components/schemas/NodeLoad"}},
                       ["status", "overloaded"]),
        "NodeLoad": _obj({
            "overloaded": {"type": "boolean"}, "ratio": {"type": "number"},
            "asked_per_s": {"type": "number"}, "done_per_s": {"type": "number"},
            "capacity_per_s": {"type": "number"}, "engine_share": {"type": "number"},
            "cost_us_by_kind": {"type": "object",
                                "additionalProperties": {"type": "number"}},
        }),
        **_request_schemas(),
    }


def _union(*names: tuple[str, ...]) -> list[str]:
    """The names of every tuple, each once, in first-seen order."""
    return list(dict.fromkeys(n for group in names for n in group))


def _request_schemas() -> dict[str, Any]:
    """A monitor's own request and its assertions (docs/api.md, "What up means")."""
    from engine.domain import ping
    from engine.monitors.assertrules import MAX_ASSERTIONS
    from engine.monitors.requests import MAX_BODY_BYTES, MAX_HEADERS
    from engine.probes import dnsspec, streamspec
    from engine.probes import request as spec

    return {
        "Request": {
            "type": "object",
            "description": "What the uptime probe sends. Secret header values (Authorization,"
                           " Proxy-Authorization, Cookie, names holding token, key, secret or"
                           ' auth) are write-only: shown as "********"; sending "********"'
                           " keeps the stored value, except when the url moves to another"
                           " origin (then they, and a kept body, must be given again). They"
                           " are sent to the monitor's origin only. http(s) monitors: every"
                           " field; tcp and tls: a body only; smtp, imap, pop3, dns and icmp"
                           " monitors take no request.",
            "properties": {
                "method": {"type": "string", "enum": list(spec.METHODS), "default": "GET"},
                "headers": {
                    "type": "object", "maxProperties": MAX_HEADERS,
                    "additionalProperties": {"type": "string"},
                    "description": "Name: value. Host, Content-Length, Transfer-Encoding and"
                                   " Connection cannot be set; no CR, LF or NUL.",
                },
                "body": _nullable({"type": "string", "description":
                                   f"At most {MAX_BODY_BYTES} bytes as UTF-8; not with GET"
                                   " or HEAD."}),
                "follow_redirects": {"type": "boolean", "default": True},
            },
            "required": [],
        },
        "Assertion": {
            "type": "object",
            "properties": {
                "source": {"type": "string", "enum": _union(
                    spec.SOURCES, streamspec.SOURCES, dnsspec.SOURCES, ping.SOURCES),
                    "description": _SOURCE_WORDS},
                "property": _nullable({"type": "string", "description":
                                       "header: the header name; json: an RFC 9535 JSONPath"}),
                "comparison": {"type": "string", "enum": _union(
                    spec.COMPARISONS, dnsspec.ANSWER_COMPARISONS, ping.COMPARISONS),
                    "description": "dns answers: any_equals, all_equal, none_equals,"
                                   " any_contains, all_contain, none_contains, any_matches,"
                                   " all_match, none_matches (docs/monitors-dns.md)."},
                "target": {"nullable": True, "oneOf": [{"type": "string"}, {"type": "number"}],
                           "description": "Not for is_empty/not_empty; matches: an RE2"
                                          " regular expression."},
            },
            "required": ["source", "comparison"],
        },
        "Assertions": {"type": "array", "maxItems": MAX_ASSERTIONS,
                       "items": _ref("Assertion")},
    }


def _with_requests(schemas: dict[str, Any]) -> dict[str, Any]:
    """The optional ``request`` and ``assertions`` on the monitor shapes (shown
    only when a monitor sets either) and on the create and update bodies."""
    extra = {
        "request": {"nullable": True, "allOf": [_ref("Request")]},
        "assertions": {"nullable": True, "allOf": [_ref("Assertions")]},
    }
    for name in ("Monitor", "ReducedMonitor", "MonitorCreate", "MonitorUpdate"):
        schema = schemas[name]
        schemas[name] = {**schema, "properties": {**schema["properties"], **extra}}
    return schemas


def _responses() -> dict[str, Any]:
    return {
        "Unauthenticated": {
            "description": "Missing or invalid Bearer token.",
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            "content": _json(_ref("Error")),
        },
        "NotFound": _response("No such resource in this account.", _ref("Error")),
        "ValidationFailed": _response("The body failed validation.", _ref("ValidationError")),
        "RequestTimeout": _response("The body did not arrive within 30 s.", _ref("Error")),
        "TooLarge": _response("The body is over 64 KiB.", _ref("Error")),
        "TooManyRequests": {
            "description": "Rate limit of the account exceeded.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
            "content": _json(_ref("Error")),
        },
        "Unavailable": _response("The database is unavailable.", _ref("Error")),
    }


def _operation(
    summary: str,
    op_id: str,
    success: tuple[str, dict[str, Any]],
    *,
    body: str | None = None,
    with_id: bool = False,
    errors: tuple[str, ...] = (),
) -> dict[str, Any]:
    status, response = success
    responses: dict[str, Any] = {status: response, "401": _r("Unauthenticated")}
    if with_id:
        responses["404"] = _r("NotFound")
    if body is not None:
        responses["408"] = _r("RequestTimeout")
        responses["413"] = _r("TooLarge")
        responses["422"] = _r("ValidationFailed")
    for code in errors:
        responses[code] = _r("ValidationFailed") if code == "422" else _r("NotFound")
    responses["429"] = _r("TooManyRequests")
    responses["503"] = _r("Unavailable")
    op: dict[str, Any] = {"summary": summary, "operationId": op_id, "responses": responses}
    if with_id:
        op["parameters"] = [{"$ref": "#/components/parameters/Id"}]
    if body is not None:
        op["requestBody"] = {"required": False, "content": _json(_ref(body))}
    return op


def _paths() -> dict[str, Any]:
    public: dict[str, Any] = {"security": []}
    return {
        "/webapi/monitors": {
            "get": _operation(
                "List the account's monitors", "listMonitors",
                ("200", _response("Every monitor, full shape.",
                                  {"type": "array", "items": _ref("Monitor")}))),
            "post": {
                **_operation(
                    "Create a monitor", "createMonitor",
                    ("201", _response("The reduced monitor.", _ref("ReducedMonitor"))),
                    body="MonitorCreate"),
                "requestBody": {"required": True, "content": _json(_ref("MonitorCreate"))},
            },
        },
        "/webapi/monitors/{id}": {
            "get": _operation(
                "Get a monitor", "getMonitor",
                ("200", _response("The monitor, full shape.", _ref("Monitor"))), with_id=True),
            "put": _operation(
                "Update a monitor's alias or URL", "updateMonitor",
                ("200", _response("The reduced monitor.", _ref("ReducedMonitor"))),
                body="MonitorUpdate", with_id=True),
            "delete": _operation(
                "Delete a monitor with its checks and history", "deleteMonitor",
                ("204", _response("Deleted.")), with_id=True),
        },
        "/webapi/monitors/{id}/statistics": {
            "get": _operation(
                "30-day statistics of a monitor", "getMonitorStatistics",
                ("200", _response("Statistics.", _ref("Statistics"))), with_id=True),
        },
        "/webapi/checks/{id}": {
            "put": _operation(
                "Update a check's interval or threshold", "updateCheck",
                ("200", _response("The check.", _ref("CheckUpdated"))),
                body="CheckUpdate", with_id=True),
        },
        "/webapi/checks/{id}/enable": {
            "post": _operation(
                "Enable a check", "enableCheck",
                ("200", _response("The check, pending.", _ref("CheckToggled"))), with_id=True),
        },
        "/webapi/checks/{id}/disable": {
            "post": _operation(
                "Disable a check", "disableCheck",
                ("200", _response("The check, paused.", _ref("CheckToggled"))), with_id=True),
        },
        "/webapi/account": {
            "get": _operation(
                "The authenticated account", "getAccount",
                ("200", _response("The account.", _ref("Account")))),
            "put": _operation(
                "Set or remove the webhook URL", "updateAccount",
                ("200", _response("The account.", _ref("Account"))), body="AccountUpdate"),
        },
        "/webapi/openapi.json": {
            "get": {
                "summary": "This document", "operationId": "getOpenApi", **public,
                "responses": {"200": _response("OpenAPI 3 document.", {"type": "object"})},
            },
        },
        "/healthz": {
            "get": {
                "summary": "Liveness: the database answers", "operationId": "getHealth",
                **public,
                "responses": {
                    "200": _response("Healthy.", _ref("Health")),
                    "503": _response("The database does not answer.", _ref("Health")),
                },
            },
        },
        "/": {
            "get": {
                "summary": "What this service is (HTML; JSON for Accept: application/json)",
                "operationId": "getIndex", **public,
                "responses": {"200": {
                    "description": "A short page naming the service and where status pages are.",
                    "content": {"text/html": {"schema": {"type": "string"}},
                                "application/json": {"schema": {"type": "object"}}},
                }},
            },
        },
        "/{identifier}": {
            "get": {
                "summary": "Public status page (HTML)", "operationId": "getStatusPage",
                **public, "parameters": [_IDENTIFIER],
                "responses": {
                    "200": {"description": "The page.",
                            "content": {"text/html": {"schema": {"type": "string"}}}},
                    "404": {"description": "Unknown identifier.",
                            "content": {"text/html": {"schema": {"type": "string"}}}},
                },
            },
        },
        "/{identifier}.json": {
            "get": {
                "summary": "Public status page (JSON)", "operationId": "getStatusPageJson",
                **public, "parameters": [_IDENTIFIER],
                "responses": {
                    "200": _response("The status page's data.", {"type": "object"}),
                    "404": _response("Unknown identifier.", _ref("Error")),
                    "503": _response("The database is unavailable.", _ref("Error")),
                },
            },
        },
        "/metrics": {
            "get": {
                "summary": "Prometheus metrics", "operationId": "getMetrics", **public,
                "responses": {"200": {
                    "description": "Prometheus text exposition format.",
                    "content": {"text/plain": {"schema": {"type": "string"}}},
                }},
            },
        },
    }


def build_document(
    base_url: str, *, extra_paths: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The whole document; ``extra_paths`` (other modules' path items) are merged in, never
    replacing a path defined here."""
    paths = _paths()
    for path, item in (extra_paths or {}).items():
        merged = paths.setdefault(path, {})
        for method, operation in item.items():
            merged.setdefault(method, copy.deepcopy(operation))
    return heartbeat_openapi.merge({
        "openapi": "3.0.3",
        "info": {
            "title": "Upwatch API",
            "version": _version,
            "description": "Website monitoring: monitors, their uptime and certificate checks,"
                           " statistics and the account's webhook URL.",
        },
        "servers": [{"url": base_url}],
        "security": [{"bearerAuth": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {"bearerAuth": {"type": "http", "scheme": "bearer"}},
            "parameters": {
                "Id": {
                    "name": "id", "in": "path", "required": True,
                    "schema": _INT64,
                },
            },
            "schemas": _with_requests(_schemas()),
            "responses": _responses(),
        },
    })


# For other modules' path items (``extra_paths``): the same building blocks.
nullable = _nullable
TIMESTAMP: dict[str, Any] = _TIMESTAMP
INT64: dict[str, Any] = _INT64


def common_responses() -> dict[str, Any]:
    """401, 429 and 503, which every authenticated operation may answer."""
    return {"401": _r("Unauthenticated"), "429": _r("TooManyRequests"), "503": _r("Unavailable")}
