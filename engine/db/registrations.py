"""What registries said about registrable domains (``domain_registrations``), shared by every
monitor and account on a domain and by every node.

A refresh is claimed before a registry is queried: the claim locks the row with ``FOR UPDATE
SKIP LOCKED`` and sets ``claimed_until`` (a lease), so of two nodes wanting the same domain at
once one queries and the other keeps the answer it has. :meth:`save_registration` ends the
claim with the answer, or with the failure while keeping the last answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from engine.db.base import StoreBase
from engine.domain.rdap import Registration

SQL_GET = """
SELECT domain, registrar, expires_at, statuses, nameservers, server, fetched_at, tried_at,
       error
FROM domain_registrations WHERE domain = $1
"""

SQL_ENSURE = """
INSERT INTO domain_registrations (domain) VALUES ($1) ON CONFLICT (domain) DO NOTHING
"""

# Due: no answer newer than $3 (stale_before), no try newer than $4 (retry_before), and no
# live claim. The inner SELECT skips a row another node holds locked.
SQL_CLAIM = """
UPDATE domain_registrations SET claimed_until = $2 + make_interval(secs => $5)
WHERE domain = (
    SELECT domain FROM domain_registrations
    WHERE domain = $1
      AND (fetched_at IS NULL OR fetched_at < $3)
      AND (tried_at IS NULL OR tried_at < $4)
      AND (claimed_until IS NULL OR claimed_until < $2)
    FOR UPDATE SKIP LOCKED
)
RETURNING domain
"""

SQL_SAVE_ANSWER = """
UPDATE domain_registrations
SET registrar = $2, expires_at = $3, statuses = $4, nameservers = $5, server = $6,
    fetched_at = $7, tried_at = $7, error = NULL, claimed_until = NULL
WHERE domain = $1
"""

SQL_SAVE_FAILURE = """
UPDATE domain_registrations
SET tried_at = $2, error = $3, server = COALESCE($4, server), claimed_until = NULL
WHERE domain = $1
"""


@dataclass(frozen=True, slots=True)
class StoredRegistration:
    """A row: the last answer (``registration`` None before one) and the last try."""

    domain: str
    registration: Registration | None
    server: str | None
    fetched_at: datetime | None
    tried_at: datetime | None
    error: str | None


class RegistrationsMixin(StoreBase):
    async def registration(self, domain: str) -> StoredRegistration | None:
        r = await self._fetchrow(SQL_GET, domain)
        if r is None:
            return None
        reg = None
        if r["fetched_at"] is not None:
            reg = Registration(
                registrar=r["registrar"], expires_at=r["expires_at"],
                statuses=tuple(r["statuses"]), nameservers=tuple(r["nameservers"]))
        return StoredRegistration(r["domain"], reg, r["server"], r["fetched_at"],
                                  r["tried_at"], r["error"])

    async def claim_registration_refresh(
        self, domain: str, *, now: datetime, stale_before: datetime, retry_before: datetime,
        lease: timedelta,
    ) -> bool:
        """Claim the query for ``domain`` when it is due; False when it is not, or another
        node holds it."""
        await self._execute(SQL_ENSURE, domain)
        got = await self._fetchval(SQL_CLAIM, domain, now, stale_before, retry_before,
                                   lease.total_seconds())
        return got is not None

    async def save_registration(
        self, domain: str, *, now: datetime, registration: Registration | None,
        server: str | None, error: str | None,
    ) -> None:
        """End a claim: the registry's answer, or ``error`` (the last answer is kept)."""
        if registration is not None:
            await self._execute(
                SQL_SAVE_ANSWER, domain, registration.registrar, registration.expires_at,
                list(registration.statuses), list(registration.nameservers), server, now)
        else:
            await self._execute(SQL_SAVE_FAILURE, domain, now, error, server)
