"""Lifecycle of one Upwatch process.

Start-up: database (embedded unless a DSN is set), pool, migrations, first-start account,
then the components of the chosen role as named long-lived tasks sharing ONE stop event.
SIGTERM/SIGINT set it; so does any component that dies, and then all of them drain together
within the drain limit (in-flight probes finish or are handed back, results are flushed).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import asyncpg

from engine.db.embedded import EmbeddedPostgres
from engine.db.embedded_lease import EmbeddedLease, embedded_database
from engine.db.store import Store
from engine.kinds.certificate import CertProbe
from engine.kinds.domain_expiry import DomainProbe
from engine.kinds.registry import Kinds
from engine.kinds.uptime import HttpProbe
from engine.kinds.uptime_probers import UptimeProbe
from engine.runtime.errors import DatabaseUnavailable, UpwatchError
from engine.runtime.memory import MemoryTrim
from engine.runtime.metrics import Metrics
from engine.runtime.sdnotify import Notifier
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

Role = Literal["all", "api", "engine"]
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]

DRAIN_SECONDS = 7.0  # leaves time to stop the embedded server within systemd's 10 s


@contextlib.contextmanager
def database(
    settings: Settings, *, service: bool = False
) -> Iterator[tuple[str, EmbeddedLease | None]]:
    """The DSN to use. Without one set, the embedded server of ``settings.data_dir``, shared
    with the other ``upwatch`` processes of that directory (engine.db.embedded_lease: an
    admin command never stops the server a running service uses). ``service`` is
    ``upwatch run``: one per directory, and it owns the server's life."""
    if settings.database_url is not None:
        yield settings.database_url.get_secret_value(), None
        return
    server = EmbeddedPostgres(settings.data_dir / "pg")
    with embedded_database(settings.data_dir, server, service=service) as lease:
        yield server.dsn(), lease


async def open_store(
    dsn: str, *, max_size: int = 20, settings: Settings | None = None
) -> Store:
    from engine.db import migrate
    from engine.runtime.secretbox import SecretBox

    box = SecretBox.from_settings(settings) if settings is not None else None
    try:
        store = await Store.connect(dsn, min_size=2, max_size=max_size, secrets=box)
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # Start-up and commands end with one line saying why, not a traceback.
        where = settings.database_label() if settings is not None else "the database"
        raise DatabaseUnavailable(
            f"cannot connect to {where}: {str(exc) or type(exc).__name__}") from exc
    async with store.pool.acquire() as conn:
        applied = await migrate.apply(conn)
    if applied:
        log.info("schema migrated", extra={"applied": ",".join(applied)})
    encrypted = await store.encrypt_account_secrets()
    if encrypted:
        log.info("account secrets encrypted at rest", extra={"accounts": encrypted})
    return store


@dataclass
class Supervisor:
    """Runs named components until the stop event; one failure stops them all.
    ``stopping_at`` and ``drained_in`` (monotonic seconds) say when the stop began and how
    long the components took to drain."""

    stop: asyncio.Event = field(default_factory=asyncio.Event)
    drain_seconds: float = DRAIN_SECONDS
    stopping_at: float | None = None
    drained_in: float | None = None

    async def run(self, components: dict[str, Component]) -> int:
        tasks: dict[asyncio.Task[Any], str] = {
            asyncio.create_task(fn(self.stop), name=name): name for name, fn in components.items()
        }
        stop_wait = asyncio.create_task(self.stop.wait(), name="stop-wait")
        done, _ = await asyncio.wait([*tasks, stop_wait], return_when=asyncio.FIRST_COMPLETED)
        failed = False
        requested = self.stop.is_set()  # a signal, not a component, asked to stop
        for task in done:
            if task is stop_wait:
                continue
            if task.cancelled():  # nobody here cancels a component: a stray cancellation
                failed = True
                log.error("component %s was cancelled from inside; stopping", tasks[task])
                continue
            exc = task.exception()
            if exc is not None:
                failed = True
                log.error("component %s died: %r; stopping", tasks[task], exc, exc_info=exc)
            elif not requested:
                log.warning("component %s ended; stopping", tasks[task])
        if requested:
            log.info("stopping: draining components")
        self.stopping_at = time.monotonic()
        self.stop.set()
        stop_wait.cancel()
        pending = [t for t in tasks if not t.done()]
        still: set[asyncio.Task[Any]] = set()
        if pending:
            _, still = await asyncio.wait(pending, timeout=self.drain_seconds)
            for task in still:
                log.warning("component %s did not drain in time; cancelling", tasks[task])
                task.cancel()
            await asyncio.gather(*still, return_exceptions=True)
        self.drained_in = time.monotonic() - self.stopping_at
        for task in tasks:
            if not task.done() or task in still:
                continue  # cut at the drain limit: logged above, not a failure of its own
            if task.cancelled() or task.exception() is not None:
                failed = True
        return 1 if failed else 0


