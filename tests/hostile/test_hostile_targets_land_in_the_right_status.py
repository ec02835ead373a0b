"""Hostile targets, probed by the real engine and written by the real store: each lands in the
right check status with a precise error, and no probe of them outlives the probe timeout.

The prober alone is tested against the same servers in ``test_probe_http.py``; here the
whole path runs: scheduler, probe, state machine (failure, confirmation, down and the
downtime webhook queued), results writer. Loopback only; a name that does not resolve is
answered by :class:`tests.support.fake_dns.FakeDns` (as ``getaddrinfo`` answers it) rather than by
asking a real DNS server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from engine import USER_AGENT
from engine.db.store import Store
from engine.probes import addresses
from engine.probes.http import HttpProber
from engine.probes.tls import CertProber
from tests.support.engine_support import (
    add_monitor,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.fake_dns import FakeDns
from tests.support.targets import HttpTarget, TlsCerts, ipv6_available, tls_target
from tests.support.wait import wait_until

TIMEOUT = 1.0
# What a probe may take beyond its timeout on a loaded 2-core CI machine (the deadline
# itself is exact to a few ms; the rest is the event loop being busy elsewhere).
SLACK_MS = 300.0


async def _probes_within_timeout(store: Store, check_ids: list[int]) -> list[Any]:
    rows = await fetch(
        store,
        "SELECT check_id, max(total_ms) AS worst, count(*) AS n FROM probe_results"
        " WHERE check_id = ANY($1::bigint[]) GROUP BY check_id",
        check_ids,
    )
    assert {r["check_id"] for r in rows} == set(check_ids), "every check was probed"
    for r in rows:
        assert r["worst"] <= TIMEOUT * 1000 + SLACK_MS, dict(r)
    return rows


async def _one_downtime_each(store: Store, check_ids: list[int]) -> None:
    rows = await fetch(
        store,
        "SELECT check_id, array_agg(event ORDER BY id) AS events FROM webhook_events"
        " WHERE check_id = ANY($1::bigint[]) GROUP BY check_id",
        check_ids,
    )
    events = {r["check_id"]: list(r["events"]) for r in rows}
    assert events == {c: ["downtime"] for c in check_ids}


async def test_each_hostile_target_lands_in_its_status_within_the_timeout(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, probe_timeout=TIMEOUT)
    certs = TlsCerts(tmp_path)
    dns = FakeDns()  # knows no name at all
    http = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True,
                      resolver=dns.resolve)
    async with HttpTarget() as site, HttpTarget() as garbage, \
            tls_target(certs) as tls_site:
        garbage.mode = "garbage"  # plain bytes on a port probed with TLS
        cases: dict[str, tuple[str, str | None, int | None]] = {
            # url: (status, error, http_status_code)
            site.url("/slowloris?interval=1"): ("down", "timed out after 1 s", None),
            site.url("/endless"): ("ok", None, 200),  # 1 MiB of body read, then cut
            site.url("/huge-headers"): ("down", "headers too large", None),
            site.url("/loop"): ("down", "too many redirects", None),
            f"https://127.0.0.1:{garbage.port}/": (
                "down", "TLS handshake failed: wrong version number", None),
            tls_site.url("/garbage"): ("down", "invalid HTTP response", None),
            site.url("/reset-headers"): ("down", "connection reset", None),
            "http://no-such-host.invalid/": (
                "down", "DNS lookup failed: no-such-host.invalid", None),
        }
        v6: HttpTarget | None = None
        if ipv6_available():
            v6 = await HttpTarget(host="::1").start()
            cases[v6.url("/")] = ("ok", None, 200)
        try:
            checks = {}
            for url in cases:
                _, uptime_id, _ = await add_monitor(store, acc.id, url)
                checks[url] = uptime_id
            # The certificate check of the port that answers garbage.
            _, _, garbage_cert = await add_monitor(
                store, acc.id, f"https://127.0.0.1:{garbage.port}/", uptime=False,
                certificate=True,
            )
            async with running_engine(store, settings, http_prober=http):
                for url, (status, error, code) in cases.items():
                    row = await wait_status(store, checks[url], status, timeout=15)
                    assert row["error"] == error, url
                    assert row["meta"] == {"http_status_code": code}, url
                cert = await wait_status(store, garbage_cert, "down", timeout=15)
                assert cert["error"] == "no TLS answer: wrong version number"
                # The ok ones stay ok probe after probe (an endless body never becomes a
                # timeout): wait for a few more probes of each, then look again.
                ok_ids = [checks[u] for u, c in cases.items() if c[0] == "ok"]
                await _wait_probes(store, ok_ids, 3)
                for check_id in ok_ids:
                    row = await wait_status(store, check_id, "ok")
                    assert row["error"] is None
            down_ids = [checks[u] for u, c in cases.items() if c[0] == "down"]
            await _one_downtime_each(store, down_ids)
            await _probes_within_timeout(store, [*checks.values(), garbage_cert])
            if v6 is not None:
                assert v6.peers and set(v6.peers) == {"::1"}  # really over IPv6
            assert dns.answers_for("no-such-host.invalid")[0] is None
        finally:
            if v6 is not None:
                await v6.stop()


async def test_redirects_and_addresses_that_reach_private_networks_are_blocked(
    store: Store, account: tuple[Any, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SSRF with private targets NOT allowed: a public site that redirects inward, and an
    IPv6 loopback URL (the API refuses it with a 422; the engine refuses it as well, e.g.
    for a monitor created while private targets were allowed)."""
    acc, _ = account
    # Loopback only: 127.0.0.1 plays a public website; every other address keeps its real
    # class (127.0.0.2, ::1, 10/8 and 169.254/16 are all non-public).
    real = addresses.public_address
    monkeypatch.setattr(addresses, "public_address", lambda ip: ip == "127.0.0.1" or real(ip))
    settings = fast_settings(tmp_path, probe_timeout=TIMEOUT, allow_private_targets=False)
    dns = FakeDns()
    dns.names["intranet.test"] = [["10.1.2.3"]]
    http = HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=False,
                      resolver=dns.resolve)
    cert = CertProber(timeout=TIMEOUT, allow_private=False, resolver=dns.resolve)
    async with HttpTarget() as site, HttpTarget(host="127.0.0.2") as internal:
        def inward(target: str) -> str:
            return site.url("/redirect-to?url=" + quote(target, safe=""))

        cases = {
            inward(internal.url("/admin")):
                "blocked: 127.0.0.2 resolves to a non-public address (127.0.0.2)",
            inward("http://169.254.169.254/latest/meta-data/"):
                "blocked: 169.254.169.254 resolves to a non-public address (169.254.169.254)",
            inward("http://intranet.test/"):
                "blocked: intranet.test resolves to a non-public address (10.1.2.3)",
        }
        v6: HttpTarget | None = None
        if ipv6_available():
            v6 = await HttpTarget(host="::1").start()
            cases[v6.url("/")] = "blocked: ::1 resolves to a non-public address (::1)"
        try:
            checks = {}
            for url in cases:
                checks[url] = (await add_monitor(store, acc.id, url))[1]
            _, _, v6_cert = (await add_monitor(store, acc.id, v6.url("/"), uptime=False,
                                               certificate=True)) if v6 else (0, 0, 0)
            async with running_engine(store, settings, http_prober=http, cert_prober=cert):
                for url, error in cases.items():
                    row = await wait_status(store, checks[url], "down", timeout=15)
                    assert row["error"] == error, url
                    assert row["meta"] == {"http_status_code": None}, url
                if v6 is not None:
                    row = await wait_status(store, v6_cert, "down", timeout=15)
                    assert row["error"] == "blocked: ::1 resolves to a non-public address (::1)"
            await _one_downtime_each(store, list(checks.values()))
            await _probes_within_timeout(store, list(checks.values()))
            # The first hop was fetched (the public site answered the redirect, for the probe
            # and for its confirmation), the second hop never connected.
            asked = [r.target for r in site.requests]
            for url in cases:
                if url.startswith(site.base_url):
                    assert asked.count(url.removeprefix(site.base_url)) >= 2, url
            assert internal.connections == 0
            if v6 is not None:
                assert v6.connections == 0
        finally:
            if v6 is not None:
                await v6.stop()


async def _wait_probes(store: Store, check_ids: list[int], n: int) -> None:
    async def enough() -> bool:
        rows = await fetch(
            store,
            "SELECT count(*) AS n FROM probe_results WHERE check_id = ANY($1::bigint[])"
            " GROUP BY check_id",
            check_ids,
        )
        return len(rows) == len(check_ids) and all(r["n"] >= n for r in rows)

    await wait_until(enough, timeout=15, what=f"{n} probes of each check")
