"""Badges: GET /{identifier}/badge.svg?type=status|uptime|response&period=24h|7d|30d over
real PostgreSQL data (tests/support/status_page_seed.py), served by the real app."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import aiohttp
from multidict import CIMultiDict

from engine.db.store import Store
from tests.support.status_page_seed import insert_monitor, seed_site


async def _get(api: str, path: str, **headers: str) -> tuple[int, CIMultiDict[str], str]:
    async with aiohttp.ClientSession() as session, session.get(api + path,
                                                               headers=headers) as resp:
        return resp.status, CIMultiDict(resp.headers), await resp.text()


def _words(svg: str) -> str:
    """The badge's words, from its title (the text a screen reader gets)."""
    m = re.search(r"<title>(.*?)</title>", svg)
    assert m, svg
    return m.group(1)


async def test_status_uptime_and_response_badges_say_what_the_status_page_says(
    store: Store, api: str
) -> None:
    site = await seed_site(store.pool, datetime.now(UTC), ongoing=True, alias="Secret Alias",
                           host="hidden.example.com")
    status, headers, svg = await _get(api, f"/{site.identifier}/badge.svg")
    assert status == 200
    assert headers["Content-Type"] == "image/svg+xml; charset=utf-8"
    assert headers["Cache-Control"] == "public, max-age=60"
    assert re.fullmatch(r'"[0-9a-f]{32}"', headers["ETag"])
    assert svg.startswith("<svg xmlns=\"http://www.w3.org/2000/svg\"")
    assert _words(svg) == "status: down" and "#e05d44" in svg  # red
    # Outages of 1 h, 50 min and an ongoing 30 min in 30 enabled days: 99.67% (rounded down).
    _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type=uptime")
    assert _words(svg) == "uptime 30d: 99.67%"
    _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type=uptime&period=24h")
    assert _words(svg) == "uptime 24h: 97.91%"  # 30 min of 24 h
    _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type=response")
    assert _words(svg) == "response 24h: 150 ms"  # the seeded rollups average 150 ms
    _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type=response&period=7d")
    assert _words(svg) == "response 7d: 150 ms"
    # Less than the status page shows: no alias, host or URL.
    for kind in ("status", "uptime", "response"):
        _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type={kind}")
        assert "Secret" not in svg and "hidden.example.com" not in svg

    healthy = await seed_site(store.pool, datetime.now(UTC))
    _, _, svg = await _get(api, f"/{healthy.identifier}/badge.svg?type=status")
    assert _words(svg) == "status: up" and "#4c1" in svg


async def test_an_unchanged_badge_is_a_304_and_a_change_gives_a_new_etag(
    store: Store, api: str
) -> None:
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn, uptime_status="ok")
    path = f"/{site.identifier}/badge.svg"
    _, headers, _ = await _get(api, path)
    etag = headers["ETag"]
    status, again, body = await _get(api, path, **{"If-None-Match": etag})
    assert status == 304 and body == "" and again["ETag"] == etag
    assert again["Cache-Control"] == "public, max-age=60"
    status, _, _ = await _get(api, path, **{"If-None-Match": f'W/{etag}, "other"'})
    assert status == 304
    async with store.pool.acquire() as conn:
        await conn.execute("UPDATE checks SET status = 'down' WHERE id = $1", site.uptime_id)
    status, changed, svg = await _get(api, path, **{"If-None-Match": etag})
    assert status == 200 and changed["ETag"] != etag and _words(svg) == "status: down"


async def test_unknown_identifiers_and_bad_parameters(store: Store, api: str) -> None:
    status, headers, svg = await _get(api, "/NoSuchMonitor123/badge.svg")
    assert status == 404 and headers["Cache-Control"] == "no-store"
    assert _words(svg) == "status: not found"
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn)
    status, _, body = await _get(api, f"/{site.identifier}/badge.svg?type=colour")
    assert status == 422 and '"type"' in body
    status, _, body = await _get(api, f"/{site.identifier}/badge.svg?type=uptime&period=1y")
    assert status == 422 and '"period"' in body
    # Without history the figures are "no data", not a flattering 100%.
    _, _, svg = await _get(api, f"/{site.identifier}/badge.svg?type=uptime")
    assert _words(svg) == "uptime 30d: no data"
    for path in ("/../etc/badge.svg", "/%C2%84/badge.svg", "/short/badge.svg",
                 "/" + "x" * 65 + "/badge.svg", "/a%2F..%2Fb1234567/badge.svg"):
        status, headers, body = await _get(api, path)
        assert status == 404, path
        assert headers["Content-Type"].startswith("image/svg+xml"), path
        assert _words(body) == "status: not found"
