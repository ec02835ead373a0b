"""The HTTPS uptime probe (pyOpenSSL layer) offers one TLS 1.3 key share, P-256's: made for
every ClientHello, also when the server then resumes a TLS 1.2 session without any key
exchange, and P-256's costs fewer instructions to make than X25519's (docs/design.md). A
TLS 1.3 server that implements only another group still answers: it asks for that share
(HelloRetryRequest) and the probe gives it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import USER_AGENT
from engine.bench.tlscompare import make_cert, s_server, wait_port
from engine.probes import openssl_layer
from engine.probes.http import TLS_LAYERS, HttpProber

SECP256R1, X25519 = 0x0017, 0x001D


def key_share_groups(hello: bytes) -> list[int]:
    """The groups of the key_share extension (RFC 8446, 4.2.8) of a ClientHello record."""
    p = 5 + 4 + 2 + 32  # record and handshake headers, legacy_version, random
    p += 1 + hello[p]  # legacy_session_id
    p += 2 + int.from_bytes(hello[p:p + 2], "big")  # cipher_suites
    p += 1 + hello[p]  # legacy_compression_methods
    end = p + 2 + int.from_bytes(hello[p:p + 2], "big")
    p += 2
    while p < end:
        kind = int.from_bytes(hello[p:p + 2], "big")
        size = int.from_bytes(hello[p + 2:p + 4], "big")
        body, p = hello[p + 4:p + 4 + size], p + 4 + size
        if kind == 0x0033:
            groups, q = [], 2
            while q < len(body):
                groups.append(int.from_bytes(body[q:q + 2], "big"))
                q += 4 + int.from_bytes(body[q + 2:q + 4], "big")
            return groups
    return []


def test_the_client_hello_carries_one_key_share_for_p256() -> None:
    conn = openssl_layer.connection(openssl_layer.client_context(), "example.com", None)
    assert openssl_layer.handshake(conn) is False  # wants the server's answer
    hello = openssl_layer.outgoing(conn)
    assert hello is not None and hello[0] == 0x16  # a handshake record
    assert key_share_groups(hello) == [SECP256R1]


@pytest.fixture(params=["X25519", "P-256"])
def tls13_server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    """``openssl s_server -www``, TLS 1.3 only, implementing only the group of the param."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command")
    cert, key = make_cert(tmp_path, "ec")
    proc, port = s_server(["-www", "-tls1_3", "-groups", request.param], cert, key)
    try:
        wait_port(port)
        yield port
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("layer", TLS_LAYERS)
async def test_a_tls13_server_of_any_one_group_is_probed(tls13_server: int, layer: str) -> None:
    prober = HttpProber(timeout=5.0, user_agent=USER_AGENT, allow_private=True,
                        tls_layer=layer)
    try:
        outcome = await prober.probe(f"https://127.0.0.1:{tls13_server}/")
    finally:
        await prober.aclose()
    assert outcome.error is None and outcome.status_code == 200, outcome
