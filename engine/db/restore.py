"""``upwatch restore``: a backup (engine/db/backup.py) into an empty data directory or database.

Refused, before anything is created, when:

- the target is not empty: a data directory may hold only its settings file and the secret
  key; a database of ``UPWATCH_DATABASE_URL`` no table;
- the backup's sealed secrets need a secret key that is not here (or another key is): the
  message names the fingerprint needed and where the key was looked for (a header that
  names no key: the key is tried on a sealed value read from the dump). ``without_key``
  restores anyway, the sealed secrets then unreadable;
- the backup comes from a newer schema than this Upwatch knows.

``pg_restore`` runs in one transaction; afterwards the counts and schema version are checked
against the backup's header and a sealed value is decrypted with the key. A restore that
fails there takes back the embedded database it created, so it can be run again.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import asyncpg

from engine.db import migrate
from engine.db.backup import (
    BackupError,
    FoundKey,
    copy_dump,
    find_key,
    fingerprint,
    opens,
    read_header,
    read_state,
    sealed_sample,
)
from engine.db.embedded import EmbeddedPostgres
from engine.db.embedded_lease import EmbeddedLease, service_lock
from engine.db.pgtools import find_tool, libpq_target
from engine.runtime.secretbox import is_plain
from engine.runtime.settings import Settings

# What an empty data directory may hold: settings, the key, and the locks of the commands.
ALLOWED_IN_EMPTY = frozenset({
    "upwatch.toml", "secret.key", "embedded-pg.users", "embedded-pg.control",
    "embedded-pg.handover", "upwatch-run.pid",
})
SQL_USER_TABLES = """
SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_%'
"""


@dataclass(frozen=True)
class Restored:
    header: dict[str, Any]
    key_note: str | None  # said when the sealed secrets cannot be read


def key_problem(
    header: dict[str, Any], key: FoundKey, sealed_in_dump: str | None = None
) -> str | None:
    """Why the backup's sealed secrets cannot be read with ``key``; None when they can. A
    header without the key's fingerprint (the backup was made with no key, or another) is
    judged by ``sealed_in_dump``, a sealed value read from the dump itself."""
    need = header.get("secret_key_fingerprint")
    if not header.get("sealed_secrets"):
        return None
    what = ("its sealed secrets (API tokens that sign webhooks, webhook and notification "
            "channel URLs, secret request headers) cannot be read")
    if need is None:
        if sealed_in_dump is None or opens(key.key, sealed_in_dump):
            return None
        if key.key is None:
            return (f"this backup's secrets were sealed with a secret key it does not name, "
                    f"and there is no key at {key.where}: without it {what}")
        return (f"the secret key of {key.where} (fingerprint {fingerprint(key.key)}) does not "
                f"decrypt this backup's sealed secrets (the backup does not name the key that "
                f"does): with it {what}")
    if key.key is None:
        return (f"this backup's secrets were sealed with the secret key of fingerprint {need}, "
                f"and there is no key at {key.where}: without it {what}")
    have = fingerprint(key.key)
    if have != need:
        return (f"this backup's secrets were sealed with the secret key of fingerprint {need}; "
                f"the key of {key.where} is another one ({have}): with it {what}")
    return None


def empty_data_dir_problem(data_dir: Path) -> str | None:
    """Why ``data_dir`` is no empty data directory to restore into; None when it is."""
    try:
        names = sorted(p.name for p in data_dir.iterdir())
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return f"{data_dir} is not a directory"
    except PermissionError:
        return f"cannot read the data directory {data_dir} as this user"
    extra = [n for n in names if n not in ALLOWED_IN_EMPTY]
    if not extra:
        return None
    what = "a database (pg)" if "pg" in extra else ", ".join(extra[:5])
    return (f"the data directory {data_dir} is not empty: it holds {what}. Restore only "
            "into an empty data directory (set UPWATCH_DATA_DIR to a new one; it may hold "
            "upwatch.toml and secret.key)")


def restore(settings: Settings, backup: Path, *, without_key: bool) -> Restored:
    """Restore ``backup`` into the database the settings name. Raises
    :class:`BackupError` saying why when refused or failed."""
    header = read_header(backup)
    known = max((v for v, _, _ in migrate.available()), default=0)
    if int(header.get("schema_version", 0)) > known:
        raise BackupError(
            f"{backup} holds schema version {header['schema_version']}, newer than this "
            f"Upwatch knows ({known}): restore it with the Upwatch that made it, or a newer one")
    key = find_key(settings)
    sealed = None
    if header.get("sealed_secrets") and header.get("secret_key_fingerprint") is None:
        tool = find_tool("pg_restore", int(header.get("server_major", 0)),
                         embedded=settings.database_url is None)
        sealed = sealed_in_dump(tool, backup)
    problem = key_problem(header, key, sealed)
    if problem is not None and not without_key:
        raise BackupError(
            f"{problem}. Put the key kept with the backup at {key.where} (mode 0600) or in "
            "UPWATCH_SECRET_KEY, and restore again (or --without-key to restore without it)")
    if settings.database_url is None:
        with _embedded(settings.data_dir.expanduser().resolve()) as dsn:
            note = _restore_into(dsn, backup, header, key, embedded=True)
    else:
        dsn = settings.database_url.get_secret_value()
        _require_empty_database(dsn, settings)
        note = _restore_into(dsn, backup, header, key, embedded=False)
    if problem is not None:
        problem += (f". Put the key of fingerprint {header['secret_key_fingerprint']} at "
                    f"{key.where} before the first `upwatch run` (it would make another)")
    return Restored(header, problem or note)


@contextlib.contextmanager
def _embedded(data_dir: Path) -> Iterator[str]:
    """A new embedded database in the empty ``data_dir`` for the block; removed again (the
    directory left as it was found) when the block fails."""
    problem = empty_data_dir_problem(data_dir)
    if problem is not None:
        raise BackupError(problem)
    server = EmbeddedPostgres(data_dir / "pg")
    with service_lock(data_dir):  # no `upwatch run` starts on it meanwhile
        lease = EmbeddedLease(data_dir, server, service=True)
        try:
            lease.acquire()
            yield server.dsn()
        except BaseException:
            lease.release()
            server.destroy()
            raise
        lease.release()


def _require_empty_database(dsn: str, settings: Settings) -> None:
    import uvloop

    async def tables() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(await conn.fetchval(SQL_USER_TABLES))
        finally:
            await conn.close()

    n = uvloop.run(tables())
    if n:
        raise BackupError(
            f"the {settings.database_label()} is not empty: it holds {n} tables, sequences "
            "or views. Restore only into an empty database (create a new one)")


def _restore_into(
    dsn: str, backup: Path, header: dict[str, Any], key: FoundKey, *, embedded: bool
) -> str | None:
    import uvloop

    async def server_major() -> int:
        conn = await asyncpg.connect(dsn)
        try:
            return int(await conn.fetchval("SHOW server_version_num")) // 10000
        finally:
            await conn.close()

    need = max(uvloop.run(server_major()), int(header.get("server_major", 0)))
    pg_restore = find_tool("pg_restore", need, embedded=embedded)
    _pg_restore(pg_restore, dsn, backup)
    return uvloop.run(_verify(dsn, header, key))


def _fed(args: list[str], backup: Path, env: dict[str, str] | None, out: IO[bytes] | int
         ) -> tuple[int, str]:
    """Run ``args`` with the backup's dump on its stdin; its exit code and stderr."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(  # noqa: S603 - a PostgreSQL binary, no shell
            args, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env,
        )
        failure: list[BaseException] = []

        def feed() -> None:
            assert proc.stdin is not None
            try:
                copy_dump(backup, proc.stdin)
            except BrokenPipeError:
                pass  # the tool stopped; its exit code and words tell why
            except BaseException as exc:  # handed to the caller below
                failure.append(exc)
            finally:
                with contextlib.suppress(BrokenPipeError):
                    proc.stdin.close()

        feeder = threading.Thread(target=feed, name="restore-feed", daemon=True)
        feeder.start()
        code = proc.wait()
        feeder.join(timeout=60)
        err.seek(0)
        words = err.read().decode(errors="replace").strip()
    if failure:
        raise BackupError(f"reading {backup} failed: {failure[0]}")
    return code, words


