"""``upwatch backup`` / ``restore`` on a database of ``UPWATCH_DATABASE_URL``, and every refusal:
a database that is not empty, the wrong secret key, a file that is no backup or comes from a
newer schema, a data directory without a database. Each refusal exits 1 in words and
changes nothing; usage errors exit 2."""

from __future__ import annotations

import io
import stat
import tarfile
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import orjson
import pytest
from cryptography.fernet import Fernet

from engine.db.store import Store
from tests.support.cli import upwatch
from tests.support.instances import fetch


@pytest.fixture
async def empty_dsn(pg_admin_dsn: str) -> AsyncIterator[str]:
    """A new, empty database (no schema), dropped after the test."""
    name = "r_" + uuid.uuid4().hex[:16]
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    yield urlunsplit(urlsplit(pg_admin_dsn)._replace(path="/" + name))
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()


async def _filled(store: Store) -> str:
    """An account with a webhook URL and a notification channel; returns its token."""
    account, token = await store.create_account("acme", webhook_url="https://hooks.example/S")
    await store.create_channel(account.id, name="ops", url="json://u:chan-pass@hooks.example/x",
                               events=["downtime"], monitor_ids=None, is_enabled=True)
    return token


async def test_a_database_url_is_backed_up_and_restored_into_an_empty_database(
    store: Store, db_dsn: str, empty_dsn: str, tmp_path: Path
) -> None:
    token = await _filled(store)
    backup = tmp_path / "db.upwatch"
    done = upwatch("backup", str(backup), dsn=db_dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Using database ")
    assert "1 account, 0 monitors, 1 notification channel" in done.stdout
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600

    # Into the database it came from (not empty): refused, nothing touched.
    refused = upwatch("restore", str(backup), dsn=db_dsn)
    assert refused.returncode == 1 and "not empty" in refused.stderr, refused.stderr
    assert len(await fetch(db_dsn, "SELECT id FROM accounts")) == 1

    # Into an empty database, with another key: refused naming both keys' fingerprints.
    other = Fernet.generate_key().decode()
    wrong = upwatch("restore", str(backup), dsn=empty_dsn, env={"UPWATCH_SECRET_KEY": other})
    assert wrong.returncode == 1, wrong.stderr
    assert wrong.stderr.count("fingerprint sha256:") == 1 and "another one (sha256:" in \
        wrong.stderr
    assert await fetch(empty_dsn, "SELECT 1 FROM pg_tables WHERE schemaname = 'public'") == []

    # With the installation's key: restored, and the sealed secrets read back.
    ok = upwatch("restore", str(backup), dsn=empty_dsn)
    assert ok.returncode == 0, ok.stderr
    restored = await Store.connect(empty_dsn, min_size=1, max_size=2)
    try:
        account = await restored.authenticate(token)
        assert account is not None and account.webhook_url == "https://hooks.example/S"
        [row] = await fetch(empty_dsn, "SELECT url FROM notification_channels")
        assert restored.secrets.decrypt(row["url"]) == "json://u:chan-pass@hooks.example/x"
    finally:
        await restored.close()


async def test_a_backup_made_with_another_key_warns_and_its_restore_tries_the_dump(
    store: Store, db_dsn: str, empty_dsn: str, tmp_path: Path
) -> None:
    """A backup run with a key that is not the service's cannot name the key its secrets
    need: it says so, and a restore then tries the key on a sealed value of the dump itself,
    before anything is created."""
    token = await _filled(store)
    backup = tmp_path / "db.upwatch"
    other = Fernet.generate_key().decode()
    done = upwatch("backup", str(backup), dsn=db_dsn, env={"UPWATCH_SECRET_KEY": other})
    assert done.returncode == 0, done.stderr
    assert "warning" in done.stderr and "does not decrypt this database's secrets" in \
        done.stderr

    wrong = upwatch("restore", str(backup), dsn=empty_dsn, env={"UPWATCH_SECRET_KEY": other})
    assert wrong.returncode == 1, wrong.stderr
    assert "does not decrypt this backup's sealed secrets" in wrong.stderr
    assert await fetch(empty_dsn, "SELECT 1 FROM pg_tables WHERE schemaname = 'public'") == []

    ok = upwatch("restore", str(backup), dsn=empty_dsn)  # the installation's key
    assert ok.returncode == 0, ok.stderr
    restored = await Store.connect(empty_dsn, min_size=1, max_size=2)
    try:
        account = await restored.authenticate(token)
        assert account is not None and account.webhook_url == "https://hooks.example/S"
    finally:
        await restored.close()


async def test_files_that_are_no_backup_or_too_new_are_refused(
    store: Store, db_dsn: str, empty_dsn: str, tmp_path: Path
) -> None:
    await _filled(store)
    junk = tmp_path / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 100)
    for path, words in ((junk, "is not an Upwatch backup"), (tmp_path / "missing", "no file")):
        done = upwatch("restore", str(path), dsn=empty_dsn)
        assert done.returncode == 1 and words in done.stderr, done.stderr

    backup = tmp_path / "db.upwatch"
    assert upwatch("backup", str(backup), dsn=db_dsn).returncode == 0
    # The same backup as a newer Upwatch would have written it.
    newer = tmp_path / "newer.upwatch"
    with tarfile.open(backup) as src, tarfile.open(newer, "w") as dst:
        for member in src.getmembers():
            data = src.extractfile(member)
            assert data is not None
            body = data.read()
            if member.name == "upwatch-backup.json":
                header = orjson.loads(body)
                header["schema_version"] = 9999
                body = orjson.dumps(header)
                member.size = len(body)
            dst.addfile(member, io.BytesIO(body))
    done = upwatch("restore", str(newer), dsn=empty_dsn)
    assert done.returncode == 1 and "newer than this Upwatch knows" in done.stderr, done.stderr
    assert await fetch(empty_dsn, "SELECT 1 FROM pg_tables WHERE schemaname = 'public'") == []


def test_backup_needs_a_database_and_a_file(tmp_path: Path) -> None:
    data = tmp_path / "none"
    done = upwatch("backup", str(tmp_path / "x.upwatch"), env={"UPWATCH_DATA_DIR": str(data)})
    assert done.returncode == 1 and "no Upwatch database" in done.stderr, done.stderr
    assert not data.exists() and not (tmp_path / "x.upwatch").exists()
    assert upwatch("backup").returncode == 2
    assert upwatch("restore").returncode == 2
