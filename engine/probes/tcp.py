"""The uptime probe of tcp://, tls://, smtp://, imap:// and pop3:// monitors.

Contract (as the URL probe's): :meth:`TcpProber.probe` never raises (except
``asyncio.CancelledError``) and never runs longer than ``timeout`` plus a few ms, whatever
the target does. One probe:

1. resolves the host (the ``resolver`` it was given, the engine's caching c-ares one) and
   applies the private-address rule to the name's every address, then connects to a
   checked IP literal, the next address when one refuses;
2. tcp: sends ``request.body`` if any; tls: a TLS handshake first (SNI = the name; the
   certificate is not verified here, the certificate check does that);
   smtp/imap/pop3: the greeting, STARTTLS (``engine/probes/starttls.py``), then TLS;
3. reads a reply only for ``response`` assertions (``engine/probes/streamspec.py``: up to
   64 KiB, until the server's end, a pause of :data:`REPLY_IDLE` after its last byte, the
   deadline, or every assertion holding); without them, connected (and the handshake
   done) is up.

The outcome is an :class:`HttpOutcome` with ``status_code`` None: ``error`` None when the
target answered, ``assertion_error`` the first failed assertion's words, ``details`` the
TLS version, a mail server's greeting and the reply's size where they apply; ``connect_ms``,
``tls_ms`` (handshake; after STARTTLS, from the STARTTLS command), ``ttfb_ms`` (the first
byte of the reply or greeting, from the connect) and ``total_ms``. Failures are words:
"connection refused", "TLS handshake failed: wrong version number", "STARTTLS refused: 454
TLS not available", "timed out after 10 s waiting for the SMTP greeting".

Each probe is one coroutine over one plain non-blocking socket of the prober's
:class:`~engine.probes.reactor.Reactor`, with the deadline of :class:`Deadlines` (no timer
per probe) and reads into the prober's buffer: no asyncio transport, stream or timer.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any, Final
from urllib.parse import urlsplit

from engine.domain.netpolicy import Resolver
from engine.domain.outcomes import HttpOutcome
from engine.probes._net import READ_BUFFER_SIZE, ClientConn, reactor_for, wake_future
from engine.probes.addresses import ip_literal, resolve_checked, source_family
from engine.probes.deadlines import Deadlines
from engine.probes.failures import ProbeFailure, os_error_words, ssl_error_words, timeout_words
from engine.probes.reactor import Reactor
from engine.probes.starttls import DEFAULT_PORTS, MAIL_SCHEMES, Dialogue, advance
from engine.probes.streamspec import MAX_REPLY, StreamSpec

log = logging.getLogger(__name__)

SCHEMES: Final[tuple[str, ...]] = ("tcp", "tls", *MAIL_SCHEMES)
# Seconds a reply may pause before it counts as complete (reading stops, what came is
# judged): a server that keeps its connection open is judged once it has said its piece.
REPLY_IDLE: Final = 0.5
# Whether a reply that grew this many times over its last judged length is judged again
# before its end (a reply in many small reads is judged O(log n) times, not once a read),
# and how many more judgements a reply's line ends may ask for.
_GROWTH: Final = 2
_LINE_CHECKS: Final = 32


class Target:
    """A monitor URL split for this probe: scheme, host (brackets off), port, IP literal."""

    __slots__ = ("host", "literal", "port", "scheme")

    def __init__(self, scheme: str, host: str, port: int) -> None:
        self.scheme = scheme
        self.host = host
        self.port = port
        self.literal = ip_literal(host)


@functools.lru_cache(maxsize=16384)
def split_target(url: str) -> Target:
    """``scheme://host[:port]`` of a validated URL; ProbeFailure when it is none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ProbeFailure("invalid URL") from None
    scheme = parts.scheme.lower()
    host = parts.hostname
    if scheme not in SCHEMES or not host:
        raise ProbeFailure("invalid URL")
    if port is None:
        port = DEFAULT_PORTS.get(scheme)
        if port is None:
            raise ProbeFailure("invalid URL: no port")
    return Target(scheme, host, port)


