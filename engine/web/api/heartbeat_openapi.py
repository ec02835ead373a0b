"""The heartbeat shapes of the OpenAPI document (:mod:`engine.web.api.openapi` merges them):
the create and update bodies with ``"type": "heartbeat"``, the heartbeat monitor and its
check, and where a monitor body or answer may be either kind (``oneOf``)."""

from __future__ import annotations

from typing import Any

from engine.monitors.heartbeat import MAX_DURATION, MIN_PERIOD
from engine.monitors.validation import MAX_ALIAS_LENGTH, MAX_RECOVERY_THRESHOLD

_TS = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$",
       "nullable": True}
_SECONDS = {"type": "integer", "minimum": 1, "maximum": MAX_DURATION}
_PERIOD = {"type": "integer", "minimum": MIN_PERIOD, "maximum": MAX_DURATION}
_STATUSES = ["ok", "degraded", "failing", "down", "pending", "paused"]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_SETTINGS: dict[str, Any] = {
    "period": _nullable({**_PERIOD, "description": "Seconds between pings (or schedule)."}),
    "schedule": _nullable({"type": "string", "description":
                           "Cron, five fields (minute hour day month weekday)."}),
    "time_zone": _nullable({"type": "string", "example": "Europe/Berlin",
                            "description": "IANA zone of the schedule (default UTC)."}),
    "grace": _nullable({**_PERIOD, "description": "Seconds after the expected time."}),
    "max_runtime": _nullable({**_SECONDS, "description":
                              "Seconds a started run may take (default: grace)."}),
    "min_runtime": _nullable({**_SECONDS, "description": "A faster run is a failure."}),
    "min_interval": _nullable({**_SECONDS, "description": "Closer pings are a failure."}),
}

SCHEMAS: dict[str, Any] = {
    "HeartbeatCreate": {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": ["heartbeat"]},
            "alias": {"type": "string", "minLength": 1, "maxLength": MAX_ALIAS_LENGTH},
            **_SETTINGS,
            "recovery_threshold": _nullable(
                {"type": "integer", "minimum": 0, "maximum": MAX_RECOVERY_THRESHOLD}),
            "slug": _nullable({"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]{0,99}$",
                               "description": "For /ping/<ping-key>/<slug>."}),
            "assertions": {"nullable": True, "allOf": [_ref("Assertions")],
                           "description": "On the ping body: sources body and json."},
        },
        "required": ["type", "alias"],
        "description": "Give period or schedule (with time_zone).",
    },
    "HeartbeatUpdate": {
        "type": "object",
        "properties": {"alias": _nullable({"type": "string", "minLength": 1}), **_SETTINGS,
                       "recovery_threshold": _nullable({"type": "integer", "minimum": 0})},
        "required": [],
    },
    "HeartbeatMeta": {
        "type": "object",
        "properties": {
            "last_ping_at": _TS, "next_expected_at": _TS, "last_start_at": _TS,
            "last_duration_seconds": {"type": "number", "nullable": True},
            "last_exit_status": {"type": "integer", "nullable": True},
            "last_body": {"type": "string", "nullable": True,
                          "description": "The last ping's body, its first 1,000 characters."},
        },
        "required": ["last_ping_at", "next_expected_at", "last_start_at",
                     "last_duration_seconds", "last_exit_status", "last_body"],
    },
    "HeartbeatCheck": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "format": "int64", "minimum": 1},
            "status": {"type": "string", "enum": _STATUSES},
            "error": {"type": "string", "nullable": True},
            "interval": {"type": "integer"},
            "is_enabled": {"type": "boolean"},
            "notification_threshold": {"type": "integer"},
            "last_check_at": _TS,
            "meta": _ref("HeartbeatMeta"),
            "recovery_threshold": {"type": "integer", "minimum": 0},
        },
        "required": ["id", "status", "interval", "is_enabled"],
    },
    "HeartbeatMonitor": {
        "type": "object",
        "properties": {
            "id": {"type": "integer", "format": "int64", "minimum": 1},
            "identifier": {"type": "string", "minLength": 10},
            "alias": {"type": "string"},
            "type": {"type": "string", "enum": ["heartbeat"]},
            "ping_url": {"type": "string", "description": "{base_url}/ping/<uuid4>"},
            "status_page": {"type": "string"},
            **{k: v for k, v in _SETTINGS.items()},
            "slug": {"type": "string"},
            "checks": {"type": "object", "properties": {"heartbeat": _ref("HeartbeatCheck")},
                       "required": ["heartbeat"]},
        },
        "required": ["id", "identifier", "alias", "type", "ping_url", "status_page", "grace",
                     "checks"],
    },
}


def merge(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with the heartbeat schemas, and its monitor bodies and answers widened to
    either kind."""
    doc["components"]["schemas"].update(SCHEMAS)
    paths = doc["paths"]

    def either(node: dict[str, Any], *names: str) -> dict[str, Any]:
        return {"oneOf": [_ref(n) for n in names]}

    def answer(op: dict[str, Any], status: str, *names: str) -> None:
        content = op["responses"][status]["content"]["application/json"]
        schema = content["schema"]
        if schema.get("type") == "array":
            content["schema"] = {**schema, "items": either(schema, *names)}
        else:
            content["schema"] = either(schema, *names)

    create = paths["/webapi/monitors"]["post"]
    create["requestBody"]["content"]["application/json"]["schema"] = either(
        {}, "MonitorCreate", "HeartbeatCreate")
    answer(create, "201", "ReducedMonitor", "HeartbeatMonitor")
    answer(paths["/webapi/monitors"]["get"], "200", "Monitor", "HeartbeatMonitor")
    one = paths["/webapi/monitors/{id}"]
    answer(one["get"], "200", "Monitor", "HeartbeatMonitor")
    one["put"]["requestBody"]["content"]["application/json"]["schema"] = either(
        {}, "MonitorUpdate", "HeartbeatUpdate")
    answer(one["put"], "200", "ReducedMonitor", "HeartbeatMonitor")
    return doc
