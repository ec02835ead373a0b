"""Monitors as code over HTTP (docs/monitors-as-code.md).

- ``PUT /webapi/monitors[?prune=true][&dry_run=true]``: the body is the file's JSON form
  (``{"monitors": [...]}``, engine.monitors.file); the account's monitors are made to match
  it in one transaction, all or nothing. 200 with what was created, updated and deleted
  (``dry_run``: what would be; nothing is written); 422 with every bad entry keyed
  ``monitors[<index>].<field>``. Before any entry is validated: more than
  ``engine.monitors.apply.MAX_ENTRIES`` entries is a 422 under ``monitors``, and more than
  the plan allows a 422 ``monitor_limit``; entries are then validated in a worker thread.
  Bodies up to :data:`MAX_SET_BYTES`: the JSON is parsed on the event loop (about 10 ms a
  MiB), so this bounds how long one set holds it; 20,000 monitors with assertions are
  about 5 MiB.
- ``GET /webapi/monitors/export[?format=toml|json]``: the account's monitors as the file
  (TOML, the default) or its JSON form (what ``PUT`` takes).

These routes are registered before the API's own (engine.web.app), so the fixed path
``/webapi/monitors/export`` is matched before ``/webapi/monitors/{id}``, whose ids are
numbers only.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.cluster.nodes import capacity_check
from engine.db.accounts import Account
from engine.domain.timefmt import fmt, utcnow
from engine.monitors.apply import apply_document, export_document
from engine.monitors.file import (
    CHECK_FIELDS,
    KEY_PATTERN,
    MAX_FILE_BYTES,
    MAX_KEY_LENGTH,
    export_header,
    render_toml,
)
from engine.monitors.validation import (
    MAX_ALIAS_LENGTH,
    MAX_EXPIRY_DAYS,
    MAX_EXPIRY_PERCENT,
    MAX_ID,
    MAX_RECOVERY_THRESHOLD,
    MAX_URL_LENGTH,
)
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import ALLOWED_INTERVALS, ALLOWED_THRESHOLDS
from engine.web.jsonio import json_response, read_body
from engine.web.keys import ACCOUNT, SETTINGS, STORE

MAX_SET_BYTES = MAX_FILE_BYTES
TOML = "application/toml"
SET_PATH = "/webapi/monitors"
EXPORT_PATH = "/webapi/monitors/export"
# (method, path) -> the largest body it takes, above the API's 64 KiB (engine.web.app).
BODY_LIMITS = {("PUT", SET_PATH): MAX_SET_BYTES}

routes = web.RouteTableDef()

_TRUE = frozenset({"true", "1"})
_FALSE = frozenset({"false", "0"})


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name)
    if raw is None:
        return False
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValidationFailed({name: [f"The {name} parameter must be true or false."]})


@routes.put(SET_PATH)
async def apply_monitors(request: web.Request) -> web.Response:
    prune = _flag(request, "prune")
    dry_run = _flag(request, "dry_run")
    account: Account = request[ACCOUNT]
    doc = await read_body(request, max_bytes=MAX_SET_BYTES)
    result = await apply_document(
        request.app[STORE], request.app[SETTINGS], account.id, account.plan, doc,
        prune=prune, dry_run=dry_run)
    body = result.as_json()
    if not dry_run and result.plan.creates:
        # Past the live nodes' capacity: said, never refused (docs/operations.md).
        warning = await capacity_check(request.app[STORE], request.app[SETTINGS])
        if warning is not None:
            body["warnings"] = [warning]
    return json_response(body)


@routes.get(EXPORT_PATH)
async def export_monitors(request: web.Request) -> web.Response:
    form = request.query.get("format", "toml")
    if form not in ("toml", "json"):
        raise ValidationFailed({"format": ["The format parameter must be toml or json."]})
    account: Account = request[ACCOUNT]
    doc = await export_document(request.app[STORE], account.id)
    if form == "json":
        return json_response(doc)
    header = export_header(account.id, account.name, fmt(utcnow()))
    return web.Response(text=render_toml(doc, header), content_type=TOML, charset="utf-8")


# --- OpenAPI ---------------------------------------------------------------------------------

_COMMON = {
    "401": {"$ref": "#/components/responses/Unauthenticated"},
    "429": {"$ref": "#/components/responses/TooManyRequests"},
    "503": {"$ref": "#/components/responses/Unavailable"},
}
_CHECK_PROPS: dict[str, dict[str, Any]] = {
    "interval": {"type": "integer", "enum": list(ALLOWED_INTERVALS), "nullable": True},
    "notification_threshold": {"type": "integer", "enum": list(ALLOWED_THRESHOLDS),
                               "nullable": True},
    "expiry_threshold_days": {"type": "integer", "minimum": 0, "maximum": MAX_EXPIRY_DAYS,
                              "nullable": True},
    "recovery_threshold": {"type": "integer", "minimum": 0,
                           "maximum": MAX_RECOVERY_THRESHOLD, "nullable": True},
    "expiry_threshold_percent": {"type": "integer", "minimum": 0,
                                 "maximum": MAX_EXPIRY_PERCENT, "nullable": True},
    "enabled": {"type": "boolean", "nullable": True},
}
_KEY = {"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": KEY_PATTERN}
_ENTRY = {
    "type": "object",
    "description": "One monitor; every field but url is optional (omitted: the default, as "
                   "on create). Named by key when given, else by url.",
    "properties": {
        "key": {**_KEY, "nullable": True},
        "url": {"type": "string", "maxLength": MAX_URL_LENGTH},
        "alias": {"type": "string", "maxLength": MAX_ALIAS_LENGTH, "nullable": True},
        **{kind: {"type": "object", "nullable": True, "additionalProperties": False,
                  "properties": {k: _CHECK_PROPS[k] for k in fields}}
           for kind, fields in CHECK_FIELDS.items()},
    },
    "required": ["url"],
    "additionalProperties": False,
}
# A heartbeat of a set (engine/monitors/heartbeat_file.py): its create body's fields, named by
# key; the heartbeat rules say what each holds (422 naming the field).
_HEARTBEAT_ENTRY = {
    "type": "object",
    "description": "One heartbeat, named by key; the fields of a heartbeat's create body.",
    "properties": {
        "key": _KEY,
        "alias": {"type": "string", "maxLength": MAX_ALIAS_LENGTH},
        **{name: {"type": "integer", "minimum": 0}
           for name in ("period", "grace", "max_runtime", "min_runtime", "min_interval",
                        "recovery_threshold")},
        "schedule": {"type": "string"},
        "time_zone": {"type": "string"},
        "slug": {"type": "string"},
        "ping_uuid": {"type": "string", "format": "uuid"},
        "assertions": {"type": "array", "items": {"type": "object"}},
        "enabled": {"type": "boolean"},
    },
    "required": ["key"],
    "additionalProperties": False,
}
_MONITOR_SET = {
    "type": "object",
    "properties": {"monitors": {"type": "array", "items": _ENTRY},
                   "heartbeats": {"type": "array", "items": _HEARTBEAT_ENTRY}},
    "required": ["monitors"],
    "additionalProperties": False,
}
_ID = {"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID}
_NULLABLE_KEY = {**_KEY, "nullable": True}
_APPLY_RESULT = {
    "type": "object",
    "properties": {
        "dry_run": {"type": "boolean"},
        "created": {"type": "array", "items": {
            "type": "object",
            "properties": {"index": {"type": "integer", "minimum": 0},
                           "id": {**_ID, "nullable": True},
                           "key": _NULLABLE_KEY, "url": {"type": "string"}},
            "required": ["index", "id", "key", "url"]}},
        "updated": {"type": "array", "items": {
            "type": "object",
            "properties": {"index": {"type": "integer", "minimum": 0}, "id": _ID,
                           "key": _NULLABLE_KEY, "url": {"type": "string"},
                           "changes": {"type": "array", "items": {"type": "string"}}},
            "required": ["index", "id", "key", "url", "changes"]}},
        "deleted": {"type": "array", "items": {
            "type": "object",
            "properties": {"id": _ID, "key": _NULLABLE_KEY, "url": {"type": "string"}},
            "required": ["id", "key", "url"]}},
        "unchanged": {"type": "integer", "minimum": 0},
        "kept": {"type": "integer", "minimum": 0},
        # Present when the creates take the live nodes past their measured capacity.
        "warnings": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["dry_run", "created", "updated", "deleted", "unchanged", "kept"],
}
_BOOL_PARAM = {"type": "string", "enum": ["true", "false"]}

OPENAPI_PATHS: dict[str, Any] = {
    SET_PATH: {
        "put": {
            "summary": "Make the account's monitors match a monitor set (monitors as code)",
            "description": "One transaction, all or nothing. Monitors the set does not name "
                           "are kept unless prune=true. dry_run=true writes nothing.",
            "operationId": "applyMonitors",
            "parameters": [
                {"name": "prune", "in": "query", "required": False, "schema": _BOOL_PARAM},
                {"name": "dry_run", "in": "query", "required": False, "schema": _BOOL_PARAM},
            ],
            "requestBody": {"required": True,
                            "content": {"application/json": {"schema": _MONITOR_SET}}},
            "responses": {
                "200": {"description": "What was (or, with dry_run, would be) created, "
                                       "updated and deleted.",
                        "content": {"application/json": {"schema": _APPLY_RESULT}}},
                "408": {"$ref": "#/components/responses/RequestTimeout"},
                "413": {"description": f"The body is over {MAX_SET_BYTES // 2**20} MiB.",
                        "content": {"application/json": {
                            "schema": {"$ref": "#/components/schemas/Error"}}}},
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                **_COMMON,
            },
        },
    },
    EXPORT_PATH: {
        "get": {
            "summary": "The account's monitors as a monitor set (TOML, or its JSON form)",
            "operationId": "exportMonitors",
            "parameters": [{"name": "format", "in": "query", "required": False,
                            "schema": {"type": "string", "enum": ["toml", "json"],
                                       "default": "toml"}}],
            "responses": {
                "200": {"description": "The monitor set.",
                        "content": {TOML: {"schema": {"type": "string"}},
                                    "application/json": {"schema": _MONITOR_SET}}},
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                **_COMMON,
            },
        },
    },
}
