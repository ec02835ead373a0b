"""Maintenance windows API: GET and POST /webapi/maintenance, DELETE /webapi/maintenance/{id}.

A window covers the monitors listed in ``monitors`` (ids of the account's monitors), or
every monitor of the account, present and future, when ``monitors`` is absent or null.

- One-off: ``starts_at`` and ``ends_at`` (UTC, ``YYYY-MM-DD HH:MM:SS``; ``ends_at`` after
  ``starts_at``, at most 31 days later).
- Weekly: ``weekday`` (``monday`` .. ``sunday``), ``start_time`` (local ``HH:MM`` or
  ``HH:MM:SS``), ``duration_seconds`` (60 .. 604800) and ``time_zone`` (an IANA name such as
  ``Europe/Berlin``; the window follows that zone's clock across daylight-saving changes).
- ``reason``: optional text (at most 500 characters), shown on the status page.

During a window probes go on and are stored; no downtime or uptime-restored webhook is
sent; the time is not counted against uptime (statistics gain ``maintenance_seconds``).
An outage still open when a window ends is judged afresh from that moment.

POST answers 201 with the window; GET 200 with the account's windows (by id); DELETE 204.
A window object always has every key: ``id``, ``type`` (``one_off`` or ``weekly``),
``reason``, ``monitors`` (ids, or null for every monitor), ``starts_at``, ``ends_at``,
``weekday``, ``start_time``, ``duration_seconds``, ``time_zone`` (null where the type has
none), ``created_at`` (the window counts from then on: a start in the past is not applied
retroactively), ``active`` (on now), and ``next_starts_at`` / ``next_ends_at`` (the
occurrence on now, else the next one; null when a one-off window is over).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

from engine.db.accounts import Account
from engine.db.monitor_reads import STATS_WINDOW
from engine.db.monitor_records import StatisticsRecord
from engine.domain.maintenance import WEEKDAYS, Window, net_of_maintenance, next_span, spans_of
from engine.domain.stats import uptime_percentage
from engine.domain.timefmt import fmt, utcnow
from engine.monitors import validation
from engine.runtime.errors import ValidationFailed
from engine.web.api import openapi
from engine.web.api.maintenance_uptime import WINDOWS_CACHE
from engine.web.jsonio import empty_response, json_response, read_body
from engine.web.keys import ACCOUNT, STORE

routes = web.RouteTableDef()

MAX_REASON = 500
MAX_ONE_OFF = timedelta(days=31)
MIN_DURATION = 60
MAX_DURATION = 7 * 86400
MAX_MONITORS = 10_000
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$")
_CLOCK = re.compile(r"^(\d{2}):(\d{2})(?::(\d{2}))?$")
_ZONE = re.compile(r"^[A-Za-z0-9_+\-]+(/[A-Za-z0-9_+\-]+)*$")
_ONE_OFF_FIELDS = ("starts_at", "ends_at")
_WEEKLY_FIELDS = ("weekday", "start_time", "duration_seconds", "time_zone")


def _fail(field: str, message: str) -> ValidationFailed:
    return ValidationFailed({field: [message]})


def _timestamp(value: Any, field: str) -> datetime:
    if not isinstance(value, str) or not _TIMESTAMP.match(value):
        raise _fail(field, f"The {field} must be a UTC time as YYYY-MM-DD HH:MM:SS.")
    try:
        return datetime.strptime(value, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        raise _fail(field, f"The {field} is not a valid date and time.") from None


def _clock(value: Any, field: str = "start_time") -> time:
    m = _CLOCK.match(value) if isinstance(value, str) else None
    if m is None:
        raise _fail(field, f"The {field} must be a local time as HH:MM or HH:MM:SS.")
    h, mi, sec = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if h > 23 or mi > 59 or sec > 59:
        raise _fail(field, f"The {field} is not a valid time of day.")
    return time(h, mi, sec)


def _zone(value: Any, field: str = "time_zone") -> str:
    message = f"The {field} must be an IANA time zone name, such as Europe/Berlin."
    if not isinstance(value, str) or len(value) > 64 or not _ZONE.match(value):
        raise _fail(field, message)
    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise _fail(field, message) from None
    return value


def _weekday(value: Any, field: str = "weekday") -> int:
    if not isinstance(value, str) or value.lower() not in WEEKDAYS:
        raise _fail(field, f"The {field} must be one of: {', '.join(WEEKDAYS)}.")
    return WEEKDAYS.index(value.lower())


def _monitors(value: Any, field: str = "monitors") -> tuple[int, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or len(value) > MAX_MONITORS:
        raise _fail(field, f"The {field} must be a non-empty list of monitor ids, or null "
                           "for every monitor of the account.")
    ids = []
    for item in value:
        number = validation.as_int(item, field)
        if not 1 <= number <= validation.MAX_ID:
            raise _fail(field, f"The {field} must hold monitor ids.")
        ids.append(number)
    return tuple(sorted(set(ids)))


def _reason(value: Any, field: str = "reason") -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _fail(field, f"The {field} must be a string.")
    if len(value) > MAX_REASON:
        raise _fail(field, f"The {field} may not be longer than {MAX_REASON} characters.")
    if validation.has_control_chars(value):
        raise _fail(field, f"The {field} may not contain control characters.")
    return value


def validate_window(body: Mapping[str, Any]) -> Window:
    """The POST body (see the module docstring) as a window to create (``id`` 0); every
    field's error at once."""
    errors: dict[str, list[str]] = {}

    def run(fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except ValidationFailed as exc:
            for key, messages in exc.errors.items():
                errors.setdefault(key, []).extend(messages)
            return None

    monitors = run(_monitors, body.get("monitors"))
    reason = run(_reason, body.get("reason"))
    one_off = [f for f in _ONE_OFF_FIELDS if validation.present(body, f)]
    weekly = [f for f in _WEEKLY_FIELDS if validation.present(body, f)]
    if one_off and weekly:
        errors.setdefault("body", []).append(
            "A window is one-off (starts_at, ends_at) or weekly (weekday, start_time, "
            "duration_seconds, time_zone), not both.")
        raise ValidationFailed(errors)
    if weekly:
        for f in _WEEKLY_FIELDS:
            if f not in weekly:
                errors.setdefault(f, []).append(f"The {f} field is required for a weekly window.")
        weekday = run(_weekday, body["weekday"]) if "weekday" in weekly else None
        start = run(_clock, body["start_time"]) if "start_time" in weekly else None
        duration = run(
            validation.validate_int_range, body["duration_seconds"], "duration_seconds",
            MIN_DURATION, MAX_DURATION,
        ) if "duration_seconds" in weekly else None
        zone = run(_zone, body["time_zone"]) if "time_zone" in weekly else None
        if errors:
            raise ValidationFailed(errors)
        return Window(0, reason, monitors, weekday=weekday, start_time=start,
                      duration_s=duration, time_zone=zone)
    for f in _ONE_OFF_FIELDS:
        if f not in one_off:
            errors.setdefault(f, []).append(
                f"The {f} field is required (or give a weekly window: weekday, start_time, "
                "duration_seconds, time_zone).")
    starts = run(_timestamp, body["starts_at"], "starts_at") if "starts_at" in one_off else None
    ends = run(_timestamp, body["ends_at"], "ends_at") if "ends_at" in one_off else None
    if starts is not None and ends is not None:
        if ends <= starts:
            errors.setdefault("ends_at", []).append("The ends_at must be after starts_at.")
        elif ends - starts > MAX_ONE_OFF:
            errors.setdefault("ends_at", []).append(
                "A one-off window may last at most 31 days.")
    if errors:
        raise ValidationFailed(errors)
    return Window(0, reason, monitors, starts_at=starts, ends_at=ends)


def window_view(w: Window, now: datetime) -> dict[str, Any]:
    span = next_span(w, now)
    return {
        "id": w.id,
        "type": "weekly" if w.weekly else "one_off",
        "reason": w.reason,
        "monitors": None if w.monitor_ids is None else list(w.monitor_ids),
        "starts_at": fmt(w.starts_at),
        "ends_at": fmt(w.ends_at),
        "weekday": None if w.weekday is None else WEEKDAYS[w.weekday],
        "start_time": None if w.start_time is None else w.start_time.strftime("%H:%M:%S"),
        "duration_seconds": w.duration_s,
        "time_zone": w.time_zone,
        "created_at": fmt(w.created_at),
        "active": span is not None and span[0] <= now < span[1],
        "next_starts_at": fmt(span[0]) if span else None,
        "next_ends_at": fmt(span[1]) if span else None,
    }


def statistics_with_maintenance(
    body: dict[str, Any], stats: StatisticsRecord, windows: list[Window]
) -> dict[str, Any]:
    """The statistics ``body`` (views.statistics) with maintenance left out of the uptime:
    ``100 x (1 - (outage - outage in windows) / (enabled - windows))`` over the 30 days, and
    ``maintenance_seconds`` added, only when windows covered some of the 30 days (without
    any, the body stays exactly api.md's). The outage time inside windows is taken from the
    outages listed (the newest 1,000)."""
    now = stats.now
    since = now - STATS_WINDOW
    spans = spans_of(windows, since, now)
    figures = stats.figures
    if figures is None:  # no uptime check: nothing to net
        return body
    outage_s, enabled_s, maintenance = net_of_maintenance(
        figures.outage_seconds, figures.enabled_seconds,
        [(o.started_at, o.ended_at or now) for o in stats.outages], spans, since, now)
    if maintenance <= 0:
        return body
    body["uptime_percentage_30d"] = uptime_percentage(outage_s, enabled_s, figures.checks_run)
    body["maintenance_seconds"] = int(maintenance)
    return body


def _account(request: web.Request) -> Account:
    account: Account = request[ACCOUNT]
    return account


@routes.get("/webapi/maintenance")
async def list_windows(request: web.Request) -> web.Response:
    windows = await request.app[STORE].list_windows(_account(request).id)
    now = utcnow()
    return json_response([window_view(w, now) for w in windows])


@routes.post("/webapi/maintenance")
async def create_window(request: web.Request) -> web.Response:
    body = await read_body(request)
    account_id = _account(request).id
    window = await request.app[STORE].create_window(account_id, validate_window(body))
    request.app[WINDOWS_CACHE].forget(account_id)
    return json_response(window_view(window, utcnow()), status=201)


@routes.delete("/webapi/maintenance/{id}")
async def delete_window(request: web.Request) -> web.Response:
    window_id = validation.parse_id(request.match_info["id"])
    account_id = _account(request).id
    await request.app[STORE].delete_window(account_id, window_id)
    request.app[WINDOWS_CACHE].forget(account_id)
    return empty_response()


# --- OpenAPI -----------------------------------------------------------------------------

_TS = openapi.TIMESTAMP
_ID = openapi.INT64
_CLOCK_SCHEMA = {"type": "string", "pattern": r"^([01]\d|2[0-3]):[0-5]\d(:[0-5]\d)?$",
                 "example": "02:00"}
_ZONE_SCHEMA = {"type": "string", "maxLength": 64, "example": "Europe/Berlin",
                "description": "An IANA time zone name."}

_nullable = openapi.nullable


_MONITORS = _nullable({
    "type": "array", "items": _ID, "minItems": 1, "maxItems": MAX_MONITORS,
    "description": "Monitor ids of the account; null or absent: every monitor of the account.",
})
_REASON = {"type": "string", "maxLength": MAX_REASON,
           "pattern": r"^[^\u0000-\u001f\u007f-\u009f\u2028\u2029]*$"}
_WINDOW: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": _ID,
        "type": {"type": "string", "enum": ["one_off", "weekly"]},
        "reason": {"type": "string"},
        "monitors": _MONITORS,
        "starts_at": _nullable(_TS),
        "ends_at": _nullable(_TS),
        "weekday": _nullable({"type": "string", "enum": list(WEEKDAYS)}),
        "start_time": _nullable(_CLOCK_SCHEMA),
        "duration_seconds": _nullable({"type": "integer", "minimum": MIN_DURATION,
                                       "maximum": MAX_DURATION}),
        "time_zone": _nullable({"type": "string"}),
        "created_at": {**_TS, "description": "The window counts from then on: no earlier "
                                             "time is maintenance."},
        "active": {"type": "boolean", "description": "A window is on now."},
        "next_starts_at": _nullable({**_TS, "description": "The occurrence on now, else the "
                                                           "next; null when it is over."}),
        "next_ends_at": _nullable(_TS),
    },
}
_WINDOW["required"] = list(_WINDOW["properties"])
_ONE_OFF_BODY = {
    "type": "object",
    "properties": {"monitors": _MONITORS, "reason": _nullable(_REASON),
                   "starts_at": _TS, "ends_at": _TS},
    "required": ["starts_at", "ends_at"],
}
_WEEKLY_BODY = {
    "type": "object",
    "properties": {
        "monitors": _MONITORS, "reason": _nullable(_REASON),
        "weekday": {"type": "string", "enum": list(WEEKDAYS)},
        "start_time": _CLOCK_SCHEMA,
        "duration_seconds": {"type": "integer", "minimum": MIN_DURATION,
                             "maximum": MAX_DURATION},
        "time_zone": _ZONE_SCHEMA,
    },
    "required": ["weekday", "start_time", "duration_seconds", "time_zone"],
}


OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/maintenance": {
        "get": {
            "summary": "The account's maintenance windows",
            "operationId": "listMaintenanceWindows",
            "responses": {
                "200": {"description": "Every window of the account, by id.",
                        "content": {"application/json": {
                            "schema": {"type": "array", "items": _WINDOW}}}},
                **openapi.common_responses(),
            },
        },
        "post": {
            "summary": "Create a maintenance window (one-off or weekly)",
            "description": "During a window probes go on and are stored, no downtime or "
                           "uptime-restored webhook is sent and the time is not counted "
                           "against uptime; an outage open when it ends is judged afresh.",
            "operationId": "createMaintenanceWindow",
            "requestBody": {"required": True, "content": {"application/json": {
                "schema": {"oneOf": [_ONE_OFF_BODY, _WEEKLY_BODY]}}}},
            "responses": {
                "201": {"description": "The window.",
                        "content": {"application/json": {"schema": _WINDOW}}},
                "413": {"$ref": "#/components/responses/TooLarge"},
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                **openapi.common_responses(),
            },
        },
    },
    "/webapi/maintenance/{id}": {
        "delete": {
            "summary": "Delete a maintenance window",
            "operationId": "deleteMaintenanceWindow",
            "parameters": [{"$ref": "#/components/parameters/Id"}],
            "responses": {
                "204": {"description": "Deleted."},
                "404": {"$ref": "#/components/responses/NotFound"},
                **openapi.common_responses(),
            },
        },
    },
}
