"""The probes' resolver against a real DNS server on loopback (upwatch_bench.roles.dnsserver):
answers kept for their TTL (clamped), one query per name and record type while they last,
one lookup in flight per name, least recently used names dropped first, A/AAAA per family,
/etc/hosts honoured, and every bad answer a failed probe with words, never a stuck one.

Time in the cache is the resolver's injected clock, so TTL tests wait for nothing.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator

import pytest

from engine import USER_AGENT
from engine.probes.http import HttpProber
from engine.probes.resolver import MAX_ADDRESSES, ProbeResolver
from engine.probes.tls import CertProber
from engine.runtime.metrics import Metrics
from tests.support.resolver import Clock, resolver
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until
from upwatch_bench.roles.dnsserver import PUBLIC_EXAMPLE, DnsServer

ZONE = "names.test"


@pytest.fixture
async def dns() -> AsyncIterator[DnsServer]:
    async with DnsServer(zone=ZONE, addresses=["127.0.0.1"], ttl=300) as server:
        yield server


@pytest.fixture
async def site() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as s:
        yield s


def prober(res: ProbeResolver, *, allow_private: bool = True,
           timeout: float = 3.0) -> HttpProber:
    return HttpProber(timeout=timeout, user_agent=USER_AGENT, allow_private=allow_private,
                      resolver=res)


async def test_a_name_is_looked_up_once_per_ttl_and_then_answered_from_the_cache(
    dns: DnsServer, site: HttpTarget,
) -> None:
    clock = Clock()
    metrics = Metrics()
    res = resolver(dns, clock, metrics=metrics)
    p = prober(res)
    url = f"http://m1.{ZONE}:{site.port}/x"
    first = await p.probe(url)
    assert first.status_code == 200 and first.remote_ip == "127.0.0.1", first
    assert first.dns_ms is not None and first.dns_ms > 0 and not first.dns_cached
    for _ in range(20):
        o = await p.probe(url)
        assert o.status_code == 200 and o.dns_ms == 0.0 and o.dns_cached, o
    assert dns.queries == {(f"m1.{ZONE}", "A"): 1}
    assert site.requests[-1].headers["host"] == f"m1.{ZONE}:{site.port}"
    clock.now += 290  # near its end: still the one answer, no question
    assert (await p.probe(url)).dns_cached and res.lookups == 1
    # Past its TTL, within a tenth of it more: still served (no probe waits), and looked up
    # again behind the probe: one question per TTL (c-ares's own query cache is off: it
    # answered with the old answer's remaining TTL).
    clock.now += 15
    o = await p.probe(url)
    assert o.dns_cached and o.status_code == 200
    await wait_until(lambda: res.lookups == 2 and not res.busy(f"m1.{ZONE}"), timeout=5,
                     what="the second lookup, done")
    assert dns.queries == {(f"m1.{ZONE}", "A"): 2}
    clock.now += 20  # within the refreshed answer's TTL
    assert (await p.probe(url)).dns_cached
    assert dns.queries == {(f"m1.{ZONE}", "A"): 2}
    assert (res.hits, res.lookups) == (23, 2)
    text = metrics.render()[0].decode()
    assert "upwatch_dns_cache_hits_total 23.0" in text
    assert "upwatch_dns_lookups_total 2.0" in text
    assert "upwatch_dns_lookup_seconds_count 2.0" in text
    await p.aclose()


async def test_an_answer_is_kept_once_not_again_by_c_ares(dns: DnsServer) -> None:
    """Our entry gone (expired, or dropped as least recently used), the next lookup asks
    the server: c-ares keeps no second copy of every answer (~2-3 KB of RSS a name)."""
    clock = Clock()
    res = resolver(dns, clock, family=socket.AF_UNSPEC)
    for _ in range(3):
        assert await res(f"m1.{ZONE}", 80) == ["127.0.0.1"]
        clock.now += 331  # past its TTL (300 s, on our clock; c-ares's is real time) and grace
    assert dns.queries == {(f"m1.{ZONE}", "A"): 3, (f"m1.{ZONE}", "AAAA"): 3}
    await res.aclose()


async def test_ttls_are_clamped_to_the_settings(dns: DnsServer) -> None:
    clock = Clock()
    res = resolver(dns, clock, min_ttl=10, max_ttl=60)
    dns.ttl = 0  # below the minimum: kept 10 s (and not by c-ares, which keeps no TTL 0)
    assert await res("m1." + ZONE, 80) == ["127.0.0.1"]
    clock.now += 9.5
    assert await res("m1." + ZONE, 80) == ["127.0.0.1"]
    assert dns.total_queries() == 1
    clock.now += 1.6  # past its 10 s and the tenth more it may be served while refreshed
    await res("m1." + ZONE, 80)
    assert dns.total_queries() == 2 and res.lookups == 2
    dns.ttl = 86_400  # above the maximum: kept 60 s, then asked again
    await res("m2." + ZONE, 80)
    clock.now += 50
    await res("m2." + ZONE, 80)
    assert res.lookups == 3
    clock.now += 16.2  # past 60 s and its 6 s of grace: the lookup is waited for
    await res("m2." + ZONE, 80)
    assert res.lookups == 4 and dns.total_queries() == 4
    await res.aclose()


async def test_probes_of_a_name_being_looked_up_wait_for_that_one_lookup(
    dns: DnsServer, site: HttpTarget,
) -> None:
    dns.latency = 0.2
    res = resolver(dns, timeout=2.0)
    p = prober(res)
    url = f"http://m3.{ZONE}:{site.port}/"
    outcomes = await asyncio.gather(*(p.probe(url) for _ in range(50)))
    assert all(o.status_code == 200 for o in outcomes), outcomes
    assert all(o.dns_ms is not None and o.dns_ms >= 150 for o in outcomes)
    assert dns.queries == {(f"m3.{ZONE}", "A"): 1}
    await p.aclose()


async def test_the_least_recently_used_names_go_first(dns: DnsServer) -> None:
    dns.ttl = 0  # nothing kept by c-ares: every lookup of ours reaches the server
    res = resolver(dns, max_names=3, min_ttl=300)
    for name in ("m1", "m2", "m3", "m1", "m4"):  # m1 used again: m2 is the oldest
        await res(f"{name}.{ZONE}", 80)
    assert len(res) == 3
    await res(f"m1.{ZONE}", 80)
    await res(f"m3.{ZONE}", 80)
    assert dns.queries[(f"m1.{ZONE}", "A")] == 1 and dns.queries[(f"m3.{ZONE}", "A")] == 1
    await res(f"m2.{ZONE}", 80)
    assert dns.queries[(f"m2.{ZONE}", "A")] == 2
    await res.aclose()


async def test_a_full_cache_drops_its_least_recently_used_64th_at_once(dns: DnsServer) -> None:
    """At most max_names are kept; when a new name would pass that, the oldest go, a 64th of
    the cache with it (a dict's front is walked once per drop, not once per name)."""
    dns.ttl = 0
    res = resolver(dns, max_names=128, min_ttl=300)
    for i in range(128):
        await res(f"m{i}.{ZONE}", 80)
    await res(f"m0.{ZONE}", 80)  # used again: m1 is now the oldest
    assert len(res) == 128 and dns.total_queries() == 128
    await res(f"m128.{ZONE}", 80)  # one too many: m1, m2, m3 go (1 + 128 // 64)
    assert len(res) == 126
    for i in (0, 4, 127, 128):
        await res(f"m{i}.{ZONE}", 80)
    assert dns.total_queries() == 129
    for i in (1, 2, 3):
        await res(f"m{i}.{ZONE}", 80)
        assert dns.queries[(f"m{i}.{ZONE}", "A")] == 2
    assert len(res) <= 128
    await res.aclose()


async def test_a_and_aaaa_follow_the_family_policy(dns: DnsServer) -> None:
    dns.names[f"dual.{ZONE}"] = ["127.0.0.1", "::1"]
    v4 = resolver(dns, family=socket.AF_INET)
    assert await v4(f"dual.{ZONE}", 80) == ["127.0.0.1"]
    assert dns.queries == {(f"dual.{ZONE}", "A"): 1}
    v6 = resolver(dns, family=socket.AF_INET6)
    assert await v6(f"dual.{ZONE}", 80) == ["::1"]
    assert dns.queries[(f"dual.{ZONE}", "AAAA")] == 1
    both = resolver(dns, family=socket.AF_UNSPEC)
    assert sorted(await both(f"dual.{ZONE}", 80)) == ["127.0.0.1", "::1"]
    assert dns.queries == {(f"dual.{ZONE}", "A"): 2, (f"dual.{ZONE}", "AAAA"): 2}
    for r in (v4, v6, both):
        await r.aclose()


async def test_etc_hosts_answers_without_a_query(dns: DnsServer) -> None:
    res = resolver(dns)
    assert await res("localhost", 80) == ["127.0.0.1"]
    assert dns.total_queries() == 0
    await res.aclose()


@pytest.mark.parametrize(("name", "words", "kind"), [
    ("nx-a", "DNS lookup failed: nx-a.names.test", "nxdomain"),
    ("hang-a", "DNS lookup failed: hang-a.names.test (resolver timed out)", "timeout"),
    ("fail-a", "DNS lookup failed: fail-a.names.test (server failure)", "servfail"),
    ("loop-a", "DNS lookup failed: loop-a.names.test (CNAME loop)", "cname_loop"),
    ("big-a", "DNS lookup failed: big-a.names.test (answer too large)", "too_large"),
])
async def test_bad_answers_fail_the_probe_with_words_and_are_cached_briefly(
    dns: DnsServer, name: str, words: str, kind: str,
) -> None:
    clock = Clock()
    metrics = Metrics()
    dns.ttl = 0  # c-ares would keep the big answer itself otherwise
    res = resolver(dns, clock, negative_ttl=30, failure_ttl=5, metrics=metrics)
    p = prober(res)
    url = f"http://{name}.{ZONE}:1/"
    o = await p.probe(url)
    assert o.status_code is None and o.error == words, o
    assert o.total_ms < 2500  # the resolver's time-out, well inside the probe's
    asked = dns.total_queries()
    again = await p.probe(url)
    assert again.error == words and dns.total_queries() == asked  # cached
    clock.now += 30.5 if kind == "nxdomain" else 5.5
    assert (await p.probe(url)).error == words
    assert dns.total_queries() > asked  # asked again once the negative entry ended
    assert res.failures == {kind: 2}
    assert f'upwatch_dns_failures_total{{kind="{kind}"}} 2.0' in metrics.render()[0].decode()
    await p.aclose()


async def test_chains_are_followed_and_oversized_answers_refused(dns: DnsServer) -> None:
    res = resolver(dns)
    assert await res(f"chain-a.{ZONE}", 80) == ["127.0.0.1"]
    dns.big_count = MAX_ADDRESSES
    assert len(await res(f"big-ok.{ZONE}", 80)) == MAX_ADDRESSES
    await res.aclose()


async def test_an_answer_mixing_public_and_private_addresses_is_blocked_every_time(
    dns: DnsServer, site: HttpTarget,
) -> None:
    res = resolver(dns)
    p = prober(res, allow_private=False)
    blocked = f"blocked: mixed-a.{ZONE} resolves to a non-public address (127.0.0.1)"
    for _ in range(3):  # the first from DNS, then from the cache: the rule holds for both
        o = await p.probe(f"http://mixed-a.{ZONE}:{site.port}/")
        assert o.error == blocked, o
    assert dns.total_queries() == 1 and site.connections == 0
    # The certificate probe, sharing the resolver, is refused the same way.
    cert = CertProber(timeout=2.0, allow_private=False, resolver=res)
    c = await cert.probe(f"mixed-a.{ZONE}", site.port)
    assert c.error is not None and blocked in c.error, c
    assert site.connections == 0
    # With private targets allowed the same answer is connected to (the public address
    # first would not answer on loopback: the cached order is the answer's).
    allowed = prober(res, allow_private=True)
    dns.names[f"private.{ZONE}"] = ["127.0.0.1"]
    o = await allowed.probe(f"http://private.{ZONE}:{site.port}/")
    assert o.status_code == 200 and o.remote_ip == "127.0.0.1"
    assert PUBLIC_EXAMPLE not in (o.remote_ip or "")
    await p.aclose()


async def test_a_probe_cancelled_while_its_name_is_looked_up_calls_nothing_back(
    dns: DnsServer, site: HttpTarget,
) -> None:
    dns.latency = 0.3
    res = resolver(dns, timeout=2.0)
    p = prober(res)
    loop = asyncio.get_running_loop()
    called: list[object] = []
    handle = p.start(loop, f"http://m1.{ZONE}:{site.port}/", lambda a, o: called.append(o), 1)
    handle.cancel()
    # The lookup goes on for the others (and the cache): a later probe is answered by it.
    o = await p.probe(f"http://m1.{ZONE}:{site.port}/")
    assert o.status_code == 200
    assert called == [] and dns.total_queries() == 1
    await p.aclose()


async def test_a_lookup_answered_at_once_still_calls_back_later(dns: DnsServer) -> None:
    """c-ares answers /etc/hosts names inside the call; the resolver's contract is a call
    back from the loop, never from inside lookup() (a probe is not ready for it then)."""
    res = resolver(dns)
    seen: list[list[str]] = []
    res.lookup("localhost", lambda answer, ms: seen.append(answer.addresses))
    assert seen == []
    await wait_until(lambda: seen, timeout=5, what="the call back")
    assert seen == [["127.0.0.1"]] and dns.total_queries() == 0
    await res.aclose()


async def test_unsettled_counts_failed_names_and_lookups_in_flight(dns: DnsServer) -> None:
    dns.latency = 0.2
    res = resolver(dns, timeout=2.0)
    waiting = asyncio.ensure_future(res(f"m1.{ZONE}", 80))
    await wait_until(lambda: res.busy(f"m1.{ZONE}"), timeout=5, what="the lookup in flight")
    assert res.unsettled() == 1  # in flight
    await waiting
    assert res.unsettled() == 0
    with pytest.raises(Exception, match="DNS lookup failed"):
        await res(f"nx-a.{ZONE}", 80)
    assert res.unsettled() == 1 and len(res) == 2  # the failure is cached, and counted
    await res.aclose()


async def test_uses_count_for_recency_once_the_cache_is_three_quarters_full(
        dns: DnsServer) -> None:
    """Below three quarters of max_names nothing can be dropped soon, so a hit does not move
    its name (a delete and an insert per probe by name); from there on it does, so the
    names dropped first are the ones not used since the cache passed that mark."""
    dns.ttl = 0
    res = resolver(dns, max_names=8, min_ttl=300)
    for i in range(5):
        await res(f"m{i}.{ZONE}", 80)
    await res(f"m0.{ZONE}", 80)  # 5 of 8 names: a hit, not a move
    for i in range(5, 8):
        await res(f"m{i}.{ZONE}", 80)
    await res(f"m1.{ZONE}", 80)  # 8 of 8: moved to the end
    assert dns.total_queries() == 8
    await res(f"m8.{ZONE}", 80)  # one too many: the front goes, m0 (unused since the mark)
    await res(f"m9.{ZONE}", 80)  # and then m2, not m1
    assert len(res) == 8
    for name in ("m1", "m3", "m9"):
        await res(f"{name}.{ZONE}", 80)
    assert dns.total_queries() == 10
    for name in ("m0", "m2"):
        await res(f"{name}.{ZONE}", 80)
        assert dns.queries[(f"{name}.{ZONE}", "A")] == 2
    await res.aclose()
