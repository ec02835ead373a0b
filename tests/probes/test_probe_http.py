"""The uptime probe against real loopback servers: every outcome right, and within the timeout.

Loopback counts as private, so most probers here run with ``allow_private=True``; the tests of
the private-address rule run with it off and expect ``blocked``.
"""

from __future__ import annotations

import asyncio
import gc
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from engine import USER_AGENT
from engine.domain.outcomes import HttpOutcome
from engine.probes import addresses
from engine.probes.http import HttpProber, _HttpConn
from tests.support.targets import HttpTarget, TlsCerts, closed_port, ipv6_available

TIMEOUT = 2.0  # for probes expected to succeed
SHORT = 1.0  # for probes expected to time out
SLACK_MS = 150  # scheduling noise allowed beyond a timeout on a busy test machine


def check(o: HttpOutcome, *, status: int | None = None, error: str | None = None,
          error_prefix: str | None = None) -> None:
    """The invariant (exactly one of status_code / error) plus the expected values."""
    assert (o.status_code is None) != (o.error is None), o
    if status is not None:
        assert o.status_code == status, o
    if error is not None:
        assert o.error == error, o
    if error_prefix is not None:
        assert o.error is not None and o.error.startswith(error_prefix), o
    assert o.total_ms >= 0


@pytest.fixture
async def site() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as s:
        yield s


@pytest.fixture
def prober() -> HttpProber:
    return HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True)


@pytest.fixture
def quick() -> HttpProber:
    """A prober with a short timeout, for targets that never finish."""
    return HttpProber(timeout=SHORT, user_agent=USER_AGENT, allow_private=True)


@pytest.fixture
def certs(tmp_path: Path) -> TlsCerts:
    return TlsCerts(tmp_path)


# -- responses ---------------------------------------------------------------------------------


async def test_ok_with_phases_and_request_shape(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/some/path?q=1&r=%20x"))
    check(o, status=200)
    assert o.redirects == 0
    assert o.remote_ip == "127.0.0.1"
    assert o.dns_ms is None  # an IP literal needs no lookup
    assert o.tls_ms is None
    assert o.connect_ms is not None and o.ttfb_ms is not None
    assert o.connect_ms + o.ttfb_ms <= o.total_ms
    (req,) = await site.wait_for_requests(1)
    assert req.method == "GET"
    assert req.target == "/some/path?q=1&r=%20x"
    assert req.headers["host"] == f"127.0.0.1:{site.port}"
    assert req.headers["user-agent"] == USER_AGENT
    assert USER_AGENT.startswith("Upwatch/")
    assert req.headers["connection"] == "close"
    assert site.connections == 1


async def test_bare_host_gets_slash_and_name_is_resolved(site: HttpTarget,
                                                         prober: HttpProber) -> None:
    o = await prober.probe(f"http://localhost:{site.port}")
    check(o, status=200)
    assert o.dns_ms is not None
    (req,) = await site.wait_for_requests(1)
    assert req.target == "/"
    assert req.headers["host"] == f"localhost:{site.port}"


@pytest.mark.parametrize("code", [201, 204, 404, 500, 503])
async def test_status_codes(site: HttpTarget, prober: HttpProber, code: int) -> None:
    check(await prober.probe(site.url(f"/status/{code}")), status=code)


async def test_switching_the_default_route(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url()), status=200)
    site.status = 500
    check(await prober.probe(site.url()), status=500)
    site.status = 200
    check(await prober.probe(site.url()), status=200)


async def test_each_probe_is_a_fresh_connection(site: HttpTarget, prober: HttpProber) -> None:
    for _ in range(3):
        check(await prober.probe(site.url()), status=200)
    await site.wait_for_requests(3)
    assert site.connections == 3


