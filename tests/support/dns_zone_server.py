"""An authoritative DNS server on loopback for the dns:// monitor tests: UDP and TCP on one
port, answering from dnspython zone data (:data:`ZONE_TEXT`: every record type a dns://
monitor asks), and misbehaving on demand (``mode``).

Answers as an authoritative server does: the records of the asked type; a CNAME is followed
inside the zone (a loop is answered as far as it goes); a name without the type is NOERROR
with the SOA in authority; a name not in the zone NXDOMAIN. An answer over the UDP size the
question offers (512 bytes without EDNS) is sent truncated (TC); over TCP one that does not
fit 65,535 bytes is sent with as many records as fit, and TC.

``mode`` (read at every question):

==================  ==============================================================
``normal``          as above
``truncate``        every UDP answer truncated (TC, no records); TCP answers
``silent``          no answer at all, UDP or TCP
``wrong_id``        first a UDP reply with another id, then the real one
``wrong_id_only``   only replies with another id
``garbage``         random bytes (no id of ours)
``other_question``  our id, but the answer to another question
``upper_case``      the question echoed in upper case (as 0x20 servers may)
``garbage_matching`` our id, QR and question, then bytes that parse as nothing
``tcp_stall``       UDP truncated; TCP accepts and never answers
``tcp_endless``     UDP truncated; TCP sends full-size messages with another id
==================  ==============================================================

``set(name, type, values, ttl)`` changes a record set while it runs; ``queries`` counts
questions per transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import struct
from collections import Counter
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.zone

ORIGIN = "zone.test."
_HUGE = "\n".join(f'huge 60 IN TXT "{i:04d}{"x" * 240}"' for i in range(300))
ZONE_TEXT = f"""
$TTL 300
@       IN SOA ns1.zone.test. admin.zone.test. 2026010101 3600 600 86400 60
@       IN NS  ns1.zone.test.
@       IN NS  ns2.zone.test.
@       IN MX  10 mail.zone.test.
@       IN MX  20 backup-mail.zone.test.
@       IN TXT "v=spf1 -all"
@       IN CAA 0 issue "letsencrypt.org"
ns1     IN A   192.0.2.53
ns2     IN A   192.0.2.54
www     120 IN A 192.0.2.1
www     120 IN A 192.0.2.2
www     IN AAAA 2001:db8::1
mail    IN A   192.0.2.25
ns-local IN A  127.0.0.1
alias   IN CNAME www.zone.test.
chain   IN CNAME alias.zone.test.
loop-a  IN CNAME loop-b.zone.test.
loop-b  IN CNAME loop-a.zone.test.
_sip._tcp IN SRV 10 60 5060 sip.zone.test.
many    IN TXT "one" "two"
{_HUGE}
"""
REVERSE_ORIGIN = "2.0.192.in-addr.arpa."
REVERSE_TEXT = """
$TTL 300
@       IN SOA ns1.zone.test. admin.zone.test. 2026010101 3600 600 86400 60
@       IN NS  ns1.zone.test.
1       IN PTR www.zone.test.
"""
MODES = ("normal", "truncate", "silent", "wrong_id", "wrong_id_only", "garbage",
         "other_question", "upper_case",
         "garbage_matching", "tcp_stall", "tcp_endless")
# Bounds on what the misbehaving modes send (every loop bounded).
_ENDLESS_MESSAGES = 16


class DnsZoneServer:
    """``async with DnsZoneServer() as server``: ``server.host``/``server.port``, ``url(name,
    type)`` for a monitor, ``mode``, ``set``, ``queries``."""

    def __init__(self, host: str = "127.0.0.1", zone_text: str = ZONE_TEXT) -> None:
        self.host = host
        self.port = 0
        self.zone = dns.zone.from_text(zone_text, origin=ORIGIN, relativize=False)
        self.reverse = dns.zone.from_text(REVERSE_TEXT, origin=REVERSE_ORIGIN,
                                          relativize=False)
        self.mode = "normal"
        self.queries: Counter[str] = Counter()
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}" if self.port != 53 else self.host

    def url(self, name: str, rdtype: str = "A") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"dns://{host}:{self.port}/{name}?type={rdtype}"

    def set(self, name: str, rdtype: str, values: list[str], ttl: int = 300) -> None:
        """Replace ``name``'s records of ``rdtype`` (relative to the zone, or absolute)."""
        owner = dns.name.from_text(name, dns.name.from_text(ORIGIN))
        rdt = dns.rdatatype.from_text(rdtype)
        node = self.zone.find_node(owner, create=True)
        node.delete_rdataset(dns.rdataclass.IN, rdt)
        if values:
            rrset = dns.rrset.from_text_list(owner, ttl, "IN", rdtype, values)
            node.replace_rdataset(rrset.to_rdataset())

    async def __aenter__(self) -> DnsZoneServer:
        loop = asyncio.get_running_loop()
        self._tcp = await asyncio.start_server(self._tcp_client, self.host, 0)
        self.port = self._tcp.sockets[0].getsockname()[1]
        transport, _ = await loop.create_datagram_endpoint(
            lambda: _Udp(self), local_addr=(self.host, self.port))
        self._udp = transport  # type: ignore[assignment]
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()
        for w in list(self._writers):
            w.close()
        for t in list(self._tasks):
            t.cancel()
        if self._tcp is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp.wait_closed(), 2)

    # -- answers -----------------------------------------------------------------------------

    def answer(self, query: dns.message.Message) -> dns.message.Message:
        response = dns.message.make_response(query)
        response.flags |= dns.flags.AA
        q = query.question[0]
        zone = next((z for z in (self.zone, self.reverse)
                     if z.origin is not None and q.name.is_subdomain(z.origin)), None)
        if zone is None:
            response.set_rcode(dns.rcode.REFUSED)
            return response
        name = q.name
        seen: set[dns.name.Name] = set()
        for _ in range(8):
            node = zone.get_node(name) if name.is_subdomain(zone.origin) else None
            if node is None:
                if not response.answer:
                    response.set_rcode(dns.rcode.NXDOMAIN)
                    self._soa(response, zone)
                return response
            rds = node.get_rdataset(dns.rdataclass.IN, q.rdtype)
            if rds is not None:
                response.answer.append(_rrset(name, rds))
                return response
            cname = node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.CNAME)
            if cname is None or name in seen:
                if not response.answer:
                    self._soa(response, zone)
                return response
            seen.add(name)
            response.answer.append(_rrset(name, cname))
            name = next(iter(cname)).target
        return response

    def _soa(self, response: dns.message.Message, zone: dns.zone.Zone) -> None:
        origin = zone.origin
        assert origin is not None
        soa = zone.get_rdataset(origin, dns.rdatatype.SOA)
        if soa is not None:
            response.authority.append(_rrset(origin, soa))

    def wire(self, query: dns.message.Message, limit: int) -> bytes:
        """The answer in at most ``limit`` bytes: whole, else truncated (TC)."""
        response = self.answer(query)
        try:
            return response.to_wire(max_size=limit)
        except dns.exception.TooBig:
            pass
        if limit < 65535:
            cut = dns.message.make_response(query)
            cut.flags |= dns.flags.TC | dns.flags.AA
            return cut.to_wire()
        rrset = response.answer[-1]
        full = 512 + sum(12 + len(rd.to_wire()) for rd in rrset)
        kept = list(rrset)[: max(0, len(rrset) * (limit - 512) // full)]
        response.flags |= dns.flags.TC
        while kept:  # bounded: one record fewer per turn, from a near guess
            response.answer[-1] = dns.rrset.from_rdata_list(rrset.name, rrset.ttl, kept)
            try:
                return response.to_wire(max_size=limit)
            except dns.exception.TooBig:
                kept.pop()
        return response.to_wire()

    def udp_replies(self, data: bytes) -> list[bytes]:
        self.queries["udp"] += 1
        mode = self.mode
        if mode in ("silent",):
            return []
        if mode == "garbage":
            return [os.urandom(40)]
        try:
            query = dns.message.from_wire(data)
        except Exception:
            return []
        if mode in ("truncate", "tcp_stall", "tcp_endless"):
            cut = dns.message.make_response(query)
            cut.flags |= dns.flags.TC
            return [cut.to_wire()]
        limit = query.payload if query.edns >= 0 else 512
        real = self.wire(query, max(512, limit))
        other = struct.pack("!H", (query.id + 1) & 0xFFFF) + real[2:]
        if mode == "wrong_id":
            return [other, real]
        if mode == "wrong_id_only":
            return [other, other]
        if mode == "other_question":
            other = dns.message.make_query("mail.zone.test.", "A")
            other.id = query.id
            return [self.wire(other, 1232)]
        if mode == "upper_case":
            qlen = len(query.question[0].name.to_wire() or b"")
            return [real[:12] + real[12:12 + qlen].upper() + real[12 + qlen:]]
        if mode == "garbage_matching":
            qlen = len(query.question[0].name.to_wire() or b"") + 4
            head = bytearray(real[:12 + qlen])
            head[6:8] = b"\x00\x05"  # five answers promised, none there
            return [bytes(head) + os.urandom(7)]
        return [real]

    async def _tcp_client(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            for _ in range(16):  # questions per connection
                head = await reader.readexactly(2)
                data = await reader.readexactly(struct.unpack("!H", head)[0])
                self.queries["tcp"] += 1
                mode = self.mode
                if mode in ("silent", "tcp_stall"):
                    await reader.read(1)  # until the client goes
                    return
                query = dns.message.from_wire(data)
                if mode == "tcp_endless":
                    other = self.answer(query)
                    other.id = (query.id + 1) & 0xFFFF
                    pad = dns.rrset.from_text_list(
                        query.question[0].name, 60, "IN", "TXT",
                        [f'"{i:04d}{"y" * 240}"' for i in range(245)])
                    other.additional.append(pad)
                    msg = other.to_wire(max_size=65535)
                    for _ in range(_ENDLESS_MESSAGES):
                        writer.write(struct.pack("!H", len(msg)) + msg)
                        await writer.drain()
                    return
                reply = self.wire(query, 65535)
                writer.write(struct.pack("!H", len(reply)) + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, dns.exception.DNSException):
            return
        finally:
            self._writers.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            writer.close()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DnsZoneServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: Any) -> None:
        assert self.transport is not None
        for reply in self.server.udp_replies(data):
            self.transport.sendto(reply, addr)


def _rrset(name: dns.name.Name, rds: Any) -> dns.rrset.RRset:
    rrset = dns.rrset.RRset(name, rds.rdclass, rds.rdtype)
    rrset.update(rds)
    return rrset
