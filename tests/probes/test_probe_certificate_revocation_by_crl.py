"""Revocation by CRL, the CRL served over HTTP on loopback: revoked (with date and reason)
and not, cached until its nextUpdate with one fetch per URL in flight, and hostile CRLs
(out of date, signed by someone else, 100 MB, slow, at a private address) failing in words
as a warning, bounded, the other verdicts unaffected."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from time import perf_counter

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from engine.domain.outcomes import CertOutcome
from engine.probes.certchain import read_cert
from engine.probes.crl import CrlChecker, CrlError, fetch_crl
from engine.probes.tls import CertProber
from tests.support.pki import CrlServer, Issued, Pki, server_context
from tests.support.targets import HttpTarget

TIMEOUT = 2.0


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


def prober_for(pki: Pki, **crl: object) -> CertProber:
    checker = CrlChecker(timeout=TIMEOUT, allow_private=True, **crl)  # type: ignore[arg-type]
    return CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=pki.bundle, crl=checker)


async def probe(prober: CertProber, leaf: Issued, chain: list[Issued]) -> CertOutcome:
    async with HttpTarget(ssl_context=server_context(leaf, chain)) as site:
        out = await prober.probe("localhost", site.port)
    assert out.valid == (out.error is None)
    return out


async def test_a_revoked_leaf_is_down_with_date_and_reason(pki: Pki) -> None:
    inter = pki.ca()
    async with CrlServer() as crls:
        url = crls.url("/inter.crl")
        leaf = pki.leaf(inter, crl_url=url)
        crls.files["/inter.crl"] = pki.crl(inter, [(leaf, x509.ReasonFlags.key_compromise)])
        out = await probe(prober_for(pki), leaf, [inter])
    assert out.diagnosis == "revoked"
    assert out.error is not None and out.error.startswith("certificate revoked on ")
    assert "(reason: keyCompromise)" in out.error and "; fix: " in out.error
    assert out.revocation is not None
    assert out.revocation["status"] == "revoked" and out.revocation["reason"] == "keyCompromise"
    assert out.revocation["revoked_at"] is not None and out.revocation["url"] == url


async def test_a_leaf_not_listed_is_good_and_the_crl_is_fetched_once(pki: Pki) -> None:
    inter = pki.ca()
    other = pki.leaf(inter)
    async with CrlServer() as crls:
        leaf = pki.leaf(inter, crl_url=crls.url("/inter.crl"))
        crls.files["/inter.crl"] = pki.crl(inter, [(other, None)])
        prober = prober_for(pki)
        async with HttpTarget(ssl_context=server_context(leaf, [inter])) as site:
            outs = await asyncio.gather(*(prober.probe("localhost", site.port)
                                          for _ in range(5)))
            again = await prober.probe("localhost", site.port)
    for out in [*outs, again]:
        assert out.error is None and out.diagnosis is None, out
        assert out.revocation is not None and out.revocation["status"] == "good"
    assert crls.hits == {"/inter.crl": 1}  # one fetch in flight, then the cache


async def test_a_revoked_leaf_issued_by_a_root_that_was_not_sent(pki: Pki) -> None:
    """The CRL's signer comes from the trust store when the server does not send it."""
    async with CrlServer() as crls:
        leaf = pki.leaf(pki.root, crl_url=crls.url("/root.crl"))
        crls.files["/root.crl"] = pki.crl(pki.root, [(leaf, None)])
        out = await probe(prober_for(pki), leaf, [])
    assert out.diagnosis == "revoked" and out.error is not None
    assert "(reason: unspecified)" in out.error


async def test_a_crl_past_its_next_update_is_a_warning(pki: Pki) -> None:
    inter = pki.ca()
    async with CrlServer() as crls:
        leaf = pki.leaf(inter, crl_url=crls.url("/old.crl"))
        crls.files["/old.crl"] = pki.crl(inter, [], next_update_days=-1)
        out = await probe(prober_for(pki), leaf, [inter])
    assert out.error is None and out.diagnosis == "crl_unavailable"
    assert out.revocation is not None and out.revocation["status"] == "unknown"
    assert out.revocation["error"].startswith("CRL out of date: its next update was due ")


