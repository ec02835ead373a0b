"""Heartbeat monitors in the /webapi monitor and check endpoints, and their shapes.

:mod:`engine.web.api.monitors` hands a body with ``"type": "heartbeat"`` (create), a
heartbeat monitor (update) or check (check update) to the functions here, and the list and
get responses through :func:`shaped`. A heartbeat monitor's object:

``{"id", "identifier", "alias", "type": "heartbeat", "ping_url", "status_page", "period" |
"schedule" + "time_zone", "grace", "max_runtime", "min_runtime", "min_interval", ["slug"],
["assertions"], "checks": {"heartbeat": Check}}``; the check's ``meta`` holds the facts of
the pings (``last_ping_at``, ``next_expected_at``, ``last_start_at``,
``last_duration_seconds``, ``last_exit_status``, ``last_body``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import asyncpg
from aiohttp import web

from engine.db.heartbeats import HeartbeatRecord
from engine.db.monitor_records import CheckRecord, MonitorRecord
from engine.db.store import Store
from engine.domain import heartbeat as hb
from engine.monitors import heartbeat as hbconfig
from engine.monitors.validation import MAX_RECOVERY_THRESHOLD, present, validate_alias
from engine.monitors.validation import validate_int_range as int_range
from engine.runtime.errors import ValidationFailed
from engine.web.api import views
from engine.web.jsonio import json_response
from engine.web.keys import SETTINGS, STORE

HEARTBEAT = "heartbeat"


def ping_url(base_url: str, ping_uuid: str) -> str:
    return f"{base_url.rstrip('/')}/ping/{ping_uuid}"


def is_heartbeat_monitor(monitor: MonitorRecord) -> bool:
    return HEARTBEAT in monitor.checks


def settings_fields(beat: HeartbeatRecord) -> dict[str, Any]:
    c = beat.config
    out: dict[str, Any] = (
        {"period": c.period_s} if c.schedule is None
        else {"schedule": c.schedule, "time_zone": c.time_zone}
    )
    out.update({"grace": c.grace_s, "max_runtime": c.max_runtime,
                "min_runtime": c.min_runtime_s, "min_interval": c.min_interval_s})
    return out


def _check(check: CheckRecord, beat: HeartbeatRecord, full: bool) -> dict[str, Any]:
    if not full:
        return views.check_reduced(check)
    out = views.check_full(check, None)
    out["meta"] = hb.meta(beat.facts, beat.config, beat.last_body)
    return out


def monitor_object(
    monitor: MonitorRecord, beat: HeartbeatRecord, base_url: str, *, full: bool
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": monitor.id,
        "identifier": monitor.identifier,
        "alias": monitor.alias,
        "type": HEARTBEAT,
        "ping_url": ping_url(base_url, beat.ping_uuid),
        "status_page": views.status_page_url(base_url, monitor.identifier),
        **settings_fields(beat),
    }
    if beat.slug is not None:
        out["slug"] = beat.slug
    if monitor.assertions:
        out["assertions"] = monitor.assertions
    out["checks"] = {HEARTBEAT: _check(monitor.checks[HEARTBEAT], beat, full)}
    return out


async def shaped(
    request: web.Request, monitors: list[MonitorRecord], base_url: str
) -> list[dict[str, Any]]:
    """The list/get shapes: URL monitors as :func:`views.monitor_full`, heartbeats as
    :func:`monitor_object` (their rows read in one query)."""
    ids = [m.checks[HEARTBEAT].id for m in monitors if is_heartbeat_monitor(m)]
    beats = await request.app[STORE].heartbeats_of(ids) if ids else {}
    out = []
    for m in monitors:
        beat = beats.get(m.checks[HEARTBEAT].id) if is_heartbeat_monitor(m) else None
        out.append(views.monitor_full(m, base_url) if beat is None
                   else monitor_object(m, beat, base_url, full=True))
    return out


def _taken(exc: asyncpg.UniqueViolationError) -> ValidationFailed:
    field = "slug" if "slug" in str(exc) else "ping_uuid"
    return ValidationFailed({field: [f"The {field} is already taken."]})


async def create(request: web.Request, account_id: int, plan_limit: int,
                 body: Mapping[str, Any]) -> web.Response:
    command = hbconfig.validate_heartbeat_create(body)
    store = request.app[STORE]
    try:
        monitor, beat = await store.create_heartbeat(
            account_id, alias=command.alias, config=command.config,
            monitor_limit=plan_limit, recovery_threshold=command.recovery_threshold,
            slug=command.slug, ping_uuid=command.ping_uuid)
    except asyncpg.UniqueViolationError as exc:
        raise _taken(exc) from None
    if command.assertions:
        monitor = await store.update_monitor(account_id, monitor.id,
                                             config=(None, command.assertions))
    base = request.app[SETTINGS].public_base_url
    return json_response(monitor_object(monitor, beat, base, full=False), status=201)


def _schedule_changes(body: Mapping[str, Any], errors: dict[str, list[str]]) -> dict[str, Any]:
    """The body's heartbeat settings as stored columns; their errors go into ``errors``."""
    try:
        return hbconfig.validate_heartbeat_update(body)
    except ValidationFailed as exc:
        errors.update(exc.errors)
        return {}


