"""``/`` says what this service is: a short HTML page under the status pages' CSP (nothing
loaded from elsewhere), or JSON for a client that asks for JSON."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from engine.web.status.page import CONTENT_SECURITY_POLICY
from tests.support.cdp_browser import CHROMIUM, Browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


async def test_the_root_says_what_this_service_is(api: str) -> None:
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/", headers={"Accept": "text/html,*/*;q=0.8"}) as r:
            assert r.status == 200
            assert r.content_type == "text/html"
            assert r.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
            assert r.headers["X-Content-Type-Options"] == "nosniff"
            page = await r.text()
        assert "Upwatch monitoring service" in page
        assert "/&lt;identifier&gt;" in page
        assert "not found" not in page.lower()
        assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
        assert "<script" not in page.lower()

        async with anonymous.get(f"{api}/") as r:  # no Accept at all, as curl sends */*
            assert r.status == 200 and r.content_type == "text/html"
        async with anonymous.head(f"{api}/") as r:
            assert r.status == 200

        async with anonymous.get(f"{api}/", headers={"Accept": "application/json"}) as r:
            assert r.status == 200
            assert r.content_type == "application/json"
            body = await r.json()
        assert body["service"] == "Upwatch"
        assert body["status_page"] == "/{identifier}"
        assert "Upwatch monitoring service" in body["message"]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed")
@pytest.mark.timeout(120)
async def test_the_root_page_in_the_browser(api: str, tmp_path: Path) -> None:
    async with Browser(tmp_path, size=(1000, 700)) as b:
        await b.open(f"{api}/")
        text = await b.evaluate("document.body.innerText")
        assert "Upwatch monitoring service" in text and "/<identifier>" in text
        # The stylesheet applied (the CSP allows it by its hash): the page is centred text.
        assert await b.evaluate(
            "getComputedStyle(document.querySelector('main')).textAlign") == "center"
        await b.screenshot(ARTIFACTS / "root-page.png")
        assert b.security_messages == []