async def test_a_crl_signed_by_someone_else_is_not_believed(pki: Pki) -> None:
    inter = pki.ca()
    impostor = pki.ca("Impostor")
    async with CrlServer() as crls:
        leaf = pki.leaf(inter, crl_url=crls.url("/forged.crl"))
        # In the issuer's name, listing the leaf, but signed with another key.
        crls.files["/forged.crl"] = pki.crl(inter, [(leaf, None)], signer=impostor)
        out = await probe(prober_for(pki), leaf, [inter])
    assert out.error is None and out.diagnosis == "crl_unavailable"
    assert out.revocation is not None and out.revocation["status"] == "unknown"
    assert "is not signed by the certificate's issuer" in out.revocation["error"]


@pytest.mark.parametrize("mode", ["huge", "huge-declared"])
async def test_a_100_mb_crl_is_refused_while_reading(pki: Pki, mode: str) -> None:
    inter = pki.ca()
    async with CrlServer() as crls:
        leaf = pki.leaf(inter, crl_url=crls.url("/huge.crl"))
        crls.files["/huge.crl"] = mode
        checker_limit = 1 << 20
        out = await probe(prober_for(pki, max_bytes=checker_limit), leaf, [inter])
        assert crls.sent < 20 << 20  # stopped reading long before 100 MB
    assert out.error is None and out.diagnosis == "crl_unavailable"
    assert out.revocation is not None
    assert out.revocation["error"] == "CRL not fetched: CRL over the 1 MiB limit"


async def test_a_slow_crl_server_costs_the_probe_no_more_than_its_timeout(pki: Pki) -> None:
    inter = pki.ca()
    async with CrlServer() as crls:
        leaf = pki.leaf(inter, crl_url=crls.url("/slow.crl"))
        crls.files["/slow.crl"] = "hang"
        t = perf_counter()
        out = await probe(prober_for(pki), leaf, [inter])
        assert perf_counter() - t < TIMEOUT + 1.0
    assert out.error is None and out.valid  # the verdict stands without the CRL
    assert out.revocation is not None and out.revocation["status"] == "unknown"
    assert out.revocation["error"] == "CRL not fetched in time"


async def test_the_crl_is_fetched_from_the_probes_source_address(pki: Pki) -> None:
    inter = pki.ca()
    async with CrlServer() as crls:
        crls.files["/inter.crl"] = pki.crl(inter, [])
        leaf = pki.leaf(inter, crl_url=crls.url("/inter.crl"))
        prober = CertProber(timeout=TIMEOUT, allow_private=True, ca_bundle=pki.bundle,
                            source_address="127.0.0.2")
        out = await probe(prober, leaf, [inter])
    assert out.error is None and out.revocation is not None
    assert out.revocation["status"] == "good"
    assert crls.peers == ["127.0.0.2"]


async def test_a_crl_url_at_a_private_address_is_blocked() -> None:
    with pytest.raises(CrlError, match=r"^blocked: "):
        await fetch_crl("http://127.0.0.1:9/ca.crl", timeout=1.0, max_bytes=1 << 20,
                        allow_private=False)
    with pytest.raises(CrlError, match=r"^CRL URL is not a plain http URL"):
        await fetch_crl("ldap://ca.example/cn=x", timeout=1.0, max_bytes=1 << 20,
                        allow_private=False)


async def test_the_cache_is_bounded_in_entries_and_bytes(pki: Pki) -> None:
    inter = pki.ca()
    issuer = inter.cert.public_bytes(Encoding.DER)
    when = dt.datetime.now(dt.UTC)
    async with CrlServer() as crls:
        for i in range(5):
            crls.files[f"/{i}.crl"] = pki.crl(inter, [])
        leaves = [read_cert(pki.leaf(inter, crl_url=crls.url(f"/{i}.crl")).cert.public_bytes(
            Encoding.DER)) for i in range(5)]
        checker = CrlChecker(timeout=TIMEOUT, allow_private=True, entries=3)
        for leaf in leaves:
            verdict = await checker.check(leaf, issuer, when, TIMEOUT)
            assert verdict is not None and verdict.status == "good"
        assert len(checker._cache) == 3 and checker.held_bytes > 0
        small = CrlChecker(timeout=TIMEOUT, allow_private=True, budget=1)
        verdict = await small.check(leaves[0], issuer, when, TIMEOUT)
        assert verdict is not None and verdict.status == "good"
        assert small.held_bytes == 0 and not small._cache  # too big to keep
