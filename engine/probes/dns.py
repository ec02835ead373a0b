"""The dns:// uptime probe: one question to the monitor's DNS server, judged by its answer.

``await DnsProber.probe(url, spec)`` returns an :class:`~engine.domain.outcomes.HttpOutcome`
with ``status_code`` None: ``error`` None when the server answered the question (whatever
its rcode), ``assertion_error`` the words of the first failed assertion (or of the default
rule: NOERROR with at least one answer of the type), ``ttfb_ms`` the query time (question
sent to answer read, TCP included), ``dns_ms`` the lookup of the server's name,
``remote_ip`` the server's address (never shown on a status page) and ``details`` the
check's meta (:func:`engine.probes.dnsspec.details`).

How it asks:

* the server given as a name is looked up with the probes' resolver (c-ares,
  ``engine/probes/resolver.py``); the private-address rule applies to every address of
  the answer (and to an address given as is), as for URLs;
* messages are dnspython's, on our own non-blocking sockets on the loop (no task, no
  thread): the question's wire form is built once per (name, type) and only its id is
  changed per probe; a UDP socket connected to the server, its reply read on the loop's
  reader callback;
* a reply whose id, QR bit or question does not match is ignored (counted in the timeout's
  words), so a spoofed or late answer can neither pass nor fail the probe; a reply that
  matches but cannot be parsed fails in words ("malformed DNS answer");
* a truncated reply (TC) is asked again over TCP; a TCP message is at most 65,535 bytes by
  its length prefix, and a server that sends messages that do not match is read for at most
  :data:`TCP_MAX_BYTES` in all;
* the whole probe is bounded by the prober's timeout; a server that never answers is
  ``timed out after N s``.
"""

from __future__ import annotations

import asyncio
import secrets
import socket
import struct
from time import perf_counter
from typing import Any, Final

import dns.flags
import dns.message
import dns.name
import dns.rdataclass
import dns.rdatatype

from engine.domain.netpolicy import Resolver
from engine.domain.outcomes import HttpOutcome
from engine.probes.addresses import checked_addresses, checked_literal, ip_family, ip_literal
from engine.probes.dnsspec import (
    DnsAnswer,
    DnsAssertion,
    DnsTarget,
    DnsUrlRefused,
    compile_assertions,
    details,
    read_answer,
    split_dns_url,
    verdict,
)
from engine.probes.dnswire import fast_answer
from engine.probes.failures import ProbeFailure, os_error_words, short, timeout_words
from engine.probes.resolver import ProbeResolver

# Bytes read over TCP for one probe, all messages together: one message is at most 65,535
# bytes; a server sending messages that do not match is not read without end.
TCP_MAX_BYTES: Final = 4 * 65537
# Datagrams read per wake-up of the UDP reader (a flood of wrong answers is not read in
# one callback without end; the rest wait for the next wake-up).
_READS_PER_WAKE: Final = 16
# EDNS0 buffer offered: answers up to this size come over UDP, larger ones truncated.
UDP_PAYLOAD: Final = 1232
# Parsed targets and question templates kept (one per monitor URL; bounded all the same).
_CACHE_MAX: Final = 65536
_QR: Final = 0x80  # the QR bit, first flags byte
# A reply up to this size is kept to be recognised next time (the memory of an idle
# monitor stays under 1 KiB with it).
_KEPT_REPLY: Final = 512


class DnsSpec:
    """A dns:// monitor's assertions, compiled once when the engine loads it."""

    __slots__ = ("assertions",)

    def __init__(self, assertions: list[DnsAssertion]) -> None:
        self.assertions = assertions

    @classmethod
    def from_config(cls, assertions: list[dict[str, Any]] | None) -> DnsSpec:
        return cls(compile_assertions(assertions))


