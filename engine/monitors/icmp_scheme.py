"""The icmp scheme of uptime monitors (:class:`engine.monitors.scheme.Scheme`): ping.

``icmp://host[?count=N&interval_ms=M]``: ``count`` echo requests per probe (1 to
:data:`~engine.domain.ping.MAX_COUNT`, default 3), ``interval_ms`` apart (20 to 2000, default
500), at most 5 s from the first request to the last. No port, no path (a bare ``/`` is
dropped). The stored URL names only what differs from the defaults, in that order.

Refused with a 422 under ``url`` when this node can open no ICMP socket
(:func:`engine.probes.icmp.ping_access` says why and what to set), or for an IPv6 literal
when it cannot ping IPv6. No ``request`` (ping sends none); ``assertions`` on
``packet_loss`` (percent), ``rtt_avg``, ``rtt_max`` and ``jitter`` (ms) with
``less_than``, ``greater_than``, ``equals`` or ``not_equals`` and a number. The spec: the
stored assertions as a :class:`~engine.domain.ping.PingSpec` (None without). Prober:
:class:`engine.probes.icmp.IcmpProber`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl

from engine.domain import ping
from engine.monitors.assertrules import as_number, stored_number, walk
from engine.monitors.assertrules import fail as _fail
from engine.monitors.requests import Config
from engine.monitors.scheme import Scheme, UrlParts, refuse
from engine.probes.icmp import PingAccess, ping_access
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox

_QUERY_KEYS = ("count", "interval_ms")
# What this node may open, asked again after this many seconds (a file of many icmp://
# monitors is validated with one look; a changed sysctl is seen soon enough).
ACCESS_KEPT_S = 5.0
_access: tuple[float, PingAccess] | None = None


def _ping_access() -> PingAccess:
    global _access
    now = time.monotonic()
    if _access is None or now - _access[0] > ACCESS_KEPT_S:
        _access = (now, ping_access())
    return _access[1]


def _int_param(field: str, name: str, text: str, lo: int, hi: int) -> int:
    if not (text.isascii() and text.isdigit()) or not lo <= int(text) <= hi:
        raise refuse(field, f"The {field}'s {name} must be a whole number from {lo} to {hi}.")
    return int(text)


def url_rules(parts: UrlParts, field: str) -> UrlParts:
    if parts.port:
        raise refuse(field, f"An icmp:// {field} takes no port (ping has none).")
    if parts.path not in ("", "/"):
        raise refuse(field, f"An icmp:// {field} has no path: icmp://host, with count and "
                            "interval_ms in its query.")
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=True) \
            if parts.query else []
    except ValueError:
        raise refuse(field, f"The {field}'s query must be count=N&interval_ms=M.") from None
    given: dict[str, str] = {}
    for key, value in pairs:
        if key not in _QUERY_KEYS:
            raise refuse(field, f"An icmp:// {field} takes only count and interval_ms in its "
                                f"query, not {key[:40]!r}.")
        if key in given:
            raise refuse(field, f"The {field} gives {key} twice.")
        given[key] = value
    count = _int_param(field, "count", given.get("count", str(ping.DEFAULT_COUNT)), 1,
                       ping.MAX_COUNT)
    interval = _int_param(field, "interval_ms",
                          given.get("interval_ms", str(ping.DEFAULT_INTERVAL_MS)),
                          ping.MIN_INTERVAL_MS, ping.MAX_INTERVAL_MS)
    if (count - 1) * interval > ping.MAX_SPREAD_MS:
        raise refuse(field, f"The {field}'s (count - 1) x interval_ms may be at most "
                            f"{ping.MAX_SPREAD_MS} ms: the last request must leave well "
                            "within the probe timeout.")
    access = _ping_access()
    if not access.can_ping:
        raise refuse(field, f"Ping is not possible: {access.reason}.")
    if ":" in parts.host and access.ipv6 is None:
        raise refuse(field, f"This node cannot ping IPv6 addresses: {access.reason}.")
    query = "&".join(
        f"{k}={v}" for k, v, default in (("count", count, ping.DEFAULT_COUNT),
                                         ("interval_ms", interval, ping.DEFAULT_INTERVAL_MS))
        if v != default)
    return UrlParts(parts.scheme, parts.host, parts.url_host, "", "", query)


def _assertion(a: Any, at: str, errors: dict[str, list[str]]) -> dict[str, Any] | None:
    if not isinstance(a, dict):
        _fail(errors, at, "An assertion must be an object.")
        return None
    source = a.get("source")
    if source not in ping.SOURCES:
        _fail(errors, f"{at}.source",
              "The source of an icmp:// assertion must be one of " + ", ".join(ping.SOURCES) + ".")
        return None
    comparison = a.get("comparison")
    if comparison not in ping.COMPARISONS:
        _fail(errors, f"{at}.comparison",
              f"A {source} assertion takes one of " + ", ".join(ping.COMPARISONS) + ".")
        return None
    if a.get("property") not in (None, ""):
        _fail(errors, f"{at}.property", f"A {source} assertion takes no property.")
        return None
    number = as_number(a.get("target"))
    if number is None or number < 0:
        _fail(errors, f"{at}.target",
              f"The {source} {comparison} target must be a number, 0 or more "
              f"({'percent' if source == 'packet_loss' else 'milliseconds'}).")
        return None
    if source == "packet_loss" and number > 100:
        _fail(errors, f"{at}.target", "A packet_loss target is a percent, 0 to 100.")
        return None
    return {"source": source, "property": None, "comparison": comparison,
            "target": stored_number(number)}


def config_rules(body: Mapping[str, Any], creating: bool) -> Config:
    errors: dict[str, list[str]] = {}
    if body.get("request") is not None:
        errors["request"] = ["An icmp:// monitor sends no request: count and interval_ms "
                             "go in its url (icmp://host?count=5&interval_ms=200)."]
    assertions: Any = None
    if "assertions" in body:
        raw = body["assertions"]
        if raw is None or raw == []:
            assertions = None if creating else Config.REMOVE
        else:
            assertions = walk(raw, errors, _assertion)
    if errors:
        raise ValidationFailed(errors)
    return Config(None if creating else Config.REMOVE, assertions)


def spec_rules(
    box: SecretBox, capture_limit: int, configured: tuple[Any, Any] | None, owner: int
) -> ping.PingSpec | None:
    """The stored assertions as :class:`engine.domain.ping.PingSpec` (None without); one
    that fails every probe in words when they are not ping assertions."""
    if configured is None:
        return None
    _request, assertions = configured
    return ping.spec(assertions) if assertions else None


ICMP: Final[Scheme] = Scheme("icmp", "ICMP ping", None, False, url_rules, config_rules, spec_rules)
