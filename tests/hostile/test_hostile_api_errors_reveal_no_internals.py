"""What error answers give away to a probing account holder: the private-address refusal
does not say which internal address a name resolves to (else the API is an oracle mapping
internal DNS names to addresses), and no validation message echoes the hostile value."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from engine.monitors import validation
from engine.runtime.errors import BlockedAddress, ValidationFailed
from engine.runtime.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Private targets refused, as in production."""
    return Settings(data_dir=tmp_path / "data", allow_private_targets=False, port=0,
                    base_url="http://127.0.0.1:8080", rate_limit_per_second=0)


async def test_the_refusal_does_not_name_the_internal_address() -> None:
    async def resolve(host: str, port: int) -> object:
        raise BlockedAddress("resolves to a non-public address (10.20.30.40)")

    target = validation.normalise_url("https://db.internal.example/")
    with pytest.raises(ValidationFailed) as info:
        await validation.ensure_public_host(target, resolve)
    message = info.value.errors["url"][0]
    assert "non-public address" in message
    assert "10.20.30.40" not in message


async def test_over_the_api_localhost_is_refused_without_its_address(
    client: aiohttp.ClientSession,
) -> None:
    for url in ("http://localhost:5432/", "http://localhost/"):
        async with client.post("/webapi/monitors", json={"url": url}) as r:
            assert r.status == 422
            text = await r.text()
        assert "non-public address" in text
        assert "127.0.0.1" not in text and "::1" not in text
        async with client.put("/webapi/account", json={"webhook_url": url}) as r:
            assert r.status == 422
            text = await r.text()
        assert "127.0.0.1" not in text and "::1" not in text


async def test_validation_messages_do_not_echo_the_value(
    client: aiohttp.ClientSession,
) -> None:
    marker = "<svg onload=alert(1)>"
    bodies = [
        {"url": marker},
        {"url": "https://x.example/", "alias": marker * 100},
        {"url": "https://x.example/", "interval": marker},
        {"url": "https://x.example/", "notification_threshold": marker},
        {"url": f"ftp://{marker}/"},
    ]
    for body in bodies:
        async with client.post("/webapi/monitors", json=body) as r:
            assert r.status == 422
            assert "svg" not in await r.text()
    async with client.get("/webapi/webhooks", params={"status": marker, "limit": marker}) as r:
        assert r.status == 422
        assert "svg" not in await r.text()
