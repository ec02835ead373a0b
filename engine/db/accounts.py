"""Accounts and API tokens.

Tokens are made with :mod:`secrets`, looked up through their SHA-256 and compared in constant
time; they are never logged. The token itself is kept because it keys webhook signatures:
encrypted at rest, as is the webhook URL (``engine/runtime/secretbox.py``), so no row or
dump holds either in clear.

Authentication is remembered for :data:`AUTH_CACHE_SECONDS` (token digest -> account), so a
burst of API requests costs one database lookup per account and window instead of one per
request. A change made through this store (rotating the token, a new webhook URL, operator
rights) drops the account's entries at once. A token rotated by ANOTHER process (``upwatch
account rotate-token`` against a running API) keeps working in this one until its entry
expires: at most :data:`AUTH_CACHE_SECONDS` after the rotation, since entries are never
extended by use. Unknown tokens are never remembered.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

import asyncpg

from engine.db.base import CHANNEL_WEBHOOKS, StoreBase
from engine.runtime.secretbox import SecretUnreadable, is_plain, reveal

log = logging.getLogger(__name__)

TOKEN_PREFIX = "uw_"
# How long a successful authentication is remembered, and for how many tokens at most. Small:
# this is the longest a token rotated by another process stays usable here.
AUTH_CACHE_SECONDS = 2.0
AUTH_CACHE_MAX_ENTRIES = 10_000

_ACCOUNT_COLUMNS = "id, name, plan, webhook_url, is_operator, created_at"

SQL_CREATE_ACCOUNT = f"""
INSERT INTO accounts (name, token, token_sha256, plan, webhook_url, is_operator)
VALUES ($1, $2, $3, $4, $5, $6)
RETURNING {_ACCOUNT_COLUMNS}
"""
SQL_ACCOUNT_BY_TOKEN_HASH = (
    f"SELECT {_ACCOUNT_COLUMNS}, token_sha256 FROM accounts WHERE token_sha256 = $1"
)
SQL_ACCOUNT_BY_ID = f"SELECT {_ACCOUNT_COLUMNS} FROM accounts WHERE id = $1"
SQL_LIST_ACCOUNTS = f"""
SELECT {_ACCOUNT_COLUMNS}, (SELECT count(*) FROM monitors m WHERE m.account_id = a.id) AS monitors
FROM accounts a ORDER BY id
"""
SQL_SET_WEBHOOK_URL = (
    f"UPDATE accounts SET webhook_url = $2 WHERE id = $1 RETURNING {_ACCOUNT_COLUMNS}"
)
SQL_SET_TOKEN = (
    f"UPDATE accounts SET token = $2, token_sha256 = $3 WHERE id = $1 RETURNING {_ACCOUNT_COLUMNS}"
)
SQL_SET_OPERATOR = (
    f"UPDATE accounts SET is_operator = $2 WHERE id = $1 RETURNING {_ACCOUNT_COLUMNS}"
)
SQL_COUNT_ACCOUNTS = "SELECT count(*) FROM accounts"
# Rows written in clear (see engine.runtime.secretbox.reveal): an API token starts with "uw_".
SQL_PLAIN_ACCOUNT_SECRETS = r"""
SELECT id, token, webhook_url FROM accounts
WHERE token LIKE 'uw\_%' OR webhook_url LIKE 'http%'
FOR UPDATE
"""
SQL_SEAL_ACCOUNT_SECRETS = "UPDATE accounts SET token = $2, webhook_url = $3 WHERE id = $1"


@dataclass(frozen=True, slots=True)
class Account:
    id: int
    name: str
    plan: str
    webhook_url: str | None
    is_operator: bool
    created_at: datetime

    @classmethod
    def from_row(cls, row: asyncpg.Record) -> Account:
        return cls(
            id=row["id"],
            name=row["name"],
            plan=row["plan"],
            webhook_url=row["webhook_url"],
            is_operator=row["is_operator"],
            created_at=row["created_at"],
        )


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


class AuthCache:
    """Token digest -> account for ``ttl`` seconds after the database said so.

    Keyed by digest, not token: the token never sits in another structure, and a lookup
    compares digests an attacker cannot choose. ``generation`` moves on every drop, so an
    authentication that read the database before a rotation committed cannot store the
    old token's account after the drop (:meth:`put` refuses a stale generation).
    """

    def __init__(
        self,
        ttl: float = AUTH_CACHE_SECONDS,
        max_entries: int = AUTH_CACHE_MAX_ENTRIES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self.clock = clock
        self.generation = 0
        self._entries: dict[bytes, tuple[Account, float]] = {}

    def get(self, digest: bytes) -> Account | None:
        entry = self._entries.get(digest)
        if entry is None:
            return None
        if self.clock() >= entry[1]:
            del self._entries[digest]
            return None
        return entry[0]

    def put(self, digest: bytes, account: Account, generation: int) -> None:
        if self.ttl <= 0 or generation != self.generation:
            return
        now = self.clock()
        if len(self._entries) >= self.max_entries:
            self._entries = {d: e for d, e in self._entries.items() if e[1] > now}
            if len(self._entries) >= self.max_entries:
                self._entries.clear()
        self._entries[digest] = (account, now + self.ttl)

    def drop_account(self, account_id: int) -> None:
        self.generation += 1
        for digest in [d for d, (acc, _) in self._entries.items() if acc.id == account_id]:
            del self._entries[digest]

    def __len__(self) -> int:
        return len(self._entries)


class AccountsMixin(StoreBase):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.auth_cache = AuthCache()

    async def create_account(
        self,
        name: str,
        *,
        plan: str = "default",
        webhook_url: str | None = None,
        is_operator: bool = False,
    ) -> tuple[Account, str]:
        """Create an account; returns it with its new API token (shown once)."""
        token = new_token()
        async with self._tx() as conn:
            row = await conn.fetchrow(
                SQL_CREATE_ACCOUNT, name, self._seal(token), token_digest(token), plan,
                self._seal(webhook_url), is_operator
            )
        assert row is not None
        return self._account(row), token

    async def authenticate(self, token: str) -> Account | None:
        """The account whose token this is, or None. Constant-time on the digest. Remembered
        for a moment (see the module)."""
        digest = token_digest(token)
        cached = self.auth_cache.get(digest)
        if cached is not None:
            return cached
        generation = self.auth_cache.generation
        row = await self._fetchrow(SQL_ACCOUNT_BY_TOKEN_HASH, digest)
        if row is None or not hmac.compare_digest(bytes(row["token_sha256"]), digest):
            return None
        account = self._account(row)
        self.auth_cache.put(digest, account, generation)
        return account

    async def get_account(self, account_id: int) -> Account | None:
        row = await self._fetchrow(SQL_ACCOUNT_BY_ID, account_id)
        return self._account(row) if row else None

    async def list_accounts(self) -> list[tuple[Account, int]]:
        """Every account with its monitor count."""
        rows = await self._fetch(SQL_LIST_ACCOUNTS)
        return [(self._account(r), r["monitors"]) for r in rows]

    async def count_accounts(self) -> int:
        return int(await self._fetchval(SQL_COUNT_ACCOUNTS))

    async def set_webhook_url(self, account_id: int, url: str | None) -> Account:
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_SET_WEBHOOK_URL, account_id, self._seal(url))
            if url is not None:
                # Events kept while no URL was set become deliverable now.
                await self._notify(conn, CHANNEL_WEBHOOKS)
        self.auth_cache.drop_account(account_id)
        assert row is not None
        return self._account(row)

    async def rotate_token(self, account_id: int) -> tuple[Account, str] | None:
        token = new_token()
        async with self._tx() as conn:
            row = await conn.fetchrow(
                SQL_SET_TOKEN, account_id, self._seal(token), token_digest(token))
        self.auth_cache.drop_account(account_id)  # the old token stops working here at once
        return (self._account(row), token) if row else None

    async def set_operator(self, account_id: int, is_operator: bool) -> Account | None:
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_SET_OPERATOR, account_id, is_operator)
        self.auth_cache.drop_account(account_id)
        return self._account(row) if row else None

    # -- secrets at rest -------------------------------------------------------------------------

    def _seal(self, value: str | None) -> str | None:
        return None if value is None else self.secrets.encrypt(value)

    def _account(self, row: asyncpg.Record) -> Account:
        """The account of ``row``, its webhook URL decrypted (None, logged, when this key
        cannot: another node's key; the events wait until the key is fixed)."""
        account = Account.from_row(row)
        url = account.webhook_url
        if url is None:
            return account
        try:
            plain = reveal(self.secrets, url)
        except SecretUnreadable:
            log.error("account %d: webhook URL cannot be decrypted with this secret key",
                      account.id)
            plain = None
        return replace(account, webhook_url=plain)

    async def encrypt_account_secrets(self) -> int:
        """Encrypt tokens and webhook URLs written in clear (before migration 0003's
        release); returns how many accounts changed. Idempotent; run at start-up."""
        changed = 0
        async with self._tx() as conn:
            rows = await conn.fetch(SQL_PLAIN_ACCOUNT_SECRETS)
            for r in rows:
                token = self._seal(r["token"]) if is_plain(r["token"]) else r["token"]
                url = (self._seal(r["webhook_url"]) if is_plain(r["webhook_url"])
                       else r["webhook_url"])
                await conn.execute(SQL_SEAL_ACCOUNT_SECRETS, r["id"], token, url)
                changed += 1
        return changed
