"""Hostile targets of the tcp/tls/mail probe: each is a failure in words within the
timeout, and a flood is read no further than 64 KiB."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine.probes.streamspec import StreamSpec
from engine.probes.tcp import TcpProber
from tests.support.stream_targets import flood, greet, line_server, stall, stream_server
from tests.support.targets import TlsCerts

TIMEOUT = 1.0
SLACK_MS = 300


def within_timeout(total_ms: float) -> None:
    assert total_ms <= TIMEOUT * 1000 + SLACK_MS


def contains(text: str) -> StreamSpec:
    return StreamSpec.from_config(
        None, [{"source": "response", "comparison": "contains", "target": text}])


@pytest.fixture
def prober() -> TcpProber:
    return TcpProber(timeout=TIMEOUT, allow_private=True)


async def test_a_silent_server_times_out_waiting_for_the_response(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        o = await prober.probe(f"tcp://127.0.0.1:{port}", contains("READY"))
    assert o.error == "timed out after 1 s waiting for the response"
    assert o.connect_ms is not None
    within_timeout(o.total_ms)


async def test_a_flood_is_cut_at_64_kib_in_bounded_time(prober: TcpProber) -> None:
    async with stream_server(flood) as port:
        url = f"tcp://127.0.0.1:{port}"
        o = await prober.probe(url, contains("never sent"))
        regex = await prober.probe(url, StreamSpec.from_config(None, [
            {"source": "response", "comparison": "matches", "target": "y+"}]))
    assert o.error is None
    assert o.assertion_error == (
        'response contains "never sent" failed: not in the first 64 KiB of the response')
    assert regex.assertion_error == (
        'response matches "y+" failed: no match in the first 64 KiB of the response')
    assert o.total_ms < TIMEOUT * 1000 / 2  # the cap, not the deadline, ended it


async def test_tls_to_a_silent_plain_port_times_out_in_the_handshake(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        o = await prober.probe(f"tls://127.0.0.1:{port}")
    assert o.error == "timed out after 1 s during the TLS handshake"
    within_timeout(o.total_ms)


async def test_tls_to_a_plain_port_that_speaks_fails_the_handshake(prober: TcpProber) -> None:
    async with stream_server(greet) as port:
        o = await prober.probe(f"tls://127.0.0.1:{port}")
    assert o.error is not None and o.error.startswith("TLS handshake failed: "), o.error
    assert o.tls_ms is None


async def test_a_mail_server_that_never_greets(prober: TcpProber) -> None:
    async with stream_server(stall) as port:
        smtp = await prober.probe(f"smtp://127.0.0.1:{port}")
        imap = await prober.probe(f"imap://127.0.0.1:{port}")
    assert smtp.error == "timed out after 1 s waiting for the SMTP greeting"
    assert imap.error == "timed out after 1 s waiting for the IMAP greeting"
    within_timeout(smtp.total_ms)


async def test_a_mail_server_that_never_stops_talking(prober: TcpProber) -> None:
    async with stream_server(flood) as port:
        o = await prober.probe(f"smtp://127.0.0.1:{port}")
    assert o.error == "the server sent more than 64 KiB before STARTTLS"


async def test_starttls_refused_or_not_offered(tmp_path: Path, prober: TcpProber) -> None:
    ctx = TlsCerts(tmp_path).server_context("valid")
    refusing = line_server(
        b"220 mx.test ESMTP\r\n",
        {b"EHLO": b"250-mx.test\r\n250 STARTTLS\r\n",
         b"STARTTLS": b"454 4.7.0 TLS not available\r\n"},
        ctx, b"STARTTLS")
    plain = line_server(b"220 mx.test ESMTP\r\n", {b"EHLO": b"250-mx.test\r\n250 SIZE 1000\r\n"},
                        None)
    busy = line_server(b"554 5.3.2 busy, try later\r\n", {}, None)
    pop = line_server(b"+OK POP3 ready\r\n", {b"STLS": b"-ERR not now\r\n"}, None)
    imap = line_server(b"* OK IMAP ready\r\n", {b"A1 STARTTLS": b"a1 NO not here\r\n"}, None)
    async with stream_server(refusing) as p1, stream_server(plain) as p2, \
            stream_server(busy) as p3, stream_server(pop) as p4, stream_server(imap) as p5:
        got = await asyncio.gather(
            prober.probe(f"smtp://127.0.0.1:{p1}"), prober.probe(f"smtp://127.0.0.1:{p2}"),
            prober.probe(f"smtp://127.0.0.1:{p3}"), prober.probe(f"pop3://127.0.0.1:{p4}"),
            prober.probe(f"imap://127.0.0.1:{p5}"))
    assert [o.error for o in got] == [
        "STARTTLS refused: 454 4.7.0 TLS not available",
        "the server does not offer STARTTLS",
        "SMTP greeting: 554 5.3.2 busy, try later",
        "STARTTLS refused: -ERR not now",
        "STARTTLS refused: a1 NO not here",
    ]


async def test_a_server_that_closes_at_once(prober: TcpProber) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    async with stream_server(hang_up) as port:
        reading = await prober.probe(f"tcp://127.0.0.1:{port}", contains("x"))
        smtp = await prober.probe(f"smtp://127.0.0.1:{port}")
    # Closed before a word: the reply is empty, and judged so.
    assert reading.error is None
    assert reading.assertion_error == 'response contains "x" failed: not in the response'
    assert smtp.error == "connection closed waiting for the SMTP greeting"


async def test_a_trickle_that_never_pauses_is_judged_at_the_deadline(prober: TcpProber) -> None:
    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(1000):  # bounded: 50 s, far past the probe
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    async with stream_server(trickle) as port:
        o = await prober.probe(f"tcp://127.0.0.1:{port}", contains("never sent"))
    assert o.error is None
    assert o.assertion_error == 'response contains "never sent" failed: not in the response'
    assert TIMEOUT * 1000 * 0.9 <= o.total_ms
    within_timeout(o.total_ms)
