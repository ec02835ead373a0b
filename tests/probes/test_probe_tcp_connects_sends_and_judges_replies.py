"""The tcp:// and tls:// probe against real loopback servers: connected is up, a body is
sent, the reply is judged by the monitor's assertions, timings are measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.domain.outcomes import HttpOutcome
from engine.probes.streamspec import StreamSpec
from engine.probes.tcp import REPLY_IDLE, TcpProber
from tests.support.stream_targets import echo, greet, stall, stream_server
from tests.support.targets import TlsCerts, closed_port, ipv6_available

TIMEOUT = 2.0


def spec(body: str | None = None, *assertions: dict[str, Any]) -> StreamSpec:
    return StreamSpec.from_config({"body": body} if body else None, list(assertions))


def up(o: HttpOutcome) -> None:
    assert o.status_code is None
    assert o.error is None, o
    assert o.assertion_error is None, o
    assert o.connect_ms is not None and 0 <= o.connect_ms <= o.total_ms
    assert o.total_ms < TIMEOUT * 1000


@pytest.fixture
def prober() -> TcpProber:
    return TcpProber(timeout=TIMEOUT, allow_private=True)


async def test_an_open_port_is_up_without_reading(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        o = await prober.probe(f"tcp://127.0.0.1:{port}")
    up(o)
    assert o.remote_ip == "127.0.0.1"
    assert o.tls_ms is None and o.ttfb_ms is None and o.dns_ms is None


async def test_a_closed_port_is_refused(prober: TcpProber) -> None:
    o = await prober.probe(f"tcp://127.0.0.1:{closed_port()}")
    assert o.error == "connection refused"
    assert o.status_code is None


async def test_a_name_is_resolved_and_ipv6_literals_work(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        up(await prober.probe(f"tcp://localhost:{port}"))
    if not ipv6_available():
        pytest.skip("no IPv6 loopback here")
    async with stream_server(stall, host="::1") as port:
        o = await prober.probe(f"tcp://[::1]:{port}")
    up(o)
    assert o.remote_ip == "::1"


async def test_private_targets_are_refused_unless_allowed() -> None:
    strict = TcpProber(timeout=TIMEOUT)
    async with stream_server(stall) as port:
        o = await strict.probe(f"tcp://127.0.0.1:{port}")
        named = await strict.probe(f"tcp://localhost:{port}")
    assert o.error == "blocked: 127.0.0.1 resolves to a non-public address (127.0.0.1)"
    assert named.error is not None and named.error.startswith("blocked: localhost resolves")


async def test_the_greeting_is_judged(prober: TcpProber) -> None:
    async with stream_server(greet) as port:
        url = f"tcp://127.0.0.1:{port}"
        good = await prober.probe(url, spec(None, {
            "source": "response", "comparison": "contains", "target": "SSH-2.0"}))
        regex = await prober.probe(url, spec(None, {
            "source": "response", "comparison": "matches", "target": r"^SSH-2\.0-\S+"}))
        bad = await prober.probe(url, spec(None, {
            "source": "response", "comparison": "contains", "target": "SMTP"}))
    up(good)
    up(regex)
    assert good.ttfb_ms is not None and good.ttfb_ms <= good.total_ms
    assert bad.error is None
    assert bad.assertion_error == 'response contains "SMTP" failed: not in the response'
    # Reading stopped as soon as the greeting held, not at the deadline.
    assert good.total_ms < TIMEOUT * 500


async def test_a_body_is_sent_and_its_echo_judged(prober: TcpProber) -> None:
    async with stream_server(echo) as port:
        url = f"tcp://127.0.0.1:{port}"
        o = await prober.probe(url, spec("PING\r\n", {
            "source": "response", "comparison": "contains", "target": "PING"}))
        miss = await prober.probe(url, spec("PING\r\n", {
            "source": "response", "comparison": "contains", "target": "PONG"}))
    up(o)
    # The echo server keeps the connection open: the reply ends once it has been quiet for
    # REPLY_IDLE, and what came is judged (not a timeout, not the whole timeout).
    assert miss.error is None
    assert miss.assertion_error == 'response contains "PONG" failed: not in the response'
    assert REPLY_IDLE * 1000 <= miss.total_ms < TIMEOUT * 1000 * 0.75


async def test_time_assertions(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        url = f"tcp://127.0.0.1:{port}"
        fast = await prober.probe(url, spec(None, {
            "source": "connect_time", "comparison": "less_than", "target": 1000}))
        slow = await prober.probe(url, spec(None, {
            "source": "response_time", "comparison": "greater_than", "target": 5000}))
    up(fast)
    assert slow.error is None
    assert slow.assertion_error is not None
    assert slow.assertion_error.startswith("response_time greater_than 5000 failed: got ")
    assert slow.assertion_error.endswith(" ms")


async def test_tls_handshake_then_the_reply(tmp_path: Path, prober: TcpProber) -> None:
    certs = TlsCerts(tmp_path)
    async with stream_server(echo, ssl_context=certs.server_context("valid")) as port:
        url = f"tls://localhost:{port}"
        plain = await prober.probe(url)
        o = await prober.probe(url, spec("hello over tls\n", {
            "source": "response", "comparison": "equals", "target": "hello over tls\n"}))
    up(plain)
    assert plain.tls_ms is not None and plain.tls_ms > 0
    # An expired or self-signed certificate is the certificate check's business, not this.
    assert o.error is None and o.tls_ms is not None
    # equals cannot hold early: the reply is judged once quiet, before the deadline.
    assert o.assertion_error is None
    assert o.total_ms < TIMEOUT * 1000 * 0.75
