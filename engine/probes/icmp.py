"""ICMP echo probes (ping) on the one event loop, one socket per address family.

Access, without root: an ICMP *datagram* socket (``SOCK_DGRAM``, ``IPPROTO_ICMP``/``ICMPV6``)
where the kernel allows it, i.e. the process's group is inside ``net.ipv4.ping_group_range``
(the one setting serves IPv6 too); else a raw socket, which needs ``CAP_NET_RAW``.
:func:`ping_access` says which one this node has per family, or why it has none and what to
set (:data:`HOW_TO_ALLOW`).

Sharing: an :class:`IcmpProber` opens at most one socket per family, on first use, and
every probe sends through it. Each echo request carries the socket's identifier (a datagram
socket's is its local port, which the kernel writes in and matches replies by; a raw
socket's is random), a 16-bit sequence number that names the request among those in flight,
and an 8-byte random token. A reply is credited only to the request in flight with its
sequence number, identifier and token, and only when it comes from the address that request
went to: a reply from another address counts as a stray, a second reply to one request as a
duplicate, a reply after its probe ended (its request no longer in flight) as nothing;
none of them is counted as received. Replies to an earlier request of the same probe that
come after later ones are credited to that request, with its own round-trip time.

Nothing blocks: the sockets are non-blocking, the loop's ``add_reader`` calls back when
replies wait, sends are timed with ``call_at``. A probe sends ``count`` requests
``interval`` seconds apart and ends when every request sent has its reply, or at its
deadline (the probe timeout, from its start, name lookup included).
"""

from __future__ import annotations

import asyncio
import errno
import random
import socket
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import Any, Final
from urllib.parse import parse_qsl

from engine.domain import ping as pingfigs
from engine.domain.netpolicy import Resolver
from engine.domain.outcomes import HttpOutcome
from engine.domain.ping import PingFigures, PingSpec, figures, no_reply_words
from engine.probes.addresses import checked_literal, ip_literal, resolve_checked, source_family
from engine.probes.failures import ProbeFailure, os_error_words, short, timeout_words
from engine.runtime.settings import Settings

DATAGRAM: Final = "datagram"
RAW: Final = "raw"
MODES: Final = (DATAGRAM, RAW)

HOW_TO_ALLOW: Final = (
    "allow unprivileged ping with sysctl net.ipv4.ping_group_range=\"0 2147483647\" (or a "
    "range holding the service's group id), or give the service CAP_NET_RAW (systemd: "
    "AmbientCapabilities=CAP_NET_RAW)"
)

_V4: Final[int] = socket.AF_INET
_V6: Final[int] = socket.AF_INET6
_ECHO_REQUEST: Final[dict[int, int]] = {_V4: 8, _V6: 128}
_ECHO_REPLY: Final[dict[int, int]] = {_V4: 0, _V6: 129}
_PROTO: Final[dict[int, int]] = {_V4: socket.IPPROTO_ICMP, _V6: socket.IPPROTO_ICMPV6}
_SOL_RAW: Final = 255
_ICMP_FILTER: Final = 1  # SOL_RAW: a mask of ICMP types to drop
_ICMP6_FILTER: Final = 1  # IPPROTO_ICMPV6: struct icmp6_filter, a set bit drops its type
_HEADER: Final = struct.Struct("!BBHHH")
_TAIL: Final = b"Upwatch\x00"  # after the 8-byte token: 16 bytes of payload
# Datagrams read per wake-up before the loop's other callbacks get their turn.
_READS_PER_WAKE: Final = 64
_PING_GROUP_RANGE: Final = "/proc/sys/net/ipv4/ping_group_range"
# Parsed monitor URLs kept (the same URLs come back probe after probe).
_TARGETS_KEPT: Final = 100_000


