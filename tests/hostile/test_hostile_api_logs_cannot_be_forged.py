"""The API's own log lines about failed requests cannot be forged or made to carry secrets:
a path with ``%0d%0a`` is logged still encoded (one line, whatever the log format), and the
query string, which may hold credentials, is not logged at all."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.errors import DatabaseUnavailable


def api_records(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "engine.web.app"]


async def test_a_path_with_line_breaks_is_logged_encoded_during_a_database_outage(
    api: str, store: Store, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def down(token: str) -> Any:
        raise DatabaseUnavailable("connection refused")

    monkeypatch.setattr(store, "authenticate", down)
    caplog.set_level(logging.WARNING, logger="engine.web.app")
    async with aiohttp.ClientSession(base_url=api) as s:
        async with s.get(
            "/webapi/x%0d%0a2026-01-01 00:00:00 CRITICAL admin logged in%E2%80%A8?secret=hunter2",
            headers={"Authorization": "Bearer anything"},
        ) as r:
            assert r.status == 503
            assert await r.json() == {"message": "The service is temporarily unavailable."}
    (line,) = api_records(caplog)
    assert "\r" not in line and "\n" not in line and "\u2028" not in line
    assert "%0d%0a" in line.lower()
    assert "hunter2" not in line


async def test_an_unhandled_error_logs_no_query_string(
    client: aiohttp.ClientSession, store: Store, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def broken(account_id: int, **kw: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(store, "list_monitors", broken)
    caplog.set_level(logging.WARNING, logger="engine.web.app")
    async with client.get("/webapi/monitors", params={"page": "1\r\nFORGED", "q": "s3cr3t"}) as r:
        assert r.status == 500
        assert await r.json() == {"message": "Server error."}
    (line,) = api_records(caplog)
    assert line == "unhandled error in GET /webapi/monitors"
