"""Concurrency limits: never more than max_in_flight probes, never more than per_host_limit
per host, a busy host does not hold up others, a check is never probed twice at once, and
lateness is measured."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from engine.db.store import Store
from engine.domain.outcomes import HttpOutcome
from engine.probes.http import HttpProber
from engine.runtime.metrics import Metrics
from tests.support.engine_support import add_monitor, fast_settings, running_engine
from tests.support.metrics import sample_value
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until


class CountingProber:
    """The real prober, watched: concurrency per host, per URL and overall."""

    def __init__(self, inner: HttpProber) -> None:
        self.inner = inner
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.done: Counter[str] = Counter()

    def _enter(self, key: str) -> None:
        self.now[key] += 1
        self.peak[key] = max(self.peak[key], self.now[key])

    async def probe(self, url: str) -> HttpOutcome:
        host = urlsplit(url).hostname or ""
        keys = ("*", "host:" + host, "url:" + url)
        for k in keys:
            self._enter(k)
        try:
            return await self.inner.probe(url)
        finally:
            for k in keys:
                self.now[k] -= 1
                self.done[k] += 1

    def start(
        self,
        loop: asyncio.AbstractEventLoop,
        url: str,
        done: Callable[[Any, HttpOutcome], None],
        arg: Any,
    ) -> Any:
        """The engine's path for uptime probes (no task), counted the same way."""
        host = urlsplit(url).hostname or ""
        keys = ("*", "host:" + host, "url:" + url)
        for k in keys:
            self._enter(k)

        def finished(a: Any, outcome: HttpOutcome) -> None:
            for k in keys:
                self.now[k] -= 1
                self.done[k] += 1
            done(a, outcome)

        return self.inner.start(loop, url, finished, arg)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_global_and_per_host_limits_hold(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, max_in_flight=3, per_host_limit=2)
    prober = CountingProber(HttpProber(timeout=2.0, user_agent="t", allow_private=True))
    async with HttpTarget() as slow, HttpTarget(host="127.0.0.2") as fast:
        slow.delay = 0.25  # longer than the 0.3 s interval allows for 8 checks at 2 at a time
        for i in range(8):
            await add_monitor(store, acc.id, slow.url(f"/s{i}"))
        for i in range(3):
            await add_monitor(store, acc.id, fast.url(f"/f{i}"))
        metrics = Metrics()
        async with running_engine(store, settings, http_prober=prober, metrics=metrics):
            async def progressed() -> bool:
                return prober.done["host:127.0.0.2"] >= 9 and prober.done["host:127.0.0.1"] >= 8

            await wait_until(progressed, timeout=15, what="probes of both hosts")
        assert prober.peak["*"] <= 3
        assert prober.peak["host:127.0.0.1"] <= 2
        assert prober.peak["host:127.0.0.2"] <= 2
        # No check was ever probed twice at once, though the slow ones overran the interval.
        assert max(v for k, v in prober.peak.items() if k.startswith("url:")) == 1
        count = sample_value(metrics, "upwatch_scheduler_lateness_seconds_count")
        assert count is not None and count >= 17


async def test_a_check_slower_than_its_interval_is_not_started_twice(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path)
    prober = CountingProber(HttpProber(timeout=2.0, user_agent="t", allow_private=True))
    async with HttpTarget() as site:
        site.delay = 0.7  # interval is 0.3 s
        await add_monitor(store, acc.id, site.url("/"))
        async with running_engine(store, settings, http_prober=prober):
            await wait_until(lambda: prober.done["*"] >= 3, what="three probes")
        assert prober.peak[f"url:{site.url('/')}"] == 1
