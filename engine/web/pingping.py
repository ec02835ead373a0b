"""``/pingping/webapi``: the /webapi operations as the hosted PingPing service answered them.

Published PingPing clients (an Ansible collection, Laravel packages, dashboard tiles) were
written against the live service, which differed from api.md in four places. This module is
the one adapter between them and the /webapi handlers of
:mod:`engine.web.api.monitors`; the handlers,
their validation, the store and every error answer (401, 404, 405, 413, 422, 429, 503) are
the same objects whichever mount a request came through:

1. ``GET /monitors`` answers ``{"data": [...]}`` instead of a bare array.
2. Create answers 200 instead of 201; delete answers 200 with the body ``{}`` instead of
   204 (a JSON body, because clients that decode every 200 must not choke on an empty one).
3. A ``url`` given to create or update has its query normalised as the live service stored
   it: a key without a value gains ``=`` (``?foo`` is stored and shown as ``?foo=``).
4. The token may come from the query, ``?api_key=<token>``, instead of the header.

Its clients know only http(s) monitors, so that is all they see (:data:`WEB_SCHEMES`): the
list leaves out monitors of other schemes, which are not found (404) by id, nor their
checks; a create or update naming another scheme is a 422 under ``url``.

Only the api.md operations are mounted (:data:`MOUNTED`): monitors, statistics, checks.
The Upwatch additions (account, webhook log, nodes, the OpenAPI document) exist under
/webapi only, and ``/pingping/webapi/<anything else>`` is a JSON 404.

The mount is one resource on the app's router (:class:`MountResource`) holding its own
dispatcher, so it lists no routes of its own in ``app.router.routes()``: the OpenAPI
document describes /webapi, and the mount is a compatibility path, not a second API.

The query token never reaches a handler, a log line or an error body:
:func:`query_token_middleware` moves a well-formed ``api_key`` into an ``Authorization``
header of a cloned request whose query no longer holds it, and the app's ordinary Bearer
authentication, rate limit and authentication cache take it from there. Anything else (two
``api_key``, a header as well, a value that cannot be a token) is left as it came, and the
app's rule that refuses a token-looking query parameter answers the usual 401. Logs name the
path without the query (:mod:`engine.web.access_log`, and the error middleware's lines).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.web_routedef import RouteDef
from aiohttp.web_urldispatcher import (
    AbstractRoute,
    PrefixResource,
    UrlDispatcher,
    UrlMappingMatchInfo,
)
from yarl import URL

from engine.monitors.schemes import named_in
from engine.runtime.errors import NotFound, ValidationFailed
from engine.web.jsonio import BODY_REWRITE, json_response
from engine.web.keys import ACCOUNT, STORE

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

MOUNT_PREFIX = "/pingping"
PREFIX = MOUNT_PREFIX + "/webapi"
QUERY_TOKEN = "api_key"
# A token as the app issues it is URL-safe ASCII; anything else in api_key cannot be one,
# and is left in the query for the app's refusal (see the module docstring).
_MAX_TOKEN_LENGTH = 512


def in_mount(path: str) -> bool:
    """True for ``/pingping/webapi`` and every path under it."""
    return path == PREFIX or path.startswith(PREFIX + "/")


# --- URL normalisation ---------------------------------------------------------------------


def normalise_query(url: str) -> str:
    """``url`` with each query pair that has no ``=`` given one, as the live service stored
    it: ``https://example.com/?foo&a=1`` -> ``https://example.com/?foo=&a=1``. Everything
    else (empty pairs, order, escapes, the fragment) is left as it is for the validation of
    :func:`engine.monitors.validation.normalise_url`, which trims surrounding whitespace first:
    so does this, or ``?foo `` would become ``?foo =``."""
    text = url.strip()
    base, hash_sign, fragment = text.partition("#")
    head, question_mark, query = base.partition("?")
    if not question_mark or not query:
        return text
    pairs = "&".join(p if not p or "=" in p else p + "=" for p in query.split("&"))
    return f"{head}?{pairs}{hash_sign}{fragment}"


def _normalise_url_field(body: dict[str, Any]) -> dict[str, Any]:
    url = body.get("url")
    if isinstance(url, str):
        return _web_url_only({**body, "url": normalise_query(url)})
    return body  # not a string: the handler's validation says so, as under /webapi


# --- responses -----------------------------------------------------------------------------


# The monitors the mount's clients see: those of the schemes the hosted service had.
WEB_SCHEMES = ("http", "https")


def _web_url_only(body: dict[str, Any]) -> dict[str, Any]:
    """A create or update body's ``url`` of another scheme: the 422 the service gave."""
    scheme = named_in(body.get("url"))
    if scheme is not None and scheme not in WEB_SCHEMES:
        raise ValidationFailed(
            {"url": ["The url must be an absolute URL with scheme http or https."]})
    return body


