"""Notification channels: ``/webapi/notification-channels`` (docs/notifications.md).

- ``GET`` lists the account's channels, ``POST`` creates one (201); ``GET/PUT/DELETE
  .../{id}`` read, change (only the fields the body carries) and delete one (204). A
  channel is ``{id, name, url, events, monitor_ids, is_enabled}``.
- ``url`` is an Apprise URL, checked by Apprise (422 under ``url`` saying what is wrong)
  and by the private-address rule on the host it reaches. Answers show it masked
  (:func:`engine.delivery.notify.urls.masked`); a PUT that sends the masked URL back
  keeps the stored one, and any other URL containing ``****`` is a 422.
- ``events``: a non-empty subset of the five event names (default all); ``monitor_ids``:
  null (every monitor of the account, also later ones) or the account's own monitor ids.
- ``POST .../{id}/test`` sends a test message now: ``200 {"delivered": true}`` or
  ``200 {"delivered": false, "error": "..."}``. While it waits for the service the request
  holds none of the API's slots, and tests are limited per channel, per account and per
  server (:mod:`engine.delivery.notify.testgate`): over a limit it is a ``429`` at once,
  ``{"message": ..., "limit": "channel"|"account"|"server"}`` with ``Retry-After``.
- ``GET .../{id}/deliveries``: the channel's tries, newest first (``limit``, ``before``).

Another account's channel is a 404 everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from engine.db.accounts import Account
from engine.db.notifications import Channel, Delivery
from engine.delivery.notify import urls
from engine.delivery.notify.testgate import Refused
from engine.delivery.notify.testsends import ChannelTests
from engine.domain import events
from engine.domain.timefmt import fmt
from engine.monitors import validation
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Settings
from engine.web.api.webhooks import _ID, _TIMESTAMP, _common_responses, parse_list_query
from engine.web.concurrency import SLOT
from engine.web.jsonio import empty_response, json_response, read_body
from engine.web.keys import ACCOUNT, SETTINGS, STORE
from engine.web.ratelimit import retry_after_header

routes = web.RouteTableDef()

MAX_MONITOR_IDS = 10_000
TEST_SENDS = web.AppKey("notify_test_sends", ChannelTests)


def setup(app: web.Application, settings: Settings) -> None:
    """The app's test sender (its own threads and limits), closed with the app."""
    sends = ChannelTests(timeout=settings.notify_timeout,
                      allow_private=settings.allow_private_targets)
    app[TEST_SENDS] = sends

    async def close(_app: web.Application) -> None:
        sends.close()

    app.on_cleanup.append(close)


def channel_view(channel: Channel) -> dict[str, Any]:
    return {
        "id": channel.id,
        "name": channel.name,
        "url": urls.masked(channel.url),
        "events": channel.events,
        "monitor_ids": channel.monitor_ids,
        "is_enabled": channel.is_enabled,
    }


def delivery_view(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "event": d.event,
        "monitor_id": d.monitor_id,
        "attempt": d.attempt,
        "delivered": d.delivered,
        "detail": d.detail,
        "created_at": fmt(d.created_at),
    }


@dataclass(slots=True)
class ChannelFields:
    """The fields a body carries (None: not given), validated."""

    name: str | None = None
    url: str | None = None
    events: list[str] | None = None
    monitor_ids: list[int] | None = None
    monitor_ids_given: bool = False
    is_enabled: bool | None = None


def _fail(field: str, message: str) -> ValidationFailed:
    return ValidationFailed({field: [message]})


