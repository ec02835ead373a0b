"""The certificate check of an smtp:// and a tls:// monitor through the real engine: the
mail server's certificate is read after its greeting and STARTTLS, on the URL's port, and
an expired one is said in words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db.store import Store
from tests.support.engine_support import add_monitor, fast_settings, running_engine, wait_status
from tests.support.stream_targets import echo, line_server, stream_server
from tests.support.targets import TlsCerts


async def test_smtp_and_tls_monitors_certificates(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    certs = TlsCerts(tmp_path)
    settings = fast_settings(tmp_path, ca_bundle=certs.ca_bundle)
    smtp = line_server(
        b"220 mx.test ESMTP\r\n",
        {b"EHLO": b"250-mx.test\r\n250 STARTTLS\r\n", b"STARTTLS": b"220 go ahead\r\n"},
        certs.server_context("expired"), b"STARTTLS")
    async with stream_server(smtp) as mail_port, \
            stream_server(echo, ssl_context=certs.server_context("valid")) as tls_port:
        _, mail_uptime, mail_cert = await add_monitor(
            store, acc.id, f"smtp://localhost:{mail_port}", certificate=True)
        _, tls_uptime, tls_cert = await add_monitor(
            store, acc.id, f"tls://localhost:{tls_port}", certificate=True)
        async with running_engine(store, settings):
            expired = await wait_status(store, mail_cert, "down")
            valid = await wait_status(store, tls_cert, "ok")
            await wait_status(store, mail_uptime, "ok")  # the uptime probe does not verify
            await wait_status(store, tls_uptime, "ok")
    assert expired["error"].startswith("certificate expired")
    assert expired["meta"]["diagnosis"] == "expired"
    assert expired["meta"]["issuer"] == "Upwatch Test CA"
    assert valid["error"] is None and valid["meta"]["issuer"] == "Upwatch Test CA"
