"""With private targets not allowed, monitor and webhook URLs must resolve to public
addresses only; a name that does not resolve is refused too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store
from engine.domain import netpolicy
from engine.runtime.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allow_private_targets=False, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0)


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Names the resolver knows; every other name does not resolve."""
    table: dict[str, list[str]] = {}
    real = netpolicy.resolve

    async def resolve(host: str, port: int, *, timeout: float = 5.0) -> list[str]:
        if netpolicy.literal_ip(host) is not None:
            return await real(host, port, timeout=timeout)
        if host not in table:
            raise OSError(f"{host}: Name or service not known")
        return table[host]

    monkeypatch.setattr(netpolicy, "resolve", resolve)
    return table


async def monitors_count(store: Store) -> int:
    async with store.pool.acquire() as conn:
        return int(await conn.fetchval("SELECT count(*) FROM monitors"))


async def test_monitor_urls_must_reach_public_addresses(
    client: aiohttp.ClientSession, store: Store, fake_dns: dict[str, list[str]],
) -> None:
    fake_dns.update({
        "intranet.example": ["10.0.0.5"],
        "mixed.example": ["93.184.216.34", "192.168.1.1"],
        "public.example": ["93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"],
    })
    refused = [
        "http://127.0.0.1/", "http://10.1.2.3:8080/", "http://[::1]/", "http://169.254.169.254/",
        "http://0.0.0.0/", "http://100.64.0.1/", "http://[fd00::1]/", "http://[::ffff:10.0.0.1]/",
        "https://intranet.example/", "https://mixed.example/",
    ]
    for url in refused:
        async with client.post("/webapi/monitors", json={"url": url}) as r:
            assert r.status == 422, url
            body = await r.json()
        assert list(body["errors"]) == ["url"]
        assert "non-public address" in body["errors"]["url"][0]
    async with client.post("/webapi/monitors", json={"url": "https://nowhere.invalid/"}) as r:
        assert r.status == 422
        assert (await r.json())["errors"] == {"url": ["The url host does not resolve."]}
    assert await monitors_count(store) == 0

    for url in ("https://public.example/", "http://93.184.216.34/"):
        async with client.post("/webapi/monitors", json={"url": url}) as r:
            assert r.status == 201, url
            created = await r.json()
    async with client.put(f"/webapi/monitors/{created['id']}",
                          json={"url": "https://intranet.example/"}) as r:
        assert r.status == 422
    async with client.get(f"/webapi/monitors/{created['id']}") as r:
        assert (await r.json())["url"] == "http://93.184.216.34/"


async def test_a_missing_monitor_is_404_before_any_dns_work(
    client: aiohttp.ClientSession, fake_dns: dict[str, list[str]],
) -> None:
    async with client.put("/webapi/monitors/4242", json={"url": "https://nowhere.invalid/"}) as r:
        assert r.status == 404


async def test_webhook_urls_must_reach_public_addresses(
    client: aiohttp.ClientSession, fake_dns: dict[str, list[str]], account: tuple[Any, str],
    store: Store,
) -> None:
    fake_dns.update({"hooks.example": ["93.184.216.34"], "internal.example": ["10.9.9.9"]})
    for url, expected in [("http://127.0.0.1:9000/hook", "non-public address"),
                          ("https://internal.example/", "non-public address"),
                          ("https://unknown.example/", "does not resolve")]:
        async with client.put("/webapi/account", json={"webhook_url": url}) as r:
            assert r.status == 422
            body = await r.json()
        assert list(body["errors"]) == ["webhook_url"]
        assert expected in body["errors"]["webhook_url"][0]
    async with client.put("/webapi/account", json={"webhook_url": "https://hooks.example/"}) as r:
        assert r.status == 200
        assert (await r.json())["webhook_url"] == "https://hooks.example/"


async def test_tcp_and_mail_monitors_follow_the_same_rule(
    client: aiohttp.ClientSession, store: Store, fake_dns: dict[str, list[str]],
) -> None:
    fake_dns.update({"db.intranet.example": ["10.0.0.7"],
                     "mx.mixed.example": ["93.184.216.34", "192.168.1.25"],
                     "mx.public.example": ["93.184.216.34"]})
    for url in ("tcp://127.0.0.1:5432", "tls://[::1]:853", "tcp://db.intranet.example:6379",
                "smtp://mx.mixed.example", "imap://10.0.0.1"):
        async with client.post("/webapi/monitors", json={"url": url}) as r:
            assert r.status == 422, url
            body = await r.json()
        assert list(body["errors"]) == ["url"], url
        assert "non-public address" in body["errors"]["url"][0], url
    assert await monitors_count(store) == 0
    async with client.post("/webapi/monitors", json={"url": "smtp://mx.public.example:587"}) as r:
        assert r.status == 201, await r.text()
