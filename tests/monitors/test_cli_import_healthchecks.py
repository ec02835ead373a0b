"""``upwatch import healthchecks`` run as a real process against the test database: the
dry run changes nothing, the import creates heartbeats that keep their uuids, a ping by the
kept uuid answers 200 and is stored, a second import updates nothing twice, and a file that
is not a v3 check list is exit status 1 naming it."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import orjson

from engine.db.store import Store
from tests.monitors.test_healthchecks_import_maps_checks import CRON, SIMPLE, check
from tests.support.cli import upwatch


async def test_import_keeps_uuids_and_pings_by_them_answer_200(
    db_dsn: str, store: Store, api: str, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "checks.json"
    path.write_bytes(orjson.dumps({"checks": [
        check(tags="prod"),
        check(name="Database Backup", slug="database-backup", uuid=CRON, timeout=...,
              schedule="15 5 * * *", tz="Europe/Riga", grace=1200, status="paused"),
        check(name="Read-only", uuid=...),
    ]}))

    res = upwatch("import", "healthchecks", str(path), "--dry-run", dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("Using database ")
    assert lines[1] == (f"would create Filesystem Backup ({SIMPLE}): every 3600 s, "
                        "grace 600 s")
    assert lines[2].startswith(f"would create Database Backup ({CRON}): schedule '15 5 * * *'")
    assert lines[3].startswith("skipped  Read-only: no uuid")
    assert lines[4] == (f"not kept Filesystem Backup ({SIMPLE}): tags 'prod': tags are "
                        "not kept")
    assert lines[5] == ("checks.json -> account 1: 2 heartbeats planned, 1 check skipped, "
                        "1 setting not kept.").replace("account 1", f"account {account.id}")
    assert await store.heartbeat_set(account.id) == []

    res = upwatch("import", "healthchecks", str(path), dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    assert f"created Filesystem Backup ({SIMPLE}): every 3600 s, grace 600 s" in res.stdout
    beats = await store.heartbeat_set(account.id)
    assert [(b.ping_uuid, b.alias, b.enabled, b.slug) for b in beats] == [
        (SIMPLE, "Filesystem Backup", True, "filesystem-backup"),
        (CRON, "Database Backup", False, "database-backup")]

    async with aiohttp.ClientSession(base_url=api) as anon:
        async with anon.post(f"/ping/{SIMPLE}", data=b"backup done") as r:
            assert r.status == 200
            assert (await r.text()).strip() == "OK"
    async with store.pool.acquire() as conn:
        stored = await conn.fetch(
            "SELECT p.kind, p.body FROM heartbeat_pings p JOIN heartbeats h"
            " ON h.check_id = p.check_id WHERE h.ping_uuid = $1", SIMPLE)
    assert [(r["kind"], r["body"]) for r in stored] == [("success", "backup done")]

    # Again, with a grace changed in Healthchecks: an update by uuid, no second heartbeat.
    path.write_bytes(orjson.dumps({"checks": [check(grace=900)]}))
    res = upwatch("import", "healthchecks", str(path), dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    assert f"updated Filesystem Backup ({SIMPLE}): every 3600 s, grace 900 s" in res.stdout
    beats = await store.heartbeat_set(account.id)
    assert [(b.ping_uuid, b.config.grace_s) for b in beats] == [(SIMPLE, 900), (CRON, 1200)]

    # Another account cannot take the same ping ids: listed, nothing made.
    other, _ = await store.create_account("other")
    res = upwatch("import", "healthchecks", str(path), "--account", str(other.id), dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    assert (f"skipped  Filesystem Backup ({SIMPLE}): another account holds this ping id"
            in res.stdout)
    assert "0 heartbeats imported, 1 check skipped" in res.stdout
    assert await store.heartbeat_set(other.id) == []


async def test_a_file_that_is_not_a_check_list_imports_nothing(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "checks.json"
    path.write_text('{"checks": ')
    res = upwatch("import", "healthchecks", str(path), dsn=db_dsn)
    assert res.returncode == 1
    assert res.stderr.startswith(f"{path}: It is not JSON")
    assert "Nothing was imported." in res.stderr
    res = upwatch("import", "healthchecks", str(tmp_path / "missing.json"), dsn=db_dsn)
    assert res.returncode == 2 and "cannot read" in res.stderr
    assert await store.heartbeat_set(account.id) == []


async def test_the_monitor_limit_stops_the_import_before_anything_is_made(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "checks.json"
    path.write_bytes(orjson.dumps([check(), check(name="b", uuid=CRON)]))
    settings = tmp_path / "upwatch.toml"
    settings.write_text("[plans.default]\nmonitor_limit = 1\n")
    res = upwatch("import", "healthchecks", str(path), "--config", str(settings), dsn=db_dsn)
    assert res.returncode == 1, res.stdout
    assert "limit of 1 monitors" in res.stderr and "Nothing was imported." in res.stderr
    assert await store.heartbeat_set(account.id) == []
