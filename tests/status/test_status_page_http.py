"""The status page over HTTP against real PostgreSQL: what the HTML says, the JSON twin's
shape, 404s (unknown, deleted, malformed, traversal), escaping of hostile user strings,
and the security and caching headers."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import html
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import aiohttp
import pytest

from engine.db.store import Store
from tests.support.status_page_seed import certificate_valid_to, insert_monitor, seed_site

HOSTILE_ALIAS = (
    "<script>alert(1)</script> \"quoted\" 'single' & "
    "\u05d7\u05e0\u05d5\u05ea \u05e9\u05dc\u05d9 "  # Hebrew: right-to-left text
    + "W" * 255
)


@pytest.fixture
def base_url(status_page_url: str) -> str:
    return status_page_url


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def _text(page: str) -> str:
    """The page's visible-ish text: tags removed, entities decoded, whitespace collapsed."""
    no_tags = re.sub(r"<[^>]+>", " ", page)
    return re.sub(r"\s+", " ", html.unescape(no_tags))


async def test_page_shows_alias_host_states_uptime_and_outages(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    now = datetime.now(UTC)
    site = await seed_site(store.pool, now, ongoing=True)
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 200
        assert resp.content_type == "text/html"
        assert resp.charset == "utf-8"
        page = await resp.text()
    text = _text(page)
    assert "Example Shop" in text and "shop.example.com" in text
    # Overall state in words, and both checks' states.
    assert "Outage" in text and "The site has been answering with errors since" in text
    assert 'class="banner outage"' in page
    assert "Website" in text and "Down" in text
    assert "TLS certificate" in text and "Valid" in text
    assert "Last checked" in text and "UTC" in text
    # 30-day uptime as a percentage below 100 (there were outages).
    assert re.search(r"Uptime, last 30 days 99\.\d\d%", text)
    # 90 bars with date and uptime tooltips; one "no data" day.
    assert page.count("<rect x=") >= 90
    assert re.search(r"<title>\d{4}-\d\d-\d\d: 100% uptime</title>", page)
    assert re.search(r"<title>\d{4}-\d\d-\d\d: no data</title>", page)
    assert re.search(r"<title>\d{4}-\d\d-\d\d: 9\d\.\d\d% uptime, down 1 h</title>", page)
    # Response time chart: inline SVG polyline with axis labels.
    assert "<polyline" in page and "Response time, last 24 hours" in text
    assert "now" in text and " ms" in text
    # Outages: the ongoing one first, then the two closed ones with durations and causes.
    assert "ongoing" in text
    assert "1 h" in text and "50 min" in text
    assert "Server error (HTTP 503)" in text and "Connection refused" in text
    # What confirmed them: the seeded rows name one region twice (a one-region install).
    assert "Confirmed by a second check from the same region, times in UTC" in text
    # Certificate issuer and expiry.
    assert "R11" in text and f"{certificate_valid_to(now)} UTC (in 64 days)" in text
    assert "Certificate expires in 64 days" in text
    # Refreshes itself, needs nothing from elsewhere.
    assert '<meta http-equiv="refresh" content="60">' in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)
    assert "<script" not in page.lower()


@pytest.mark.parametrize(
    ("statuses", "words", "key"),
    [
        (("ok", "ok"), "All systems operational", "operational"),
        (("degraded", "ok"), "Degraded performance", "degraded"),
        (("failing", "ok"), "Possible outage", "degraded"),
        (("ok", "down"), "Certificate problem", "degraded"),
        (("pending", "pending"), "Checking\u2026", "pending"),
        (("paused", "paused"), "Paused", "paused"),
    ],
)
async def test_overall_state_in_words_and_colour(
    store: Store, base_url: str, http: aiohttp.ClientSession,
    statuses: tuple[str, str], words: str, key: str,
) -> None:
    up, cert = statuses
    async with store.pool.acquire() as conn:
        site = await insert_monitor(
            conn, uptime_status=up, certificate_status=cert,
            uptime_enabled=up != "paused", certificate_enabled=cert != "paused",
            certificate_error="certificate expired" if cert == "down" else None,
        )
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        page = await resp.text()
    assert words in _text(page)
    assert f'class="banner {key}"' in page
    async with http.get(f"{base_url}/{site.identifier}.json") as resp:
        body = await resp.json()
    assert body["state"] == key and body["state_text"] == words


