"""Plumbing shared by the uptime and certificate probes.

* :func:`resolve_checked`: resolve a host ourselves and apply the private-address rule to every
  candidate, so the probes connect to an IP literal that was checked (DNS rebinding between the
  check and the connect cannot get through).
* :class:`ClientConn`: one client connection over a :mod:`engine.probes.reactor` socket
  (the reactor's ``Endpoint``), with TLS done in-process over ``ssl.MemoryBIO`` instead of the
  event loop's SSL transport: uvloop's transport keeps a 256 KiB read buffer per connection
  and shuts down gracefully (up to 30 s) on ``close()``; here all connections of a prober
  read into the prober's two buffers and are always ``abort()``ed. It also lets the probes
  time TCP connect and TLS handshake separately. Measurements are in
  ``engine/probes/http.py``.
* :class:`Deadlines`: per-probe deadlines without a timer per probe.
* Words for errors: every failure becomes a short phrase in plain English.

Why over ~600 lines, with a class (``ClientConn``) over ~300: the connection both probes
share is called by the reactor for every event; its TCP, TLS and deadline steps share its
fields and run compiled together.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import math
import socket
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any, Final, Protocol, cast

from engine.domain.netpolicy import Resolver, is_public_ip, literal_ip
from engine.probes import openssl_layer
from engine.probes.reactor import Reactor, SocketTransport

log = logging.getLogger(__name__)

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

# Longest host name we quote back in an error (a hostile Location header can be long).
_MAX_NAME_IN_ERROR: Final = 253


class ProbeFailure(Exception):
    """A probe step failed; ``str(exc)`` is the plain-words error of the outcome."""


def short(name: str) -> str:
    """``name`` cut to a length fit for an error message."""
    return name if len(name) <= _MAX_NAME_IN_ERROR else name[:_MAX_NAME_IN_ERROR] + "..."


def timeout_words(timeout: float) -> str:
    """``timed out after 10 s`` (``1.5 s``, ``0.25 s``: no trailing zeros)."""
    return f"timed out after {timeout:g} s"


def os_error_words(exc: BaseException | None) -> str:
    """Plain words for a socket-level failure."""
    if exc is None:
        return "connection closed"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return "connection reset"
    if isinstance(exc, OSError):
        code = exc.errno
        if code == errno.ENETUNREACH:
            return "network unreachable"
        if code == errno.EHOSTUNREACH:
            return "host unreachable"
        if code == errno.ETIMEDOUT:
            return "connection timed out"
        if code == errno.EADDRNOTAVAIL:
            return "source address not available"
        if exc.strerror:
            return "connection failed: " + exc.strerror.lower()
    return "connection failed: " + (str(exc) or type(exc).__name__)


def ssl_error_words(exc: ssl.SSLError) -> str:
    """``WRONG_VERSION_NUMBER`` -> ``wrong version number``; falls back to the message."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.lower().replace("_", " ")
    if isinstance(exc.strerror, str) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def ip_literal(host: str) -> str | None:
    """The canonical text of ``host`` when it is an IP literal (brackets allowed), else None.

    Runs for every hop, so names are told apart without ``ipaddress`` (about 5 us a parse):
    a host name never ends in a digit (its top-level label is not numeric) and never holds a
    colon; candidates are checked with ``inet_pton``. Forms ``inet_pton`` refuses but
    ``getaddrinfo`` would accept ("0177.1") count as names: the rule is then applied to what
    they resolve to, so they cannot slip past it.
    """
    if ":" in host:
        host = host.strip("[]")
        try:
            return socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, host))
        except (OSError, ValueError):
            lit = literal_ip(host)  # scoped addresses ("fe80::1%eth0")
            return str(lit) if lit is not None else None
    if not host or not host[-1].isdigit():
        return None
    try:
        return socket.inet_ntop(socket.AF_INET, socket.inet_pton(socket.AF_INET, host))
    except OSError:
        return None


@functools.lru_cache(maxsize=16384)
def public_address(ip: str) -> bool:
    """``is_public_ip`` with a cache: the same addresses come back probe after probe, and the
    ``ipaddress`` properties cost several microseconds per call."""
    return is_public_ip(ip)


