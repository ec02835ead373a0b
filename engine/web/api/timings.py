"""``GET /webapi/monitors/{id}/timings?period=24h|7d|30d``: where the uptime probes' time
went, per phase, per hour (24h) or per UTC day (7d, 30d).

Response (200)::

    {"monitor_id": 7, "period": "24h", "resolution": "hour",
     "from": "2026-11-25 07:00:00", "to": "2026-11-26 06:59:59",
     "timings": [{"start": "2026-11-25 07:00:00", "probes": 120, "responses": 120,
                  "dns_ms": {"p50": 1.21, "p95": 3.4}, "connect_ms": {...},
                  "tls_ms": {...}, "ttfb_ms": {...}, "total_ms": {...}}, ...]}

One entry per slot of the period, oldest first, the last one the slot holding now (partial).
``probes`` counts the check's uptime probes in the slot (confirmation probes excluded, as in
the statistics); the phases describe the ``responses`` among them (probes that got an HTTP
response), and are null where no such phase was measured (``tls_ms`` of plain HTTP,
``dns_ms`` of an IP address, any phase of a slot without responses). Quantiles come from the
fixed histogram of :mod:`engine.domain.timings` (within 9% of the exact value); milliseconds,
two decimals. The statistics endpoint is unchanged.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from aiohttp import web

from engine.db.store import Store
from engine.domain.timefmt import fmt, utcnow
from engine.domain.timings import PERIODS, PHASES, QUANTILES, Slot, period_window, summarize
from engine.monitors import validation
from engine.runtime.errors import NotFound, ValidationFailed
from engine.web.jsonio import json_response
from engine.web.keys import ACCOUNT, STORE

routes = web.RouteTableDef()

DEFAULT_PERIOD = "24h"


def parse_period(query: Any) -> str:
    period = query.get("period", DEFAULT_PERIOD)
    if period not in PERIODS:
        raise ValidationFailed(
            {"period": [f"The period must be one of {', '.join(PERIODS)}."]})
    return str(period)


async def check_slots(store: Store, check_id: int, period: str, now: datetime) -> list[Slot]:
    """Every slot of ``period`` up to ``now`` for one uptime check, empty ones included."""
    start, width, count = period_window(period, now)
    figures = await store.check_timings(check_id, start, now, width)
    slots = []
    for i in range(count):
        f = figures.get(i)
        slot_start = start + width * i
        if f is None:
            slots.append(summarize(slot_start, 0, 0, ()))
        else:
            slots.append(summarize(slot_start, f.probes, f.responses, f.cells))
    return slots


def slot_json(slot: Slot) -> dict[str, Any]:
    out: dict[str, Any] = {
        "start": fmt(slot.start), "probes": slot.probes, "responses": slot.responses}
    for name in PHASES:
        out[f"{name}_ms"] = slot.phases[name]
    return out


@routes.get("/webapi/monitors/{id}/timings")
async def monitor_timings(request: web.Request) -> web.Response:
    monitor_id = validation.parse_id(request.match_info["id"])
    period = parse_period(request.query)
    store: Store = request.app[STORE]
    checks = await store.get_check_ids(request[ACCOUNT].id, monitor_id)
    check_id = checks.get("uptime")
    if check_id is None:  # every monitor has one; a half-deleted one reads as gone
        raise NotFound("Monitor not found.")
    now = utcnow()
    slots = await check_slots(store, check_id, period, now)
    start, width, count = period_window(period, now)
    return json_response({
        "monitor_id": monitor_id,
        "period": period,
        "resolution": "hour" if width.total_seconds() == 3600 else "day",
        "from": fmt(start),
        "to": fmt(start + width * count - timedelta(seconds=1)),
        "timings": [slot_json(s) for s in slots],
    })


_QUANTILES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {label: {"type": ["number", "null"]} for label, _ in QUANTILES},
    "required": [label for label, _ in QUANTILES],
}
OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/monitors/{id}/timings": {
        "get": {
            "summary": "Per-phase timings (p50, p95) of the uptime check, per hour or day",
            "operationId": "getMonitorTimings",
            "parameters": [
                {"$ref": "#/components/parameters/Id"},
                {"name": "period", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": list(PERIODS),
                            "default": DEFAULT_PERIOD},
                 "description": "24h: 24 hourly entries; 7d and 30d: daily entries (UTC)."},
            ],
            "responses": {
                "200": {
                    "description": "One entry per hour or day, oldest first.",
                    "content": {"application/json": {"schema": {
                        "type": "object",
                        "properties": {
                            "monitor_id": {"type": "integer"},
                            "period": {"type": "string", "enum": list(PERIODS)},
                            "resolution": {"type": "string", "enum": ["hour", "day"]},
                            "from": {"type": "string"},
                            "to": {"type": "string"},
                            "timings": {"type": "array", "items": {
                                "type": "object",
                                "properties": {
                                    "start": {"type": "string"},
                                    "probes": {"type": "integer", "minimum": 0},
                                    "responses": {"type": "integer", "minimum": 0},
                                    **{f"{p}_ms": _QUANTILES_SCHEMA for p in PHASES},
                                },
                                "required": ["start", "probes", "responses",
                                             *(f"{p}_ms" for p in PHASES)],
                            }},
                        },
                        "required": ["monitor_id", "period", "resolution", "from", "to",
                                     "timings"],
                    }}},
                },
                "401": {"$ref": "#/components/responses/Unauthenticated"},
                "404": {"$ref": "#/components/responses/NotFound"},
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                "429": {"$ref": "#/components/responses/TooManyRequests"},
                "503": {"$ref": "#/components/responses/Unavailable"},
            },
        },
    },
}
