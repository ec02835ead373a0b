"""A site whose last handshake was TLS 1.2 is offered its TLS 1.2 session by a ClientHello
of TLS 1.2 alone, with no TLS 1.3 key share (which a resuming server never uses, and which
cost a P-256 key per probe); a site that speaks TLS 1.3 is offered every version. A site
gone TLS 1.3-only meanwhile refuses that ClientHello: the probe tries the same address at
once without the session, and succeeds; its next probe resumes the TLS 1.3 session.
Through the pyOpenSSL layer (the default); resumptions are counted by the server's context
(``session_stats()["hits"]``)."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine import USER_AGENT
from engine.probes import openssl_layer
from engine.probes.http import HttpProber
from engine.probes.sessions import TlsSessions
from tests.support.client_hello import key_share_groups, probe_hello, supported_versions
from tests.support.targets import HttpTarget, TlsCerts

TLS12, TLS13 = ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCerts:
    return TlsCerts(tmp_path_factory.mktemp("certs"))


@pytest.fixture(params=["1.2", "1.3"])
async def site(request: pytest.FixtureRequest, certs: TlsCerts) -> AsyncIterator[HttpTarget]:
    ctx = certs.server_context()
    ctx.minimum_version = ctx.maximum_version = TLS12 if request.param == "1.2" else TLS13
    s = await HttpTarget(ssl_context=ctx).start()
    try:
        yield s
    finally:
        await s.stop()


def hits(site: HttpTarget) -> int:
    assert site.ssl_context is not None
    return int(site.ssl_context.session_stats()["hits"])


def kept_session(prober: HttpProber, site: HttpTarget) -> Any:
    return prober._sessions.get(TlsSessions.key("127.0.0.1", site.port, "localhost"))


async def test_a_kept_session_is_offered_by_its_own_version_alone_if_tls12(
    site: HttpTarget,
) -> None:
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                        tls_layer="pyopenssl")
    try:
        for i in range(3):
            o = await prober.probe(site.url("/", host="localhost"))
            assert o.error is None and o.status_code == 200, o
            assert hits(site) == i  # every probe after the first resumes
        der = kept_session(prober, site)
    finally:
        await prober.aclose()
    assert site.ssl_context is not None
    tls12 = site.ssl_context.maximum_version == TLS12
    assert openssl_layer.session_protocol(der) == (0x0303 if tls12 else 0x0304)
    hello = probe_hello(der)
    if tls12:
        # TLS 1.2 alone: no supported_versions extension, no key share to make.
        assert supported_versions(hello) is None
        assert key_share_groups(hello) == []
    else:
        assert 0x0304 in (supported_versions(hello) or [])
        assert key_share_groups(hello) == [0x0017]
    # Without a session: every version, one key share.
    fresh = probe_hello(None)
    assert supported_versions(fresh) == [0x0304, 0x0303]
    assert key_share_groups(fresh) == [0x0017]


async def test_a_site_gone_tls13_only_is_probed_again_at_once_without_the_session(
    certs: TlsCerts,
) -> None:
    ctx = certs.server_context()
    ctx.minimum_version = ctx.maximum_version = TLS12
    site = await HttpTarget(ssl_context=ctx).start()
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                        tls_layer="pyopenssl")
    try:
        url = site.url("/", host="localhost")
        for _ in range(2):
            assert (await prober.probe(url)).status_code == 200
        assert hits(site) == 1 and prober.tls_resumed == 1
        # The server now speaks TLS 1.3 alone (new connections take the context's range).
        ctx.maximum_version = ctx.minimum_version = TLS13
        o = await prober.probe(url)
        assert o.error is None and o.status_code == 200, o
        assert len(site.sni_names) == 3  # handshakes done: the refused one is not one
        assert prober.tls_handshakes == 3 and prober.tls_resumed == 1
        assert openssl_layer.session_protocol(kept_session(prober, site)) == 0x0304
        o = await prober.probe(url)  # and the TLS 1.3 session resumes
        assert o.status_code == 200 and prober.tls_resumed == 2 and hits(site) == 2
    finally:
        await prober.aclose()
        await site.stop()


async def test_a_site_that_refuses_any_handshake_fails_after_one_more_try(
    certs: TlsCerts,
) -> None:
    """The retry is one connection, not a loop: an address where every handshake ends at
    once fails the probe with the handshake's words, after two connections."""
    ctx = certs.server_context()
    ctx.minimum_version = ctx.maximum_version = TLS12
    site = await HttpTarget(ssl_context=ctx).start()
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                        tls_layer="pyopenssl")
    accepted = 0

    def hang_up(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        writer.close()

    try:
        url = site.url("/", host="localhost")
        for _ in range(2):
            assert (await prober.probe(url)).status_code == 200
        port = site.port
        await site.stop()
        server = await asyncio.start_server(hang_up, "127.0.0.1", port)
        try:
            o = await prober.probe(url)
        finally:
            server.close()
            await server.wait_closed()
        assert o.status_code is None, o
        # Closed with the ClientHello unread: a reset, or an end, as the kernel has it.
        assert (o.error or "").startswith("TLS handshake failed: connection "), o
        assert accepted == 2  # the TLS 1.2 try and one without the session
        assert kept_session(prober, site) is None
    finally:
        await prober.aclose()
        await site.stop()


@pytest.mark.parametrize("der", [b"", b"\x30", b"\x30\x03\x02\x01\x01", b"\x04\x00",
                                 b"\x30\x06\x02\x01\x01\x02\x05\x00"])
def test_the_version_of_what_is_not_a_session_is_zero(der: bytes) -> None:
    assert openssl_layer.session_protocol(der) == 0
