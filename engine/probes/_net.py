"""The client connection the probes make (uptime, certificate, tcp/tls/mail).

:class:`ClientConn`: one client connection over a :mod:`engine.probes.reactor` socket (the
reactor's ``Endpoint``), with TLS done in-process over ``ssl.MemoryBIO`` instead of the event
loop's SSL transport: uvloop's transport keeps a 256 KiB read buffer per connection and shuts
down gracefully (up to 30 s) on ``close()``; here all connections of a prober read into the
prober's two buffers and are always ``abort()``ed. It also lets the probes time TCP connect
and TLS handshake separately. Measurements are in ``engine/probes/http.py``.

The steps around it have their own modules: what a probe connects to
(:mod:`engine.probes.addresses`), its deadlines (:mod:`engine.probes.deadlines`) and the
words for its failures (:mod:`engine.probes.failures`).

Why a class (``ClientConn``) over ~300 lines: the connection is called by the reactor for
every event; its TCP, TLS and deadline steps share its fields and run compiled together.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any, Final, cast

from engine.probes import openssl_layer
from engine.probes.failures import os_error_words
from engine.probes.reactor import Reactor, SocketTransport

# Both read buffers are shared by all connections of one prober. That is safe because the
# event loop calls get_buffer(), reads into the buffer and calls buffer_updated()
# synchronously, and each buffer_updated() consumes the bytes before returning. 256 KiB: a
# 100 KB page that has arrived is one read and, over TLS, one pass of the decrypting loop
# (64 KiB took two of each: a recv, a BIO over the bytes, a flush check, a parse).
READ_BUFFER_SIZE: Final = 256 * 1024
# Largest piece of ciphertext handed to a connection's incoming memory BIO at once: one
# maximal TLS record (16 KiB of plaintext plus header, padding and tag).
_BIO_CHUNK: Final = 16 * 1024 + 512
# Largest piece of ciphertext taken from a pyOpenSSL connection's outgoing BIO at once.
_OUT_CHUNK: Final = openssl_layer._OUT_SIZE


def reactor_for(
    current: Reactor | None, loop: asyncio.AbstractEventLoop, batch: float = 0.0
) -> Reactor:
    """``current`` when it serves ``loop``; else a new reactor for ``loop`` (tests run one
    loop per test), polling every ``batch`` seconds under load (``Reactor``), and
    ``current``, if any, closed."""
    if current is not None:
        if current.loop is loop:
            return current
        current.close()
    return Reactor(loop, batch)


def wake_future(fut: asyncio.Future[None]) -> Callable[[], None]:
    """A ``notify`` for :class:`ClientConn` that resolves ``fut`` (unless it is already
    done: a cancelled waiter)."""

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)

    return wake


class ClientConn:
    """A client connection, plain or TLS, that reports back through ``notify``.

    Subclasses implement :meth:`on_ready` (TCP connected, and TLS handshake done if any),
    :meth:`on_data` (plaintext arrived; a memoryview into a shared buffer, valid only during
    the call), :meth:`on_lost` (EOF, reset or TLS failure after the handshake) and
    :meth:`on_tls_failed` (the handshake failed, or the peer went away during it).
    They end the connection's work with :meth:`finish`. ``notify()`` is then called once,
    when control is back in the reactor's call into the connection, never from inside a
    parser or TLS callback: the owner may abort the transport there and go on (probes never
    shut down gracefully: nothing to wait for), and an exception it raises reaches the
    reactor, which logs it. A connect that fails sets ``connect_error`` (its words) and
    finishes: the owner tries the next address.

    ``ctx`` chooses the TLS layer: an ``ssl.SSLContext`` (the ``ssl`` module, system
    OpenSSL), a pyOpenSSL ``Context`` (:mod:`engine.probes.openssl_layer`), or None (plain
    TCP). Either way the subclasses see the same calls, and TLS errors as ``ssl.SSLError``.
    """

    __slots__ = (
        "_in",
        "_out",
        "_pview",
        "_rview",
        "_ssl",
        "_tls",
        "connect_error",
        "done",
        "error",
        "handshaken",
        "notify",
        "offered_session",
        "t_connected",
        "t_first",
        "t_tls",
        "transport",
    )

    def __init__(
        self,
        notify: Callable[[], None],
        rview: memoryview,
        pview: memoryview,
        ctx: Any,
        server_hostname: str | None,
        session: Any = None,
    ) -> None:
        self.notify: Callable[[], None] | None = notify
        self._rview = rview
        self._pview = pview
        self.transport: SocketTransport | None = None
        self.connect_error: str | None = None
        self.t_connected: float | None = None
        self.t_tls: float | None = None
        # When the first byte of the answer (plaintext) arrived; set by the subclass's
        # on_data, or before it by the TLS layer that hands on several records at once.
        self.t_first: float | None = None
        self.done = False
        self.error: str | None = None
        self.handshaken = False
        self.offered_session = session is not None
        self._in: ssl.MemoryBIO | None = None
        self._out: ssl.MemoryBIO | None = None
        self._ssl: ssl.SSLObject | None = None
        self._tls: Any = None
        if ctx is None:
            pass
        elif isinstance(ctx, ssl.SSLContext):
            inc = self._in = ssl.MemoryBIO()
            out = self._out = ssl.MemoryBIO()
            # ``session``: resume it (a full handshake when the server declines).
            self._ssl = ctx.wrap_bio(
                inc, out, server_side=False, server_hostname=server_hostname,
                session=session,
            )
        else:
            self._tls = openssl_layer.connection(ctx, server_hostname, session)

    # -- for subclasses -------------------------------------------------------------------

    def on_ready(self) -> None:
        raise NotImplementedError

    def on_data(self, data: memoryview) -> None:
        raise NotImplementedError

    def on_lost(self, exc: BaseException | None) -> None:
        raise NotImplementedError

    def on_tls_failed(self, exc: BaseException | None) -> None:
        raise NotImplementedError

    def finish(self, error: str | None = None) -> None:
        """Record the result; the owner is notified on the way out. Later calls are
        ignored."""
        if self.done:
            return
        self.done = True
        self.error = error

    def send(self, data: bytes) -> None:
        """Write application data (encrypted when TLS)."""
        transport = self.transport
        if transport is None:
            return
        if self._tls is not None:
            openssl_layer.write(self._tls, data)
            self._o_flush()
        elif self._ssl is None:
            transport.write(data)
        else:
            self._ssl.write(data)
            self._flush()

    def start_tls(self, ctx: Any, server_hostname: str | None) -> None:
        """Begin TLS over this plain connection (STARTTLS), as if it had been made with
        ``ctx``: :meth:`on_ready` comes again once the handshake is done (``handshaken``
        is then True), :meth:`on_tls_failed` if it fails. Call it from ``on_data`` once the
        server has agreed; plaintext it sent after that is dropped."""
        if self.transport is None or self._ssl is not None or self._tls is not None:
            return
        if isinstance(ctx, ssl.SSLContext):
            inc = self._in = ssl.MemoryBIO()
            out = self._out = ssl.MemoryBIO()
            self._ssl = ctx.wrap_bio(inc, out, server_side=False, server_hostname=server_hostname)
            self._handshake()
        else:
            self._tls = openssl_layer.connection(ctx, server_hostname, None)
            self._o_handshake()

    @property
    def ssl_object(self) -> ssl.SSLObject | None:
        return self._ssl

    @property
    def tls_connection(self) -> Any:
        """The pyOpenSSL connection, when that layer made this one (else None)."""
        return self._tls

    @property
    def tls12_only(self) -> bool:
        """Whether the connection offered a TLS 1.2 session and TLS 1.2 alone
        (openssl_layer.connection)."""
        tls = self._tls
        return tls is not None and bool(tls.tls12_only)

    @property
    def session_reused(self) -> bool:
        """Whether the TLS handshake resumed the offered session, in either layer (False
        without TLS or before the handshake)."""
        if self._tls is not None:
            return openssl_layer.session_reused(self._tls)
        return self._ssl is not None and self._ssl.session_reused

    def release(self) -> None:
        """Drop the transport, TLS state and owner (the owner calls this after aborting)."""
        self.notify = None
        self.transport = None
        self._ssl = None
        self._tls = None
        self._in = self._out = None

    # -- reactor endpoint (engine.probes.reactor.Endpoint) ------------------------------------

    def connection_made(self, transport: SocketTransport) -> None:
        self.transport = transport
        self.t_connected = perf_counter()
        if self._tls is not None:
            self._o_handshake()
        elif self._ssl is None:
            self.on_ready()
        else:
            self._handshake()
        if self.done:
            self._notify()

    def connection_failed(self, exc: OSError) -> None:
        """The connect failed (refused, unreachable): the owner tries the next address."""
        if not self.done:
            self.connect_error = os_error_words(exc)
            self.finish(self.connect_error)
            self._notify()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._rview

    def buffer_updated(self, nbytes: int) -> None:
        if not self.done:
            if self._tls is not None:
                self._o_received(nbytes)
            elif self._ssl is None:
                self.on_data(self._rview[:nbytes])  # plain: no _received call on the way
            else:
                self._received(nbytes)
            if self.done:
                self._notify()

    def eof_received(self) -> bool | None:
        self._lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost(exc)

    # -- internals ----------------------------------------------------------------------------

    def _notify(self) -> None:
        notify = self.notify
        if notify is not None:
            self.notify = None
            notify()

    def _received(self, nbytes: int) -> None:
        """Ciphertext arrived (TLS connections only)."""
        inc = self._in
        assert inc is not None
        if nbytes <= _BIO_CHUNK:
            inc.write(self._rview[:nbytes])
            if self.handshaken:
                self._decrypt()
            else:
                self._handshake()
            return
        # A memory BIO never gives back capacity: fed 64 KiB at once, it would keep 64 KiB per
        # connection for good. Fed a TLS record's worth at a time, and drained in between, it
        # stays at one record.
        for start in range(0, nbytes, _BIO_CHUNK):
            inc.write(self._rview[start : min(start + _BIO_CHUNK, nbytes)])
            if self.handshaken:
                self._decrypt()
            else:
                self._handshake()
            if self.done or self._in is None:
                return

    def _lost(self, exc: BaseException | None) -> None:
        if self.done:
            return
        if (self._ssl is not None or self._tls is not None) and not self.handshaken:
            self.on_tls_failed(exc)
        else:
            self.on_lost(exc)
        self._notify()

    def _flush(self) -> None:
        out = self._out
        if out is not None and out.pending and self.transport is not None:
            self.transport.write(out.read())

    def _handshake(self) -> None:
        sslobj = self._ssl
        assert sslobj is not None
        try:
            sslobj.do_handshake()
        except ssl.SSLWantReadError:
            self._flush()
            return
        except ssl.SSLError as exc:
            self._flush()  # lets the peer see our alert; harmless if it is gone
            self.on_tls_failed(exc)
            return
        self.handshaken = True
        self.t_tls = perf_counter()
        self.on_ready()  # writes the request, if any, together with our last flight
        self._flush()
        assert self._in is not None
        if not self.done and self._in.pending:
            self._decrypt()

    def _decrypt(self) -> None:
        sslobj = self._ssl
        inc = self._in
        assert sslobj is not None and inc is not None
        pview = self._pview
        size = len(pview)
        # Loop while bytes are buffered: raising SSLWantReadError on every read is costly,
        # so only the last, partial record pays for it.
        while not self.done and (inc.pending or sslobj.pending()):
            try:
                # typeshed says bytes; with a buffer argument it is the count read. Through
                # Any: compiled (engine/runtime/compiled.py), a cast would still check for bytes.
                n: int = cast(Any, sslobj).read(size, pview)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self.on_lost(None)
                return
            except ssl.SSLError as exc:
                self.on_lost(exc)
                return
            if n == 0:
                self.on_lost(None)
                return
            self.on_data(pview[:n])
        # TLS 1.3 post-handshake messages (a KeyUpdate) can require an answer.
        self._flush()

    # -- the pyOpenSSL layer (engine/probes/openssl_layer.py) -----------------------------
    # The same steps as above; bytes move through OpenSSL's C calls straight between the
    # prober's buffers and OpenSSL (openssl_layer's receive, read_into, outgoing), reads go
    # on until OpenSSL wants more ciphertext.

    def _o_received(self, nbytes: int) -> None:
        tls = self._tls
        # OpenSSL reads the ciphertext where the reactor put it (openssl_layer.receive: no
        # copy into a BIO, no feeding a record's worth at a time), until it wants more.
        openssl_layer.receive(tls, openssl_layer.pointer(self._rview), nbytes)
        if self.handshaken:
            self._o_decrypt()
        else:
            self._o_handshake()
        if not self.done and self._tls is not None:
            openssl_layer.settle(tls)  # the shared buffer is the next read's

    def _o_flush(self) -> None:
        tls = self._tls
        transport = self.transport
        if tls is None or transport is None:
            return
        while True:
            data = openssl_layer.outgoing(tls)
            if data is None:
                return
            transport.write(data)
            if len(data) < _OUT_CHUNK:
                return

    def _o_handshake(self) -> None:
        tls = self._tls
        try:
            if not openssl_layer.handshake(tls):
                self._o_flush()  # wants the peer's next flight
                return
        except openssl_layer.Error as exc:
            self._o_flush()  # our alert, as above
            self.on_tls_failed(openssl_layer.as_ssl_error(exc))
            return
        self.handshaken = True
        self.t_tls = perf_counter()
        self.on_ready()  # writes the request, if any, together with our last flight
        self._o_flush()
        if not self.done:
            self._o_decrypt()  # what came with the server's last flight, if anything

    def _o_decrypt(self) -> None:
        """Decrypt what OpenSSL has into the plaintext buffer, record after record, and
        hand it to on_data when the buffer is full or OpenSSL wants more ciphertext: one
        call (and one parse) per socket read rather than per TLS record. ``t_first`` is
        taken as the first record is decrypted, as it was when each record was handed on."""
        if self.done:
            return
        tls = self._tls
        pview = self._pview
        size = len(pview)
        ptr = openssl_layer.pointer(pview)
        filled = 0
        while True:
            try:
                n = openssl_layer.read_into(tls, ptr + filled if filled else ptr, size - filled)
            except openssl_layer.Error as exc:
                if filled:
                    self.on_data(pview[:filled])
                if not self.done:
                    self.on_lost(openssl_layer.as_ssl_error(exc))
                return
            if n > 0:
                if self.t_first is None:
                    self.t_first = perf_counter()
                filled += n
                if filled < size:
                    continue
            if filled:
                self.on_data(pview[:filled])
                filled = 0
            if self.done:
                return
            if n == 0:
                break  # more ciphertext needed
            if n < 0:
                self.on_lost(None)  # close_notify
                return
        # TLS 1.3 post-handshake messages (a KeyUpdate) can require an answer.
        self._o_flush()
