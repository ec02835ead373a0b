"""While private targets are not allowed, channels whose sends the connect guard cannot hold
to public addresses are refused with a 422 under ``url`` saying why (syslog on this server,
rsyslog's own lookup), and Nostr's relays are checked like any other host. The real app on
a real socket; the hosts are IP literals, so nothing is looked up."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from engine.runtime.settings import Settings

BASE = "/webapi/notification-channels"
KEY = "4c65568b90edca9f9f06037f5e6661e3944c65568b90edca9f9f06037f5e6661"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", allow_private_targets=False, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0)


@pytest.mark.parametrize(("url", "words"), [
    ("syslog://", "syslog:// writes to the system log of the server Upwatch runs on"),
    ("syslog://local5", "syslog:// writes to the system log"),
    ("rsyslog://203.0.113.9", "rsyslog:// sends to a host whose address is looked up past"),
    (f"nostr://{KEY}?relay=wss://127.0.0.1:7777", "host 127.0.0.1 resolves to a non-public"),
    (f"nostr://{KEY}?relay=10.1.2.3", "host 10.1.2.3 resolves to a non-public"),
])
async def test_a_channel_the_guard_cannot_hold_to_public_addresses_is_a_422(
    client: aiohttp.ClientSession, url: str, words: str
) -> None:
    async with client.post(BASE, json={"name": "x", "url": url}) as r:
        body = await r.json()
        assert r.status == 422, body
    assert list(body["errors"]) == ["url"]
    assert words in body["errors"]["url"][0]
    if "syslog" in url:
        assert "UPWATCH_ALLOW_PRIVATE_TARGETS" in body["errors"]["url"][0]
    async with client.get(BASE) as r:
        assert await r.json() == []
