"""The aiohttp application: middlewares, routes, shared objects.

Request path through the middlewares (outermost first):

1. ``error_middleware``: maps every outcome to a JSON response (422, 404, 413, 503, and a
   logged 500 without details), counts it in ``upwatch_http_requests_total`` and times it in
   ``upwatch_http_request_duration_seconds``.
2. ``body_limit_middleware``: a declared body over 64 KiB is a 413 before anything reads it
   (chunked bodies hit aiohttp's ``client_max_size`` of the same size on read).
3. ``ApiSlots.middleware``: at most ``api_concurrency`` requests handled at once, so the
   engine sharing the event loop keeps its schedule under an API flood
   (:mod:`engine.web.concurrency`).
4. ``pingping.query_token_middleware``: on the PingPing mount only, ``?api_key=`` becomes the
   Bearer header of a clone of the request (:mod:`engine.web.pingping`).
5. ``auth_middleware``: Bearer token on ``/webapi/*`` (and ``/pingping/webapi/*``) except
   the OpenAPI document; the account lands in ``request[ACCOUNT]`` (:mod:`engine.web.keys`).
6. ``rate_limit_middleware``: a token bucket per account (429 with ``Retry-After``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

import asyncpg
import orjson
from aiohttp import web

from engine.db.store import Store
from engine.runtime.errors import DatabaseUnavailable, LimitReached, NotFound, ValidationFailed
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from engine.web import pingping, pings
from engine.web.access_log import PathOnlyAccessLogger
from engine.web.api import certificates as certificates_api
from engine.web.api import maintenance as maintenance_api
from engine.web.api import monitors as api
from engine.web.api import monitorset as monitorset_api
from engine.web.api import nodes as nodes_api
from engine.web.api import notifications as notifications_api
from engine.web.api import openapi
from engine.web.api import timings as timings_api
from engine.web.api import webhooks as webhooks_api
from engine.web.api.create_combiner import CREATE_COMBINER, CreateCombiner
from engine.web.api.maintenance_uptime import WINDOWS_CACHE, WindowsCache
from engine.web.concurrency import ApiSlots
from engine.web.jsonio import json_response, message_response
from engine.web.keys import (
    ACCOUNT,
    HTTP_COUNTERS,
    METRICS,
    OPENAPI_DOCUMENT,
    RATE_LIMITER,
    SETTINGS,
    STORE,
)
from engine.web.ratelimit import RateLimiter, retry_after_header
from engine.web.status import badges
from engine.web.status import page as status_page

log = logging.getLogger(__name__)

# Requests the engine's cost model counts as reads (engine/scheduler/load.py).
_READS = frozenset({"GET", "HEAD", "OPTIONS"})

MAX_BODY_BYTES = 64 * 1024
MAX_TOKEN_LENGTH = 512
# One header field may be this long. Above aiohttp's default (8190) so that an absurd
# Authorization header still reaches the auth middleware and gets the JSON 401, rather
# than the HTTP parser's plain-text 400 that quotes the header back. 128 fields at most
# (aiohttp's default) bounds a request's headers at 2 MiB.
MAX_HEADER_FIELD_BYTES = 16 * 1024
# A connection is closed after this many seconds without a complete request: idle between
# requests, or still sending its headers. aiohttp's default is an hour, so a client that
# trickles a header a byte at a time (slowloris) held a connection, and a file descriptor,
# for that long. Slow bodies have their own deadline (jsonio.BODY_READ_TIMEOUT_S).
KEEPALIVE_TIMEOUT_S = 30.0
API_PREFIX = "/webapi"
PUBLIC_API_PATHS = frozenset({"/webapi/openapi.json"})
# Query parameters that look like a credential. A request carrying one is refused even with
# a valid header: tokens in URLs end up in proxy and server logs, so clients must learn
# early that this does not work.
TOKEN_QUERY_PARAMETERS = frozenset(
    {"token", "api_token", "access_token", "api_key", "apikey", "key"}
)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

_STATUS_MESSAGES = {
    400: "Bad request.",
    404: "Not found.",
    405: "Method not allowed.",
    408: "The request body did not arrive in time.",
    413: f"The request body is too large (at most {MAX_BODY_BYTES // 1024} KiB).",
}


def _unauthenticated() -> web.Response:
    return message_response("Unauthenticated.", 401, headers={"WWW-Authenticate": "Bearer"})


def _body_limit(request: web.Request) -> int:
    return monitorset_api.BODY_LIMITS.get((request.method, request.path), MAX_BODY_BYTES)


def _too_large(limit: int = MAX_BODY_BYTES) -> web.Response:
    message = (_STATUS_MESSAGES[413] if limit == MAX_BODY_BYTES
               else f"The request body is too large (at most {limit // 1024} KiB).")
    response = message_response(message, 413)
    # The rest of the body is not worth reading: close instead of draining it.
    response.force_close()
    return response


def _is_page_path(path: str) -> bool:
    """A path a browser may ask for: outside the JSON API and not a ``.json`` document. Its
    404 is the status page's HTML 404 page."""
    in_api = path == API_PREFIX or path.startswith(API_PREFIX + "/") or pingping.in_mount(path)
    return not in_api and not path.endswith(".json")


