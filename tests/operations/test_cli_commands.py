"""The upwatch command line, run as a real process against the test database."""

import orjson
import pytest

from engine.db.store import Store
from tests.support.cli import upwatch
from tests.support.engine_support import add_monitor


async def test_account_create_json_then_list_and_token_works(db_dsn: str, store: Store) -> None:
    res = upwatch("account", "create", "--name", "Acme Ltd", "--json", dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    created = orjson.loads(res.stdout)
    assert set(created) == {"id", "name", "token"} and created["name"] == "Acme Ltd"
    account = await store.authenticate(created["token"])
    assert account is not None and account.id == created["id"]

    res = upwatch("account", "list", "--json", dsn=db_dsn)
    assert res.returncode == 0
    rows = [orjson.loads(line) for line in res.stdout.splitlines()]
    assert [r["name"] for r in rows] == ["Acme Ltd"]
    assert rows[0]["monitors"] == 0 and rows[0]["plan"] == "default"
    assert created["token"] not in res.stdout + res.stderr  # tokens are never listed


async def test_rotate_token_replaces_the_old_one(db_dsn: str, store: Store) -> None:
    account, old = await store.create_account("x")
    res = upwatch("account", "rotate-token", str(account.id), "--json", dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    new = orjson.loads(res.stdout)["token"]
    assert await store.authenticate(old) is None
    assert (await store.authenticate(new)).id == account.id  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (["account", "create", "--name", "x", "--plan", "gold"], "--plan: unknown plan"),
        (["account", "create", "--name", "x", "--webhook-url", "ftp://x"], "webhook_url"),
    ],
)
def test_bad_account_arguments_are_one_clear_line(
    db_dsn: str, args: list[str], expect: str
) -> None:
    res = upwatch(*args, dsn=db_dsn)
    assert res.returncode != 0
    assert expect in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_a_bad_setting_stops_start_up_with_one_line_naming_it() -> None:
    res = upwatch("run", env={"UPWATCH_PORT": "eighty"})
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        "upwatch: invalid setting UPWATCH_PORT: Input should be a valid integer, "
        "unable to parse string as an integer"
    ]
    res = upwatch("run", env={"UPWATCH_TIME_SCALE": "-1"})
    assert res.returncode == 2 and "UPWATCH_TIME_SCALE" in res.stderr


async def test_status_and_nodes_tables(db_dsn: str, store: Store) -> None:
    account, _ = await store.create_account("ops")
    await store.register_node("eu-1", "eu", "http://127.0.0.1:1", "1")
    res = upwatch("status", "--account", str(account.id), dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    assert f"Account {account.id} (ops): 0 monitors" in res.stdout.splitlines()
    assert any(line.startswith("Monitor URL schemes: http, https")
               for line in (res.stdout + res.stderr).splitlines())
    await add_monitor(store, account.id, "https://shop.example/")
    res = upwatch("status", "--account", str(account.id), dsn=db_dsn)
    assert f"Account {account.id} (ops): 1 monitor" in res.stdout.splitlines()
    # Its heartbeat again: two commands may have outlasted its liveness on a busy machine.
    assert await store.heartbeat("eu-1", None)
    res = upwatch("nodes", "--json", dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    node = orjson.loads(res.stdout.splitlines()[0])
    assert node["id"] == "eu-1" and node["live"] is True


def test_migrate_is_idempotent(db_dsn: str) -> None:
    res = upwatch("migrate", dsn=db_dsn)
    assert res.returncode == 0 and "up to date" in res.stdout


@pytest.mark.parametrize("command", [("run",), ("status",), ("migrate",)])
def test_a_database_nobody_answers_is_one_line(command: tuple[str, ...]) -> None:
    # Port 1 on loopback: nothing listens there.
    res = upwatch(*command, dsn="postgresql://ops:hunter2secret@127.0.0.1:1/upwatch")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "hunter2secret" not in res.stderr + res.stdout
    [why] = [line for line in res.stderr.splitlines() if line.startswith("upwatch:")]
    assert why.startswith("upwatch: cannot connect to database upwatch on 127.0.0.1:1 as ops")
    assert "Connection refused" in why
