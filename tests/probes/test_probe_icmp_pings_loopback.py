"""Ping probes against this machine's loopback: 127.0.0.1, 127.0.0.2 and ::1, many at once
through one socket per family, a name, and the private-address rule."""

from __future__ import annotations

import asyncio
import socket

import pytest

from engine.domain.ping import spec
from engine.probes.icmp import IcmpProber, ping_access
from tests.support.wait import wait_until

pytestmark = pytest.mark.skipif(
    not ping_access().can_ping, reason=f"this node cannot ping: {ping_access().reason}"
)


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
async def test_ping_ipv4_loopback(host: str) -> None:
    prober = IcmpProber(timeout=2.0, allow_private=True)
    try:
        got = await prober.ping(host, 3, 0.02)
    finally:
        await prober.aclose()
    assert got.error is None
    assert got.remote_ip == host
    assert got.dns_ms is None
    f = got.figures
    assert f is not None
    assert (f.sent, f.received, f.loss, f.duplicates, f.strays) == (3, 3, 0.0, 0, 0)
    assert f.rtt_min is not None and f.rtt_avg is not None and f.rtt_max is not None
    assert 0 < f.rtt_min <= f.rtt_avg <= f.rtt_max < 1000
    assert f.jitter is not None and f.jitter >= 0
    # three requests 20 ms apart, and the last one's reply (the loop may run a timer up to
    # a millisecond early)
    assert 38 <= got.total_ms < 2000


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback (::1)")
async def test_ping_ipv6_loopback() -> None:
    prober = IcmpProber(timeout=2.0, allow_private=True)
    try:
        got = await prober.ping("::1", 3, 0.02)
        assert prober.modes().keys() == {"ipv6"}
    finally:
        await prober.aclose()
    assert got.error is None
    assert got.remote_ip == "::1"
    assert got.figures is not None and got.figures.received == 3


async def test_a_name_is_resolved_and_ipv4_is_pinged_first() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        assert host == "pinged.test"
        return ["::1", "127.0.0.2"]

    prober = IcmpProber(timeout=2.0, allow_private=True, resolver=resolver)
    try:
        got = await prober.ping("pinged.test", 2, 0.01)
    finally:
        await prober.aclose()
    assert got.error is None
    assert got.remote_ip == "127.0.0.2"
    assert got.dns_ms is not None


async def test_many_probes_at_once_share_one_socket_and_each_gets_its_own_replies() -> None:
    prober = IcmpProber(timeout=3.0, allow_private=True)
    try:
        hosts = [f"127.0.0.{1 + i % 4}" for i in range(60)]
        results = await asyncio.gather(*(prober.ping(h, 3, 0.01) for h in hosts))
        assert prober.modes().keys() == {"ipv4"}
    finally:
        await prober.aclose()
    for host, got in zip(hosts, results, strict=True):
        assert got.error is None, got.error
        assert got.remote_ip == host
        assert got.figures is not None
        assert (got.figures.received, got.figures.duplicates, got.figures.strays) == (3, 0, 0)


async def test_loopback_is_refused_unless_private_targets_are_allowed() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        return ["192.0.2.10", "127.0.0.1"]

    prober = IcmpProber(timeout=2.0, resolver=resolver)
    try:
        literal = await prober.ping("127.0.0.1")
        name = await prober.ping("mixed.test")
    finally:
        await prober.aclose()
    assert literal.error == "blocked: 127.0.0.1 resolves to a non-public address (127.0.0.1)"
    assert literal.figures is None
    # every address a name resolves to is checked, not only the one that would be pinged
    assert name.error == "blocked: mixed.test resolves to a non-public address (192.0.2.10)"


async def test_a_name_that_does_not_resolve_fails_in_words() -> None:
    async def resolver(host: str, port: int) -> list[str]:
        raise OSError("no such name")

    prober = IcmpProber(timeout=2.0, allow_private=True, resolver=resolver)
    try:
        got = await prober.ping("nowhere.test")
    finally:
        await prober.aclose()
    assert got.error == "DNS lookup failed: nowhere.test"


async def test_a_probe_running_when_the_prober_closes_ends_at_once() -> None:
    prober = IcmpProber(timeout=5.0, allow_private=True)
    task = asyncio.create_task(prober.ping("127.0.0.1", 5, 1.0))
    # the socket opens in the same step as the first request is sent
    await wait_until(prober.modes, what="the first echo request", timeout=2.0)
    await prober.aclose()
    got = await asyncio.wait_for(task, 1.0)
    assert got.figures is not None
    assert got.figures.sent == 1


async def test_a_monitor_url_is_probed_with_its_count_and_assertions() -> None:
    prober = IcmpProber(timeout=2.0, allow_private=True)
    try:
        plain = await prober.probe("icmp://127.0.0.2?count=2&interval_ms=20")
        held = await prober.probe("icmp://127.0.0.2?count=1", spec(
            [{"source": "packet_loss", "comparison": "equals", "target": 0}]))
        failed = await prober.probe("icmp://127.0.0.2?count=1", spec(
            [{"source": "packet_loss", "comparison": "greater_than", "target": 0}]))
        broken = await prober.probe("icmp://127.0.0.2", spec(
            [{"source": "status_code", "comparison": "equals", "target": 200}]))
    finally:
        await prober.aclose()
    assert (plain.status_code, plain.error, plain.assertion_error) == (None, None, None)
    assert plain.details is not None
    assert (plain.details["sent"], plain.details["received"]) == (2, 2)
    # a ping's response time is its average round trip, not the probe's two requests 20 ms apart
    assert plain.ttfb_ms == plain.total_ms == plain.details["rtt_avg"]
    assert plain.remote_ip == "127.0.0.2"
    assert (held.error, held.assertion_error) == (None, None)
    assert failed.error is None
    assert failed.assertion_error == "packet_loss greater_than 0 failed: got 0 %"
    assert broken.error is not None and broken.error.startswith("assertion on status_code")
    assert broken.details is None


async def test_the_probe_source_address_is_used_and_sets_the_family() -> None:
    prober = IcmpProber(timeout=2.0, allow_private=True, source_address="127.0.0.1")
    try:
        v4 = await prober.ping("127.0.0.2", 1)
        v6 = await prober.ping("::1", 1)
    finally:
        await prober.aclose()
    assert v4.error is None and v4.remote_ip == "127.0.0.2"
    assert v6.error == ("no address of the probe source address's family "
                        "(UPWATCH_PROBE_SOURCE_ADDRESS=127.0.0.1)")
    assert v6.figures is None


async def test_a_source_address_this_host_does_not_have_fails_in_words() -> None:
    prober = IcmpProber(timeout=2.0, allow_private=True, source_address="198.51.100.7")
    try:
        got = await prober.ping("127.0.0.2", 1)
    finally:
        await prober.aclose()
    assert got.error == "source address not available"


async def test_requests_that_would_leave_after_the_timeout_are_not_sent() -> None:
    prober = IcmpProber(timeout=1.0, allow_private=True)
    try:
        got = await prober.ping("127.0.0.2", 5, 0.4)  # at 0, 0.4 and 0.8 s; not 1.2, 1.6
    finally:
        await prober.aclose()
    assert got.error is None
    assert got.figures is not None
    assert (got.figures.sent, got.figures.received, got.figures.loss) == (3, 3, 0.0)
    # over once the third reply came (about 0.8 s), not at the timeout (1 s)
    assert got.total_ms < 960
