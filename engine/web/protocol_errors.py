"""Requests aiohttp's HTTP parser refuses, answered in the API's own words.

A request the parser cannot read (a ``Content-Encoding`` it cannot decode, a bad chunk
size, ``Content-Length`` together with ``Transfer-Encoding``, a malformed ``Content-Length``,
a bad header name, ...) never reaches the application's middlewares: aiohttp answers it
itself with a plain-text 400 that quotes the offending header line back (and, for an
encoding, names the package to install), and logs a full traceback at ERROR. Anybody could
fill the log with those.

:class:`ApiRunner` serves an application with a request handler whose answer to such a
request is the API's JSON error body (``{"message": ...}``) with the parser's 4xx status,
and one WARNING line naming the client and the kind of error, nothing from the request.
Errors of 500 and up (a bug in a handler, not a bad request) keep aiohttp's handling. A
body found unreadable only after the application answered (aiohttp drains the unread rest)
is logged the same way, one line, instead of aiohttp's "Unhandled exception" traceback.
"""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import (
    BadHttpMethod,
    ContentEncodingError,
    HttpProcessingError,
    LineTooLong,
)
from aiohttp.web_protocol import RequestHandler, RequestPayloadError
from aiohttp.web_request import BaseRequest

from engine.web.jsonio import message_response

log = logging.getLogger(__name__)

UNREADABLE = "The request could not be read: it is not valid HTTP/1.1."
ENCODING = "The request's Content-Encoding is not supported."
TOO_LONG = "A request line or header is too long."


def message_for(exc: BaseException | None) -> str:
    """The client's message for a parser error: a fixed sentence per kind, never the
    parser's text (it quotes the request back)."""
    if isinstance(exc, ContentEncodingError):
        return ENCODING
    if isinstance(exc, LineTooLong):
        return TOO_LONG
    return UNREADABLE


class ApiRequestHandler(RequestHandler):
    """aiohttp's connection handler with :func:`message_for` answers to parser errors."""

    def handle_error(
        self,
        request: BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        if request.writer.output_size > 0:
            # An answer already began: nothing sensible can follow it (as aiohttp does).
            raise ConnectionError("response already started; cannot send the error")
        # Non-HTTP traffic (TLS to a plain port, scanners) on a fresh connection is routine:
        # debug, as aiohttp does; anything else is worth one line.
        level = logging.DEBUG if isinstance(exc, BadHttpMethod) else logging.WARNING
        log.log(level, "refused an unreadable request from %s: %s (%d)",
                request.remote, type(exc).__name__ if exc else "parse error", status)
        response = message_response(message_for(exc), status)
        response.force_close()
        return response

    def log_exception(self, *args: Any, **kw: Any) -> None:
        # A body that turns out unreadable after the application answered (aiohttp drains
        # what the handler left unread, and meets the broken gzip or chunk) was logged as an
        # "Unhandled exception" with a traceback. It is the client's error: one line.
        exc = kw.get("exc_info")
        if isinstance(exc, HttpProcessingError | RequestPayloadError):
            peer = self.transport.get_extra_info("peername") if self.transport else None
            log.warning("refused an unreadable request body from %s: %s",
                        peer[0] if isinstance(peer, tuple) and peer else "?",
                        type(exc).__name__)
            return
        super().log_exception(*args, **kw)


class _ApiServer(web.Server):
    def __call__(self) -> RequestHandler:
        return ApiRequestHandler(self, loop=self._loop, **self._kwargs)


class ApiRunner(web.AppRunner):
    """``web.AppRunner`` whose connections use :class:`ApiRequestHandler`."""

    async def _make_server(self) -> web.Server:
        made: Any = await super()._make_server()
        return _ApiServer(
            made.request_handler,
            request_factory=made.request_factory,
            handler_cancellation=made.handler_cancellation,
            loop=made._loop,
            **made._kwargs,
        )