async def test_a_new_monitor_renders_without_history(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    async with store.pool.acquire() as conn:
        site = await insert_monitor(conn, uptime_status="pending", certificate_status="pending",
                                    certificate_meta={}, uptime_meta={})
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 200
        text = _text(await resp.text())
    assert "Checking\u2026" in text and "Never" in text
    assert "No response times were recorded in the last 24 hours." in text
    assert "No outages recorded." in text
    assert "100%" in text


async def test_json_twin_shape(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    now = datetime.now(UTC)
    site = await seed_site(store.pool, now, ongoing=True)
    async with http.get(f"{base_url}/{site.identifier}.json") as resp:
        assert resp.status == 200
        assert resp.content_type == "application/json"
        assert resp.headers["Cache-Control"] == "public, max-age=30"
        assert resp.headers["Access-Control-Allow-Origin"] == "*"
        assert resp.headers["X-Content-Type-Options"] == "nosniff"
        body = await resp.json()
    assert body["identifier"] == site.identifier
    assert body["alias"] == "Example Shop" and body["host"] == "shop.example.com"
    assert "url" not in body
    assert body["state"] == "outage"
    assert set(body["checks"]) == {"uptime", "certificate_health"}
    up = body["checks"]["uptime"]
    assert up["status"] == "down" and up["is_enabled"] is True
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", up["last_check_at"])
    assert up["http_status_code"] == 503
    assert body["checks"]["certificate_health"]["status"] == "ok"
    assert isinstance(body["uptime_30d"], float) and 90 < body["uptime_30d"] < 100
    assert 100 <= body["average_response_time_24h_ms"] <= 300
    assert body["certificate"] == {"issuer": "R11", "valid_to": certificate_valid_to(now)}
    outages = body["outages"]
    assert len(outages) == 3
    assert outages[0]["ended_at"] is None and outages[0]["duration_seconds"] >= 1800
    assert outages[1]["duration_seconds"] == 3600 and outages[1]["http_status_code"] == 503
    assert len(body["days"]) == 90
    assert body["days"][-1]["date"] == now.date().isoformat()
    assert any(d["uptime_percentage"] is None for d in body["days"])
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", body["generated_at"])


async def test_unknown_and_deleted_identifiers_are_404(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    async with http.get(f"{base_url}/NoSuchMonitor123") as resp:
        assert resp.status == 404
        assert resp.content_type == "text/html"
        assert resp.headers["Cache-Control"] == "no-store"
        assert "Content-Security-Policy" in resp.headers
        page = await resp.text()
    assert "Status page not found" in page and "NoSuchMonitor123" not in page
    async with http.get(f"{base_url}/NoSuchMonitor123.json") as resp:
        assert resp.status == 404
        assert resp.headers["Cache-Control"] == "no-store"
        assert await resp.json() == {"message": "Status page not found."}

    site = await seed_site(store.pool, datetime.now(UTC))
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 200
    await store.pool.execute("DELETE FROM monitors WHERE id = $1", site.monitor_id)
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 404
    async with http.get(f"{base_url}/{site.identifier}.json") as resp:
        assert resp.status == 404


@pytest.mark.parametrize(
    "path",
    [
        "/short",                        # under 10 characters
        "/" + "a" * 65,                  # over 64
        "/abcdefghij/extra",
        "/abcdefghij.html",
        "/abcdefghij.json/x",
        "/../etc/passwd",
        "/%2e%2e/etc/passwd",
        "/%2e%2e%2fetc%2fpasswd",
        "/abcdefghij%00",
        "/abcdefghij%2f..",
        "/abc.defghij",
        "/abcdefghi%20",
        "/webapi/monitors",
    ],
)
async def test_malformed_paths_are_404(base_url: str, path: str) -> None:
    # A raw socket request: client libraries would normalise the dots away before sending.
    host, port = base_url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    response = await reader.read()
    writer.close()
    status_line = response.split(b"\r\n", 1)[0]
    assert status_line.split()[1] in (b"404", b"400"), (path, status_line)


async def test_hostile_strings_are_escaped(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    evil_issuer = '<img src=x onerror="alert(2)">'
    async with store.pool.acquire() as conn:
        site = await insert_monitor(
            conn, alias=HOSTILE_ALIAS, host="xn--4dbrk0ce.example",
            uptime_status="degraded", uptime_error="<b>HTTP 404</b> & \"more\"",
            last_check_at=datetime.now(UTC) - timedelta(seconds=5),
            certificate_meta={"issuer": evil_issuer, "valid_to": "2099-01-01 00:00:00"},
        )
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        page = await resp.text()
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&#34;quoted&#34;" in page and "&#39;single&#39;" in page
    assert "<img" not in page and "&lt;img src=x onerror=&#34;alert(2)&#34;&gt;" in page
    # The owner's error text is not shown at all, escaped or not: a reason in words is.
    assert "HTTP 404" not in page and "&#34;more&#34;" not in page
    assert "\u05d7\u05e0\u05d5\u05ea" in page and "W" * 255 in page
    # User strings can wrap anywhere and keep their own direction.
    assert re.search(r'<h1 class="user" dir="auto">&lt;script', page)
    assert "overflow-wrap: anywhere" in page
    async with http.get(f"{base_url}/{site.identifier}.json") as resp:
        body = await resp.json()
    assert body["alias"] == HOSTILE_ALIAS
    assert body["certificate"]["issuer"] == evil_issuer


async def test_security_and_cache_headers(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    site = await seed_site(store.pool, datetime.now(UTC))
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        headers = resp.headers
        page = await resp.text()
    csp = headers["Content-Security-Policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    assert directives["default-src"] == "'none'"
    assert directives["base-uri"] == "'none'"
    assert directives["form-action"] == "'none'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["img-src"] == "data:"
    assert "script-src" not in directives and "unsafe-inline" not in csp
    # The style hash allows exactly the page's one stylesheet.
    style = re.search(r"<style>(.*?)</style>", page, re.S)
    assert style is not None and page.count("<style") == 1
    digest = base64.b64encode(hashlib.sha256(style.group(1).encode()).digest()).decode()
    assert directives["style-src"] == f"'sha256-{digest}'"
    assert " style=" not in page  # inline style attributes would be blocked
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"
    assert headers["Cache-Control"] == "public, max-age=30"
    assert headers["X-Frame-Options"] == "DENY"
    # HEAD works for monitors that only look at the status line.
    async with http.head(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 200


async def test_database_outage_is_a_503_page(
    store: Store, base_url: str, http: aiohttp.ClientSession
) -> None:
    site = await seed_site(store.pool, datetime.now(UTC))
    await store.close()
    async with http.get(f"{base_url}/{site.identifier}") as resp:
        assert resp.status == 503
        assert resp.content_type == "text/html"
        assert resp.headers["Cache-Control"] == "no-store"
        assert "temporarily unavailable" in await resp.text()
    async with http.get(f"{base_url}/{site.identifier}.json") as resp:
        assert resp.status == 503
        assert "message" in await resp.json()
