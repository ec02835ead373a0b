"""Reading the certificate chain a TLS server sent, for the certificate probe's diagnoses.

:func:`sent_chain` takes the DER of every certificate the server sent, in order, from a
finished (or failed) handshake's ``ssl.SSLObject``; :class:`ChainReader` turns them into
:class:`~engine.domain.certdiagnosis.ChainCert` facts, keeping those of recently seen
certificates by DER (bounded, oldest out first) so a chain seen again costs a dict lookup
per certificate. A certificate ``cryptography`` cannot parse is left out.
"""

from __future__ import annotations

import logging
import ssl
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.x509.oid import ExtensionOID

from engine.domain.certdiagnosis import ChainCert, ChainFindings, chain_findings

log = logging.getLogger(__name__)

# Entries of about 1-3 KB each (DER key and fields).
CHAIN_CACHE_SIZE: Final = 512
_MAX_SENT: Final = 10  # a longer chain is read to its tenth certificate


def sent_chain(sslobj: ssl.SSLObject | None) -> list[bytes]:
    """The DER of each certificate the peer sent, in order; [] when unknown."""
    if sslobj is None:
        return []
    raw = getattr(sslobj, "_sslobj", None)  # the C object: 3.10+ has the chain privately
    getter = getattr(raw, "get_unverified_chain", None)
    if getter is None:
        der = sslobj.getpeercert(binary_form=True)
        return [der] if der else []
    try:
        certs = getter() or []
    except (ValueError, ssl.SSLError):
        return []
    return [c.public_bytes(ssl._ssl.ENCODING_DER)  # type: ignore[attr-defined]
            for c in certs[:_MAX_SENT]]


def leaf_issuer(sslobj: ssl.SSLObject) -> bytes | None:
    """The DER of the certificate that issued the leaf in the verified chain (sent or from
    the trust store); None when unknown or the leaf is its own issuer."""
    getter = getattr(getattr(sslobj, "_sslobj", None), "get_verified_chain", None)
    if getter is None:
        return None
    try:
        certs = getter() or []
    except (ValueError, ssl.SSLError):
        return None
    if len(certs) < 2:
        return None
    der: bytes = certs[1].public_bytes(ssl._ssl.ENCODING_DER)  # type: ignore[attr-defined]
    return der


def _key(cert: x509.Certificate) -> tuple[str, int]:
    try:
        key = cert.public_key()
    except Exception:  # an algorithm cryptography does not support
        return "unknown", 0
    if isinstance(key, rsa.RSAPublicKey):
        return "RSA", key.key_size
    if isinstance(key, ec.EllipticCurvePublicKey):
        return "EC", key.curve.key_size
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519", 256
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448", 456
    if isinstance(key, dsa.DSAPublicKey):
        return "DSA", key.key_size
    return "unknown", 0


def _ext(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> x509.ExtensionType | None:
    try:
        return cert.extensions.get_extension_for_oid(oid).value
    except (x509.ExtensionNotFound, ValueError):
        return None


def _uris(names: list[x509.GeneralName] | None) -> tuple[str, ...]:
    return tuple(n.value for n in (names or ()) if isinstance(n, x509.UniformResourceIdentifier))


def read_cert(der: bytes) -> ChainCert:
    """The facts of one certificate; raises what ``cryptography`` raises for bad DER."""
    cert = x509.load_der_x509_certificate(der)
    key_type, bits = _key(cert)
    oid = cert.signature_algorithm_oid
    name = getattr(oid, "_name", None)
    algorithm = name if isinstance(name, str) and name != "Unknown OID" else oid.dotted_string
    try:
        digest = cert.signature_hash_algorithm
        hash_name = digest.name if digest is not None else None
    except Exception:  # an algorithm cryptography does not know
        hash_name = None
    names: tuple[str, ...] = ()
    san = _ext(cert, ExtensionOID.SUBJECT_ALTERNATIVE_NAME)
    if isinstance(san, x509.SubjectAlternativeName):
        names = tuple(san.get_values_for_type(x509.DNSName)) + tuple(
            str(ip) for ip in san.get_values_for_type(x509.IPAddress))
    ca_issuers: tuple[str, ...] = ()
    aia = _ext(cert, ExtensionOID.AUTHORITY_INFORMATION_ACCESS)
    if isinstance(aia, x509.AuthorityInformationAccess):
        ca_issuers = tuple(
            d.access_location.value for d in aia
            if d.access_method == x509.AuthorityInformationAccessOID.CA_ISSUERS
            and isinstance(d.access_location, x509.UniformResourceIdentifier))
    crl_urls: tuple[str, ...] = ()
    cdp = _ext(cert, ExtensionOID.CRL_DISTRIBUTION_POINTS)
    if isinstance(cdp, x509.CRLDistributionPoints):
        crl_urls = tuple(u for point in cdp for u in _uris(point.full_name))
    bc = _ext(cert, ExtensionOID.BASIC_CONSTRAINTS)
    return ChainCert(
        subject=cert.subject.rfc4514_string(),
        issuer=cert.issuer.rfc4514_string(),
        subject_der=cert.subject.public_bytes(),
        issuer_der=cert.issuer.public_bytes(),
        not_before=cert.not_valid_before_utc,
        not_after=cert.not_valid_after_utc,
        key_type=key_type,
        key_bits=bits,
        signature_algorithm=algorithm,
        hash=hash_name,
        is_ca=isinstance(bc, x509.BasicConstraints) and bc.ca,
        serial=cert.serial_number,
        names=names,
        ca_issuers=ca_issuers,
        crl_urls=crl_urls,
    )


# A verified chain as the probe keeps it: the facts, meta.chain's entries, the findings.
Verified = tuple[list[ChainCert], list[dict[str, Any]], ChainFindings]


class ChainReader:
    """:func:`read_cert` with a bounded cache by DER, and :meth:`verified` with one by
    chain (the same chain gives the same facts, entries and findings; the entries are
    shared, never to be changed)."""

    def __init__(self, size: int = CHAIN_CACHE_SIZE) -> None:
        self._size = size
        self._cache: dict[bytes, ChainCert] = {}
        self._chains: dict[tuple[bytes, ...], Verified] = {}

    def verified(self, ders: list[bytes]) -> Verified | None:
        """The facts, shown entries and findings of a chain OpenSSL verified; None when
        none of its certificates could be read."""
        key = tuple(ders)
        hit = self._chains.get(key)
        if hit is not None:
            return hit
        chain = self.read(ders)
        if not chain:
            return None
        entry = (chain, [c.shown() for c in chain], chain_findings(chain))
        if len(self._chains) >= self._size:
            del self._chains[next(iter(self._chains))]
        self._chains[key] = entry
        return entry

    def read(self, ders: list[bytes]) -> list[ChainCert]:
        out: list[ChainCert] = []
        cache = self._cache
        for der in ders:
            cert = cache.get(der)
            if cert is None:
                try:
                    cert = read_cert(der)
                except Exception as exc:
                    log.info("cannot parse a certificate of the chain: %s", exc)
                    continue
                if len(cache) >= self._size:
                    del cache[next(iter(cache))]
                cache[der] = cert
            out.append(cert)
        return out


__all__ = ["ChainReader", "Verified", "leaf_issuer", "read_cert", "sent_chain"]
