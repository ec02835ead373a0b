"""Every certificate a certificate check has seen (``check_certificates``): written with the
probe's transition (:func:`record_certificate`), listed by the API with first and last
sightings, so a renewal, a swapped issuer or a rollback shows as rows."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from engine.db.base import StoreBase
from engine.domain.outcomes import CertOutcome
from engine.runtime.errors import NotFound

SQL_SEEN_CERTIFICATE = """
INSERT INTO check_certificates AS c
    (check_id, fingerprint_sha256, serial, issuer, subject, key_type, signature_algorithm,
     valid_from, valid_to, first_seen_at, last_seen_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $10)
ON CONFLICT (check_id, fingerprint_sha256) DO UPDATE
SET last_seen_at = GREATEST(c.last_seen_at, EXCLUDED.last_seen_at)
"""
SQL_CERTIFICATE_CHECK_OF_ACCOUNT = """
SELECT c.id, c.meta ->> 'fingerprint_sha256' AS current
FROM checks c JOIN monitors m ON m.id = c.monitor_id
WHERE c.id = $1 AND m.account_id = $2 AND c.kind = 'certificate_health'
"""
SQL_CERTIFICATES_OF_CHECK = """
SELECT fingerprint_sha256, serial, issuer, subject, key_type, signature_algorithm,
       valid_from, valid_to, first_seen_at, last_seen_at
FROM check_certificates
WHERE check_id = $1
ORDER BY last_seen_at DESC, first_seen_at DESC
LIMIT $2
"""
MAX_LISTED = 500


async def record_certificate(
    conn: asyncpg.Connection, check_id: int, cert: CertOutcome, at: datetime
) -> None:
    """``cert`` (a leaf with a fingerprint) seen by ``check_id`` at ``at``."""
    await conn.execute(
        SQL_SEEN_CERTIFICATE, check_id, cert.fingerprint_sha256, cert.serial or "",
        cert.issuer, cert.subject, cert.key_type, cert.signature_algorithm, cert.valid_from,
        cert.valid_to, at,
    )


@dataclass(frozen=True, slots=True)
class SeenCertificate:
    fingerprint_sha256: str
    serial: str
    issuer: str | None
    subject: str | None
    key_type: str | None
    signature_algorithm: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    first_seen_at: datetime
    last_seen_at: datetime
    current: bool


class CertificatesMixin(StoreBase):
    async def list_certificates(self, account_id: int, check_id: int) -> list[SeenCertificate]:
        """The certificates a certificate check of the account has seen, last seen first
        (at most ``MAX_LISTED``); ``current`` marks the one its last probe read. NotFound
        for another account's check, an unknown one, or an uptime check."""
        async with self._conn() as conn:
            check = await conn.fetchrow(SQL_CERTIFICATE_CHECK_OF_ACCOUNT, check_id, account_id)
            if check is None:
                raise NotFound("Certificate check not found.")
            rows = await conn.fetch(SQL_CERTIFICATES_OF_CHECK, check_id, MAX_LISTED)
        return [
            SeenCertificate(**dict(r), current=r["fingerprint_sha256"] == check["current"])
            for r in rows
        ]
