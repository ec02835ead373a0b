"""The status page's history and phase chart, in real headless Chromium driven over
DevTools: the 90-day bars are reachable with Tab and open their day's detail line with
Enter (no JavaScript on the page: CSS shows the fragment's target), the phase chart
renders under the page's CSP, and badges render as images, on their own and embedded in
another page. Screenshots go to ``test-artifacts/``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.db.store import Store
from tests.support.cdp_browser import CHROMIUM, Browser
from tests.support.status_page_seed import seed_site, utc_midnight
from tests.support.web import serve

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                       "(apt-get install chromium; scripts/test does it when run as root)"),
    pytest.mark.timeout(300),
]


async def _seed_phases(store: Store, check_id: int, now: datetime) -> None:
    """A probe a minute for the last three hours with every phase measured."""
    rows = [(check_id, now - timedelta(minutes=m), 4.0 + m % 3, 2.0, 12.0, 150.0 + m % 40)
            for m in range(180)]
    async with store.pool.acquire() as conn:
        await conn.executemany(
            "INSERT INTO probe_results (check_id, at, kind, outcome, status_code, total_ms,"
            " dns_ms, connect_ms, tls_ms, ttfb_ms, region, confirmation)"
            " VALUES ($1, $2, 1, 0, 200, $3::real + $4::real + $5::real + $6::real + 1,"
            " $3, $4, $5, $6, 'local', false)",
            rows)


ACTIVE_BAR = ("(() => { const a = document.activeElement;"
              " return a && a.closest('svg.bars') ? a.getAttribute('href') : null; })()")


def _line_display(anchor: str) -> str:
    return f"getComputedStyle(document.getElementById('{anchor}')).display"


async def test_bars_open_their_day_with_the_keyboard_and_phases_render_under_the_csp(
    store: Store, api: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    site = await seed_site(store.pool, now, alias="Example Shop", host="shop.example.com")
    await _seed_phases(store, site.uptime_id, now)
    url = f"{api}/{site.identifier}"
    outage_day = (utc_midnight(now - timedelta(days=3))).date().isoformat()

    async with Browser(tmp_path) as b:
        await b.open(url)
        assert await b.evaluate("document.scripts.length") == 0  # what follows is HTML and CSS
        assert await b.evaluate("document.querySelectorAll('svg.bars a').length") == 90
        # The phase chart: stacked rects of all four phases, and its legend.
        for phase in ("dns", "connect", "tls", "ttfb"):
            assert await b.evaluate(
                f"document.querySelectorAll('svg.phases rect.ph-{phase}').length") >= 3
        assert "Where the time goes" in await b.evaluate("document.body.innerText")
        assert "First byte" in await b.evaluate("document.body.innerText")
        tip = await b.evaluate("document.querySelector('svg.phases g title').textContent")
        assert "DNS" in tip and "First byte" in tip and "UTC" in tip
        # No day line is shown until one is chosen.
        first = await b.evaluate("document.querySelector('.day-line').id")
        assert await b.evaluate(_line_display(first)) == "none"
        assert await b.evaluate(
            "getComputedStyle(document.querySelector('.day-hint')).display") != "none"

        # Tab reaches the bars (the first focusable things on the page), Enter opens one.
        href = None
        for _ in range(5):
            await b.key("Tab")
            href = await b.evaluate(ACTIVE_BAR)
            if href:
                break
        assert href is not None and href.startswith("#day-"), href
        await b.key("Tab")
        second = await b.evaluate(ACTIVE_BAR)
        assert second is not None and second > href  # the next day, in order
        await b.key("Enter")
        assert await b.evaluate("location.hash") == second
        anchor = second[1:]
        assert await b.evaluate(_line_display(anchor)) == "block"
        line = await b.evaluate(f"document.getElementById('{anchor}').textContent")
        assert line.startswith(anchor.removeprefix("day-") + ": "), line
        assert await b.evaluate(
            "getComputedStyle(document.querySelector('.day-hint')).display") == "none"
        assert await b.evaluate(_line_display(first)) == "none"

        # The day of the 1-hour outage, as a link from elsewhere would open it.
        await b.open("about:blank")
        await b.open(f"{url}#day-{outage_day}")
        text = await b.evaluate(f"document.getElementById('day-{outage_day}').textContent")
        assert await b.evaluate(_line_display(f"day-{outage_day}")) == "block"
        assert "1 outage: from 11:00:00 UTC for 1 h: Server error (HTTP 503)" in text, text
        assert "% uptime" in text
        await b.screenshot(ARTIFACTS / "status-page-day-details-and-phases.png")
        assert b.security_messages == []


async def test_badges_render_alone_and_embedded_in_another_page(
    store: Store, api: str, tmp_path: Path
) -> None:
    from aiohttp import web

    site = await seed_site(store.pool, datetime.now(UTC), ongoing=True)
    kinds = ("status", "uptime", "response")
    srcs = [f"{api}/{site.identifier}/badge.svg?type={k}" for k in kinds]
    # The embed snippet of docs/badges.md, pointed at this instance.
    html = "".join(
        f'<p><a href="{api}/{site.identifier}"><img src="{src}&amp;period=30d" alt="{k}"'
        f' height="20"></a></p>' for k, src in zip(kinds, srcs, strict=True))
    async def embed(_request: web.Request) -> web.Response:
        return web.Response(text=f"<!doctype html>{html}", content_type="text/html")

    page = web.Application()
    page.router.add_get("/", embed)
    async with serve(page) as other_site, Browser(tmp_path, size=(600, 300)) as b:
        for kind, src in zip(kinds, srcs, strict=True):
            await b.open(src)
            title = await b.evaluate("document.querySelector('title').textContent")
            assert title.startswith("status: down" if kind == "status" else kind), title
            width = await b.evaluate("document.documentElement.getBBox().width")
            assert width > 60
            await b.screenshot(ARTIFACTS / f"badge-{kind}.png")
        await b.open(other_site + "/")
        loaded = await b.evaluate(
            "[...document.images].map(i => i.complete && i.naturalWidth > 0)")
        assert loaded == [True, True, True]
        await b.screenshot(ARTIFACTS / "badges-embedded.png")
        assert b.security_messages == []


async def test_the_browser_reports_what_a_csp_refuses(tmp_path: Path) -> None:
    """The control for ``security_messages == []`` above: a refused inline style is seen."""
    from aiohttp import web

    async def page(_request: web.Request) -> web.Response:
        return web.Response(text="<!doctype html><p style='color: red'>x</p>",
                            content_type="text/html",
                            headers={"Content-Security-Policy": "default-src 'none'"})

    app = web.Application()
    app.router.add_get("/", page)
    async with serve(app) as url, Browser(tmp_path, size=(400, 200)) as b:
        await b.open(url + "/")
        assert await b.evaluate("document.querySelector('p').textContent") == "x"
        assert any("Content Security Policy" in m for m in b.security_messages)
