"""HTTPS uptime probes resume the TLS session of their last probe of the same address
(tickets as a default server issues them): TLS 1.2 and 1.3 through the pyOpenSSL layer (the
default), TLS 1.2 only through the ssl module's (where TLS 1.3 resumption measured no cheaper:
docs/performance.md); they fall back to a full handshake when the server declines, and
the certificate probe never resumes: it verifies a full handshake every time, so a changed
certificate is seen at once. Resumptions are counted by the server's context
(``session_stats()["hits"]``)."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engine import USER_AGENT
from engine.probes.http import TLS_LAYERS, HttpProber
from engine.probes.tls import CertProber
from tests.support.targets import HttpTarget, TlsCerts


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCerts:
    return TlsCerts(tmp_path_factory.mktemp("certs"))


async def target(ctx: ssl.SSLContext) -> HttpTarget:
    return await HttpTarget(ssl_context=ctx).start()


async def ticketless_target(certs: TlsCerts) -> HttpTarget:
    """A TLS 1.2 server that issues no session ticket (and keeps no session cache)."""
    ctx = certs.server_context()
    ctx.options |= ssl.OP_NO_TICKET
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    return await target(ctx)


@pytest.fixture(params=["1.2", "1.3"])
async def site(request: pytest.FixtureRequest, certs: TlsCerts) -> AsyncIterator[HttpTarget]:
    ctx = certs.server_context()
    version = ssl.TLSVersion.TLSv1_2 if request.param == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = version
    s = await target(ctx)
    try:
        yield s
    finally:
        await s.stop()


@pytest.fixture(params=TLS_LAYERS)
def layer(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def hits(site: HttpTarget) -> int:
    assert site.ssl_context is not None
    return int(site.ssl_context.session_stats()["hits"])


async def test_the_second_probe_of_an_address_resumes_the_first_ones_session(
    site: HttpTarget, layer: str,
) -> None:
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True, tls_layer=layer)
    url = site.url("/", host="localhost")
    assert site.ssl_context is not None
    resumes = layer == "pyopenssl" or site.ssl_context.maximum_version == ssl.TLSVersion.TLSv1_2
    for i in range(4):
        o = await prober.probe(url)
        assert o.status_code == 200, o
        # The first probe's handshake is full, each later one resumes the last session
        # (TLS 1.3 through the ssl module: every handshake is full).
        assert hits(site) == (i if resumes else 0)
        assert prober.tls_resumed == (i if resumes else 0)
    assert site.sni_names[-1] == "localhost"
    await prober.aclose()


async def test_without_sessions_kept_every_handshake_is_full(
    site: HttpTarget, layer: str,
) -> None:
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True, tls_sessions=0,
                        tls_layer=layer)
    for _ in range(3):
        assert (await prober.probe(site.url("/", host="localhost"))).status_code == 200
    assert hits(site) == 0
    await prober.aclose()


async def test_a_server_that_issues_no_ticket_gets_a_full_handshake(certs: TlsCerts) -> None:
    """The ssl module's layer keeps only sessions with a ticket (``has_ticket``)."""
    site = await ticketless_target(certs)
    try:
        prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                            tls_layer="ssl")
        for _ in range(3):
            assert (await prober.probe(site.url("/", host="localhost"))).status_code == 200
        assert len(prober._sessions) == 0  # no ticket: nothing to resume
        await prober.aclose()
    finally:
        await site.stop()


async def test_the_certificate_probe_verifies_a_full_handshake_every_time(
    site: HttpTarget, certs: TlsCerts, tmp_path: Path, layer: str,
) -> None:
    http = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True, tls_layer=layer)
    cert = CertProber(timeout=3.0, allow_private=True, ca_bundle=certs.ca_bundle)
    for _ in range(3):
        assert (await http.probe(site.url("/", host="localhost"))).status_code == 200
        c = await cert.probe("localhost", site.port)
        assert c.valid, c
    assert site.ssl_context is not None
    resumes = layer == "pyopenssl" or site.ssl_context.maximum_version == ssl.TLSVersion.TLSv1_2
    assert hits(site) == (2 if resumes else 0)  # the uptime probes' second and third
    await http.aclose()


async def test_a_server_that_declines_the_offered_session_gets_full_handshakes(
    certs: TlsCerts,
) -> None:
    """pyOpenSSL does not tell whether a session holds a ticket: its layer keeps each
    session, and once the server declined the one offered (here: no ticket, no cache),
    offers none on the next probe. Every handshake is full; every probe succeeds."""
    site = await ticketless_target(certs)
    try:
        prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                            tls_layer="pyopenssl")
        kept = []
        for _ in range(4):
            assert (await prober.probe(site.url("/", host="localhost"))).status_code == 200
            kept.append(len(prober._sessions))
        assert hits(site) == 0
        assert kept == [1, 0, 1, 0]  # kept, offered and declined (dropped), kept, ...
        await prober.aclose()
    finally:
        await site.stop()
