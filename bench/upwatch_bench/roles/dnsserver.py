"""An authoritative DNS server for one test zone, on loopback: the world's resolvers as the
bench and the tests need them (answers after a settable latency, with a settable TTL, and the
ways real DNS goes wrong). Messages are parsed and built with ``dnspython``; UDP and TCP.

Names under the zone (``zone`` = ``names.test`` by default), by their first label:

==================  ===================================================================
``m<i>[-...]``      ``addresses[i % len(addresses)]`` (A; AAAA only for IPv6 entries)
``nx-...``          NXDOMAIN
``loop-...``        a CNAME to itself (a CNAME loop)
``chain-...``       a CNAME to ``m0.<zone>`` with its address (a CNAME that resolves)
``big-...``         ``big_count`` A records: truncated over UDP, whole over TCP
``mixed-...``       one public and one private address (93.184.216.34, 127.0.0.1)
``hang-...``        no answer at all (the resolver times out)
``fail-...``        SERVFAIL
anything else       ``names[name]`` if set (a list of addresses), else NXDOMAIN
==================  ===================================================================

With ``address_of`` set (``upwatch bench internet``: upwatch_bench/world.py), it answers the
``m<i>`` names instead of ``addresses``: its address, or NXDOMAIN for None.

Every question is counted per (name, type) in ``queries``. Run in the caller's event loop
(:class:`DnsServer`, for tests) or as a bench child (role ``dns``, pinned like the targets).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import time
from array import array
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import dns.exception
import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset

_INDEX = re.compile(r"m(\d+)(?:-|$)")
PUBLIC_EXAMPLE = "93.184.216.34"
_TIMES_CAP = 4_000_000  # 32 MB of question times: far more than a bounded run asks


class DnsServer:
    """One server on ``host`` (UDP and TCP on the same port). ``latency`` and ``ttl`` may be
    changed while it runs; ``names`` is read at every question."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        zone: str = "names.test",
        addresses: Iterable[str] = ("127.0.0.1",),
        latency: float = 0.0,
        ttl: int = 300,
        big_count: int = 400,
    ) -> None:
        self.host = host
        self.port = port
        self.zone = dns.name.from_text(zone)
        self._zone_text = self.zone.to_text(omit_final_dot=True).lower()
        self.addresses = list(addresses)
        self.latency = latency
        self.ttl = ttl
        self.big_count = big_count
        self.names: dict[str, list[str]] = {}
        # A world's own answers (upwatch_bench/world.py): name -> address, None: NXDOMAIN.
        self.address_of: Callable[[str], str | None] | None = None
        self.queries: Counter[tuple[str, str]] = Counter()
        self.times: array[float] = array("d")  # wall time of every question (bounded)
        self.asked: array[int] = array("l")  # ... and its (name, type), as an index of _keys
        self._keys: dict[tuple[str, str], int] = {}
        # Per wall-clock second: [answers sent, the most an answer went out after its
        # due time (s)]: how far behind the server fell (a reading for the bench).
        self.seconds: dict[int, list[float]] = {}
        self._udp: asyncio.DatagramTransport | None = None
        self._tcp: asyncio.base_events.Server | None = None

    @property
    def address(self) -> str:
        """``host:port``, the form the resolver's ``dns_servers`` setting takes."""
        return f"{self.host}:{self.port}"

    def total_queries(self) -> int:
        return sum(self.queries.values())

    def queries_between(self, start: float, end: float) -> int:
        """Questions received between two wall times (``time.time()``)."""
        return bisect_left(self.times, end) - bisect_left(self.times, start)

    def most_per_name_type(self, start: float, end: float) -> tuple[int, int]:
        """(the most questions any one (name, record type) got between two wall times, how
        many (name, type) pairs were asked for then)."""
        lo, hi = bisect_left(self.times, start), bisect_left(self.times, end)
        counts = Counter(self.asked[lo:hi])
        return max(counts.values(), default=0), len(counts)

    async def __aenter__(self) -> DnsServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tcp = await asyncio.start_server(self._tcp_client, self.host, self.port)
        self.port = self._tcp.sockets[0].getsockname()[1]
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # Bursts of questions (a cold cache: thousands at once) must wait in the socket, not
        # be dropped: the default buffer holds a few hundred datagrams.
        for opt in (getattr(socket, "SO_RCVBUFFORCE", None), socket.SO_RCVBUF):
            if opt is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, opt, 16 << 20)
                    break
        sock.bind((self.host, self.port))
        self._udp, _ = await loop.create_datagram_endpoint(lambda: _Udp(self), sock=sock)

    def close(self) -> None:
        if self._udp is not None:
            self._udp.close()
        if self._tcp is not None:
            self._tcp.close()

    # -- answers ----------------------------------------------------------------------------

    def answer(self, wire: bytes, *, tcp: bool) -> bytes | None:
        """The response to a query's wire form; None: no answer at all."""
        if self.address_of is not None:
            fast = self._world_answer(wire)
            if fast is not None:
                return fast
        try:
            q = dns.message.from_wire(wire)
        except Exception:
            return None
        if not q.question:
            return None
        question = q.question[0]
        name = question.name
        rdtype = question.rdtype
        key = name.to_text(omit_final_dot=True).lower()
        asked = (key, dns.rdatatype.to_text(rdtype))
        self.queries[asked] += 1
        if len(self.times) < _TIMES_CAP:
            self.times.append(time.time())
            self.asked.append(self._keys.setdefault(asked, len(self._keys)))
        r = dns.message.make_response(q)
        r.flags |= dns.flags.AA
        first = key.split(".", 1)[0]
        if not name.is_subdomain(self.zone) and key not in self.names:
            r.set_rcode(dns.rcode.REFUSED)
            return r.to_wire()
        if first.startswith("hang-"):
            return None
        if first.startswith("fail-"):
            r.set_rcode(dns.rcode.SERVFAIL)
            return r.to_wire()
        if first.startswith("loop-"):
            r.answer.append(dns.rrset.from_text(name, self.ttl, "IN", "CNAME", name.to_text()))
            return r.to_wire()
        if first.startswith("chain-"):
            target = dns.name.from_text("m0", origin=self.zone)
            r.answer.append(dns.rrset.from_text(name, self.ttl, "IN", "CNAME",
                                                target.to_text()))
            self._addresses(r, target, rdtype, self.addresses[:1])
            return r.to_wire()
        if first.startswith("big-"):
            ips = [f"10.{(i >> 8) & 255}.{i & 255}.1" for i in range(self.big_count)]
            self._addresses(r, name, rdtype, ips)
            return self._wire(r, q, tcp)
        if first.startswith("mixed-"):
            self._addresses(r, name, rdtype, [PUBLIC_EXAMPLE, "127.0.0.1"])
            return r.to_wire()
        m = _INDEX.match(first)
        if self.address_of is not None:
            found = self.address_of(key)
            if found is None:
                r.set_rcode(dns.rcode.NXDOMAIN)
                return r.to_wire()
            ips = [found]
        elif m is not None and self.addresses:
            ips = [self.addresses[int(m.group(1)) % len(self.addresses)]]
        elif key in self.names:
            ips = self.names[key]
        else:
            r.set_rcode(dns.rcode.NXDOMAIN)
            return r.to_wire()
        self._addresses(r, name, rdtype, ips)
        return self._wire(r, q, tcp)

    def _world_answer(self, wire: bytes) -> bytes | None:
        """A world's A/AAAA question answered without dnspython (None: take the general
        path). At 50,000 names the general path's ~200 us a question (parse and build) made
        this server a bottleneck on the shared core during the first interval; this one
        reads the question in place and writes the answer from bytes. Same answers: the
        address with the TTL, NOERROR without records for AAAA, NXDOMAIN for None; an EDNS
        query gets an OPT record back."""
        n = len(wire)
        if n < 17 or wire[4:6] != b"\x00\x01" or wire[2] & 0xF8 or wire[6:8] != b"\x00\x00":
            return None  # not one plain query
        i, labels = 12, []
        while True:
            length = wire[i]
            if length == 0:
                i += 1
                break
            if length & 0xC0 or i + 1 + length >= n:
                return None
            labels.append(wire[i + 1:i + 1 + length])
            i += 1 + length
        qtype, end = wire[i:i + 2], i + 4
        if end > n or wire[i + 2:end] != b"\x00\x01" or qtype not in (b"\x00\x01", b"\x00\x1c"):
            return None
        try:
            key = b".".join(labels).decode("ascii").lower()
        except UnicodeDecodeError:
            return None
        if not key.endswith("." + self._zone_text) or key.split(".", 1)[0].startswith(
                ("hang-", "fail-", "loop-", "chain-", "big-", "mixed-")):
            return None
        address = self.address_of(key) if self.address_of is not None else None
        asked = (key, "A" if qtype == b"\x00\x01" else "AAAA")
        self.queries[asked] += 1
        if len(self.times) < _TIMES_CAP:
            self.times.append(time.time())
            self.asked.append(self._keys.setdefault(asked, len(self._keys)))
        edns = wire[10:12] != b"\x00\x00"
        records = b""
        if address is not None and qtype == b"\x00\x01" and ":" not in address:
            records = (b"\xc0\x0c\x00\x01\x00\x01" + self.ttl.to_bytes(4, "big")
                       + b"\x00\x04" + socket.inet_aton(address))
        rcode = 3 if address is None else 0
        header = (wire[:2] + bytes((0x84 | (wire[2] & 0x01), rcode)) + b"\x00\x01"
                  + (b"\x00\x01" if records else b"\x00\x00") + b"\x00\x00"
                  + (b"\x00\x01" if edns else b"\x00\x00"))
        opt = b"\x00\x00\x29\x04\xd0\x00\x00\x00\x00\x00\x00" if edns else b""
        return header + wire[12:end] + records + opt

    def _addresses(self, r: dns.message.Message, name: dns.name.Name, rdtype: int,
                   ips: list[str]) -> None:
        want = "AAAA" if rdtype == dns.rdatatype.AAAA else "A"
        chosen = [ip for ip in ips if (":" in ip) == (want == "AAAA")]
        if chosen:
            r.answer.append(dns.rrset.from_text_list(name, self.ttl, "IN", want, chosen))

    def _wire(self, r: dns.message.Message, q: dns.message.Message, tcp: bool) -> bytes:
        limit = 65535 if tcp else max(512, q.payload if q.edns >= 0 else 512)
        try:
            return r.to_wire(max_size=limit)
        except dns.exception.TooBig:
            r.answer = []
            r.flags |= dns.flags.TC
            return r.to_wire()

    def reply_later(self, send: Any, wire: bytes | None) -> None:
        if wire is None:
            return
        due = time.time() + self.latency
        if self.latency > 0:
            asyncio.get_running_loop().call_later(self.latency, self._send, send, wire, due)
        else:
            self._send(send, wire, due)

    def _send(self, send: Any, wire: bytes, due: float) -> None:
        send(wire)
        now = time.time()
        row = self.seconds.get(int(now))
        if row is None:
            row = self.seconds[int(now)] = [0, 0.0]
        row[0] += 1
        if now - due > row[1]:
            row[1] = now - due

    def timeline(self, start: float, end: float) -> list[list[float]]:
        """[wall second, answers sent, the latest answer's delay past its due time (ms)]
        for each second between two wall times that had answers."""
        return [[sec, row[0], round(row[1] * 1000, 1)]
                for sec, row in sorted(self.seconds.items()) if start <= sec < end]

    async def _tcp_client(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        def send(wire: bytes) -> None:
            if not writer.is_closing():
                writer.write(len(wire).to_bytes(2, "big") + wire)

        try:
            while True:
                size = int.from_bytes(await reader.readexactly(2), "big")
                self.reply_later(send, self.answer(await reader.readexactly(size), tcp=True))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


class _Udp(asyncio.DatagramProtocol):
    def __init__(self, server: DnsServer) -> None:
        self.server = server
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        transport = self.transport

        def send(wire: bytes) -> None:
            if transport is not None and not transport.is_closing():
                transport.sendto(wire, addr)

        self.server.reply_later(send, self.server.answer(data, tcp=False))


async def _serve(cfg: dict[str, Any]) -> None:
    from upwatch_bench.child import commands, emit

    server = DnsServer(host=cfg.get("host", "127.0.0.1"), port=cfg.get("port", 0),
                       zone=cfg.get("zone", "names.test"), addresses=cfg["addresses"],
                       latency=cfg.get("latency_s", 0.0), ttl=cfg.get("ttl", 300))
    if cfg.get("world"):
        from upwatch_bench.world import World

        server.address_of = World.from_dict(cfg["world"]).address_of
    await server.start()
    emit("ready", address=server.address)
    async for msg in commands():
        cmd = msg.get("cmd")
        if cmd == "count":
            window = most = pairs = None
            if msg.get("start") is not None and msg.get("end") is not None:
                start, end = float(msg["start"]), float(msg["end"])
                window = server.queries_between(start, end)
                most, pairs = server.most_per_name_type(start, end)
            emit("count", queries=server.total_queries(), window=window,
                 names=len({name for name, _ in server.queries}),
                 most_per_name_type=most, name_types=pairs)
        elif cmd == "timeline":
            emit("timeline", seconds=server.timeline(float(msg["start"]), float(msg["end"])))
        elif cmd == "set":
            server.latency = float(msg.get("latency_s", server.latency))
            server.ttl = int(msg.get("ttl", server.ttl))
            emit("set")
        elif cmd == "stop":
            break
    server.close()


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    with contextlib.suppress(KeyboardInterrupt):
        uvloop.run(_serve(cfg))
    return 0
