"""Ping endpoints: what jobs call, without a token (the UUID4 in the path is the secret).

- ``/ping/<uuid>`` success, ``/start``, ``/fail``, ``/log`` (kept, no state change),
  ``/<exit status>`` (0 success, 1-255 failure); HEAD, GET and POST; ``?rid=<uuid>`` pairs
  a start with its finish. The answer is ``200`` ``OK`` (text), an unknown id ``404``.
- ``/ping/<ping-key>/<slug>[/...]``: the same by the account's ping key and the heartbeat's
  slug; ``?create=1`` creates the heartbeat on its first ping.
- ``/api/push/<uuid>?status=up|down&msg=...&ping=...``: Uptime Kuma's push URL; ``down``
  is a failure with ``msg`` as its reason. Answers as Kuma does (``{"ok": true}``).

A body (the job's output) is kept up to :data:`BODY_LIMIT` bytes; more is read no further
and marked cut (``Ping-Body-Limit`` says the limit). A ping answered 200 is in the database
before the answer: the :class:`PingBatcher` gathers the pings of a few milliseconds into one
transaction (``Store.record_pings``) and answers them all when it commits. A flood on one
ping URL is limited per heartbeat and kind of ping (429), so a flood of successes never
holds back a start or a failure. Nothing here reads or reveals an account token.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import asyncpg
from aiohttp import web

from engine.db.heartbeats import IncomingPing
from engine.domain import heartbeat as hb
from engine.probes.request import RequestSpec
from engine.runtime.errors import LimitReached
from engine.web.keys import SETTINGS, STORE
from engine.web.ratelimit import RateLimiter

log = logging.getLogger(__name__)

BODY_LIMIT = 10_000  # bytes of a ping's body kept
DRAIN_LIMIT = 1_000_000  # bytes of a longer body read and dropped before closing instead
BATCH_WINDOW = 0.002  # seconds the first ping of a batch waits for others
BATCH_MAX = 500
# Pings a heartbeat may send of one kind: a burst of 120, then 10 a second.
FLOOD_RATE, FLOOD_BURST = 10.0, 120
CUT_MARK = "\n[cut: the body was longer than the limit]"

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,99}$")
_KEY = re.compile(r"^[A-Za-z0-9_-]{8,64}$")

routes = web.RouteTableDef()

Recorder = Callable[[Sequence[IncomingPing]], Awaitable[list[bool]]]


def is_ping_path(path: str) -> bool:
    """A path this module answers (its bodies are cut, never refused)."""
    return path.startswith("/ping/") or path.startswith("/api/push/")


class PingBatcher:
    """Group commit: pings offered within :data:`BATCH_WINDOW` of the first are written by
    one ``record(pings)`` call; each offer returns whether its id was found, once written."""

    def __init__(self, record: Recorder, *, window: float = BATCH_WINDOW,
                 max_batch: int = BATCH_MAX) -> None:
        self._record = record
        self._window = window
        self._max = max_batch
        self._pending: list[tuple[IncomingPing, asyncio.Future[bool]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def offer(self, ping: IncomingPing) -> bool:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending.append((ping, fut))
        if len(self._pending) >= self._max:
            self._flush_now()
        elif self._flusher is None:
            self._flusher = asyncio.create_task(self._after_window())
        return await fut

    async def _after_window(self) -> None:
        await asyncio.sleep(self._window)
        self._flusher = None
        await self._write(self._take())

    def _flush_now(self) -> None:
        if self._flusher is not None:
            self._flusher.cancel()
            self._flusher = None
        batch = self._take()
        asyncio.create_task(self._write(batch))  # noqa: RUF006 - awaited through its futures

    def _take(self) -> list[tuple[IncomingPing, asyncio.Future[bool]]]:
        batch, self._pending = self._pending, []
        return batch

    async def _write(self, batch: list[tuple[IncomingPing, asyncio.Future[bool]]]) -> None:
        if not batch:
            return
        try:
            found = await self._record([p for p, _ in batch])
        except BaseException as exc:  # each waiting ping answers with the same error
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (_, fut), ok in zip(batch, found, strict=True):
            if not fut.done():
                fut.set_result(ok)


PING_BATCHER = web.AppKey("ping_batcher", PingBatcher)
FLOOD = web.AppKey("ping_flood", RateLimiter)


def judge_body(assertions: Any, body: str) -> str | None:
    """The first failed ``body``/``json`` assertion on a ping's body, in the words of the
    URL monitors' assertions (engine/probes/request.py); None when all hold."""
    spec = RequestSpec.from_config(None, assertions, BODY_LIMIT)
    data = body.encode("utf-8")
    return spec.check(200, 0.0, {}, data, len(data) >= BODY_LIMIT)


