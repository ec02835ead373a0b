"""The status page in real headless Chromium: served by aiohttp on a loopback port
over real PostgreSQL data, rendered by the browser, read back as the text a person sees,
and saved as PNG screenshots in ``test-artifacts/`` (desktop and phone width).

Skipped, with the reason, when the ``chromium`` binary is not installed (``scripts/test``
installs it where it can).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from engine.db.store import Store
from tests.support.status_page_seed import certificate_valid_to, insert_monitor, seed_site

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium")
                                        else None)
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
BROWSER_TIMEOUT = 60.0

pytestmark = [
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed "
                       "(apt-get install chromium; scripts/test does it when run as root)"),
    pytest.mark.timeout(300),
]


class _VisibleText(HTMLParser):
    """Text a sighted reader sees: no <head>, no SVG tooltips, nothing visually hidden."""

    _HIDDEN_TAGS = frozenset({"head", "style", "script", "svg", "template"})
    _VOID = frozenset({"meta", "link", "br", "img", "input", "hr", "line", "polyline",
                       "rect", "path", "circle", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._stack: list[bool] = []  # per open element: hidden?

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._VOID:
            return
        classes = (dict(attrs).get("class") or "").split()
        hidden = tag in self._HIDDEN_TAGS or "sr-only" in classes
        self._stack.append(hidden or (bool(self._stack) and self._stack[-1]))

    def handle_endtag(self, tag: str) -> None:
        if tag in self._VOID:
            return
        if self._stack:
            self._stack.pop()

    def handle_data(self, data: str) -> None:
        if not (self._stack and self._stack[-1]):
            self.parts.append(data)

    def text(self) -> str:
        return re.sub(r"\s+", " ", " ".join(self.parts)).strip()


def visible_text(dom: str) -> str:
    parser = _VisibleText()
    parser.feed(dom)
    return parser.text()


async def _chromium(tmp_path: Path, *args: str) -> bytes:
    """Run headless Chromium with ``args``; its stdout. Killed after BROWSER_TIMEOUT."""
    assert CHROMIUM is not None
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    proc = await asyncio.create_subprocess_exec(
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
        f"--user-data-dir={profile}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), BROWSER_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        pytest.fail(f"chromium did not finish within {BROWSER_TIMEOUT:.0f} s")
    assert proc.returncode == 0, err.decode(errors="replace")[-2000:]
    return out


async def dump_dom(tmp_path: Path, url: str) -> str:
    return (await _chromium(tmp_path, "--dump-dom", url)).decode()


async def screenshot(tmp_path: Path, url: str, name: str, size: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    target = ARTIFACTS / name
    target.unlink(missing_ok=True)
    await _chromium(tmp_path, f"--screenshot={target}", f"--window-size={size}", url)
    assert target.exists() and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert target.stat().st_size > 10_000  # a blank page compresses to far less
    return target


@pytest.fixture
def base_url(status_page_url: str) -> str:
    return status_page_url


async def test_a_person_sees_the_status_page(
    store: Store, base_url: str, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    site = await seed_site(store.pool, now, ongoing=True, alias="Example Shop",
                           host="shop.example.com")
    url = f"{base_url}/{site.identifier}"

    text = visible_text(await dump_dom(tmp_path, url))
    assert "Example Shop" in text and "shop.example.com" in text
    assert "Outage" in text and "has been answering with errors since" in text
    assert "Website Down" in text and "TLS certificate Valid" in text
    assert re.search(r"Uptime, last 30 days 99\.\d\d%", text)
    assert "Uptime, last 90 days" in text and "Today" in text
    assert "Response time, last 24 hours" in text and "now" in text
    assert re.search(r"\d+ ms", text)
    # Outage rows: the ongoing one, then the closed ones with their durations and causes.
    assert re.search(
        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ongoing 30 min( \d+ s)? Server error \(HTTP 503\)", text)
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d{4}-\d\d-\d\d \d\d:\d\d:\d\d 1 h "
                     r"Server error \(HTTP 503\)", text)
    assert "50 min Connection refused" in text
    assert "R11" in text and f"{certificate_valid_to(now)} UTC (in 64 days)" in text

    await screenshot(tmp_path, url, "status-page-desktop.png", "1280,2000")
    await screenshot(tmp_path, url, "status-page-phone.png", "390,2400")


async def test_an_operational_site_in_the_browser(
    store: Store, base_url: str, tmp_path: Path
) -> None:
    site = await seed_site(store.pool, datetime.now(UTC), alias="Docs portal",
                           host="docs.example.org")
    url = f"{base_url}/{site.identifier}"
    text = visible_text(await dump_dom(tmp_path, url))
    assert "All systems operational" in text and "Website Up" in text
    await screenshot(tmp_path, url, "status-page-operational.png", "1280,2000")


async def test_a_hostile_alias_renders_as_text(
    store: Store, base_url: str, tmp_path: Path
) -> None:
    alias = ("<script>document.title='pwned'</script> \"q\" 'a' "
             "\u05d7\u05e0\u05d5\u05ea \u05e9\u05dc\u05d9 " + "W" * 255)
    async with store.pool.acquire() as conn:
        site = await insert_monitor(
            conn, alias=alias, uptime_status="degraded", uptime_error="<b>HTTP 404</b>",
            last_check_at=datetime.now(UTC) - timedelta(seconds=3),
        )
    url = f"{base_url}/{site.identifier}"
    dom = await dump_dom(tmp_path, url)
    # The browser built no element from the alias: it is text in the heading.
    assert "<script" not in dom and "<b>" not in dom
    assert "<title>pwned</title>" not in dom  # what the script would have done had it run
    text = visible_text(dom)
    assert "<script>document.title='pwned'</script>" in text
    assert "\u05d7\u05e0\u05d5\u05ea" in text and "W" * 255 in text
    assert "HTTP 404" not in text  # the owner's error text is never shown
    await screenshot(tmp_path, url, "status-page-hostile-phone.png", "390,1600")


async def test_the_404_page_in_the_browser(base_url: str, tmp_path: Path) -> None:
    url = f"{base_url}/NoSuchStatusPage1"
    text = visible_text(await dump_dom(tmp_path, url))
    assert "Error 404" in text and "Status page not found" in text
    await screenshot(tmp_path, url, "status-page-404.png", "1280,900")
