"""Real local services for notification tests: an SMTP server on loopback (aiosmtpd) and an
HTTP receiver for json:// and ntfy:// channels, plus the notification runner as a context
manager. Nothing here mocks Apprise: it talks to these over real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import email
import email.policy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from engine.db.store import Store
from engine.delivery.notify.sender import NotifyPool, grouping, notification_runner
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.targets import free_port


@dataclass
class Mail:
    subject: str
    body: str  # every text part, joined
    to: list[str]
    html: str = ""  # the text/html part alone


class _Handler:
    def __init__(self, box: SmtpServer) -> None:
        self.box = box

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        if self.box.refuse_data:
            return "451 Requested action aborted: local error in processing"
        msg = email.message_from_bytes(envelope.content, policy=email.policy.default)
        parts = []
        html = ""
        for part in msg.walk():
            if part.get_content_type() in ("text/plain", "text/html"):
                parts.append(part.get_content())
            if part.get_content_type() == "text/html":
                html = part.get_content()
        self.box.mails.append(Mail(str(msg["Subject"]), "\n".join(parts), envelope.rcpt_tos,
                                   html))
        return "250 OK"


class SmtpServer:
    """aiosmtpd on 127.0.0.1, plain SMTP with AUTH allowed without TLS. ``password`` is the
    one accepted; ``refuse_data`` answers 451 to every message."""

    def __init__(self, user: str = "alerts", password: str = "s3cret-pass") -> None:
        self.user = user
        self.password = password
        self.mails: list[Mail] = []
        self.refuse_data = False
        self.port = free_port()
        self._controller = Controller(
            _Handler(self), hostname="127.0.0.1", port=self.port,
            authenticator=self._auth, auth_require_tls=False, auth_exclude_mechanism=["CRAM-MD5"],
        )

    def _auth(self, server: Any, session: Any, envelope: Any, mechanism: str,
              data: Any) -> AuthResult:
        if isinstance(data, LoginPassword) and data.login.decode() == self.user \
                and data.password.decode() == self.password:
            return AuthResult(success=True)
        return AuthResult(success=False, handled=False)

    def url(self, password: str | None = None, to: str = "oncall@example.com") -> str:
        return (f"mailto://{self.user}:{password or self.password}@127.0.0.1:{self.port}"
                f"?from=upwatch@example.com&to={to}")

    def __enter__(self) -> SmtpServer:
        self._controller.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._controller.stop()


@dataclass
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int = 200

    def json(self) -> Any:
        import orjson

        return orjson.loads(self.body)


@dataclass
class HttpReceiver:
    """Answers every request with ``status`` (200 by default) and records it."""

    status: int = 200
    hits: list[Hit] = field(default_factory=list)
    port: int = 0
    _runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        self.hits.append(
            Hit(request.method, request.path, dict(request.headers), body, self.status)
        )
        if self.status != 200:
            return web.Response(status=self.status, text="receiver is broken")
        return web.json_response({"success": True})

    async def __aenter__(self) -> HttpReceiver:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._runner is not None
        await self._runner.cleanup()

    def delivered(self, path: str | None = None) -> list[Hit]:
        """The requests answered 200 (to ``path``, if given)."""
        return [h for h in self.hits
                if h.answered == 200 and (path is None or h.path == path)]

    def json_url(self, path: str = "/hook", **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"json://127.0.0.1:{self.port}{path}" + (f"?{query}" if query else "")

    def ntfy_url(self, topic: str = "alerts", **params: str) -> str:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"ntfy://127.0.0.1:{self.port}/{topic}" + (f"?{query}" if query else "")


@contextlib.asynccontextmanager
async def running_notifier(
    store: Store, settings: Settings, *, metrics: Metrics | None = None
) -> AsyncIterator[None]:
    """The notification runner over ``store`` until the block ends (and the store's
    alert-storm window set from ``settings``)."""
    store.notification_grouping = grouping(settings)
    pool = NotifyPool(settings.notify_threads)
    runner = notification_runner(store, settings, metrics=metrics or Metrics(), pool=pool)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        yield
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        pool.close()
        if task.done() and not task.cancelled() and task.exception():
            raise task.exception()  # type: ignore[misc]


class SilentHost:
    """A TCP server on loopback that accepts every connection, reads what it is sent and
    never answers (a receiver that hangs). ``accepted`` counts connections."""

    def __init__(self) -> None:
        self.accepted = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        self._writers.append(writer)
        with contextlib.suppress(ConnectionError):
            while await reader.read(65536):
                pass

    def json_url(self, path: str = "/hook") -> str:
        return f"json://127.0.0.1:{self.port}{path}"

    async def __aenter__(self) -> SilentHost:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: Any) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._server.wait_closed(), 5)
