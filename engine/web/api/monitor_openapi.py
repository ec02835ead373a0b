"""The monitor and check shapes of the OpenAPI document (:mod:`engine.web.api.openapi`
places them among its components): a monitor and its reduced form, each kind's check with
its meta, the create and update bodies, the statistics, and a monitor's own request and
assertions.

Schemas are as precise as the API is strict (see :mod:`engine.web.api.openapi`).
"""

from __future__ import annotations

from typing import Any

from engine.monitors import schemes
from engine.monitors.validation import (
    MAX_ALIAS_LENGTH,
    MAX_EXPIRY_DAYS,
    MAX_EXPIRY_PERCENT,
    MAX_RECOVERY_THRESHOLD,
    MAX_URL_LENGTH,
)
from engine.runtime.settings import ALLOWED_THRESHOLDS
from engine.web.api.openapi_blocks import INT64, INTERVAL, TIMESTAMP, nullable, obj, ref

STATUSES = ["ok", "degraded", "failing", "down", "pending", "paused", "unsupported"]
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


def schemas() -> dict[str, Any]:
    """The monitor, its checks (one shape per kind, with its meta), the bodies that
    create and change them, and the statistics."""
    check_common = {
        "id": INT64,
        "status": {"type": "string", "enum": STATUSES},
        "error": nullable({"type": "string"}),
        "interval": INTERVAL,
        "is_enabled": {"type": "boolean"},
        "notification_threshold": {"type": "integer", "minimum": 0},
        "last_check_at": nullable(TIMESTAMP),
    }
    return {
        "UptimeMeta": obj({
            "http_status_code": nullable({"type": "integer"}),
            "average_uptime_percentage": {"type": "number", "minimum": 0, "maximum": 100},
            "average_response_time": {
                "type": "number", "minimum": 0, "description": "Milliseconds, 30 days."},
            "offline_since": nullable({
                **TIMESTAMP,
                "description": "First failed probe of the current confirmed outage.",
            }),
        }),
        "CertificateMeta": obj({
            "issuer": nullable({"type": "string"}),
            "signature_algorithm": nullable({"type": "string"}),
            "is_self_signed": nullable({"type": "boolean"}),
            "valid_from": nullable({"type": "string"}),
            "valid_to": nullable({"type": "string"}),
            # Present once the check has read a certificate.
            "fingerprint_sha256": {"type": "string", "description": "SHA-256 of the leaf "
                                   "(lower-case hex); present once a certificate was read."},
            "serial": {"type": "string", "description": "Lower-case hexadecimal."},
            "key_type": {"type": "string", "example": "EC-secp256r1"},
            "lifetime_days": {"type": "number", "minimum": 0,
                              "description": "valid_to - valid_from, in days."},
            # Present once the check has read a chain (docs/certificates.md).
            "diagnosis": nullable({"type": "string", "example": "incomplete_chain"}),
            "warnings": nullable({"type": "array", "items": obj(
                {"code": {"type": "string"}, "message": {"type": "string"}})}),
            "chain": nullable({"type": "array", "items": obj({
                "subject": {"type": "string"}, "issuer": {"type": "string"},
                "not_after": nullable({"type": "string"}),
                "key_type": {"type": "string"}, "key_bits": {"type": "integer"},
                "signature_algorithm": {"type": "string"}})}),
            "revocation": nullable(obj({
                "method": {"type": "string"}, "status": {"type": "string"},
                "url": {"type": "string"}, "revoked_at": nullable({"type": "string"}),
                "reason": nullable({"type": "string"}),
                "error": nullable({"type": "string"})})),
        }, required=["issuer", "signature_algorithm", "is_self_signed", "valid_from",
                     "valid_to"]),
        "DomainMeta": obj({
            "domain": nullable({"type": "string", "description": "The registrable domain."}),
            "registrar": nullable({"type": "string"}),
            "expires_at": nullable(TIMESTAMP),
            "days_left": nullable({"type": "integer"}),
            "statuses": {"type": "array", "items": {"type": "string"},
                         "description": "EPP status codes."},
            "nameservers": {"type": "array", "items": {"type": "string"}},
            "source": nullable({"type": "string", "enum": ["rdap"]}),
            "rdap_server": nullable({"type": "string"}),
            "checked_at": nullable(TIMESTAMP),
            "warning": nullable({"type": "string"}),
        }),
        "DomainCheck": obj({
            **check_common, "meta": ref("DomainMeta"),
            "expiry_threshold_days": _DOMAIN_DAYS,
        }),
        "UptimeCheck": obj(
            {**check_common, "meta": ref("UptimeMeta"), "recovery_threshold": _RECOVERY},
            required=[*check_common, "meta"]),
        "CertificateCheck": obj({
            **check_common,
            "notification_threshold": {
                "type": "integer", "minimum": 0,
                "description": "expiry_threshold_days x 86400 (0: no renewal-due webhook).",
            },
            "meta": ref("CertificateMeta"),
            "expiry_threshold_percent": _PERCENT,
        }, required=[*check_common, "meta"]),
        "Monitor": obj({
            "id": INT64,
            "identifier": {"type": "string", "minLength": 10},
            "alias": {"type": "string"},
            "scheme": {"type": "string", "enum": list(schemes.names())},
            "host": {"type": "string"},
            "port": {"type": "string", "description": "Empty unless the URL names a port."},
            "url": {"type": "string"},
            "status_page": {"type": "string"},
            "checks": obj({
                "uptime": ref("UptimeCheck"),
                "certificate_health": ref("CertificateCheck"),
                "domain_expiry": ref("DomainCheck"),
            }, required=[]) | {"description": _CHECKS_WORDS},
        }),
        "ReducedCheck": obj({
            "id": INT64,
            "status": {"type": "string", "enum": STATUSES},
            "interval": INTERVAL,
            "is_enabled": {"type": "boolean"},
        }),
        "ReducedMonitor": obj({
            "id": INT64,
            "identifier": {"type": "string", "minLength": 10},
            "alias": {"type": "string"},
            "scheme": {"type": "string", "enum": list(schemes.names())},
            "host": {"type": "string"},
            "url": {"type": "string"},
            "status_page": {"type": "string"},
            "checks": obj({
                "uptime": ref("ReducedCheck"),
                "certificate_health": ref("ReducedCheck"),
                "domain_expiry": ref("ReducedCheck"),
            }, required=[]) | {"description": _CHECKS_WORDS},
        }),
        "MonitorCreate": obj({
            "url": {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN,
                    "description": _URL_WORDS},
            "alias": nullable({
                "type": "string", "minLength": 1, "maxLength": MAX_ALIAS_LENGTH,
                "pattern": ALIAS_PATTERN,
            }),
            "interval": nullable({**INTERVAL, "default": 30}),
            "notification_threshold": nullable(
                {"type": "integer", "enum": list(ALLOWED_THRESHOLDS), "default": 0}),
        }, required=["url"]),
        "MonitorUpdate": obj({
            "url": nullable(
                {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN,
                 "description": _URL_WORDS}),
            "alias": nullable({
                "type": "string", "minLength": 1, "maxLength": MAX_ALIAS_LENGTH,
                "pattern": ALIAS_PATTERN,
            }),
        }, required=[]),
        "CheckUpdate": obj({
            "interval": nullable(INTERVAL),
            "notification_threshold": nullable({
                "type": "integer", "enum": list(ALLOWED_THRESHOLDS),
                "description": "Uptime checks only (422 on a certificate_health check).",
            }),
            "expiry_threshold_days": nullable({
                "oneOf": [
                    {"type": "integer", "minimum": 0, "maximum": MAX_EXPIRY_DAYS},
                    _DOMAIN_DAYS,
                ],
                "description": "certificate_health checks: an integer (days); domain_expiry "
                               "checks: a list of days. 422 on an uptime check.",
            }),
            "recovery_threshold": nullable({
                **_RECOVERY, "description": "Uptime checks only: " + _RECOVERY["description"]}),
            "expiry_threshold_percent": nullable({
                **_PERCENT,
                "description": "certificate_health checks only: " + _PERCENT["description"]}),
        }, required=[]),
        "CheckUpdated": obj({
            **{k: check_common[k]
               for k in ("id", "status", "interval", "is_enabled",
                         "notification_threshold", "last_check_at")},
            "recovery_threshold": _RECOVERY,
            "expiry_threshold_percent": _PERCENT,
            "expiry_threshold_days": _DOMAIN_DAYS,
        }, required=["id", "status", "interval", "is_enabled", "notification_threshold",
                     "last_check_at"]),
        "CheckToggled": obj({
            "id": INT64,
            "is_enabled": {"type": "boolean"},
            "status": {"type": "string", "enum": STATUSES},
        }),
        "Outage": obj({
            "started_at": TIMESTAMP,
            "ended_at": nullable(TIMESTAMP),
            "duration_seconds": {"type": "integer", "minimum": 0},
            "http_status_code": nullable({"type": "integer"}),
        }),
        "Statistics": obj({
            "uptime_percentage_30d": {"type": "number", "minimum": 0, "maximum": 100},
            "average_response_time_ms": {"type": "number", "minimum": 0},
            "checks_run_30d": {"type": "integer", "minimum": 0},
            "outages": {"type": "array", "items": ref("Outage")},
            "maintenance_seconds": {
                "type": "integer", "minimum": 0,
                "description": "Seconds of maintenance windows in the 30 days, left out of "
                               "uptime_percentage_30d. Present only when there were any.",
            },
        }, required=["uptime_percentage_30d", "average_response_time_ms", "checks_run_30d",
                     "outages"]),
    }


def _union(*names: tuple[str, ...]) -> list[str]:
    """The names of every tuple, each once, in first-seen order."""
    return list(dict.fromkeys(n for group in names for n in group))


def request_schemas() -> dict[str, Any]:
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
                "body": nullable({"type": "string", "description":
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
                "property": nullable({"type": "string", "description":
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
                       "items": ref("Assertion")},
    }


def with_requests(components: dict[str, Any]) -> dict[str, Any]:
    """``components`` (the document's schemas) with the optional ``request`` and
    ``assertions`` on the monitor shapes (shown only when a monitor sets either) and on the
    create and update bodies."""
    extra = {
        "request": {"nullable": True, "allOf": [ref("Request")]},
        "assertions": {"nullable": True, "allOf": [ref("Assertions")]},
    }
    for name in ("Monitor", "ReducedMonitor", "MonitorCreate", "MonitorUpdate"):
        schema = components[name]
        components[name] = {**schema, "properties": {**schema["properties"], **extra}}
    return components
