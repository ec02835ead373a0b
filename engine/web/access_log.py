"""Access log lines that name the path and never the query.

aiohttp's default access line quotes the request line, query included, and a query may hold
a credential (the PingPing mount's ``?api_key=``, or a token some client put there by
mistake before the API refused it). This logger writes the path as it came on the wire
(still percent-encoded, so a ``%0d%0a`` in it cannot forge a line) and the query never.

``upwatch run`` serves without access lines (engine.daemon); an embedding that turns them on
through ``AppRunner(access_log=...)`` gets these, since ``create_app`` sets this class in the
app's handler arguments.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger


class PathOnlyAccessLogger(AbstractAccessLogger):
    """``<remote> "<METHOD> <raw path>" <status> <bytes> <seconds>``."""

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        self.logger.info(
            '%s "%s %s" %s %s %.6f',
            request.remote or "-", request.method, request.rel_url.raw_path,
            response.status, response.body_length, time,
        )

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.INFO)
