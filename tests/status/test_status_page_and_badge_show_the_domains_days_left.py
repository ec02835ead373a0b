"""The domain_expiry check on the public side: the status page row with the domain and its
days left, a lapsed domain in the page's state, and the ``?type=domain`` badge."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import aiohttp

from engine.db.store import Store
from tests.support.status_page_seed import insert_monitor


async def _get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        return resp.status, await resp.text()


def _words(svg: str) -> str:
    m = re.search(r"<title>(.*?)</title>", svg)
    assert m, svg
    return m.group(1)


async def _with_domain(store: Store, status: str, meta: dict[str, Any],
                       error: str | None = None) -> str:
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn)
        await conn.execute(
            "INSERT INTO checks (monitor_id, kind, interval_s, is_enabled, status, error,"
            " last_check_at, meta) VALUES ($1, 'domain_expiry', 14400, true, $2, $3, now(),"
            " $4::jsonb)"
            " ON CONFLICT (monitor_id, kind) DO UPDATE SET status = $2, error = $3,"
            "   meta = $4::jsonb, last_check_at = now()",
            site.monitor_id, status, error, meta)
    return site.identifier


def _meta(expires: datetime, days: int) -> dict[str, Any]:
    return {"domain": "example.com", "registrar": "Registrar Inc.",
            "expires_at": expires.strftime("%Y-%m-%d %H:%M:%S"), "days_left": days,
            "statuses": ["ok"], "nameservers": [], "source": "rdap", "rdap_server": None,
            "checked_at": None, "warning": None}


async def test_days_left_on_the_page_and_the_badge(store: Store, api: str) -> None:
    expires = datetime.now(UTC) + timedelta(days=20, hours=2)
    ident = await _with_domain(store, "ok", _meta(expires, 20))
    status, html = await _get(f"{api}/{ident}")
    assert status == 200
    assert "Domain registration" in html and "example.com" in html
    assert "(in 20 days)" in html
    _, svg = await _get(f"{api}/{ident}/badge.svg?type=domain")
    assert _words(svg) == "domain: 20 days left" and "#dfb317" in svg  # yellow: under 30


async def test_a_lapsed_domain_degrades_the_page_and_reddens_the_badge(
        store: Store, api: str) -> None:
    expires = datetime.now(UTC) - timedelta(days=1, hours=12)
    ident = await _with_domain(store, "down", _meta(expires, -2),
                               error="the domain expired on 2026-01-01 00:00:00 UTC")
    _, html = await _get(f"{api}/{ident}")
    assert "Domain problem" in html and "expired 2 days ago" in html
    _, svg = await _get(f"{api}/{ident}/badge.svg?type=domain")
    assert _words(svg) == "domain: expired" and "#e05d44" in svg
    _, svg = await _get(f"{api}/{ident}/badge.svg")
    assert _words(svg) == "status: degraded"


async def test_unsupported_tld_is_grey_and_not_a_problem(store: Store, api: str) -> None:
    ident = await _with_domain(store, "unsupported", {"domain": "example.zz"},
                               error="the .zz registry publishes no RDAP service")
    _, svg = await _get(f"{api}/{ident}/badge.svg?type=domain")
    assert _words(svg) == "domain: no RDAP"
    _, svg = await _get(f"{api}/{ident}/badge.svg")
    assert _words(svg) == "status: up"