class WebServer:
    """An aiohttp application on settings.host:port as a component."""

    def __init__(self, app: Any, settings: Settings) -> None:
        self.app, self.settings = app, settings
        self.listening = asyncio.Event()
        self.port: int | None = None

    async def run(self, stop: asyncio.Event) -> None:
        from aiohttp import web

        from engine.web.protocol_errors import ApiRunner

        # ApiRunner: requests the HTTP parser refuses get the API's JSON error, not
        # aiohttp's plain text quoting the request, and no traceback in the log.
        runner = ApiRunner(self.app, access_log=None, shutdown_timeout=3.0)
        await runner.setup()
        try:
            site = web.TCPSite(runner, self.settings.host, self.settings.port, reuse_address=True)
            try:
                await site.start()
            except OSError as exc:
                raise UpwatchError(
                    f"cannot listen on {self.settings.host}:{self.settings.port}: {exc.strerror}"
                ) from None
            sockets = getattr(site._server, "sockets", None)
            if sockets:
                self.port = sockets[0].getsockname()[1]
            self.listening.set()
            log.info("listening", extra={"url": self.settings.public_base_url})
            await stop.wait()
        finally:
            await runner.cleanup()


def _node_app(store: Store, settings: Settings, metrics: Metrics) -> Any:
    """What an engine-only instance serves: liveness, metrics and the peer endpoint."""
    from aiohttp import web

    from engine.web.app import (
        KEEPALIVE_TIMEOUT_S,
        MAX_BODY_BYTES,
        MAX_HEADER_FIELD_BYTES,
        healthz,
        metrics_text,
    )
    from engine.web.keys import METRICS, SETTINGS, STORE

    # The same connection limits as the API (slow or idle clients are cut off after 30 s).
    app = web.Application(
        client_max_size=MAX_BODY_BYTES,
        handler_args={
            "max_field_size": MAX_HEADER_FIELD_BYTES,
            "keepalive_timeout": KEEPALIVE_TIMEOUT_S,
        },
    )
    app[STORE] = store
    app[SETTINGS] = settings
    app[METRICS] = metrics
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/metrics", metrics_text)
    return app


@dataclass
class Node:
    """The components of one process for its role, wired together."""

    web: WebServer
    components: dict[str, Component]
    engine: Any = None
    closers: list[Callable[[], Coroutine[Any, Any, None]]] = field(default_factory=list)


