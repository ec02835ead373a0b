"""Authentication is remembered for a moment (engine.db.accounts.AuthCache), and never lets a
rotated token through: at once after a rotation in this process, and no later than the
cache's window after a rotation by another process."""

from __future__ import annotations

from typing import Any

from engine.db.accounts import AUTH_CACHE_SECONDS
from engine.db.store import Store


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fake_clock(store: Store) -> FakeClock:
    clock = FakeClock()
    store.auth_cache.clock = clock
    return clock


async def test_a_repeated_authentication_does_not_ask_the_database(
    store: Store, monkeypatch: Any
) -> None:
    acc, token = await store.create_account("a")
    assert (await store.authenticate(token)).id == acc.id  # type: ignore[union-attr]

    async def no_database(*_: Any) -> Any:
        raise AssertionError("the database was asked again")

    monkeypatch.setattr(store, "_fetchrow", no_database)
    assert (await store.authenticate(token)).id == acc.id  # type: ignore[union-attr]


async def test_a_rotation_here_refuses_the_old_token_at_once(store: Store) -> None:
    acc, old = await store.create_account("a")
    assert await store.authenticate(old) is not None
    rotated = await store.rotate_token(acc.id)
    assert rotated is not None
    assert await store.authenticate(old) is None
    assert (await store.authenticate(rotated[1])).id == acc.id  # type: ignore[union-attr]


async def test_a_rotation_elsewhere_is_honoured_within_the_window(
    store: Store, db_dsn: str
) -> None:
    """Another process (here: another store on the same database) rotates the token. This
    store may accept the old token until its entry expires, never after, and using the
    token meanwhile does not extend the entry."""
    clock = fake_clock(store)
    acc, old = await store.create_account("a")
    assert await store.authenticate(old) is not None  # remembered at t = 0
    other = await Store.connect(db_dsn, min_size=1, max_size=1)
    try:
        rotated = await other.rotate_token(acc.id)
    finally:
        await other.close()
    assert rotated is not None
    clock.now += AUTH_CACHE_SECONDS * 0.75
    assert await store.authenticate(old) is not None  # the documented window
    clock.now += AUTH_CACHE_SECONDS * 0.25
    assert await store.authenticate(old) is None
    clock.now += 3600
    assert await store.authenticate(old) is None
    assert (await store.authenticate(rotated[1])).id == acc.id  # type: ignore[union-attr]


async def test_a_lookup_racing_a_rotation_does_not_remember_the_old_token(
    store: Store, monkeypatch: Any
) -> None:
    """The database answered for the old token just before the rotation committed: that
    request may pass (it came first), but its answer must not be remembered."""
    acc, old = await store.create_account("a")
    real_fetchrow = store._fetchrow

    async def fetch_then_rotate(sql: str, *args: Any) -> Any:
        row = await real_fetchrow(sql, *args)
        monkeypatch.setattr(store, "_fetchrow", real_fetchrow)
        assert await store.rotate_token(acc.id) is not None
        return row

    monkeypatch.setattr(store, "_fetchrow", fetch_then_rotate)
    assert await store.authenticate(old) is not None
    assert await store.authenticate(old) is None


async def test_unknown_tokens_are_not_remembered(store: Store) -> None:
    for i in range(50):
        assert await store.authenticate(f"uw_unknown{i}") is None
    assert len(store.auth_cache) == 0


async def test_an_account_change_is_seen_at_once(store: Store) -> None:
    acc, token = await store.create_account("a")
    assert (await store.authenticate(token)).webhook_url is None  # type: ignore[union-attr]
    await store.set_webhook_url(acc.id, "https://hooks.example/")
    assert (await store.authenticate(token)).webhook_url == "https://hooks.example/"  # type: ignore[union-attr]
    await store.set_operator(acc.id, True)
    assert (await store.authenticate(token)).is_operator  # type: ignore[union-attr]


async def test_the_cache_stays_bounded(store: Store) -> None:
    store.auth_cache.max_entries = 3
    tokens = [(await store.create_account(f"a{i}"))[1] for i in range(10)]
    for token in tokens:
        assert await store.authenticate(token) is not None
        assert len(store.auth_cache) <= 3
