"""A revoked certificate through everything: the engine probes a real TLS server whose leaf
its CRL (served over HTTP on loopback) lists, the API shows the check's error with the fix,
meta.diagnosis and meta.chain, and the certificate-invalid webhook reaches a local receiver
with the revocation in its error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import orjson
from cryptography import x509

from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, running_engine, wait_status
from tests.support.pki import CrlServer, Pki, server_context
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until
from tests.support.webhook_support import make_settings, running, serving_receiver


async def test_a_revoked_certificate_is_down_in_the_api_and_sent_as_a_webhook(
    store: Store, account: tuple[Any, str], client: aiohttp.ClientSession, tmp_path: Path
) -> None:
    acc, _ = account
    pki = Pki(tmp_path)
    inter = pki.ca("Upwatch Test Issuing CA")
    async with serving_receiver() as receiver, CrlServer() as crls:
        await store.set_webhook_url(acc.id, receiver.url())
        leaf = pki.leaf(inter, crl_url=crls.url("/issuing.crl"))
        crls.files["/issuing.crl"] = pki.crl(
            inter, [(leaf, x509.ReasonFlags.key_compromise)])
        settings = fast_settings(tmp_path, ca_bundle=pki.bundle)
        async with HttpTarget(ssl_context=server_context(leaf, [inter])) as site:
            monitor_id, _, cert_id = await add_monitor(
                store, acc.id, site.url("/"), uptime=False, certificate=True, alias="shop")
            async with running_engine(store, settings):
                await wait_status(store, cert_id, "down")

        async with client.get(f"/webapi/monitors/{monitor_id}") as resp:
            assert resp.status == 200, await resp.text()
            check = (await resp.json())["checks"]["certificate_health"]
        assert check["status"] == "down"
        error = check["error"]
        assert error.startswith("certificate revoked on ")
        assert "(reason: keyCompromise)" in error and "; fix: install a new certificate" in error
        meta = check["meta"]
        assert meta["diagnosis"] == "revoked"
        assert [c["subject"] for c in meta["chain"]] == [
            "CN=localhost,O=Upwatch Tests", "CN=Upwatch Test Issuing CA,O=Upwatch Tests"]
        assert meta["chain"][0]["key_type"] == "EC" and meta["chain"][0]["key_bits"] == 256
        assert meta["revocation"]["status"] == "revoked"
        assert meta["revocation"]["reason"] == "keyCompromise"
        assert crls.hits == {"/issuing.crl": 1}

        async with running(store, make_settings(tmp_path)):
            await wait_until(lambda: bool(receiver.ok_hits()), timeout=10,
                             what="the certificate-invalid webhook")
        [hit] = receiver.ok_hits()
        body = orjson.loads(hit.body)
        assert body["monitor"]["id"] == monitor_id
        assert body["check"]["name"] == "certificate_health"
        assert body["check"]["status"] == "nok"
        assert body["check"]["error"] == error
