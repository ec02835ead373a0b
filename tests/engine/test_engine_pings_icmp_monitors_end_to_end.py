"""icmp:// monitors end to end: created through the API, pinged by the engine over the
loopback, judged (with and without assertions), shown with their figures; refused with a
422 naming the field when the URL or its assertions are wrong, when the target is private,
and when the node cannot ping at all."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.probes.icmp import ping_access
from tests.support.engine_support import fast_settings, running_engine
from tests.support.instances import Instance
from tests.support.wait import wait_until

pytestmark = pytest.mark.skipif(
    not ping_access().can_ping, reason=f"this node cannot ping: {ping_access().reason}")


async def _create(client: aiohttp.ClientSession, body: dict[str, Any]) -> tuple[int, Any]:
    async with client.post("/webapi/monitors", json=body) as resp:
        return resp.status, await resp.json()


async def _uptime(client: aiohttp.ClientSession, monitor_id: int) -> dict[str, Any]:
    async with client.get(f"/webapi/monitors/{monitor_id}") as resp:
        assert resp.status == 200, await resp.text()
        check: dict[str, Any] = (await resp.json())["checks"]["uptime"]
        return check


async def test_an_icmp_monitor_is_pinged_and_shows_its_figures(
    store: Store, client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    status, up = await _create(client, {
        "url": "icmp://127.0.0.2?count=2&interval_ms=20", "alias": "router",
        "assertions": [{"source": "packet_loss", "comparison": "less_than", "target": 50}]})
    assert status == 201, up
    assert up["url"] == "icmp://127.0.0.2?count=2&interval_ms=20"
    async with client.get(f"/webapi/monitors/{up['id']}") as resp:
        shown = await resp.json()
    assert (shown["scheme"], shown["host"], shown["port"]) == ("icmp", "127.0.0.2", "")
    assert set(shown["checks"]) == {"uptime"}  # ping has no certificate to check
    status, strict = await _create(client, {
        "url": "icmp://127.0.0.3?count=1",
        "assertions": [{"source": "packet_loss", "comparison": "greater_than", "target": 50}]})
    assert status == 201, strict

    async with running_engine(store, fast_settings(tmp_path)):
        async def pinged() -> dict[str, Any] | None:
            check = await _uptime(client, up["id"])
            return check if check["status"] == "ok" and check["meta"].get("received") else None

        check = await wait_until(pinged, timeout=15, what="the icmp monitor up, with figures")

        async def failing() -> dict[str, Any] | None:
            check = await _uptime(client, strict["id"])
            return check if check["status"] in ("failing", "down") else None

        failed = await wait_until(failing, timeout=15, what="the failed assertion judged")

    meta = check["meta"]
    assert (meta["sent"], meta["received"], meta["packet_loss"]) == (2, 2, 0.0)
    assert 0 < meta["rtt_min"] <= meta["rtt_avg"] <= meta["rtt_max"] < 1000
    assert meta["jitter"] is not None
    assert failed["error"] == "packet_loss greater_than 50 failed: got 0 %"


async def test_bad_icmp_monitors_are_a_422_naming_the_field(
    client: aiohttp.ClientSession
) -> None:
    cases = [
        ({"url": "icmp://127.0.0.2:80"}, "url", "takes no port"),
        ({"url": "icmp://127.0.0.2?count=50"}, "url", "from 1 to 10"),
        ({"url": "icmp://127.0.0.2", "request": {"method": "GET"}}, "request",
         "sends no request"),
        ({"url": "icmp://127.0.0.2",
          "assertions": [{"source": "status_code", "comparison": "equals", "target": 200}]},
         "assertions.0.source", "packet_loss, rtt_avg, rtt_max, jitter"),
        ({"url": "icmp://127.0.0.2",
          "assertions": [{"source": "rtt_avg", "comparison": "less_than", "target": "x"}]},
         "assertions.0.target", "must be a number"),
    ]
    for body, field, words in cases:
        status, got = await _create(client, body)
        assert status == 422, (body, got)
        assert field in got["errors"], (body, got)
        assert words in " ".join(got["errors"][field]), (body, got)


async def test_a_private_target_is_refused_unless_allowed(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    from engine.runtime.settings import Settings
    from engine.web.app import create_app
    from tests.support.web import serve

    settings = Settings(data_dir=tmp_path / "data", port=0, base_url="http://127.0.0.1:8080",
                        rate_limit_per_second=0)
    _, token = account
    async with serve(create_app(store, settings)) as url, aiohttp.ClientSession(
            base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        status, got = await _create(client, {"url": "icmp://127.0.0.1"})
    assert status == 422
    assert "url" in got["errors"]
    assert "non-public" in " ".join(got["errors"]["url"])


def _datagram_allowed_to_root() -> bool:
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ping_group_range").read_text().split())
    except (OSError, ValueError):
        return True
    return lo <= 0 <= hi


async def test_a_node_that_cannot_ping_refuses_icmp_monitors_saying_what_to_set(
    db_dsn: str, store: Store, tmp_path: Path
) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1) to drop CAP_NET_RAW")
    if _datagram_allowed_to_root():
        pytest.skip("net.ipv4.ping_group_range allows this group unprivileged ping: the node "
                    "can ping without CAP_NET_RAW")
    _, token = await store.create_account("no-ping")
    node = Instance(db_dsn, tmp_path, prefix=("setpriv", "--bounding-set", "-net_raw",
                                              "--inh-caps", "-net_raw"))
    await node.start()
    try:
        async with aiohttp.ClientSession(
                base_url=node.base_url, headers={"Authorization": f"Bearer {token}"}) as client:
            status, got = await _create(client, {"url": "icmp://127.0.0.2"})
            http_status, _ = await _create(client, {"url": "http://127.0.0.2/"})
    finally:
        await node.stop()
    assert status == 422, got
    words = " ".join(got["errors"]["url"])
    assert "cannot send ICMP echo requests" in words
    assert "net.ipv4.ping_group_range" in words and "CAP_NET_RAW" in words
    assert http_status == 201  # only ping needs it
