"""``upwatch backup``: a consistent dump of the database while the service runs.

A backup is one tar file (mode 0600, written to a temporary name and renamed):

- ``upwatch-backup.json``: what a restore checks first: the schema migration version, the
  fingerprint of the secret key that sealed the stored secrets (never the key), counts of
  what it holds, and the PostgreSQL versions;
- ``upwatch.pgdump``: ``pg_dump --format=custom`` of the database; ``pg_restore`` reads it
  as it is, with or without Upwatch.

Both come from one snapshot: a repeatable-read transaction exports its snapshot, the header
is read in it and ``pg_dump --snapshot`` dumps exactly that state, while the service keeps
writing. The secret key's fingerprint is recorded only after the key was shown to decrypt a
sealed value of that snapshot.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import tarfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import asyncpg
from cryptography.fernet import Fernet, InvalidToken

from engine.db.pgtools import find_tool, libpq_target
from engine.domain.words import plural
from engine.runtime.errors import UpwatchError
from engine.runtime.secretbox import KEY_FILE, is_plain
from engine.runtime.settings import Settings

FORMAT = "upwatch-backup"
FORMAT_VERSION = 1
HEADER_MEMBER = "upwatch-backup.json"
DUMP_MEMBER = "upwatch.pgdump"
_BLOCK = 512
_CHUNK = 1 << 20

# What the header counts, by name; each a cheap query (no scan of raw results).
COUNTS = {
    "accounts": "SELECT count(*) FROM accounts",
    "monitors": "SELECT count(*) FROM monitors",
    "notification_channels": "SELECT count(*) FROM notification_channels",
    "pending_webhooks": "SELECT count(*) FROM webhook_events WHERE status = 'pending'",
    "pending_notifications":
        "SELECT count(*) FROM notification_events WHERE status = 'pending'",
}
# A few values sealed with the secret key, to test a key against.
SQL_SEALED_SAMPLE = """
(SELECT token AS v FROM accounts ORDER BY id LIMIT 5)
UNION ALL (SELECT webhook_url FROM accounts WHERE webhook_url IS NOT NULL ORDER BY id LIMIT 5)
UNION ALL (SELECT url FROM notification_channels ORDER BY id LIMIT 1)
"""


class BackupError(UpwatchError):
    """A backup could not be written or read; the message says why."""


@dataclass(frozen=True)
class FoundKey:
    """The secret key the settings name, without generating one: ``key`` is None when
    there is none yet; ``where`` says where it was looked for."""

    key: bytes | None
    where: str


def find_key(settings: Settings) -> FoundKey:
    """The installation's secret key as the service would read it (engine/runtime/secretbox.py),
    but never generated: a restore must not invent a key."""
    if settings.secret_key is not None:
        named = os.environ.get("UPWATCH_SECRET_KEY_FILE")
        where = ("UPWATCH_SECRET_KEY" if "UPWATCH_SECRET_KEY" in os.environ or not named
                 else f"UPWATCH_SECRET_KEY_FILE ({named})")
        return FoundKey(settings.secret_key.get_secret_value().strip().encode("ascii"), where)
    path = settings.data_dir.expanduser().resolve() / KEY_FILE
    try:
        return FoundKey(path.read_bytes().strip(), str(path))
    except FileNotFoundError:
        return FoundKey(None, str(path))


def fingerprint(key: bytes) -> str:
    """A short, one-way name for a key: tells two keys apart, gives nothing of either away."""
    digest = hashlib.sha256(b"upwatch secret key\0" + key.strip()).hexdigest()
    return f"sha256:{digest[:16]}"


def opens(key: bytes | None, sealed: str) -> bool:
    """Whether ``key`` decrypts the sealed value ``sealed``."""
    if key is None:
        return False
    try:
        Fernet(key).decrypt(sealed.encode("ascii"))
    except (InvalidToken, ValueError, TypeError):
        return False
    return True


async def sealed_sample(conn: asyncpg.Connection) -> str | None:
    """One value of the database sealed with the secret key, None when it holds none."""
    for row in await conn.fetch(SQL_SEALED_SAMPLE):
        value = row["v"]
        if value is not None and not is_plain(value):
            return str(value)
    return None


async def read_state(conn: asyncpg.Connection) -> dict[str, Any]:
    """Schema version, counts and the server's major version, as ``conn`` sees them."""
    try:
        schema = await conn.fetchval("SELECT max(version) FROM schema_migrations")
    except asyncpg.UndefinedTableError:
        raise BackupError("the database holds no Upwatch schema") from None
    counts = {name: int(await conn.fetchval(sql)) for name, sql in COUNTS.items()}
    server = int(await conn.fetchval("SHOW server_version_num"))
    return {"schema_version": int(schema or 0), "counts": counts, "server_major": server // 10000}


@dataclass(frozen=True)
class BackupResult:
    header: dict[str, Any]
    size: int
    key_warning: str | None  # the key found does not open the database's secrets


async def write_backup(
    dsn: str, target: Path, key: FoundKey, *, embedded: bool, version: str,
    now: datetime | None = None,
) -> BackupResult:
    """Dump the database of ``dsn`` into ``target`` (atomically, mode 0600) and return what
    its header says (``target`` absolute). Raises :class:`BackupError` naming the cause;
    ``target`` is then left as it was."""
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            snapshot = await conn.fetchval("SELECT pg_export_snapshot()")
            state = await read_state(conn)
            sealed = await sealed_sample(conn)
            pg_dump = find_tool("pg_dump", state["server_major"], embedded=embedded)
            warning = None
            key_print = None
            if sealed is not None:
                if opens(key.key, sealed):
                    assert key.key is not None
                    key_print = fingerprint(key.key)
                elif key.key is None:
                    warning = (f"no secret key at {key.where}: this backup cannot say which "
                               "key its sealed secrets need; keep the key the service uses")
                else:
                    warning = (f"the secret key of {key.where} (fingerprint "
                               f"{fingerprint(key.key)}) does not decrypt this database's "
                               "secrets: run the backup with the service's settings, and keep "
                               "the key the service uses")
            header = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "created_at": (now or datetime.now(UTC)).isoformat(),
                "upwatch_version": version,
                "schema_version": state["schema_version"],
                "sealed_secrets": sealed is not None,
                "secret_key_fingerprint": key_print,
                "counts": state["counts"],
                "server_major": state["server_major"],
            }
            size = await _dump_to(target, pg_dump, dsn, snapshot, header)
    finally:
        await conn.close()
    return BackupResult(header, size, warning)


