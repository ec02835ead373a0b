"""JSON in and out for every API handler (orjson).

Every response body is JSON with ``Content-Type: application/json`` (a 204 has no body);
request bodies go through :func:`engine.monitors.validation.parse_body`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from engine.monitors.validation import parse_body
from engine.runtime.errors import ValidationFailed
from engine.web.concurrency import body_wait

JSON = "application/json"
# A body must arrive within this many seconds of the handler asking for it. Without a
# deadline a client that declares a body and sends it a byte at a time holds its
# connection and a handler for as long as it likes; 64 KiB in 30 s is 2 KiB/s.
BODY_READ_TIMEOUT_S = 30.0
# A rewrite of the parsed body that an adapter at the edge sets on the request before the
# handler reads it (engine.web.pingping normalises the url of PingPing clients).
BODY_REWRITE: web.RequestKey[Callable[[dict[str, Any]], dict[str, Any]]] = web.RequestKey(
    "body_rewrite")


def json_response(
    data: Any, status: int = 200, headers: Mapping[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=orjson.dumps(data), status=status, content_type=JSON, headers=headers
    )


def message_response(
    message: str, status: int, headers: Mapping[str, str] | None = None
) -> web.Response:
    """The error body of every non-validation failure: ``{"message": ...}``."""
    return json_response({"message": message}, status=status, headers=headers)


async def read_body(request: web.Request, *, max_bytes: int | None = None) -> dict[str, Any]:
    """The request body as a JSON object, whatever its Content-Type (a client that forgets
    the header still gets its JSON read). Over the app's ``client_max_size`` (or
    ``max_bytes``, for the routes that take more) aiohttp raises a 413; anything but a JSON
    object, including a body whose chunking or Content-Encoding is broken, raises
    ValidationFailed under ``body``. A body slower than :data:`BODY_READ_TIMEOUT_S` is a
    408. A :data:`BODY_REWRITE` on the request is applied to the parsed object."""
    reader = request if max_bytes is None else request.clone(client_max_size=max_bytes)
    try:
        # A slow body holds the connection, not one of the API's slots (engine.web.concurrency).
        async with body_wait(request), asyncio.timeout(BODY_READ_TIMEOUT_S):
            raw = await reader.read()
    except TimeoutError:
        raise web.HTTPRequestTimeout() from None
    except (HttpProcessingError, web.RequestPayloadError):
        raise ValidationFailed(
            {"body": ["The body could not be read (broken chunking or Content-Encoding)."]}
        ) from None
    except ConnectionResetError:
        # The client went away mid-body: nobody will read the answer, and it is no fault
        # of ours worth a stack trace.
        raise web.HTTPBadRequest() from None
    body = parse_body(raw)
    rewrite = request.get(BODY_REWRITE)
    return body if rewrite is None else rewrite(body)


def empty_response(status: int = 204) -> web.Response:
    return web.Response(status=status)


__all__: list[str] = [
    "BODY_REWRITE", "JSON", "empty_response", "json_response", "message_response", "read_body",
]
