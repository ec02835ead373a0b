"""Shared fixtures: one real PostgreSQL server per test session, a template database with
the schema built once, and a fresh clone of it for every test.

``UPWATCH_TEST_DATABASE_URL`` (a DSN of a role that may create databases) points the tests at
another server; otherwise an embedded PostgreSQL is started in a temporary directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import asyncpg
import pytest
import uvloop

warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")

# One key for secrets at rest (engine/runtime/secretbox.py) for every store, settings object and
# `upwatch` process of the session, as an installation has one; none lands in the worktree.
os.environ.setdefault("UPWATCH_SECRET_KEY", "5dDMiWmKRCNJd_s8KE0TLKVdTvljkU-b3mkEwLqCE6Y=")

from engine.db import migrate  # noqa: E402
from engine.db.store import Store  # noqa: E402
from engine.runtime.settings import Settings  # noqa: E402
from tests.support.web import serve  # noqa: E402

# Under pytest-xdist (scripts/test runs most tests on several workers) each worker is its own
# session: its own embedded server, or, on a shared UPWATCH_TEST_DATABASE_URL server, its own
# template, so that no worker drops another's template mid-clone.
WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
TEMPLATE = f"upwatch_template_{WORKER}" if WORKER else "upwatch_template"


def pytest_configure(config: Any) -> None:
    """Refuse to test compiled modules older than their source (engine/runtime/compiled.py): the
    tests would pass or fail on code that is no longer there."""
    from engine.runtime.compiled import stale_modules

    stale = stale_modules()
    if stale:
        pytest.exit(
            f"compiled modules are older than their source: {', '.join(stale)}; rebuild "
            "them with ./scripts/test (or .venv/bin/pip install -e .)", returncode=4,
        )


def pytest_asyncio_loop_factories(config: Any, item: Any) -> dict[str, Any]:
    """Every async test runs on uvloop, like the service."""
    return {"uvloop": uvloop.new_event_loop}


def _with_database(dsn: str, database: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit(parts._replace(path="/" + database))


@contextlib.contextmanager
def _first_server_start(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Held around a worker's server start while the server's system user does not exist yet:
    as root the first start creates it (useradd), and xdist workers starting at once would race
    on /etc/passwd. The lock file is in the directory all workers of one run share."""
    from engine.db.embedded import _SYSTEM_USER

    if not WORKER or os.geteuid() != 0:
        yield
        return
    import fcntl
    import pwd

    try:
        pwd.getpwnam(_SYSTEM_USER)
        exists = True
    except KeyError:
        exists = False
    if exists:
        yield
        return
    with open(tmp_path_factory.getbasetemp().parent / "pg-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.fixture(scope="session")
def pg_admin_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """DSN of a maintenance database on a server where tests may create databases."""
    external = os.environ.get("UPWATCH_TEST_DATABASE_URL")
    if external:
        yield external
        return
    from engine.db.embedded import EmbeddedPostgres

    root = Path(tempfile.mkdtemp(prefix="upwatch-test-pg-"))
    server = EmbeddedPostgres(root / "pg", durable=False)
    with _first_server_start(tmp_path_factory):
        server.start()
    try:
        yield server.dsn("postgres")
    finally:
        server.destroy()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def template_database(pg_admin_dsn: str) -> str:
    """Name of a database holding the migrated schema; built once per session."""

    async def build() -> None:
        conn = await asyncpg.connect(pg_admin_dsn)
        try:
            await conn.execute(f"DROP DATABASE IF EXISTS {TEMPLATE} WITH (FORCE)")
            await conn.execute(f"CREATE DATABASE {TEMPLATE}")
        finally:
            await conn.close()
        conn = await asyncpg.connect(_with_database(pg_admin_dsn, TEMPLATE))
        try:
            await migrate.apply(conn)
        finally:
            await conn.close()

    asyncio.run(build())
    return TEMPLATE


@pytest.fixture
async def db_dsn(pg_admin_dsn: str, template_database: str) -> AsyncIterator[str]:
    """DSN of a fresh database cloned from the template, dropped after the test."""
    name = "t_" + uuid.uuid4().hex[:16]
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        await conn.execute(
            f"CREATE DATABASE {name} TEMPLATE {template_database} STRATEGY FILE_COPY"
        )
    finally:
        await conn.close()
    yield _with_database(pg_admin_dsn, name)
    conn = await asyncpg.connect(pg_admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()


@pytest.fixture
async def store(db_dsn: str) -> AsyncIterator[Store]:
    s = await Store.connect(db_dsn, min_size=1, max_size=10)
    try:
        yield s
    finally:
        await s.close()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a test instance: private targets allowed (tests use loopback only)."""
    return Settings(
        data_dir=tmp_path / "data",
        allow_private_targets=True,
        port=0,
        base_url="http://127.0.0.1:8080",
        rate_limit_per_second=0,
    )


@pytest.fixture
async def account(store: Store) -> tuple[Any, str]:
    """A fresh account and its API token."""
    return await store.create_account("test")


@pytest.fixture
async def status_page_url(store: Store) -> AsyncIterator[str]:
    """Only the status page routes over ``store``, served on a real loopback port."""
    from aiohttp import web

    from engine.web.keys import STORE
    from engine.web.status import page as status_page

    app = web.Application()
    app[STORE] = store
    app.router.add_routes(status_page.routes)
    async with serve(app) as url:
        yield url


@pytest.fixture
async def api(store: Store, settings: Settings) -> AsyncIterator[str]:
    """Base URL of the API served by a real aiohttp server on a free loopback port."""

    from engine.web.app import create_app

    async with serve(create_app(store, settings)) as url:
        yield url


@pytest.fixture
async def client(api: str, account: tuple[Any, str]) -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client for ``api`` that authenticates as ``account``."""
    _, token = account
    async with aiohttp.ClientSession(
        base_url=api,
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    ) as session:
        yield session
