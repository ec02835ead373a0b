"""Named certificate diagnoses: what is wrong with a server's certificate and how to fix it.

:func:`diagnose` is pure: it takes OpenSSL's verify result code (None when the chain and the
host name verified), the certificates the server sent (:class:`ChainCert`, in the order
sent, the leaf first), the host name probed, the revocation verdict and ``now``, and gives
a :class:`Diagnosis`: a stable code (docs/certificates.md lists them), the check's error in
words with a short fix (None when nothing is down), and the warnings (which never make the
check down: ``lifetime_over_limit``, ``wrong_chain_order``, a CRL that could not be used).
Nothing here matches error strings: codes come from the verify code and the chain's fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from engine.domain.timefmt import fmt

# OpenSSL X509_V_ERR_* codes this module reads.
_UNABLE_TO_GET_ISSUER: Final = 2
_NOT_YET_VALID: Final = 9
_EXPIRED: Final = 10
_DEPTH_ZERO_SELF_SIGNED: Final = 18
_SELF_SIGNED_IN_CHAIN: Final = 19
_UNABLE_TO_GET_LOCAL_ISSUER: Final = 20
_UNABLE_TO_VERIFY_LEAF: Final = 21
_HOSTNAME_MISMATCH: Final = 62
_IP_MISMATCH: Final = 64
_EE_KEY_TOO_SMALL: Final = 66
_CA_KEY_TOO_SMALL: Final = 67
_CA_MD_TOO_WEAK: Final = 68

_MISSING_ISSUER: Final = frozenset(
    {_UNABLE_TO_GET_ISSUER, _UNABLE_TO_GET_LOCAL_ISSUER, _UNABLE_TO_VERIFY_LEAF})

# Weakest acceptable keys, and signature hashes that are broken.
MIN_RSA_BITS: Final = 2048
MIN_EC_BITS: Final = 256
WEAK_HASHES: Final = frozenset({"md5", "sha1", "md2", "md4"})

# CA/Browser Forum Baseline Requirements: the longest lifetime (days) a TLS server
# certificate may have, by the date it was issued (newest rule first).
LIFETIME_LIMITS: Final[tuple[tuple[datetime, int], ...]] = (
    (datetime(2029, 3, 15, tzinfo=UTC), 47),
    (datetime(2027, 3, 15, tzinfo=UTC), 100),
    (datetime(2026, 3, 15, tzinfo=UTC), 200),
    (datetime(2020, 9, 1, tzinfo=UTC), 398),
    (datetime(2018, 3, 1, tzinfo=UTC), 825),
)

DOWN_CODES: Final = frozenset({
    "incomplete_chain", "untrusted_root", "self_signed", "hostname_mismatch", "expired",
    "not_yet_valid", "expired_intermediate", "weak_key", "weak_signature", "revoked",
    "certificate_invalid",
})
WARNING_CODES: Final = frozenset({
    "lifetime_over_limit", "wrong_chain_order", "crl_unavailable",
})


@dataclass(frozen=True, slots=True)
class ChainCert:
    """One certificate as the server sent it. ``subject``/``issuer`` are RFC 4514 strings;
    ``subject_der``/``issuer_der`` the encoded names (to match issuers); ``key_type`` "RSA",
    "EC", "Ed25519", ...; ``hash`` the signature's hash ("sha256", "sha1"; None for
    Ed25519 and unknown algorithms); ``names`` the DNS and IP names it covers;
    ``ca_issuers`` its AIA "CA Issuers" URLs; ``crl_urls`` its CRL distribution points."""

    subject: str
    issuer: str
    subject_der: bytes
    issuer_der: bytes
    not_before: datetime
    not_after: datetime
    key_type: str
    key_bits: int
    signature_algorithm: str
    hash: str | None
    is_ca: bool
    serial: int
    names: tuple[str, ...] = ()
    ca_issuers: tuple[str, ...] = ()
    crl_urls: tuple[str, ...] = ()

    @property
    def self_issued(self) -> bool:
        return self.subject_der == self.issuer_der

    def shown(self) -> dict[str, Any]:
        """The entry of the check's ``meta.chain``."""
        return {
            "subject": self.subject,
            "issuer": self.issuer,
            "not_after": fmt(self.not_after),
            "key_type": self.key_type,
            "key_bits": self.key_bits,
            "signature_algorithm": self.signature_algorithm,
        }


@dataclass(frozen=True, slots=True)
class Revocation:
    """What the revocation check found: ``status`` "good", "revoked" or "unknown" (then
    ``error`` says why in words); ``revoked_at`` and ``reason`` (RFC 5280's reason name,
    "unspecified" when the CRL gives none) for a revoked leaf; ``url`` the CRL's."""

    status: str
    url: str
    revoked_at: datetime | None = None
    reason: str | None = None
    error: str | None = None

    def shown(self) -> dict[str, Any]:
        return {"method": "crl", "status": self.status, "url": self.url,
                "revoked_at": fmt(self.revoked_at), "reason": self.reason,
                "error": self.error}


