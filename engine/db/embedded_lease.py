"""Sharing the embedded PostgreSQL between the ``upwatch`` processes of one data directory.

An operator runs ``upwatch run`` and, beside it, ``upwatch status`` or ``account
rotate-token``: all of them use the one server in ``<data_dir>/pg``. Who may stop it is
decided by two ``flock`` locks in the data directory:

- ``embedded-pg.users``: every process using the server holds it SHARED for as long as it
  does. A process leaving is the last user when it can take it EXCLUSIVE (without waiting).
- ``embedded-pg.control``: held EXCLUSIVE while a process starts the server, checks it,
  or leaves (the last-user test and the stop). So a process arriving never meets one that
  is stopping the server under it, and two never start it at once.

At exit the last user stops the server if it is the service (``upwatch run`` owns the
server's life) or if it started the server itself. An admin command never stops a server
it did not start, and never one another process still uses; when the service, or a command
that started the server, leaves while others still use it, it leaves a hand-over mark so
that the last of them stops it (otherwise two overlapping commands would leave it running
for good).
A server found running with nobody's mark (started by hand, or left by a killed service)
is left running by commands, and reused.

``service_lock`` is the rule that one ``upwatch run`` serves a data directory: the second
is refused at once, naming the first's pid.

Locks die with their process, so a killed process never blocks the others.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from engine.db.embedded import EmbeddedPostgres
from engine.runtime.errors import DatabaseUnavailable, UpwatchError

log = logging.getLogger(__name__)

USERS_LOCK = "embedded-pg.users"
CONTROL_LOCK = "embedded-pg.control"
HANDOVER_MARK = "embedded-pg.handover"
SERVICE_LOCK = "upwatch-run.pid"
CONTROL_WAIT_S = 120.0  # a start may take a minute (initdb on a slow disk)


class AlreadyServing(UpwatchError):
    """Another ``upwatch run`` serves this data directory."""


class NoDatabase(UpwatchError):
    """The data directory holds no embedded database (or this user cannot read it)."""


def require_database(data_dir: Path) -> None:
    """Raise :class:`NoDatabase` unless ``data_dir`` holds an initialised embedded server.
    Only looks: the admin commands call it so that none of them creates a database (or a
    data directory) where the operator meant to use an existing one."""
    where = data_dir.expanduser().resolve()
    try:
        (where / "pg" / "PG_VERSION").stat()
    except PermissionError:
        raise NoDatabase(
            f"cannot read the data directory {where} as this user: run the command as the "
            "service's user (deploy/README.md, \"Admin commands\")"
        ) from None
    except (FileNotFoundError, NotADirectoryError):
        raise NoDatabase(
            f"no Upwatch database in {where}, and this command does not create one: set "
            "UPWATCH_DATA_DIR to the service's data directory (or data_dir in a settings "
            "file), or start the service there first with `upwatch run`"
        ) from None


def _open_lock(path: Path) -> IO[str]:
    return open(path, "a+", encoding="utf-8")


def _lock_within(fh: IO[str], mode: int, timeout: float, what: str) -> None:
    """``flock`` with a deadline (a plain blocking flock could wait forever)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fh, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise DatabaseUnavailable(
                    f"timed out after {timeout:.0f} s waiting for {what}"
                ) from None
            time.sleep(0.05)


@contextlib.contextmanager
def service_lock(data_dir: Path) -> Iterator[None]:
    """Held by ``upwatch run`` for its life. Raises :class:`AlreadyServing` naming the pid of
    the ``upwatch run`` that holds it."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / SERVICE_LOCK
    fh = _open_lock(path)
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            # The holder writes its pid just after locking: give it a moment to.
            pid = ""
            deadline = time.monotonic() + 1.0
            while not pid and time.monotonic() < deadline:
                pid = path.read_text(encoding="utf-8").strip()
                if not pid:
                    time.sleep(0.02)
            who = f"pid {pid}" if pid.isdigit() else "another process"
            raise AlreadyServing(
                f"another `upwatch run` ({who}) is already serving the data directory "
                f"{data_dir.resolve()}; stop it first (admin commands may run beside it)"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        yield
    finally:
        fh.close()  # releases the lock


class EmbeddedLease:
    """One process's use of the embedded server: ``acquire`` before, ``release`` after.

    ``service`` is True for ``upwatch run``: it stops the server when it leaves last, and
    :meth:`restart_if_down` (its watch) brings the server back when it dies.
    """

    def __init__(self, data_dir: Path, server: EmbeddedPostgres, *, service: bool) -> None:
        self.data_dir, self.server, self.service = data_dir, server, service
        self._users: IO[str] | None = None

    @contextlib.contextmanager
    def _control(self) -> Iterator[None]:
        fh = _open_lock(self.data_dir / CONTROL_LOCK)
        try:
            _lock_within(fh, fcntl.LOCK_EX, CONTROL_WAIT_S, "another upwatch process "
                         "starting or stopping the embedded PostgreSQL")
            yield
        finally:
            fh.close()

    def acquire(self) -> None:
        """Start the server unless it runs, and count this process among its users."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self._control():
            users = _open_lock(self.data_dir / USERS_LOCK)
            try:
                # Nobody holds it exclusively outside the control lock, held here: at once.
                _lock_within(users, fcntl.LOCK_SH, 5.0, "the embedded PostgreSQL's users")
                self.server.start()
            except BaseException:
                users.close()
                raise
            self._users = users
            if self.server.started_here:
                (self.data_dir / HANDOVER_MARK).unlink(missing_ok=True)

    def release(self) -> None:
        """Leave; stop the server when this process is its last user and the rules above
        say it is this process's to stop."""
        users, self._users = self._users, None
        if users is None:
            return
        try:
            with self._control():
                try:
                    self._leave(users)
                finally:
                    # Before the control lock goes: whoever takes it next finds the users'
                    # lock free of this process.
                    users.close()
        finally:
            users.close()  # also when the control lock was never had

    def _leave(self, users: IO[str]) -> None:
        mark = self.data_dir / HANDOVER_MARK
        try:
            # Shared -> exclusive. Not atomic, which is fine: leaving anyway.
            fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if self.service or self.server.started_here:
                mark.write_text(f"{os.getpid()}\n", encoding="utf-8")
            log.debug("embedded PostgreSQL left running: another upwatch process uses it")
            return
        if self.service or self.server.started_here or mark.exists():
            self.server.stop()
            mark.unlink(missing_ok=True)

    def restart_if_down(self) -> bool:
        """Start the server again if it is not running; True when it was started. Under the
        control lock, so that a command arriving meanwhile waits for it rather than starting
        a second server."""
        with self._control():
            if self.server.running():
                return False
            self.server.start()
            return True


@contextlib.contextmanager
def embedded_database(
    data_dir: Path, server: EmbeddedPostgres, *, service: bool
) -> Iterator[EmbeddedLease]:
    """The lease for the block (and, for the service, the one-service-per-directory lock
    first, so a second ``upwatch run`` is refused before it touches anything)."""
    with contextlib.ExitStack() as stack:
        if service:
            stack.enter_context(service_lock(data_dir))
        lease = EmbeddedLease(data_dir, server, service=service)
        lease.acquire()
        stack.callback(lease.release)
        yield lease
