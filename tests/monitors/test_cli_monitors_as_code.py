"""``upwatch export`` and ``upwatch apply`` run as real processes against the test database:
exit statuses, errors with their lines, the dry-run plan and the progress bar."""

from __future__ import annotations

import tomllib
from pathlib import Path

from engine.db.store import Store
from tests.support.cli import upwatch

# Tests reach no resolver: names are allowed as they are, and the private-address rule is
# shown with IP literals only.
ALLOW = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"}

GOOD = """\
# two sites
[[monitors]]
key = "shop"
url = "https://shop.example.com/"
alias = "Shop"

[monitors.uptime]
interval = 60
notification_threshold = 300

[monitors.certificate_health]
expiry_threshold_days = 14

[[monitors]]
url = "https://blog.example.com/"
"""

BAD = """\
[[monitors]]
url = "https://a.example/"

[[monitors]]
url = "https://a.example/"
colour = "red"

[monitors.uptime]
interval = 45

[[monitors]]
url = "https://127.0.0.1/admin"
"""


async def test_apply_export_and_dry_run(db_dsn: str, store: Store, tmp_path: Path) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "monitors.toml"
    path.write_text(GOOD)
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert "2 monitors were created, 0 were updated, 0 were deleted, 0 were unchanged" in (
        res.stdout)
    monitors = await store.monitor_set(account.id)
    assert [(m.spec.key, m.spec.url, m.spec.checks["uptime"].interval) for m in monitors] == [
        ("shop", "https://shop.example.com/", 60), (None, "https://blog.example.com/", 30)]

    out = tmp_path / "export.toml"
    res = upwatch("export", "--account", str(account.id), str(out), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith("Using database ")  # named, never the password
    exported = tomllib.loads(out.read_text())
    assert [m["url"] for m in exported["monitors"]] == [
        "https://shop.example.com/", "https://blog.example.com/"]
    assert exported["monitors"][0]["certificate_health"]["expiry_threshold_days"] == 14

    # Drop the blog, change the shop's alias: the plan, one line each, and nothing changes.
    path.write_text(GOOD.replace('"Shop"', '"The shop"').split("[[monitors]]\nurl")[0])
    res = upwatch("apply", str(path), "--prune", "--dry-run", dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[0].startswith("Using database ")
    assert res.stdout.splitlines()[1:3] == [
        f"update  shop (https://shop.example.com/) (monitor {monitors[0].id}): alias",
        f"delete  https://blog.example.com/ (monitor {monitors[1].id})"]
    assert await store.monitor_set(account.id) == monitors


async def test_an_invalid_file_lists_every_error_with_its_line_and_applies_nothing(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    res = upwatch("apply", str(path), "--account", str(account.id), dsn=db_dsn,
                  env={"UPWATCH_ALLOW_PRIVATE_TARGETS": "false"})
    assert res.returncode == 1, res.stderr
    lines = res.stderr.splitlines()
    assert lines[0].startswith(f"{path}:5: monitors[1] (https://a.example/): url: The url")
    assert "already named by monitors[0]" in lines[0]
    assert lines[1].startswith(f"{path}:6: monitors[1] (https://a.example/): colour: Unknown key")
    assert lines[2].startswith(f"{path}:9: monitors[1] (https://a.example/): uptime.interval:"
                               " The interval must be one of")
    assert len(lines) == 4 and lines[3] == (
        f"upwatch apply: {path} is not valid: 3 errors in the monitors file. Nothing was"
        " applied.")
    assert await store.monitor_set(account.id) == []

    # Valid otherwise, but a loopback address where private targets are not allowed.
    path.write_text('[[monitors]]\nurl = "https://8.8.8.8/"\n\n'
                    '[[monitors]]\nalias = "admin"\nurl = "https://127.0.0.1/admin"\n')
    res = upwatch("apply", str(path), dsn=db_dsn, env={"UPWATCH_ALLOW_PRIVATE_TARGETS": "false"})
    assert res.returncode == 1
    assert res.stderr.splitlines()[0] == (
        f"{path}:6: monitors[1] (https://127.0.0.1/admin): url: The url host resolves to a"
        " non-public address; private targets are not allowed"
        " (UPWATCH_ALLOW_PRIVATE_TARGETS=true allows them).")
    assert await store.monitor_set(account.id) == []

    path.write_text('[[monitors]]\nurl = "https://a.example/\n')
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 1 and "line 2" in res.stderr


async def test_bad_usage_is_exit_status_2(db_dsn: str, store: Store, tmp_path: Path) -> None:
    res = upwatch("apply", str(tmp_path / "missing.toml"), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 2 and "cannot read" in res.stderr
    path = tmp_path / "m.toml"
    path.write_text(GOOD)
    await store.create_account("one")
    await store.create_account("two")
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 2 and "--account is required" in res.stderr
    res = upwatch("apply", str(path), "--account", "999999", dsn=db_dsn, env=ALLOW)
    assert res.returncode == 2 and "no account with id 999999" in res.stderr
    res = upwatch("apply", dsn=db_dsn, env=ALLOW)
    assert res.returncode == 2  # argparse: FILE is required


async def test_a_large_apply_shows_progress(db_dsn: str, store: Store, tmp_path: Path) -> None:
    account, _ = await store.create_account("big")
    path = tmp_path / "big.toml"
    path.write_text("".join(f'[[monitors]]\nurl = "https://h{i}.example/"\n\n'
                            for i in range(1200)))
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert "writing: 0% (0/1,200)" in res.stderr
    assert "writing: 100% (1,200/1,200)" in res.stderr
    assert len(await store.monitor_set(account.id)) == 1200
    small = tmp_path / "small.toml"
    small.write_text(GOOD)
    res = upwatch("apply", str(small), "--account", str(account.id), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0 and res.stderr == ""  # no bar for a small file
