"""Secrets at rest: the account token and webhook URL are Fernet tokens in the
database, still authenticate and sign; rows written in clear are encrypted at start-up; the
key comes from the settings, a ``_FILE``, or is generated into the data directory."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet

from engine.db.store import Store
from engine.runtime.secretbox import KEY_FILE, SecretBox, SecretUnreadable
from engine.runtime.settings import Settings, load_settings
from tests.support.engine_support import fetch


async def test_token_and_webhook_url_are_encrypted_and_still_work(store: Store) -> None:
    account, token = await store.create_account(
        "acme", webhook_url="https://hooks.example/T0/B0/SLACKSECRET")
    assert account.webhook_url == "https://hooks.example/T0/B0/SLACKSECRET"
    [row] = await fetch(store, "SELECT a::text AS x, token, webhook_url FROM accounts a")
    assert token not in row["x"] and "SLACKSECRET" not in row["x"]
    assert store.secrets.decrypt(row["token"]) == token
    assert (await store.authenticate(token)) == account
    got = await store.get_account(account.id)
    assert got is not None and got.webhook_url == account.webhook_url
    changed = await store.set_webhook_url(account.id, "https://hooks.example/NEWSECRET")
    assert changed.webhook_url == "https://hooks.example/NEWSECRET"
    _, rotated = await store.rotate_token(account.id) or (None, "")
    [row] = await fetch(store, "SELECT a::text AS x FROM accounts a")
    assert "NEWSECRET" not in row["x"] and rotated not in row["x"]


async def test_rows_written_in_clear_are_encrypted_at_start_up(store: Store) -> None:
    account, token = await store.create_account("old")
    # As an installation from before encryption left it.
    await fetch(store, "UPDATE accounts SET token = $1, webhook_url = $2 RETURNING id",
                token, "https://hooks.example/OLDSECRET")
    got = await store.get_account(account.id)
    assert got is not None and got.webhook_url == "https://hooks.example/OLDSECRET"
    assert await store.encrypt_account_secrets() == 1
    assert await store.encrypt_account_secrets() == 0  # idempotent
    [row] = await fetch(store, "SELECT a::text AS x FROM accounts a")
    assert token not in row["x"] and "OLDSECRET" not in row["x"]
    assert (await store.authenticate(token)) is not None


def test_the_key_comes_from_settings_a_file_or_the_data_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UPWATCH_SECRET_KEY", raising=False)
    key = Fernet.generate_key()
    key_file = tmp_path / "cred"
    key_file.write_bytes(key + b"\n")
    key_file.chmod(0o600)
    monkeypatch.setenv("UPWATCH_SECRET_KEY_FILE", str(key_file))
    from_file = SecretBox.from_settings(load_settings(data_dir=str(tmp_path / "a")))
    assert SecretBox(key).decrypt(from_file.encrypt("x")) == "x"
    monkeypatch.delenv("UPWATCH_SECRET_KEY_FILE")

    data = tmp_path / "data"
    generated = SecretBox.from_settings(Settings(data_dir=data))
    token = generated.encrypt("s3cret")
    path = data / KEY_FILE
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    # The same data directory, a later process: the same key.
    again = SecretBox.from_settings(Settings(data_dir=data))
    assert again.decrypt(token) == "s3cret"
    other: Any = SecretBox(Fernet.generate_key())
    with pytest.raises(SecretUnreadable):
        other.decrypt(token)


async def test_a_node_with_another_key_fails_the_probe_saying_why(tmp_path: Path) -> None:
    """A monitor whose stored secret header this node cannot decrypt is not probed without
    it: the probe fails at once with words naming the key."""
    from engine.monitors.requests import to_stored
    from engine.monitors.requestspecs import UNREADABLE, SpecBuilder
    from engine.probes.http import HttpProber
    from tests.support.targets import HttpTarget

    writer = SecretBox(Fernet.generate_key())
    stored = to_stored({"method": "GET", "headers": [["Authorization", "Bearer x"]],
                        "body": None, "follow_redirects": True}, writer, None)
    spec = SpecBuilder(SecretBox(Fernet.generate_key()), 1 << 20).build((stored, None))
    assert spec is not None and spec.broken == UNREADABLE
    prober = HttpProber(timeout=2.0, user_agent="t", allow_private=True)
    try:
        async with HttpTarget() as site:
            out = await prober.probe(site.url("/"), spec)
            assert out.status_code is None and out.error == UNREADABLE
            assert site.requests == []
    finally:
        await prober.aclose()