async def resolve_checked(
    host: str,
    port: int,
    *,
    literal: str | None,
    family: int,
    allow_private: bool,
    resolver: Resolver | None = None,
) -> tuple[list[str], float | None]:
    """Addresses to connect to for ``host``, and the DNS time in ms (None for IP literals).

    ``literal`` is ``ip_literal(host)``, computed by the caller once per URL. Names are looked
    up with ``resolver`` when given (its answers filtered to ``family``), else with the event
    loop's ``getaddrinfo``; either way the answer is checked here, just before connecting,
    and the probe connects to the checked addresses only. Every candidate
    is checked against the private-address rule, not only the one we will use: a name that
    resolves to any non-public address is refused as a whole. Raises :class:`ProbeFailure`
    with the outcome's words (``DNS lookup failed: <name>``, ``blocked: <name> resolves to a
    non-public address (<ip>)``).
    """
    if literal is not None:
        return checked_literal(host, literal, allow_private), None
    else:
        t = perf_counter()
        try:
            if resolver is None:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    host, port, family=family, type=socket.SOCK_STREAM,
                    proto=socket.IPPROTO_TCP,
                )
                answer = [str(info[4][0]) for info in infos]
            else:
                answer = [
                    a for a in await resolver(host, port)
                    if family == socket.AF_UNSPEC or ip_family(a) == family
                ]
        except (OSError, UnicodeError, ValueError):
            # (A ProbeFailure from the resolver carries its own words and passes through.)
            raise ProbeFailure(f"DNS lookup failed: {short(host)}") from None
        dns_ms = (perf_counter() - t) * 1000.0
        addrs = []
        for a in answer:
            if a not in addrs:
                addrs.append(a)
        if not addrs:
            raise ProbeFailure(f"DNS lookup failed: {short(host)}")
    return checked_addresses(host, addrs, allow_private), dns_ms


def checked_literal(host: str, literal: str, allow_private: bool) -> list[str]:
    """:func:`resolve_checked` for an IP literal, without a coroutine: nothing to look up,
    only the private-address rule to apply."""
    if not allow_private and not public_address(literal):
        raise ProbeFailure(
            f"blocked: {short(host)} resolves to a non-public address ({literal})"
        )
    return [literal]


def checked_addresses(host: str, addrs: list[str], allow_private: bool) -> list[str]:
    """``addrs`` (an answer for ``host``, cached or fresh) once the private-address rule
    holds for every one of them; else :class:`ProbeFailure` naming the first that fails.
    Applied at every use of an answer, so a cached one is checked as often as a fresh one."""
    if not allow_private:
        for a in addrs:
            if not public_address(a):
                raise ProbeFailure(
                    f"blocked: {short(host)} resolves to a non-public address ({a})"
                )
    return addrs


def source_family(source_address: str | None) -> int:
    """Address family the probe may use: that of the source address, else any."""
    if source_address is None:
        return socket.AF_UNSPEC
    return socket.AF_INET6 if ":" in source_address else socket.AF_INET


def ip_family(ip: str) -> int:
    return socket.AF_INET6 if ":" in ip else socket.AF_INET


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


class Expiring(Protocol):
    def expire(self) -> None: ...


def wake_future(fut: asyncio.Future[None]) -> Callable[[], None]:
    """A ``notify`` for :class:`ClientConn` that resolves ``fut`` (unless it is already
    done: a cancelled waiter)."""

    def wake() -> None:
        if not fut.done():
            fut.set_result(None)

    return wake


