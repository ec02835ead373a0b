"""The embedded server's fallback socket directory (``/tmp/upwatch-pg-<hash>``, for data paths
too long for a Unix socket) has a name anyone can predict. It is made fresh with mode 0700,
or, when it exists, used only if it is a real directory of the server's user with mode
0700; anything else is refused with a clear error and left as it was: never used. As root
(the server runs as ``embedded_postgres``) and as an ordinary user."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.db.embedded import EmbeddedPostgres, UnsafeSocketDirectory, private_directory

NOBODY = pwd.getpwnam("nobody")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def spot() -> Iterator[Path]:
    """A path in the sticky, world-writable temp dir, as the socket directory is."""
    base = Path(tempfile.mkdtemp(prefix="upwatch-sockdir-"))
    base.chmod(0o1777)
    yield base / "sock"
    shutil.rmtree(base, ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_fresh_directory_is_made_private_to_the_server_user(spot: Path) -> None:
    # As root, for the server's own user (here: nobody); otherwise for oneself.
    uid, gid = ((NOBODY.pw_uid, NOBODY.pw_gid) if os.geteuid() == 0
                else (os.geteuid(), os.getegid()))
    old = os.umask(0)  # whatever the umask: 0700
    try:
        private_directory(spot, uid, gid)
    finally:
        os.umask(old)
    st = os.lstat(spot)
    assert stat.S_ISDIR(st.st_mode) and _mode(spot) == 0o700
    assert (st.st_uid, st.st_gid) == (uid, gid)
    private_directory(spot, uid, gid)  # and accepted as it is


@pytest.mark.parametrize("case", ["mode 0777", "mode 0750", "another owner", "a symlink",
                                  "a file"])
def test_a_directory_someone_else_could_control_is_refused_and_left_alone(
    spot: Path, case: str
) -> None:
    uid = os.geteuid()
    if case.startswith("mode"):
        spot.mkdir()
        spot.chmod(int(case.split()[1], 8))
    elif case == "another owner":
        if os.geteuid() != 0:
            pytest.skip("needs root to make a directory of another owner")
        spot.mkdir(mode=0o700)
        os.chown(spot, NOBODY.pw_uid, NOBODY.pw_gid)
    elif case == "a symlink":
        target = spot.with_name("elsewhere")
        target.mkdir(mode=0o700)
        spot.symlink_to(target)
    else:
        spot.write_text("")
    before = os.lstat(spot)
    with pytest.raises(UnsafeSocketDirectory, match=f"socket directory {spot}: "):
        private_directory(spot, uid, os.getegid())
    after = os.lstat(spot)
    assert (after.st_mode, after.st_uid, after.st_ino) == \
        (before.st_mode, before.st_uid, before.st_ino)


def test_the_same_rules_hold_for_an_ordinary_user(spot: Path) -> None:
    """``private_directory`` run by ``nobody``: a directory root made (0700) or one of its
    own that is 0777 is refused; a fresh one is made 0700."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user")
    python = next((p for p in (sys.executable, "/usr/bin/python3")
                   if _runs_as_nobody(p)), None)
    if python is None:
        pytest.skip("no Python interpreter the nobody user may run with this checkout")
    script = ("import os, sys; from pathlib import Path; "
              "from engine.db.embedded import private_directory, UnsafeSocketDirectory\n"
              "try:\n private_directory(Path(sys.argv[1]), os.geteuid(), os.getegid())\n"
              "except UnsafeSocketDirectory as e:\n print(e); sys.exit(3)\n")

    def as_nobody() -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-c", script, str(spot)], user="nobody", cwd="/",
                              env={"PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=60, check=False)

    spot.mkdir(mode=0o700)  # root's
    res = as_nobody()
    assert res.returncode == 3 and "owned by uid 0" in res.stdout, res
    spot.rmdir()
    spot.mkdir()
    spot.chmod(0o777)
    os.chown(spot, NOBODY.pw_uid, NOBODY.pw_gid)
    res = as_nobody()
    assert res.returncode == 3 and "mode is 0777" in res.stdout, res
    assert _mode(spot) == 0o777
    spot.rmdir()
    res = as_nobody()
    assert res.returncode == 0, res
    assert _mode(spot) == 0o700 and os.lstat(spot).st_uid == NOBODY.pw_uid


def _runs_as_nobody(python: str) -> bool:
    try:
        res = subprocess.run([python, "-c", "import engine.db.embedded"], user="nobody",
                             cwd="/", env={"PYTHONPATH": str(REPO)}, capture_output=True,
                             timeout=60, check=False)
    except OSError:
        return False
    return res.returncode == 0


@pytest.fixture
def long_data_dir() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="upwatch-longpath-"))
    data = root / ("a-data-directory-path-too-long-for-a-unix-socket-" * 2) / "data"
    server = EmbeddedPostgres(data / "pg")
    assert server.socket_dir != server.pgdata  # the fallback is in play
    yield data
    if server.running():
        server.stop(mode="immediate")
    shutil.rmtree(server.socket_dir, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)


def _upwatch(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    env["UPWATCH_DATA_DIR"] = str(data)
    return subprocess.run([sys.executable, "-m", "engine", *args], env=env,
                          capture_output=True, text=True, timeout=180, check=False)


def _server_uid() -> int:
    if os.geteuid() == 0:
        return pwd.getpwnam("embedded_postgres").pw_uid
    return os.geteuid()


def test_a_command_on_a_long_data_path_refuses_a_planted_directory_and_uses_a_fresh_one(
    long_data_dir: Path,
) -> None:
    server = EmbeddedPostgres(long_data_dir / "pg")
    sock = server.socket_dir
    shutil.rmtree(sock, ignore_errors=True)
    uid = _server_uid()
    planted = [
        # (mode, owner, what the error says)
        (0o777, uid, "its mode is 0777, not 0700"),
        (0o700, NOBODY.pw_uid if uid != NOBODY.pw_uid else 0,
         "it is owned by uid "),
    ]
    for mode, owner, says in planted:
        if owner != os.geteuid() and os.geteuid() != 0:
            continue  # an ordinary user cannot plant another's directory
        sock.mkdir()
        sock.chmod(mode)
        os.chown(sock, owner, -1)
        # migrate: the command that creates the database where there is none.
        res = _upwatch(long_data_dir, "migrate")
        assert res.returncode == 1
        (line,) = res.stderr.strip().splitlines()
        assert line.startswith(
            f"upwatch: refusing the embedded PostgreSQL socket directory {sock}: {says}")
        assert "Another local user may have made it" in line and "remove it" in line
        # Never used, never changed.
        assert list(sock.iterdir()) == [] and _mode(sock) == mode
        assert os.lstat(sock).st_uid == owner
        assert not server.running()
        sock.rmdir()

    # Gone: the command makes it afresh, private to the server's user, and works.
    res = _upwatch(long_data_dir, "migrate")
    assert res.returncode == 0, res.stderr
    assert _mode(sock) == 0o700 and os.lstat(sock).st_uid == uid
    assert not server.running()  # the command started the server, and stopped it
    res = _upwatch(long_data_dir, "status")
    assert res.returncode == 0, res.stderr
