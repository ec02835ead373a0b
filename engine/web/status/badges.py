"""Badges: ``GET /{identifier}/badge.svg?type=status|uptime|response&period=24h|7d|30d``.

A shields-style SVG (a grey label, a coloured value) for READMEs and other sites:

- ``type=status`` (the default): up, degraded, down, pending or paused, the status page's
  overall state; ``period`` is ignored.
- ``type=uptime``: the uptime percentage over the period (default 30d), as the status page
  words it (two decimals, rounded down; 100% only when perfect).
- ``type=response``: the average response time over the period (default 24h).
- ``type=domain``: the days left before the domain's registration expires (its
  domain_expiry check); ``period`` is ignored.

Same privacy as the status page: anyone with the identifier sees it, and it shows less than
the page does (no host, no alias, no error). An unknown identifier is a 404 (with a grey
"not found" badge, so an embedded image says so); a bad ``type`` or ``period`` a 422 in the
API's JSON shape. ``Cache-Control: public, max-age=60`` and a strong ``ETag`` of the bytes
(``If-None-Match`` gets a 304), so embeds cost one request a minute per viewer at most.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aiohttp import web
from markupsafe import escape

from engine.db.badges import BadgeData
from engine.domain.domain_expiry import days_left
from engine.domain.timefmt import utcnow
from engine.domain.words import plural
from engine.kinds.shown import parse_timestamp
from engine.runtime.errors import DatabaseUnavailable
from engine.web.keys import STORE
from engine.web.status.page import IDENTIFIER_PATTERN
from engine.web.status.view import ms_text, overall_state, percent_text

routes = web.RouteTableDef()

TYPES = ("status", "uptime", "response", "domain")
PERIODS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
DEFAULT_PERIOD = {"status": "30d", "uptime": "30d", "response": "24h", "domain": "30d"}
CACHE_OK = "public, max-age=60"
CACHE_ERROR = "no-store"

# shields.io's named colours.
GREEN = "#4c1"
YELLOWGREEN = "#97ca00"
YELLOW = "#dfb317"
ORANGE = "#fe7d37"
RED = "#e05d44"
GREY = "#9f9f9f"
_LABEL_BG = "#555"

_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    # Nothing inside may load or run anything, even when the SVG is opened on its own.
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
    "Access-Control-Allow-Origin": "*",
    "Referrer-Policy": "no-referrer",
}

_STATE_VALUES = {
    "operational": ("up", GREEN),
    "degraded": ("degraded", YELLOW),
    "outage": ("down", RED),
    "pending": ("pending", GREY),
    "paused": ("paused", GREY),
}


@dataclass(frozen=True, slots=True)
class Badge:
    label: str
    value: str
    color: str


def status_badge(data: BadgeData) -> Badge:
    value, color = _STATE_VALUES.get(overall_state(data.checks).key, ("unknown", GREY))
    return Badge("status", value, color)


def uptime_badge(data: BadgeData, period: str) -> Badge:
    label = f"uptime {period}"
    if data.uptime is None:
        return Badge(label, "no data", GREY)
    u = data.uptime
    color = (GREEN if u >= 99.9 else YELLOWGREEN if u >= 99.0 else YELLOW if u >= 97.0
             else ORANGE if u >= 95.0 else RED)
    return Badge(label, percent_text(u), color)


def response_badge(data: BadgeData, period: str) -> Badge:
    label = f"response {period}"
    if data.average_ms is None:
        return Badge(label, "no data", GREY)
    ms = data.average_ms
    color = (GREEN if ms < 300 else YELLOWGREEN if ms < 1000 else YELLOW if ms < 2000
             else ORANGE if ms < 5000 else RED)
    return Badge(label, ms_text(ms), color)


def domain_badge(data: BadgeData, now: datetime) -> Badge:
    check = data.checks.get("domain_expiry")
    if check is None or not check.is_enabled:
        return Badge("domain", "not checked", GREY)
    if check.status == "unsupported":
        return Badge("domain", "no RDAP", GREY)
    expires = parse_timestamp(check.meta.get("expires_at"))
    if check.status == "down":
        return Badge("domain", "expired" if expires is not None and expires <= now
                     else "on hold", RED)
    if expires is None:
        return Badge("domain", "no data", GREY)
    days = days_left(expires, now)
    color = GREEN if days > 30 else YELLOW if days > 7 else ORANGE if days >= 0 else RED
    return Badge("domain", f"{plural(days, 'day')} left" if days >= 0 else "expired", color)


# Widths of Verdana 11px glyphs (as shields measures them), rounded; others count as 7.
_NARROW = dict.fromkeys("ijlI.,:;!|' ", 3.5)
_WIDE = dict.fromkeys("mwMW%", 10.5)


def text_width(text: str) -> float:
    return sum(_NARROW.get(c, _WIDE.get(c, 7.0)) for c in text)


def render_badge(badge: Badge) -> str:
    """The SVG document: flat style, 20 px high, its words also in ``<title>`` and
    ``aria-label`` for screen readers."""
    lw = round(text_width(badge.label) + 10)
    vw = round(text_width(badge.value) + 10)
    w = lw + vw
    label, value = escape(badge.label), escape(badge.value)
    title = f"{label}: {value}"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="20" role="img" '
        f'aria-label="{title}" viewBox="0 0 {w} 20"><title>{title}</title>'
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" '
        'stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{w}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lw}" height="20" fill="{_LABEL_BG}"/>'
        f'<rect x="{lw}" width="{vw}" height="20" fill="{badge.color}"/>'
        f'<rect width="{w}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" '
        'font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{lw / 2:g}" y="15" fill="#010101" fill-opacity=".3">{label}</text>'
        f'<text x="{lw / 2:g}" y="14">{label}</text>'
        f'<text x="{lw + vw / 2:g}" y="15" fill="#010101" fill-opacity=".3">{value}</text>'
        f'<text x="{lw + vw / 2:g}" y="14">{value}</text></g></svg>'
    )


def _etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
    return "*" in tags or etag in tags


def _svg(request: web.Request, badge: Badge, status: int, cache: str) -> web.Response:
    body = render_badge(badge).encode()
    etag = _etag(body)
    headers = {**_HEADERS, "Cache-Control": cache, "ETag": etag}
    if status == 200 and _matches(request.headers.get("If-None-Match"), etag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=body, status=status, content_type="image/svg+xml",
                        charset="utf-8", headers=headers)


def _invalid(field: str, allowed: Any) -> web.Response:
    message = f"The {field} must be one of {', '.join(allowed)}."
    return web.json_response({"message": message, "errors": {field: [message]}}, status=422,
                             headers={**_HEADERS, "Cache-Control": CACHE_ERROR})


# Any one path segment reaches the handler, so that a malformed identifier gets the same
# SVG 404 as an unknown one (an <img> shows it), not the status page's HTML 404. It is only
# ever compared with the strict pattern and looked up, never used as a path.
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)


@routes.get("/{identifier}/badge.svg")
async def badge_svg(request: web.Request) -> web.Response:
    kind = request.query.get("type", "status")
    if kind not in TYPES:
        return _invalid("type", TYPES)
    period = request.query.get("period", DEFAULT_PERIOD[kind])
    if period not in PERIODS:
        return _invalid("period", PERIODS)
    identifier = request.match_info["identifier"]
    if not _IDENTIFIER.fullmatch(identifier):
        return _svg(request, Badge(kind, "not found", GREY), 404, CACHE_ERROR)
    now = utcnow()
    try:
        data = await request.app[STORE].badge_data(identifier, now - PERIODS[period], now)
    except DatabaseUnavailable:
        response = _svg(request, Badge(kind, "unavailable", GREY), 503, CACHE_ERROR)
        response.headers["Retry-After"] = "30"
        return response
    if data is None:
        return _svg(request, Badge(kind, "not found", GREY), 404, CACHE_ERROR)
    if kind == "uptime":
        badge = uptime_badge(data, period)
    elif kind == "response":
        badge = response_badge(data, period)
    elif kind == "domain":
        badge = domain_badge(data, now)
    else:
        badge = status_badge(data)
    return _svg(request, badge, 200, CACHE_OK)


_SVG = {"image/svg+xml": {"schema": {"type": "string"}}}
OPENAPI_PATHS: dict[str, Any] = {
    "/{identifier}/badge.svg": {
        "get": {
            "summary": "Badge (shields-style SVG): status, uptime or response time",
            "operationId": "getBadge",
            "security": [],
            "parameters": [
                {"name": "identifier", "in": "path", "required": True,
                 "description": "Anything else than a monitor's identifier is a 404.",
                 "schema": {"type": "string"}},
                {"name": "type", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": list(TYPES), "default": "status"}},
                {"name": "period", "in": "query", "required": False,
                 "description": "For uptime (default 30d) and response (default 24h).",
                 "schema": {"type": "string", "enum": list(PERIODS)}},
            ],
            "responses": {
                "200": {"description": "The badge (Cache-Control: public, max-age=60; ETag).",
                        "content": _SVG},
                "304": {"description": "Unchanged since the If-None-Match ETag."},
                "404": {"description": "Unknown identifier (a grey badge).", "content": _SVG},
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                "503": {"description": "The database is unavailable (a grey badge).",
                        "content": _SVG},
            },
        },
    },
}
