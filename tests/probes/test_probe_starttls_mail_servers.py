"""smtp://, imap:// and pop3:// probes do the greeting, STARTTLS and TLS with real servers:
aiosmtpd with STARTTLS and a trustme certificate, and IMAP/POP3 line servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller

from engine.probes.streamspec import StreamSpec
from engine.probes.tcp import TcpProber
from engine.probes.tls import CertProber
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
    assert o.details is not None
    assert o.details["greeting"].startswith("220 ") and "Upwatch test ESMTP" in o.details[
        "greeting"]
    assert o.details["tls_version"] in ("TLSv1.2", "TLSv1.3")
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


async def test_the_certificate_check_reads_a_mail_servers_certificate(
    certs: TlsCerts, smtp_port: int, tmp_path: Path
) -> None:
    """The certificate probe does the greeting and STARTTLS first, and judges the
    certificate it then gets; a refusal prevents a verdict, in words."""
    cert = CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=certs.ca_bundle)
    good = await cert.probe("localhost", smtp_port, "smtp")
    assert good.valid and good.error is None, good
    assert good.issuer == "Upwatch Test CA"
    expired_ctx = certs.server_context("expired")
    pop3 = line_server(b"+OK ready\r\n", {b"STLS": b"+OK go\r\n"}, expired_ctx, b"STLS")
    refusing = line_server(b"* OK ready\r\n", {b"A1 STARTTLS": b"a1 BAD no\r\n"}, None)
    async with stream_server(pop3) as pp, stream_server(refusing) as rp:
        expired = await cert.probe("localhost", pp, "pop3")
        refused = await cert.probe("localhost", rp, "imap")
    assert expired.diagnosis == "expired", expired  # read through STARTTLS
    assert expired.error is not None and expired.error.startswith("certificate expired")
    assert expired.valid_to is not None  # the second look went through STARTTLS too
    assert refused.error == "no TLS answer: STARTTLS refused: a1 BAD no"
