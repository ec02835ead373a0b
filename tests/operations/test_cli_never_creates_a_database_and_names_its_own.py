"""Admin commands use the database they are pointed at and say which; where there is none they
exit 1 naming the directory and ``UPWATCH_DATA_DIR``, and create nothing."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import orjson
import pytest

from engine.db.store import Store
from tests.support.cli import upwatch

COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["account", "list"],
    ["account", "create", "--name", "x", "--json"],
    ["account", "rotate-token", "1"],
    ["nodes"],
    ["export"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_a_command_run_where_there_is_no_database_says_so_and_creates_nothing(
    tmp_path: Path, args: list[str]
) -> None:
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    res = upwatch(*args, cwd=elsewhere)
    assert res.returncode == 1, res.stdout + res.stderr
    error = res.stderr.strip().splitlines()[-1]
    assert str(elsewhere / ".upwatch") in error and "UPWATCH_DATA_DIR" in error, error
    assert "Traceback" not in res.stderr
    assert list(elsewhere.iterdir()) == []  # no data directory, no database, no key

    # The same with the data directory named but missing: still nothing made.
    named = tmp_path / "typo"
    res = upwatch(*args, cwd=elsewhere, env={"UPWATCH_DATA_DIR": str(named)})
    assert res.returncode == 1 and str(named) in res.stderr
    assert not named.exists() and list(elsewhere.iterdir()) == []


def _with_password(dsn: str, password: str) -> str:
    parts = urlsplit(dsn)
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user or 'postgres'}:{password}@{host}"))


async def test_commands_name_the_database_they_used_without_its_password(
    db_dsn: str, store: Store, tmp_path: Path
) -> None:
    # The test server trusts local connections: the password is there only to be hidden.
    dsn = _with_password(db_dsn, "hunter2-secret")
    database = urlsplit(db_dsn).path.lstrip("/")
    await store.create_account("ops")
    res = upwatch("status", dsn=dsn, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    first, second = res.stdout.splitlines()[:2]
    assert first.startswith(f"Using database {database} on ") and "UPWATCH_DATABASE_URL" in first
    assert second == "Settings files: none (environment and defaults)"
    for args in (["account", "list"], ["nodes"], ["migrate"]):
        res = upwatch(*args, dsn=dsn, cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert res.stdout.splitlines()[0] == first, args
    # JSON stays JSON on stdout; the database is named on stderr.
    res = upwatch("account", "list", "--json", dsn=dsn, cwd=tmp_path)
    assert res.returncode == 0 and orjson.loads(res.stdout.splitlines()[0])["name"] == "ops"
    assert res.stderr.splitlines()[0] == first
    everything = "".join(
        upwatch(*a, dsn=dsn, cwd=tmp_path).stdout for a in (["status"], ["account", "list"])
    )
    assert "hunter2" not in everything