def setup(app: web.Application) -> None:
    """Mount the ping routes and their batcher on ``app`` (its STORE set)."""
    store = app[STORE]

    async def record(pings: Sequence[IncomingPing]) -> list[bool]:
        return await store.record_pings(pings, judge_body)

    app[PING_BATCHER] = PingBatcher(record)
    app[FLOOD] = RateLimiter(FLOOD_RATE, FLOOD_BURST)
    app.router.add_routes(routes)


def _text(body: str, status: int = 200) -> web.Response:
    resp = web.Response(text=body, status=status, content_type="text/plain")
    resp.headers["Ping-Body-Limit"] = str(BODY_LIMIT)
    return resp


def _not_found() -> web.Response:
    return _text("not found", 404)


async def _body(request: web.Request) -> tuple[str | None, bool]:
    """The body as text, cut at BODY_LIMIT bytes (cut: True); the rest is drained up to
    DRAIN_LIMIT, past which the connection closes after the answer."""
    if request.method == "HEAD" or not request.body_exists:
        return None, False
    content = request.content
    data = await content.read(BODY_LIMIT)
    buf = bytearray(data)
    while len(buf) < BODY_LIMIT and data:
        data = await content.read(BODY_LIMIT - len(buf))
        buf += data
    cut = False
    if not content.at_eof():
        extra = 0
        while extra <= DRAIN_LIMIT:
            chunk = await content.read(65536)
            if not chunk:
                break
            extra += len(chunk)
            cut = True
        if extra > DRAIN_LIMIT and request.transport is not None:
            request.transport.close()
    text = bytes(buf).decode("utf-8", errors="replace")
    return (text + CUT_MARK if cut else text) or None, cut


def _action(action: str | None) -> tuple[str, int | None] | None:
    """(ping kind, exit status) of a path's last segment; None: not an action."""
    if action is None or action == "":
        return hb.SUCCESS, None
    if action in (hb.START, hb.FAIL, hb.LOG):
        return action, None
    if action.isdigit() and len(action) <= 3:
        code = int(action)
        if code <= 255:
            return (hb.SUCCESS if code == 0 else hb.FAIL), code
    return None


async def _accept(
    request: web.Request, ping_uuid: str, kind: str, exit_status: int | None,
    reason: str | None = None,
) -> bool | web.Response:
    """Record one ping; True when written, False for an unknown id, or a 400/429 answer."""
    rid = request.query.get("rid", "")
    if rid and not _UUID.match(rid):
        return _text("rid must be a UUID", 400)
    flood = request.app[FLOOD]
    if flood.take((ping_uuid, kind), time.monotonic()) > 0:
        return _text("rate limited", 429)
    body, cut = await _body(request)
    ping = hb.Ping(kind=kind, at=datetime.now(UTC), rid=rid.lower(), exit_status=exit_status,
                   reason=reason)
    incoming = IncomingPing(ping_uuid=ping_uuid.lower(), ping=ping, method=request.method,
                            remote_addr=request.remote, body=body, body_cut=cut)
    return await request.app[PING_BATCHER].offer(incoming)


async def _by_uuid(request: web.Request, ping_uuid: str, action: str | None) -> web.Response:
    parsed = _action(action)
    if parsed is None:
        return _not_found()
    got = await _accept(request, ping_uuid, parsed[0], parsed[1])
    if isinstance(got, web.Response):
        return got
    return _text("OK") if got else _not_found()


async def _by_slug(
    request: web.Request, key: str, slug: str, action: str | None
) -> web.Response:
    if not _KEY.match(key) or not _SLUG.match(slug) or _action(action) is None:
        return _not_found()
    store = request.app[STORE]
    account_id, ping_uuid = await store.slug_target(key, slug)
    if account_id is None:
        return _not_found()
    if ping_uuid is None:
        if request.query.get("create") != "1":
            return _not_found()
        ping_uuid = await _create_by_slug(request, account_id, slug)
        if ping_uuid is None:
            return _text("the account has reached its monitor limit", 409)
    return await _by_uuid(request, ping_uuid, action)


async def _create_by_slug(request: web.Request, account_id: int, slug: str) -> str | None:
    """A new heartbeat for a slug ping with ``?create=1``: daily, one hour's grace."""
    store = request.app[STORE]
    account = await store.get_account(account_id)
    if account is None:
        return None
    plan = request.app[SETTINGS].plan(account.plan)
    try:
        _, record = await store.create_heartbeat(
            account_id, alias=slug, config=hb.Config(period_s=86400, grace_s=3600),
            monitor_limit=plan.monitor_limit, slug=slug)
    except LimitReached:
        return None
    except asyncpg.UniqueViolationError:  # created by a concurrent first ping
        _, found = await store.slug_target(request.match_info["first"], slug)
        return found
    return record.ping_uuid


