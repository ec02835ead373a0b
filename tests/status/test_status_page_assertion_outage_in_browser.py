"""The status page of an outage on a failed assertion, during a maintenance window, in real
headless Chromium: a visitor reads that the site answers but its response check fails,
which check, and what confirmed it; never the value the target answered. The maintenance
notice's icon is inline SVG (an emoji glyph is drawn as an empty box without an emoji font).
Screenshot in ``test-artifacts/``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engine.db.store import Store
from engine.domain.maintenance import Window
from tests.support.cdp_browser import CHROMIUM, Browser
from tests.support.status_page_seed import insert_monitor, insert_outage

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SECRET = "RESPONSE_SECRET-0c9e"
ERROR = f'json $.token is_empty failed: got "{SECRET}"'

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                       "(apt-get install chromium; scripts/test does it when run as root)"),
    pytest.mark.timeout(300),
]

# No emoji (the pictographs of U+1F000 to U+1FAFF, which need an emoji font).
NO_EMOJI = r"!/[\u{1F000}-\u{1FAFF}]/u.test(document.body.innerText)"


async def test_an_assertion_outage_reads_right_in_the_browser(
    store: Store, status_page_url: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    async with store.pool.acquire() as conn:
        site = await insert_monitor(
            conn, alias="Members area", host="members.example.com", uptime_status="down",
            uptime_error=ERROR, uptime_meta={"http_status_code": 200},
            last_check_at=now - timedelta(seconds=5))
        await conn.execute(
            "UPDATE monitors SET assertions = $2::jsonb WHERE id = $1", site.monitor_id,
            [{"source": "json", "property": "$.token", "comparison": "is_empty",
              "target": None}])
        await insert_outage(conn, site.uptime_id, now - timedelta(minutes=12), None,
                            http_status_code=200, error=ERROR)
        account_id = await conn.fetchval(
            "SELECT account_id FROM monitors WHERE id = $1", site.monitor_id)
    await store.create_window(account_id, Window(
        0, "Database upgrade", (site.monitor_id,), starts_at=now - timedelta(minutes=5),
        ends_at=now + timedelta(hours=1)))

    async with Browser(tmp_path, size=(1280, 1800)) as b:
        await b.open(f"{status_page_url}/{site.identifier}")
        text = await b.evaluate("document.body.innerText")
        html = await b.evaluate("document.documentElement.outerHTML")
        assert SECRET not in html
        assert "The site answers, but its response check has been failing since" in text
        assert "has not been responding" not in text
        assert "Response check failed: the JSON value at $.token was not empty" in text
        assert "HTTP 200" not in text
        assert "Confirmed by a second check from the same region, times in UTC" in text

        # The maintenance notice, its wrench drawn as SVG with a real size, no glyph.
        assert "Maintenance in progress" in text and "Database upgrade" in text
        icon = "document.querySelector('section.banner.pending .icon')"
        assert await b.evaluate(f"{icon}.querySelector('svg path') !== null")
        assert await b.evaluate(f"{icon}.textContent.trim()") == ""
        box = await b.evaluate(
            f"(() => {{ const r = {icon}.querySelector('svg').getBoundingClientRect();"
            " return [r.width, r.height]; })()")
        assert box[0] >= 12 and box[1] >= 12, box
        assert await b.evaluate(NO_EMOJI)
        await b.screenshot(ARTIFACTS / "status-page-assertion-outage.png")
        assert b.security_messages == []
