"""What ``upwatch apply`` and ``upwatch export`` say, run as real processes: counts in
English number."""

from __future__ import annotations

from pathlib import Path

from engine.db.store import Store
from tests.support.cli import upwatch

ALLOW = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"}
DENY = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "false"}
A = '[[monitors]]\nurl = "https://a.example/"\n'
B = '[[monitors]]\nurl = "https://b.example/"\n'


def _summary(stdout: str) -> str:
    return stdout.splitlines()[-1].split(": ", 1)[1]


async def test_counts_are_in_english_number(db_dsn: str, store: Store, tmp_path: Path) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "monitors.toml"
    path.write_text(A + "\n" + B)
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert res.returncode == 0, res.stderr
    assert _summary(res.stdout) == (
        "2 monitors were created, 0 were updated, 0 were deleted, 0 were unchanged.")

    path.write_text(A + 'alias = "A"\n')
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert _summary(res.stdout) == (
        "0 monitors were created, 1 was updated, 0 were deleted, 0 were unchanged,"
        " 1 not in the file was kept (--prune deletes it).")

    path.write_text(A + 'alias = "A"\n\n[[monitors]]\nurl = "https://c.example/"\n')
    res = upwatch("apply", str(path), "--prune", "--dry-run", dsn=db_dsn, env=ALLOW)
    assert _summary(res.stdout) == (
        "1 monitor would be created, 0 would be updated, 1 would be deleted,"
        " 1 would be unchanged.")
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    assert _summary(res.stdout) == (
        "1 monitor was created, 0 were updated, 0 were deleted, 1 was unchanged,"
        " 1 not in the file was kept (--prune deletes it).")
    path.write_text(A + 'alias = "A"\n')
    res = upwatch("apply", str(path), "--prune", dsn=db_dsn, env=ALLOW)
    assert _summary(res.stdout) == (
        "0 monitors were created, 0 were updated, 2 were deleted, 1 was unchanged.")

    res = upwatch("export", str(tmp_path / "out.toml"), dsn=db_dsn, env=ALLOW)
    assert res.stderr == f"Exported 1 monitor of account {account.id} to {tmp_path}/out.toml.\n"

    for n, noun in ((1, "1 monitor URL is"), (2, "2 monitor URLs are")):
        path.write_text("".join(f'[[monitors]]\nurl = "https://127.0.0.{i}/"\n'
                                for i in range(1, n + 1)))
        res = upwatch("apply", str(path), dsn=db_dsn, env=DENY)
        assert res.returncode == 1
        assert res.stderr.splitlines()[-1] == (
            f"upwatch apply: {path} is not valid: {noun} not allowed. Nothing was applied.")
    assert len(await store.monitor_set(account.id)) == 1