class _Asked:
    """One URL's question, kept between probes (the fields :class:`DnsTarget` has but its
    dnspython name, rebuilt on the rare path that needs it), its wire form (id 0), and the
    last reply read (without its id, when at most :data:`_KEPT_REPLY` bytes) with its
    answer: a reply the same byte for byte is the same answer, not read again (an
    authoritative server's steady answer; a resolver's changes as its TTLs count down).
    About 700 bytes a monitor (tracemalloc, 2,000 monitors of one A record)."""

    __slots__ = ("last", "last_answer", "name", "port", "question", "rdtype", "server",
                 "type_text", "wire")

    def __init__(self, target: DnsTarget) -> None:
        self.server = target.server
        self.port = target.port
        self.name = target.name
        self.rdtype = int(target.rdtype)
        self.type_text = target.type_text
        query = dns.message.make_query(target.qname, target.rdtype, dns.rdataclass.IN,
                                       use_edns=0, payload=UDP_PAYLOAD)
        query.flags |= dns.flags.RD
        query.id = 0
        self.wire: bytes = query.to_wire()
        # The question section as sent (after the 12-byte header), compared case-blind.
        self.question: bytes = self.wire[12:12 + len(target.qname.to_wire() or b"") + 4].lower()
        self.last: bytes | None = None
        self.last_answer: DnsAnswer | None = None

    def target(self) -> DnsTarget:
        """The full question again (dnspython's reading of a reply needs its name)."""
        qname = dns.name.from_text(self.name + ".")
        return DnsTarget(self.server, self.port, self.name, qname,
                         dns.rdatatype.RdataType.make(self.rdtype), self.type_text)