class _StreamConn(ClientConn):
    """One probe's connection: TLS or STARTTLS when asked, the body, the reply."""

    __slots__ = (
        "checks",
        "cut",
        "dialogue",
        "idle",
        "judged",
        "reading",
        "reply",
        "spec",
        "t_data",
        "t_last",
        "t_starttls",
        "tls_ctx",
        "tls_name",
    )

    def __init__(
        self,
        notify: Callable[[], None],
        rview: memoryview,
        pview: memoryview,
        scheme: str,
        tls_ctx: Any,
        tls_name: str | None,
        spec: StreamSpec | None,
    ) -> None:
        direct = tls_ctx if scheme == "tls" else None
        super().__init__(notify, rview, pview, direct, tls_name)
        self.tls_ctx = tls_ctx
        self.tls_name = tls_name
        self.dialogue = Dialogue(scheme) if scheme in MAIL_SCHEMES else None
        self.spec = spec
        self.reading = False
        self.reply = bytearray()
        self.cut = False
        self.judged = 0
        self.checks = 0
        self.t_data: float | None = None
        self.t_last = 0.0
        self.idle: asyncio.TimerHandle | None = None
        self.t_starttls: float | None = None

    @property
    def phase(self) -> str:
        """What the connection waits for, for a deadline's words."""
        if self.transport is None or self.t_connected is None:
            return ""
        d = self.dialogue
        if d is not None and not d.ready:
            return " " + d.waiting
        if (self.ssl_object is not None or self.tls_connection is not None) and \
                not self.handshaken:
            return " during the TLS handshake"
        if self.reading:
            return " waiting for the response"
        return ""

    def on_ready(self) -> None:
        d = self.dialogue
        if d is not None and not self.handshaken:
            return  # connected: the greeting comes first
        spec = self.spec
        if d is not None or spec is None:
            self.finish()  # a mail server's check ends with its handshake
            return
        if spec.body is not None:
            self.send(spec.body)
        if spec.reads:
            self.reading = True
        else:
            self.finish()

    def on_data(self, data: memoryview) -> None:
        if self.t_data is None:
            self.t_data = perf_counter()
        d = self.dialogue
        if d is not None:
            if d.ready:
                return  # plaintext after the server's yes (dropped), or after TLS: unread
            answer = advance(d, self, data, self.tls_ctx, self.tls_name)
            if d.greeting is not None and not self.reply:
                self.reply += d.greeting.encode("utf-8")  # what ``response`` judges
            if answer.endswith((b"STARTTLS\r\n", b"STLS\r\n")):
                self.t_starttls = perf_counter()
            return
        if not self.reading:
            return
        reply = self.reply
        room = MAX_REPLY - len(reply)
        if len(data) >= room:
            reply += data[:room]
            self.cut = True
            self.finish()
            return
        before = len(reply)
        reply += data
        self.t_last = perf_counter()
        if self.idle is None:
            self.idle = asyncio.get_running_loop().call_later(REPLY_IDLE, self._quiet)
        spec = self.spec
        assert spec is not None
        if spec.early:
            n = len(reply)
            grown = n >= _GROWTH * self.judged
            if not grown and self.checks < _LINE_CHECKS and reply.find(b"\n", before) >= 0:
                self.checks += 1
                grown = True
            if grown:
                self.judged = n
                if spec.settled(bytes(reply)):
                    self.finish()

    def _quiet(self) -> None:
        """The idle timer: the reply ends once it has been quiet for REPLY_IDLE s."""
        self.idle = None
        if self.done or self.notify is None:
            return
        wait = self.t_last + REPLY_IDLE - perf_counter()
        if wait > 0:
            loop = asyncio.get_running_loop()
            self.idle = loop.call_later(wait, self._quiet)
            return
        self.finish()
        self._notify()

    def stop_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
            self.idle = None

    def on_lost(self, exc: BaseException | None) -> None:
        d = self.dialogue
        if d is not None and not d.ready:
            self.finish(d.closed_words() if exc is None else os_error_words(exc))
        elif self.reading and (exc is None or self.reply):
            self.finish()  # the server's end (or a reset after its reply) ends the reply
        else:
            self.finish(os_error_words(exc))

    def on_tls_failed(self, exc: BaseException | None) -> None:
        if isinstance(exc, ssl.SSLError):
            self.finish("TLS handshake failed: " + ssl_error_words(exc))
        elif exc is None:
            self.finish("TLS handshake failed: connection closed")
        else:
            self.finish("TLS handshake failed: " + os_error_words(exc))


