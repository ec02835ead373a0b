"""Every secret Apprise's schemas mark private, for every plugin Apprise ships, stays out of
the API's answers and out of an error text once scrubbed: one URL per template of each
plugin, its private tokens filled with recognisable values (tests/support/apprise_urls.py),
stored through the real API on a real socket and read back."""

from __future__ import annotations

from typing import Any

import aiohttp
import apprise
import pytest

from engine.delivery.notify import urls
from tests.support.apprise_urls import PluginUrl, canonical, every_plugin_url

BASE = "/webapi/notification-channels"
NOSTR_HEX = "4c65568b90edca9f9f06037f5e6661e3944c65568b90edca9f9f06037f5e6661"
AWS_SECRET = "wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY"


@pytest.fixture(scope="module")
def plugin_urls() -> list[PluginUrl]:
    rows = every_plugin_url()
    nsec = canonical(f"nostr://{NOSTR_HEX}")
    rows += [
        PluginUrl("nostr", f"nostr://{NOSTR_HEX}", (NOSTR_HEX,)),
        PluginUrl("nostr", nsec, (nsec.split("://", 1)[1].strip("/"),)),
        PluginUrl("ses", "ses://alerts@example.com/AKIAIOSFODNN7EXAMPLE/"
                         f"{AWS_SECRET}/us-east-1/oncall@example.com",
                  ("AKIAIOSFODNN7EXAMPLE", AWS_SECRET)),
        PluginUrl("sns", f"sns://AKIAIOSFODNN7EXAMPLE/{AWS_SECRET}/us-east-1/+15551234567",
                  ("AKIAIOSFODNN7EXAMPLE", AWS_SECRET)),
    ]
    return rows


def test_the_urls_cover_nearly_every_plugin(plugin_urls: list[PluginUrl]) -> None:
    schemas = {r.schema for r in plugin_urls}
    manager = apprise.manager_plugins.NotificationManager()
    enabled = {s for s in manager.schemas() if manager[s].enabled}
    # The rest need values no schema describes (a valid phone number, a key pair).
    assert len(schemas) >= 0.85 * len(enabled), sorted(enabled - schemas)
    assert {"ses", "sns", "nostr", "slack", "discord", "mailto", "ntfy", "json"} <= schemas


async def test_no_answer_of_the_api_shows_a_private_value(
    client: aiohttp.ClientSession, plugin_urls: list[PluginUrl]
) -> None:
    stored: list[tuple[PluginUrl, dict[str, Any]]] = []
    for row in plugin_urls:
        async with client.post(BASE, json={"name": row.schema, "url": row.url}) as resp:
            text = await resp.text()
            assert resp.status in (201, 422), text
            for secret in row.secrets:
                assert secret not in text, (row.url, text)
            if resp.status == 201:
                stored.append((row, await resp.json()))
    assert len(stored) >= 0.95 * len(plugin_urls)
    async with client.get(BASE) as resp:
        listed = await resp.text()
    for row, channel in stored:
        for secret in row.secrets:
            assert secret not in listed, row.url
        assert urls.MASK in channel["url"]
        # The URL shown, sent back, keeps the stored one.
        async with client.put(f"{BASE}/{channel['id']}", json={"url": channel["url"]}) as r:
            assert r.status == 200, (row.url, await r.text())


def test_an_error_text_quoting_the_url_is_scrubbed_of_every_private_value(
    plugin_urls: list[PluginUrl],
) -> None:
    for row in plugin_urls:
        plugin = apprise.Apprise.instantiate(row.url, suppress_exceptions=False)
        # What a service's error may quote: the URL as given and as Apprise writes it back
        # (its values quoted its own way).
        text = f"failed to reach {row.url}; {plugin.url(privacy=False)}"
        scrubbed = urls.scrub(text, urls.secrets_of(row.url))
        for secret in row.secrets:
            assert secret not in scrubbed, (row.url, scrubbed)


def test_a_secret_that_spells_part_of_the_scheme_leaves_the_scheme_readable() -> None:
    url = "mailto://user:mail@127.0.0.1:25?from=a@example.com&to=b@example.com"
    assert urls.masked(url) == (
        "mailto://user:****@127.0.0.1:25?from=a@example.com&to=b@example.com")
