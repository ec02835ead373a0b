"""Every certificate diagnosis against a real TLS server on loopback whose chain is made
for it: the check's error names the cause and the fix, meta's diagnosis is its code, and
the chain the server sent is read in order."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes

from engine.domain.outcomes import CertOutcome
from engine.probes.tls import CertProber
from tests.support.pki import Issued, Pki, now, rsa_key, server_context
from tests.support.targets import HttpTarget

TIMEOUT = 3.0


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


async def probe(pki: Pki, leaf: Issued, chain: list[Issued], host: str = "localhost",
                *, trusted: bool = True) -> CertOutcome:
    prober = CertProber(timeout=TIMEOUT, allow_private=True,
                        ca_bundle=pki.bundle if trusted else None)
    async with HttpTarget(ssl_context=server_context(leaf, chain)) as site:
        out = await prober.probe(host, site.port)
    await prober.aclose()
    assert out.valid == (out.error is None)
    return out


def down(out: CertOutcome, code: str, opening: str) -> str:
    assert out.diagnosis == code, out
    assert out.error is not None and out.error.startswith(opening), out.error
    assert "; fix: " in out.error
    return out.error


async def test_a_good_chain_has_no_diagnosis_and_is_read_in_order(pki: Pki) -> None:
    inter = pki.ca()
    leaf = pki.leaf(inter)
    out = await probe(pki, leaf, [inter])
    assert out.error is None and out.diagnosis is None and out.warnings == []
    assert out.chain is not None
    assert [c["subject"] for c in out.chain] == [
        "CN=localhost,O=Upwatch Tests", "CN=Upwatch Test Intermediate,O=Upwatch Tests"]
    first = out.chain[0]
    assert first["issuer"] == "CN=Upwatch Test Intermediate,O=Upwatch Tests"
    assert (first["key_type"], first["key_bits"]) == ("EC", 256)
    assert first["signature_algorithm"] == "ecdsa-with-SHA256"
    assert first["not_after"] == leaf.cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M:%S")


async def test_incomplete_chain_names_the_missing_issuer_and_where_it_is(pki: Pki) -> None:
    inter = pki.ca("Example Issuing CA")
    leaf = pki.leaf(inter, aia_url="http://ca.example/issuing.crt")
    error = down(await probe(pki, leaf, []), "incomplete_chain", "incomplete chain: ")
    assert "CN=Example Issuing CA,O=Upwatch Tests" in error
    assert "http://ca.example/issuing.crt" in error


async def test_untrusted_root_is_not_called_self_signed(pki: Pki) -> None:
    other = Pki(pki.dir / "..", root_cn="Private Root")  # not in the bundle probed with
    leaf = other.leaf(other.root)
    out = await probe(pki, leaf, [other.root])
    error = down(out, "untrusted_root", "untrusted root: ")
    assert "Private Root" in error
    assert out.is_self_signed is False
    # Without the root sent, and no AIA to say an intermediate is missing: still the root.
    down(await probe(pki, leaf, []), "untrusted_root", "untrusted root: ")


async def test_self_signed_leaf_agrees_with_is_self_signed(pki: Pki) -> None:
    alone = Pki(pki.dir / "..", root_cn="localhost")
    from tests.support.pki import build

    leaf = build(alone.root.name, alone.root.key, None, ca=False, hosts=("localhost",))
    out = await probe(pki, leaf, [])
    down(out, "self_signed", "self-signed certificate: ")
    assert out.is_self_signed is True


async def test_hostname_mismatch_lists_the_names_covered(pki: Pki) -> None:
    leaf = pki.leaf(hosts=("www.example.org", "example.org"))
    error = down(await probe(pki, leaf, []), "hostname_mismatch", "host name mismatch: ")
    assert "www.example.org, example.org" in error and "not localhost" in error


async def test_expired_and_not_yet_valid(pki: Pki) -> None:
    expired = pki.leaf(days=(-30, -1))
    error = down(await probe(pki, expired, []), "expired", "certificate expired on ")
    assert expired.cert.not_valid_after_utc.strftime("%Y-%m-%d %H:%M:%S") in error
    future = pki.leaf(days=(2, 30))
    down(await probe(pki, future, []), "not_yet_valid", "certificate not yet valid: ")


async def test_expired_intermediate_is_told_apart_from_the_leaf(pki: Pki) -> None:
    inter = pki.ca("Old Intermediate", days=(-400, -2))
    leaf = pki.leaf(inter, not_before=now() - dt.timedelta(days=10), days=(0, 60))
    error = down(await probe(pki, leaf, [inter]), "expired_intermediate",
                 "intermediate certificate expired: ")
    assert "Old Intermediate" in error


async def test_wrong_chain_order_is_a_warning(pki: Pki) -> None:
    upper = pki.ca("Upper CA")
    lower = pki.ca("Lower CA", issuer=upper)
    leaf = pki.leaf(lower)
    out = await probe(pki, leaf, [upper, lower])  # should be lower, then upper
    assert out.error is None and out.diagnosis == "wrong_chain_order"
    assert out.warnings is not None and out.warnings[0]["code"] == "wrong_chain_order"
    assert "serve the leaf first" in out.warnings[0]["message"]


async def test_weak_rsa_key_is_down(pki: Pki) -> None:
    leaf = pki.leaf(key=rsa_key(1024))
    out = await probe(pki, leaf, [])
    error = down(out, "weak_key", "weak key: ")
    assert "RSA-1024" in error
    assert out.chain is not None and out.chain[0]["key_bits"] == 1024


async def test_sha1_signature_below_the_root_is_down(pki: Pki) -> None:
    inter = pki.ca("SHA-1 Intermediate", key=rsa_key(2048), digest=hashes.SHA1())
    leaf = pki.leaf(inter, key=rsa_key(2048))
    error = down(await probe(pki, leaf, [inter]), "weak_signature", "weak signature: ")
    assert "SHA-1 Intermediate" in error and "ecdsa-with-SHA1" in error


async def test_lifetime_over_the_limit_is_a_warning_not_down(pki: Pki) -> None:
    leaf = pki.leaf(days=(-1, 5 * 365))
    out = await probe(pki, leaf, [])
    assert out.error is None and out.valid
    assert out.diagnosis == "lifetime_over_limit"
    assert out.warnings is not None
    assert "allows 200 for certificates issued since 2026-03-15" in out.warnings[0]["message"]
