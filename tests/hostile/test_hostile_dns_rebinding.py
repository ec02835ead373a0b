"""DNS rebinding: a name that resolves to a public address while the API validates it and to
a private one by the time it is probed (or a webhook is delivered to it) is refused where it
matters, at connect time, by the probes and by the deliverer, which resolve the name
themselves on every try and connect only to the addresses they checked.

Loopback only: a :class:`tests.support.fake_dns.FakeDns` stands in for the attacker's DNS (a public
address first, 127.0.0.1 from then on); the private-address rule, the probes, the engine, the
store and the deliverer are the real ones, with private targets NOT allowed. The API's
validation looks names up through ``engine.domain.netpolicy.resolve``, which is pointed at the same
fake DNS.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine import USER_AGENT
from engine.db.store import Store
from engine.domain import netpolicy
from engine.probes.http import HttpProber
from engine.probes.tls import CertProber
from engine.runtime.settings import Settings
from tests.support.engine_support import fast_settings, fetch, running_engine, wait_status
from tests.support.fake_dns import FakeDns
from tests.support.instances import WebhookReceiver
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until
from tests.support.webhook_support import running

PUBLIC = "93.184.216.34"  # what the names answer while the API validates them
BLOCKED = "blocked: {} resolves to a non-public address (127.0.0.1)"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """The API's settings (conftest's ``api`` fixture): private targets NOT allowed."""
    return fast_settings(tmp_path, allow_private_targets=False, port=0)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns()

    async def resolve(host: str, port: int, *, timeout: float = 5.0) -> list[str]:
        if netpolicy.literal_ip(host) is not None:
            return [host]
        return await fake.resolve(host, port)

    monkeypatch.setattr(netpolicy, "resolve", resolve)  # what the API validates with
    return fake


async def test_a_rebound_monitor_name_is_refused_at_connect_time(
    client: aiohttp.ClientSession, store: Store, settings: Settings, dns: FakeDns,
) -> None:
    async with HttpTarget() as internal:  # the "internal service" the attacker aims at
        dns.names["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
        url = f"http://rebind.test:{internal.port}/admin"
        async with client.post("/webapi/monitors", json={"url": url, "interval": 30}) as r:
            assert r.status == 201, await r.text()  # validated: it resolved to PUBLIC
            body = await r.json()
        assert dns.answers_for("rebind.test") == [[PUBLIC]]
        uptime_id = body["checks"]["uptime"]["id"]
        cert_id = body["checks"]["certificate_health"]["id"]
        # An http URL's certificate check starts paused; enabled, it reads the host's 443.
        async with client.post(f"/webapi/checks/{cert_id}/enable") as r:
            assert r.status == 200

        # The engine, with private targets not allowed; its probes resolve through the
        # same DNS, which now answers the internal address.
        http = HttpProber(timeout=settings.probe_timeout, user_agent=USER_AGENT,
                          allow_private=False, resolver=dns.resolve)
        cert = CertProber(timeout=settings.probe_timeout, allow_private=False,
                          resolver=dns.resolve)
        async with running_engine(store, settings, http_prober=http, cert_prober=cert):
            # Refused: the failure is confirmed by a second (equally refused) probe, so the
            # check goes down at once (threshold 0) and the downtime webhook is queued.
            down = await wait_status(store, uptime_id, "down")
            cert_down = await wait_status(store, cert_id, "down")
        assert down["error"] == BLOCKED.format("rebind.test")
        assert cert_down["error"] == BLOCKED.format("rebind.test")
        # Looked up again at connect time (every probe, both kinds), never connected.
        later = dns.answers_for("rebind.test")[1:]
        assert len(later) >= 3 and all(a == ["127.0.0.1"] for a in later)
        assert internal.connections == 0 and internal.requests == []
        results = await fetch(store, "SELECT DISTINCT error FROM probe_results "
                                     "WHERE check_id = ANY($1::bigint[])", [uptime_id, cert_id])
        assert {r["error"] for r in results} == {BLOCKED.format("rebind.test")}
        events = await fetch(store, "SELECT event FROM webhook_events ORDER BY id")
        assert sorted(e["event"] for e in events) == ["certificate_invalid", "downtime"]

        # The control: the same name, with private targets allowed, does reach the internal
        # service. So it was the rule at connect time that stopped the probes above.
        allowed = HttpProber(timeout=settings.probe_timeout, user_agent=USER_AGENT,
                             allow_private=True, resolver=dns.resolve)
        o = await allowed.probe(url)
        assert o.status_code == 200 and o.remote_ip == "127.0.0.1"
        assert internal.requests[-1].headers["host"] == f"rebind.test:{internal.port}"


async def test_a_rebound_webhook_name_is_refused_at_every_delivery(
    client: aiohttp.ClientSession, store: Store, settings: Settings, dns: FakeDns,
    account: tuple[Any, str],
) -> None:
    acc, _ = account
    async with WebhookReceiver() as receiver:
        dns.names["hooks.rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
        hook = f"http://hooks.rebind.test:{receiver.port}/hook"
        async with client.put("/webapi/account", json={"webhook_url": hook}) as r:
            assert r.status == 200, await r.text()  # validated: it resolved to PUBLIC
        assert dns.answers_for("hooks.rebind.test") == [[PUBLIC]]
        # An alert to deliver: a monitor that is down (its URL is refused as well).
        dns.names["down.rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
        async with client.post("/webapi/monitors",
                               json={"url": "http://down.rebind.test/"}) as r:
            assert r.status == 201, await r.text()
            uptime_id = (await r.json())["checks"]["uptime"]["id"]
        http = HttpProber(timeout=settings.probe_timeout, user_agent=USER_AGENT,
                          allow_private=False, resolver=dns.resolve)
        async with running_engine(store, settings, http_prober=http):
            await wait_status(store, uptime_id, "down")

        async def refused_twice() -> Any:
            rows = await fetch(store, "SELECT * FROM webhook_events WHERE account_id = $1",
                               acc.id)
            return rows if rows and rows[0]["tries"] >= 2 else None

        async with running(store, settings, resolver=dns.resolve):
            (event,) = await wait_until(refused_twice, timeout=10, what="two refused tries")
        assert event["event"] == "downtime" and event["status"] == "pending"
        assert event["last_status_code"] is None
        assert event["last_error"] == (
            "the webhook host resolves to a non-public address (127.0.0.1); refused"
        )
        # Resolved again for every try (no DNS cache, no kept-alive connection), refused
        # every time, and the receiver never saw a byte.
        tries = dns.answers_for("hooks.rebind.test")[1:]
        assert len(tries) >= 2 and all(a == ["127.0.0.1"] for a in tries)
        assert receiver.hits == []

        # The control: with private targets allowed the same event reaches the receiver
        # (same id, next try), so the rule at delivery time is what refused it above.
        async with running(store, fast_settings(settings.data_dir.parent,
                                                allow_private_targets=True),
                           resolver=dns.resolve):
            await wait_until(lambda: receiver.hits, timeout=10, what="the delivery")
        assert receiver.hits[0].headers["X-Service-Webhook"] == str(event["id"])
        assert int(receiver.hits[0].headers["X-Service-Current-Try"]) > event["tries"]
