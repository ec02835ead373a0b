"""The uptime probe: one GET over a fresh connection, redirects followed.

Contract (decisions.md, "Uptime check"): :meth:`HttpProber.probe` never raises (except
``asyncio.CancelledError``) and never runs longer than ``timeout`` plus scheduling noise; the
whole probe, every redirect hop included, shares that one deadline. Each hop:

1. resolves the host itself (``loop.getaddrinfo``, or the ``resolver`` it was given: the
   engine gives a caching :class:`~engine.probes.resolver.ProbeResolver`, whose cached
   answers cost no task and no await) and
   refuses the hop when ANY candidate address is non-public (unless ``allow_private``), then
   connects to the checked IP literal, with the name in ``Host`` and in SNI. DNS rebinding
   between the check and the connect cannot reach a private address, and every redirect hop
   is checked the same way;
2. opens one fresh TCP connection (bound to ``source_address`` when set), plus TLS for https
   WITHOUT verifying the certificate (the certificate check owns that; a failed handshake is
   still a failure, ``TLS handshake failed: <reason>``), resuming the TLS session of the
   last probe of the same address when one is kept (``tls_sessions``,
   engine/probes/sessions.py). TLS is pyOpenSSL's over memory BIOs
   (``tls_layer="pyopenssl"``, the OpenSSL of the ``cryptography`` wheel:
   engine/probes/openssl_layer.py), or the ``ssl`` module's (``tls_layer="ssl"``);
3. writes ``GET`` with ``Connection: close`` and ``User-Agent``, parses the response with
   llhttp (httptools) as bytes arrive, reads at most ``max_header_bytes`` of status line and
   headers and at most ``max_body`` of body, then aborts the connection.

301/302/303/307/308 with a ``Location`` are followed (relative references resolved against
the current URL) up to ``max_redirects`` times; 1xx interim responses (103 Early Hints) are
skipped. With a monitor's own request, once a hop leaves the first hop's origin no hop sends
its secret headers (engine.domain.secretheaders), and a hop that would carry its body to
another origin (a 307/308, or a 301/302 of a PUT) is not followed: the probe fails saying
so. Once the final status line and headers are read the probe has its answer: a body that
is cut short, malformed or still streaming at the deadline does not turn it into an error.

How it stays cheap (one plain non-blocking socket on the prober's
:class:`~engine.probes.reactor.Reactor`, no task per probe on the engine's path, httptools
with no Python call per header line, reads into two buffers the prober owns, body bytes
counted and never copied, one deadline timer per 4 ms slot), what it costs and what it holds
in memory per in-flight HTTPS probe: docs/performance.md ("http", "Memory").

Why over ~600 lines, with a class (``_Probe``) over ~300: one probe is one state machine
(connect, TLS, request, the parser's callbacks, redirects, its deadline) whose steps share
its fields and run compiled for every event of every probe; split, each step would reach
into the others' state through calls on the per-probe path.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Callable
from time import perf_counter
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import quote, urljoin, urlsplit

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser

from engine.domain.netpolicy import Resolver
from engine.domain.outcomes import HttpOutcome
from engine.probes import openssl_layer
from engine.probes._net import READ_BUFFER_SIZE, ClientConn, reactor_for
from engine.probes.addresses import (
    checked_addresses,
    checked_literal,
    ip_literal,
    resolve_checked,
    source_family,
)
from engine.probes.deadlines import Deadlines
from engine.probes.failures import (
    ProbeFailure,
    os_error_words,
    short,
    ssl_error_words,
    timeout_words,
)
from engine.probes.judges import FAILED, Judges
from engine.probes.reactor import Reactor
from engine.probes.request import RequestSpec
from engine.probes.resolver import DnsAnswer, ProbeResolver
from engine.probes.sessions import TlsSessions

log = logging.getLogger(__name__)

_A = TypeVar("_A")

# The uptime probe's TLS layers (HttpProber's tls_layer): pyOpenSSL with the OpenSSL of the
# cryptography wheel, or the ssl module with the system's.
TLS_LAYERS: Final = ("pyopenssl", "ssl")

_REDIRECT_STATUSES: Final = frozenset((301, 302, 303, 307, 308))
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

# A request target may only hold printable ASCII without spaces; anything else (from a hostile
# Location header, or a URL with raw UTF-8) is percent-encoded. Existing escapes are kept.
_UNSAFE_TARGET: Final = re.compile(r"[^\x21-\x7e]")
_TARGET_SAFE: Final = "".join(chr(c) for c in range(0x21, 0x7F))
# RFC 3986 reg-name characters: nothing that could break the Host header line.
_HOST_NAME: Final = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=%-]+")
# Split authorities kept per prober (HttpProber._hop): a few hundred bytes each, never
# evicted (a pure function of the text), so at most ~0.3 MB whatever the number of monitors.
_AUTHORITIES: Final = 1024
# A path (and query) that urlsplit leaves as it is after an authority of the plain form:
# printable ASCII without "#", and no "?" at its very end (urlsplit drops an empty query).
_PLAIN_TARGET: Final = re.compile(r"/[\x21-\x22\x24-\x7e]*(?<!\?)")
# The characters of a host name in the API's normalised form (_PLAIN_URL's host); a set:
# ``issuperset`` checks a name in ~60% of the time ``str.strip`` with these takes
# (about as many instructions: ~1.8k against ~2k for a 15-character name).
_NAME_CHARS: Final = frozenset("abcdefghijklmnopqrstuvwxyz0123456789.-")
# The API's normalised URL form (see _Target._plain); anything else takes urlsplit.
_PLAIN_URL: Final = re.compile(
    r"(https?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(/[\x21-\x22\x24-\x3e\x40-\x7e]*)?"
    r"(?:\?([\x21-\x22\x24-\x7e]*))?\Z"
)


def _plain_target(target: str) -> bool:
    """``_PLAIN_TARGET.fullmatch(target)`` for a ``target`` that starts with "/", in string
    methods: 0.28 us instead of 0.45-0.68 (a test holds the two to the same answers)."""
    return (
        target.isascii()
        and target.isprintable()
        and " " not in target
        and "#" not in target
        and target[-1] != "?"
    )


class _Locator:
    """Finds the final response's ``Location`` by parsing the head a second time, with a
    header callback.

    The probe's own parser has none: httptools makes one Python call per header line (sites
    send 10-20), for a value that matters only after a redirect status. A locator runs only
    for a redirect whose head came in one read (parsed again from that read) or for a head
    that spans reads (fed every read from the first one on, before the probe's parser: the
    head's bytes are not kept). Either way it parses the same bytes as the probe's parser,
    so it finds what a header callback on that parser would have: the last ``Location`` of
    the final (non-1xx) head.
    """

    __slots__ = ("final", "location", "parser")

    def __init__(self) -> None:
        self.location: bytes | None = None
        self.final = False
        self.parser: HttpResponseParser | None = HttpResponseParser(self)

    def feed(self, data: memoryview) -> None:
        parser = self.parser
        if parser is None:
            return
        try:
            parser.feed_data(data)
        except (HttpParserError, HttpParserUpgrade):
            pass  # the probe's own parser meets the same bytes and decides
        if self.final:
            self.parser = None  # done; also breaks parser -> bound methods -> self

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self.final and len(name) == 8 and name.lower() == b"location":
            self.location = value

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        if self.parser.get_status_code() < 200:
            self.location = None  # interim response (100, 103): the real one follows
        else:
            self.final = True  # header lines after this one are trailers: not ours


class _HttpConn(ClientConn):
    """One request/response exchange; also the httptools parser's callback object."""

    __slots__ = (
        "body_seen",
        "chunk",
        "hdr_seen",
        "headers_done",
        "location",
        "locator",
        "max_body",
        "max_header",
        "parser",
        "redirecting",
        "request",
        "status",
        "t_sent",
    )

    def __init__(
        self,
        notify: Callable[[], None],
        rview: memoryview,
        pview: memoryview,
        ctx: Any,
        server_hostname: str | None,
        request: bytes,
        max_header: int,
        max_body: int,
        session: Any = None,
    ) -> None:
        # Not super(): in Python 3.11 that builds a super object on every connection.
        ClientConn.__init__(self, notify, rview, pview, ctx, server_hostname, session)
        self.request = request
        self.max_header = max_header
        self.max_body = max_body
        self.hdr_seen = 0
        self.body_seen = 0
        self.headers_done = False
        self.redirecting = False
        self.status: int | None = None
        self.location: bytes | None = None
        self.locator: _Locator | None = None
        self.chunk: memoryview | None = None
        self.t_sent: float | None = None
        self.parser: HttpResponseParser | None = HttpResponseParser(self)

    # -- ClientConn hooks -------------------------------------------------------------------

    def on_ready(self) -> None:
        self.send(self.request)
        self.t_sent = perf_counter()

    def on_data(self, data: memoryview) -> None:
        if self.t_first is None:
            self.t_first = perf_counter()
        if self.headers_done:
            self._body(data)
            return
        room = self.max_header - self.hdr_seen
        if len(data) <= room:
            self.hdr_seen += len(data)
            self._feed(data)
            return
        # This read would cross the header limit: the headers must end within what is left.
        self.hdr_seen = self.max_header
        self._feed(data[:room])
        if self.done:
            return
        if not self.headers_done:
            self.finish("headers too large")
            return
        self._body(data[room:])

    def on_lost(self, exc: BaseException | None) -> None:
        if self.headers_done:
            self.finish()  # status line and headers were read: that is the answer
        elif isinstance(exc, ssl.SSLError):
            self.finish("TLS error: " + ssl_error_words(exc))
        elif exc is None:
            self.finish("connection closed before a response" if self.t_first is None
                        else "connection closed mid-response")
        else:
            self.finish(os_error_words(exc))

    def on_tls_failed(self, exc: BaseException | None) -> None:
        if isinstance(exc, ssl.SSLError):
            words = ssl_error_words(exc)
        elif exc is None:
            words = "connection closed"
        else:
            words = os_error_words(exc)
        self.finish("TLS handshake failed: " + words)

    # -- httptools callbacks --------------------------------------------------------------

    # No on_header: see _Locator. (Collecting headers in a dict through its C __setitem__
    # was rejected: a hostile target could make a probe hold thousands of entries within
    # the 64 KiB header limit.)

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        status = self.parser.get_status_code()
        if status < 200:
            if status == 101:  # a protocol switch we never asked for
                self.finish("invalid HTTP response")
            return  # interim response (100, 103): the real one follows
        self.status = status
        self.headers_done = True
        if status in _REDIRECT_STATUSES:
            locator = self.locator
            if locator is None:
                # The whole head came in the read being parsed: parse it again.
                assert self.chunk is not None
                locator = self.locator = _Locator()
                locator.feed(self.chunk)
            self.location = locator.location
            self.locator = None
            if self.location is not None:
                self.redirecting = True
                self.finish()  # no need for the body of a redirect

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.finish()

    # -- internals --------------------------------------------------------------------------

    def _feed(self, data: memoryview) -> None:
        parser = self.parser
        if parser is None:
            return
        head = not self.headers_done
        if head:
            if self.locator is not None:
                self.locator.feed(data)  # before the parser: on_headers_complete reads it
            self.chunk = data
        try:
            parser.feed_data(data)
        except (HttpParserError, HttpParserUpgrade):
            # After the headers a malformed body does not matter; before, nothing usable came.
            self.finish(None if self.headers_done else "invalid HTTP response")
        if head and not self.headers_done and not self.done and self.locator is None:
            # The head goes on in the next read, and this was its first: from here on a
            # locator follows the head, fed from the start.
            self.locator = _Locator()
            self.locator.feed(data)

    def _body(self, data: memoryview) -> None:
        room = self.max_body - self.body_seen
        if len(data) >= room:
            self.body_seen = self.max_body
            self._feed(data[:room])
            self.finish()  # read as much body as we ever read
            return
        self.body_seen += len(data)
        self._feed(data)


class _CaptureConn(_HttpConn):
    """The connection of a probe with its own request: also keeps the final
    response's headers that assertions name, the ``Location`` (no ``_Locator`` needed), and
    with ``capture`` at most ``max_body`` bytes of the body. Plain probes never use it, so
    their parser keeps having no header or body callback."""

    def __init__(
        self,
        notify: Callable[[], None],
        rview: memoryview,
        pview: memoryview,
        ctx: Any,
        server_hostname: str | None,
        request: bytes,
        max_header: int,
        max_body: int,
        spec: RequestSpec,
        session: Any = None,
    ) -> None:
        _HttpConn.__init__(
            self, notify, rview, pview, ctx, server_hostname, request, max_header,
            spec.capture_limit if spec.reads_body else max_body, session,
        )
        self.follow = spec.follow_redirects
        self.wanted = spec.wanted_headers
        self.headers: dict[str, str] = {}
        self.capture: bytearray | None = bytearray() if spec.reads_body else None
        self.complete = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.headers_done:
            return  # trailers
        key = name.decode("latin-1").lower()
        if key == "location":
            self.location = value
        if key in self.wanted:
            text = value.decode("utf-8", "replace")
            old = self.headers.get(key)
            self.headers[key] = text if old is None else old + ", " + text

    def on_body(self, body: bytes) -> None:
        capture = self.capture
        if capture is not None:
            room = self.max_body - len(capture)
            if room > 0:
                capture += body[:room]

    def on_headers_complete(self) -> None:
        assert self.parser is not None
        status = self.parser.get_status_code()
        if status < 200:
            self.location = None
            self.headers.clear()  # an interim response's: the real one follows
            if status == 101:
                self.finish("invalid HTTP response")
            return
        self.status = status
        self.headers_done = True
        if self.follow and status in _REDIRECT_STATUSES and self.location is not None:
            self.redirecting = True
            self.finish()
        elif self.capture is None:
            self.finish()  # nothing to read after the head

    def on_message_complete(self) -> None:
        if self.headers_done:
            self.complete = True
            self.finish()


class _Target:
    """One hop's URL, split and checked."""

    __slots__ = ("host", "host_header", "ip", "port", "target", "tls")

    tls: bool
    ip: str | None  # the canonical IP literal, None for a host name
    host: str
    port: int
    host_header: str
    target: str

    def __init__(self, url: str, general: bool = False) -> None:
        """Split ``url``; ``general``: with urlsplit even when the plain form matches (tests
        compare the two)."""
        if general:
            self._general(url)
        elif not self._named(url):
            m = _PLAIN_URL.match(url)
            if m is not None:
                self._plain(m)
            else:
                self._general(url)

    def _named(self, url: str) -> bool:
        """The plain form with a host name (not an IP literal) split by string methods, or
        False (nothing set) for anything else. By name every monitor is an authority of its
        own, more than the prober keeps split (_AUTHORITIES), so this runs on every probe of
        every name: ~5.7k instructions compiled (a third of them the host's characters)
        where the pattern and ``_plain`` took ~8.2k (callgrind, 10,000 names).
        It accepts only what ``_PLAIN_URL`` does, and splits it as ``_plain`` would (a test
        compares the three ways): a lower-case host of ``[a-z0-9.-]`` not ending in a digit
        (so no IP literal), an optional port of 1-5 decimal digits without a leading zero
        (``_plain`` writes the number back into the Host header: "08080" becomes "8080"),
        and a path and query that :func:`_plain_target` admits."""
        if url.startswith("http://"):
            tls, start, default = False, 7, 80
        elif url.startswith("https://"):
            tls, start, default = True, 8, 443
        else:
            return False
        slash = url.find("/", start)
        if slash < 0:
            authority, target = url[start:], "/"
        else:
            authority, target = url[start:slash], url[slash:]
            if not _plain_target(target):
                return False
        if not authority.isascii():
            return False
        host, colon, port_text = authority.partition(":")
        if not host or host[-1].isdigit() or not _NAME_CHARS.issuperset(host):
            return False
        if not colon:
            port, host_header = default, host
        elif 0 < len(port_text) <= 5 and port_text.isdigit() and port_text[0] != "0":
            port = int(port_text)
            if port > 65535:
                return False
            host_header = host if port == default else authority
        else:
            return False
        self.tls = tls
        self.ip = None
        self.host = host
        self.port = port
        self.host_header = host_header
        self.target = target
        return True

    def _plain(self, m: re.Match[str]) -> None:
        """The API's normalised form, split without ``urlsplit`` (about 1 us instead of 15:
        with more monitors than any cache holds, every probe splits its URL). The pattern
        admits only what ``urlsplit`` leaves unchanged: a lower-case scheme and host name
        (which ``hostname`` would lower-case), a decimal port, a path and query of printable
        ASCII without ``#``, so both ways give the same target (a test compares them)."""
        scheme, host, port_text, path, query = m.groups()
        tls = scheme == "https"
        default = 443 if tls else 80
        port = default if port_text is None else int(port_text)
        if port > 65535:
            self._general(m.string)  # urlsplit's "invalid URL"
            return
        host_header = host if port == default else f"{host}:{port}"
        target = path or "/"
        if query:
            target = f"{target}?{query}"
        self.tls = tls
        self.ip = ip_literal(host)
        self.host = host
        self.port = port
        self.host_header = host_header
        self.target = target

    def _general(self, url: str) -> None:
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            raise ProbeFailure(f"invalid URL: {short(url)}") from None
        scheme = parts.scheme
        default = _DEFAULT_PORTS.get(scheme)
        if default is None:
            raise ProbeFailure(f"unsupported URL: {short(url)}")
        host = parts.hostname
        if not host:
            raise ProbeFailure(f"invalid URL: {short(url)}")
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                raise ProbeFailure(f"invalid host name: {short(host)}") from None
        ip = ip_literal(host)
        if ":" in host:
            if ip is None:
                raise ProbeFailure(f"invalid host name: {short(host)}")
            host_header = f"[{host}]"
        elif ip is not None or _HOST_NAME.fullmatch(host):
            host_header = host
        else:
            raise ProbeFailure(f"invalid host name: {short(host)}")
        if port is None:
            port = default
        elif port != default:
            host_header = f"{host_header}:{port}"
        target = parts.path or "/"
        if parts.query:
            target = f"{target}?{parts.query}"
        if _UNSAFE_TARGET.search(target):
            target = quote(target, safe=_TARGET_SAFE, errors="surrogateescape")
        self.tls = scheme == "https"
        self.ip = ip
        self.host = host
        self.port = port
        self.host_header = host_header
        self.target = target


# What RequestSpec.check judges: status, total ms, wanted headers, body read, body cut.
_Judged = tuple[int, float, dict[str, str], bytes | None, bool]
# Worker threads for costly assertions (regex searches, large json bodies): CPU, not I/O;
# engine/probes/judges.py shares them fairly between accounts.
JUDGE_THREADS: Final = 2


class HttpProber:
    """Runs uptime probes; one instance serves any number of concurrent probes on one loop.

    It keeps no connections between probes; its state is the TLS context, two read buffers,
    the request header tail, split authorities, the deadlines and the reactor of its loop.
    ``aclose()`` drops the TLS context and the reactor (probes still running end at once);
    the prober stays usable.
    """

    def __init__(
        self,
        *,
        timeout: float,
        user_agent: str,
        source_address: str | None = None,
        allow_private: bool = False,
        max_redirects: int = 5,
        max_body: int = 1 << 20,
        max_header_bytes: int = 64 * 1024,
        resolver: Resolver | None = None,
        tls_sessions: int = 50_000,
        tls_layer: str = "pyopenssl",
        metrics: Any = None,
        batch: float = 0.0,
    ) -> None:
        """``batch``: seconds between polls of the probes' sockets under load (0: every
        ready socket at once; engine/probes/reactor.py says when it applies)."""
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if tls_layer not in TLS_LAYERS:
            raise ValueError(f"tls_layer must be one of {', '.join(TLS_LAYERS)}")
        if any(c in user_agent for c in "\r\n\0"):
            raise ValueError("user_agent must be a single header line")
        self._timeout = timeout
        self._timeout_words = timeout_words(timeout)
        self._judges = Judges(JUDGE_THREADS)
        self._local = (source_address, 0) if source_address else None
        self._family = source_family(source_address)
        self._allow_private = allow_private
        self._resolver = resolver
        # A ProbeResolver is used without a task per lookup: a cached answer at once, a
        # miss through a callback (see _Probe._hop).
        self._dns = resolver if isinstance(resolver, ProbeResolver) else None
        self._max_redirects = max(0, max_redirects)
        self._max_body = max(0, max_body)
        self._max_header = max(1, max_header_bytes)
        self._tail = (
            f"\r\nUser-Agent: {user_agent}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        ).encode("latin-1")
        self._user_agent = user_agent
        self._rview = memoryview(bytearray(READ_BUFFER_SIZE))
        self._pview = memoryview(bytearray(READ_BUFFER_SIZE))
        # The TLS layer (TLS_LAYERS): pyOpenSSL where it is installed, measured cheaper
        # (engine/probes/openssl_layer.py); the ssl module otherwise.
        self._tls_layer = tls_layer if openssl_layer.AVAILABLE else "ssl"
        self._ctx: Any = None  # ssl.SSLContext, or a pyOpenSSL Context
        self._authorities: dict[str, tuple[_Target, bytes]] = {}
        # TLS sessions to resume, by (address, port, SNI): the uptime probe does not
        # verify the certificate (the certificate check does, with a full handshake each
        # time), so an abbreviated handshake tells it all it needs. At most
        # ``tls_sessions`` (0: no resumption; engine/probes/sessions.py says which are
        # kept); through pyOpenSSL ~0.5 KB each (compact bytes, no certificate). See
        # _Probe._keep_session.
        self._sessions = TlsSessions(tls_sessions)
        # Completed TLS handshakes of uptime probes, and how many resumed a session
        # (``upwatch_tls_handshakes_total{resumed}`` when ``metrics`` is given).
        self.tls_handshakes = 0
        self.tls_resumed = 0
        self._m_tls: tuple[Any, Any] | None = None
        if metrics is not None:
            self._m_tls = (metrics.tls_handshakes.labels(resumed="false"),
                           metrics.tls_handshakes.labels(resumed="true"))
        self._deadlines = Deadlines()
        self._reactor: Reactor | None = None
        self._batch = batch

    def _tls_context(self) -> Any:
        ctx = self._ctx
        if ctx is None and self._tls_layer == "pyopenssl":
            ctx = self._ctx = openssl_layer.client_context()
        elif ctx is None:
            # No trust store loaded: the uptime probe does not verify certificates, and an
            # empty context stays small. One context serves every connection of this prober.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            ctx.set_alpn_protocols(["http/1.1"])
            self._ctx = ctx
        return ctx

    @property
    def polling(self) -> bool:
        """Whether this prober's sockets are polled on a timer now (``batch``, under load)."""
        return self._reactor is not None and self._reactor.polling

    @property
    def resolver(self) -> ProbeResolver | None:
        """The caching resolver this prober was given, if any (to share with others)."""
        return self._dns

    async def aclose(self) -> None:
        """Drop the TLS context and the reactor (probes still running fail at once), and
        close the caching resolver's channel (its cache stays)."""
        self._ctx = None
        self._sessions.clear()  # the ssl module's resume only with the context that made them
        self._judges.close()
        if self._reactor is not None:
            self._reactor.close()
            self._reactor = None
        if self._dns is not None:
            await self._dns.aclose()

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        url: str,
        done: Callable[[_A, HttpOutcome], None],
        arg: _A,
        spec: RequestSpec | None = None,
    ) -> ProbeHandle:
        """Start probing ``url`` on ``loop`` (the running loop); ``done(arg, outcome)`` is
        called once with the outcome, never from inside this call, unless the returned
        handle is cancelled first. The outcome follows :meth:`probe`'s contract.

        No task per probe: the probe is driven by its connection's callbacks and its
        deadline (a task only for a DNS lookup). ``done`` runs inside those callbacks; it
        must not raise (an exception is logged and the probe's outcome stands).

        ``spec``: the monitor's own request and assertions (None: the plain GET).
        """
        reactor = self._reactor
        if reactor is None or reactor.loop is not loop:
            reactor = self._reactor = reactor_for(reactor, loop, self._batch)
        p = _Probe(self, reactor, url, done, arg)
        if spec is not None:
            p.spec = spec
            p.method = spec.method
            p.with_body = spec.body is not None
        p.slot = self._deadlines.arm_expiry(self._timeout, loop, p)
        p.begin()
        return p

    async def probe(self, url: str, spec: RequestSpec | None = None) -> HttpOutcome:
        """Probe ``url`` (with ``spec``'s request and assertions when given); never raises
        except CancelledError, never exceeds the timeout.

        Cancelling the caller aborts the probe at once.
        """
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[HttpOutcome] = loop.create_future()
        handle = self.start(loop, url, _resolve, fut, spec)
        try:
            return await fut
        finally:
            handle.cancel()  # no-op once the outcome is in

    def _hop(self, url: str) -> tuple[_Target, bytes]:
        """The split URL and its request bytes.

        URLs are not cached: a cache as large as the monitors would cost ~350 B each, and a
        smaller one missed on every probe. What repeats is the part before the path: a
        few hundred authorities (scheme, host, port) kept split, with the request's
        ``HTTP/1.1``, ``Host`` and header tail already in bytes, serve the API's form
        with two slices, one match and one concatenation per probe."""
        start = 7 if url.startswith("http://") else 8 if url.startswith("https://") else 0
        slash = url.find("/", start) if start else -1
        if slash > 0:
            known = self._authorities.get(url[:slash])
            if known is not None:
                target = url[slash:]
                if _plain_target(target):  # _PLAIN_TARGET.fullmatch(target)
                    hop, rest = known
                    return hop, b"GET " + target.encode("ascii") + rest
        hop = _Target(url)  # raises ProbeFailure
        rest = b" HTTP/1.1\r\nHost: " + hop.host_header.encode("ascii") + self._tail
        if slash > 0 and len(self._authorities) < _AUTHORITIES:
            m = _PLAIN_URL.match(url)
            if m is not None and m.start(4) == slash:
                # The same split for any path under this authority (see _PLAIN_TARGET).
                # The entry's hop is shared: its ``target`` is this URL's, and unused.
                self._authorities[url[:slash]] = (hop, rest)
        return hop, b"GET " + hop.target.encode("ascii") + rest


def _settle(conn: _HttpConn, out: HttpOutcome, t_start: float) -> None:
    """Record the hop's phases, abort its connection, and break reference cycles."""
    if conn.t_connected is not None:
        out.connect_ms = (conn.t_connected - t_start) * 1000.0
        if conn.t_tls is not None:
            out.tls_ms = (conn.t_tls - conn.t_connected) * 1000.0
    if conn.t_first is not None and conn.t_sent is not None:
        out.ttfb_ms = (conn.t_first - conn.t_sent) * 1000.0
    if conn.headers_done and not conn.redirecting and conn.error is None:
        out.status_code = conn.status
    transport = conn.transport
    if transport is not None:
        transport.abort()
    conn.release()
    conn.parser = None  # parser -> bound methods -> conn -> parser
    conn.chunk = None
    if conn.locator is not None:
        conn.locator.parser = None  # same cycle in the locator
        conn.locator = None


def _resolve(fut: asyncio.Future[HttpOutcome], outcome: HttpOutcome) -> None:
    if not fut.done():
        fut.set_result(outcome)


class ProbeHandle(Protocol):
    def cancel(self) -> None:
        """Stop the probe without calling back; nothing happens once it has called back."""


class _Probe:
    """One uptime probe in flight: walks hops and addresses from its connection's callbacks.

    Every path ends in :meth:`_complete` (which calls back once) or :meth:`cancel` (which
    does not); both release the connection, the DNS task and the deadline.
    """

    __slots__ = (
        "abroad",
        "addrs",
        "arg",
        "captured",
        "conn",
        "dns",
        "done",
        "hop",
        "last_error",
        "method",
        "next_addr",
        "origin",
        "out",
        "prober",
        "reactor",
        "request",
        "slot",
        "spec",
        "starting",
        "t0",
        "t_start",
        "url",
        "with_body",
    )

    def __init__(
        self,
        prober: HttpProber,
        reactor: Reactor,
        url: str,
        done: Callable[[Any, HttpOutcome], None],
        arg: object,
    ) -> None:
        self.prober = prober
        self.reactor = reactor
        self.url = url
        self.done: Callable[[Any, HttpOutcome], None] | None = done
        self.arg = arg
        self.out = HttpOutcome(None, None, 0.0, None, None, None, None)
        self.t0 = perf_counter()
        self.t_start = self.t0
        self.slot: set[Any] | None = None
        self.conn: _HttpConn | None = None
        self.dns: asyncio.Task[tuple[list[str], float | None]] | None = None
        self.hop: _Target | None = None
        self.request = b""
        self.addrs: list[str] = []
        self.next_addr = 0
        self.last_error = "connection failed"
        self.starting = False
        # A monitor's own request; None on the plain path.
        self.spec: RequestSpec | None = None
        self.method = "GET"
        self.with_body = False
        # The first hop's (tls, host, port); abroad: a hop left it, so no later hop sends
        # the monitor's secret headers, even one back on it (a foreign server chose it).
        self.origin: tuple[bool, str, int] | None = None
        self.abroad = False
        self.captured: _CaptureConn | None = None

    # -- ends ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        if self.done is None:
            return
        self.done = None
        self._release()

    def expire(self) -> None:
        """The deadline passed (called by Deadlines)."""
        if self.done is None:
            return
        self.slot = None  # the deadline took it out of its slot already
        self._release()
        # A final status already read stands (the body was still streaming).
        if self.out.status_code is None:
            self.out.error = self.prober._timeout_words
        self._complete()

    def _fail(self, error: str) -> None:
        self.out.status_code = None
        self.out.error = error
        self._complete()

    def _complete(self) -> None:
        done = self.done
        if done is None:
            return
        if self.starting:
            # Ended inside start() (a bad URL, or every address refused the attempt at once):
            # call back on the next loop turn instead.
            self.starting = False
            self.reactor.loop.call_soon(self._complete)
            return
        self._release()
        out = self.out
        out.total_ms = (perf_counter() - self.t0) * 1000.0
        spec = self.spec
        if spec is not None:
            inputs = self._assertion_inputs(spec, out)
            if inputs is not None:
                body = inputs[3]
                if spec.off_loop(0 if body is None else len(body)):
                    # A regex search or a large json body: judged on a worker thread by the
                    # probe's deadline; a cancel() meanwhile drops it (done stays set till then).
                    left = self.prober._timeout - out.total_ms / 1000.0
                    self.prober._judges.submit(
                        self.reactor.loop, spec.owner, left, spec.check, inputs, self._judged,
                        self._wanted)
                    return
                out.assertion_error = self._check(spec, inputs)
        self._call_back()

    def _judged(self, verdict: str | None) -> None:
        """The verdict on the assertions from a worker thread (or its deadline's words)."""
        if self.done is None:
            return  # cancelled meanwhile
        self.out.assertion_error = verdict
        self._call_back()

    def _wanted(self) -> bool:
        return self.done is not None

    def _call_back(self) -> None:
        done = self.done
        if done is None:
            return
        self.done = None
        arg = self.arg
        self.arg = None
        done(arg, self.out)

    def _release(self) -> None:
        slot = self.slot
        if slot is not None:
            self.slot = None
            slot.discard(self)
        conn = self.conn
        if conn is not None:
            self.conn = None
            _settle(conn, self.out, self.t_start)
            if isinstance(conn, _CaptureConn):
                self.captured = conn
        dns = self.dns
        if dns is not None:
            self.dns = None
            dns.cancel()

    # -- steps --------------------------------------------------------------------------------

    def begin(self) -> None:
        """The first hop; an end found before any I/O is reported on the next loop turn
        (``done`` is never called from inside ``start``)."""
        self.starting = True
        try:
            self._guarded(self._hop)
        finally:
            self.starting = False

    def _guarded(self, step: Callable[[], None]) -> None:
        """Run a step: a ProbeFailure ends the probe with its words; anything else is a bug,
        logged, and ends it as an internal error."""
        try:
            step()
        except ProbeFailure as exc:
            self._fail(str(exc))
        except Exception:
            log.exception("uptime probe of %s failed unexpectedly", self.url)
            self._fail("probe failed: internal error")

    def _assertion_inputs(self, spec: RequestSpec, out: HttpOutcome) -> _Judged | None:
        """What the monitor's assertions judge of the final response (once, at the end),
        or None when there is nothing to judge."""
        conn = self.captured
        self.captured = None
        status = out.status_code
        if status is None or not spec.assertions:
            return None
        headers: dict[str, str] = {}
        body: bytes | None = None
        cut = False
        if conn is not None:
            headers = conn.headers
            capture = conn.capture
            if capture is not None:
                body = bytes(capture)
                cut = conn.body_seen >= conn.max_body and not conn.complete
        out.status_asserted = spec.status_rule
        return status, out.total_ms, headers, body, cut

    def _check(self, spec: RequestSpec, inputs: _Judged) -> str | None:
        try:
            return spec.check(*inputs)
        except Exception:
            log.exception("assertions on %s failed unexpectedly", self.url)
            return FAILED

    def _hop(self) -> None:
        """Split the URL and connect, or look its host up first. Raises ProbeFailure."""
        prober = self.prober
        spec = self.spec
        if spec is None:
            hop, self.request = prober._hop(self.url)
        else:
            if spec.broken is not None:
                raise ProbeFailure(spec.broken)  # never probe without its headers
            hop = _Target(self.url)
            origin = (hop.tls, hop.ip or hop.host, hop.port)
            if self.origin is None:
                self.origin = origin
            elif origin != self.origin:
                self.abroad = True
            if self.abroad and self.with_body:
                # A 307/308 repeats the body; the user's body may hold secrets too.
                scheme = "https" if hop.tls else "http"
                raise ProbeFailure(
                    f"redirect not followed: it would send the request body to another "
                    f"origin ({scheme}://{hop.host_header})")
            self.request = spec.request_bytes(
                self.method, hop.target, hop.host_header, prober._user_agent,
                not self.abroad, self.with_body,
            )
        self.hop = hop
        if hop.ip is not None:
            self._addresses(checked_literal(hop.host, hop.ip, prober._allow_private), None)
            return
        cache = prober._dns
        if cache is not None:
            answer = cache.cached(hop.host)
            if answer is not None:
                self._answered(answer, None)
            else:
                cache.lookup(hop.host, self._looked_up)
            return
        dns = self.dns = self.reactor.loop.create_task(resolve_checked(
            hop.host, hop.port, literal=None, family=prober._family,
            allow_private=prober._allow_private, resolver=prober._resolver,
        ))
        dns.add_done_callback(self._resolved)

    def _resolved(self, task: asyncio.Task[tuple[list[str], float | None]]) -> None:
        if self.dns is not task:
            return  # cancelled or expired meanwhile
        self.dns = None
        self._guarded(lambda: self._addresses(*task.result()))

    def _looked_up(self, answer: DnsAnswer, ms: float) -> None:
        """The resolver's answer after a cache miss (called back from the event loop)."""
        if self.done is None:
            return  # cancelled or expired meanwhile
        self._guarded(lambda: self._answered(answer, ms))

    def _answered(self, answer: DnsAnswer, ms: float | None) -> None:
        """Connect to a resolver's answer (``ms`` None: it came from the cache); the
        private-address rule is applied to it here, cached or not."""
        hop = self.hop
        assert hop is not None
        if answer.error is not None:
            raise ProbeFailure(answer.error)
        addrs = checked_addresses(hop.host, answer.addresses, self.prober._allow_private)
        self.out.dns_cached = ms is None
        self._addresses(addrs, 0.0 if ms is None else ms)

    def _addresses(self, addrs: list[str], dns_ms: float | None) -> None:
        """The hop's checked addresses are known: connect to the first that accepts."""
        self.addrs = addrs
        self.out.dns_ms = dns_ms
        self.next_addr = 0
        self.last_error = "connection failed"
        self._connect()

    def _connect(self) -> None:
        """Connect to the next address that accepts the attempt; fail when none is left."""
        prober = self.prober
        hop = self.hop
        assert hop is not None
        ctx = prober._tls_context() if hop.tls else None
        # SNI carries names only; for an IP literal there is none to send.
        sni = hop.host if hop.tls and hop.ip is None else None
        addrs = self.addrs
        out = self.out
        spec = self.spec
        while self.next_addr < len(addrs):
            ip = addrs[self.next_addr]
            self.next_addr += 1
            session = (prober._sessions.get(TlsSessions.key(ip, hop.port, sni))
                       if ctx is not None else None)
            if spec is None:
                conn = _HttpConn(
                    self._hop_done, prober._rview, prober._pview, ctx, sni, self.request,
                    prober._max_header, prober._max_body, session,
                )
            else:
                conn = _CaptureConn(
                    self._hop_done, prober._rview, prober._pview, ctx, sni, self.request,
                    prober._max_header, prober._max_body, spec, session,
                )
            out.remote_ip = ip
            self.t_start = perf_counter()
            try:
                self.reactor.connect(conn, ip, hop.port, prober._local)
            except OSError as exc:
                # Words, not the exception: its traceback would hold this frame (and the
                # connection) in a reference cycle that only the cyclic GC could free.
                self.last_error = os_error_words(exc)
                _settle(conn, out, self.t_start)
                continue
            self.conn = conn
            return
        self._fail(self.last_error)

    def _hop_done(self) -> None:
        """The connection finished (called back by it): next address, next hop, or the end."""
        conn = self.conn
        if conn is None or self.done is None:
            return
        self.conn = None
        out = self.out
        if conn.handshaken:
            resumed = conn.session_reused
            self._count_handshake(resumed)
            if conn.error is None and self.prober._sessions.limit:
                self._keep_session(conn, resumed)
        tls12_only = conn.tls12_only  # before _settle releases the TLS connection
        _settle(conn, out, self.t_start)
        if conn.connect_error is not None:
            self.last_error = conn.connect_error
            self._guarded(self._connect)  # the next address
        elif conn.error is not None and not conn.handshaken and tls12_only:
            # The handshake offered TLS 1.2 alone, to resume a TLS 1.2 session
            # (openssl_layer.connection), and failed: the server may have gone TLS
            # 1.3-only. The same address again, offering every version, no session.
            self._drop_session()
            self.next_addr -= 1
            self._guarded(self._connect)
        elif conn.error is not None:
            self._fail(conn.error)
        elif not conn.redirecting:
            if isinstance(conn, _CaptureConn):
                self.captured = conn
            self._complete()  # out.status_code was set when the hop was settled
        elif out.redirects >= self.prober._max_redirects:
            self._fail("too many redirects")
        else:
            out.redirects += 1
            if self.spec is not None:
                self._redirect_method(conn.status)
            assert conn.location is not None
            location = conn.location.decode("utf-8", "surrogateescape").strip()
            self._guarded(lambda: self._redirect(location))

    def _count_handshake(self, resumed: bool) -> None:
        prober = self.prober
        prober.tls_handshakes += 1
        if resumed:
            prober.tls_resumed += 1
        m = prober._m_tls
        if m is not None:
            m[1 if resumed else 0].value += 1

    def _session_key(self) -> int | None:
        """The key of the hop's TLS session (address, port, SNI); None before a connect."""
        hop = self.hop
        if hop is None or self.out.remote_ip is None:
            return None
        return TlsSessions.key(self.out.remote_ip, hop.port, hop.host if hop.ip is None else None)

    def _drop_session(self) -> None:
        key = self._session_key()
        if key is not None:
            self.prober._sessions.drop(key)

    def _keep_session(self, conn: _HttpConn, resumed: bool) -> None:
        """Keep the connection's TLS session for the next probe of the same address.

        Through pyOpenSSL (the default layer) TLS 1.2 and 1.3 sessions: a TLS 1.2
        resumption skips the key exchange (about -45% CPU a probe), a TLS 1.3 one still
        makes an ECDHE exchange (psk_dhe_ke: OpenSSL offers no other mode a server would
        pick) but skips the certificate's parse and signature check (-20 to -35%;
        docs/performance.md). Through the ssl module TLS 1.2 only (TLS
        1.3 measured no cheaper there: it copies the session, certificate included, each
        time one is read). Through pyOpenSSL a kept session is its DER without the
        peer's certificate (~330 bytes; the session object, certificate included, held
        ~9.8 KB). Taken once the answer was read, not right after the handshake: session
        tickets may come after it (always in TLS 1.3, where a session taken at once has
        none, and the next connection would pay a full handshake plus the session's
        cost). The session the server issued last replaces the one resumed."""
        key = self._session_key()
        if key is None:
            return
        prober = self.prober
        sessions = prober._sessions
        tls = conn.tls_connection
        if tls is not None:
            # pyOpenSSL: TLS 1.3 sessions too. No has_ticket: a server that declined the
            # offered session (no ticket, no cache) gets none offered next time; so it
            # makes full handshakes, with a session kept every other probe.
            if conn.offered_session and not resumed:
                sessions.drop(key)
                return
            # Resumed without a new ticket (TLS 1.2): the session is the DER offered, kept
            # again as it is, not encoded again.
            der = sessions.get(key) if resumed and openssl_layer.same_session(tls) else None
            if der is None:
                # A resumed session came from the cache: it holds no certificate to strip.
                der = openssl_layer.take_session(tls, strip=not resumed)
            if der is not None:
                sessions.keep(key, der, self.t0)
            return
        sslobj = conn.ssl_object
        if sslobj is None or sslobj.version() == "TLSv1.3":
            return
        session = sslobj.session
        if session is not None and session.has_ticket:
            sessions.keep(key, session, self.t0)

    def _redirect_method(self, status: int | None) -> None:
        """What browsers and curl do (fetch, "HTTP-redirect fetch"): 307/308 repeat the
        method and body; 301/302 turn a POST, and 303 anything but GET/HEAD, into a GET
        without body."""
        method = self.method
        if (status == 303 and method not in ("GET", "HEAD")) or (
            status in (301, 302) and method == "POST"
        ):
            self.method = "GET"
            self.with_body = False

    def _redirect(self, location: str) -> None:
        """The next hop, at ``location`` resolved against the current URL."""
        try:
            self.url = urljoin(self.url, location)
        except ValueError:  # "http://[::1" and the like
            raise ProbeFailure(f"invalid URL: {short(location)}") from None
        # The phase timings describe the last hop only.
        out = self.out
        out.dns_ms = out.connect_ms = out.tls_ms = out.ttfb_ms = None
        out.remote_ip = None
        out.dns_cached = False
        self._hop()