def _events(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail("events", "The events must be a list of event names.")
    unknown = [v for v in value if v not in events.EVENTS]
    if unknown:
        raise _fail("events", f"Unknown event {unknown[0]!r}; the events are: "
                              f"{', '.join(events.EVENTS)}.")
    if not value:
        raise _fail("events", "The events must name at least one event.")
    return [e for e in events.EVENTS if e in value]


def _monitor_ids(value: Any) -> list[int] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _fail("monitor_ids", "The monitor_ids must be null (every monitor) or a list "
                                   "of monitor ids.")
    if len(value) > MAX_MONITOR_IDS:
        raise _fail("monitor_ids", f"At most {MAX_MONITOR_IDS} monitor ids.")
    ids = [validation.as_int(v, "monitor_ids") for v in value]
    if any(not 1 <= i <= validation.MAX_ID for i in ids):
        raise _fail("monitor_ids", "The monitor_ids must be ids of your monitors.")
    return sorted(set(ids))


def _name(value: Any) -> str:
    return validation.validate_alias(value, "name")


def _is_enabled(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail("is_enabled", "The is_enabled must be true or false.")
    return value


def parse_fields(body: Mapping[str, Any]) -> tuple[ChannelFields, dict[str, list[str]]]:
    """Every field's value or error (all errors at once)."""
    out = ChannelFields()
    errors: dict[str, list[str]] = {}

    def run(field: str, fn: Any) -> Any:
        try:
            return fn(body[field])
        except ValidationFailed as exc:
            for key, msgs in exc.errors.items():
                errors.setdefault(key, []).extend(msgs)
            return None

    if validation.present(body, "name"):
        out.name = run("name", _name)
    if validation.present(body, "url"):
        out.url = run("url", lambda v: v)
    if validation.present(body, "events"):
        out.events = run("events", _events)
    if "monitor_ids" in body:
        out.monitor_ids_given = True
        out.monitor_ids = run("monitor_ids", _monitor_ids)
    if validation.present(body, "is_enabled"):
        out.is_enabled = run("is_enabled", _is_enabled)
    return out, errors


async def _check_url(request: web.Request, raw: Any, errors: dict[str, list[str]]) -> str | None:
    """The URL if Apprise takes it and its host obeys the private-address rule."""
    try:
        parsed = urls.parse(raw)
        await urls.check_targets(
            parsed.plugin, allow_private=request.app[SETTINGS].allow_private_targets
        )
    except ValidationFailed as exc:
        for key, msgs in exc.errors.items():
            errors.setdefault(key, []).extend(msgs)
        return None
    return parsed.url


async def _check_monitors(
    request: web.Request, account: Account, ids: list[int] | None,
    errors: dict[str, list[str]],
) -> None:
    if not ids:
        return
    own = await request.app[STORE].own_monitor_ids(account.id, ids)
    missing = [i for i in ids if i not in own]
    if missing:
        shown = ", ".join(str(i) for i in missing[:10])
        errors.setdefault("monitor_ids", []).append(
            f"No monitor of yours has the id {shown}."
            if len(missing) == 1 else f"No monitors of yours have the ids {shown}."
        )


def _path_id(request: web.Request) -> int:
    return validation.parse_id(request.match_info["id"])


@routes.get("/webapi/notification-channels")
async def list_channels(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    channels = await request.app[STORE].list_channels(account.id)
    return json_response([channel_view(c) for c in channels])


@routes.post("/webapi/notification-channels")
async def create_channel(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    body = await read_body(request)
    fields, errors = parse_fields(body)
    if not validation.present(body, "url"):
        errors.setdefault("url", []).append("The url is required.")
    if not validation.present(body, "name") and "name" not in errors:
        errors.setdefault("name", []).append("The name is required.")
    url = None
    if fields.url is not None:
        url = await _check_url(request, fields.url, errors)
    await _check_monitors(request, account, fields.monitor_ids, errors)
    if errors:
        raise ValidationFailed(errors)
    assert url is not None and fields.name is not None
    channel = await request.app[STORE].create_channel(
        account.id, name=fields.name, url=url,
        events=fields.events if fields.events is not None else list(events.EVENTS),
        monitor_ids=fields.monitor_ids,
        is_enabled=True if fields.is_enabled is None else fields.is_enabled,
    )
    return json_response(channel_view(channel), status=201)


@routes.get("/webapi/notification-channels/{id}")
async def get_channel(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    channel = await request.app[STORE].get_channel(account.id, _path_id(request))
    return json_response(channel_view(channel))


@routes.put("/webapi/notification-channels/{id}")
async def update_channel(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    channel_id = _path_id(request)
    store = request.app[STORE]
    current = await store.get_channel(account.id, channel_id)
    body = await read_body(request)
    fields, errors = parse_fields(body)
    url = current.url
    if fields.url is not None and fields.url != urls.masked(current.url):
        # The URL as answers show it keeps the stored one; anything else is a new URL.
        checked = await _check_url(request, fields.url, errors)
        if checked is not None:
            url = checked
    await _check_monitors(request, account, fields.monitor_ids, errors)
    if errors:
        raise ValidationFailed(errors)
    channel = await store.update_channel(
        account.id, channel_id,
        name=fields.name if fields.name is not None else current.name,
        url=url,
        events=fields.events if fields.events is not None else current.events,
        monitor_ids=fields.monitor_ids if fields.monitor_ids_given else current.monitor_ids,
        is_enabled=current.is_enabled if fields.is_enabled is None else fields.is_enabled,
    )
    return json_response(channel_view(channel))


@routes.delete("/webapi/notification-channels/{id}")
async def delete_channel(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    await request.app[STORE].delete_channel(account.id, _path_id(request))
    return empty_response(204)


@routes.post("/webapi/notification-channels/{id}/test")
async def test_channel(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    channel = await request.app[STORE].get_channel(account.id, _path_id(request))
    # From here the request waits on a service, not on this process: it gives its API slot
    # back, so tests to a service that never answers cannot hold the API.
    slot = request.get(SLOT)
    if slot is not None:
        slot.release()
    result = await request.app[TEST_SENDS].send(account.id, channel.id, channel.url)
    if isinstance(result, Refused):
        return json_response(
            {"message": result.message, "limit": result.limit}, status=429,
            headers={"Retry-After": retry_after_header(result.retry_after)},
        )
    if result.delivered:
        return json_response({"delivered": True})
    return json_response({"delivered": False, "error": result.error})


@routes.get("/webapi/notification-channels/{id}/deliveries")
async def list_deliveries(request: web.Request) -> web.Response:
    account: Account = request[ACCOUNT]
    _status, limit, before = parse_list_query(
        {k: v for k, v in request.query.items() if k != "status"}
    )
    records = await request.app[STORE].list_deliveries(
        account.id, _path_id(request), limit=limit, before_id=before
    )
    return json_response([delivery_view(d) for d in records])


# --- OpenAPI -----------------------------------------------------------------------------

_EVENT = {"type": "string", "enum": list(events.EVENTS)}
_MONITOR_IDS = {
    "type": "array", "items": _ID, "nullable": True,
    "description": "Null: every monitor of the account, also those made later.",
}
_CHANNEL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": _ID,
        "name": {"type": "string", "minLength": 1, "maxLength": validation.MAX_ALIAS_LENGTH},
        "url": {
            "type": "string",
            "description": "The Apprise URL, every password, token and header value shown "
                           "as ****. Send it back as shown to keep the stored one.",
            "example": "mailtos://alerts:****@smtp.example.com?to=oncall@example.com",
        },
        "events": {"type": "array", "items": _EVENT, "minItems": 1},
        "monitor_ids": _MONITOR_IDS,
        "is_enabled": {"type": "boolean"},
    },
}
_CHANNEL["required"] = list(_CHANNEL["properties"])
_CHANNEL_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": validation.MAX_ALIAS_LENGTH},
        "url": {
            "type": "string", "maxLength": urls.MAX_URL_LENGTH,
            "description": "An Apprise URL: mailtos://user:pass@smtp.example.com, "
                           "slack://..., ntfy://host/topic, json://host/path, ...",
        },
        "events": {"type": "array", "items": _EVENT, "minItems": 1,
                   "description": "Default: all five."},
        "monitor_ids": _MONITOR_IDS,
        "is_enabled": {"type": "boolean", "default": True},
    },
}
_DELIVERY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": _ID,
        "event": {"type": "string", "enum": [*events.EVENTS, "digest"],
                  "description": "digest: one message for several events (an alert storm)."},
        "monitor_id": {**_ID, "nullable": True, "description": "Null for a digest."},
        "attempt": {"type": "integer", "minimum": 1},
        "delivered": {"type": "boolean"},
        "detail": {"type": "string", "nullable": True,
                   "description": "The service's answer in words."},
        "created_at": _TIMESTAMP,
    },
}
_DELIVERY["required"] = list(_DELIVERY["properties"])


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_BODY = {"required": True, "content": {"application/json": {"schema": _CHANNEL_INPUT}}}
_ID_PARAM = [{"$ref": "#/components/parameters/Id"}]
_422 = {"$ref": "#/components/responses/ValidationFailed"}
_404 = {"$ref": "#/components/responses/NotFound"}

OPENAPI_PATHS: dict[str, Any] = {
    "/webapi/notification-channels": {
        "get": {
            "summary": "The account's notification channels",
            "operationId": "listNotificationChannels",
            "responses": {"200": _json({"type": "array", "items": _CHANNEL}, "Channels."),
                          **_common_responses()},
        },
        "post": {
            "summary": "Add a notification channel (an Apprise URL)",
            "operationId": "createNotificationChannel",
            "requestBody": {**_BODY, "content": {"application/json": {"schema": {
                **_CHANNEL_INPUT, "required": ["name", "url"]}}}},
            "responses": {"201": _json(_CHANNEL, "The channel."), "422": _422,
                          **_common_responses()},
        },
    },
    "/webapi/notification-channels/{id}": {
        "get": {
            "summary": "One notification channel",
            "operationId": "getNotificationChannel",
            "parameters": _ID_PARAM,
            "responses": {"200": _json(_CHANNEL, "The channel."), "404": _404,
                          **_common_responses()},
        },
        "put": {
            "summary": "Change the fields the body carries",
            "operationId": "updateNotificationChannel",
            "parameters": _ID_PARAM,
            "requestBody": _BODY,
            "responses": {"200": _json(_CHANNEL, "The channel."), "404": _404, "422": _422,
                          **_common_responses()},
        },
        "delete": {
            "summary": "Delete a notification channel",
            "operationId": "deleteNotificationChannel",
            "parameters": _ID_PARAM,
            "responses": {"204": {"description": "Deleted."}, "404": _404, **_common_responses()},
        },
    },
    "/webapi/notification-channels/{id}/test": {
        "post": {
            "summary": "Send a test message now",
            "operationId": "testNotificationChannel",
            "parameters": _ID_PARAM,
            "responses": {
                "200": _json({
                    "type": "object",
                    "properties": {"delivered": {"type": "boolean"},
                                   "error": {"type": "string",
                                             "description": "Why not, in the service's "
                                                            "words (only when not delivered)."}},
                    "required": ["delivered"],
                }, "Whether the service took the message."),
                "404": _404, **_common_responses(),
                "429": _json({
                    "type": "object",
                    "properties": {"message": {"type": "string"},
                                   "limit": {"type": "string",
                                             "enum": ["channel", "account", "server"]}},
                    "required": ["message", "limit"],
                }, "Over a limit on test messages (one per channel at a time, a few a "
                   "minute per channel and account); Retry-After says when to try again."),
            },
        },
    },
    "/webapi/notification-channels/{id}/deliveries": {
        "get": {
            "summary": "The channel's tries, newest first",
            "operationId": "listNotificationDeliveries",
            "parameters": [
                *_ID_PARAM,
                {"name": "limit", "in": "query", "required": False,
                 "schema": {"type": "integer", "minimum": 1, "maximum": 500, "default": 100}},
                {"name": "before", "in": "query", "required": False, "schema": _ID},
            ],
            "responses": {"200": _json({"type": "array", "items": _DELIVERY}, "Tries."),
                          "404": _404, "422": _422, **_common_responses()},
        },
    },
}
