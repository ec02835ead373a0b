"""A time-out at the resolver is not evidence that a site is down. Against a real DNS server on
loopback (upwatch_bench.roles.dnsserver) that slows down, stops answering, or answers while the
engine's event loop is busy:

* a try waits up to ``dns_timeout``, whatever pace c-ares learned from earlier answers
  (c-ares 1.32+ cut every try to 5x its recent average, at least 250 ms: a resolver 20 ms
  away that once took 600 ms failed every lookup);
* a lookup that timed out is kept as a failure for a second at most, not ``failure_ttl``;
* a name whose refresh times out is served its last answer (RFC 8767 serve-stale) for at
  most ``serve_stale`` seconds past its TTL; NXDOMAIN is never served stale;
* a burst of answers that arrives while the engine's loop is busy fits in c-ares's socket:
  none is dropped, timed out and asked for again.

Time in the cache is the resolver's injected clock; the waits on the real server are
bounded by the resolver's own time-outs.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import USER_AGENT
from engine.probes.http import HttpProber
from engine.probes.resolver import cares_tries
from tests.support.resolver import Clock, resolver
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until
from upwatch_bench.roles.dnsserver import DnsServer

ZONE = "names.test"


@pytest.fixture
async def dns() -> AsyncIterator[DnsServer]:
    async with DnsServer(zone=ZONE, addresses=["127.0.0.1"], ttl=300) as server:
        yield server


class ThreadedDns:
    """A DnsServer on an event loop of its own in a thread: it answers while the test's
    loop is blocked (a long iteration of a busy engine)."""

    def __init__(self) -> None:
        self.server = DnsServer(zone=ZONE, addresses=["127.0.0.1"], ttl=300)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def __enter__(self) -> DnsServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(5)
        return self.server

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self.server.close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def test_c_ares_gets_the_tries_its_doubling_needs_to_reach_the_time_out() -> None:
    assert cares_tries(2.0, 2) == 5  # 0.25, 0.5, 1, 2, 2
    assert cares_tries(0.25, 1) == 1
    assert cares_tries(0.3, 1) == 2
    assert cares_tries(60.0, 10) == 18  # bounded


async def test_a_resolver_slower_than_its_learned_pace_is_waited_for_up_to_dns_timeout(
    dns: DnsServer,
) -> None:
    dns.latency = 0.02
    res = resolver(dns, timeout=2.0, tries=2)
    for i in range(20):  # c-ares learns a 20 ms server: 250 ms a try from here on
        assert await res(f"m{i}.{ZONE}", 80) == ["127.0.0.1"]
    dns.latency = 0.6  # a cold name at a recursive resolver, a loaded server
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    assert await res(f"m100.{ZONE}", 80) == ["127.0.0.1"]
    # 250 ms, at most 500, at most 1 s: the fourth try (1-2 s) is long enough at the latest.
    assert loop.time() - t0 < 2.5
    assert res.failures == {}
    # Past the lookup's whole budget (tries up to 2 s each) it is a time-out, in words.
    dns.latency = 30.0
    res2 = resolver(dns, timeout=0.5, tries=1)
    t0 = loop.time()
    with pytest.raises(Exception, match=r"m7\.names\.test \(resolver timed out\)"):
        await res2(f"m7.{ZONE}", 80)
    assert loop.time() - t0 < cares_tries(0.5, 1) * 0.5 + 0.5
    await res.aclose()
    await res2.aclose()


async def test_a_lookup_that_timed_out_is_kept_as_a_failure_for_a_second_at_most(
    dns: DnsServer,
) -> None:
    clock = Clock()
    res = resolver(dns, clock, failure_ttl=30)
    with pytest.raises(Exception, match="resolver timed out"):
        await res(f"hang-a.{ZONE}", 80)
    asked = dns.total_queries()
    with pytest.raises(Exception, match="resolver timed out"):
        await res(f"hang-a.{ZONE}", 80)  # within the second: the kept failure
    assert dns.total_queries() == asked
    clock.now += 1.01
    with pytest.raises(Exception, match="resolver timed out"):
        await res(f"hang-a.{ZONE}", 80)
    assert dns.total_queries() > asked  # asked again, not after failure_ttl (30 s)
    # A server failure is an answer about the name: kept for failure_ttl.
    with pytest.raises(Exception, match="server failure"):
        await res(f"fail-a.{ZONE}", 80)
    asked = dns.total_queries()
    clock.now += 29
    with pytest.raises(Exception, match="server failure"):
        await res(f"fail-a.{ZONE}", 80)
    assert dns.total_queries() == asked
    assert res.failures == {"timeout": 2, "servfail": 1}
    await res.aclose()


@pytest.fixture
async def site() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as s:
        yield s


async def test_a_name_whose_refresh_times_out_is_served_its_last_answer_for_a_while(
    dns: DnsServer, site: HttpTarget,
) -> None:
    clock = Clock()
    name = f"m1.{ZONE}"
    res = resolver(dns, clock, serve_stale=300)
    p = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True, resolver=res)
    url = f"http://{name}:{site.port}/"
    assert (await p.probe(url)).status_code == 200  # TTL 300 s: until 1300
    dns.latency = 30.0  # the resolver stops answering in time
    # Past its TTL and its grace (a tenth of it): the probe waits for the lookup, which
    # times out; the last answer is served instead of "resolver timed out".
    clock.now = 1340.0
    o = await p.probe(url)
    assert o.status_code == 200 and o.remote_ip == "127.0.0.1" and not o.dns_cached, o
    assert res.failures == {"timeout": 1} and res.served_stale == 1
    # Kept for 30 s without asking (RFC 8767's failure recheck), then served while it is
    # looked up again behind the probe.
    asked = dns.total_queries()
    clock.now += 29
    assert (await p.probe(url)).dns_cached
    assert dns.total_queries() == asked
    clock.now += 2
    o = await p.probe(url)
    assert o.status_code == 200 and o.dns_cached
    await wait_until(lambda: not res.busy(name), timeout=5, what="the stale answer refreshed")
    assert dns.total_queries() > asked and res.served_stale == 2
    # At most serve_stale (300 s) past the TTL's end (1300): then the time-out is a failure.
    clock.now = 1601.0
    o = await p.probe(url)
    assert o.error == f"DNS lookup failed: {name} (resolver timed out)", o
    # The resolver back, the name is answered afresh and the stale time starts over.
    dns.latency = 0.0
    clock.now += 1.5
    assert (await p.probe(url)).status_code == 200
    dns.latency = 30.0
    clock.now += 340
    assert (await p.probe(url)).status_code == 200
    assert res.served_stale == 3
    await p.aclose()


async def test_a_name_that_no_longer_exists_is_not_served_stale(dns: DnsServer) -> None:
    clock = Clock()
    dns.names[f"gone.{ZONE}"] = ["127.0.0.1"]
    res = resolver(dns, clock)
    assert await res(f"gone.{ZONE}", 80) == ["127.0.0.1"]
    del dns.names[f"gone.{ZONE}"]  # NXDOMAIN from now on: an answer, not a time-out
    clock.now += 340
    with pytest.raises(Exception, match=r"DNS lookup failed: gone\.names\.test$"):
        await res(f"gone.{ZONE}", 80)
    assert res.served_stale == 0
    await res.aclose()


async def test_serve_stale_zero_turns_it_off(dns: DnsServer) -> None:
    clock = Clock()
    res = resolver(dns, clock, serve_stale=0)
    assert await res(f"m1.{ZONE}", 80) == ["127.0.0.1"]
    dns.latency = 30.0
    clock.now += 340
    with pytest.raises(Exception, match="resolver timed out"):
        await res(f"m1.{ZONE}", 80)
    await res.aclose()


def _rmem_max() -> int:
    try:
        return int(Path("/proc/sys/net/core/rmem_max").read_text())
    except (OSError, ValueError):
        return 0


@pytest.mark.skipif(_rmem_max() < 1 << 20,
                    reason="net.core.rmem_max below 1 MiB: c-ares's buffer stays the default")
async def test_a_burst_of_answers_while_the_loop_is_busy_is_not_dropped() -> None:
    n = 600  # more than the default receive buffer holds (256 small datagrams)
    with ThreadedDns() as server:
        res = resolver(server, timeout=1.0)
        seen: list[Any] = []
        for i in range(n):
            res.lookup(f"m{i}.{ZONE}", lambda answer, ms: seen.append(answer))
        deadline = time.monotonic() + 5.0
        # The loop blocked (one long iteration of a busy engine: this IS what is tested)
        # while the server answers every question.
        while server.total_queries() < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        await wait_until(lambda: len(seen) == n, timeout=10, what=f"{n} answers")
        assert all(a.error is None for a in seen)
        assert server.total_queries() == n  # none dropped and asked again
        await res.aclose()
