"""REST handlers of api.md section 4 and the decisions.md additions.

Handlers are thin: parse the path id, read and validate the body
(:mod:`engine.monitors.validation`; on the loop when the body is small and compiles no new
pattern, else in a worker thread: :mod:`engine.monitors.offloop`), apply the
private-address rule, call the store, shape the response (:mod:`engine.web.api.views`).
Errors are raised as engine exceptions and mapped to responses by the app's error
middleware.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from engine.db.accounts import Account
from engine.db.monitor_records import MonitorRecord
from engine.domain.secretheaders import origin, origin_text
from engine.monitors import requests as requestconfig
from engine.monitors import schemes, validation
from engine.monitors.heartbeat import is_heartbeat, validate_type
from engine.monitors.offloop import SMALL_BODY, validated
from engine.monitors.requests import secret_box
from engine.monitors.validation import TargetUrl
from engine.runtime.errors import NotFound, ValidationFailed
from engine.runtime.settings import Settings
from engine.web.api import heartbeats as heartbeat_api
from engine.web.api import maintenance as maintenance_api
from engine.web.api import views
from engine.web.api.create_combiner import CREATE_COMBINER, spec_of
from engine.web.api.maintenance_uptime import windows_of_monitor, with_maintenance
from engine.web.concurrency import slot_given_back
from engine.web.jsonio import empty_response, json_response, read_body
from engine.web.keys import ACCOUNT, SETTINGS, STORE

routes = web.RouteTableDef()


def _small_body(request: web.Request) -> bool:
    """The body was at most SMALL_BODY bytes as read: a length given, no content coding
    (a compressed body may unfold to far more)."""
    length = request.content_length
    coding = request.headers.get("Content-Encoding", "identity").strip().lower()
    return length is not None and length <= SMALL_BODY and coding == "identity"


def _account(request: web.Request) -> Account:
    account: Account = request[ACCOUNT]
    return account


def _path_id(request: web.Request) -> int:
    return validation.parse_id(request.match_info["id"])


async def _ensure_allowed_target(settings: Settings, target: TargetUrl, field: str) -> None:
    await validation.check_target(
        target, allow_private=settings.allow_private_targets, field=field)


# --- monitors ------------------------------------------------------------------------------


@routes.get("/webapi/monitors")
async def list_monitors(request: web.Request) -> web.Response:
    account_id = _account(request).id
    monitors = await request.app[STORE].list_monitors(account_id)
    # Maintenance windows leave the 30-day uptime (engine/web/api/maintenance_uptime.py).
    monitors = await with_maintenance(request, account_id, monitors)
    base = request.app[SETTINGS].public_base_url
    return json_response(await heartbeat_api.shaped(request, monitors, base))


@routes.post("/webapi/monitors")
async def create_monitor(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    account = _account(request)
    plan = settings.plan(account.plan)
    body = await read_body(request)
    validate_type(body)
    if is_heartbeat(body):
        return await heartbeat_api.create(request, account.id, plan.monitor_limit, body)
    command, config = await validated(lambda: schemes.validated(
        body, True, lambda: validation.validate_monitor_create(body, plan)),
        small=_small_body(request), waiting=lambda: slot_given_back(request))
    await _ensure_allowed_target(settings, command.target, "url")
    # Concurrent creates of the account share one transaction (engine.web.api.create_combiner).
    stored = (None if config.request is None
              else requestconfig.to_stored(config.request, secret_box(settings), None))
    monitor = await request.app[CREATE_COMBINER].create(
        account.id, spec_of(command, stored, config.assertions), plan.monitor_limit)
    return json_response(views.monitor_reduced(monitor, settings.public_base_url), status=201)


@routes.get("/webapi/monitors/{id}")
async def get_monitor(request: web.Request) -> web.Response:
    monitor_id = _path_id(request)
    account_id = _account(request).id
    monitor = await request.app[STORE].get_monitor(account_id, monitor_id)
    [monitor] = await with_maintenance(request, account_id, [monitor])
    base = request.app[SETTINGS].public_base_url
    [shaped] = await heartbeat_api.shaped(request, [monitor], base)
    return json_response(shaped)


@routes.put("/webapi/monitors/{id}")
async def update_monitor(request: web.Request) -> web.Response:
    monitor_id = _path_id(request)
    settings = request.app[SETTINGS]
    body = await read_body(request)
    store = request.app[STORE]
    account = _account(request)
    if "heartbeat" in await store.get_check_ids(account.id, monitor_id):
        current_hb = await store.get_monitor(account.id, monitor_id)
        return await heartbeat_api.update_monitor(request, account.id, current_hb, body)
    # A request or assertions without a url follow the rules of the stored URL's scheme.
    stored_scheme = (await store.scheme_of(account.id, monitor_id=monitor_id)
                     if not validation.present(body, "url") and (
                         "request" in body or "assertions" in body) else None)
    command, config = await validated(lambda: schemes.validated(
        body, False, lambda: validation.validate_monitor_update(body), stored_scheme),
        small=_small_body(request), waiting=lambda: slot_given_back(request))
    t = command.target
    current = None
    if t is not None or config.request is not None or config.assertions is not None:
        # A missing monitor is a 404 before any DNS work on the new URL.
        current = await store.get_monitor(account.id, monitor_id)
    if t is not None and current is not None:
        # Stored request and assertions the body leaves out must fit the new URL's scheme.
        kept = await validated(lambda: schemes.kept_config(
            current.scheme, t.scheme, body, requestconfig.shown_request(current.request),
            requestconfig.shown_assertions(current.assertions)),
            small=_small_body(request), waiting=lambda: slot_given_back(request))
        if kept.assertions is not None:
            config = requestconfig.Config(config.request, kept.assertions)
    stored = _stored_config(settings, current, config)
    if t is None:
        monitor = await store.update_monitor(
            account.id, monitor_id, alias=command.alias, config=stored)
    else:
        assert current is not None
        moved = origin(t.scheme, t.host, t.port)
        if moved != origin(current.scheme, current.host, current.port):
            # Secrets stay with the origin they were given for (docs/security.md).
            errors = requestconfig.moved_secrets(
                config.request, current.request, origin_text(moved))
            if errors:
                raise ValidationFailed(errors)
            # Written as checked, so a concurrent update cannot slip secrets in meanwhile.
            stored = stored or (current.request, current.assertions)
        if not settings.allow_private_targets:
            await _ensure_allowed_target(settings, t, "url")
        monitor = await store.update_monitor(
            account.id, monitor_id, alias=command.alias,
            url=t.url, scheme=t.scheme, host=t.host, port=t.port, config=stored,
            new_check_interval=validation.certificate_interval(
                settings.plan(account.plan)),
        )
    return json_response(views.monitor_reduced(monitor, settings.public_base_url))


def _stored_config(
    settings: Settings, current: MonitorRecord | None, config: requestconfig.Config,
) -> tuple[Any, Any] | None:
    """The monitor's new stored ``(request, assertions)`` for an update, or None
    when the body carries neither: keys left out keep what is stored."""
    if config.request is None and config.assertions is None:
        return None
    assert current is not None
    request, assertions = current.request, current.assertions
    if config.request == requestconfig.Config.REMOVE:
        request = None
    elif config.request is not None:
        request = requestconfig.to_stored(config.request, secret_box(settings), request)
    if config.assertions == requestconfig.Config.REMOVE:
        assertions = None
    elif config.assertions is not None:
        assertions = config.assertions
    return request, assertions


@routes.delete("/webapi/monitors/{id}")
async def delete_monitor(request: web.Request) -> web.Response:
    monitor_id = _path_id(request)
    await request.app[STORE].delete_monitor(_account(request).id, monitor_id)
    return empty_response(204)


@routes.get("/webapi/monitors/{id}/statistics")
async def monitor_statistics(request: web.Request) -> web.Response:
    monitor_id = _path_id(request)
    store = request.app[STORE]
    account_id = _account(request).id
    stats = await store.monitor_statistics(account_id, monitor_id)
    # Maintenance windows leave the uptime figure (engine/web/api/maintenance.py).
    windows = await windows_of_monitor(request, account_id, monitor_id)
    body = views.statistics(stats)
    if windows:
        body = maintenance_api.statistics_with_maintenance(body, stats, windows)
    return json_response(body)


# --- checks --------------------------------------------------------------------------------


@routes.put("/webapi/checks/{id}")
async def update_check(request: web.Request) -> web.Response:
    check_id = _path_id(request)
    body = await read_body(request)
    store = request.app[STORE]
    account = _account(request)
    # The kind decides which fields are allowed; it never changes, so reading it outside
    # the update's transaction is safe.
    check = await store.get_check(account.id, check_id)
    if check.kind == "heartbeat":
        return await heartbeat_api.update_check(request, account.id, check_id, body)
    plan = request.app[SETTINGS].plan(account.plan)
    command = validation.validate_check_update(body, check.kind, plan)
    updated = await store.update_check(
        account.id, check_id,
        interval=command.interval,
        notification_threshold_s=command.notification_threshold_s,
        recovery_threshold_s=command.recovery_threshold_s,
        expiry_threshold_percent=command.expiry_threshold_percent,
        expiry_threshold_days=command.expiry_threshold_days,
    )
    return json_response(views.check_updated(updated))


async def _toggle(request: web.Request, enabled: bool) -> web.Response:
    check_id = _path_id(request)
    check = await request.app[STORE].set_check_enabled(_account(request).id, check_id, enabled)
    return json_response(views.check_toggled(check))


@routes.post("/webapi/checks/{id}/enable")
async def enable_check(request: web.Request) -> web.Response:
    return await _toggle(request, True)


@routes.post("/webapi/checks/{id}/disable")
async def disable_check(request: web.Request) -> web.Response:
    return await _toggle(request, False)


# --- account -------------------------------------------------------------------------------


@routes.get("/webapi/account")
async def get_account(request: web.Request) -> web.Response:
    account = await request.app[STORE].get_account(_account(request).id)
    if account is None:  # deleted between authentication and now
        raise NotFound("Account not found.")
    return json_response(views.account(account, request.app[SETTINGS].plan(account.plan)))


@routes.put("/webapi/account")
async def update_account(request: web.Request) -> web.Response:
    settings = request.app[SETTINGS]
    store = request.app[STORE]
    command = validation.validate_account_update(await read_body(request))
    account_id = _account(request).id
    if command.change_webhook:
        if command.webhook_url is not None:
            await _ensure_allowed_target(settings, command.webhook_url, "webhook_url")
        url = command.webhook_url.url if command.webhook_url is not None else None
        account = await store.set_webhook_url(account_id, url)
    else:
        fresh = await store.get_account(account_id)
        if fresh is None:
            raise NotFound("Account not found.")
        account = fresh
    return json_response(views.account(account, settings.plan(account.plan)))