@dataclass(slots=True)
class Diagnosis:
    """``code``: the main finding (a down code, else the first warning, else None);
    ``error``: the check's error (None: not down); ``warnings``: code and message each."""

    code: str | None
    error: str | None
    warnings: list[dict[str, str]] = field(default_factory=list)


def lifetime_limit(issued: datetime) -> tuple[int, datetime] | None:
    """The longest lifetime in days allowed to a certificate issued at ``issued``, and the
    date that rule took effect; None before 2018-03-01."""
    for since, days in LIFETIME_LIMITS:
        if issued >= since:
            return days, since
    return None


def _day(ts: datetime) -> str:
    return (fmt(ts) or "")[:10]


def _q(name: str) -> str:
    return f"'{name}'" if name else "(no name)"


def _issuer_of(cert: ChainCert, chain: Sequence[ChainCert]) -> ChainCert | None:
    for other in chain:
        if other is not cert and other.subject_der == cert.issuer_der:
            return other
    return None


def _top(chain: Sequence[ChainCert]) -> ChainCert:
    """The last certificate reached from the leaf by following issuers among those sent."""
    cert, seen = chain[0], 0
    while seen < len(chain) and not cert.self_issued:
        issuer = _issuer_of(cert, chain)
        if issuer is None:
            break
        cert, seen = issuer, seen + 1
    return cert


def _weak_key(cert: ChainCert) -> bool:
    if cert.key_type in ("RSA", "DSA"):
        return cert.key_bits < MIN_RSA_BITS
    if cert.key_type == "EC":
        return cert.key_bits < MIN_EC_BITS
    return False


def _key(cert: ChainCert) -> str:
    return f"{cert.key_type}-{cert.key_bits}" if cert.key_bits else cert.key_type


def _names(cert: ChainCert) -> str:
    if not cert.names:
        return "no host names"
    shown = ", ".join(cert.names[:10])
    return shown + (f" and {len(cert.names) - 10} more" if len(cert.names) > 10 else "")


def _missing_issuer(chain: Sequence[ChainCert]) -> tuple[str, str]:
    """(code, error) for a chain whose issuer OpenSSL could not find."""
    top = _top(chain)
    if top.ca_issuers:
        return "incomplete_chain", (
            f"incomplete chain: the server does not send the intermediate certificate "
            f"{_q(top.issuer)} (its CA publishes it at {top.ca_issuers[0]}); fix: serve the "
            f"full chain, the leaf followed by its intermediate certificates")
    return "untrusted_root", (
        f"untrusted root: the chain ends at {_q(top.subject)}, whose issuer "
        f"{_q(top.issuer)} is neither sent nor trusted; fix: serve the intermediates up to "
        f"a publicly trusted root, or add your private CA's root to UPWATCH_CA_BUNDLE")


def _from_verify_code(
    code: int, message: str, chain: Sequence[ChainCert], host: str, now: datetime
) -> tuple[str, str]:
    leaf = chain[0] if chain else None
    if leaf is None:
        return "certificate_invalid", f"certificate invalid: {message}"
    if code == _EXPIRED:
        if leaf.not_after < now:
            return "expired", (f"certificate expired on {fmt(leaf.not_after)} UTC; fix: "
                               f"renew it and install the new certificate")
        for cert in chain[1:]:
            if cert.not_after < now:
                return "expired_intermediate", (
                    f"intermediate certificate expired: {_q(cert.subject)} expired on "
                    f"{fmt(cert.not_after)} UTC; fix: replace it with your CA's current "
                    f"intermediate in the chain the server sends")
        return "expired_intermediate", (
            "intermediate certificate expired: an issuer of the chain has expired; fix: "
            "serve your CA's current intermediate certificates")
    if code == _NOT_YET_VALID:
        return "not_yet_valid", (
            f"certificate not yet valid: valid from {fmt(leaf.not_before)} UTC; fix: check "
            f"the server's clock, or install the certificate that is valid now")
    if code == _DEPTH_ZERO_SELF_SIGNED:
        return "self_signed", (
            f"self-signed certificate: {_q(leaf.subject)} signed itself; fix: install a "
            f"certificate from a trusted CA, or add this one to UPWATCH_CA_BUNDLE")
    if code == _SELF_SIGNED_IN_CHAIN:
        root = _top(chain)
        return "untrusted_root", (
            f"untrusted root: the chain ends at the root {_q(root.subject)}, which is not "
            f"trusted; fix: use a certificate from a publicly trusted CA, or add that root "
            f"to UPWATCH_CA_BUNDLE if it is your private CA")
    if code in _MISSING_ISSUER:
        return _missing_issuer(chain)
    if code in (_HOSTNAME_MISMATCH, _IP_MISMATCH):
        return "hostname_mismatch", (
            f"host name mismatch: the certificate covers {_names(leaf)}, not {host}; fix: "
            f"issue a certificate that includes {host}")
    if code in (_EE_KEY_TOO_SMALL, _CA_KEY_TOO_SMALL):
        weak = next((c for c in chain if _weak_key(c)), leaf)
        return "weak_key", _weak_key_words(weak)
    if code == _CA_MD_TOO_WEAK:
        weak = next((c for c in chain if c.hash in WEAK_HASHES and not c.self_issued), leaf)
        return "weak_signature", _weak_signature_words(weak)
    return "certificate_invalid", f"certificate invalid: {message}"


