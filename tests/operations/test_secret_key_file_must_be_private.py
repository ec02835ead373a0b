"""A secret key file that its group or others may read is refused, saying how to fix it: the
key beside a database dump decrypts every secret in it."""

from __future__ import annotations

import os
from pathlib import Path

from cryptography.fernet import Fernet

from tests.support.cli import upwatch


def _key_file(path: Path, mode: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(Fernet.generate_key() + b"\n")
    os.chmod(path, mode)
    return path


def test_a_readable_key_in_the_data_directory_stops_every_command(tmp_path: Path) -> None:
    key = _key_file(tmp_path / "data" / "secret.key", 0o644)
    env = {"UPWATCH_DATA_DIR": str(tmp_path / "data")}
    for args in (["status"], ["run"], ["migrate"]):
        res = upwatch(*args, env=env, unset=("UPWATCH_SECRET_KEY",), cwd=tmp_path)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.strip().splitlines() == [
            f"upwatch: the secret key file {key} has mode 0644: others may read the key that "
            f"decrypts every stored secret; run: chmod 600 {key}"
        ], args
    assert not (tmp_path / "data" / "pg").exists()  # refused before anything started
    os.chmod(key, 0o640)
    res = upwatch("status", env=env, unset=("UPWATCH_SECRET_KEY",), cwd=tmp_path)
    assert res.returncode == 2 and "mode 0640" in res.stderr
    os.chmod(key, 0o600)  # fixed: on to the next question (there is no database here)
    res = upwatch("status", env=env, unset=("UPWATCH_SECRET_KEY",), cwd=tmp_path)
    assert res.returncode == 1 and "no Upwatch database" in res.stderr


def test_a_readable_key_file_named_by_the_environment_is_refused_unless_a_credential(
    tmp_path: Path, db_dsn: str
) -> None:
    key = _key_file(tmp_path / "cred" / "secret_key", 0o644)
    res = upwatch("account", "list", dsn=db_dsn, env={"UPWATCH_SECRET_KEY_FILE": str(key)},
                  unset=("UPWATCH_SECRET_KEY",))
    assert res.returncode == 2 and f"chmod 600 {key}" in res.stderr, res.stderr
    # A systemd credential is 0440 with an ACL by design, in a directory only the service
    # reaches: read without a variable, and accepted.
    res = upwatch("account", "list", dsn=db_dsn, env={"CREDENTIALS_DIRECTORY": str(key.parent)},
                  unset=("UPWATCH_SECRET_KEY",))
    assert res.returncode == 0, res.stderr