def build_kinds(
    settings: Settings,
    metrics: Metrics,
    *,
    http_prober: HttpProbe | None = None,
    cert_prober: CertProbe | None = None,
    uptime_probers: Mapping[str, UptimeProbe] | None = None,
    store: Store | None = None,
) -> Kinds:
    """Every registered kind of check with its prober, each prober built here once unless
    given (tests pass theirs; ``uptime_probers``: by scheme, for schemes other than
    http(s)); ``aclose()`` of the result closes those built here. ``store`` (None: those
    kinds are only shown) is what the heartbeat kind reads its facts with and what the
    domain expiry prober shares registry answers through."""
    from engine import USER_AGENT
    from engine.kinds.registry import registered
    from engine.kinds.uptime_probers import build_probers

    built: list[HttpProbe | CertProbe | DomainProbe] = []
    if http_prober is None:
        from engine.probes.http import HttpProber
        from engine.probes.resolver import from_settings

        http_prober = HttpProber(
            timeout=settings.probe_timeout,
            user_agent=USER_AGENT,
            source_address=settings.probe_source_address,
            allow_private=settings.allow_private_targets,
            resolver=from_settings(settings, metrics),
            tls_sessions=settings.tls_sessions,
            metrics=metrics,
            batch=settings.probe_batch_ms / 1000.0,
        )
        built.append(http_prober)
    if cert_prober is None:
        from engine.probes.tls import CertProber

        cert_prober = CertProber(
            timeout=settings.probe_timeout,
            source_address=settings.probe_source_address,
            allow_private=settings.allow_private_targets,
            ca_bundle=settings.ca_bundle,
            # The uptime probes' resolver and cache, when theirs is one.
            resolver=getattr(http_prober, "resolver", None),
            batch=settings.probe_batch_ms / 1000.0,
        )
        built.append(cert_prober)
    domain_prober = None
    if store is not None:
        from engine.probes.rdap import RdapClient
        from engine.scheduler.registrations import DomainProber

        domain_prober = DomainProber(store, RdapClient(
            bootstrap_url=settings.rdap_bootstrap_url,
            allow_private=settings.allow_private_targets,
            timeout=settings.rdap_timeout,
        ))
        built.append(domain_prober)
    others, others_built = build_probers(
        settings, metrics, getattr(http_prober, "resolver", None), uptime_probers)
    return registered(http_prober, cert_prober, store, domain_prober, uptime=others,
                      owned=[*built, *others_built])


async def build_node(
    role: Role, store: Store, settings: Settings, metrics: Metrics, dsn: str
) -> Node:
    """Wire the role's components. Engine roles join the cluster first, so that ownership
    is known before the first check is loaded."""
    comps: dict[str, Component] = {}
    if role in ("all", "api"):
        from engine.web.app import create_app

        app = create_app(store, settings, metrics=metrics)
    else:
        app = _node_app(store, settings, metrics)
    node = Node(web=WebServer(app, settings), components=comps)
    comps["web"] = node.web.run
    if role in ("all", "engine"):
        from engine.cluster.nodes import NodeRegistry
        from engine.cluster.peer import PeerConfirmer, RegionConfirmer, peer_routes
        from engine.db.partitions import PartitionUpkeep
        from engine.delivery.webhooks.deliverer import Deliverer
        from engine.scheduler.confirm import LocalConfirmer
        from engine.scheduler.engine import Engine

        registry = NodeRegistry(store, settings, metrics=metrics, dsn=dsn)
        await registry.register()
        kinds = build_kinds(settings, metrics, store=store)
        # Confirmations (and the peers' requests for them) probe again with the same prober.
        prober = kinds.reprober
        peers = PeerConfirmer(registry.membership, settings, metrics)
        confirmer = RegionConfirmer(peers, LocalConfirmer.from_settings(prober, settings, metrics))
        engine = Engine(
            store, settings, metrics=metrics, kinds=kinds, confirmer=confirmer,
            owns=registry.membership.owns,
        )
        registry.membership.on_change(engine.request_resync)
        app.router.add_routes(peer_routes(store, settings, prober, registry.membership, metrics))
        node.engine = engine
        node.closers += [peers.aclose, kinds.aclose]
        comps["cluster"] = registry.run
        comps["engine"] = engine.run
        comps["deliverer"] = Deliverer(store, settings, metrics=metrics).run
        from engine.delivery.notify.sender import NotifyPool, grouping, notification_runner

        store.notification_grouping = grouping(settings)
        notify_pool = NotifyPool(settings.notify_threads)
        node.closers.append(notify_pool.aclose)
        comps["notifier"] = notification_runner(
            store, settings, metrics=metrics, pool=notify_pool
        ).run
        comps["partitions"] = PartitionUpkeep(store, settings).run
        from engine.db.rollups import PhaseRollup

        comps["phase_rollup"] = PhaseRollup(store).run
    return node


FIRST_TOKEN_FILE = "first-token"


