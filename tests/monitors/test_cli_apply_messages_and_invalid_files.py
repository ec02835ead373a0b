"""What ``upwatch apply`` and ``upwatch export`` say, run as real processes: counts in
English number, and a file that cannot be read as a monitors file (not UTF-8, nested too
deeply, too large) is one line naming the file, exit status 1, nothing applied."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.db.store import Store
from engine.monitors.file import MAX_FILE_BYTES
from tests.support.cli import upwatch

ALLOW = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "true"}
DENY = {"UPWATCH_ALLOW_PRIVATE_TARGETS": "false"}
A = '[[monitors]]\nurl = "https://a.example/"\n'
B = '[[monitors]]\nurl = "https://b.example/"\n'
DEPTH = 400


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


def _one_line_exit_1(res: object, path: Path, start: str) -> None:
    stderr: str = res.stderr  # type: ignore[attr-defined]
    assert res.returncode == 1, stderr  # type: ignore[attr-defined]
    assert "Traceback" not in stderr
    assert stderr.count("\n") == 1 and stderr.startswith(f"{path}: {start}"), stderr
    assert stderr.endswith(" Nothing was applied.\n")


async def test_a_file_that_is_not_utf8_is_invalid(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "latin1.toml"
    path.write_bytes(A.encode() + 'alias = "Café"\n'.encode("latin-1"))
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    _one_line_exit_1(res, path, "Not UTF-8 text: byte 0xe9 on line 3")
    assert await store.monitor_set(account.id) == []


@pytest.mark.parametrize("nested", [
    pytest.param(A + "alias = " + "{a = " * DEPTH + "1" + "}" * DEPTH + "\n", id="inline"),
    pytest.param(A + "alias = " + "[" * DEPTH + "]" * DEPTH + "\n", id="array"),
    pytest.param(A + "[monitors.uptime." + ".".join(["a"] * DEPTH) + "]\nb = 1\n",
                 id="tables"),
    pytest.param(A + "[monitors.uptime]\n" + ".".join(["a"] * DEPTH) + " = 1\n",
                 id="dotted-key"),
    # Deep enough that the parser itself gives up (RecursionError).
    pytest.param(A + "alias = " + "{a = " * 100 * DEPTH + "1" + "}" * 100 * DEPTH + "\n",
                 id="inline-40000"),
])
async def test_a_file_nested_400_deep_is_one_line_and_no_traceback(
    db_dsn: str, store: Store, tmp_path: Path, nested: str,
) -> None:
    account, _ = await store.create_account("ops")
    path = tmp_path / "deep.toml"
    path.write_text(nested)
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    _one_line_exit_1(res, path, "Not a monitors file: its values are nested too deeply.")
    assert await store.monitor_set(account.id) == []


async def test_a_file_over_the_size_limit_is_invalid(
    db_dsn: str, store: Store, tmp_path: Path,
) -> None:
    await store.create_account("ops")
    path = tmp_path / "huge.toml"
    with path.open("w") as f:
        f.write(A)
        f.write(("# " + "x" * 1022 + "\n") * (MAX_FILE_BYTES // 1024 + 1))
    res = upwatch("apply", str(path), dsn=db_dsn, env=ALLOW)
    _one_line_exit_1(res, path, f"The file is larger than {MAX_FILE_BYTES // 2**20} MiB.")
