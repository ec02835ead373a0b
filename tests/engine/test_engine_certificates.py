"""Certificate checks through the engine against real TLS targets (trustme CA)."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from engine.db.store import Store
from tests.support.engine_support import (
    add_monitor,
    fast_settings,
    fetch,
    running_engine,
    wait_status,
)
from tests.support.targets import CertKind, HttpTarget, TlsCerts
from tests.support.wait import wait_until


async def cert_events(store: Store, check_id: int) -> list[Any]:
    return await fetch(store, "SELECT * FROM webhook_events WHERE check_id = $1 ORDER BY id",
                       check_id)


async def probes_of(store: Store, check_id: int) -> int:
    rows = await fetch(store, "SELECT count(*) AS n FROM probe_results WHERE check_id = $1",
                       check_id)
    return int(rows[0]["n"])


@contextlib.asynccontextmanager
async def tls_site(certs: TlsCerts, kind: CertKind, port: int = 0) -> AsyncIterator[HttpTarget]:
    async with HttpTarget(port=port, ssl_context=certs.server_context(kind)) as site:
        yield site


async def test_valid_certificate_is_ok_with_meta(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    async with tls_site(certs, "valid") as site:
        _, _, cert_id = await add_monitor(
            store, acc.id, site.url("/"), uptime=False, certificate=True)
        async with running_engine(store, settings):
            row = await wait_status(store, cert_id, "ok")
        assert row["error"] is None
        meta = row["meta"]
        # api.md's five keys, the leaf's identity (docs/alerts.md) once a leaf was read,
        # and what docs/certificates.md adds once the chain was read.
        assert set(meta) == {"issuer", "signature_algorithm", "is_self_signed", "valid_from",
                             "valid_to", "fingerprint_sha256", "serial", "key_type",
                             "lifetime_days", "diagnosis", "warnings", "chain", "revocation"}
        assert meta["chain"][0]["key_type"] == "EC" and meta["revocation"] is None
        assert len(meta["fingerprint_sha256"]) == 64 and meta["key_type"] == "EC-secp256r1"
        assert meta["issuer"] and meta["signature_algorithm"]
        assert meta["is_self_signed"] is False
        assert len(meta["valid_from"]) == 19 and len(meta["valid_to"]) == 19
        assert meta["valid_from"] < meta["valid_to"]
        assert site.requests == [] or all(r.sni is not None for r in site.requests)
        assert await cert_events(store, cert_id) == []


async def test_expired_goes_down_once_then_recovers_with_parent(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    async with tls_site(certs, "expired") as site:
        port = site.port
        monitor_id, _, cert_id = await add_monitor(
            store, acc.id, site.url("/"), uptime=False, certificate=True, alias="tls")
        async with running_engine(store, settings):
            row = await wait_status(store, cert_id, "down")
            assert row["error"].startswith("certificate expired on ")
            # Several more probes, still exactly one certificate_invalid.
            n = await probes_of(store, cert_id)

            async def more() -> bool:
                return await probes_of(store, cert_id) >= n + 3

            await wait_until(more, what="more certificate probes")
            [invalid] = await cert_events(store, cert_id)
            assert invalid["event"] == "certificate_invalid" and invalid["parent_id"] is None
            body = orjson.loads(invalid["body"])
            assert body["check"] == {
                "name": "certificate_health", "status": "nok",
                "last_check_at": body["check"]["last_check_at"],
                "error": row["error"],
            }
            assert body["monitor"] == {"id": monitor_id, "url": site.url("/"), "alias": "tls"}
            await site.stop()
            async with tls_site(certs, "valid", port=port):
                ok = await wait_status(store, cert_id, "ok")
            assert ok["error"] is None and ok["incident_event_id"] is None
        first, recovered = await cert_events(store, cert_id)
        assert first["id"] == invalid["id"]
        assert recovered["event"] == "certificate_recovered"
        assert recovered["parent_id"] == invalid["id"]
        body = orjson.loads(recovered["body"])
        assert body["check"]["status"] == "ok" and "error" not in body["check"]
        meta = body["check"]["meta"]
        assert set(meta) == {"issuer", "signature_algorithm", "valid_from", "valid_to"}
        assert meta["valid_to"] == ok["meta"]["valid_to"]


async def test_self_signed_and_wrong_host_are_down_in_plain_words(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle, probe_timeout=0.5)
    async with tls_site(certs, "self-signed") as selfsigned, \
            tls_site(certs, "wrong-host") as wrong:
        _, _, s_id = await add_monitor(
            store, acc.id, selfsigned.url("/"), uptime=False, certificate=True)
        _, _, w_id = await add_monitor(
            store, acc.id, wrong.url("/"), uptime=False, certificate=True)
        async with running_engine(store, settings):
            s = await wait_status(store, s_id, "down")
            w = await wait_status(store, w_id, "down")
        assert s["error"].startswith("self-signed certificate: ")
        assert s["meta"]["is_self_signed"] is True
        assert w["error"].startswith("host name mismatch: ")
        for cid in (s_id, w_id):
            assert [e["event"] for e in await cert_events(store, cid)] == ["certificate_invalid"]


def own_loopback_address() -> str:
    """A loopback address of this test's own (127.0.0.0/8 is all loopback on Linux), so
    that its port 443 is free whatever else runs on the machine."""
    while True:
        addr = f"127.{secrets.randbelow(250) + 2}.{secrets.randbelow(254) + 1}." \
               f"{secrets.randbelow(254) + 1}"
        with contextlib.suppress(OSError), socket.socket() as s:
            s.bind((addr, 0))
            return addr


async def test_an_http_monitors_certificate_check_enabled_by_hand_reads_port_443(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    """Not the URL's own port, which speaks plain HTTP: the host's port 443."""
    acc, _ = account
    addr = own_loopback_address()
    certs = TlsCerts(tmp_path, hosts=(addr,))
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle, probe_timeout=0.5)
    async with HttpTarget(host=addr) as plain:
        _, _, cid = await add_monitor(
            store, acc.id, plain.url("/"), uptime=False, certificate=True)
        # Nothing listens on addr:443: refused there (the URL's port would have answered
        # the handshake with plain HTTP: "wrong version number").
        async with running_engine(store, settings):
            down = await wait_status(store, cid, "down")
        assert down["error"] == "no TLS answer: connection refused"
        assert plain.connections == 0
        if os.geteuid() != 0:
            pytest.skip("binding port 443 needs root")
        async with HttpTarget(host=addr, port=443,
                              ssl_context=certs.server_context("valid")) as https:
            async with running_engine(store, settings):
                ok = await wait_status(store, cid, "ok")
            assert https.connections >= 1 and https.sni_names[0] is None  # an IP: no SNI
        assert ok["error"] is None and ok["meta"]["issuer"] == "Upwatch Test CA"
        assert plain.connections == 0
        assert [e["event"] for e in await cert_events(store, cid)] == [
            "certificate_invalid", "certificate_recovered"]


async def test_renewal_due_is_sent_once_per_certificate(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    # A valid certificate with 10 days left, checked with a 30-day expiry threshold.
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    now = dt.datetime.now(dt.UTC)
    certs.ca.issue_cert(
        *certs.hosts, not_before=now - dt.timedelta(days=1),
        not_after=now + dt.timedelta(days=10, hours=1), key_type=certs.key_type,
    ).configure_cert(ctx)
    async with HttpTarget(ssl_context=ctx) as site:
        _, _, cert_id = await add_monitor(
            store, acc.id, site.url("/"), uptime=False, certificate=True, expiry_days=30)
        async with running_engine(store, settings):
            await wait_status(store, cert_id, "ok")
            n = await probes_of(store, cert_id)

            async def more() -> bool:
                return await probes_of(store, cert_id) >= n + 3

            await wait_until(more, what="more certificate probes")
        [renewal] = await cert_events(store, cert_id)
        assert renewal["event"] == "certificate_renewal_due" and renewal["parent_id"] is None
        body = orjson.loads(renewal["body"])
        assert body["check"]["status"] == "ok" and "error" not in body["check"]
        meta = body["check"]["meta"]
        assert meta["expires_in_days"] == 10
        assert set(meta) == {"expires_in_days", "issuer", "signature_algorithm", "valid_from",
                             "valid_to"}
        row = await fetch(store, "SELECT renewal_notified_for FROM checks WHERE id = $1", cert_id)
        assert row[0]["renewal_notified_for"] is not None


async def test_no_renewal_due_without_a_threshold(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    now = dt.datetime.now(dt.UTC)
    certs.ca.issue_cert(
        *certs.hosts, not_before=now - dt.timedelta(days=1),
        not_after=now + dt.timedelta(days=2), key_type=certs.key_type,
    ).configure_cert(ctx)
    async with HttpTarget(ssl_context=ctx) as site:
        _, _, cert_id = await add_monitor(
            store, acc.id, site.url("/"), uptime=False, certificate=True, expiry_days=0)
        async with running_engine(store, settings):
            await wait_status(store, cert_id, "ok")
            n = await probes_of(store, cert_id)

            async def more() -> bool:
                return await probes_of(store, cert_id) >= n + 2

            await wait_until(more, what="more certificate probes")
        assert await cert_events(store, cert_id) == []


async def test_a_rollback_to_an_announced_certificate_sends_no_second_renewal_due(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    """A server serves certificate A, then B, then A again, all due for renewal: exactly two
    renewal-due events, one per certificate (the engine restarted between, so the memory
    of announced certificates comes back from the database)."""
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    now = dt.datetime.now(dt.UTC)
    a, b = (certs.ca.issue_cert(
        *certs.hosts, not_before=now - dt.timedelta(days=1),
        not_after=now + dt.timedelta(days=days, hours=1), key_type=certs.key_type)
        for days in (10, 12))
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    a.configure_cert(ctx)
    async with HttpTarget(ssl_context=ctx) as site:
        _, _, cert_id = await add_monitor(
            store, acc.id, site.url("/"), uptime=False, certificate=True, expiry_days=30)
        fingerprints = []
        for leaf in (a, b, a):
            leaf.configure_cert(ctx)  # the next handshakes present it
            n = await probes_of(store, cert_id)
            async with running_engine(store, settings):

                async def more(n: int = n) -> bool:
                    return await probes_of(store, cert_id) >= n + 3

                await wait_until(more, what="certificate probes")
            [row] = await fetch(store, "SELECT meta FROM checks WHERE id = $1", cert_id)
            fingerprints.append(row["meta"]["fingerprint_sha256"])
    first, second, again = fingerprints
    assert first != second and again == first
    events = await cert_events(store, cert_id)
    assert [e["event"] for e in events] == ["certificate_renewal_due"] * 2
    assert [orjson.loads(e["body"])["check"]["meta"]["expires_in_days"] for e in events] == [
        10, 12]
    [row] = await fetch(store, "SELECT renewal_notified_fingerprints FROM checks WHERE id = $1",
                        cert_id)
    assert row["renewal_notified_fingerprints"] == [first, second]
