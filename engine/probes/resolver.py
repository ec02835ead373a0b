"""Name lookups made for a prober: asynchronous, cached per answer TTL, one in flight per name.

A prober looks the same few thousand names up again and again, each every interval; the
system resolver (``loop.getaddrinfo``) runs every lookup in a thread pool and caches
nothing. Here:

* lookups go through c-ares (``pycares``), its sockets on the event loop (no thread), with
  ``resolv.conf`` (servers, search, ndots, timeout, attempts) and ``/etc/hosts`` honoured as
  c-ares does (the ``lookups`` order of ``resolv.conf``; it does not read ``nsswitch.conf``);
  ``servers``, ``timeout`` and ``tries`` override. c-ares's own query cache is turned off
  (engine/probes/cares_channel.py): this cache is the only one;
* each answer is kept for its TTL (the smallest of its addresses' and CNAMEs'), clamped to
  ``[min_ttl, max_ttl]``; a name that does not exist for ``negative_ttl``, any other answer
  that is a failure (SERVFAIL, refused, no address, CNAME loop, oversized answer) for
  ``failure_ttl``, so a broken name costs one query per that time, not one per probe;
* a time-out says nothing about the name: a lookup that timed out is kept as a failure for
  at most ``TIMEOUT_TTL`` (1 s), not ``failure_ttl``. A name with a previous good answer is
  then served that answer instead (serve-stale, RFC 8767), for at most ``serve_stale``
  seconds past its TTL, asking again every ``STALE_RECHECK`` s; the same when the resolver
  refuses the connection ("resolver unreachable"). Failures that are answers about the name
  (NXDOMAIN, SERVFAIL, ...) are never served stale;
* a try waits at most ``timeout`` (c-ares's ``maxtimeout``; c-ares otherwise learns a
  shorter per-try time-out from the server's recent answers), and c-ares gets the tries its
  doubling needs to get from 250 ms up to ``timeout`` on top of ``tries``
  (:func:`cares_tries`: 5 for 2 s and 2): a lost datagram is asked again after 250 ms, a
  slow server is waited for up to ``timeout`` a try. c-ares's socket holds 1 MiB of answers
  (``_CARES_RCVBUF``) for a busy loop to read;
* one lookup in flight per name: probes of a name being looked up wait for that lookup;
* an answer whose TTL is over is still served for a tenth of its TTL more (at most
  ``STALE_MAX`` s) while it is looked up again in the background (the one lookup in flight
  for the name): a name probed at least that often is never waited for after its first
  lookup, and the server is asked once per TTL, not more. Failures are never served stale
  (except a time-out's previous answer: above);
* at most ``max_names`` names are kept; the least recently used go first (a full cache
  drops the oldest 64th of them at once, see :meth:`ProbeResolver._store`; a hit counts as
  a use once the cache is three quarters full, see ``_recency_from``);
* A and AAAA per ``family``: AF_INET asks A only, AF_INET6 AAAA only, AF_UNSPEC both
  (the probes' family follows their source address,
  :func:`engine.probes.addresses.source_family`).

Why each of these, and what they were measured against: docs/design.md, "Name lookups", and
docs/performance.md, "Name lookups".

The private-address rule is NOT applied here: the probes apply it to every address of every
answer, cached or not, at connect time (``engine/probes/addresses.py``), so a cached answer
cannot carry a rebinding past it.

Words for failures (``DnsAnswer.error``): ``DNS lookup failed: <name>`` for a name that does
not exist, else ``DNS lookup failed: <name> (<reason>)`` with reason ``resolver timed out``,
``server failure``, ``refused``, ``no address``, ``CNAME loop``, ``answer too large``,
``resolver unreachable``, ``invalid name``.

Why over ~600 lines, with a class (``ProbeResolver``) over ~300: the cache, the lookups in
flight, serve-stale and eviction above are one state, read on every probe's path.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import sys
from collections.abc import Callable
from time import monotonic, perf_counter
from typing import Any, Final

import pycares

from engine.probes.cares_channel import channel as _channel
from engine.probes.failures import ProbeFailure, short

log = logging.getLogger(__name__)

# An answer with more addresses than this is refused as a whole ("answer too large"): no
# site needs more, and an entry's memory stays bounded whatever the zone's owner publishes.
MAX_ADDRESSES: Final = 32
# An answer past its TTL is served while it is looked up again for a tenth of its TTL more,
# at most this many seconds.
STALE_MAX: Final = 30.0
# Distinct address strings shared between entries (names of one site share addresses).
_ADDRESS_POOL: Final = 65536
# CNAMEs followed when diagnosing an answer without addresses.
_MAX_CNAME_HOPS: Final = 8
# A lookup that timed out is kept as a failure this long at most (the probes of the name in
# that second fail at once instead of each waiting for another lookup that times out).
TIMEOUT_TTL: Final = 1.0
# Failures of the way to our resolver, not answers about the name: a previous good answer
# is served stale instead (RFC 8767), asked again after STALE_RECHECK s (its "failure
# recheck timer").
_STALE_KINDS: Final = frozenset({"timeout", "unreachable"})
STALE_RECHECK: Final = 30.0
# c-ares's least time-out per try (ares_metrics.c, MIN_TIMEOUT_MS), and its receive buffer:
# the default 208 KiB holds 256 answers, 150 ms of a cold start's 1,700 a second while the
# loop is busy; a full buffer drops the rest, and each drop is a time-out and a retry.
_CARES_MIN_TRY: Final = 0.25
_CARES_RCVBUF: Final = 1 << 20

_WORDS: Final[dict[int, tuple[str, str]]] = {
    pycares.errno.ARES_ENOTFOUND: ("nxdomain", ""),
    pycares.errno.ARES_ENONAME: ("nxdomain", ""),
    pycares.errno.ARES_ETIMEOUT: ("timeout", "resolver timed out"),
    pycares.errno.ARES_ESERVFAIL: ("servfail", "server failure"),
    pycares.errno.ARES_EREFUSED: ("refused", "refused"),
    pycares.errno.ARES_ENODATA: ("no_address", "no address"),
    pycares.errno.ARES_ECONNREFUSED: ("unreachable", "resolver unreachable"),
    pycares.errno.ARES_EBADNAME: ("invalid_name", "invalid name"),
    pycares.errno.ARES_EBADSTR: ("invalid_name", "invalid name"),
    pycares.errno.ARES_EBADRESP: ("bad_response", "bad response"),
    pycares.errno.ARES_EFORMERR: ("bad_response", "bad response"),
}


class DnsAnswer:
    """One name's cached answer: ``addresses`` (IP literals, deduplicated, in the answer's
    order; shared between answers, so never changed) or ``error`` (the probe's words);
    valid until ``expires`` (``time.monotonic``), served while refreshed until
    ``stale_until``.

    ``stale_until`` is kept as its distance from ``expires`` (``grace``), one float object
    shared by every answer with the same grace (a tenth of the TTL, at most ``STALE_MAX``;
    0 for failures): a float is 24 B (32 allocated) per entry, and 50,000 names' entries
    share a handful of graces. ``expires + grace`` may differ from the ``stale_until`` given
    by one unit in the last place (about 1e-12 s)."""

    __slots__ = ("addresses", "error", "expires", "grace")

    def __init__(self, addresses: list[str], error: str | None, expires: float,
                 stale_until: float) -> None:
        self.addresses = addresses
        self.error = error
        self.expires = expires
        grace = stale_until - expires
        shared = _GRACES.get(grace)
        if shared is None:
            if len(_GRACES) >= _GRACES_MAX:
                _GRACES.clear()  # answers keep theirs; only the sharing starts over
            shared = _GRACES[grace] = grace
        self.grace = shared

    @property
    def stale_until(self) -> float:
        """Served while refreshed until then (see STALE_MAX)."""
        return self.expires + self.grace


# Shared grace floats (see DnsAnswer): TTLs are whole seconds, clamped, so graces are few.
_GRACES: Final[dict[float, float]] = {}
_GRACES_MAX: Final = 4096


Waiter = Callable[[DnsAnswer, float], None]


def failure_words(host: str, reason: str) -> str:
    name = short(host)
    return f"DNS lookup failed: {name}" if not reason else f"DNS lookup failed: {name} ({reason})"


class ProbeResolver:
    """The lookups of one engine (one event loop at a time; a new loop, as in tests, gets a
    fresh c-ares channel). ``metrics``: an :class:`engine.runtime.metrics.Metrics` or None.

    Use from the event loop's thread only. Probes call :meth:`cached` (no await, no task)
    and, on a miss, :meth:`lookup` with a callback; :meth:`__call__` is the
    :data:`engine.domain.netpolicy.Resolver` form (the certificate probe, anything awaiting).
    """

    def __init__(
        self,
        *,
        family: int = socket.AF_UNSPEC,
        servers: list[str] | None = None,
        timeout: float = 2.0,
        tries: int = 2,
        min_ttl: float = 5.0,
        max_ttl: float = 3600.0,
        negative_ttl: float = 30.0,
        failure_ttl: float = 5.0,
        max_names: int = 200_000,
        serve_stale: float = 300.0,
        metrics: Any = None,
        clock: Callable[[], float] = monotonic,
    ) -> None:
        if min_ttl < 0 or max_ttl < min_ttl:
            raise ValueError("need 0 <= min_ttl <= max_ttl")
        self.family = family
        self._servers = list(servers or [])
        self._timeout = timeout
        self._tries = tries
        self._min_ttl = min_ttl
        self._max_ttl = max_ttl
        self._negative_ttl = max(0.0, negative_ttl)
        self._failure_ttl = max(0.0, failure_ttl)
        self._max_names = max(1, max_names)
        # A hit moves its name to the end (most recently used) only while the cache is at
        # least three quarters full. Below that nothing is dropped before a quarter of
        # max_names more names come in, and every name used meanwhile is moved then: the
        # names left in front are the ones not used since, the least recently used. The
        # move (a delete and an insert, and every so often the dict's rebuild) was ~1.7k of
        # the ~3.2k instructions of a hit (callgrind, compiled, 10,000 names).
        self._recency_from = (3 * self._max_names) // 4
        self._serve_stale = max(0.0, serve_stale)
        # Names served stale after a failed lookup -> the end of their serve-stale time
        # (usually empty; see _stale).
        self._stale_bound: dict[str, float] = {}
        self._clock = clock
        # Name -> answer, least recently used first: a plain dict's insertion order, an entry
        # moved to the end by deleting and inserting it again (an OrderedDict's links cost
        # ~40 B more per name). Keys are interned (see _store).
        self._cache: dict[str, DnsAnswer] = {}
        self._inflight: dict[str, list[Waiter]] = {}
        # One single-address list per distinct address, shared by every answer of just that
        # address (a list is ~80 B, its string ~60): answers' lists are never changed.
        self._addresses: dict[str, list[str]] = {}
        self._channel: _Cares | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # CNAME-loop diagnoses (failures only)
        self._generation = 0  # aclose() moves it on: answers to older lookups are dropped
        # Counters read by the bench and the metrics (plain ints: one per probe is cheap).
        self.hits = 0
        self.lookups = 0
        self.served_stale = 0  # failed lookups answered with a previous answer instead
        self.failures: dict[str, int] = {}
        self._m_hits: Any = None
        self._m_lookups: Any = None
        self._m_failures: Any = None
        self._m_latency: Any = None
        if metrics is not None:
            self._m_hits = metrics.dns_cache_hits.labels()
            self._m_lookups = metrics.dns_lookups.labels()
            self._m_failures = metrics.dns_failures
            self._m_latency = metrics.dns_lookup_seconds.observe

    def __len__(self) -> int:
        return len(self._cache)

    def unsettled(self) -> int:
        """Names whose entry is a failure, plus lookups in flight (the bench waits for 0
        before it measures names already looked up)."""
        return sum(1 for a in self._cache.values() if a.error is not None) + len(self._inflight)

    # -- probes' side -----------------------------------------------------------------------

    def cached(self, host: str) -> DnsAnswer | None:
        """The cached answer for ``host`` (a hit), or None (call :meth:`lookup`). An answer
        past its TTL but within its grace (``stale_until``) is served while it is looked up
        again in the background."""
        cache = self._cache
        answer = cache.get(host)
        if answer is None:
            return None
        now = self._clock()
        if now >= answer.expires:
            if now >= answer.stale_until:
                return None
            if host not in self._inflight:
                self._inflight[host] = []
                self._start(host)
        if len(cache) >= self._recency_from:
            del cache[host]  # to the end: the most recently used
            cache[sys.intern(host)] = answer
        self.hits += 1
        if self._m_hits is not None:
            self._m_hits.value += 1
        return answer

    def busy(self, host: str) -> bool:
        """A lookup of ``host`` is in flight."""
        return host in self._inflight

    def lookup(self, host: str, waiter: Waiter) -> None:
        """Look ``host`` up (or join the lookup in flight); ``waiter(answer, ms)`` is called
        once from the event loop, never from inside this call; ``ms`` is the time this
        waiter waited."""
        t0 = perf_counter()

        def waited(answer: DnsAnswer, _: float) -> None:
            waiter(answer, (perf_counter() - t0) * 1000.0)

        waiters = self._inflight.get(host)
        if waiters is not None:
            waiters.append(waited)
            return
        self._inflight[host] = [waited]
        self._start(host)

    async def __call__(self, host: str, port: int) -> list[str]:
        """The addresses of ``host`` (cached or looked up); raises
        :class:`~engine.probes.failures.ProbeFailure` with the answer's words (not a subclass:
        a compiled class cannot be subclassed from interpreted code)."""
        answer = self.cached(host)
        if answer is None:
            fut: asyncio.Future[DnsAnswer] = asyncio.get_running_loop().create_future()

            def wake(a: DnsAnswer, _: float) -> None:
                if not fut.done():
                    fut.set_result(a)

            self.lookup(host, wake)
            answer = await fut
        if answer.error is not None:
            raise ProbeFailure(answer.error)
        return list(answer.addresses)

    async def aclose(self) -> None:
        """Cancel lookups in flight (their waiters are not called) and close the channel."""
        self._generation += 1
        for task in list(self._tasks):
            task.cancel()
        self._inflight.clear()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()

    # -- lookups ----------------------------------------------------------------------------

    def _resolver(self) -> _Cares:
        loop = asyncio.get_running_loop()
        channel = self._channel
        if channel is None or channel.loop is not loop:
            if channel is not None:
                channel.close()
            channel = self._channel = _Cares(loop, self._servers, self._timeout, self._tries)
        return channel

    def _start(self, host: str) -> None:
        """Look ``host`` up; its waiters are in ``_inflight``. No task and no future: c-ares
        calls back from the loop (a task per lookup cost a coroutine, a task and a future
        each, and the first interval of 50,000 names makes 50,000 lookups)."""
        self.lookups += 1
        if self._m_lookups is not None:
            self._m_lookups.value += 1
        t0 = perf_counter()
        generation = self._generation

        def answered(result: Any, error: int | None) -> None:
            if generation != self._generation:
                return  # aclose() came first: nobody waits for this one
            try:
                self._answered(host, t0, result, error)
            except Exception:
                log.exception("DNS lookup of %s failed unexpectedly", short(host))
                self._finish(host, t0, self._failed(host, "error", "resolver error"))

        channel = self._resolver()
        try:
            channel.getaddrinfo(host, self.family, answered)
        except (UnicodeError, ValueError, TypeError):
            channel.loop.call_soon(self._finish, host, t0,
                                   self._failed(host, "invalid_name", "invalid name"))

    def _answered(self, host: str, t0: float, result: Any, error: int | None) -> None:
        if error is not None:
            kind, reason = _WORDS.get(error, ("error", "resolver error"))
            if kind == "no_address":
                # A CNAME loop is told from a plain "no address" by a few more queries:
                # in a task, for failures only.
                task = asyncio.get_running_loop().create_task(self._no_address(host, t0))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
                return
            answer = self._failed(host, kind, reason)
        else:
            answer = self._parsed(host, result)
        self._finish(host, t0, answer)

    async def _no_address(self, host: str, t0: float) -> None:
        loop_found = await self._cname_loop(host)
        self._finish(host, t0, self._failed(host, *(
            ("cname_loop", "CNAME loop") if loop_found else ("no_address", "no address"))))

    def _finish(self, host: str, t0: float, answer: DnsAnswer) -> None:
        """Keep ``answer`` and hand it to every probe waiting for it."""
        if self._m_latency is not None:
            self._m_latency(perf_counter() - t0)
        self._store(host, answer)
        for waiter in self._inflight.pop(host, ()):
            try:
                waiter(answer, 0.0)
            except Exception:
                log.exception("DNS waiter failed")

    def _parsed(self, host: str, result: Any) -> DnsAnswer:
        pool = self._addresses
        addrs: list[str] = []
        ttl = self._max_ttl
        for node in result.nodes:
            raw = node.addr[0]
            ip = raw.decode("ascii") if isinstance(raw, bytes) else str(raw)
            if len(pool) >= _ADDRESS_POOL:
                pool.clear()  # entries keep their lists; only the sharing starts over
            ip = pool.setdefault(ip, [ip])[0]
            if ip not in addrs:
                addrs.append(ip)
            ttl = min(ttl, float(node.ttl))
        if len(addrs) == 1:
            addrs = pool[addrs[0]]
        for cname in result.cnames:
            ttl = min(ttl, float(cname.ttl))
        if len(addrs) > MAX_ADDRESSES:
            return self._failed(host, "too_large", "answer too large")
        if not addrs:
            return self._failed(host, "no_address", "no address")
        ttl = min(self._max_ttl, max(self._min_ttl, ttl))
        now = self._clock()
        if self._stale_bound:
            self._stale_bound.pop(host, None)
        return DnsAnswer(addrs, None, now + ttl, now + ttl + min(STALE_MAX, ttl / 10.0))

    async def _cname_loop(self, host: str) -> bool:
        """After an answer without addresses: does ``host`` lead into a CNAME loop? (One
        CNAME query per hop, at most ``_MAX_CNAME_HOPS``; failures only.)"""
        seen = {host.lower().rstrip(".")}
        name = host
        for _ in range(_MAX_CNAME_HOPS):
            try:
                res = await self._resolver().query(name, pycares.QUERY_TYPE_CNAME)
            except (_AresFailed, ValueError):
                return False
            target = None
            for rr in res.answer:
                data = getattr(rr, "data", None)
                cname = getattr(data, "cname", None)
                if cname:
                    target = str(cname).lower().rstrip(".")
                    break
            if target is None:
                return False
            if target in seen:
                return True
            seen.add(target)
            name = target
        return True  # a chain this long ends nowhere useful either

    def _failed(self, host: str, kind: str, reason: str) -> DnsAnswer:
        """What a failed lookup leaves for its waiters and the cache: the failure in words,
        or, for a time-out or an unreachable resolver, the name's previous answer served
        stale (:meth:`_stale`). Counted as a failure either way."""
        self.failures[kind] = self.failures.get(kind, 0) + 1
        if self._m_failures is not None:
            self._m_failures.labels(kind=kind).inc()
        now = self._clock()
        if kind in _STALE_KINDS:
            stale = self._stale(host, now)
            if stale is not None:
                return stale
        if self._stale_bound:
            self._stale_bound.pop(host, None)
        if kind == "nxdomain":
            ttl = self._negative_ttl
        elif kind == "timeout":
            ttl = min(self._failure_ttl, TIMEOUT_TTL)
        else:
            ttl = self._failure_ttl
        return DnsAnswer([], failure_words(host, reason), now + ttl, now + ttl)

    def _stale(self, host: str, now: float) -> DnsAnswer | None:
        """Serve-stale (RFC 8767) after a lookup of ``host`` timed out: its last good answer,
        if the cache still holds one whose TTL ended less than ``serve_stale`` s ago, kept
        for ``STALE_RECHECK`` s more (no question meanwhile) and then served while looked up
        again in the background, until that bound; None: fail."""
        old = self._cache.get(host)
        if old is None or old.error is not None or self._serve_stale <= 0:
            return None
        bounds = self._stale_bound
        # The first failure after a real answer: that answer's TTL end starts the clock.
        bound = bounds.get(host, old.expires + self._serve_stale)
        if now >= bound:
            bounds.pop(host, None)
            return None
        if host not in bounds and len(bounds) >= self._max_names:
            # Names dropped from the cache meanwhile (least recently used) leave here too.
            for name in [n for n in bounds if n not in self._cache]:
                del bounds[name]
        bounds[host] = bound
        self.served_stale += 1
        return DnsAnswer(old.addresses, None, min(now + STALE_RECHECK, bound), bound)

    def _store(self, host: str, answer: DnsAnswer) -> None:
        cache = self._cache
        if answer.expires <= self._clock():
            cache.pop(host, None)  # a zero negative TTL: nothing to keep
            return
        # The key interned: the engine's checks hold their host interned (ScheduledCheck),
        # so the entry shares that string instead of keeping the probe's copy (~70 B).
        key = sys.intern(host)
        cache.pop(key, None)  # a name answered again goes to the end
        cache[key] = answer
        excess = len(cache) - self._max_names
        if excess > 0:
            # The least recently used go, from the front. A dict's deleted entries stay
            # before its first live one until it is resized, and finding that one walks
            # them, so a full cache drops a 64th of its names at once rather than one per
            # new name (max_names below 64: exactly the excess).
            drop = list(itertools.islice(cache, excess + self._max_names // 64))
            for name in drop:
                del cache[name]


def from_settings(settings: Any, metrics: Any = None) -> ProbeResolver:
    """The engine's resolver, from :class:`engine.runtime.settings.Settings`."""
    from engine.probes.addresses import source_family

    return ProbeResolver(
        family=source_family(settings.probe_source_address),
        servers=settings.dns_server_list,
        timeout=settings.dns_timeout,
        tries=settings.dns_tries,
        min_ttl=settings.dns_min_ttl,
        max_ttl=settings.dns_max_ttl,
        negative_ttl=settings.dns_negative_ttl,
        failure_ttl=settings.dns_failure_ttl,
        max_names=settings.dns_cache_names,
        serve_stale=settings.dns_serve_stale,
        metrics=metrics,
    )


