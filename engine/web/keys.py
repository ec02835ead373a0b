"""Typed keys under which :func:`engine.web.app.create_app` keeps shared objects on the app.

Handlers in any ``engine.web`` module read them as ``request.app[STORE]`` and so on. The
authenticated account is ``request[ACCOUNT]`` (the plain string ``"account"``, the agreed
contract between handler modules), an :class:`engine.db.accounts.Account`.
"""

from __future__ import annotations

from aiohttp import web

from engine.db.store import Store
from engine.metrics import Metrics
from engine.settings import Settings
from engine.web.ratelimit import RateLimiter

STORE = web.AppKey("store", Store)
SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
RATE_LIMITER = web.AppKey("rate_limiter", RateLimiter)
# The OpenAPI document, serialised once at start-up.
OPENAPI_DOCUMENT = web.AppKey("openapi_document", bytes)

ACCOUNT = "account"
