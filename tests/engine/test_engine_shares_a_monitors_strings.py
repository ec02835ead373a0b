"""What the engine holds per idle monitor stays small (at most 1 KiB with its
resolver entry): a monitor's two checks hold one URL string and one host string, also
after one of them is disabled and enabled again, and the resolver's entry for the name is
keyed by that same host string, not a copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.db.store import Store
from engine.probes.resolver import ProbeResolver
from tests.support.engine_support import (
    add_monitor,
    disable_check,
    enable_check,
    fast_settings,
    running_engine,
)
from tests.support.wait import wait_until


async def test_a_monitors_two_checks_share_its_url_and_host(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    # Built the way the store's query builds them: URL and host strings of their own.
    url = "".join(["http://", "localhost", ":9/shared"])
    _, uptime_id, cert_id = await add_monitor(store, acc.id, url, certificate=True)
    _, other_id, _ = await add_monitor(store, acc.id, "http://localhost:9/other")
    async with running_engine(store, fast_settings(tmp_path)) as engine:
        up, cert = engine.check(uptime_id), engine.check(cert_id)
        assert up is not None and cert is not None
        assert up.url == url and up.url is cert.url and up.host is cert.host
        other = engine.check(other_id)
        assert other is not None and other.host is up.host  # the same name, interned

        await disable_check(store, cert_id)
        await wait_until(lambda: engine.check(cert_id) is None, what="cert dropped")
        await enable_check(store, cert_id)
        again = await wait_until(lambda: engine.check(cert_id), what="cert back")
        assert again is not cert and again.url is up.url and again.host is up.host

        # The probes' resolver keys its entry by the check's own host string.
        resolver = getattr(engine.kinds.reprober, "resolver", None)
        assert isinstance(resolver, ProbeResolver)
        await wait_until(lambda: len(resolver) > 0, what="localhost looked up")
        (key,) = resolver._cache
        assert key is up.host