def _checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``."""
    if len(data) % 2:
        data += b"\x00"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def _open(family: int, mode: str) -> socket.socket:
    """A non-blocking ICMP socket of ``family`` in ``mode``; OSError when not allowed. A raw
    socket is given the kernel's filter so that it wakes for echo replies only."""
    kind = socket.SOCK_DGRAM if mode == DATAGRAM else socket.SOCK_RAW
    sock = socket.socket(family, kind | socket.SOCK_NONBLOCK | socket.SOCK_CLOEXEC,
                         _PROTO[family])
    if mode == RAW:
        try:
            if family == _V4:
                sock.setsockopt(_SOL_RAW, _ICMP_FILTER,
                                struct.pack("I", ~(1 << _ECHO_REPLY[_V4]) & 0xFFFFFFFF))
            else:
                words = [0xFFFFFFFF] * 8
                words[129 >> 5] &= ~(1 << (129 & 31))
                sock.setsockopt(socket.IPPROTO_ICMPV6, _ICMP6_FILTER, struct.pack("8I", *words))
        except OSError:
            pass  # without the filter every ICMP packet wakes us; replies are still sorted
    return sock


def _group_range() -> str:
    try:
        with open(_PING_GROUP_RANGE, encoding="ascii") as f:
            return " ".join(f.read().split())
    except OSError:
        return "unknown"


@dataclass(frozen=True, slots=True)
class PingAccess:
    """How this node can send echo requests: per family :data:`DATAGRAM`, :data:`RAW` or
    None; ``reason`` says why a family has none (None when both have one)."""

    ipv4: str | None
    ipv6: str | None
    reason: str | None

    @property
    def can_ping(self) -> bool:
        return self.ipv4 is not None or self.ipv6 is not None

    def words(self) -> str:
        """One line for ``upwatch status``."""
        if not self.can_ping:
            return f"no: {self.reason}"
        parts = [f"{name} through {mode} sockets" for name, mode in
                 (("IPv4", self.ipv4), ("IPv6", self.ipv6)) if mode is not None]
        text = "yes, " + " and ".join(parts)
        return text if self.reason is None else f"{text} ({self.reason})"


def _family_mode(family: int, modes: tuple[str, ...]) -> tuple[str | None, OSError | None]:
    last: OSError | None = None
    for mode in modes:
        try:
            _open(family, mode).close()
        except OSError as exc:
            last = exc
            continue
        return mode, None
    return None, last


def ping_access(modes: tuple[str, ...] = MODES) -> PingAccess:
    """Which sockets this process may open, tried in ``modes`` order (each opened and closed
    at once: a few microseconds), with the reason in words when a family has none."""
    v4, _ = _family_mode(_V4, modes)
    v6, e6 = _family_mode(_V6, modes)
    reason = None
    if v4 is None and v6 is None:
        reason = (
            "this node cannot send ICMP echo requests: unprivileged ICMP sockets are not "
            f"allowed to its group (net.ipv4.ping_group_range is \"{_group_range()}\") and "
            f"raw sockets need CAP_NET_RAW; {HOW_TO_ALLOW}"
        )
    elif v6 is None:
        why = "not available" if e6 and e6.errno == errno.EAFNOSUPPORT else "not allowed"
        reason = f"IPv6 ICMP sockets are {why} on this node"
    elif v4 is None:
        reason = "IPv4 ICMP sockets are not allowed on this node"
    return PingAccess(v4, v6, reason)


@dataclass(slots=True)
class PingResult:
    """One probe: ``error`` None when at least one reply came (loss under 100 %), else the
    reason in words; ``figures`` None when no request could be sent. Times in ms."""

    error: str | None
    figures: PingFigures | None
    total_ms: float
    dns_ms: float | None
    remote_ip: str | None


def parse_url(url: str) -> tuple[str, int, float]:
    """(host, count, interval in seconds) of a stored ``icmp://host[?count=N&interval_ms=M]``
    (engine/monitors/icmp_scheme.py validated it); the host without IPv6 brackets."""
    rest = url.split("://", 1)[1]
    host, _, query = rest.partition("?")
    host = host.rstrip("/").strip("[]")
    params = dict(parse_qsl(query))
    count = int(params.get("count", pingfigs.DEFAULT_COUNT))
    interval_ms = int(params.get("interval_ms", pingfigs.DEFAULT_INTERVAL_MS))
    return host, count, interval_ms / 1000.0


