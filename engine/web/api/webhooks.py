"""The webhook delivery log API: GET /webapi/webhooks, POST /webapi/webhooks/{id}/retry.

- ``GET /webapi/webhooks`` lists the account's events, newest first (by id). Optional query
  parameters: ``status`` (pending, delivered or failed), ``limit`` (1..500, default 100) and
  ``before`` (an event id: only older events, for paging with the last id of a page). An
  invalid value is a 422 under the parameter's name; unknown parameters are ignored.
- ``POST /webapi/webhooks/{id}/retry`` re-queues a failed event for one more try now, keeping
  its id and try count (``X-Service-Current-Try`` continues). 200 with the event; 404 for an
  unknown id or another account's event; 409 when the event is not failed (a pending one is
  already queued, a delivered one was answered 200) or the account has no webhook URL.

Timestamps are UTC ``YYYY-MM-DD HH:MM:SS``; ``next_try_at`` is null unless the event is
pending (while a try is in flight it is the end of that try's lease).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.db.accounts import Account
from engine.db.webhook_queue import STATUSES, NotRetryable, WebhookRecord
from engine.domain.timefmt import fmt
from engine.monitors import validation
from engine.runtime.errors import ValidationFailed
from engine.web.jsonio import json_response, message_response
from engine.web.keys import ACCOUNT, STORE

routes = web.RouteTableDef()

DEFAULT_LIMIT = 100
MAX_LIMIT = 500


def webhook_view(record: WebhookRecord) -> dict[str, Any]:
    """One event as the delivery log shows it."""
    return {
        "id": record.id,
        "event": record.event,
        "monitor_id": record.monitor_id,
        "check_id": record.check_id,
        "parent_id": record.parent_id,
        "status": record.status,
        "tries": record.tries,
        "last_status_code": record.last_status_code,
        "last_error": record.last_error,
        "next_try_at": fmt(record.next_try_at) if record.status == "pending" else None,
        "created_at": fmt(record.created_at),
        "delivered_at": fmt(record.delivered_at),
    }


def _int_param(raw: str, field: str, low: int, high: int) -> int:
    # Decimal digits only: "1e2", " 5", "+5" and "0x10" are not ids or counts a client means.
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise ValidationFailed({field: [f"The {field} must be an integer."]})
    value = int(raw)
    if not low <= value <= high:
        raise ValidationFailed({field: [f"The {field} must be between {low} and {high}."]})
    return value


def parse_list_query(query: Any) -> tuple[str | None, int, int | None]:
    """(status, limit, before) from the query string; ValidationFailed names the parameter."""
    status = query.get("status")
    if status is not None and status not in STATUSES:
        raise ValidationFailed(
            {"status": [f"The status must be one of: {', '.join(STATUSES)}."]}
        )
    raw_limit = query.get("limit")
    limit = DEFAULT_LIMIT if raw_limit is None else _int_param(raw_limit, "limit", 1, MAX_LIMIT)
    raw_before = query.get("before")
    before = None if raw_before is None else _int_param(
        raw_before, "before", 1, validation.MAX_ID
    )
    return status, limit, before


@routes.get("/webapi/webhooks")
async def list_webhooks(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    status, limit, before = parse_list_query(request.query)
    records = await request.app[STORE].list_webhooks(
        account.id, status=status, limit=limit, before_id=before
    )
    return json_response([webhook_view(r) for r in records])


@routes.post("/webapi/webhooks/{id}/retry")
async def retry_webhook(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    event_id = validation.parse_id(request.match_info["id"])
    try:
        record = await request.app[STORE].retry_webhook(account.id, event_id)
    except NotRetryable as exc:
        return message_response(str(exc), 409)
    return json_response(webhook_view(record))


# --- OpenAPI -----------------------------------------------------------------------------

_TIMESTAMP = {
    "type": "string",
    "pattern": r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$",
    "example": "2026-01-31 12:00:00",
}
_ID = {"type": "integer", "format": "int64", "minimum": 1, "maximum": validation.MAX_ID}
_ERROR = {"$ref": "#/components/schemas/Error"}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {**schema, "nullable": True}


_WEBHOOK_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {**_ID, "description": "The X-Service-Webhook header of every try."},
        "event": {
            "type": "string",
            "enum": [
                "downtime", "uptime_restored", "certificate_invalid",
                "certificate_recovered", "certificate_renewal_due",
            ],
        },
        "monitor_id": _ID,
        "check_id": _nullable(_ID),
        "parent_id": _nullable({
            **_ID,
            "description": "For uptime_restored and certificate_recovered: the event that "
                           "opened the incident (X-Service-Parent-Webhook).",
        }),
        "status": {"type": "string", "enum": list(STATUSES)},
        "tries": {"type": "integer", "minimum": 0, "description": "Tries made so far."},
        "last_status_code": _nullable({
            "type": "integer", "description": "HTTP status of the last answer; null when "
                                              "the last try got none."}),
        "last_error": _nullable({"type": "string"}),
        "next_try_at": _nullable({**_TIMESTAMP, "description": "Null unless pending."}),
        "created_at": _TIMESTAMP,
        "delivered_at": _nullable(_TIMESTAMP),
    },
}
_WEBHOOK_EVENT["required"] = list(_WEBHOOK_EVENT["properties"])


def _common_responses() -> dict[str, Any]:
    return {
        "401": {"$ref": "#/components/responses/Unauthenticated"},
        "429": {"$ref": "#/components/responses/TooManyRequests"},
        "503": {"$ref": "#/components/responses/Unavailable"},
    }


OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/webhooks": {
        "get": {
            "summary": "The webhook delivery log, newest first",
            "operationId": "listWebhooks",
            "parameters": [
                {"name": "status", "in": "query", "required": False,
                 "schema": {"type": "string", "enum": list(STATUSES)}},
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                            "default": DEFAULT_LIMIT}},
                {"name": "before", "in": "query", "required": False,
                 "description": "Only events with a smaller id (the last id of the "
                                "previous page).",
                 "schema": _ID},
            ],
            "responses": {
                "200": {
                    "description": "The account's webhook events.",
                    "content": {"application/json": {
                        "schema": {"type": "array", "items": _WEBHOOK_EVENT}}},
                },
                "422": {"$ref": "#/components/responses/ValidationFailed"},
                **_common_responses(),
            },
        },
    },
    "/webapi/webhooks/{id}/retry": {
        "post": {
            "summary": "Re-queue a failed webhook for one more try now",
            "operationId": "retryWebhook",
            "parameters": [{"$ref": "#/components/parameters/Id"}],
            "responses": {
                "200": {
                    "description": "The event, pending again.",
                    "content": {"application/json": {"schema": _WEBHOOK_EVENT}},
                },
                "404": {"$ref": "#/components/responses/NotFound"},
                "409": {
                    "description": "The event is not failed, or the account has no "
                                   "webhook URL.",
                    "content": {"application/json": {"schema": _ERROR}},
                },
                **_common_responses(),
            },
        },
    },
}