async def _first_start(store: Store, settings: Settings, embedded: bool) -> None:
    """On the very first start of the embedded default: an account, its token, a curl line.
    Shown only to a terminal (or on stdout whatever it is, with ``first_token = "print"``);
    otherwise (systemd, where stdout is the journal) written to ``<data_dir>/first-token``,
    readable only by this user, and its path logged."""
    if not embedded or await store.count_accounts() > 0:
        return
    account, token = await store.create_account(
        "admin", plan=settings.default_plan, is_operator=True
    )
    base = settings.public_base_url
    words = (
        f"Created account {account.id} ({account.name}). Its API token, shown only now:\n\n"
        f"    {token}\n\n"
        "Try it:\n\n"
        f"    curl -s -H 'Authorization: Bearer {token}' {base}/webapi/monitors\n\n"
    )
    if settings.first_token == "print" or sys.stdout.isatty():
        sys.stdout.write("\n" + words)
        sys.stdout.flush()
        return
    path = settings.data_dir.resolve() / FIRST_TOKEN_FILE
    write_private(path, words + "Delete this file once the token is kept elsewhere.\n")
    log.warning(
        "created account %d (%s); its API token is in %s (readable only by this user: "
        "read it, keep the token, delete the file)", account.id, account.name, path,
    )


def write_private(path: Path, text: str) -> None:
    """``text`` into ``path`` with mode 0600 from the start (never readable by others, not
    even for a moment), replacing the file atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


async def serve(
    settings: Settings,
    role: Role,
    dsn: str,
    *,
    embedded: EmbeddedLease | None = None,
    sup: Supervisor | None = None,
) -> int:
    metrics = Metrics()
    notifier = Notifier()
    store = await open_store(
        dsn, max_size=max(10, min(50, settings.webhook_concurrency)), settings=settings)
    node: Node | None = None
    try:
        await _first_start(store, settings, embedded is not None)
        sup = sup or Supervisor()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, sup.stop.set)
        node = await build_node(role, store, settings, metrics, dsn)
        comps = dict(node.components)
        comps["watchdog"] = notifier.run_watchdog
        comps["memory-trim"] = MemoryTrim().run
        if embedded is not None:
            from engine.db.embedded_watch import EmbeddedWatch

            comps["embedded-db"] = EmbeddedWatch(embedded).run
        web, engine = node.web, node.engine

        async def announce_ready(stop: asyncio.Event) -> None:
            """READY=1 once the API listens and the engine has loaded its checks."""
            conditions = [web.listening.wait()]
            if engine is not None:
                conditions.append(engine.loaded.wait())
            gate: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*conditions))
            stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
            await asyncio.wait([gate, stopping], return_when=asyncio.FIRST_COMPLETED)
            gate.cancel()
            stopping.cancel()
            if not stop.is_set():
                notifier.ready(f"serving role {role}")
                print(f"Upwatch ({role}) ready at {settings.public_base_url}", flush=True)
            await stop.wait()
            notifier.stopping()

        comps["ready"] = announce_ready
        code = await sup.run(comps)
    finally:
        if node is not None:
            for close in node.closers:
                with contextlib.suppress(Exception):
                    await close()
        await store.close()
    return code


def run(settings: Settings, role: Role = "all") -> int:
    """Entry point of ``upwatch run``: blocks until stopped; returns the exit code."""
    import uvloop

    # libuv resolves names (getaddrinfo) on its thread pool, 4 threads by default: with
    # thousands of probes a few slow DNS answers would queue every other lookup behind them.
    os.environ.setdefault("UV_THREADPOOL_SIZE", "32")
    sup = Supervisor()
    log.info("starting (role %s) on %s; settings files: %s", role, settings.database_label(),
             ", ".join(str(f) for f in settings.files) or "none")
    with database(settings, service=True) as (dsn, lease):
        if lease is not None:
            log.info("embedded PostgreSQL running", extra={"dsn": dsn})
        code = uvloop.run(serve(settings, role, dsn, embedded=lease, sup=sup))
    if sup.stopping_at is not None:
        log.info(
            "stopped (exit %d): components drained in %.2f s, all stopped %.2f s after the "
            "stop began", code, sup.drained_in or 0.0, time.monotonic() - sup.stopping_at,
        )
    return code
