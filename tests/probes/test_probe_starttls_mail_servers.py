"""smtp://, imap:// and pop3:// probes do the greeting, STARTTLS and TLS with real servers:
aiosmtpd with STARTTLS and a trustme certificate, and IMAP/POP3 line servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from engine.probes.streamspec import StreamSpec
from engine.probes.tcp import TcpProber
from tests.support.stream_targets import line_server, stream_server
from tests.support.targets import TlsCerts, free_port

TIMEOUT = 3.0


class _Sink:
    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        return "250 OK"


@pytest.fixture
def certs(tmp_path: Path) -> TlsCerts:
    return TlsCerts(tmp_path)


@pytest.fixture
def smtp_port(certs: TlsCerts) -> Iterator[int]:
    port = free_port()
    controller = Controller(_Sink(), hostname="127.0.0.1", port=port,
                            tls_context=certs.server_context("valid"),
                            ident="Upwatch test ESMTP")
    controller.start()
    try:
        yield port
    finally:
        controller.stop()


@pytest.fixture
def prober() -> TcpProber:
    return TcpProber(timeout=TIMEOUT, allow_private=True)


async def test_smtp_starttls_with_aiosmtpd(smtp_port: int, prober: TcpProber) -> None:
    url = f"smtp://localhost:{smtp_port}"
    o = await prober.probe(url)
    assert o.error is None, o
    assert o.status_code is None
    assert o.connect_ms is not None and o.tls_ms is not None and o.ttfb_ms is not None
    assert o.tls_ms > 0 and o.connect_ms + o.tls_ms <= o.total_ms
    judged = await prober.probe(url, StreamSpec.from_config(None, [
        {"source": "response", "comparison": "contains", "target": "Upwatch test ESMTP"},
        {"source": "response", "comparison": "matches", "target": "^220 "}]))
    assert judged.error is None and judged.assertion_error is None, judged
    wrong = await prober.probe(url, StreamSpec.from_config(None, [
        {"source": "response", "comparison": "contains", "target": "Exchange"}]))
    assert wrong.assertion_error == (
        'response contains "Exchange" failed: not in the response')


async def test_imap_and_pop3_starttls(certs: TlsCerts, prober: TcpProber) -> None:
    ctx = certs.server_context("valid")
    imap = line_server(b"* OK [CAPABILITY IMAP4rev1 STARTTLS] ready\r\n",
                       {b"A1 STARTTLS": b"* BYE not this\r\na1 OK Begin TLS now\r\n"},
                       ctx, b"A1 STARTTLS")
    pop3 = line_server(b"+OK POP3 ready\r\n", {b"STLS": b"+OK Begin TLS\r\n"}, ctx, b"STLS")
    async with stream_server(imap) as ip, stream_server(pop3) as pp:
        got = [await prober.probe(f"imap://localhost:{ip}"),
               await prober.probe(f"pop3://localhost:{pp}")]
    for o in got:
        assert o.error is None, o
        assert o.tls_ms is not None and o.tls_ms > 0


async def test_tls_failure_after_starttls_is_in_words(prober: TcpProber) -> None:
    """The server says yes to STARTTLS and then does not speak TLS."""
    liar = line_server(b"+OK POP3 ready\r\n", {b"STLS": b"+OK Begin TLS\r\nnot tls at all\r\n"},
                       None)
    async with stream_server(liar) as port:
        o = await prober.probe(f"pop3://127.0.0.1:{port}")
    assert o.error is not None
    assert o.error.startswith(("TLS handshake failed: ", "timed out after 3 s during the TLS")), o
