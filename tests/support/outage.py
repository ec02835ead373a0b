"""What the outage tests (the database going away under a running service) share: the
service's environment, a monitor set up on it, and its check status and log read back."""

from __future__ import annotations

import contextlib
import json
from typing import Any

import aiohttp

from tests.support.instances import Instance, fetch

# The environment of a service in an outage test: a fast clock (a 30 s interval is 0.3 s, a
# 10 s webhook back-off 0.1 s), results flushed often, short probe time-outs, heartbeats every
# half second, and JSON logs (read back with json_log).
OUTAGE_ENV = {
    "UPWATCH_TIME_SCALE": "0.01",
    "UPWATCH_RESULT_FLUSH_INTERVAL": "0.05",
    "UPWATCH_PROBE_TIMEOUT": "1",
    "UPWATCH_HEARTBEAT_INTERVAL": "0.5",
    "UPWATCH_LOG_FORMAT": "json",
}


async def add_uptime_monitor(http: aiohttp.ClientSession, inst: Instance, url: str) -> int:
    """An uptime monitor on ``inst`` (threshold 0: down as soon as confirmed) of an http
    ``url``, whose certificate check is created paused; returns the uptime check's id."""
    async with http.post(f"{inst.base_url}/webapi/monitors",
                         json={"url": url, "notification_threshold": 0}) as r:
        assert r.status == 201, await r.text()
        body = await r.json()
    assert body["checks"]["certificate_health"]["is_enabled"] is False
    return int(body["checks"]["uptime"]["id"])


async def check_status(dsn: str, check_id: int) -> str:
    rows = await fetch(dsn, "SELECT status FROM checks WHERE id = $1", check_id)
    return str(rows[0]["status"])


def json_log(inst: Instance) -> list[dict[str, Any]]:
    """The JSON lines ``inst`` has logged so far, parsed."""
    out = []
    for line in inst.output:
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out
