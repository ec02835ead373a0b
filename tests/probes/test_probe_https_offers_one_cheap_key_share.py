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
from engine.probes.http import TLS_LAYERS, HttpProber
from tests.support.client_hello import key_share_groups, probe_hello
from upwatch_bench.lab.tlscompare import make_cert, s_server, wait_port

SECP256R1, X25519 = 0x0017, 0x001D


def test_the_client_hello_carries_one_key_share_for_p256() -> None:
    assert key_share_groups(probe_hello(None, "example.com")) == [SECP256R1]


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