class Deadlines:
    """Per-probe deadlines at a fraction of ``asyncio.timeout``'s cost.

    ``asyncio.timeout`` arms one event-loop timer per probe (under uvloop a libuv timer handle
    created, started, stopped and closed each time) plus its own bookkeeping: about 10 us of
    CPU per probe, a tenth of a whole plain-HTTP probe. Here a probe only adds its task to
    the set of the 4 ms slot its deadline falls in; one timer per slot that holds a task
    cancels whatever is still there when the slot ends. A probe can therefore run up to one
    slot (4 ms) past its timeout, which the probe contract allows ("+ a few ms").

    Use::

        task, slot, cancelling = deadlines.arm(timeout)
        try:
            ... awaits ...
        except asyncio.CancelledError:
            if not deadlines.expired(task, cancelling):
                raise               # cancelled from outside: not ours to swallow
            ... timed out ...
        finally:
            slot.discard(task)      # no await between here and the end of the probe

    A task is in a slot only while it is suspended inside the guarded block, so the timer's
    ``cancel()`` is always delivered inside it (as with ``asyncio.timeout``). Probes without
    a task register themselves with :meth:`arm_expiry` instead, and the timer calls their
    ``expire()``. One instance serves one event loop.
    """

    GRANULARITY: Final = 0.004

    __slots__ = ("_fired", "_last_end", "_last_slot", "_last_timeout", "_loop", "_slots")

    def __init__(self) -> None:
        self._slots: dict[int, set[Any]] = {}  # tasks (arm) and Expiring (arm_expiry)
        self._fired: set[asyncio.Task[object]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        # The last slot handed out, for the probes that start before it ends (most of them:
        # hundreds a slot at capacity): their deadline falls in it without a lookup.
        self._last_slot: set[Any] = set()
        self._last_end = -math.inf
        self._last_timeout = 0.0

    def arm(
        self, timeout: float, loop: asyncio.AbstractEventLoop | None = None
    ) -> tuple[asyncio.Task[object], set[asyncio.Task[object]], int]:
        """Register the current task; returns (task, its slot, its cancel count now).

        ``loop`` is the running loop when the caller has it already: on Python 3.11 each
        lookup of the running loop costs a ``getpid`` system call."""
        task = asyncio.current_task(loop)
        if task is None:
            raise RuntimeError("probes must run inside an asyncio task")
        if loop is None:
            loop = task.get_loop()
        slot = self._slot(timeout, loop)
        slot.add(task)
        return task, slot, task.cancelling()

    def expired(self, task: asyncio.Task[object], cancelling: int) -> bool:
        """After a CancelledError: True when it was this deadline's and nothing else's."""
        if task not in self._fired:
            return False
        self._fired.discard(task)
        # Also cancelled from outside meanwhile: the caller must see that cancellation.
        return task.uncancel() <= cancelling

    def arm_expiry(
        self, timeout: float, loop: asyncio.AbstractEventLoop, target: Expiring
    ) -> set[Expiring]:
        """Register ``target``, whose ``expire()`` is called when its deadline passes unless
        the caller took it out of the returned slot first (``slot.discard(target)``). For
        probes driven by callbacks, without a task to cancel."""
        slot = self._slot(timeout, loop)
        slot.add(target)
        return slot

    def _slot(self, timeout: float, loop: asyncio.AbstractEventLoop) -> set[Any]:
        """The slot a deadline ``timeout`` from now falls in, with its timer."""
        if loop is not self._loop:
            # A new event loop (tests make one per test): slots of the old one are dead and
            # must not swallow this loop's deadlines.
            self._loop = loop
            self._slots = {}
            self._fired = set()
            self._last_end = -math.inf
        due = loop.time() + timeout
        # Time only moves on, so with the same timeout a deadline up to the last slot's end
        # falls in that slot (which _fire forgets as it fires).
        if due <= self._last_end and timeout == self._last_timeout:
            return self._last_slot
        key = math.ceil(due / self.GRANULARITY)
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = set()
            loop.call_at(key * self.GRANULARITY, self._fire, key, slot)
        self._last_slot = slot
        self._last_end = key * self.GRANULARITY
        self._last_timeout = timeout
        return slot

    def _fire(self, key: int, slot: set[object]) -> None:
        if self._slots.get(key) is slot:
            del self._slots[key]
        if slot is self._last_slot:
            self._last_end = -math.inf
        items = list(slot)
        slot.clear()
        for item in items:
            if isinstance(item, asyncio.Task):
                self._fired.add(item)
                item.cancel()
                continue
            try:
                cast(Expiring, item).expire()
            except Exception:
                # One faulty target must not keep the others of its slot running forever.
                log.exception("probe deadline handler failed")


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
