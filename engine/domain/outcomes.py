"""What a probe found: plain data, built by the probes and read by the evaluator.

Contracts shared by both outcome types:

* ``error`` is ``None`` exactly when the probe got what it came for (a response for the
  uptime probe, a verified certificate for the certificate probe); otherwise it is a short
  phrase in plain words, fit to show a user as is ("connection refused", "timed out after
  10 s", "certificate expired", ...).
* Durations are milliseconds measured with ``time.perf_counter()``; ``total_ms`` is always set
  and never exceeds the probe timeout by more than scheduling noise.
* Datetimes are timezone-aware UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(slots=True)
class HttpOutcome:
    """Result of one uptime probe (all redirect hops).

    For HTTP, exactly one of ``status_code`` and ``error`` is set: a response whose status
    line and headers were read gives ``status_code`` (the final one, after redirects) and
    ``error`` None; anything else gives ``error`` and ``status_code`` None. A probe of
    another scheme leaves ``status_code`` None; ``error`` None then means it answered.
    The phase timings describe the last hop only and are None for phases that did not
    happen (``dns_ms`` for an IP literal, ``tls_ms`` for plain HTTP) or were not reached
    before the failure. ``ttfb_ms`` runs from the request being written to the first
    response byte arriving.
    """

    status_code: int | None
    error: str | None
    total_ms: float
    dns_ms: float | None
    connect_ms: float | None
    tls_ms: float | None
    ttfb_ms: float | None
    redirects: int = 0
    remote_ip: str | None = None
    # The last hop's name came from the resolver's cache (``dns_ms`` is then 0).
    dns_cached: bool = False
    # A monitor's assertions: the first failed one's words (the response, with
    # its status_code, counts as a failure then), and whether a status_code assertion held
    # in place of the 2xx/3xx rule.
    assertion_error: str | None = None
    status_asserted: bool = False
    # Figures of a scheme other than http(s) (a DNS answer, packet loss), merged into the
    # uptime check's meta; None for HTTP.
    details: dict[str, Any] | None = None


@dataclass(slots=True)
class CertOutcome:
    """Result of one certificate probe.

    ``valid`` is True exactly when ``error`` is None. The certificate fields describe the leaf
    the server presented; they are filled on success and, when a cheap second look succeeds,
    on a verification failure too (an expired certificate still has an issuer and dates).
    ``issuer`` is the issuer's common name, else its organisation.
    """

    valid: bool
    error: str | None
    issuer: str | None
    signature_algorithm: str | None
    is_self_signed: bool | None
    valid_from: datetime | None
    valid_to: datetime | None
    total_ms: float
    # The leaf's identity: SHA-256 of its DER (lower-case hex), serial number
    # (lower-case hex), key ("RSA-2048", "EC-secp256r1", "Ed25519") and subject common name.
    fingerprint_sha256: str | None = None
    serial: str | None = None
    key_type: str | None = None
    subject: str | None = None
    # What is wrong and how to fix it (engine/domain/certdiagnosis.py): the diagnosis code,
    # the warnings (code and message each), the chain the server sent (meta.chain's
    # entries) and the revocation verdict; None when the probe read no certificate.
    diagnosis: str | None = None
    warnings: list[dict[str, str]] | None = None
    chain: list[dict[str, Any]] | None = None
    revocation: dict[str, Any] | None = None
