"""One webhook POST over a fresh connection: the deliverer's HTTP client.

Why not aiohttp: a try is one request on a connection that is never reused, answered by a
status line. aiohttp's client spends ~250 us of CPU per such request on its connector,
happy-eyeballs socket setup, request/response objects and header multidicts, about half of
the deliverer's cost per delivery at 1,000 deliveries a second. This does the same exchange
with an ``asyncio.Protocol`` and the llhttp parser (httptools), ~110-160 us (measured on
uvloop against a loopback receiver).

What a try does, and what it guarantees:

- The URL is split once per distinct URL (cached); only absolute http(s) URLs with a host
  that cannot break the request head are used.
- The host is resolved on every try (IP literals are not), and every address of the answer
  is checked against the private-address rule before connecting; the connection goes to a
  checked address, so a DNS change cannot reach an internal one. Any non-public address in
  the answer refuses the whole name (:class:`BlockedTarget`).
- ``connect_timeout`` bounds resolving, connecting and the TLS handshake; the caller bounds
  the whole try. https is verified against the system trust store, with the name as SNI.
- The request is written in one piece: the exact ``body`` bytes, ``Content-Length``,
  ``Connection: close``; the caller's headers as given. No cookies, no compression, no
  redirect handling (the caller reports a redirect as such).
- The answer is the first final status (1xx interim responses are skipped). A 200 ends the
  exchange at once; for anything else at most ``MAX_RESPONSE_BODY`` bytes of the body are
  read, to quote its start.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import re
import socket
import ssl
from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import quote, unquote, urlsplit

from httptools import HttpParserError, HttpParserUpgrade, HttpResponseParser

from engine.domain.netpolicy import Resolver, is_public_ip, literal_ip, resolve

# The response body is read only to quote it in last_error, and never beyond this.
MAX_RESPONSE_BODY: Final = 64 * 1024
# Status line and headers of an answer: a receiver that sends more is not answering.
MAX_RESPONSE_HEAD: Final = 64 * 1024
# How much of a body is kept for the quote.
SNIPPET: Final = 200

# A request target may only hold printable ASCII without spaces; anything else is
# percent-encoded (existing escapes are kept).
_TARGET_SAFE: Final = "".join(chr(c) for c in range(0x21, 0x7F))
# RFC 3986 reg-name characters: nothing that could break the Host header line.
_HOST_NAME: Final = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=%-]+")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


class BlockedTarget(OSError):
    """The webhook URL resolves to (or is) an address the private-address rule forbids."""


class BadUrl(ValueError):
    """The webhook URL cannot be sent to (not an absolute http(s) URL with a usable host)."""


class ResolveError(OSError):
    """The webhook host did not resolve (or resolved to nothing)."""


class ConnectError(OSError):
    """No connection (or TLS session) to any address of the webhook host."""


class NoAnswer(OSError):
    """The connection ended, or the answer was malformed, before a status was read."""


@dataclass(frozen=True, slots=True)
class Target:
    """What a URL gives a try: where to connect and the request head up to the headers."""

    scheme: str
    host: str  # for DNS, SNI and certificate checks: no brackets, IDNA-encoded
    port: int
    literal: str | None  # the host when it is an IP literal
    head: bytes  # "POST <target> HTTP/1.1\r\nHost: ...\r\n[Authorization: ...\r\n]"


@functools.lru_cache(maxsize=1024)
def parse_url(url: str) -> Target:
    """Split ``url`` once; raises :class:`BadUrl`. Cached: an account's URL is sent to
    over and over, and the result depends on the string only."""
    try:
        parts = urlsplit(url)
        port = parts.port
        hostname = parts.hostname
    except ValueError as exc:
        raise BadUrl("the webhook URL is not a valid URL") from exc
    if parts.scheme not in _DEFAULT_PORTS or not hostname:
        raise BadUrl("the webhook URL is not an absolute http(s) URL")
    lit = literal_ip(hostname)
    if lit is not None:
        host = str(lit)
        host_header = f"[{host}]" if lit.version == 6 else host
    else:
        try:
            host = hostname.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise BadUrl("the webhook URL is not a valid URL") from exc
        if not _HOST_NAME.fullmatch(host):
            raise BadUrl("the webhook URL is not a valid URL")
        host_header = host
    if port is None:
        port = _DEFAULT_PORTS[parts.scheme]
    elif port != _DEFAULT_PORTS[parts.scheme]:
        host_header += f":{port}"
    target = quote(parts.path or "/", safe=_TARGET_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_TARGET_SAFE)
    head = f"POST {target} HTTP/1.1\r\nHost: {host_header}\r\n"
    if parts.username is not None:
        # Credentials in the URL are sent as Basic authentication, as aiohttp did.
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        head += f"Authorization: Basic {base64.b64encode(pair.encode()).decode()}\r\n"
    return Target(parts.scheme, host, port, str(lit) if lit is not None else None,
                  head.encode("latin-1", "strict"))


@functools.lru_cache(maxsize=4096)
def _public(ip: str) -> bool:
    # The same few addresses come back try after try; ipaddress costs several us a call.
    return is_public_ip(ip)


@dataclass(frozen=True, slots=True)
class Answer:
    """A receiver's answer: its status, ``Location`` (if any) and the start of its body
    (only read when the status is not 200)."""

    status: int
    location: str | None = None
    snippet: bytes = b""


class _Exchange(asyncio.Protocol):
    """One request and its answer on one connection."""

    __slots__ = (
        "_body_seen",
        "_done",
        "_final",
        "_head_seen",
        "_location",
        "_parser",
        "_request",
        "_snippet",
        "_status",
        "_transport",
    )

    def __init__(self, request: bytes, done: asyncio.Future[Answer]) -> None:
        self._request = request
        self._done = done
        self._parser: HttpResponseParser | None = HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._head_seen = 0
        self._final = False  # the final status line and headers were read
        self._status = 0
        self._location: bytes | None = None
        self._snippet = bytearray()
        self._body_seen = 0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses, but have its methods.
        self._transport = cast(asyncio.Transport, transport)
        self._transport.write(self._request)

    def data_received(self, data: bytes) -> None:
        if self._done.done() or self._parser is None:
            return
        if not self._final:
            self._head_seen += len(data)
        try:
            self._parser.feed_data(data)
        except HttpParserUpgrade:
            self._answer()  # only reachable after a final status: that is the answer
        except HttpParserError:
            if self._final:
                self._answer()  # a malformed body does not change the status
            else:
                self._fail(NoAnswer("the receiver's answer is not valid HTTP"))
        if not self._final and self._head_seen > MAX_RESPONSE_HEAD:
            self._fail(NoAnswer("the receiver's answer headers are too large"))

    def connection_lost(self, exc: Exception | None) -> None:
        if self._final:
            self._answer()  # status and headers were read: a body cut short is fine
        elif not self._done.done():
            self._done.set_exception(NoAnswer(
                f"the receiver closed the connection without an answer"
                f"{f' ({exc})' if exc is not None else ''}"))
        self._parser = None  # break the parser <-> protocol cycle

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) == 8 and name.lower() == b"location":
            self._location = value

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        status = self._parser.get_status_code()
        if status < 200:
            if status == 101:  # a protocol switch nobody asked for
                self._fail(NoAnswer("the receiver's answer is not valid HTTP"))
            self._location = None  # an interim response (100, 103): the real one follows
            return
        self._final = True
        self._status = status
        if status == 200:
            self._answer()  # the answer is all that counts; its body is not needed

    def on_body(self, body: bytes) -> None:
        if not self._final or self._done.done():
            return
        if len(self._snippet) < SNIPPET:
            self._snippet += body[: SNIPPET - len(self._snippet)]
        self._body_seen += len(body)
        if self._body_seen >= MAX_RESPONSE_BODY:
            self._answer()

    def on_message_complete(self) -> None:
        if self._final:
            self._answer()

    # endings

    def _answer(self) -> None:
        if not self._done.done():
            location = self._location.decode("latin-1") if self._location else None
            self._done.set_result(Answer(self._status, location, bytes(self._snippet)))
        self._close()

    def _fail(self, exc: Exception) -> None:
        if not self._done.done():
            self._done.set_exception(exc)
        self._close()

    def abandon(self) -> None:
        """The caller stopped waiting: drop the connection (if it is still open)."""
        if not self._done.done():
            self._done.cancel()
        self._close()

    def _close(self) -> None:
        # Never reused. abort(): a TLS close() would wait for the receiver's close_notify.
        if self._transport is not None:
            self._transport.abort()
            self._transport = None


class WebhookClient:
    """Sends webhook tries; one per deliverer (it holds the TLS context)."""

    def __init__(self, *, allow_private: bool, resolver: Resolver | None = None) -> None:
        self._allow_private = allow_private
        self._resolver = resolver  # None: the system resolver (engine.domain.netpolicy.resolve)
        self._tls: ssl.SSLContext | None = None

    def _tls_context(self) -> ssl.SSLContext:
        # One context, made when first needed: loading the trust store costs milliseconds.
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    async def addresses(self, target: Target, timeout: float) -> list[str]:
        """The checked addresses to connect to; raises BlockedTarget or ResolveError."""
        if target.literal is not None:
            addresses = [target.literal]
        else:
            try:
                if self._resolver is None:
                    addresses = await resolve(target.host, target.port, timeout=timeout)
                else:
                    async with asyncio.timeout(timeout):
                        addresses = await self._resolver(target.host, target.port)
            except TimeoutError:
                raise
            except Exception as exc:  # a resolver's failure, whatever its kind, is a DNS one
                raise ResolveError(str(exc) or type(exc).__name__) from exc
            if not addresses:
                raise ResolveError(f"{target.host} has no address")
        if not self._allow_private:
            for address in addresses:
                if not _public(address):
                    if target.literal is not None:
                        raise BlockedTarget(
                            f"the webhook URL is a non-public address ({address})")
                    raise BlockedTarget(
                        f"the webhook host resolves to a non-public address ({address})")
        return addresses

    async def post(self, target: Target, headers: bytes, body: bytes, *,
                   timeout: float, connect_timeout: float) -> Answer:
        """POST ``body`` to ``target`` with ``headers`` (complete ``Name: value\\r\\n``
        lines). Raises BlockedTarget, ResolveError, ConnectError, NoAnswer, or TimeoutError
        when the answer took longer than ``timeout`` or resolving, connecting and the TLS
        handshake longer than ``connect_timeout``."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        request = b"".join((
            target.head, headers,
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body), body,
        ))
        done: asyncio.Future[Answer] = loop.create_future()
        exchange = _Exchange(request, done)
        tls = self._tls_context() if target.scheme == "https" else None
        # One timer for the whole try, moved from the connect deadline to the total one once
        # connected (a second asyncio.timeout would cost a timer of its own per try).
        deadline = asyncio.timeout_at(start + min(connect_timeout, timeout))
        async with deadline:
            addresses = await self.addresses(target, connect_timeout)
            error: BaseException | None = None
            # Every address of the answer, in order, until one takes the connection.
            for address in addresses:
                try:
                    # connection_made runs only for the connection that is made, so one
                    # protocol object serves every attempt.
                    await loop.create_connection(
                        lambda: exchange, address, target.port,
                        ssl=tls, server_hostname=target.host if tls is not None else None,
                        family=socket.AF_INET6 if ":" in address else socket.AF_INET,
                    )
                    break
                except (OSError, ssl.SSLError) as exc:
                    error = exc
            else:
                raise ConnectError(str(error) if error is not None else "no address")
            deadline.reschedule(start + timeout)
            try:
                return await done
            finally:
                # Timed out, cancelled or answered: the connection goes either way.
                exchange.abandon()