async def _web_monitor_only(request: web.Request, by: str) -> None:
    """404 for a monitor (``by`` "monitor") or check ("check") of another scheme."""
    try:
        path_id = int(request.match_info["id"])
    except ValueError:
        return  # the handler answers its own 404
    store = request.app[STORE]
    account = request[ACCOUNT].id
    scheme = await (store.scheme_of(account, monitor_id=path_id) if by == "monitor"
                    else store.scheme_of(account, check_id=path_id))
    if scheme is not None and scheme not in WEB_SCHEMES:
        raise NotFound("Monitor not found." if by == "monitor" else "Check not found.")


def _web_monitors_of(body: bytes) -> bytes:
    """The list body without monitors of other schemes (as it came when it has none)."""
    monitors = orjson.loads(body)
    shown = [m for m in monitors if m.get("scheme") in WEB_SCHEMES]
    return body if len(shown) == len(monitors) else orjson.dumps(shown)


@dataclass(frozen=True, slots=True)
class _Answer:
    """How the mount's answer differs from /webapi's success answer for one operation."""

    status: int | None = None  # another success status
    envelope: bool = False  # {"data": <the /webapi body>}
    empty_object: bool = False  # the body {} where /webapi has none
    normalise_url: bool = False  # the request body's url gets normalise_query
    by_id: str | None = None  # "monitor" or "check": the path id's must be http(s)

    def adapt(self, handler: Handler) -> Handler:
        async def pingping_handler(request: web.Request) -> web.StreamResponse:
            if self.normalise_url:
                request[BODY_REWRITE] = _normalise_url_field
            if self.by_id is not None:
                await _web_monitor_only(request, self.by_id)
            # Errors are raised (the app's error middleware answers them, the same under both
            # mounts); one a handler returns is passed on as it is too. Only success changes.
            response = await handler(request)
            if response.status >= 300 or not isinstance(response, web.Response):
                return response
            if self.empty_object:
                return json_response({}, status=self.status or response.status)
            if self.envelope and isinstance(response.body, bytes):  # json_response's bytes
                response.body = b'{"data":' + _web_monitors_of(response.body) + b"}"
            if self.status is not None:
                response.set_status(self.status)
            return response

        pingping_handler.__name__ = f"pingping_{getattr(handler, '__name__', 'handler')}"
        return pingping_handler


_SAME = _Answer()

# Every operation of api.md section 4, by its /webapi method and path. Nothing else is
# mounted: a /webapi route added later stays /webapi-only until it is named here.
MOUNTED: dict[tuple[str, str], _Answer] = {
    ("GET", "/webapi/monitors"): _Answer(envelope=True),
    ("POST", "/webapi/monitors"): _Answer(status=200, normalise_url=True),
    ("GET", "/webapi/monitors/{id}"): _Answer(by_id="monitor"),
    ("PUT", "/webapi/monitors/{id}"): _Answer(normalise_url=True, by_id="monitor"),
    ("DELETE", "/webapi/monitors/{id}"): _Answer(status=200, empty_object=True,
                                                 by_id="monitor"),
    ("GET", "/webapi/monitors/{id}/statistics"): _Answer(by_id="monitor"),
    ("PUT", "/webapi/checks/{id}"): _Answer(by_id="check"),
    ("POST", "/webapi/checks/{id}/enable"): _Answer(by_id="check"),
    ("POST", "/webapi/checks/{id}/disable"): _Answer(by_id="check"),
}


