"""The status page inside the real application (create_app): a monitor created through the
API has a page at its ``status_page`` identifier, deleting it takes the page down, and the
page's routes shadow none of the fixed paths."""

from __future__ import annotations

from typing import Any

import aiohttp


async def test_created_monitor_has_a_page_until_deleted(
    api: str, client: aiohttp.ClientSession
) -> None:
    async with client.post("/webapi/monitors", json={
        "url": "https://status-page.example.com/", "alias": "From the API",
    }) as resp:
        assert resp.status == 201, await resp.text()
        monitor: dict[str, Any] = await resp.json()
    identifier = monitor["identifier"]
    assert monitor["status_page"].endswith("/" + identifier)

    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/{identifier}") as resp:
            assert resp.status == 200
            assert resp.content_type == "text/html"
            assert "Content-Security-Policy" in resp.headers
            page = await resp.text()
        assert "From the API" in page and "status-page.example.com" in page
        assert "Checking\u2026" in page
        async with anonymous.get(f"{api}/{identifier}.json") as resp:
            assert resp.status == 200
            body = await resp.json()
        assert body["state"] == "pending"
        assert body["checks"]["uptime"]["status"] == "pending"
        assert body["uptime_30d"] == 100.0

        async with client.delete(f"/webapi/monitors/{monitor['id']}") as resp:
            assert resp.status == 204

        async with anonymous.get(f"{api}/{identifier}") as resp:
            assert resp.status == 404
            assert "Status page not found" in await resp.text()
        async with anonymous.get(f"{api}/{identifier}.json") as resp:
            assert resp.status == 404
            assert "message" in await resp.json()


async def test_fixed_paths_are_not_shadowed(api: str) -> None:
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(f"{api}/healthz") as resp:
            assert resp.status == 200
            assert resp.content_type == "application/json"
        async with anonymous.get(f"{api}/metrics") as resp:
            assert resp.status == 200
            assert resp.content_type.startswith("text/plain")
        async with anonymous.get(f"{api}/webapi/openapi.json") as resp:
            assert resp.status == 200
        # Still the API's 401, not a status page 404.
        async with anonymous.get(f"{api}/webapi/monitors") as resp:
            assert resp.status == 401
        async with anonymous.get(f"{api}/webapi") as resp:
            assert resp.status != 200