async def _beat_after(store: Store, account_id: int, check_id: int,
                      changes: dict[str, Any]) -> HeartbeatRecord:
    """The heartbeat with ``changes`` written (none: as stored)."""
    if changes:
        return await store.update_heartbeat(account_id, check_id, changes)
    return (await store.heartbeats_of([check_id]))[check_id]


async def update_monitor(request: web.Request, account_id: int, monitor: MonitorRecord,
                         body: Mapping[str, Any]) -> web.Response:
    """Alias, schedule settings, slug-less; ``url`` is a 422 (a heartbeat has none)."""
    errors: dict[str, list[str]] = {}
    if present(body, "url"):
        errors["url"] = ["A heartbeat has no url."]
    alias = None
    if present(body, "alias"):
        try:
            alias = validate_alias(body["alias"])
        except ValidationFailed as exc:
            errors.update(exc.errors)
    changes = _schedule_changes(body, errors)
    if errors:
        raise ValidationFailed(errors)
    store = request.app[STORE]
    check_id = monitor.checks[HEARTBEAT].id
    if alias is not None:
        monitor = await store.update_monitor(account_id, monitor.id, alias=alias)
    beat = await _beat_after(store, account_id, check_id, changes)
    base = request.app[SETTINGS].public_base_url
    return json_response(monitor_object(monitor, beat, base, full=False))


async def update_check(request: web.Request, account_id: int, check_id: int,
                       body: Mapping[str, Any]) -> web.Response:
    """The check update of a heartbeat: its schedule settings and ``recovery_threshold``."""
    errors: dict[str, list[str]] = {}
    for field in ("interval", "notification_threshold", "expiry_threshold_days",
                  "expiry_threshold_percent"):
        if present(body, field):
            errors[field] = [f"A heartbeat check has no {field}; use period or schedule."
                             if field == "interval" else f"A heartbeat check has no {field}."]
    recovery = None
    if present(body, "recovery_threshold"):
        try:
            recovery = int_range(body["recovery_threshold"], "recovery_threshold", 0,
                                 MAX_RECOVERY_THRESHOLD)
        except ValidationFailed as exc:
            errors.update(exc.errors)
    changes = _schedule_changes(body, errors)
    if errors:
        raise ValidationFailed(errors)
    store = request.app[STORE]
    beat = await _beat_after(store, account_id, check_id, changes)
    check = await store.update_check(account_id, check_id, recovery_threshold_s=recovery)
    out = views.check_updated(check)
    out.update(settings_fields(beat))
    return json_response(out)