def cares_tries(timeout: float, tries: int) -> int:
    """c-ares tries for ``tries`` tries of up to ``timeout`` s after c-ares's own short ones:
    c-ares starts a lookup at its learned time-out (at least 250 ms) and doubles it each
    try, capped at ``timeout``; the doublings from 250 ms up to ``timeout`` are added (3 for
    2 s). A lookup then ends within ``cares_tries(...) * timeout`` s."""
    extra, wait = 0, _CARES_MIN_TRY
    while wait < timeout and extra < 8:
        wait *= 2
        extra += 1
    return tries + extra


class _AresFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Cares:
    """A c-ares channel whose sockets are watched by the event loop (``sock_state_cb``):
    no thread, so no cross-thread wake-up per answer (measured: docs/design.md). Callbacks
    run inside ``process_fd``, on the loop's thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, servers: list[str], timeout: float,
                 tries: int) -> None:
        self.loop = loop
        self._readers: set[int] = set()
        self._writers: set[int] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._channel = _channel(
            sock_state_cb=self._sock_state, timeout=timeout, tries=cares_tries(timeout, tries),
            max_timeout=timeout, servers=servers or None,
            socket_receive_buffer_size=_CARES_RCVBUF,
        )

    def getaddrinfo(self, host: str, family: int,
                    callback: Callable[[Any, int | None], None]) -> None:
        """``callback(result, error)`` once, from the loop; never from inside this call
        (c-ares answers from ``/etc/hosts`` inside it: those go through ``call_soon``).
        Raises what pycares raises for a name it cannot encode (ValueError, UnicodeError)."""
        loop = self.loop
        inside = True

        def cb(result: Any, error: int | None) -> None:
            if inside:
                loop.call_soon(callback, result, error)
            else:
                callback(result, error)

        try:
            self._channel.getaddrinfo(host, None, family=socket.AddressFamily(family),
                                      callback=cb)
        except pycares.AresError as exc:
            cb(None, exc.args[0] if exc.args else -1)
        finally:
            inside = False
        self._arm()

    def query(self, name: str, qtype: int) -> asyncio.Future[Any]:
        fut, cb = self._future()
        try:
            self._channel.query(name, qtype, callback=cb)
        except pycares.AresError as exc:
            cb(None, exc.args[0] if exc.args else -1)
        self._arm()
        return fut

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.loop.is_closed():
            for fd in self._readers:
                self.loop.remove_reader(fd)
            for fd in self._writers:
                self.loop.remove_writer(fd)
        self._readers.clear()
        self._writers.clear()
        self._channel.cancel()
        self._channel.close()

    def _future(self) -> tuple[asyncio.Future[Any], Callable[[Any, int | None], None]]:
        fut: asyncio.Future[Any] = self.loop.create_future()

        def done(result: Any, error: int | None) -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(_AresFailed(error))
            else:
                fut.set_result(result)

        return fut, done

    def _sock_state(self, fd: int, readable: int, writable: int) -> None:
        # ``readable``/``writable`` come from c-ares as ints (0/1): compiled code checks
        # a parameter's type, and ``bool`` refused them.
        loop = self.loop
        if readable and fd not in self._readers:
            loop.add_reader(fd, self._process, fd, pycares.ARES_SOCKET_BAD)
            self._readers.add(fd)
        elif not readable and fd in self._readers:
            loop.remove_reader(fd)
            self._readers.discard(fd)
        if writable and fd not in self._writers:
            loop.add_writer(fd, self._process, pycares.ARES_SOCKET_BAD, fd)
            self._writers.add(fd)
        elif not writable and fd in self._writers:
            loop.remove_writer(fd)
            self._writers.discard(fd)

    def _process(self, read_fd: int, write_fd: int) -> None:
        self._channel.process_fd(read_fd, write_fd)
        self._arm()

    def _arm(self) -> None:
        """Keep one timer for c-ares's time-outs and retries while a query is pending."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._readers or self._writers:
            delay = self._channel.timeout(1.0) or 0.001
            self._timer = self.loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self._channel.process_fd(pycares.ARES_SOCKET_BAD, pycares.ARES_SOCKET_BAD)
        self._arm()
