"""The internet world of ``upwatch bench internet`` (upwatch_bench/world.py, nginx.py,
worldserver.py): which site each monitor is, the nginx configuration, how result rows are
judged, and (when nginx is installed) that the world serves each kind as the probe must see
it: healthy sites over TLS 1.3 and 1.2 with ECDSA and RSA certificates answer, redirects
end over HTTPS, and the failing kinds fail with their words.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engine import USER_AGENT
from engine.probes.http import HttpProber
from engine.probes.resolver import ProbeResolver
from engine.probes.tls import CertProber
from engine.runtime.metrics import Metrics
from upwatch_bench.certs import make_world_certs
from upwatch_bench.layout import free_port
from upwatch_bench.nginx import Nginx, nginx_conf, nginx_path
from upwatch_bench.roles import worldserver
from upwatch_bench.roles.dnsserver import DnsServer
from upwatch_bench.scenarios.internet import beyond_think, classify
from upwatch_bench.world import (
    ADDRESS,
    BODY_BYTES,
    EXPECTED_WORDS,
    KEY_TYPE,
    PROTOCOL,
    SERVER_KINDS,
    THINK_MS,
    ZONE,
    World,
    index_of,
    parse_path,
)
from upwatch_bench.world_setup import wait_listening

WORLD = World(monitors=10_000, https_port=8443, http_port=8080, slow_ms=12_000)


def test_every_kind_has_its_exact_share_and_the_world_is_deterministic() -> None:
    sites = WORLD.sites()
    kinds = Counter(s.kind for s in sites)
    assert kinds == {"https": 7500, "http": 1000, "redirect": 1000, "slow": 100, "hang": 100,
                     "refuse": 100, "nxdomain": 100, "badcert": 100}
    assert sum(1 for s in sites if s.tls) == 8000  # 80 % HTTPS
    servers = Counter(s.server for s in sites if s.kind == "https")
    assert set(servers) == set(SERVER_KINDS)
    assert all(1500 < c < 2250 for c in servers.values()), servers
    again = World.from_dict(WORLD.to_dict())
    assert [again.site(i) for i in range(0, 10_000, 97)] == [sites[i] for i in
                                                            range(0, 10_000, 97)]
    assert len({s.host for s in sites}) == 10_000  # a distinct name per monitor


def test_sites_carry_think_time_and_body_in_their_path() -> None:
    for s in WORLD.sites()[:2000]:
        assert index_of(s.host) == s.index
        path = "/" + s.url.split("/", 3)[3]
        think, body = parse_path(path) or (None, None)
        assert (think, body) == (s.think_ms, s.body_bytes)
        assert BODY_BYTES[0] <= s.body_bytes <= BODY_BYTES[1]
        if s.kind == "slow":
            assert s.think_ms == WORLD.slow_ms
        else:
            assert THINK_MS[0] <= s.think_ms <= THINK_MS[1]
    thinks = [s.think_ms for s in WORLD.sites() if s.kind != "slow"]
    assert min(thinks) < 20 and max(thinks) > 290  # the whole range is drawn


def test_urls_and_dns_answers_follow_the_kind() -> None:
    for s in WORLD.sites()[:500]:
        assert WORLD.address_of(s.host) == s.address
        if s.kind == "https":
            assert s.url.startswith(f"https://m{s.index}.{ZONE}:8443/")
            assert s.address == ADDRESS[s.server or ""]
        elif s.kind == "redirect":
            assert s.url.startswith("http://") and ":8080/" in s.url
            assert s.address == ADDRESS[s.server or ""]  # a TLS server answers the 301
        elif s.kind == "http":
            assert s.address == ADDRESS["http"]
        elif s.kind == "nxdomain":
            assert s.host.startswith("nx-") and s.address is None
        else:
            assert s.address == ADDRESS[s.kind if s.kind != "slow" else s.server or ""]
    assert WORLD.address_of(f"m{WORLD.monitors}.{ZONE}") is None  # beyond the world
    assert WORLD.address_of("www.example.com") is None
    assert parse_path("/other") is None and parse_path("/w/x/1") is None


def test_nginx_configuration_has_a_server_per_kind(tmp_path: Path) -> None:
    certs = {k: (tmp_path / f"{k}.pem", tmp_path / f"{k}.key")
             for k in (*SERVER_KINDS, "badcert")}
    conf = nginx_conf(prefix=tmp_path, https_port=8443, http_port=8080,
                      backend="127.0.0.1:9000", certs=certs, run_as_root=False)
    assert "worker_processes 1;" in conf and "user " not in conf
    for kind in (*SERVER_KINDS, "badcert"):
        block = conf.split(f"listen {ADDRESS[kind]}:8443 ssl")[1].split("}")[0]
        assert f"ssl_protocols {PROTOCOL[kind]};" in block
        assert f"ssl_certificate {tmp_path / (kind + '.pem')};" in block
        assert "ssl_session_tickets on;" in block
    for kind in SERVER_KINDS:
        block = conf.split(f"listen {ADDRESS[kind]}:8080")[1].split("}")[0]
        assert "return 301 https://$host:8443$request_uri;" in block
    assert f"listen {ADDRESS['http']}:8080" in conf
    assert "server 127.0.0.1:9000;" in conf and "keepalive 1024;" in conf
    assert 'proxy_set_header Connection "";' in conf  # upstream keep-alive
    assert ADDRESS["refuse"] not in conf and ADDRESS["hang"] not in conf
    assert "user root root;" in nginx_conf(prefix=tmp_path, https_port=1, http_port=2,
                                           backend="b:1", certs=certs, run_as_root=True)


def _row(site_index: int, outcome: int, error: str | None, kind: int = 1) -> dict[str, Any]:
    return {"host": WORLD.site(site_index).host, "kind": kind, "outcome": outcome,
            "error": error, "confirmation": False}


def _first(kind: str) -> int:
    return next(s.index for s in WORLD.sites() if s.kind == kind)


def test_rows_are_judged_by_the_kind_of_their_site() -> None:
    rows = [
        _row(_first("https"), 0, None),
        _row(_first("http"), 2, "connection refused"),  # a healthy site failed
        _row(_first("refuse"), 2, "connection refused"),
        _row(_first("hang"), 2, "timed out after 10 s"),
        _row(_first("nxdomain"), 0, None),  # a failing site that did not fail
        _row(_first("badcert"), 0, None),
        _row(_first("badcert"), 2, "certificate expired", kind=2),
        _row(_first("slow"), 2, "connection reset"),  # fails, but not with its words
    ]
    got = classify(WORLD, rows)
    assert got["healthy_failed"] == 1
    assert got["healthy_failure_reasons"] == ["connection refused"]
    assert got["failing_passed"] == 1
    assert got["failures_with_unexpected_words"] == 1
    assert got["by_kind"]["refuse"] == {
        "probes": 1, "failed": 1, "degraded": 0, "reasons": ["connection refused"],
        "confirmations": 0, "total_ms": {"p50": None, "p99": None}}
    assert got["certificate_checks"] == {"probes": 1, "failed": 1,
                                         "reasons": ["certificate expired"]}


def test_time_beyond_think_counts_answered_probes_of_healthy_sites_only() -> None:
    https, http = WORLD.site(_first("https")), WORLD.site(_first("http"))
    rows = [
        {**_row(https.index, 0, None), "total_ms": https.think_ms + 3.0},
        {**_row(http.index, 0, None), "total_ms": http.think_ms + 5.0},
        {**_row(https.index, 2, "connection reset"), "total_ms": 1.0},  # failed: not counted
        {**_row(_first("slow"), 0, None), "total_ms": 9.0},  # not a healthy site
        {**_row(_first("badcert"), 0, None, kind=2), "total_ms": 9.0},  # certificate check
        {**_row(https.index, 0, None), "total_ms": None},
    ]
    got = beyond_think(WORLD, rows)
    assert got["count"] == 2 and got["mean"] == 4.0 and got["max"] == 5.0
    assert beyond_think(WORLD, [])["mean"] is None


# -- the world, served (needs nginx) -------------------------------------------------------


def _can_bind(host: str) -> bool:
    with socket.socket() as s:
        try:
            s.bind((host, 0))
        except OSError:
            return False
    return True


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[World, DnsServer, Path]]:
    exe = nginx_path()
    if exe is None:
        pytest.skip("nginx is not installed (upwatch bench internet installs nginx-light; "
                    "apt-get install -y nginx-light to run this test)")
    if not _can_bind(ADDRESS["tls13-ecdsa"]):
        pytest.skip("127.0.4.0/24 is not routed to loopback here")
    https_port = free_port(ADDRESS["tls13-ecdsa"])
    http_port = free_port(ADDRESS["tls13-ecdsa"])
    world = World(400, https_port, http_port, slow_ms=3000)
    certs = make_world_certs(tmp_path / "certs", ZONE, ADDRESS,
                             {k: KEY_TYPE[k] for k in (*SERVER_KINDS, "badcert")},
                             expired=("badcert",))
    backend_port = free_port("127.0.0.1")
    servers = await worldserver.start({"host": "127.0.0.1", "port": backend_port,
                                       "hang": [ADDRESS["hang"], https_port],
                                       "hang_cap_s": 30.0})
    server = Nginx(exe, tmp_path / "nginx")
    try:
        await server.start(nginx_conf(
            prefix=server.prefix, https_port=https_port, http_port=http_port,
            backend=f"127.0.0.1:{backend_port}", certs=certs.pairs,
            run_as_root=os.geteuid() == 0), None)
        await wait_listening(server, world)
        dns = DnsServer(zone=ZONE, addresses=[], ttl=300)
        dns.address_of = world.address_of
        async with dns:
            yield world, dns, certs.ca
    finally:
        await server.stop()
        for s in servers:
            s.close()


async def test_each_kind_gives_the_probe_its_expected_outcome(
    served: tuple[World, DnsServer, Path],
) -> None:
    world, dns, ca = served
    resolver = ProbeResolver(servers=[dns.address], timeout=0.5, tries=1,
                             family=socket.AF_INET)
    metrics = Metrics()
    prober = HttpProber(timeout=1.0, user_agent=USER_AGENT, allow_private=True,
                        resolver=resolver, metrics=metrics)
    picked: dict[str, list[Any]] = {}
    for s in world.sites():
        key = s.server if s.kind == "https" else s.kind
        assert key is not None
        if len(picked.setdefault(key, [])) < 2:
            picked[key].append(s)
    assert set(picked) == {*SERVER_KINDS, "http", "redirect", "slow", "hang", "refuse",
                           "nxdomain", "badcert"}
    sites = [s for group in picked.values() for s in group]
    outcomes = await asyncio.wait_for(
        asyncio.gather(*(prober.probe(s.url) for s in sites)), 10)
    for s, out in zip(sites, outcomes, strict=True):
        if s.healthy:
            assert out.error is None and out.status_code == 200, (s, out)
            if s.kind == "redirect":
                assert out.redirects == 1
        else:
            assert out.status_code is None and out.error, (s, out)
            assert EXPECTED_WORDS[s.kind].search(out.error), (s, out.error)
    # The TLS servers speak their protocol, and TLS 1.2 ones hand out resumable sessions.
    assert prober.tls_handshakes >= 2 * 4
    again = await prober.probe(picked["tls12-ecdsa"][0].url)
    assert again.error is None
    assert prober.tls_resumed >= 1
    counted = {s.labels["resumed"]: s.value for family in metrics.tls_handshakes.collect()
               for s in family.samples}
    assert counted == {"true": prober.tls_resumed,
                       "false": prober.tls_handshakes - prober.tls_resumed}
    # The bad certificate is the certificate check's to find.
    certs = CertProber(timeout=2.0, allow_private=True, ca_bundle=str(ca), resolver=resolver)
    bad = picked["badcert"][0]
    cert = await certs.probe(bad.host, world.https_port)
    assert cert.error is not None and EXPECTED_WORDS["badcert"].search(cert.error), cert
    good = await certs.probe(picked["tls13-rsa"][0].host, world.https_port)
    assert good.error is None, good
    ctx = ssl.create_default_context(cafile=str(ca))
    for kind in SERVER_KINDS:
        _, writer = await asyncio.open_connection(
            ADDRESS[kind], world.https_port, ssl=ctx, server_hostname=f"m1.{ZONE}")
        assert writer.get_extra_info("ssl_object").version() == PROTOCOL[kind]
        writer.close()
    await prober.aclose()


def test_the_dns_server_answers_world_names_as_dnspython_would() -> None:
    import dns.flags
    import dns.message
    import dns.rcode

    server = DnsServer(zone=ZONE, addresses=[], ttl=300)
    server.address_of = WORLD.address_of
    https = WORLD.site(_first("https"))
    nx = WORLD.site(_first("nxdomain"))
    for host, rdtype, edns in ((https.host, "A", 0), (https.host, "A", -1),
                               (https.host, "AAAA", 0), (nx.host, "A", 0),
                               (f"M{https.index}.{ZONE.upper()}", "A", 0)):
        q = dns.message.make_query(host, rdtype, use_edns=edns)
        wire = server.answer(q.to_wire(), tcp=False)
        assert wire is not None
        r = dns.message.from_wire(wire)
        assert r.id == q.id and r.flags & dns.flags.QR and r.flags & dns.flags.AA
        assert r.question == q.question
        assert (r.edns >= 0) == (edns >= 0)
        if host == nx.host:
            assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer
        elif rdtype == "AAAA":
            assert r.rcode() == dns.rcode.NOERROR and not r.answer
        else:
            rrset = r.answer[0]
            assert [(rr.address, rrset.ttl) for rr in rrset] == [(https.address, 300)]
    assert server.queries[(https.host, "A")] == 3  # names are counted in lower case
    assert server.queries[(https.host, "AAAA")] == 1


def test_the_bytes_a_cached_name_holds_are_counted_compiled_or_not() -> None:
    # Compiled, DnsAnswer has no __slots__ (its floats are unboxed): the bench's reading
    # once failed there, five minutes into a run.
    from types import SimpleNamespace

    from engine.probes.resolver import DnsAnswer
    from upwatch_bench.roles.dnscache import python_bytes_per_name

    shared = ["127.0.0.1"]
    res = SimpleNamespace(_cache={f"n{i}.example": DnsAnswer(shared, None, 10.0, 12.0)
                                  for i in range(100)})
    per_name = python_bytes_per_name(res)
    assert per_name is not None and 60 < per_name < 1000
    assert python_bytes_per_name(SimpleNamespace(_cache={})) is None