class DnsProber:
    """dns:// probes of one engine. ``resolver`` looks the servers' names up (a
    :class:`ProbeResolver`, or any :data:`~engine.domain.netpolicy.Resolver`; None: the
    system's ``getaddrinfo``). Use from the event loop's thread only."""

    def __init__(
        self,
        *,
        timeout: float,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        source_address: str | None = None,
        keep_replies: bool = True,
    ) -> None:
        """``keep_replies`` False parses every reply (the bench's measure of a reply never
        seen before)."""
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._timeout = timeout
        self._timeout_words = timeout_words(timeout)
        self._allow_private = allow_private
        self._resolver = resolver
        # A ProbeResolver's cached answer is used without a task or an await.
        self._cache = resolver if isinstance(resolver, ProbeResolver) else None
        self._source = source_address
        self._kept = _KEPT_REPLY if keep_replies else -1
        self._asked: dict[str, _Asked | str] = {}
        # Counters (the bench reads them): probes, and replies ignored for not matching.
        self.probes = 0
        self.ignored = 0

    async def aclose(self) -> None:
        """Nothing is held between probes."""

    def _ask(self, url: str) -> _Asked | str:
        got = self._asked.get(url)
        if got is None:
            try:
                got = _Asked(split_dns_url(url))
            except DnsUrlRefused as exc:
                got = f"not a probeable dns:// URL: {exc}"
            if len(self._asked) >= _CACHE_MAX:
                self._asked.clear()
            self._asked[url] = got
        return got

    async def probe(self, url: str, spec: DnsSpec | None = None) -> HttpOutcome:
        """One probe of ``url``; never raises (but cancellation), never outlasts the
        timeout by more than scheduling noise."""
        self.probes += 1
        t0 = perf_counter()
        asked = self._ask(url)
        if isinstance(asked, str):
            return _failed(asked, t0, None, None)
        target = asked
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        dns_ms: float | None = None
        ip: str | None = None
        ignored = [0]
        try:
            literal = ip_literal(target.server)
            hit = self._cache.cached(target.server) if (
                literal is None and self._cache is not None) else None
            if literal is not None:
                ips = checked_literal(target.server, literal, self._allow_private)
            elif hit is not None:
                if hit.error is not None:
                    raise ProbeFailure(hit.error)
                ips = checked_addresses(target.server, hit.addresses, self._allow_private)
                dns_ms = 0.0
            else:
                ips, dns_ms = await asyncio.wait_for(self._server(target), self._timeout)
            ip = ips[0]
            qid = secrets.randbits(16)
            wire = struct.pack("!H", qid) + asked.wire[2:]
            t_query = perf_counter()
            data = await self._udp(loop, ip, target.port, wire, qid, asked, deadline, ignored)
            transport = "udp"
            if data[2] & 0x02:  # TC: ask again over TCP
                transport = "tcp"
                data = await self._tcp(loop, ip, target.port, wire, qid, asked, deadline,
                                       ignored)
            query_ms = (perf_counter() - t_query) * 1000.0
            key = data[2:] if transport == "udp" else b"tcp" + data[2:]
            if key == asked.last:
                answer = asked.last_answer
            elif (answer := fast_answer(data, len(asked.question), asked.rdtype)) is not None:
                if len(key) <= self._kept:
                    asked.last, asked.last_answer = key, answer
            else:
                try:
                    response = dns.message.from_wire(data, ignore_trailing=True)
                except Exception as exc:  # dnspython raises many kinds for garbage
                    raise ProbeFailure(f"malformed DNS answer from {short(target.server)} "
                                       f"({_words(exc)})") from None
                answer = read_answer(response, asked.target())
                if len(key) <= self._kept:
                    asked.last, asked.last_answer = key, answer
        except ProbeFailure as exc:
            return _failed(str(exc), t0, dns_ms, ip)
        except TimeoutError:
            return _failed(self._timeout_words + _ignored_words(ignored[0]), t0, dns_ms, ip)
        except OSError as exc:
            return _failed(os_error_words(exc), t0, dns_ms, ip)
        total_ms = (perf_counter() - t0) * 1000.0
        assert answer is not None
        why = verdict(answer, target, total_ms, spec.assertions if spec is not None else [])
        return HttpOutcome(
            status_code=None, error=None, total_ms=total_ms, dns_ms=dns_ms, connect_ms=None,
            tls_ms=None, ttfb_ms=query_ms, remote_ip=ip, assertion_error=why,
            details=details(answer, target, transport),
        )

    async def _server(self, target: _Asked) -> tuple[list[str], float]:
        """The addresses of the server's name, the private-address rule applied to each,
        and the lookup's ms."""
        t = perf_counter()
        try:
            if self._resolver is None:
                infos = await asyncio.get_running_loop().getaddrinfo(
                    target.server, target.port, type=socket.SOCK_DGRAM)
                found = [str(i[4][0]) for i in infos]
            else:
                found = await self._resolver(target.server, target.port)
        except (OSError, UnicodeError, ValueError):
            raise ProbeFailure(f"DNS lookup failed: {short(target.server)}") from None
        addrs = list(dict.fromkeys(found))
        if not addrs:
            raise ProbeFailure(f"DNS lookup failed: {short(target.server)}")
        return checked_addresses(target.server, addrs, self._allow_private), (
            perf_counter() - t) * 1000.0

    async def _udp(
        self, loop: asyncio.AbstractEventLoop, ip: str, port: int, wire: bytes, qid: int,
        asked: _Asked, deadline: float, ignored: list[int],
    ) -> bytes:
        """The matching reply to ``wire`` over UDP; replies ignored are added to
        ``ignored[0]``."""
        sock = socket.socket(ip_family(ip), socket.SOCK_DGRAM)
        reader = _UdpReader(sock, qid, asked.question)
        try:
            sock.setblocking(False)
            if self._source:
                sock.bind((self._source, 0))
            sock.connect((ip, port))
            sock.send(wire)
            fut: asyncio.Future[bytes] = loop.create_future()
            reader.fut = fut
            loop.add_reader(sock.fileno(), reader.readable)
            timer = loop.call_at(deadline, reader.expire)
            try:
                return await fut
            finally:
                timer.cancel()
                loop.remove_reader(sock.fileno())
                self.ignored += reader.ignored
                ignored[0] += reader.ignored
        finally:
            sock.close()

    async def _tcp(
        self, loop: asyncio.AbstractEventLoop, ip: str, port: int, wire: bytes, qid: int,
        asked: _Asked, deadline: float, ignored: list[int],
    ) -> bytes:
        """The matching reply to ``wire`` over TCP; messages ignored are added to
        ``ignored[0]``."""
        sock = socket.socket(ip_family(ip), socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            if self._source:
                sock.bind((self._source, 0))
            async with asyncio.timeout_at(deadline):
                await loop.sock_connect(sock, (ip, port))
                await loop.sock_sendall(sock, struct.pack("!H", len(wire)) + wire)
                buf = bytearray()
                read = 0
                while True:
                    while len(buf) < 2 or len(buf) < 2 + (buf[0] << 8 | buf[1]):
                        chunk = await loop.sock_recv(sock, 65537)
                        if not chunk:
                            raise ProbeFailure("connection closed before the whole answer"
                                               " (TCP)")
                        read += len(chunk)
                        if read > TCP_MAX_BYTES:
                            raise ProbeFailure(
                                f"no matching DNS answer in {TCP_MAX_BYTES // 1024} KiB (TCP)")
                        buf += chunk
                    size = buf[0] << 8 | buf[1]
                    message = bytes(buf[2:2 + size])
                    del buf[:2 + size]
                    if _matches(message, qid, asked.question):
                        return message
                    ignored[0] += 1
                    self.ignored += 1
        finally:
            sock.close()


def build(settings: Any, metrics: Any, resolver: Any) -> DnsProber:
    """The engine's dns:// prober (:data:`engine.kinds.uptime_probers.FACTORIES`): the
    probes' timeout, source address and private-address rule; servers' names through the
    uptime probes' resolver."""
    return DnsProber(
        timeout=settings.probe_timeout,
        allow_private=settings.allow_private_targets,
        resolver=resolver,
        source_address=settings.probe_source_address,
    )


class _UdpReader:
    """The reader callback of one UDP question: the first matching datagram completes
    ``fut``; others are counted and dropped."""

    __slots__ = ("fut", "ignored", "qid", "question", "sock")

    def __init__(self, sock: socket.socket, qid: int, question: bytes) -> None:
        self.sock = sock
        self.qid = qid
        self.question = question
        self.ignored = 0
        self.fut: asyncio.Future[bytes] | None = None

    def readable(self) -> None:
        fut = self.fut
        if fut is None or fut.done():
            return
        for _ in range(_READS_PER_WAKE):
            try:
                data = self.sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # ICMP port unreachable: ECONNREFUSED
                fut.set_exception(exc)
                return
            if _matches(data, self.qid, self.question):
                fut.set_result(data)
                return
            self.ignored += 1

    def expire(self) -> None:
        fut = self.fut
        if fut is not None and not fut.done():
            fut.set_exception(TimeoutError())


def _matches(data: bytes, qid: int, question: bytes) -> bool:
    """A reply to our question: our id, the QR bit, one question equal to ours (names
    compared case-blind: a server may echo 0x20-mixed case). A reply that matches may still
    be garbage past the question (parsed later: "malformed DNS answer")."""
    if len(data) < 12 or (data[0] << 8 | data[1]) != qid or not data[2] & _QR:
        return False
    if data[4] != 0 or data[5] != 1:
        return False
    return data[12:12 + len(question)].lower() == question


def _ignored_words(n: int) -> str:
    if not n:
        return ""
    return f" ({n} {'reply' if n == 1 else 'replies'} not matching the question ignored)"


def _words(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120].rstrip(".")


def _failed(error: str, t0: float, dns_ms: float | None, ip: str | None) -> HttpOutcome:
    return HttpOutcome(
        status_code=None, error=error, total_ms=(perf_counter() - t0) * 1000.0,
        dns_ms=dns_ms, connect_ms=None, tls_ms=None, ttfb_ms=None, remote_ip=ip,
    )


