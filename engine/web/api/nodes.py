"""``GET /webapi/nodes``: the cluster's nodes, for operator accounts only.

Each node: id, region, url, version, started_at, last_heartbeat_at (UTC
``YYYY-MM-DD HH:MM:SS``), live, stopping, checks_owned (enabled checks it owns now), load
(its engine's load as of its last heartbeat, as /healthz shows it; null for a node that is
not live or runs no engine). An
account that is not an operator gets a 403 ``{"message": ...}``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.cluster.nodes import node_table
from engine.db.accounts import Account
from engine.domain.timefmt import fmt
from engine.web.jsonio import json_response, message_response
from engine.web.keys import ACCOUNT, SETTINGS, STORE

routes = web.RouteTableDef()


@routes.get("/webapi/nodes")
async def list_nodes(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    if not account.is_operator:
        return message_response("Only operator accounts may list cluster nodes.", 403)
    rows = await node_table(request.app[STORE], request.app[SETTINGS])
    for row in rows:
        row["started_at"] = fmt(row["started_at"])  # type: ignore[arg-type]
        row["last_heartbeat_at"] = fmt(row["last_heartbeat_at"])  # type: ignore[arg-type]
    return json_response(rows)


_TS = {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$"}
_NODE: dict[str, Any] = {
    "type": "object",
    "required": ["id", "region", "url", "version", "started_at", "last_heartbeat_at", "live",
                 "stopping", "checks_owned", "load"],
    "properties": {
        "id": {"type": "string"},
        "region": {"type": "string"},
        "url": {"type": "string"},
        "version": {"type": "string"},
        "started_at": _TS,
        "last_heartbeat_at": _TS,
        "live": {"type": "boolean"},
        "stopping": {"type": "boolean"},
        "checks_owned": {"type": "integer", "minimum": 0},
        "load": {"oneOf": [{"$ref": "#/components/schemas/NodeLoad"}, {"type": "null"}]},
    },
}

OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/nodes": {
        "get": {
            "summary": "Cluster nodes (operator accounts only)",
            "operationId": "listNodes",
            "responses": {
                "200": {
                    "description": "Every known node, live or not.",
                    "content": {"application/json": {"schema": {"type": "array", "items": _NODE}}},
                },
                "401": {"$ref": "#/components/responses/Unauthenticated"},
                "403": {
                    "description": "The account is not an operator.",
                    "content": {"application/json": {
                        "schema": {"$ref": "#/components/schemas/Error"}}},
                },
                "429": {"$ref": "#/components/responses/TooManyRequests"},
                "503": {"$ref": "#/components/responses/Unavailable"},
            },
        },
    },
}