def outcome(result: PingResult, assertions: Sequence[Mapping[str, Any]] | None) -> HttpOutcome:
    """The uptime check's outcome of a ping: ``error`` None when a reply came, the figures
    as ``details``, the first failed assertion's words. The average RTT is ``ttfb_ms`` and,
    when a reply came, ``total_ms`` too: a ping's response time (statistics, the slow
    threshold, badges) is its round trip, not the probe's duration, which is mostly the
    spacing of its requests (or, with one lost, the timeout)."""
    f = result.figures
    failed = None
    if result.error is None and f is not None and assertions:
        failed = pingfigs.check(assertions, f)
    rtt = f.rtt_avg if f is not None else None
    answered = result.error is None and rtt is not None
    return HttpOutcome(
        None, result.error, rtt if answered and rtt is not None else result.total_ms,
        result.dns_ms, None, None, rtt, remote_ip=result.remote_ip,
        assertion_error=failed, details=f.details() if f is not None else None,
    )


class _Echo:
    __slots__ = ("ip", "ping", "rtt", "sent", "seq", "token")

    def __init__(self, ping: _Ping, ip: str, seq: int, token: bytes) -> None:
        self.ping = ping
        self.ip = ip
        self.seq = seq
        self.token = token
        self.sent = 0.0
        self.rtt: float | None = None


class _Ping:
    """One probe's requests in flight."""

    __slots__ = ("answered", "count", "done", "duplicates", "echoes", "send_error",
                 "strays", "timers")

    def __init__(self, count: int, done: asyncio.Future[None]) -> None:
        self.count = count
        self.done = done
        self.echoes: list[_Echo] = []
        self.answered = 0
        self.duplicates = 0
        self.strays = 0
        self.send_error: str | None = None
        self.timers: list[asyncio.TimerHandle] = []

    def replied(self, echo: _Echo, at: float) -> None:
        if echo.rtt is not None:
            self.duplicates += 1
            return
        echo.rtt = (at - echo.sent) * 1000.0
        self.answered += 1
        if self.answered == self.count and not self.done.done():
            self.done.set_result(None)


class _Channel:
    """The socket of one family and the requests in flight on it, by sequence number."""

    __slots__ = ("family", "ident", "loop", "mode", "raw_v4", "reply", "request", "seq",
                 "sock", "table", "view")

    def __init__(self, loop: asyncio.AbstractEventLoop, family: int, mode: str,
                 source: str | None) -> None:
        sock = _open(family, mode)
        try:
            if source is not None or mode == DATAGRAM:
                sock.bind((source or ("0.0.0.0" if family == _V4 else "::"), 0))
            self.ident = sock.getsockname()[1] if mode == DATAGRAM else random.getrandbits(16)
            loop.add_reader(sock.fileno(), self._readable)
        except BaseException:
            sock.close()
            raise
        self.loop = loop
        self.sock = sock
        self.family = family
        self.mode = mode
        self.raw_v4 = mode == RAW and family == _V4
        self.request = _ECHO_REQUEST[family]
        self.reply = _ECHO_REPLY[family]
        self.seq = random.getrandbits(16)
        self.table: dict[int, _Echo] = {}
        self.view = memoryview(bytearray(2048))

    def add(self, ping: _Ping, ip: str) -> _Echo | None:
        """A new request of ``ping`` in flight, or None when all 65,536 sequence numbers
        are."""
        table = self.table
        seq = self.seq
        for _ in range(65536):
            seq = (seq + 1) & 0xFFFF
            if seq not in table:
                break
        else:
            return None
        self.seq = seq
        echo = table[seq] = _Echo(ping, ip, seq, random.getrandbits(64).to_bytes(8, "big"))
        return echo

    def send(self, echo: _Echo) -> None:
        """Send ``echo``'s request; raises OSError when the kernel refuses it at once."""
        if self.raw_v4:
            head = _HEADER.pack(self.request, 0, 0, self.ident, echo.seq)
            cs = _checksum(head + echo.token + _TAIL)
            packet = _HEADER.pack(self.request, 0, cs, self.ident, echo.seq) + echo.token + _TAIL
        else:  # the kernel fills in the checksum (ICMPv6, and datagram sockets)
            packet = _HEADER.pack(self.request, 0, 0, self.ident, echo.seq) + echo.token + _TAIL
        echo.sent = perf_counter()
        self.sock.sendto(packet, (echo.ip, 0))

    def forget(self, ping: _Ping) -> None:
        table = self.table
        for echo in ping.echoes:
            if table.get(echo.seq) is echo:
                del table[echo.seq]

    def _readable(self) -> None:
        sock = self.sock
        view = self.view
        for _ in range(_READS_PER_WAKE):
            try:
                n, addr = sock.recvfrom_into(view)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                continue  # an error queued on the socket (an ICMP error on a datagram socket)
            at = perf_counter()
            start = 0
            if self.raw_v4:
                if n < 20 or view[0] >> 4 != 4:
                    continue
                start = (view[0] & 0x0F) * 4
            if n - start < 16 or view[start] != self.reply or view[start + 1] != 0:
                continue
            ident = (view[start + 4] << 8) | view[start + 5]
            if ident != self.ident:
                continue  # another prober's, or another program's
            echo = self.table.get((view[start + 6] << 8) | view[start + 7])
            if echo is None or view[start + 8:start + 16] != echo.token:
                continue  # late (its probe ended) or not ours
            if str(addr[0]).split("%", 1)[0] != echo.ip:
                echo.ping.strays += 1
                continue
            echo.ping.replied(echo, at)

    def close(self) -> None:
        if not self.loop.is_closed():
            self.loop.remove_reader(self.sock.fileno())
        self.sock.close()


