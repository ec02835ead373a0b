"""Certificates through the real engine against real TLS targets (trustme leaves of chosen
lifetimes): the percent threshold fits 6-day and 398-day certificates alike, renewal-due goes
out once per certificate, and a certificate swapped for one of another issuer shows in
GET /webapi/checks/{id}/certificates with first and last sightings."""

from __future__ import annotations

import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import trustme

from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, fetch, fetchval, running_engine
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

HOSTS = ("localhost", "127.0.0.1")


def leaf_context(ca: trustme.CA, lifetime_days: float, left_days: float) -> ssl.SSLContext:
    now = dt.datetime.now(dt.UTC)
    leaf = ca.issue_cert(*HOSTS, not_before=now - dt.timedelta(days=lifetime_days - left_days),
                         not_after=now + dt.timedelta(days=left_days))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    leaf.configure_cert(ctx)
    return ctx


def bundle(tmp_path: Path, *cas: trustme.CA) -> Path:
    path = tmp_path / "cas.pem"
    path.write_bytes(b"".join(ca.cert_pem.bytes() for ca in cas))
    return path


async def renewals(store: Store, check_id: int) -> list[Any]:
    return await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1 AND"
                              " event = 'certificate_renewal_due' ORDER BY id", check_id)


async def probed(store: Store, check_id: int, n: int) -> None:
    async def enough() -> bool:
        count = await fetchval(store, "SELECT count(*) FROM probe_results WHERE check_id = $1",
                               check_id)
        return int(count) >= n

    await wait_until(enough, what=f"{n} probes of check {check_id}")


async def test_the_percent_threshold_fits_six_day_and_398_day_certificates(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    ca = trustme.CA(organization_name="Lifetime CA")
    settings = fast_settings(tmp_path, ca_bundle=bundle(tmp_path, ca))
    # (lifetime, days left, renewal due at 33 % of the lifetime?)
    cases = [(6, 5, False), (6, 1, True), (398, 300, False), (398, 100, True)]
    sites = [HttpTarget(ssl_context=leaf_context(ca, life, left)) for life, left, _ in cases]
    checks = []
    try:
        for site in sites:
            await site.start()
            _, _, cert_id = await add_monitor(store, acc.id, site.url("/"), uptime=False,
                                              certificate=True)
            await store.update_check(acc.id, cert_id, expiry_threshold_percent=33)
            checks.append(cert_id)
        async with running_engine(store, settings):
            for cert_id in checks:
                await probed(store, cert_id, 3)
    finally:
        for site in sites:
            await site.stop()
    for cert_id, (life, left, expected) in zip(checks, cases, strict=True):
        events = await renewals(store, cert_id)
        assert len(events) == (1 if expected else 0), (life, left, len(events))
        row = await fetch(store, "SELECT meta FROM checks WHERE id = $1", cert_id)
        assert round(row[0]["meta"]["lifetime_days"]) == life
        if expected:
            meta = orjson.loads(events[0]["body"])["check"]["meta"]
            assert meta["expires_in_days"] == left - 1 or meta["expires_in_days"] == left
            assert set(meta) == {"expires_in_days", "issuer", "signature_algorithm",
                                 "valid_from", "valid_to"}  # api.md's payload, unchanged


async def test_a_swapped_certificate_from_another_issuer_is_seen_and_notified_once(
    store: Store, account: tuple[Any, str], client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    acc, _ = account
    first_ca = trustme.CA(organization_name="First CA")
    second_ca = trustme.CA(organization_name="Second CA", key_type=trustme.KeyType.RSA)
    settings = fast_settings(tmp_path, ca_bundle=bundle(tmp_path, first_ca, second_ca))
    site = await HttpTarget(ssl_context=leaf_context(first_ca, 6, 1)).start()  # due at 33 %
    try:
        _, _, cert_id = await add_monitor(store, acc.id, site.url("/"), uptime=False,
                                          certificate=True)
        await store.update_check(acc.id, cert_id, expiry_threshold_percent=33)
        async with running_engine(store, settings):
            await probed(store, cert_id, 3)
            assert len(await renewals(store, cert_id)) == 1
            # The operator swaps in a certificate of another CA (also short-lived and due)
            # and restarts the server on the same port.
            now = dt.datetime.now(dt.UTC)
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            second_ca.issue_cert(
                *HOSTS, not_before=now - dt.timedelta(days=5),
                not_after=now + dt.timedelta(days=1), key_type=trustme.KeyType.RSA,
            ).configure_cert(ctx)
            port = site.port
            await site.stop()
            site = await HttpTarget(port=port, ssl_context=ctx).start()

            async def swapped() -> Any:
                rows = await fetch(store, "SELECT * FROM check_certificates WHERE check_id = $1",
                                   cert_id)
                return rows if len(rows) == 2 else None

            await wait_until(swapped, what="the second certificate seen")
            done = int(await fetchval(
                store, "SELECT count(*) FROM probe_results WHERE check_id = $1", cert_id))
            await probed(store, cert_id, done + 3)
    finally:
        await site.stop()
    events = await renewals(store, cert_id)
    assert len(events) == 2  # once per certificate, not per probe
    issuers = [orjson.loads(e["body"])["check"]["meta"]["issuer"] for e in events]
    assert issuers[0] != issuers[1]
    async with client.get(f"/webapi/checks/{cert_id}/certificates") as r:
        assert r.status == 200
        seen = await r.json()
    assert len(seen) == 2
    newer, older = seen
    assert newer["current"] is True and older["current"] is False
    assert newer["issuer"] != older["issuer"]
    assert newer["fingerprint_sha256"] != older["fingerprint_sha256"]
    assert newer["key_type"].startswith("RSA-") and older["key_type"].startswith("EC-")
    assert older["first_seen_at"] <= older["last_seen_at"] <= newer["first_seen_at"]
    assert newer["first_seen_at"] <= newer["last_seen_at"]
    assert round(newer["lifetime_days"]) == 6
    async with client.get(f"/webapi/monitors/{(await monitor_of(store, cert_id))}") as r:
        meta = (await r.json())["checks"]["certificate_health"]["meta"]
    assert meta["fingerprint_sha256"] == newer["fingerprint_sha256"]
    assert meta["serial"] == newer["serial"] and meta["key_type"] == newer["key_type"]
    # Not a certificate check, or not the account's: 404.
    uptime_id = int(await fetchval(
        store, "SELECT id FROM checks WHERE monitor_id = $1 AND kind = 'uptime'",
        await monitor_of(store, cert_id)))
    async with client.get(f"/webapi/checks/{uptime_id}/certificates") as r:
        assert r.status == 404


async def monitor_of(store: Store, check_id: int) -> int:
    return int(await fetchval(store, "SELECT monitor_id FROM checks WHERE id = $1", check_id))
