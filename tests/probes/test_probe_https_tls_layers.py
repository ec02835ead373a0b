"""The uptime probe's two TLS layers (``HttpProber(tls_layer=...)``: pyOpenSSL with the OpenSSL
of the ``cryptography`` wheel, the default, and the ``ssl`` module with the system's) behave
the same against real loopback servers: no certificate verification (the certificate check
owns that), SNI and Host, redirects, bodies and header limits, and the same words for every
TLS failure, during the handshake and after it."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from OpenSSL import SSL

from engine import USER_AGENT
from engine.domain.outcomes import HttpOutcome
from engine.probes import openssl_layer
from engine.probes.http import TLS_LAYERS, HttpProber
from tests.support.targets import HttpTarget, TlsCerts


def prober_for(layer: str, timeout: float = 2.0) -> HttpProber:
    return HttpProber(timeout=timeout, user_agent=USER_AGENT, allow_private=True,
                      tls_layer=layer)


@pytest.fixture(params=TLS_LAYERS)
async def prober(request: pytest.FixtureRequest) -> AsyncIterator[HttpProber]:
    p = prober_for(request.param)
    yield p
    await p.aclose()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCerts:
    return TlsCerts(tmp_path_factory.mktemp("certs"))


@pytest.fixture
async def site() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as s:
        yield s


def failed(o: HttpOutcome, words: str) -> None:
    assert o.status_code is None and o.error == words, o


async def test_the_default_layer_is_pyopenssl_with_the_newer_openssl() -> None:
    # The installed cryptography exposes every binding the layer calls; were one dropped,
    # the prober would quietly fall back to the ssl module's (slower) layer.
    assert openssl_layer.MISSING == () and openssl_layer.AVAILABLE
    p = HttpProber(timeout=1.0, user_agent=USER_AGENT)
    assert isinstance(p._tls_context(), SSL.Context)
    assert not SSL.OpenSSL_version(SSL.OPENSSL_VERSION).startswith(b"OpenSSL 3.0")
    with pytest.raises(ValueError, match="tls_layer"):
        HttpProber(timeout=1.0, user_agent=USER_AGENT, tls_layer="gnutls")


async def test_no_verification_sni_host_redirects_and_bodies(
    certs: TlsCerts, prober: HttpProber,
) -> None:
    async with HttpTarget(ssl_context=certs.server_context("expired")) as tls_site:
        o = await prober.probe(tls_site.url("/status/204", host="localhost"))
        assert o.status_code == 204, o
        assert o.tls_ms is not None and o.connect_ms is not None
        (req,) = await tls_site.wait_for_requests(1)
        assert req.sni == "localhost"
        assert req.headers["host"] == f"localhost:{tls_site.port}"
        o = await prober.probe(tls_site.url("/redirect/2", host="localhost"))
        assert (o.status_code, o.redirects) == (200, 2), o
        assert tls_site.sni_names[-3:] == ["localhost"] * 3
        assert (await prober.probe(tls_site.url("/endless"))).status_code == 200
        assert (await prober.probe(tls_site.url("/early-hints"))).status_code == 200
        failed(await prober.probe(tls_site.url("/huge-headers")), "headers too large")
        tls_site.body = b"x" * 300_000  # many records, fed one at a time
        assert (await prober.probe(tls_site.url("/no-length"))).status_code == 200


async def test_an_ip_literal_sends_no_sni(certs: TlsCerts, prober: HttpProber) -> None:
    async with HttpTarget(ssl_context=certs.server_context("self-signed")) as tls_site:
        assert (await prober.probe(tls_site.url("/"))).status_code == 200
        assert tls_site.sni_names == [None]


async def test_handshake_failures_have_the_same_words(site: HttpTarget) -> None:
    for layer in TLS_LAYERS:
        p = prober_for(layer, timeout=1.0)
        site.mode = "garbage"
        site.garbage = b"HTTP/1.1 200 OK\r\n\r\nnot TLS at all"
        failed(await p.probe(site.url(scheme="https")),
               "TLS handshake failed: wrong version number")
        site.garbage = b""
        failed(await p.probe(site.url(scheme="https")),
               "TLS handshake failed: connection closed")
        site.mode = "hang"
        o = await p.probe(site.url(scheme="https"))
        failed(o, "timed out after 1 s")
        assert o.tls_ms is None and o.connect_ms is not None
        await p.aclose()


@pytest.mark.parametrize("version", ["1.2", "1.3"])
async def test_a_server_that_refuses_the_client_gives_the_same_words(
    certs: TlsCerts, tmp_path: Path, version: str,
) -> None:
    """A server that wants a client certificate: TLS 1.2 refuses in the handshake, TLS 1.3
    after it (the client's handshake is done when the server's verdict comes): the same
    words through both layers."""
    ctx = certs.server_context()
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.load_verify_locations(certs.ca_bundle)
    tls = ssl.TLSVersion.TLSv1_2 if version == "1.2" else ssl.TLSVersion.TLSv1_3
    ctx.minimum_version = ctx.maximum_version = tls
    async with HttpTarget(ssl_context=ctx) as tls_site:
        errors = set()
        for layer in TLS_LAYERS:
            p = prober_for(layer)
            o = await p.probe(tls_site.url("/"))
            assert o.status_code is None and o.error, o
            errors.add(o.error)
            await p.aclose()
    (words,) = errors  # one set of words for both layers
    assert words == ("TLS handshake failed: connection closed" if version == "1.2"
                     else "connection closed before a response"), words


def test_pyopenssl_errors_read_as_the_ssl_modules() -> None:
    e = openssl_layer.as_ssl_error(SSL.Error([("SSL routines", "", "wrong version number")]))
    assert isinstance(e, ssl.SSLError) and e.reason == "wrong version number"
    e = openssl_layer.as_ssl_error(SSL.SysCallError(-1, "Unexpected EOF"))
    assert e.reason == "UNEXPECTED_EOF_WHILE_READING"
    assert isinstance(openssl_layer.as_ssl_error(SSL.Error([])), ssl.SSLError)