def _weak_key_words(cert: ChainCert) -> str:
    return (f"weak key: {_q(cert.subject)} has a {_key(cert)} key, under RSA-2048 / EC-256; "
            f"fix: issue a new certificate with a stronger key")


def _weak_signature_words(cert: ChainCert) -> str:
    return (f"weak signature: {_q(cert.subject)} is signed with "
            f"{cert.signature_algorithm}; fix: reissue it signed with SHA-256 or better")


def _warnings(chain: Sequence[ChainCert]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    leaf = chain[0]
    limit = lifetime_limit(leaf.not_before)
    if limit is not None and not leaf.self_issued:
        days = (leaf.not_after - leaf.not_before).total_seconds() / 86400.0
        if days > limit[0]:
            out.append({"code": "lifetime_over_limit", "message": (
                f"lifetime over the limit: {round(days)} days, where the CA/Browser Forum "
                f"allows {limit[0]} for certificates issued since {_day(limit[1])}; fix: "
                f"none needed today, but public CAs no longer issue such certificates: plan "
                f"for renewals every {limit[0]} days or sooner")})
    for i, cert in enumerate(chain[:-1]):
        if chain[i + 1].subject_der != cert.issuer_der and not cert.self_issued:
            if _issuer_of(cert, chain) is not None:
                out.append({"code": "wrong_chain_order", "message": (
                    f"chain in the wrong order: {_q(cert.subject)} is not followed by its "
                    f"issuer; fix: serve the leaf first, then each certificate's issuer in "
                    f"turn (strict clients refuse other orders)")})
                break
    return out


@dataclass(frozen=True, slots=True)
class ChainFindings:
    """What a verified chain says by itself, whatever the time and the revocation: the
    first down finding (code, error) if any, and the warnings. The same chain always gives
    the same findings, so a prober may keep them."""

    found: tuple[str, str] | None
    warnings: tuple[dict[str, str], ...]


def chain_findings(chain: Sequence[ChainCert]) -> ChainFindings:
    """The findings of a non-empty chain that OpenSSL verified."""
    # Below the root: a root's own signature and key are trusted as configured.
    below_root = [c for c in chain if not c.self_issued]
    found: tuple[str, str] | None = None
    weak = next((c for c in below_root if _weak_key(c)), None)
    if weak is not None:
        found = ("weak_key", _weak_key_words(weak))
    else:
        md = next((c for c in below_root if c.hash in WEAK_HASHES), None)
        if md is not None:
            found = ("weak_signature", _weak_signature_words(md))
    return ChainFindings(found, tuple(_warnings(chain)))


def verified(findings: ChainFindings, revocation: Revocation | None) -> Diagnosis:
    """The diagnosis of a verified chain from its findings and the revocation verdict."""
    warnings = list(findings.warnings)
    if revocation is not None and revocation.status == "unknown":
        warnings.append({"code": "crl_unavailable",
                         "message": f"revocation not checked: {revocation.error}"})
    found = findings.found
    if revocation is not None and revocation.status == "revoked":
        reason = revocation.reason or "unspecified"
        found = ("revoked", (
            f"certificate revoked on {fmt(revocation.revoked_at)} UTC (reason: {reason}); "
            f"fix: install a new certificate (and a new key if it was compromised)"))
    if found is not None:
        return Diagnosis(found[0], found[1], warnings)
    return Diagnosis(warnings[0]["code"] if warnings else None, None, warnings)


def diagnose(
    verify_code: int | None,
    verify_message: str,
    chain: Sequence[ChainCert],
    host: str,
    now: datetime,
    revocation: Revocation | None = None,
) -> Diagnosis:
    """See the module docstring. ``verify_code`` None: OpenSSL verified the chain and the
    host name; ``chain`` may be empty only when no certificate could be read."""
    if verify_code is not None:
        code, error = _from_verify_code(verify_code, verify_message, chain, host, now)
        return Diagnosis(code, error, _warnings(chain) if chain else [])
    if not chain:
        return Diagnosis(None, None)
    return verified(chain_findings(chain), revocation)


__all__ = ["ChainCert", "ChainFindings", "Diagnosis", "Revocation", "chain_findings", "diagnose",
           "lifetime_limit", "verified"]