def _from_http_exception(request: web.Request, exc: web.HTTPException) -> web.Response:
    if exc.status == 413:
        return _too_large(_body_limit(request))
    if exc.status == 408:
        response = message_response(_STATUS_MESSAGES[408], 408)
        response.force_close()  # the rest of the body may still be on its way
        return response
    if exc.status == 404 and _is_page_path(request.path):
        # A mistyped or malformed status page link (the router refused it: wrong length,
        # a dot, a slash, a traversal attempt) gets the same page as an unknown identifier.
        return status_page.not_found_page()
    headers = {}
    if exc.status == 405 and "Allow" in exc.headers:
        headers["Allow"] = exc.headers["Allow"]
    message = _STATUS_MESSAGES.get(exc.status) or (exc.reason + ".")
    return message_response(message, exc.status, headers=headers)


def _route_label(request: web.Request) -> str:
    """The route template (bounded label cardinality), not the raw path."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    # Logs name the path as it came on the wire (still percent-encoded) and never the query
    # (it may carry secrets): the decoded ``path`` may hold CR/LF from "%0d%0a" and forge
    # lines in a text log.
    response: web.StreamResponse
    started = time.perf_counter()
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        response = _from_http_exception(request, exc)
    except ValidationFailed as exc:
        response = json_response({"message": str(exc), "errors": exc.errors}, status=422)
    except LimitReached as exc:
        response = json_response(
            {"message": str(exc), "errors": {"monitor_limit": [str(exc)]}}, status=422
        )
    except NotFound as exc:
        response = message_response(str(exc) or "Not found.", 404)
    except DatabaseUnavailable:
        log.warning("database unavailable during %s %s", request.method, request.rel_url.raw_path)
        response = message_response("The service is temporarily unavailable.", 503)
    except asyncpg.TransactionRollbackError as exc:
        # A deadlock or serialisation failure against a concurrent writer (the engine):
        # transient and harmless to retry, the transaction was rolled back whole.
        log.warning(
            "transaction conflict during %s %s: %s", request.method, request.rel_url.raw_path, exc)
        response = message_response(
            "The request conflicted with a concurrent change; please retry.", 503,
            headers={"Retry-After": "1"},
        )
    except asyncio.CancelledError:
        raise
    except Exception:
        # The body says nothing about the cause: the log has it.
        log.exception("unhandled error in %s %s", request.method, request.rel_url.raw_path)
        response = message_response("Server error.", 500)
    _count_request(request, response.status, time.perf_counter() - started)
    return response


def _count_request(request: web.Request, status: int, seconds: float) -> None:
    """``upwatch_http_requests_total`` += 1 and ``seconds`` observed in
    ``upwatch_http_request_duration_seconds``. The labelled children are looked up once per
    route and status (``labels()`` validates and locks on every call); the keys are as
    bounded as the metrics' own label values."""
    counters = request.app[HTTP_COUNTERS]
    key = (_route_label(request), status)
    children = counters.get(key)
    if children is None:
        metrics = request.app[METRICS]
        children = counters[key] = (
            metrics.http_requests.labels(key[0], str(status)),
            metrics.http_request_seconds.labels(key[0]),
        )
    children[0].inc()
    children[1].observe(seconds)
    metrics = request.app[METRICS]
    if pings.is_ping_path(request.path):
        metrics.api_pings += 1
    elif request.method in _READS:
        metrics.api_reads += 1
    else:
        metrics.api_writes += 1


@web.middleware
async def body_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    limit = _body_limit(request)
    if (request.content_length is not None and request.content_length > limit
            and not pings.is_ping_path(request.path)):  # a ping's body is cut, not refused
        return _too_large(limit)
    return await handler(request)


