"""The webhook delivery log API: GET /webapi/webhooks, POST /webapi/webhooks/{id}/retry."""

from __future__ import annotations

from typing import Any

from aiohttp import web

routes = web.RouteTableDef()

# OpenAPI path items for the endpoints above, merged into /webapi/openapi.json.
OPENAPI_PATHS: dict[str, Any] = {}