def _pg_restore(pg_restore: str, dsn: str, backup: Path) -> None:
    """Feed the dump to ``pg_restore`` through a pipe, all in one transaction."""
    dbname, env = libpq_target(dsn)
    code, words = _fed(
        [pg_restore, "--dbname", dbname, "--no-password", "--no-owner", "--no-privileges",
         "--single-transaction", "--exit-on-error"], backup, env, subprocess.DEVNULL)
    if code != 0:
        raise BackupError(f"pg_restore failed (exit {code}); nothing was restored: "
                          f"{words[-2000:]}")


def sealed_in_dump(pg_restore: str, backup: Path) -> str | None:
    """An account token sealed with the backup's key, read from the dump's data (``pg_restore
    --data-only --table=accounts`` to a file: no database involved)."""
    with tempfile.TemporaryFile() as out:
        code, words = _fed([pg_restore, "--data-only", "--table=accounts", "--file=-"],
                           backup, None, out)
        if code != 0:
            raise BackupError(f"pg_restore could not read {backup}: {words[-2000:]}")
        out.seek(0)
        columns: list[str] | None = None
        for raw in out:
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if columns is None:
                if line.startswith("COPY ") and " FROM stdin" in line:
                    columns = [c.strip() for c in line[line.index("(") + 1:
                                                       line.index(")")].split(",")]
                continue
            if line == "\\.":
                break
            fields = dict(zip(columns, line.split("\t"), strict=False))
            token = fields.get("token")
            if token and not is_plain(token):
                return token
    return None


async def _verify(dsn: str, header: dict[str, Any], key: FoundKey) -> str | None:
    """Check the restored database against the header; the note to print when its sealed
    secrets cannot be read (raises when the counts or version differ, or the key turns
    out wrong although the header could not say so)."""
    conn = await asyncpg.connect(dsn)
    try:
        state = await read_state(conn)
        sealed = await sealed_sample(conn)
    finally:
        await conn.close()
    if state["schema_version"] != header.get("schema_version") or \
            state["counts"] != header.get("counts"):
        raise BackupError(
            f"the restored database does not match the backup's header (schema version "
            f"{state['schema_version']}, counts {state['counts']}; expected "
            f"{header.get('schema_version')}, {header.get('counts')})")
    if sealed is None or opens(key.key, sealed):
        return None
    if header.get("secret_key_fingerprint") is None and key.key is not None:
        raise BackupError(
            f"the secret key of {key.where} (fingerprint {fingerprint(key.key)}) does not "
            "decrypt this backup's sealed secrets (the backup does not say which key does): "
            "use the key of the installation it comes from, and restore again")
    return ("its sealed secrets cannot be read without the backup's secret key "
            f"(fingerprint {header.get('secret_key_fingerprint') or 'unknown'})")