def _needs_auth(path: str) -> bool:
    in_api = path == API_PREFIX or path.startswith(API_PREFIX + "/") or pingping.in_mount(path)
    return in_api and path not in PUBLIC_API_PATHS


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (scheme case-insensitive),
    or None when the header is missing, of another scheme, empty or implausibly long."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or len(token) > MAX_TOKEN_LENGTH:
        return None
    return token


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    if not _needs_auth(request.path):
        return await handler(request)
    # query_string first: most requests have none, and parsing the query costs more.
    if request.query_string and any(
        name.lower() in TOKEN_QUERY_PARAMETERS for name in request.query
    ):
        return _unauthenticated()
    # Exactly one header: with two, a proxy in front may have checked a different one than
    # the one read here.
    headers = request.headers.getall("Authorization", [])
    token = bearer_token(headers[0]) if len(headers) == 1 else None
    if token is None:
        return _unauthenticated()
    account = await request.app[STORE].authenticate(token)
    if account is None:
        return _unauthenticated()
    request[ACCOUNT] = account
    return await handler(request)


@web.middleware
async def rate_limit_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    account = request.get(ACCOUNT)
    limiter = request.app[RATE_LIMITER]
    if account is not None and limiter.enabled:
        wait = limiter.take(account.id, time.monotonic())
        if wait > 0:
            return message_response(
                "Too many requests.", 429, headers={"Retry-After": retry_after_header(wait)}
            )
    return await handler(request)


async def healthz(request: web.Request) -> web.Response:
    """Liveness: 200 when the database answers, 503 otherwise. An engine that is over its
    capacity still works: 200, with ``"overloaded": true`` and its ``load`` (the ratio of
    probes asked to capacity and the figures behind it); without an engine in this process
    ``overloaded`` is false and there is no ``load``."""
    load = request.app[METRICS].load
    body: dict[str, object] = {"overloaded": load.overloaded if load is not None else False}
    if load is not None:
        body["load"] = load.as_json()
    if await request.app[STORE].ping():
        return json_response({"status": "ok", **body})
    return json_response({"status": "unavailable", **body}, status=503)


async def metrics_text(request: web.Request) -> web.Response:
    body, content_type = request.app[METRICS].render()
    response = web.Response(body=body)
    response.headers["Content-Type"] = content_type
    return response


async def openapi_json(request: web.Request) -> web.Response:
    return web.Response(body=request.app[OPENAPI_DOCUMENT], content_type="application/json")


def create_app(
    store: Store, settings: Settings, *, metrics: Metrics | None = None
) -> web.Application:
    """The API application over ``store``. ``metrics`` defaults to a fresh registry."""
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        handler_args={
            "max_field_size": MAX_HEADER_FIELD_BYTES,
            "keepalive_timeout": KEEPALIVE_TIMEOUT_S,
            "access_log_class": PathOnlyAccessLogger,  # never the query: it may hold a token
        },
        middlewares=[
            error_middleware, body_limit_middleware, ApiSlots(settings.api_concurrency).middleware,
            pingping.query_token_middleware, auth_middleware, rate_limit_middleware,
        ],
    )
    app[STORE] = store
    app[SETTINGS] = settings
    app[METRICS] = metrics if metrics is not None else Metrics()
    app[HTTP_COUNTERS] = {}
    app[RATE_LIMITER] = RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
    app[CREATE_COMBINER] = CreateCombiner(store)
    app[WINDOWS_CACHE] = WindowsCache()
    app[OPENAPI_DOCUMENT] = orjson.dumps(
        openapi.build_document(
            settings.public_base_url,
            extra_paths={**webhooks_api.OPENAPI_PATHS, **nodes_api.OPENAPI_PATHS,
                         **maintenance_api.OPENAPI_PATHS, **certificates_api.OPENAPI_PATHS,
                         **timings_api.OPENAPI_PATHS, **badges.OPENAPI_PATHS,
                         **notifications_api.OPENAPI_PATHS,
                         **monitorset_api.OPENAPI_PATHS, **pings.OPENAPI_PATHS},
        )
    )
    # Before api.routes: /webapi/monitors/export must match before /webapi/monitors/{id}.
    app.router.add_routes(monitorset_api.routes)
    app.router.add_routes(api.routes)
    app.router.add_routes(webhooks_api.routes)
    app.router.add_routes(nodes_api.routes)
    app.router.add_routes(maintenance_api.routes)
    app.router.add_routes(certificates_api.routes)
    app.router.add_routes(timings_api.routes)
    app.router.add_routes(notifications_api.routes)
    notifications_api.setup(app, settings)
    app.router.add_get("/webapi/openapi.json", openapi_json)
    app.router.register_resource(pingping.mount(api.routes))
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_text)
    app.router.add_routes(badges.routes)
    pings.setup(app)
    # Last: /{identifier} must never shadow a fixed path (its pattern cannot match one).
    app.router.add_routes(status_page.routes)
    return app
