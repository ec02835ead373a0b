"""The status page announces a maintenance window that is on now or starts within a week,
in HTML (escaped like every user string) and in its JSON twin."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import aiohttp

from engine.db.store import Store
from engine.maintenance_windows import Window
from engine.timefmt import fmt, utcnow


async def test_current_and_upcoming_windows_are_announced(
    store: Store, account: tuple[Any, str], status_page_url: str
) -> None:
    acc, _ = account
    m = await store.create_monitor(
        acc.id, url="https://example.com/", scheme="https", host="example.com", port="",
        alias="Shop", interval=30, notification_threshold=0, certificate_interval=3600,
        monitor_limit=1000)
    other = await store.create_monitor(
        acc.id, url="https://example.org/", scheme="https", host="example.org", port="",
        alias="Blog", interval=30, notification_threshold=0, certificate_interval=3600,
        monitor_limit=1000)
    now = utcnow().replace(microsecond=0)
    async with aiohttp.ClientSession(base_url=status_page_url) as s:
        async with s.get(f"/{m.identifier}") as r:
            assert "maintenance" not in (await r.text()).lower()
        await store.create_window(acc.id, Window(0, "<b>DB upgrade</b>", (m.id,),
                                  starts_at=now - timedelta(minutes=10),
                                  ends_at=now + timedelta(hours=1)))
        await store.create_window(acc.id, Window(0, "", None,
                                  starts_at=now + timedelta(days=2),
                                  ends_at=now + timedelta(days=2, hours=2)))
        await store.create_window(acc.id, Window(0, "far away", None,
                                  starts_at=now + timedelta(days=20),
                                  ends_at=now + timedelta(days=20, hours=2)))
        async with s.get(f"/{m.identifier}") as r:
            assert r.status == 200
            html = await r.text()
        assert "Maintenance in progress" in html
        assert f"until {fmt(now + timedelta(hours=1))} UTC" in html
        assert "&lt;b&gt;DB upgrade&lt;/b&gt;" in html and "<b>DB upgrade" not in html
        assert "Scheduled maintenance" in html
        assert f"from {fmt(now + timedelta(days=2))}" in html
        assert "far away" not in html
        async with s.get(f"/{m.identifier}.json") as r:
            body = await r.json()
        assert body["maintenance"] == [
            {"active": True, "starts_at": fmt(now - timedelta(minutes=10)),
             "ends_at": fmt(now + timedelta(hours=1)), "reason": "<b>DB upgrade</b>"},
            {"active": False, "starts_at": fmt(now + timedelta(days=2)),
             "ends_at": fmt(now + timedelta(days=2, hours=2)), "reason": ""},
        ]
        # The other monitor: only the account-wide window.
        async with s.get(f"/{other.identifier}.json") as r:
            assert [n["active"] for n in (await r.json())["maintenance"]] == [False]
