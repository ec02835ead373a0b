"""What operators rely on, shown on a real ``upwatch run`` process: the systemd notify
protocol (READY=1 after the API listens, WATCHDOG=1 from the loop, STOPPING=1 and exit 0 on
SIGTERM), Prometheus metrics that parse and move, and JSON log lines."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import aiohttp
import orjson

from engine.db.store import Store
from tests.support.instances import Instance, WebhookReceiver
from tests.support.metrics import sample, sample_value
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

FAST = {"UPWATCH_TIME_SCALE": "0.02", "UPWATCH_RESULT_FLUSH_INTERVAL": "0.1"}
HEARTBEATS = "upwatch_node_heartbeats_total"


async def test_notify_protocol_ready_watchdog_stopping(db_dsn: str, tmp_path: Path) -> None:
    sock_path = tmp_path / "notify.sock"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(sock_path))
    sock.setblocking(False)
    messages: list[tuple[float, str]] = []

    def drain() -> None:
        while True:
            try:
                messages.append((time.monotonic(), sock.recv(4096).decode()))
            except BlockingIOError:
                return

    inst = Instance(db_dsn, tmp_path, env={"NOTIFY_SOCKET": str(sock_path),
                                           "WATCHDOG_USEC": "400000"})
    try:
        await inst.start()

        async def pinged_twice() -> bool:
            drain()
            return sum("WATCHDOG=1" in m for _, m in messages) >= 2

        await wait_until(pinged_twice, timeout=10, what="two watchdog pings")
        ready = [m for _, m in messages if m.startswith("READY=1")]
        assert ready, messages
        # READY came once the API listens: it answers now.
        async with aiohttp.ClientSession() as http, http.get(f"{inst.base_url}/healthz") as r:
            assert r.status == 200
        started = time.monotonic()
        code = await inst.stop()
        assert code == 0
        assert time.monotonic() - started < 10
        drain()
        assert any(m == "STOPPING=1" for _, m in messages)
    finally:
        await inst.kill()
        sock.close()


async def test_metrics_parse_and_count_probes_and_logs_are_json(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    async with HttpTarget() as target, WebhookReceiver() as receiver:
        target.status = 200
        _, token = await store.create_account("acme", webhook_url=receiver.url)
        inst = Instance(db_dsn, tmp_path, env={**FAST, "UPWATCH_LOG_FORMAT": "json"})
        try:
            await inst.start()
            headers = {"Authorization": f"Bearer {token}"}
            async with aiohttp.ClientSession(base_url=inst.base_url, headers=headers) as http:
                async with http.get("/metrics") as r:
                    assert r.status == 200
                    before = await r.text()
                # Exposed from the start, at 0 until the first heartbeat, which comes a
                # heartbeat interval after start-up.
                heartbeats_before = sample_value(before, HEARTBEATS)
                assert heartbeats_before is not None
                async with http.post("/webapi/monitors", json={"url": target.url("/")}) as r:
                    assert r.status == 201

                async def probes_counted() -> bool:
                    async with http.get("/metrics") as r:
                        text = await r.text()
                    # The gauges refresh once a second; the counters move with each probe.
                    # One check scheduled: an http URL's certificate check starts paused.
                    return (sample(text, "upwatch_probes_total", kind="uptime",
                                   outcome="ok") >= 3
                            and sample(text, "upwatch_checks_scheduled") == 1
                            and sample(text, HEARTBEATS) > heartbeats_before)

                await wait_until(probes_counted, timeout=20,
                                 what="three ok probes and a heartbeat in /metrics")
                async with http.get("/metrics") as r:
                    after = await r.text()
            assert sample(before, "upwatch_probes_total", kind="uptime", outcome="ok") == 0
            assert sample(after, "upwatch_scheduler_lateness_seconds_count") >= 3
            assert sample(after, "upwatch_results_written_total") >= 1
            assert sample(after, "upwatch_checks_scheduled") == 1
            heartbeats_after = sample_value(after, HEARTBEATS)
            assert heartbeats_after is not None and heartbeats_after > heartbeats_before
            await inst.stop()
        finally:
            await inst.kill()
    lines = [ln for ln in inst.output if ln.strip() and "ready at" not in ln]
    assert lines
    records = [orjson.loads(ln) for ln in lines]  # every log line is one JSON object
    assert all({"ts", "level", "logger", "msg"} <= set(r) for r in records)
    changes = [r for r in records if r["msg"] == "check uptime pending -> ok"]
    assert changes and isinstance(changes[0]["monitor_id"], int)