class TcpProber:
    """Runs tcp/tls/smtp/imap/pop3 uptime probes; one instance serves any number of
    concurrent probes on one loop. ``aclose()`` drops the reactor (probes still running
    end at once); the prober stays usable."""

    def __init__(
        self,
        *,
        timeout: float,
        source_address: str | None = None,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        batch: float = 0.0,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._timeout = timeout
        self._timeout_words = timeout_words(timeout)
        self._local = (source_address, 0) if source_address else None
        self._family = source_family(source_address)
        self._allow_private = allow_private
        self._resolver = resolver
        self._deadlines = Deadlines()
        self._reactor: Reactor | None = None
        self._batch = batch
        self._rview = memoryview(bytearray(READ_BUFFER_SIZE))
        self._pview = memoryview(bytearray(READ_BUFFER_SIZE))
        self._ctx: ssl.SSLContext | None = None

    def _tls_context(self) -> ssl.SSLContext:
        ctx = self._ctx
        if ctx is None:
            # No trust store: the certificate check verifies; an empty context stays small.
            ctx = self._ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    async def aclose(self) -> None:
        self._ctx = None
        if self._reactor is not None:
            self._reactor.close()
            self._reactor = None

    async def probe(self, url: str, spec: StreamSpec | None = None) -> HttpOutcome:
        """Probe ``url`` (a validated tcp/tls/smtp/imap/pop3 URL) with ``spec``'s body and
        assertions; never raises except CancelledError, never exceeds the timeout."""
        out = HttpOutcome(None, None, 0.0, None, None, None, None)
        loop = asyncio.get_running_loop()
        t0 = perf_counter()
        task, slot, cancelling = self._deadlines.arm(self._timeout, loop)
        conn: _StreamConn | None = None
        t_start = t0
        reply, cut = b"", False
        try:
            target = split_target(url)
            addrs, out.dns_ms = await resolve_checked(
                target.host, target.port, literal=target.literal, family=self._family,
                allow_private=self._allow_private, resolver=self._resolver,
            )
            reactor = self._reactor = reactor_for(self._reactor, loop, self._batch)
            tls = target.scheme != "tcp"
            ctx = self._tls_context() if tls else None
            sni = target.host if tls and target.literal is None else None
            last_error = "connection failed"
            for ip in addrs:
                waiter: asyncio.Future[None] = loop.create_future()
                conn = _StreamConn(wake_future(waiter), self._rview, self._pview,
                                   target.scheme, ctx, sni, spec)
                out.remote_ip = ip
                t_start = perf_counter()
                try:
                    reactor.connect(conn, ip, target.port, self._local)
                except OSError as exc:
                    last_error = os_error_words(exc)
                    conn.release()
                    conn = None
                    continue
                await waiter
                _timings(conn, out, t_start)
                if conn.connect_error is None:
                    break
                last_error = conn.connect_error
                _close(conn)
                conn = None
            if conn is None:
                raise ProbeFailure(last_error)
            out.error = conn.error
        except asyncio.CancelledError:
            if not self._deadlines.expired(task, cancelling):
                raise
            if conn is not None and conn.reading and conn.reply:
                out.error = None  # the deadline ends the reply: what came is judged
            else:
                out.error = self._timeout_words + (conn.phase if conn is not None else "")
            if conn is not None:
                _timings(conn, out, t_start)
        except ProbeFailure as exc:
            out.error = str(exc)
        except Exception:
            log.exception("tcp probe of %s failed unexpectedly", url)
            out.error = "probe failed: internal error"
        finally:
            slot.discard(task)
            if conn is not None:
                reply, cut = bytes(conn.reply), conn.cut
                out.details = _details(conn)
                _close(conn)
        out.total_ms = (perf_counter() - t0) * 1000.0
        if out.error is None and conn is not None and spec is not None and spec.assertions:
            out.assertion_error = spec.check(reply, cut, out.total_ms, out.connect_ms)
        return out


def from_settings(settings: Any, metrics: Any = None, resolver: Resolver | None = None
                  ) -> TcpProber:
    """The node's prober of these schemes: the uptime probes' timeout, source address,
    private-address rule, batching and (shared) resolver."""
    return TcpProber(
        timeout=settings.probe_timeout,
        source_address=settings.probe_source_address,
        allow_private=settings.allow_private_targets,
        resolver=resolver,
        batch=settings.probe_batch_ms / 1000.0,
    )


def _timings(conn: _StreamConn, out: HttpOutcome, t_start: float) -> None:
    t_connected = conn.t_connected
    if t_connected is None:
        return
    out.connect_ms = (t_connected - t_start) * 1000.0
    if conn.t_tls is not None:
        began = conn.t_starttls if conn.t_starttls is not None else t_connected
        out.tls_ms = (conn.t_tls - began) * 1000.0
    if conn.t_data is not None:
        out.ttfb_ms = (conn.t_data - t_connected) * 1000.0


def _details(conn: _StreamConn) -> dict[str, Any] | None:
    """The check's meta figures: the TLS version, a mail server's greeting (first line),
    the bytes of the reply read."""
    details: dict[str, Any] = {}
    sslobj = conn.ssl_object
    if sslobj is not None and conn.handshaken:
        details["tls_version"] = sslobj.version()
    d = conn.dialogue
    if d is not None and d.greeting:
        details["greeting"] = d.greeting.split("\n", 1)[0]
    if conn.reading:
        details["response_bytes"] = len(conn.reply)
    return details or None


def _close(conn: _StreamConn) -> None:
    conn.stop_idle()
    if conn.transport is not None:
        conn.transport.abort()
    conn.release()


__all__ = ["SCHEMES", "TcpProber", "from_settings", "split_target"]