async def test_early_hints_are_skipped(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/early-hints")), status=200)


async def test_body_until_close(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/no-length")), status=200)


async def test_body_larger_than_the_limit_is_cut(site: HttpTarget) -> None:
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True, max_body=1000)
    check(await p.probe(site.url("/body/300000")), status=200)


async def test_endless_body_stops_after_a_mebibyte(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/endless"))
    check(o, status=200)
    assert o.total_ms < TIMEOUT * 1000 / 2  # ended by the body limit, not the timeout


async def test_a_body_that_stalls_keeps_the_status(site: HttpTarget, quick: HttpProber) -> None:
    """Status line and headers are the answer; the deadline only ends the body read, and the
    time says how slow the response was."""
    o = await quick.probe(site.url("/stall-body"))
    check(o, status=200)
    assert SHORT * 1000 - 5 <= o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_slow_within_timeout(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/slow/300"))
    check(o, status=200)
    assert o.total_ms >= 300
    assert o.ttfb_ms is not None and o.ttfb_ms >= 290


# -- redirects ---------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_relative_redirect_chain(site: HttpTarget, prober: HttpProber, code: int) -> None:
    o = await prober.probe(site.url(f"/redirect/3?code={code}"))
    check(o, status=200)
    assert o.redirects == 3
    reqs = await site.wait_for_requests(4)
    assert [r.target.split("?")[0] for r in reqs] == [f"/redirect/{n}" for n in (3, 2, 1, 0)]
    assert site.connections == 4  # every hop on its own connection


async def test_absolute_redirects_up_to_the_limit(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/redirect/5?absolute=1"))
    check(o, status=200)
    assert o.redirects == 5


async def test_one_redirect_too_many(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/redirect/6"))
    check(o, error="too many redirects")
    assert o.redirects == 5


async def test_redirect_loop(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/loop")), error="too many redirects")


async def test_redirects_can_be_switched_off(site: HttpTarget) -> None:
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True, max_redirects=0)
    check(await p.probe(site.url("/redirect/1")), error="too many redirects")


async def test_redirect_without_location_is_the_answer(site: HttpTarget,
                                                       prober: HttpProber) -> None:
    site.status = 302
    check(await prober.probe(site.url()), status=302)


async def test_redirect_to_another_scheme(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/redirect-to?url=" + quote("ftp://example.com/x")))
    check(o, error="unsupported URL: ftp://example.com/x")


async def test_a_location_that_is_no_url_ends_the_probe_in_words(
    site: HttpTarget, prober: HttpProber
) -> None:
    """urljoin refuses "http://[::1": the probe says so at once, no internal error."""
    o = await prober.probe(site.url("/redirect-to?url=" + quote("http://[::1")))
    check(o, error="invalid URL: http://[::1")
    assert o.redirects == 1


async def test_hostile_location_is_encoded(site: HttpTarget, prober: HttpProber) -> None:
    """Spaces and raw bytes in a Location cannot break the request line: they are
    percent-encoded, byte for byte (the target writes header values as latin-1)."""
    loc = "/status/200?q=a b\u00e9"
    check(await prober.probe(site.url("/redirect-to?url=" + quote(loc))), status=200)
    reqs = await site.wait_for_requests(2)
    assert reqs[1].target == "/status/200?q=a%20b%E9"


async def test_international_names_are_idna_encoded(prober: HttpProber) -> None:
    check(await prober.probe("http://b\u00fccher.invalid/"),
          error="DNS lookup failed: xn--bcher-kva.invalid")


async def test_redirect_to_another_server(site: HttpTarget, prober: HttpProber) -> None:
    async with HttpTarget() as other:
        o = await prober.probe(site.url("/redirect-to?url=" + quote(other.url("/status/404"))))
        check(o, status=404)
        assert o.redirects == 1
        await other.wait_for_requests(1)


# -- the private-address rule ------------------------------------------------------------------


async def test_loopback_is_blocked_by_default(site: HttpTarget) -> None:
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT)
    check(await p.probe(site.url()),
          error="blocked: 127.0.0.1 resolves to a non-public address (127.0.0.1)")
    check(await p.probe(site.url(host="localhost")),
          error="blocked: localhost resolves to a non-public address (127.0.0.1)")
    assert site.connections == 0  # refused before connecting


async def test_redirect_to_a_private_address_is_blocked(
    site: HttpTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pretend 127.0.0.1 is public so the first hop is allowed; everything else stays private.
    monkeypatch.setattr(addresses, "public_address", lambda ip: ip == "127.0.0.1")
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT)
    async with HttpTarget(host="127.0.0.2") as inner:
        o = await p.probe(site.url("/redirect-to?url=" + quote(inner.url("/"))))
        check(o, error="blocked: 127.0.0.2 resolves to a non-public address (127.0.0.2)")
        assert o.redirects == 1
        assert inner.connections == 0
    o = await p.probe(site.url("/redirect-to?url=" + quote("http://10.0.0.1/admin")))
    check(o, error="blocked: 10.0.0.1 resolves to a non-public address (10.0.0.1)")


def test_every_dns_answer_is_checked_and_the_checked_one_is_used() -> None:
    """DNS rebinding: the probe resolves once per hop, refuses a name with any private
    answer, and connects to exactly the address it checked. Runs on the default asyncio loop,
    whose getaddrinfo can be replaced on the instance (uvloop's cannot)."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        async with HttpTarget() as site:
            answers: dict[str, list[str] | None] = {
                "stuck.test": None,  # a resolver that never answers
                "mixed.test": ["93.184.215.14", "10.1.2.3"],
                "rebind.test": ["127.0.0.1"],
            }
            lookups: list[str] = []

            async def fake_getaddrinfo(host: str, port: int, **kw: Any) -> list[Any]:
                lookups.append(host)
                addrs = answers[host]
                if addrs is None:
                    await asyncio.Event().wait()
                    raise AssertionError("unreachable")
                if host == "rebind.test":  # the next answer would point elsewhere
                    answers[host] = ["10.9.9.9"]
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addrs]

            loop.getaddrinfo = fake_getaddrinfo  # type: ignore[method-assign, assignment]
            blocked = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT)
            check(await blocked.probe("http://mixed.test/"),
                  error="blocked: mixed.test resolves to a non-public address (10.1.2.3)")
            allowed = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True)
            o = await allowed.probe(f"http://rebind.test:{site.port}/")
            check(o, status=200)
            assert o.remote_ip == "127.0.0.1"
            assert lookups == ["mixed.test", "rebind.test"]
            (req,) = await site.wait_for_requests(1)
            assert req.headers["host"] == f"rebind.test:{site.port}"
            # The deadline covers the DNS lookup too.
            impatient = HttpProber(timeout=0.3, user_agent=USER_AGENT, allow_private=True)
            o = await impatient.probe("http://stuck.test/")
            check(o, error="timed out after 0.3 s")
            assert o.total_ms <= 300 + SLACK_MS

    asyncio.run(main())


# -- no (usable) response ----------------------------------------------------------------------


async def test_connection_refused(prober: HttpProber) -> None:
    o = await prober.probe(f"http://127.0.0.1:{closed_port()}/")
    check(o, error="connection refused")
    assert o.connect_ms is None


async def test_dns_failure(prober: HttpProber) -> None:
    check(await prober.probe("http://no-such-host.invalid/"),
          error="DNS lookup failed: no-such-host.invalid")


async def test_hanging_server_times_out_on_time(site: HttpTarget, quick: HttpProber) -> None:
    site.mode = "hang"
    o = await quick.probe(site.url())
    check(o, error="timed out after 1 s")
    assert SHORT * 1000 - 5 <= o.total_ms <= SHORT * 1000 + SLACK_MS
    assert o.connect_ms is not None  # the phases reached are still reported
    assert o.ttfb_ms is None


async def test_no_answer_after_the_request(site: HttpTarget, quick: HttpProber) -> None:
    o = await quick.probe(site.url("/hang"))
    check(o, error="timed out after 1 s")
    assert o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_slow_beyond_timeout(site: HttpTarget, quick: HttpProber) -> None:
    o = await quick.probe(site.url("/slow/3000"))
    check(o, error="timed out after 1 s")
    assert o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_slowloris_times_out(site: HttpTarget, quick: HttpProber) -> None:
    o = await quick.probe(site.url("/slowloris?interval=0.1"))
    check(o, error="timed out after 1 s")
    assert o.ttfb_ms is not None  # bytes did come, just never a whole header block
    assert o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_timeout_spans_all_redirect_hops(site: HttpTarget, quick: HttpProber) -> None:
    # Each hop alone is well within the timeout; together they are not.
    check(await quick.probe(site.url("/slow/600")), status=200)
    o = await quick.probe(site.url("/slow/600?then=/slow/600"))
    check(o, error="timed out after 1 s")
    assert o.redirects == 1
    assert o.total_ms <= SHORT * 1000 + SLACK_MS


async def test_reset_mid_headers(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/reset-headers")), error="connection reset")


async def test_closed_without_answer(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/close")), error="connection closed before a response")


async def test_garbage_is_an_invalid_response(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/garbage")), error="invalid HTTP response")


async def test_megabyte_of_headers(site: HttpTarget, prober: HttpProber) -> None:
    o = await prober.probe(site.url("/huge-headers"))
    check(o, error="headers too large")
    assert o.total_ms < TIMEOUT * 1000 / 2


async def test_headers_under_the_limit_are_fine(site: HttpTarget, prober: HttpProber) -> None:
    check(await prober.probe(site.url("/huge-headers?size=50000")), status=200)


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://example.com/", "unsupported URL: ftp://example.com/"),
        ("http://", "invalid URL: http://"),
        ("http://example.com:99999/", "invalid URL: http://example.com:99999/"),
        ("http://exa mple.com/", "invalid host name: exa mple.com"),
        ("not a url", "unsupported URL: not a url"),
    ],
)
async def test_bad_urls_never_raise(prober: HttpProber, url: str, error: str) -> None:
    check(await prober.probe(url), error=error)


# -- TLS ---------------------------------------------------------------------------------------


async def test_https_does_not_verify_and_sends_sni(certs: TlsCerts, prober: HttpProber) -> None:
    async with HttpTarget(ssl_context=certs.server_context("expired")) as tls_site:
        o = await prober.probe(tls_site.url("/status/204", host="localhost"))
        check(o, status=204)
        assert o.tls_ms is not None and o.connect_ms is not None
        (req,) = await tls_site.wait_for_requests(1)
        assert req.sni == "localhost"
        assert req.headers["host"] == f"localhost:{tls_site.port}"


async def test_https_redirects_and_bodies(certs: TlsCerts, prober: HttpProber) -> None:
    async with HttpTarget(ssl_context=certs.server_context("self-signed")) as tls_site:
        o = await prober.probe(tls_site.url("/redirect/2"))
        check(o, status=200)
        assert o.redirects == 2
        check(await prober.probe(tls_site.url("/endless")), status=200)
        check(await prober.probe(tls_site.url("/huge-headers")), error="headers too large")
        check(await prober.probe(tls_site.url("/early-hints")), status=200)


async def test_plain_bytes_on_a_tls_port(site: HttpTarget, prober: HttpProber) -> None:
    site.mode = "garbage"
    o = await prober.probe(site.url(scheme="https"))
    check(o, error="TLS handshake failed: wrong version number")


async def test_tls_port_that_hangs(site: HttpTarget, quick: HttpProber) -> None:
    site.mode = "hang"
    o = await quick.probe(site.url(scheme="https"))
    check(o, error="timed out after 1 s")
    assert o.tls_ms is None and o.connect_ms is not None


async def test_tls_peer_closing_during_handshake(site: HttpTarget, prober: HttpProber) -> None:
    site.mode = "garbage"
    site.garbage = b""
    check(await prober.probe(site.url(scheme="https")),
          error="TLS handshake failed: connection closed")


# -- addresses ---------------------------------------------------------------------------------


async def test_source_address_is_used(site: HttpTarget) -> None:
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True,
                   source_address="127.0.0.2")
    check(await p.probe(site.url("/peer")), status=200)
    (req,) = await site.wait_for_requests(1)
    assert req.peer == "127.0.0.2"


async def test_unusable_source_address() -> None:
    p = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True,
                   source_address="192.0.2.1")  # TEST-NET-1: not on this host
    async with HttpTarget() as site:
        check(await p.probe(site.url()), error="source address not available")


@pytest.mark.skipif(not ipv6_available(), reason="no IPv6 on this host")
async def test_ipv6_literal(prober: HttpProber) -> None:
    async with HttpTarget(host="::1") as site6:
        o = await prober.probe(site6.url("/status/200"))
        check(o, status=200)
        assert o.remote_ip == "::1"
        (req,) = await site6.wait_for_requests(1)
        assert req.headers["host"] == f"[::1]:{site6.port}"


# -- lifecycle ---------------------------------------------------------------------------------


async def test_cancellation_propagates_and_closes(site: HttpTarget, prober: HttpProber) -> None:
    site.mode = "hang"
    task = asyncio.create_task(prober.probe(site.url()))
    await site.wait_for_connections(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_many_concurrent_probes(site: HttpTarget, prober: HttpProber) -> None:
    outs = await asyncio.gather(*(prober.probe(site.url(f"/status/{200 + i % 5}"))
                                  for i in range(200)))
    assert [o.status_code for o in outs] == [200 + i % 5 for i in range(200)]


async def test_connections_are_freed_without_the_cyclic_gc(site: HttpTarget,
                                                          certs: TlsCerts) -> None:
    """The probe breaks its reference cycles, so a connection's memory is returned at once,
    not at some later GC pass (which matters with thousands of probes in flight)."""
    prober = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True)
    impatient = HttpProber(timeout=0.2, user_agent=USER_AGENT, allow_private=True)
    async with HttpTarget(ssl_context=certs.server_context("valid")) as tls_site:
        await prober.probe(tls_site.url())  # warm up lazily created state
        gc.collect()
        gc.disable()
        try:
            for url in (site.url(), site.url("/redirect/2"), tls_site.url("/endless"),
                        f"http://127.0.0.1:{closed_port()}/"):
                await prober.probe(url)
            await impatient.probe(site.url("/hang"))
            # An aborted transport lets go of its protocol once the loop has run its close
            # callbacks: a few iterations, bounded.
            for _ in range(20):
                alive = sum(1 for o in gc.get_objects() if isinstance(o, _HttpConn))
                if not alive:
                    break
                await asyncio.sleep(0)
        finally:
            gc.enable()
        assert alive == 0


async def test_an_outer_deadline_is_not_swallowed(site: HttpTarget, prober: HttpProber) -> None:
    """A caller's own, shorter timeout must surface as the caller's TimeoutError."""
    site.mode = "hang"
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await prober.probe(site.url())


async def test_probe_deadline_leaves_the_calling_task_clean(site: HttpTarget,
                                                           quick: HttpProber) -> None:
    """After a probe timed out, the same task goes on: no cancellation is left pending and
    the next probes (sequential, same task) behave normally."""
    async with asyncio.timeout(10):  # an outer scope that must not fire
        o = await quick.probe(site.url("/hang"))
        check(o, error="timed out after 1 s")
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0
        await asyncio.sleep(0)  # would raise if a cancellation were still pending
        check(await quick.probe(site.url()), status=200)
        check(await quick.probe(site.url("/status/503")), status=503)


async def test_aclose_is_harmless(site: HttpTarget, prober: HttpProber) -> None:
    await prober.aclose()
    check(await prober.probe(site.url()), status=200)
