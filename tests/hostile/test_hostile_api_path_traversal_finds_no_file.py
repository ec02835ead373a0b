"""Path traversal and junk in the status page identifier, against the whole app: always the
status page's own 404 (HTML, or JSON for ``.json``), never a file, never a 5xx.

Requests go over a raw socket: client libraries would normalise dots and escapes away.
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import pytest

NOT_FOUND_HTML = "Status page not found"


async def raw_get(api: str, path: str | bytes) -> tuple[int, dict[str, str], bytes]:
    host, port = api.removeprefix("http://").split(":")
    target = path if isinstance(path, bytes) else path.encode()
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(b"GET " + target + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        await writer.drain()
        response = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def assert_no_file(body: bytes) -> None:
    for secret in (b"root:", b"[boot loader]", b"PRIVATE KEY", b"import ", b"{%"):
        assert secret not in body


@pytest.mark.parametrize(
    "path",
    [
        "/..%2f..%2fetc%2fpasswd",
        "/%2e%2e/",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/../../etc/passwd",
        "/..%5c..%5cwindows%5cwin.ini",
        "/%252e%252e%252fetc%252fpasswd",  # double encoding
        "/abcdefghij%00",
        "/abcdefghij%00.html",
        "/abcdefghijk/../../engine/web/templates/404.html",
        "/engine/web/status_page.py",
        "/templates/_styles.html",
        "/static/../../pyproject.toml",
        "/" + "a" * 65,
        "/" + "a" * 4000,
        "/%C2%84",  # what schemathesis sent: a C1 control character
        "/%E2%80%A8",  # unicode line separator
        "/abcdefghij%E2%80%A8",
        "/abcdefghij%0d%0aSet-Cookie:%20x=1",  # header injection through the path
    ],
)
async def test_traversal_and_junk_identifiers_get_the_404_page(api: str, path: str) -> None:
    status, headers, body = await raw_get(api, path)
    assert status == 404, (path, status, body[:200])
    assert headers["content-type"].startswith("text/html")
    assert headers["cache-control"] == "no-store"
    assert "content-security-policy" in headers
    assert NOT_FOUND_HTML.encode() in body
    assert "set-cookie" not in headers
    assert_no_file(body)


@pytest.mark.parametrize(
    "path",
    ["/..%2f..%2fetc%2fpasswd.json", "/abcdefghij%00.json", "/%2e%2e.json", "/x.json"],
)
async def test_junk_json_identifiers_get_a_json_404(api: str, path: str) -> None:
    status, headers, body = await raw_get(api, path)
    assert status == 404, (path, status, body[:200])
    assert headers["content-type"].startswith("application/json")
    assert body == b'{"message":"Not found."}'


async def test_an_oversized_request_line_is_refused_without_a_file(api: str) -> None:
    # Past aiohttp's 8 KiB request-line limit the parser refuses before any handler runs.
    status, _, body = await raw_get(api, "/" + "a" * 20_000)
    assert status in (400, 414)
    assert_no_file(body)


async def test_a_real_identifier_with_traversal_or_nul_appended_is_404(
    api: str, client: aiohttp.ClientSession, account: tuple[Any, str]
) -> None:
    async with client.post("/webapi/monitors", json={"url": "https://example.com/"}) as r:
        assert r.status == 201
        identifier = (await r.json())["identifier"]
    status, _, _ = await raw_get(api, f"/{identifier}")
    assert status == 200
    for suffix in ("%00", "%2f..%2f..%2fetc%2fpasswd", "/..", "/../../etc/passwd", "%20",
                   ".html", "%0d%0aX:%20y"):
        status, _, body = await raw_get(api, f"/{identifier}{suffix}")
        # "/<id>/.." is normalised by the server to "/", which is no page either.
        assert status == 404, (suffix, status)
        assert_no_file(body)
    status, _, body = await raw_get(api, f"/{identifier}.json%00")
    assert status == 404


async def test_raw_non_ascii_bytes_in_the_path_are_no_5xx(api: str) -> None:
    for target in (b"/\xe2\x80\xa8", b"/abcdefghij\xff", b"/\xc0\xae\xc0\xae/etc/passwd"):
        status, _, body = await raw_get(api, target)
        assert status in (400, 404), (target, status)
        assert_no_file(body)
