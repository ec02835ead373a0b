"""The certificate probe against real loopback TLS servers (trustme certificates)."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from pathlib import Path

import pytest
import trustme

from engine.domain.outcomes import CertOutcome
from engine.probes import tls
from engine.probes.tls import CertProber, verify_words
from tests.support.targets import HttpTarget, TlsCerts, closed_port, ipv6_available, tls_target

TIMEOUT = 2.0
SHORT = 1.0
SLACK_MS = 150


def check(o: CertOutcome, *, error: str | None = None) -> None:
    """The invariant (valid exactly when no error) plus the expected error (a certificate
    diagnosis: its opening, before the details and the fix)."""
    assert o.valid == (o.error is None), o
    if error is None or not error.endswith(" "):
        assert o.error == error, o
    else:
        assert o.error is not None and o.error.startswith(error), o
    assert o.total_ms >= 0


@pytest.fixture
def certs(tmp_path: Path) -> TlsCerts:
    return TlsCerts(tmp_path)


@pytest.fixture
def prober(certs: TlsCerts) -> CertProber:
    return CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=certs.ca_bundle)


# -- valid certificates ------------------------------------------------------------------------


async def test_valid_certificate_and_its_fields(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "valid") as site:
        o = await prober.probe("localhost", site.port)
        check(o)
        assert o.issuer == "Upwatch Test CA"  # the test CA has no CN: its organisation
        assert o.signature_algorithm == "ecdsa-with-SHA256"
        assert o.is_self_signed is False
        now = dt.datetime.now(dt.UTC)
        assert o.valid_from is not None and o.valid_to is not None
        assert o.valid_from.tzinfo is not None and o.valid_to.tzinfo is not None
        assert o.valid_from < now < o.valid_to
        assert o.total_ms < TIMEOUT * 1000
        await site.wait_for_connections(1)
        assert site.sni_names == ["localhost"]
        assert site.requests == []  # a handshake only: no HTTP request


async def test_fields_of_a_certificate_seen_again(certs: TlsCerts) -> None:
    """A leaf seen before is not parsed again, and its fields come out the same."""
    parsed: list[bytes] = []

    def counting(der: bytes) -> tls._Meta:
        parsed.append(der)
        return tls.parse_meta(der)

    prober = CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=certs.ca_bundle,
                        parse=counting)
    async with tls_target(certs, "valid") as good, tls_target(certs, "expired") as bad:
        first = [await prober.probe("localhost", site.port) for site in (good, bad)]
        assert len(parsed) == 2  # two leaves, each parsed once
        again = [await prober.probe("localhost", site.port) for site in (good, bad)]
    assert len(parsed) == 2
    assert again[0].error is None and again[1].error.startswith("certificate expired on ")
    for a, b in zip(first, again, strict=True):
        assert (a.issuer, a.signature_algorithm, a.is_self_signed, a.valid_from, a.valid_to) == (
            b.issuer, b.signature_algorithm, b.is_self_signed, b.valid_from, b.valid_to
        )
    assert first[0].valid_to != first[1].valid_to  # two leaves, two entries


def test_parsed_fields_cache_is_bounded() -> None:
    meta = ("CA", "ecdsa-with-SHA256", False, dt.datetime.now(dt.UTC), dt.datetime.now(dt.UTC),
            "ab" * 32, "1f", "EC-secp256r1", "localhost")
    prober = CertProber(timeout=TIMEOUT, parse=lambda der: meta)
    for i in range(3 * tls._META_CACHE_SIZE):
        out = CertOutcome(False, None, None, None, None, None, None, 0.0)
        prober._fill_meta(out, i.to_bytes(4, "big"))
        assert out.issuer == "CA" and out.valid_to == meta[4]
    assert len(prober._meta) == tls._META_CACHE_SIZE
    assert (3 * tls._META_CACHE_SIZE - 1).to_bytes(4, "big") in prober._meta  # newest kept


async def test_rsa_certificate_and_ip_literal(tmp_path: Path) -> None:
    certs = TlsCerts(tmp_path, key_type=trustme.KeyType.RSA)
    prober = CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=certs.ca_bundle)
    async with tls_target(certs, "valid") as site:
        o = await prober.probe("127.0.0.1", site.port)  # checked against the IP SAN
        check(o)
        assert o.signature_algorithm == "sha256WithRSAEncryption"
        await site.wait_for_connections(1)
        assert site.sni_names == [None]  # no SNI for an IP address


@pytest.mark.skipif(not ipv6_available(), reason="no IPv6 on this host")
async def test_ipv6_literal(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "valid", host="::1") as site:
        check(await prober.probe("::1", site.port))
        check(await prober.probe("[::1]", site.port))


async def test_ca_bundle_is_needed_for_a_private_ca(certs: TlsCerts) -> None:
    prober = CertProber(timeout=TIMEOUT, allow_private=True)  # system trust store only
    async with tls_target(certs, "valid") as site:
        o = await prober.probe("localhost", site.port)
        check(o, error="untrusted root: ")
        assert o.issuer == "Upwatch Test CA"  # fields from the second look


# -- invalid certificates ----------------------------------------------------------------------


async def test_expired(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "expired") as site:
        o = await prober.probe("localhost", site.port)
        check(o, error="certificate expired on ")
        assert o.valid_to is not None and o.valid_to < dt.datetime.now(dt.UTC)
        assert o.issuer == "Upwatch Test CA"
        assert o.total_ms < TIMEOUT * 1000


async def test_not_yet_valid(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "not-yet-valid") as site:
        o = await prober.probe("localhost", site.port)
        check(o, error="certificate not yet valid: ")
        assert o.valid_from is not None and o.valid_from > dt.datetime.now(dt.UTC)


async def test_self_signed(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "self-signed") as site:
        o = await prober.probe("localhost", site.port)
        check(o, error="self-signed certificate: ")
        assert o.is_self_signed is True
        assert o.issuer == "localhost"  # the issuer's common name
        assert o.signature_algorithm == "ecdsa-with-SHA256"


async def test_wrong_host(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "wrong-host") as site:
        check(await prober.probe("localhost", site.port), error="host name mismatch: ")
        check(await prober.probe("127.0.0.1", site.port), error="host name mismatch: ")


def test_other_verify_codes_keep_openssl_words() -> None:
    exc = ssl.SSLCertVerificationError(1, "verify failed")
    exc.verify_code = 26
    exc.verify_message = "unsuitable certificate purpose"
    assert verify_words(exc) == "certificate invalid: unsuitable certificate purpose"


# -- no TLS answer -----------------------------------------------------------------------------


async def test_closed_port(prober: CertProber) -> None:
    o = await prober.probe("127.0.0.1", closed_port())
    check(o, error="no TLS answer: connection refused")
    assert o.issuer is None and o.valid_to is None


async def test_plain_bytes_on_a_tls_port(prober: CertProber) -> None:
    async with HttpTarget() as site:
        site.mode = "garbage"
        check(await prober.probe("127.0.0.1", site.port),
              error="no TLS answer: wrong version number")


async def test_closed_during_handshake(prober: CertProber) -> None:
    async with HttpTarget() as site:
        site.mode = "garbage"
        site.garbage = b""
        check(await prober.probe("127.0.0.1", site.port),
              error="no TLS answer: connection closed during the handshake")


async def test_hanging_port_times_out_on_time(certs: TlsCerts) -> None:
    prober = CertProber(timeout=SHORT, allow_private=True, ca_bundle=certs.ca_bundle)
    async with HttpTarget() as site:
        site.mode = "hang"
        o = await prober.probe("127.0.0.1", site.port)
        check(o, error="timed out after 1 s")
        assert SHORT * 1000 - 5 <= o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_dns_failure(prober: CertProber) -> None:
    check(await prober.probe("no-such-host.invalid", 443),
          error="no TLS answer: DNS lookup failed: no-such-host.invalid")


async def test_private_addresses_are_blocked(certs: TlsCerts) -> None:
    prober = CertProber(timeout=TIMEOUT, ca_bundle=certs.ca_bundle)
    async with tls_target(certs, "valid") as site:
        check(await prober.probe("localhost", site.port),
              error="blocked: localhost resolves to a non-public address (127.0.0.1)")
        assert site.connections == 0


# -- addresses and lifecycle -------------------------------------------------------------------


async def test_source_address_is_used(certs: TlsCerts) -> None:
    prober = CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=certs.ca_bundle,
                        source_address="127.0.0.2")
    async with tls_target(certs, "valid") as site:
        check(await prober.probe("localhost", site.port))
        await site.wait_for_connections(1)
        assert site.peers == ["127.0.0.2"]


async def test_cancellation_propagates(certs: TlsCerts, prober: CertProber) -> None:
    async with HttpTarget() as site:
        site.mode = "hang"
        task = asyncio.create_task(prober.probe("127.0.0.1", site.port))
        await site.wait_for_connections(1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_many_concurrent_probes(certs: TlsCerts, prober: CertProber) -> None:
    async with tls_target(certs, "valid") as good, tls_target(certs, "expired") as bad:
        outs = await asyncio.gather(
            *(prober.probe("localhost", (good if i % 2 else bad).port) for i in range(100))
        )
    assert [o.diagnosis if o.error else None for o in outs] == [
        None if i % 2 else "expired" for i in range(100)]
