"""The domain expiry prober: one registry query per registrable domain and day, however many
monitors, accounts and nodes share the domain.

A probe of a host asks, in order: its registrable domain (none: ``unsupported``); whether
its TLD has RDAP at all (no: ``unsupported``, no query); this node's memory of the domain's
answer (kept until its refresh is due); the shared ``domain_registrations`` row; and only
when that is due and this node wins the claim (``Store.claim_registration_refresh``), the
registry. Concurrent probes of one domain on one node wait for the same refresh.

Never raises (but for cancellation): a failure is an outcome with the reason in words.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from engine.db.registrations import StoredRegistration
from engine.domain.domain_expiry import DomainOutcome
from engine.domain.rdap import Registration, registrable_domain
from engine.probes.rdap import RdapAnswer
from engine.runtime.errors import DatabaseUnavailable

# A domain's answer is fetched again after REFRESH; a failed query is retried after RETRY.
REFRESH: Final = timedelta(days=1)
RETRY: Final = timedelta(hours=6)
# How long a claim holds a domain for the node that took it (a query takes seconds).
LEASE: Final = timedelta(minutes=2)
# Domains this node remembers; past it the oldest are forgotten (read again from the table).
MEMORY: Final = 100_000


class RegistrationStore(Protocol):
    async def registration(self, domain: str) -> StoredRegistration | None: ...

    async def claim_registration_refresh(
        self, domain: str, *, now: datetime, stale_before: datetime, retry_before: datetime,
        lease: timedelta,
    ) -> bool: ...

    async def save_registration(
        self, domain: str, *, now: datetime, registration: Registration | None,
        server: str | None, error: str | None,
    ) -> None: ...


class Rdap(Protocol):
    async def unsupported(self, domain: str) -> str | None: ...
    async def lookup(self, domain: str) -> RdapAnswer: ...
    async def aclose(self) -> None: ...


class DomainProber:
    """See the module docstring. ``clock``: aware UTC now."""

    def __init__(
        self, store: RegistrationStore, rdap: Rdap, *,
        refresh: timedelta = REFRESH, retry: timedelta = RETRY, lease: timedelta = LEASE,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._store = store
        self._rdap = rdap
        self._refresh = refresh
        self._retry = retry
        self._lease = lease
        self._clock = clock
        # domain -> (remember until, the outcome's parts)
        self._memory: dict[str, tuple[datetime, StoredRegistration]] = {}
        self._pending: dict[str, asyncio.Future[StoredRegistration | None]] = {}

    async def aclose(self) -> None:
        await self._rdap.aclose()

    async def probe(self, host: str) -> DomainOutcome:
        start = time.perf_counter()
        domain = registrable_domain(host)
        if domain is None:
            return DomainOutcome(None, None, _ms(start), unsupported=(
                f"{host} is not a registered domain name (an IP address or a public suffix)"))
        try:
            why = await self._rdap.unsupported(domain)
            if why is not None:
                return DomainOutcome(domain, None, _ms(start), unsupported=why)
            stored = await self._answer(domain)
        except DatabaseUnavailable:
            return DomainOutcome(domain, None, _ms(start), error=(
                "the shared registry answers cannot be read: the database is unavailable"))
        if stored is None:
            return DomainOutcome(domain, None, _ms(start), error=(
                "another node is querying the registry; its answer is not in yet"))
        return DomainOutcome(
            domain, stored.registration, _ms(start), error=stored.error,
            server=stored.server, fetched_at=stored.fetched_at)

    async def _answer(self, domain: str) -> StoredRegistration | None:
        now = self._clock()
        kept = self._memory.get(domain)
        if kept is not None and now < kept[0]:
            return kept[1]
        pending = self._pending.get(domain)
        if pending is not None:
            return await asyncio.shield(pending)
        fut: asyncio.Future[StoredRegistration | None] = (
            asyncio.get_running_loop().create_future())
        self._pending[domain] = fut
        try:
            got = await self._refreshed(domain, now)
            fut.set_result(got)
            return got
        except BaseException as exc:
            fut.set_exception(exc)
            fut.exception()  # retrieved: waiters see it, nobody is warned about it
            raise
        finally:
            del self._pending[domain]

    def _due(self, stored: StoredRegistration | None, now: datetime) -> bool:
        if stored is None:
            return True
        if stored.fetched_at is not None and stored.fetched_at > now - self._refresh:
            return False
        return not (stored.tried_at is not None and stored.tried_at > now - self._retry)

    def _remember(self, domain: str, stored: StoredRegistration, now: datetime) -> None:
        until = now + self._lease
        if stored.fetched_at is not None:
            until = max(until, stored.fetched_at + self._refresh)
        if stored.error is not None and stored.tried_at is not None:
            until = min(until, max(now + self._lease, stored.tried_at + self._retry))
        if len(self._memory) >= MEMORY:
            for old in list(self._memory)[: MEMORY // 10]:
                del self._memory[old]
        self._memory[domain] = (until, stored)

    async def _refreshed(self, domain: str, now: datetime) -> StoredRegistration | None:
        stored = await self._store.registration(domain)
        if self._due(stored, now) and await self._store.claim_registration_refresh(
            domain, now=now, stale_before=now - self._refresh,
            retry_before=now - self._retry, lease=self._lease,
        ):
            answer = await self._rdap.lookup(domain)
            done = self._clock()
            error = answer.error or answer.unsupported
            await self._store.save_registration(
                domain, now=done, registration=answer.registration, server=answer.server,
                error=error)
            if answer.registration is not None:
                stored = StoredRegistration(domain, answer.registration, answer.server, done,
                                            done, None)
            else:
                last = stored.registration if stored is not None else None
                stored = StoredRegistration(
                    domain, last, answer.server, stored.fetched_at if stored else None,
                    done, error)
        elif stored is not None and stored.fetched_at is None and stored.tried_at is None:
            return None  # claimed elsewhere, nothing answered yet: ask again next time
        if stored is not None:
            self._remember(domain, stored, now)
        return stored


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