@routes.get("/ping/{first}")
@routes.post("/ping/{first}")
async def ping_one(request: web.Request) -> web.Response:
    first = request.match_info["first"]
    if not _UUID.match(first):
        return _not_found()
    return await _by_uuid(request, first, None)


@routes.get("/ping/{first}/{second}")
@routes.post("/ping/{first}/{second}")
async def ping_two(request: web.Request) -> web.Response:
    first, second = request.match_info["first"], request.match_info["second"]
    if _UUID.match(first):
        return await _by_uuid(request, first, second)
    return await _by_slug(request, first, second, None)


@routes.get("/ping/{first}/{second}/{third}")
@routes.post("/ping/{first}/{second}/{third}")
async def ping_three(request: web.Request) -> web.Response:
    m = request.match_info
    return await _by_slug(request, m["first"], m["second"], m["third"])


@routes.get("/api/push/{uuid}")
@routes.post("/api/push/{uuid}")
async def kuma_push(request: web.Request) -> web.Response:
    """Uptime Kuma's push URL, with a heartbeat's ping UUID as its token."""
    token = request.match_info["uuid"]
    missing = web.json_response(
        {"ok": False, "msg": "Monitor not found or not active."}, status=404)
    if not _UUID.match(token):
        return missing
    down = request.query.get("status", "up") == "down"
    msg = request.query.get("msg") or None
    reason = (msg or "reported down")[:500] if down else None
    got = await _accept(request, token, hb.FAIL if down else hb.SUCCESS, None, reason)
    if isinstance(got, web.Response):
        return got
    return web.json_response({"ok": True}) if got else missing


_TEXT = {"text/plain": {"schema": {"type": "string"}}}
_PING_RESPONSES = {
    "200": {"description": "Recorded (written before this answer): `OK`.", "content": _TEXT},
    "400": {"description": "A rid that is not a UUID.", "content": _TEXT},
    "404": {"description": "No such heartbeat (nothing is written).", "content": _TEXT},
    "429": {"description": "Too many pings of this kind for this heartbeat.",
            "content": _TEXT},
    "503": {"$ref": "#/components/responses/Unavailable"},
}
_RID = {"name": "rid", "in": "query", "required": False,
        "description": "A run id (UUID) pairing a start with its finish.",
        "schema": {"type": "string", "format": "uuid"}}


def _ping_op(op_id: str, summary: str, names: list[str]) -> dict[str, Any]:
    params = [{"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
              for n in names]
    get = {"summary": summary, "operationId": op_id, "security": [],
           "parameters": [*params, _RID], "responses": _PING_RESPONSES}
    post = {**get, "operationId": op_id + "Post",
            "requestBody": {"required": False, "description": (
                f"The job's output; the first {BODY_LIMIT} bytes are kept."),
                "content": {"text/plain": {"schema": {"type": "string"}}}}}
    return {"get": get, "post": post}


def _kuma_ops() -> dict[str, Any]:
    kuma = {"application/json": {"schema": {
        "type": "object", "properties": {"ok": {"type": "boolean"}, "msg": {"type": "string"}},
        "required": ["ok"]}}}
    responses = {**_PING_RESPONSES,
                 "200": {"description": "Recorded: `{\"ok\": true}`.", "content": kuma},
                 "404": {"description": "No such heartbeat (nothing is written).",
                         "content": kuma}}
    params = [{"name": "uuid", "in": "path", "required": True, "schema": {"type": "string"}},
              {"name": "status", "in": "query", "required": False,
               "schema": {"type": "string", "enum": ["up", "down"]}},
              {"name": "msg", "in": "query", "required": False, "schema": {"type": "string"}},
              {"name": "ping", "in": "query", "required": False,
               "schema": {"type": "string"}}, _RID]
    get = {"summary": "Uptime Kuma push URL: ?status=up|down&msg=...&ping=...",
           "operationId": "kumaPush", "security": [], "parameters": params,
           "responses": responses}
    return {"get": get, "post": {**get, "operationId": "kumaPushPost"}}


OPENAPI_PATHS: dict[str, Any] = {
    "/ping/{first}": _ping_op("ping", "Heartbeat ping: success (first: the ping UUID)",
                              ["first"]),
    "/ping/{first}/{second}": _ping_op(
        "pingAction", "UUID + start | fail | log | exit status 0-255, or ping key + slug",
        ["first", "second"]),
    "/ping/{first}/{second}/{third}": _ping_op(
        "pingSlugAction", "Ping key + slug + start | fail | log | exit status; ?create=1",
        ["first", "second", "third"]),
    "/api/push/{uuid}": _kuma_ops(),
}
