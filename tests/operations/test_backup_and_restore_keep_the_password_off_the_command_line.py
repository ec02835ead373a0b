"""The PostgreSQL tools behind ``upwatch backup`` and ``restore`` get the database's password in
``PGPASSWORD``, never on their command line (which every local user can read), and are
chosen by the server's major version."""

from __future__ import annotations

import pytest

from engine.db.pgtools import find_tool, libpq_target, tool_major, wheel_bin
from engine.runtime.errors import UpwatchError


def test_the_password_moves_from_the_dsn_to_the_environment() -> None:
    target, env = libpq_target("postgresql://upwatch:p%40ss:w0rd@db.internal:5432/upwatch"
                               "?sslmode=require")
    assert target == "postgresql://upwatch@db.internal:5432/upwatch?sslmode=require"
    assert env["PGPASSWORD"] == "p@ss:w0rd"
    target, env = libpq_target("postgresql://postgres@/upwatch?host=/var/lib/upwatch/pg")
    assert target == "postgresql://postgres@/upwatch?host=/var/lib/upwatch/pg"
    assert "p@ss:w0rd" not in env.get("PGPASSWORD", "")


def test_a_tool_older_than_the_server_is_never_chosen() -> None:
    wheel = tool_major(wheel_bin("pg_dump"))
    assert wheel is not None and wheel >= 14
    assert find_tool("pg_dump", wheel, embedded=True) == wheel_bin("pg_dump")
    with pytest.raises(UpwatchError, match=f"no pg_dump of PostgreSQL {wheel + 1} or newer"):
        find_tool("pg_dump", wheel + 1, embedded=True)
