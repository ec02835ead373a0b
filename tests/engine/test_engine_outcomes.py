"""Each uptime probe outcome lands in the right status, error and meta of the checks row,
probing real local targets on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, running_engine, wait_status
from tests.support.targets import HttpTarget, closed_port


async def test_each_outcome_lands_in_status_error_and_meta(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, slow_threshold_ms=150, probe_timeout=0.5)
    async with HttpTarget() as site:
        dead = closed_port()
        cases = {
            # path or URL: (status, error, http_status_code)
            site.url("/"): ("ok", None, 200),
            site.url("/redirect/2"): ("ok", None, 200),
            site.url("/status/404"): ("degraded", "HTTP 404", 404),
            site.url("/slow/400"): ("degraded", None, 200),  # error checked below
            site.url("/status/500"): ("down", "HTTP 500", 500),
            site.url("/status/503"): ("down", "HTTP 503", 503),
            f"http://127.0.0.1:{dead}/": ("down", "connection refused", None),
            site.url("/hang"): ("down", "timed out after 0.5 s", None),
            site.url("/reset-headers"): ("down", None, None),
        }
        checks = {}
        for url in cases:
            _, uptime_id, _ = await add_monitor(store, acc.id, url)
            checks[url] = uptime_id
        async with running_engine(store, settings):
            for url, (status, error, code) in cases.items():
                row = await wait_status(store, checks[url], status)
                assert row["last_check_at"] is not None
                assert row["meta"] == {"http_status_code": code}, url
                if error is not None:
                    assert row["error"] == error, url
                else:
                    assert (row["error"] is None) == (status == "ok"), url
            slow = await wait_status(store, checks[site.url("/slow/400")], "degraded")
            assert slow["error"].startswith("slow response: ")
            reset = await wait_status(store, checks[site.url("/reset-headers")], "down")
            assert reset["error"]
        # Probes identify themselves.
        assert all(r.headers["user-agent"].startswith("Upwatch/") for r in site.requests)
