"""Notifications through the real engine, the real outbox and real local services: mail to
an SMTP server on loopback, json:// and ntfy:// to a local HTTP receiver. No mock of
Apprise: it talks to these over sockets."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine.db.store import Store
from engine.delivery.webhooks.deliverer import Deliverer
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.engine_support import (
    add_monitor,
    fast_settings,
    fetch,
    fetchval,
    running_engine,
    wait_status,
)
from tests.support.notify_support import HttpReceiver, SmtpServer, running_notifier
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

ALL = ["downtime", "uptime_restored", "certificate_invalid", "certificate_recovered",
       "certificate_renewal_due", "domain_renewal_due", "domain_invalid", "domain_recovered"]


def settings_for(tmp_path: Path, **kw: Any) -> Settings:
    kw.setdefault("notify_timeout", 5.0)
    return fast_settings(tmp_path, region="eu-west", **kw)


async def channel(store: Store, account_id: int, url: str, **kw: Any) -> int:
    c = await store.create_channel(
        account_id, name=kw.pop("name", "c"), url=url, events=kw.pop("events", ALL),
        monitor_ids=kw.pop("monitor_ids", None), is_enabled=kw.pop("is_enabled", True),
    )
    return c.id


async def identifier(store: Store, monitor_id: int) -> str:
    return str(await fetchval(store, "SELECT identifier FROM monitors WHERE id = $1",
                              monitor_id))


@contextlib.asynccontextmanager
async def running_deliverer(store: Store, settings: Settings) -> AsyncIterator[None]:
    stop = asyncio.Event()
    task = asyncio.create_task(Deliverer(store, settings, metrics=Metrics()).run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)


async def test_mail_json_and_ntfy_channels_get_the_downtime_and_the_recovery(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = settings_for(tmp_path)
    with SmtpServer() as smtp:
        async with HttpTarget() as site, HttpReceiver() as receiver:
            monitor_id, check_id, _ = await add_monitor(store, acc.id, site.url("/"),
                                                        alias="Shop")
            await channel(store, acc.id, smtp.url(), name="mail")
            await channel(store, acc.id, receiver.json_url("/json"), name="json")
            await channel(store, acc.id, receiver.ntfy_url("ops"), name="ntfy")
            page = f"http://127.0.0.1:8080/{await identifier(store, monitor_id)}"
            async with running_engine(store, settings), running_notifier(store, settings):
                await wait_status(store, check_id, "ok")
                site.status = 500
                down = await wait_status(store, check_id, "down")
                await wait_until(lambda: _async(len(smtp.mails) >= 1), what="the down mail")
                await wait_until(lambda: _async(len(receiver.delivered()) >= 2),
                                 what="the json and ntfy downtime")
                site.status = 200
                await wait_status(store, check_id, "ok")
                await wait_until(lambda: _async(len(smtp.mails) >= 2), what="the up mail")
                await wait_until(lambda: _async(len(receiver.delivered()) >= 4),
                                 what="the json and ntfy recovery")
    since = down["failing_since"].strftime("%Y-%m-%d %H:%M:%S")
    first, second = smtp.mails
    assert first.subject == "DOWN: Shop"
    assert f"is down since {since} UTC" in first.body
    assert "HTTP 500" in first.body and "eu-west" in first.body
    assert page in first.body and site.url("/") in first.body
    assert first.to == ["oncall@example.com"]
    assert second.subject == "UP again: Shop"
    assert "is back up since" in second.body and "UTC" in second.body
    assert "It was down for" in second.body and page in second.body
    json_hits = [h.json() for h in receiver.delivered("/json")]
    assert [h["title"] for h in json_hits] == ["DOWN: Shop", "UP again: Shop"]
    assert "HTTP 500" in json_hits[0]["message"]
    ntfy_hits = [h.json() for h in receiver.delivered("/")]
    assert [(h["topic"], h["title"]) for h in ntfy_hits] == [
        ("ops", "DOWN: Shop"), ("ops", "UP again: Shop")]
    # One message per event and channel, each logged as one delivered try.
    rows = await fetch(store, "SELECT channel_id, event, attempt, delivered "
                              "FROM notification_deliveries ORDER BY id")
    assert len(rows) == 6 and all(r["delivered"] and r["attempt"] == 1 for r in rows)


def _async(value: Any) -> Any:
    async def v() -> Any:
        return value
    return v()


async def test_channels_limited_to_monitors_or_events_or_disabled_stay_silent(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = settings_for(tmp_path)
    async with HttpTarget() as site, HttpReceiver() as receiver:
        m1, c1, _ = await add_monitor(store, acc.id, site.url("/one"), alias="one")
        _, c2, _ = await add_monitor(store, acc.id, site.url("/two"), alias="two")
        await channel(store, acc.id, receiver.json_url("/all"))
        await channel(store, acc.id, receiver.json_url("/only-one"), monitor_ids=[m1])
        await channel(store, acc.id, receiver.json_url("/only-up"), events=["uptime_restored"])
        await channel(store, acc.id, receiver.json_url("/off"), is_enabled=False)
        other, _ = await store.create_account("other")
        await channel(store, other.id, receiver.json_url("/other-account"))
        async with running_engine(store, settings), running_notifier(store, settings):
            await wait_status(store, c1, "ok")
            await wait_status(store, c2, "ok")
            site.status = 500
            await wait_status(store, c1, "down")
            await wait_status(store, c2, "down")
            await wait_until(lambda: _async(len(receiver.delivered("/all")) == 2),
                             what="both downtimes on the channel for all")
            await wait_until(lambda: _async(len(receiver.delivered("/only-one")) == 1),
                             what="monitor one's downtime")
            await wait_until(lambda: _status(store, "delivered"), what="rows delivered")
    assert [h.json()["title"] for h in receiver.delivered("/only-one")] == ["DOWN: one"]
    paths = {h.path for h in receiver.hits}
    assert paths == {"/all", "/only-one"}


async def test_a_failing_receiver_gets_retries_and_the_message_arrives_once(
    store: Store, account: tuple[Any, str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    acc, _ = account
    settings = settings_for(tmp_path)
    caplog.set_level(logging.DEBUG)
    async with HttpTarget() as site, HttpReceiver(status=500) as receiver:
        _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
        secret_url = receiver.json_url("/hook", **{"+X-Api-Key": "never-log-this-key"})
        cid = await channel(store, acc.id, secret_url)
        async with running_engine(store, settings), running_notifier(store, settings):
            await wait_status(store, check_id, "ok")
            site.status = 500
            await wait_status(store, check_id, "down")
            await wait_until(lambda: _async(len(receiver.hits) >= 3), what="three failed tries")
            receiver.status = 200
            await wait_until(lambda: _async(len(receiver.delivered()) == 1), what="delivery")
            await wait_until(lambda: _status(store, "delivered"), what="the row delivered")
    assert len(receiver.delivered()) == 1
    failed = [h for h in receiver.hits if h.answered == 500]
    assert len(failed) >= 3
    assert all(h.headers["X-Api-Key"] == "never-log-this-key" for h in receiver.hits)
    # The log, newest first, one entry per try.
    tries = await store.list_deliveries(acc.id, cid)
    assert tries[0].delivered and tries[0].attempt == len(receiver.hits)
    assert [t.attempt for t in tries] == list(range(len(receiver.hits), 0, -1))
    assert all(not t.delivered and (t.detail or "").startswith("HTTP 500 Internal Server Error")
               for t in tries[1:])
    # What reaches the service's log: every record but Apprise's own, which do not propagate
    # (pytest's capture sees them anyway; the kill -9 test reads a real process's output).
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name != "apprise")
    assert logging.getLogger("apprise").propagate is False
    assert "try 1 failed" in ours  # the failed tries were logged, without the secret
    assert "never-log-this-key" not in ours


async def _status(store: Store, status: str) -> bool:
    rows = await fetch(store, "SELECT status FROM notification_events")
    return bool(rows) and all(r["status"] == status for r in rows)


async def test_a_refusing_smtp_server_gets_retries_and_the_mail_arrives_once(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = settings_for(tmp_path)
    with SmtpServer() as smtp:
        smtp.refuse_data = True
        async with HttpTarget() as site:
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
            cid = await channel(store, acc.id, smtp.url())
            async with running_engine(store, settings), running_notifier(store, settings):
                await wait_status(store, check_id, "ok")
                site.status = 500
                await wait_status(store, check_id, "down")
                await wait_until(lambda: _tries(store, cid, 2), what="two failed tries")
                smtp.refuse_data = False
                await wait_until(lambda: _async(len(smtp.mails) == 1), what="the mail")
                await wait_until(lambda: _status(store, "delivered"), what="delivered")
        assert [m.subject for m in smtp.mails] == ["DOWN: Shop"]
    tries = await store.list_deliveries(acc.id, cid)
    assert tries[0].delivered and not tries[-1].delivered
    assert "451" in (tries[-1].detail or "")


async def _tries(store: Store, channel_id: int, n: int) -> bool:
    got = await fetchval(store, "SELECT count(*) FROM notification_deliveries "
                                "WHERE channel_id = $1", channel_id)
    return int(got) >= n


async def test_an_alert_storm_reaches_a_channel_as_a_few_messages_and_still_as_every_webhook(
    store: Store, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path, notify_group_seconds=300)  # 3 s at this time scale
    n = 200
    async with HttpTarget() as site, HttpReceiver() as receiver:
        acc, _ = await store.create_account("storm", webhook_url=f"{receiver.json_url('/x')}"
                                            .replace("json://", "http://").replace("/x", "/wh"))
        checks = []
        for i in range(n):
            _, check_id, _ = await add_monitor(store, acc.id, site.url(f"/m{i}"),
                                               alias=f"m{i:03d}", notify=False)
            checks.append(check_id)
        await channel(store, acc.id, receiver.json_url("/chat"))
        async with running_engine(store, settings), running_notifier(store, settings), \
                running_deliverer(store, settings):
            await wait_until(lambda: _all_status(store, "ok", n), timeout=30, what="all ok")
            site.status = 500
            await wait_until(lambda: _all_status(store, "down", n), timeout=30,
                             what="all down")
            await wait_until(lambda: _async(len(receiver.delivered("/wh")) >= n),
                             timeout=30, what="every webhook")
            await wait_until(lambda: _status(store, "delivered"), timeout=30,
                             what="every notification row delivered")
    messages = [h.json() for h in receiver.delivered("/chat")]
    assert 2 <= len(messages) <= 20, [m["title"] for m in messages]
    accounted = 0
    for m in messages:
        title = m["title"]
        if title.startswith("DOWN: "):
            accounted += 1
        else:
            count = int(title.split(" ", 1)[0])
            assert title == f"{count} monitors down", title
            # A storm may straddle two windows: each digest lists 20 and counts the rest.
            lines = [x for x in m["message"].splitlines() if x.startswith("- m")]
            assert len(lines) == min(count, 20)
            if count > 20:
                assert f"… and {count - 20} more" in m["message"]
            accounted += count
    assert accounted == n
    assert len(receiver.delivered("/wh")) == n  # webhooks are never grouped


async def _all_status(store: Store, status: str, n: int) -> bool:
    got = await fetchval(store, "SELECT count(*) FROM checks WHERE kind = 'uptime' "
                                "AND status = $1", status)
    return int(got) == n


async def test_a_hanging_smtp_server_costs_one_timed_out_try_and_holds_no_other_channel(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = settings_for(tmp_path, notify_timeout=1.0)
    held: list[asyncio.StreamWriter] = []

    async def hang(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        held.append(w)  # accepts, never says a word

    server = await asyncio.start_server(hang, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with HttpTarget() as site, HttpReceiver() as receiver:
            _, check_id, _ = await add_monitor(store, acc.id, site.url("/"), alias="Shop")
            mail = await channel(store, acc.id, f"mailto://u:p@127.0.0.1:{port}"
                                                "?from=a@example.com&to=b@example.com")
            await channel(store, acc.id, receiver.json_url("/chat"))
            async with running_engine(store, settings), running_notifier(store, settings):
                await wait_status(store, check_id, "ok")
                site.status = 500
                await wait_status(store, check_id, "down")
                await wait_until(lambda: _async(len(receiver.delivered("/chat")) == 1),
                                 what="the chat message while the mail server hangs")
                await wait_until(lambda: _tries(store, mail, 1), timeout=15,
                                 what="the mail try to time out")
                # The mail server still hangs (retries keep timing out); chat goes on.
                site.status = 200
                await wait_status(store, check_id, "ok")
                await wait_until(lambda: _async(len(receiver.delivered("/chat")) == 2),
                                 what="the recovery on chat while mail is still retried")
        tries = await store.list_deliveries(acc.id, mail)
        assert tries and all(not t.delivered and "timed out" in (t.detail or "")
                             for t in tries)
        assert [h.json()["title"] for h in receiver.delivered("/chat")] == [
            "DOWN: Shop", "UP again: Shop"]
    finally:
        for w in held:
            w.close()
        server.close()