# --- routing -------------------------------------------------------------------------------


class MountResource(PrefixResource):
    """``/pingping/webapi`` on the app's router: owns every path under it and resolves them
    through a dispatcher of its own (an unknown path there is a 404, a known one with another
    method a 405 with ``Allow``, as under /webapi). Its routes carry their own templates
    (``/pingping/webapi/monitors/{id}``), which label the request metrics apart from
    /webapi's."""

    def __init__(self, dispatcher: UrlDispatcher) -> None:
        super().__init__(PREFIX)
        self._dispatcher = dispatcher

    async def resolve(self, request: web.Request) -> tuple[UrlMappingMatchInfo | None, set[str]]:
        if not in_mount(request.rel_url.path_safe):
            return None, set()
        return await self._dispatcher.resolve(request), set()

    def freeze(self) -> None:
        self._dispatcher.freeze()

    def url_for(self, *args: str, **kwargs: str) -> URL:
        raise RuntimeError(".url_for() is not supported by the PingPing mount")

    def get_info(self) -> dict[str, Any]:  # type: ignore[override]
        return {"prefix": PREFIX, "mounts": "/webapi"}

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[AbstractRoute]:
        # A compatibility path, not more API: the app's routes (and the OpenAPI document
        # built from the same handlers) are /webapi's. MOUNTED says what is here.
        return iter(())


def mount(routes: web.RouteTableDef) -> MountResource:
    """The mount over ``routes`` (:data:`engine.web.api.monitors.routes`). Raises LookupError at
    start-up when an operation of :data:`MOUNTED` is not among them."""
    dispatcher = UrlDispatcher()
    found = set()
    for route in routes:
        if not isinstance(route, RouteDef):
            continue
        answer = MOUNTED.get((route.method, route.path))
        if answer is None:
            continue
        found.add((route.method, route.path))
        RouteDef(
            route.method, MOUNT_PREFIX + route.path, answer.adapt(route.handler), route.kwargs
        ).register(dispatcher)
    missing = set(MOUNTED) - found
    if missing:
        raise LookupError(f"/webapi has no route for {sorted(missing)}")
    return MountResource(dispatcher)


# --- the token -----------------------------------------------------------------------------


def _plausible_token(value: str) -> bool:
    return (
        0 < len(value) <= _MAX_TOKEN_LENGTH
        and value.isascii()
        and value.isprintable()
        and " " not in value
    )


def _without_query_token(raw_query: str) -> str:
    """The raw query without its ``api_key`` pairs, every other byte as it came."""
    return "&".join(
        pair for pair in raw_query.split("&") if pair.partition("=")[0] != QUERY_TOKEN
    )


@web.middleware
async def query_token_middleware(
    request: web.Request, handler: Handler
) -> web.StreamResponse:
    """On the mount, ``?api_key=<token>`` becomes ``Authorization: Bearer <token>`` of a
    clone of the request without that parameter; the app's authentication follows. Must run
    before it. Ambiguous or malformed credentials are left as they came, for its 401."""
    if not request.query_string or not in_mount(request.rel_url.path_safe):
        return await handler(request)
    tokens = request.query.getall(QUERY_TOKEN, [])
    if (
        len(tokens) != 1
        or not _plausible_token(tokens[0])
        or "Authorization" in request.headers
    ):
        return await handler(request)
    rest = _without_query_token(request.rel_url.raw_query_string)
    rel_url = URL(request.rel_url.raw_path + ("?" + rest if rest else ""), encoded=True)
    headers = request.headers.copy()
    headers["Authorization"] = f"Bearer {tokens[0]}"
    try:
        clone = request.clone(rel_url=rel_url, headers=headers)
    except UnicodeEncodeError:
        # A header that came as undecodable bytes cannot be re-encoded into the clone.
        return await handler(request)
    return await handler(clone)
