"""Local test targets: real servers on loopback whose behaviour a test chooses or switches.

Import from any test::

    from tests.support.targets import HttpTarget, TlsCerts, closed_port

    async with HttpTarget() as site:            # http://127.0.0.1:<port>/
        site.status = 500                       # "/" (and any unknown path) now answers 500
        ...probe site.url("/")...
        await site.wait_for_requests(1)
        assert site.requests[-1].headers["user-agent"].startswith("Upwatch/")

Behaviour per path (any server, plain or TLS):

====================  ===========================================================
``/``, other paths    ``status`` after ``delay`` s, with ``body`` and ``headers``
``/status/<code>``    that status
``/redirect/<n>``     chain of n relative redirects (``?code=301``, ``?absolute=1``)
``/loop``             302 to itself, forever
``/redirect-to``      ``?url=<target>&code=302``: one redirect anywhere
``/slow/<ms>``        200 after that many milliseconds (``?then=<url>``: 302 there)
``/hang``             reads the request, never answers
``/close``            closes without answering
``/reset-headers``    half a header block, then a TCP reset
``/slowloris``        the response one byte per ``?interval=`` s (default 1)
``/endless``          200, then a chunked body that never ends
``/stall-body``       200 and the start of a body, then silence
``/huge-headers``     ``?size=`` bytes of headers (default 1 MiB)
``/early-hints``      103 Early Hints, then 200
``/no-length``        200 without Content-Length; body until close
``/peer``             200, the body is the client's IP as the server saw it
``/garbage``          bytes that are not HTTP, then close
====================  ===========================================================

Connection-level behaviour, switched with ``mode``: ``"http"`` (the table above),
``"hang"`` (accept, never read or answer), ``"garbage"`` (write ``garbage`` as soon as a
client connects, then close: e.g. plain bytes on a port probed with TLS).

Every request is recorded in ``requests`` (method, target, lower-cased headers, peer IP, SNI
for TLS); ``connections`` counts accepted connections (for TLS: completed handshakes),
``peers`` lists their client IPs and ``sni_names`` the SNI of every TLS handshake. TLS
targets take a server context, built by :class:`TlsCerts` for valid, expired, not-yet-valid,
self-signed and wrong-host certificates, all under one trustme CA written to
``TlsCerts.ca_bundle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import socket
import ssl
import struct
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import trustme
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

Mode = Literal["http", "hang", "garbage"]

_REASONS = {
    103: "Early Hints", 200: "OK", 204: "No Content", 301: "Moved Permanently", 302: "Found",
    303: "See Other", 307: "Temporary Redirect", 308: "Permanent Redirect",
    400: "Bad Request", 404: "Not Found", 500: "Internal Server Error", 503: "Service Unavailable",
}


def free_port(host: str = "127.0.0.1") -> int:
    """A port on ``host`` with nothing listening (bound, then released): for a server a test
    starts to listen on, or for a probe to find closed."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


closed_port = free_port  # the name a test of refused connections reads better with


def ipv6_available() -> bool:
    """Whether ``::1`` can be bound here (some containers have no IPv6)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


class _Stopped(Exception):
    """The target is stopping: a handler's wait ends."""


@dataclass
class SeenRequest:
    method: str
    target: str
    headers: dict[str, str]
    peer: str
    sni: str | None
    body: bytes = b""  # the request body (Content-Length bytes)