def _member(name: str, size: int, mtime: float) -> bytes:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(mtime), 0o600
    return info.tobuf(format=tarfile.GNU_FORMAT)  # one 512-byte block for these short names


def _pad(size: int) -> bytes:
    return b"\0" * (-size % _BLOCK)


async def _dump_to(
    target: Path, pg_dump: str, dsn: str, snapshot: str, header: dict[str, Any]
) -> int:
    """Write the tar: the header member, then ``pg_dump``'s output streamed into the dump
    member, whose tar header is written last (its size known only then). ``target`` is
    absolute."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    dbname, env = libpq_target(dsn)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        raise BackupError(f"cannot write {target}: {exc.strerror}") from None
    ok = False
    try:
        with os.fdopen(fd, "wb") as out:
            now = time.time()
            body = json.dumps(header, indent=2).encode() + b"\n"
            out.write(_member(HEADER_MEMBER, len(body), now) + body + _pad(len(body)))
            at = out.tell()
            out.write(b"\0" * _BLOCK)  # the dump member's header, once its size is known
            proc = await asyncio.create_subprocess_exec(
                pg_dump, "--format=custom", "--no-password", f"--snapshot={snapshot}",
                "--dbname", dbname,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
            )
            assert proc.stdout is not None and proc.stderr is not None
            err_task = asyncio.create_task(proc.stderr.read())
            size = 0
            while chunk := await proc.stdout.read(_CHUNK):
                out.write(chunk)
                size += len(chunk)
            code = await proc.wait()
            err = (await err_task).decode(errors="replace").strip()
            if code != 0:
                raise BackupError(f"pg_dump failed (exit {code}): {err[-2000:]}")
            out.write(_pad(size) + b"\0" * (2 * _BLOCK))
            out.seek(at)
            out.write(_member(DUMP_MEMBER, size, now))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
        ok = True
        _fsync_dir(target.parent)
        return size
    except OSError as exc:
        raise BackupError(f"cannot write {target}: {exc.strerror or exc}") from None
    finally:
        if not ok:
            tmp.unlink(missing_ok=True)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_header(path: Path) -> dict[str, Any]:
    """The header of the backup at ``path``; raises :class:`BackupError` when it is none."""
    try:
        with tarfile.open(path, "r:") as tar:
            names = tar.getnames()
            member = tar.extractfile(HEADER_MEMBER) if HEADER_MEMBER in names else None
            if member is None or DUMP_MEMBER not in names:
                raise BackupError(f"{path} is not an Upwatch backup (no {HEADER_MEMBER} and "
                                  f"{DUMP_MEMBER} in it)")
            header = json.loads(member.read())
    except FileNotFoundError:
        raise BackupError(f"no file {path}") from None
    except PermissionError:
        raise BackupError(f"cannot read {path} as this user") from None
    except (tarfile.TarError, ValueError, OSError) as exc:
        raise BackupError(f"{path} is not an Upwatch backup: {exc}") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise BackupError(f"{path} is not an Upwatch backup ({HEADER_MEMBER} is another format)")
    if header.get("format_version") != FORMAT_VERSION:
        raise BackupError(f"{path} is a backup format version {header.get('format_version')}; "
                          f"this Upwatch reads version {FORMAT_VERSION}")
    return header


def copy_dump(path: Path, sink: IO[bytes]) -> None:
    """Stream the dump member of the backup at ``path`` into ``sink``."""
    with tarfile.open(path, "r:") as tar:
        member = tar.extractfile(DUMP_MEMBER)
        if member is None:
            raise BackupError(f"{path} holds no {DUMP_MEMBER}")
        while chunk := member.read(_CHUNK):
            sink.write(chunk)


def describe_counts(counts: dict[str, int]) -> str:
    """``2 accounts, 5 monitors, ...`` in words."""
    nouns = {
        "accounts": "account",
        "monitors": "monitor",
        "notification_channels": "notification channel",
        "pending_webhooks": "pending webhook",
        "pending_notifications": "pending notification",
    }
    return ", ".join(plural(int(counts.get(name, 0)), noun) for name, noun in nouns.items())

