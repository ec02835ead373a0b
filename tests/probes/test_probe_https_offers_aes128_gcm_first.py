"""The HTTPS uptime probe (pyOpenSSL layer) offers the cipher suites OpenSSL offers by
default, AES-128-GCM first (TLS 1.3 and TLS 1.2), so that a server taking the client's order
decrypts with AES-128 and derives TLS 1.3 keys with SHA-256 (docs/design.md); and a server
that does take it (``openssl s_server`` without ``-serverpref``) negotiates it."""

from __future__ import annotations

import shutil
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from OpenSSL import SSL

from engine import USER_AGENT
from engine.probes import openssl_layer
from engine.probes.http import HttpProber
from tests.support.client_hello import cipher_suites, client_hello
from upwatch_bench.lab.tlscompare import make_cert, s_server, wait_port

TLS_AES_128_GCM_SHA256 = 0x1301
ECDHE_ECDSA_AES128_GCM_SHA256, ECDHE_RSA_AES128_GCM_SHA256 = 0xC02B, 0xC02F


def hello_of(ctx: SSL.Context) -> bytes:
    return client_hello(openssl_layer.Conn(ctx))


def test_the_client_hello_offers_openssls_suites_with_aes128_gcm_first() -> None:
    ours = cipher_suites(hello_of(openssl_layer.client_context()))
    default = cipher_suites(hello_of(SSL.Context(SSL.TLS_CLIENT_METHOD)))
    assert sorted(ours) == sorted(default)  # the same suites, no more, no fewer
    assert ours[0] == TLS_AES_128_GCM_SHA256
    tls12 = [c for c in ours if c >> 8 != 0x13]
    assert tls12[:2] == [ECDHE_ECDSA_AES128_GCM_SHA256, ECDHE_RSA_AES128_GCM_SHA256]
    assert default[0] != TLS_AES_128_GCM_SHA256  # OpenSSL's own order starts elsewhere


@pytest.fixture(params=["-tls1_3", "-tls1_2"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[int, str]]:
    """``openssl s_server -www`` of one protocol, which answers with the suite in use."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = make_cert(tmp_path, "ec")
    proc, port = s_server(["-www", request.param], cert, key)
    try:
        wait_port(port)
        yield port, str(request.param)
    finally:
        proc.kill()
        proc.wait()


def test_a_server_taking_the_clients_order_negotiates_aes128_gcm(
    server: tuple[int, str],
) -> None:
    port, protocol = server
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        # Blocking for OpenSSL, with the kernel's receive timeout as the bound.
        sock.settimeout(None)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 5, 0))
        conn = SSL.Connection(openssl_layer.client_context(), sock)
        conn.set_connect_state()
        conn.do_handshake()
        name = conn.get_cipher_name()
    assert name == ("TLS_AES_128_GCM_SHA256" if protocol == "-tls1_3"
                    else "ECDHE-ECDSA-AES128-GCM-SHA256")


async def test_the_probe_answers_through_either_protocol(server: tuple[int, str]) -> None:
    port, _ = server
    prober = HttpProber(timeout=5.0, user_agent=USER_AGENT, allow_private=True,
                        tls_layer="pyopenssl")
    try:
        outcome = await prober.probe(f"https://127.0.0.1:{port}/")
    finally:
        await prober.aclose()
    assert outcome.error is None and outcome.status_code == 200, outcome