def _response(status: int, body: bytes = b"", headers: dict[str, str] | None = None,
              *, length: bool = True) -> bytes:
    lines = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    if length:
        lines.append(f"Content-Length: {len(body)}")
    lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class HttpTarget:
    """An HTTP/1.1 server on loopback (asyncio streams; TLS when given a server context)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.host = host
        self._port = port
        self.ssl_context = ssl_context
        # Switchable behaviour of the default route and of the connection.
        self.mode: Mode = "http"
        self.status = 200
        self.delay = 0.0
        self.body = b"ok"
        self.headers: dict[str, str] = {"Content-Type": "text/plain"}
        self.garbage = b"HTTP/1.1 400 Bad Request\r\n\r\nthis is not TLS\n"
        # What was seen.
        self.requests: list[SeenRequest] = []
        self.connections = 0
        self.peers: list[str] = []  # client IP of every accepted connection
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._changed = asyncio.Condition()
        self._stopping = asyncio.Event()
        self._sni: dict[int, str | None] = {}
        self.sni_names: list[str | None] = []  # SNI of every TLS handshake, in order
        if ssl_context is not None:
            # Record the SNI each client sent (keyed by the SSLObject, read by the handler).
            def sni_callback(obj: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
                self._sni[id(obj)] = name
                self.sni_names.append(name)

            ssl_context.sni_callback = sni_callback

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self) -> HttpTarget:
        self._server = await asyncio.start_server(
            self._client, self.host, self._port, ssl=self.ssl_context, limit=1 << 20,
            backlog=4096,  # bursts of concurrent probes must not hit SYN retransmits (1 s)
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        # Handlers end on their own (no cancellation: asyncio's stream server logs cancelled
        # handler tasks as errors): waits return on _stopping, writes fail on aborted sockets.
        self._stopping.set()
        if self._server is not None:
            self._server.close()
        for w in list(self._writers):
            w.transport.abort()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> HttpTarget:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # -- addresses ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        scheme = "https" if self.ssl_context is not None else "http"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{scheme}://{host}:{self._port}"

    def url(self, path: str = "/", *, host: str | None = None, scheme: str | None = None) -> str:
        """URL of ``path`` here; ``host`` replaces the address (e.g. ``localhost``)."""
        base = self.base_url
        if host is not None or scheme is not None:
            s = scheme or ("https" if self.ssl_context is not None else "http")
            h = host or (f"[{self.host}]" if ":" in self.host else self.host)
            base = f"{s}://{h}:{self._port}"
        return base + path

    # -- waiting on what happened ---------------------------------------------------------

    async def wait_for_requests(self, n: int, timeout: float = 5.0) -> list[SeenRequest]:
        """Wait until at least ``n`` requests were seen; returns them."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: len(self.requests) >= n)
        return self.requests

    async def wait_for_connections(self, n: int, timeout: float = 5.0) -> None:
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(lambda: self.connections >= n)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    # -- serving ------------------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        self.connections += 1
        peer = writer.get_extra_info("peername")
        self.peers.append(str(peer[0]) if peer else "")
        try:
            await self._notify()
            await self._serve(reader, writer)
        except (_Stopped, ConnectionError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ssl.SSLError, OSError):
            pass
        finally:
            self._tasks.discard(task)
            self._writers.discard(writer)
            writer.transport.abort()

    async def _sleep(self, seconds: float | None) -> None:
        """Sleep ``seconds`` (None: forever); raises _Stopped as soon as the target stops."""
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except TimeoutError:
            return
        raise _Stopped

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.mode == "hang":
            await self._sleep(None)
        if self.mode == "garbage":
            writer.write(self.garbage)
            await writer.drain()
            return
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, _version = [*lines[0].split(" ", 2), "", ""][:3]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        peer = writer.get_extra_info("peername")
        sslobj = writer.get_extra_info("ssl_object")
        sni = self._sni.pop(id(sslobj), None) if sslobj is not None else None
        length = headers.get("content-length", "")
        body = await reader.readexactly(int(length)) if length.isdigit() else b""
        self.requests.append(SeenRequest(method, target, headers, str(peer[0]), sni, body))
        await self._notify()
        await self._route(target, writer)

    async def _route(self, target: str, writer: asyncio.StreamWriter) -> None:
        parts = urlsplit(target)
        path = parts.path
        q = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        seg = path.strip("/").split("/")
        send = writer.write

        if seg[0] == "status" and len(seg) == 2:
            code = int(seg[1])
            send(_response(code, f"status {code}\n".encode()))
        elif seg[0] == "redirect" and len(seg) == 2:
            n = int(seg[1])
            if n <= 0:
                send(_response(200, b"end of chain\n"))
            else:
                loc = f"/redirect/{n - 1}"
                if q.get("absolute"):
                    loc = self.url(loc) + "?absolute=1"
                elif "code" in q:
                    loc += f"?code={q['code']}"
                send(_response(int(q.get("code", 302)), headers={"Location": loc}))
        elif path == "/loop":
            send(_response(302, headers={"Location": "/loop"}))
        elif path == "/redirect-to":
            send(_response(int(q.get("code", 302)), headers={"Location": q["url"]}))
        elif seg[0] == "slow" and len(seg) == 2:
            await self._sleep(int(seg[1]) / 1000)
            if "then" in q:
                send(_response(302, headers={"Location": q["then"]}))
            else:
                send(_response(200, b"slow\n"))
        elif path == "/hang":
            await self._sleep(None)
        elif path == "/close":
            return
        elif path == "/reset-headers":
            send(b"HTTP/1.1 200 OK\r\nContent-Type: text/pl")
            await writer.drain()
            sock = writer.get_extra_info("socket")
            # Linger 0: close() sends RST instead of FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        elif path == "/slowloris":
            interval = float(q.get("interval", 1.0))
            for b in _response(200, b"finally\n"):
                if writer.is_closing():
                    return
                send(bytes([b]))
                await writer.drain()
                await self._sleep(interval)
        elif path == "/endless":
            send(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            chunk = b"%x\r\n%s\r\n" % (65536, b"x" * 65536)
            # drain() returns without yielding while the transport is not paused, so a
            # client that has gone away is only noticed (connection_lost runs from the
            # loop) if we yield: without sleep(0) this loop can hog the loop forever.
            while not writer.is_closing():
                send(chunk)
                await writer.drain()
                await asyncio.sleep(0)
        elif path == "/huge-headers":
            size = int(q.get("size", 1 << 20))
            send(b"HTTP/1.1 200 OK\r\n")
            line = b"X-Filler: " + b"a" * 1000 + b"\r\n"
            for _ in range(size // len(line) + 1):
                if writer.is_closing():
                    return
                send(line)
                await writer.drain()
                await asyncio.sleep(0)
            send(b"Content-Length: 0\r\n\r\n")
        elif path == "/stall-body":
            send(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\nConnection: close\r\n\r\n")
            send(b"x" * 1000)
            await writer.drain()
            await self._sleep(None)
        elif path == "/early-hints":
            send(b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n")
            send(_response(200, b"after hints\n"))
        elif path == "/no-length":
            send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end\n")
        elif path == "/peer":
            peer = writer.get_extra_info("peername")
            send(_response(200, str(peer[0]).encode()))
        elif path == "/garbage":
            send(b"\x00\x01garbage that is no HTTP at all\r\n\r\n")
        elif path.startswith("/body/"):
            send(_response(200, b"b" * int(seg[1])))
        else:
            if self.delay:
                await self._sleep(self.delay)
            send(_response(self.status, self.body, self.headers))
        await writer.drain()


CertKind = Literal["valid", "expired", "not-yet-valid", "self-signed", "wrong-host"]


class TlsCerts:
    """Certificates for TLS targets: a trustme CA (in ``ca_bundle``) and leaves of each kind.

    ``hosts`` are the names/IPs the good certificates are for; ``wrong-host`` is issued for
    ``wrong.example`` only.
    """

    def __init__(
        self,
        directory: Path,
        *,
        hosts: tuple[str, ...] = ("localhost", "127.0.0.1", "::1"),
        key_type: trustme.KeyType = trustme.KeyType.ECDSA,
        organization: str = "Upwatch Test CA",
    ) -> None:
        self.hosts = hosts
        self.key_type = key_type
        self.ca = trustme.CA(key_type=key_type, organization_name=organization)
        self.ca_bundle = directory / "upwatch-test-ca.pem"
        self.ca.cert_pem.write_to_path(str(self.ca_bundle))
        self._dir = directory

    def server_context(self, kind: CertKind = "valid") -> ssl.SSLContext:
        """A fresh server context presenting a certificate of ``kind``."""
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        now = dt.datetime.now(dt.UTC)
        if kind == "self-signed":
            cert_pem, key_pem = self_signed(self.hosts[0], self.hosts)
            cert_file = self._dir / "self-signed.pem"
            cert_file.write_bytes(cert_pem + key_pem)
            ctx.load_cert_chain(str(cert_file))
            return ctx
        if kind == "valid":
            leaf = self.ca.issue_cert(*self.hosts, key_type=self.key_type)
        elif kind == "expired":
            leaf = self.ca.issue_cert(
                *self.hosts, not_before=now - dt.timedelta(days=30),
                not_after=now - dt.timedelta(days=1), key_type=self.key_type,
            )
        elif kind == "not-yet-valid":
            leaf = self.ca.issue_cert(
                *self.hosts, not_before=now + dt.timedelta(days=1),
                not_after=now + dt.timedelta(days=30), key_type=self.key_type,
            )
        elif kind == "wrong-host":
            leaf = self.ca.issue_cert("wrong.example", key_type=self.key_type)
        else:  # pragma: no cover - Literal guards this
            raise ValueError(kind)
        leaf.configure_cert(ctx)
        return ctx


def self_signed(common_name: str, hosts: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A self-signed leaf (subject == issuer) for ``hosts``: (cert PEM, key PEM)."""
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


@contextlib.asynccontextmanager
async def tls_target(
    certs: TlsCerts, kind: CertKind = "valid", *, host: str = "127.0.0.1"
) -> AsyncIterator[HttpTarget]:
    """An :class:`HttpTarget` over TLS presenting a certificate of ``kind``."""
    async with HttpTarget(host=host, ssl_context=certs.server_context(kind)) as site:
        yield site