class IcmpProber:
    """Runs ping probes; one instance serves any number of concurrent probes on one loop.

    ``mode`` forces :data:`DATAGRAM` or :data:`RAW` (None: datagram where allowed, else
    raw). ``aclose()`` closes the sockets (probes still running end at once); the prober
    stays usable.
    """

    def __init__(
        self,
        *,
        timeout: float,
        source_address: str | None = None,
        allow_private: bool = False,
        resolver: Resolver | None = None,
        mode: str | None = None,
    ) -> None:
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        if mode is not None and mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self._timeout = timeout
        self._source = source_address
        self._family = source_family(source_address)
        self._allow_private = allow_private
        self._resolver = resolver
        self._modes = MODES if mode is None else (mode,)
        self._channels: dict[int, _Channel] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._running: set[_Ping] = set()
        self._targets: dict[str, tuple[str, int, float]] = {}

    @property
    def timeout(self) -> float:
        return self._timeout

    async def probe(self, url: str, spec: PingSpec | None = None) -> HttpOutcome:
        """The uptime probe of an ``icmp://`` monitor URL; ``spec``: its assertions. A
        broken spec fails at once, in its words, without pinging."""
        if spec is not None and spec.broken is not None:
            return HttpOutcome(None, spec.broken, 0.0, None, None, None, None)
        target = self._targets.get(url)
        if target is None:
            if len(self._targets) >= _TARGETS_KEPT:
                self._targets.clear()
            target = self._targets[url] = parse_url(url)
        host, count, interval = target
        return outcome(await self.ping(host, count, interval),
                       spec.assertions if spec is not None else None)

    def modes(self) -> dict[str, str]:
        """The mode of each open socket, by family name ("ipv4", "ipv6")."""
        return {("ipv4" if f == _V4 else "ipv6"): c.mode for f, c in self._channels.items()}

    def _channel(self, family: int) -> _Channel:
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a new loop (tests): the old sockets belong to the old
            self._close_channels()
            self._loop = loop
        chan = self._channels.get(family)
        if chan is not None:
            return chan
        source = self._source if self._family == family else None
        last: OSError | None = None
        for mode in self._modes:
            try:
                chan = _Channel(loop, family, mode, source)
            except OSError as exc:
                last = exc
                continue
            self._channels[family] = chan
            return chan
        assert last is not None
        raise last

    async def ping(self, host: str, count: int = 3, interval: float = 0.5) -> PingResult:
        """Send ``count`` echo requests to ``host`` (a name or an IP literal), ``interval``
        seconds apart, within the probe timeout. Never raises but for cancellation."""
        if count < 1 or interval < 0:
            raise ValueError("count must be positive and interval not negative")
        t0 = perf_counter()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout
        literal = ip_literal(host)
        dns_ms: float | None = None
        try:
            if literal is not None:  # no lookup: no task for it either
                addrs = checked_literal(host, literal, self._allow_private)
            else:
                addrs, dns_ms = await asyncio.wait_for(
                    resolve_checked(host, 0, literal=None, family=self._family,
                                    allow_private=self._allow_private,
                                    resolver=self._resolver),
                    self._timeout,
                )
        except ProbeFailure as exc:
            return PingResult(str(exc), None, (perf_counter() - t0) * 1000.0, None, None)
        except TimeoutError:
            return PingResult(f"DNS lookup {timeout_words(self._timeout)}: {short(host)}",
                              None, (perf_counter() - t0) * 1000.0, None, None)
        try:
            chan, ip = self._pick(addrs)
        except OSError as exc:
            return PingResult(self._no_socket_words(exc), None,
                              (perf_counter() - t0) * 1000.0, dns_ms, None)
        done: asyncio.Future[None] = loop.create_future()
        now = loop.time()
        # Requests that would leave after the deadline are not sent (nor awaited).
        later = [at for at in (now + i * interval for i in range(1, count)) if at < deadline]
        ping = _Ping(1 + len(later), done)
        self._running.add(ping)
        try:
            self._send(chan, ping, ip)
            for at in later:
                ping.timers.append(loop.call_at(at, self._send, chan, ping, ip))
            if not done.done():
                ping.timers.append(loop.call_at(deadline, _finish, done))
                await done
        finally:
            self._running.discard(ping)
            for timer in ping.timers:
                timer.cancel()
            chan.forget(ping)
        total_ms = (perf_counter() - t0) * 1000.0
        sent = [e for e in ping.echoes if e.sent]
        if not sent:
            return PingResult(ping.send_error or "closed", None, total_ms, dns_ms, ip)
        figs = figures([e.rtt for e in sent], ping.duplicates, ping.strays)
        error = None
        if figs.received == 0:
            error = ping.send_error or no_reply_words(len(sent), self._timeout)
        return PingResult(error, figs, total_ms, dns_ms, ip)

    def _pick(self, addrs: list[str]) -> tuple[_Channel, str]:
        """The socket and address to ping: the first IPv4 address this node can ping, else
        the first IPv6 one; only of the source address's family when one is set."""
        last: OSError | None = None
        for family in (_V4, _V6):
            if self._family not in (socket.AF_UNSPEC, family):
                continue
            for a in addrs:
                if (":" in a) == (family == _V6):
                    try:
                        return self._channel(family), a
                    except OSError as exc:
                        last = exc
                        break
        raise last or OSError(errno.EAFNOSUPPORT, "no address to ping")

    def _no_socket_words(self, exc: OSError) -> str:
        if isinstance(exc, PermissionError):
            return ping_access(self._modes).reason or f"ICMP socket not allowed; {HOW_TO_ALLOW}"
        if exc.errno == errno.EAFNOSUPPORT:
            if self._family != socket.AF_UNSPEC:
                return ("no address of the probe source address's family "
                        f"(UPWATCH_PROBE_SOURCE_ADDRESS={self._source})")
            return "no address of a family this node can ping"
        return os_error_words(exc)

    def _send(self, chan: _Channel, ping: _Ping, ip: str) -> None:
        if ping.done.done():
            return
        echo = chan.add(ping, ip)
        if echo is None:
            ping.send_error = "too many echo requests in flight"
            ping.count -= 1
            return
        ping.echoes.append(echo)
        try:
            chan.send(echo)
        except BlockingIOError:
            return  # the socket's buffer is full: this request counts as sent and lost
        except OSError as exc:
            echo.sent = 0.0
            ping.count -= 1
            ping.send_error = os_error_words(exc)
            if ping.count <= ping.answered and not ping.done.done():
                ping.done.set_result(None)

    def _close_channels(self) -> None:
        for chan in self._channels.values():
            chan.close()
        self._channels.clear()

    async def aclose(self) -> None:
        for ping in list(self._running):
            _finish(ping.done)
        self._close_channels()


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():
        done.set_result(None)


def factory(settings: Settings, metrics: Any, resolver: Resolver | None) -> IcmpProber:
    """The node's ping prober (``engine.kinds.uptime_probers.FACTORIES``): the probe
    timeout, source address and private-address rule of the settings, the uptime probes'
    resolver."""
    return IcmpProber(timeout=settings.probe_timeout,
                      source_address=settings.probe_source_address,
                      allow_private=settings.allow_private_targets, resolver=resolver)
