"""Typed keys under which :func:`engine.web.app.create_app` keeps shared objects on the app.

Handlers in any ``engine.web`` module read them as ``request.app[STORE]`` and so on. The
authenticated account is ``request[ACCOUNT]``, an :class:`engine.db.accounts.Account`: a
typed RequestKey (a plain string key made aiohttp warn, and silencing that cost a
``warnings.catch_warnings()`` on every request).
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.db.accounts import Account
from engine.db.store import Store
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from engine.web.ratelimit import RateLimiter

STORE = web.AppKey("store", Store)
SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
RATE_LIMITER = web.AppKey("rate_limiter", RateLimiter)
# (upwatch_http_requests_total's, upwatch_http_request_duration_seconds's) labelled children
# by (route template, status code).
HTTP_COUNTERS = web.AppKey("http_counters", dict[tuple[str, int], Any])
# The OpenAPI document, serialised once at start-up.
OPENAPI_DOCUMENT = web.AppKey("openapi_document", bytes)

ACCOUNT = web.RequestKey("account", Account)
