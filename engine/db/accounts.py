"""Accounts and API tokens.

Tokens are made with :mod:`secrets`, looked up through their SHA-256 and compared in constant
time; they are never logged. The token itself is kept because it keys webhook signatures.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from engine.db.base import CHANNEL_WEBHOOKS, StoreBase

TOKEN_PREFIX = "uw_"

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


class AccountsMixin(StoreBase):
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
                SQL_CREATE_ACCOUNT, name, token, token_digest(token), plan, webhook_url, is_operator
            )
        assert row is not None
        return Account.from_row(row), token

    async def authenticate(self, token: str) -> Account | None:
        """The account whose token this is, or None. Constant-time on the digest."""
        digest = token_digest(token)
        row = await self._fetchrow(SQL_ACCOUNT_BY_TOKEN_HASH, digest)
        if row is None or not hmac.compare_digest(bytes(row["token_sha256"]), digest):
            return None
        return Account.from_row(row)

    async def get_account(self, account_id: int) -> Account | None:
        row = await self._fetchrow(SQL_ACCOUNT_BY_ID, account_id)
        return Account.from_row(row) if row else None

    async def list_accounts(self) -> list[tuple[Account, int]]:
        """Every account with its monitor count."""
        rows = await self._fetch(SQL_LIST_ACCOUNTS)
        return [(Account.from_row(r), r["monitors"]) for r in rows]

    async def count_accounts(self) -> int:
        return int(await self._fetchval(SQL_COUNT_ACCOUNTS))

    async def set_webhook_url(self, account_id: int, url: str | None) -> Account:
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_SET_WEBHOOK_URL, account_id, url)
            if url is not None:
                # Events kept while no URL was set become deliverable now.
                await self._notify(conn, CHANNEL_WEBHOOKS)
        assert row is not None
        return Account.from_row(row)

    async def rotate_token(self, account_id: int) -> tuple[Account, str] | None:
        token = new_token()
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_SET_TOKEN, account_id, token, token_digest(token))
        return (Account.from_row(row), token) if row else None

    async def set_operator(self, account_id: int, is_operator: bool) -> Account | None:
        async with self._tx() as conn:
            row = await conn.fetchrow(SQL_SET_OPERATOR, account_id, is_operator)
        return Account.from_row(row) if row else None
