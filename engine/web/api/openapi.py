"""The OpenAPI 3.0 document of the API (``GET /webapi/openapi.json``).

Schemas are as precise as the API is strict, so a schema-driven fuzzer (schemathesis) can
generate valid requests and check every response: ids are int64 >= 1, intervals and
thresholds are enums, every response property is listed as required, nullable ones say so.
Optional request fields are ``nullable`` because the API treats null as absent.

Here: the document, its paths, the shared components and the account's and the node's
shapes; the monitor and check shapes are :mod:`engine.web.api.monitor_openapi`'s, the
heartbeat ones :mod:`engine.web.api.heartbeat_openapi`'s, the building blocks
:mod:`engine.web.api.openapi_blocks`'.

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
from engine.monitors.validation import MAX_URL_LENGTH
from engine.web.api import heartbeat_openapi, monitor_openapi
from engine.web.api.monitor_openapi import URL_PATTERN
from engine.web.api.openapi_blocks import (
    INT64,
    INTERVAL,
    TIMESTAMP,
    common_responses,
    json_content,
    nullable,
    obj,
    ref,
    response,
    response_ref,
)

# For other modules' path items (``extra_paths``): the same building blocks.
__all__ = ["INT64", "TIMESTAMP", "build_document", "common_responses", "nullable"]

# A monitor's public identifier in the status page paths.
_IDENTIFIER = {
    "name": "identifier", "in": "path", "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{10,64}$"},
}


def _schemas() -> dict[str, Any]:
    return {
        "Error": obj({"message": {"type": "string"}}),
        "ValidationError": obj({
            "message": {"type": "string"},
            "errors": {
                "type": "object",
                "additionalProperties": {"type": "array", "items": {"type": "string"}},
            },
        }),
        **monitor_openapi.schemas(),
        "Account": obj({
            "id": INT64,
            "name": {"type": "string"},
            "plan": {"type": "string"},
            "webhook_url": nullable({"type": "string"}),
            "allowed_intervals": {"type": "array", "items": INTERVAL},
            "monitor_limit": {"type": "integer", "minimum": 0},
        }),
        "AccountUpdate": obj({
            "webhook_url": nullable(
                {"type": "string", "maxLength": MAX_URL_LENGTH, "pattern": URL_PATTERN}),
        }, required=[]),
        "Health": obj({"status": {"type": "string", "enum": ["ok", "unavailable"]},
                       "overloaded": {"type": "boolean"},
                       "load": {"$ref": "#/components/schemas/NodeLoad"}},
                      ["status", "overloaded"]),
        "NodeLoad": obj({
            "overloaded": {"type": "boolean"}, "ratio": {"type": "number"},
            "asked_per_s": {"type": "number"}, "done_per_s": {"type": "number"},
            "capacity_per_s": {"type": "number"}, "engine_share": {"type": "number"},
            "cost_us_by_kind": {"type": "object",
                                "additionalProperties": {"type": "number"}},
        }),
        **monitor_openapi.request_schemas(),
    }


def _responses() -> dict[str, Any]:
    return {
        "Unauthenticated": {
            "description": "Missing or invalid Bearer token.",
            "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
            "content": json_content(ref("Error")),
        },
        "NotFound": response("No such resource in this account.", ref("Error")),
        "ValidationFailed": response("The body failed validation.", ref("ValidationError")),
        "RequestTimeout": response("The body did not arrive within 30 s.", ref("Error")),
        "TooLarge": response("The body is over 64 KiB.", ref("Error")),
        "TooManyRequests": {
            "description": "Rate limit of the account exceeded.",
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
            "content": json_content(ref("Error")),
        },
        "Unavailable": response("The database is unavailable.", ref("Error")),
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
    status, answer = success
    responses: dict[str, Any] = {status: answer, "401": response_ref("Unauthenticated")}
    if with_id:
        responses["404"] = response_ref("NotFound")
    if body is not None:
        responses["408"] = response_ref("RequestTimeout")
        responses["413"] = response_ref("TooLarge")
        responses["422"] = response_ref("ValidationFailed")
    for code in errors:
        responses[code] = response_ref("ValidationFailed" if code == "422" else "NotFound")
    responses["429"] = response_ref("TooManyRequests")
    responses["503"] = response_ref("Unavailable")
    op: dict[str, Any] = {"summary": summary, "operationId": op_id, "responses": responses}
    if with_id:
        op["parameters"] = [{"$ref": "#/components/parameters/Id"}]
    if body is not None:
        op["requestBody"] = {"required": False, "content": json_content(ref(body))}
    return op


def _paths() -> dict[str, Any]:
    public: dict[str, Any] = {"security": []}
    return {
        "/webapi/monitors": {
            "get": _operation(
                "List the account's monitors", "listMonitors",
                ("200", response("Every monitor, full shape.",
                                 {"type": "array", "items": ref("Monitor")}))),
            "post": {
                **_operation(
                    "Create a monitor", "createMonitor",
                    ("201", response("The reduced monitor.", ref("ReducedMonitor"))),
                    body="MonitorCreate"),
                "requestBody": {"required": True, "content": json_content(ref("MonitorCreate"))},
            },
        },
        "/webapi/monitors/{id}": {
            "get": _operation(
                "Get a monitor", "getMonitor",
                ("200", response("The monitor, full shape.", ref("Monitor"))), with_id=True),
            "put": _operation(
                "Update a monitor's alias or URL", "updateMonitor",
                ("200", response("The reduced monitor.", ref("ReducedMonitor"))),
                body="MonitorUpdate", with_id=True),
            "delete": _operation(
                "Delete a monitor with its checks and history", "deleteMonitor",
                ("204", response("Deleted.")), with_id=True),
        },
        "/webapi/monitors/{id}/statistics": {
            "get": _operation(
                "30-day statistics of a monitor", "getMonitorStatistics",
                ("200", response("Statistics.", ref("Statistics"))), with_id=True),
        },
        "/webapi/checks/{id}": {
            "put": _operation(
                "Update a check's interval or threshold", "updateCheck",
                ("200", response("The check.", ref("CheckUpdated"))),
                body="CheckUpdate", with_id=True),
        },
        "/webapi/checks/{id}/enable": {
            "post": _operation(
                "Enable a check", "enableCheck",
                ("200", response("The check, pending.", ref("CheckToggled"))), with_id=True),
        },
        "/webapi/checks/{id}/disable": {
            "post": _operation(
                "Disable a check", "disableCheck",
                ("200", response("The check, paused.", ref("CheckToggled"))), with_id=True),
        },
        "/webapi/account": {
            "get": _operation(
                "The authenticated account", "getAccount",
                ("200", response("The account.", ref("Account")))),
            "put": _operation(
                "Set or remove the webhook URL", "updateAccount",
                ("200", response("The account.", ref("Account"))), body="AccountUpdate"),
        },
        "/webapi/openapi.json": {
            "get": {
                "summary": "This document", "operationId": "getOpenApi", **public,
                "responses": {"200": response("OpenAPI 3 document.", {"type": "object"})},
            },
        },
        "/healthz": {
            "get": {
                "summary": "Liveness: the database answers", "operationId": "getHealth",
                **public,
                "responses": {
                    "200": response("Healthy.", ref("Health")),
                    "503": response("The database does not answer.", ref("Health")),
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
                    "200": response("The status page's data.", {"type": "object"}),
                    "404": response("Unknown identifier.", ref("Error")),
                    "503": response("The database is unavailable.", ref("Error")),
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
                    "schema": INT64,
                },
            },
            "schemas": monitor_openapi.with_requests(_schemas()),
            "responses": _responses(),
        },
    })
