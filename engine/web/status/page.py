"""The public status page: ``GET /{identifier}`` (HTML) and ``GET /{identifier}.json``.

Public, no authentication (decisions.md "Status page"). :func:`engine.web.app.create_app`
mounts :data:`routes` last; the identifier pattern is strict (10 to 64 URL-safe
characters, no dot or slash), so these routes can neither shadow ``/webapi``, ``/healthz``
or ``/metrics`` nor be reached with a path-traversal attempt, which the router answers
with its own 404.

Contracts:

- An unknown or deleted identifier is a 404: an HTML page (``Cache-Control: no-store``), or
  ``{"message": ...}`` for ``.json``. A database outage is a 503 in the same two forms.
- Every HTML response carries a Content-Security-Policy that allows nothing but the one
  inline stylesheet (by its SHA-256) and ``data:`` images: no script, no frame, no form, no
  external load. With Jinja autoescaping on, a user string can neither run nor restyle.
- The page is self-contained (no CDN, font, script or image from elsewhere) and refreshes
  itself every 60 s with ``<meta http-equiv="refresh">``; ``Cache-Control: public,
  max-age=30`` lets a proxy absorb bursts of viewers.
- The host, never the full URL, is shown: a URL's path and query may hold tokens the owner
  would not publish. A check's error is shown as a reason in a visitor's words
  (:mod:`engine.web.status.public_text`), never as the owner's error text, which may quote
  what the target answered.
- ``GET /`` is a short page saying what this service is and where status pages live (JSON
  ``{"service", "message", "status_page"}`` for a client that asks for JSON only).

The view model is built by pure functions in :mod:`engine.web.status.view`.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import replace
from typing import Any

import orjson
from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from engine.db.public import (
    StatusPageData,
)
from engine.runtime.errors import DatabaseUnavailable
from engine.web.keys import STORE
from engine.web.status.history import enrich
from engine.web.status.notice import MaintenanceNotice, notices_json, with_maintenance
from engine.web.status.view import StatusView, build_json, build_view

routes = web.RouteTableDef()

# URL-safe identifiers only (secrets.token_urlsafe), at least 10 characters as decisions.md
# promises; no '.', '/', '%' or NUL can match, so traversal attempts never reach a handler.
IDENTIFIER_PATTERN = "[A-Za-z0-9_-]{10,64}"


# --- templates and headers -------------------------------------------------------------------

# Built once per process: template compilation is the expensive part of Jinja.
# StrictUndefined turns a template typo into an error in the tests instead of a blank.
_env = Environment(
    loader=PackageLoader("engine.web.status", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=False,
)
# The stylesheet lives in a template file (named .html so the package data glob ships it)
# and is rendered once: its exact text is what the CSP hash below allows.
_CSS = _env.get_template("_styles.html").render()
_CSS_HASH = base64.b64encode(hashlib.sha256(_CSS.encode()).digest()).decode()
_STATUS_TEMPLATE = _env.get_template("status.html")
_ERROR_TEMPLATE = _env.get_template("404.html")
_INDEX_TEMPLATE = _env.get_template("index.html")

CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{_CSS_HASH}'; img-src data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_COMMON_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
_HTML_HEADERS = {
    **_COMMON_HEADERS,
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    # For browsers that predate frame-ancestors.
    "X-Frame-Options": "DENY",
}
# The JSON twin is meant for badges and embeds on other sites: readable cross-origin.
# It is public and carries no credentials, so a wildcard origin gives nothing away.
_JSON_HEADERS = {
    **_COMMON_HEADERS,
    "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
    "Access-Control-Allow-Origin": "*",
}
CACHE_OK = "public, max-age=30"
CACHE_ERROR = "no-store"

# --- responses -------------------------------------------------------------------------------


def render_status(view: StatusView) -> str:
    return _STATUS_TEMPLATE.render(v=view, css=Markup(_CSS))  # noqa: S704 (our own stylesheet)


def _html(body: str, status: int, cache: str) -> web.Response:
    response = web.Response(text=body, status=status, content_type="text/html", charset="utf-8",
                            headers=_HTML_HEADERS)
    response.headers["Cache-Control"] = cache
    return response


def _error_page(status: int, heading: str, message: str) -> web.Response:
    body = _ERROR_TEMPLATE.render(
        status_code=status, heading=heading, message=message,
        css=Markup(_CSS),  # noqa: S704 (our own stylesheet)
    )
    response = _html(body, status, CACHE_ERROR)
    if status == 503:
        response.headers["Retry-After"] = "30"
    return response


def not_found_page() -> web.Response:
    return _error_page(
        404, "Status page not found",
        "There is no status page at this address. It may have been removed, or the link may "
        "be incomplete.",
    )


def _json(data: Any, status: int, cache: str) -> web.Response:
    response = web.Response(body=orjson.dumps(data), status=status,
                            content_type="application/json", headers=_JSON_HEADERS)
    response.headers["Cache-Control"] = cache
    if status == 503:
        response.headers["Retry-After"] = "30"
    return response


# What ``/`` says: the service, and where status pages are.
INDEX_JSON = {
    "service": "Upwatch",
    "message": "This is an Upwatch monitoring service. Status pages are at /{identifier}.",
    "status_page": "/{identifier}",
}


def _wants_json(request: web.Request) -> bool:
    """A client that asks for JSON and not for HTML (browsers list text/html)."""
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


@routes.get("/")
async def index(request: web.Request) -> web.Response:
    """``/``: a short page saying what this service is (JSON for clients asking for it)."""
    if _wants_json(request):
        return _json(INDEX_JSON, 200, CACHE_OK)
    body = _INDEX_TEMPLATE.render(css=Markup(_CSS))  # noqa: S704 (our own stylesheet)
    return _html(body, 200, CACHE_OK)


async def _load(request: web.Request) -> StatusPageData | None:
    return await request.app[STORE].status_page(request.match_info["identifier"])


async def _maintenance(
    request: web.Request, data: StatusPageData
) -> tuple[StatusPageData, list[MaintenanceNotice]]:
    """Maintenance windows: uptime net of them, and their notices (maintenance_notice.py)."""
    try:
        return await with_maintenance(request.app[STORE], data)
    except DatabaseUnavailable:
        return data, []


@routes.get(f"/{{identifier:{IDENTIFIER_PATTERN}}}")
async def status_html(request: web.Request) -> web.Response:
    """The status page as HTML (404 page when the identifier is unknown)."""
    try:
        data = await _load(request)
    except DatabaseUnavailable:
        return _error_page(503, "Status temporarily unavailable",
                           "The status of this site cannot be read right now. "
                           "Please try again in a minute.")
    if data is None:
        return not_found_page()
    data, notices = await _maintenance(request, data)
    view = await enrich(request.app[STORE], data, replace(build_view(data), maintenance=notices))
    return _html(render_status(view), 200, CACHE_OK)


@routes.get(f"/{{identifier:{IDENTIFIER_PATTERN}}}.json")
async def status_json(request: web.Request) -> web.Response:
    """The status page as JSON (``{"message": ...}`` 404 when unknown)."""
    try:
        data = await _load(request)
    except DatabaseUnavailable:
        return _json({"message": "The service is temporarily unavailable."}, 503, CACHE_ERROR)
    if data is None:
        return _json({"message": "Status page not found."}, 404, CACHE_ERROR)
    data, notices = await _maintenance(request, data)
    body = build_json(data)
    body["maintenance"] = notices_json(notices)
    return _json(body, 200, CACHE_OK)
