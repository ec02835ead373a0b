"""1,000 hostile targets probed at once do not make healthy checks late.

One engine (real scheduler, probes and store) probes ~100 healthy checks; the test measures
how late each of their probes starts (start - due) for a while, then adds 1,000 hostile
targets (slowloris, endless bodies, a megabyte of headers, redirect loops, TLS garbage,
resets in the headers, names that do not resolve) and measures again, side by side in the
same test: the healthy checks' p99 lateness stays within 2x of the run without the hostile
ones (with an absolute floor, so scheduler noise of a few ms on a loaded 2-core machine is
not a failure), and no healthy check is ever marked failing.

Time runs 10x fast (a 30 s interval is 3 s) with a 1 s probe timeout: the production ratio
of 10 s timeout to 30 s interval; ~330 hostile probes a second. (Twice as fast, the engine,
the hostile servers and PostgreSQL together need more CPU than a 2-core machine has, and the
test would measure the machine rather than the engine's isolation.)

The hostile servers run in a child process (in the world they are somebody else's machines),
spread over 40 loopback hosts so the per-host limit does not hide them: they really are in
flight at once. Healthy and hostile targets are on different hosts.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from engine import USER_AGENT
from engine.db.store import Store
from engine.domain.evaluate import PENDING
from engine.domain.outcomes import HttpOutcome
from engine.probes.http import HttpProber
from engine.runtime.metrics import Metrics
from engine.scheduler.engine import Engine
from tests.support.engine_support import fast_settings, fetch, running_engine
from tests.support.fake_dns import FakeDns
from tests.support.hostile_support import add_monitors, hostile_fleet, percentile
from tests.support.targets import HttpTarget
from tests.support.wait import wait_until

SCALE = 0.1  # 30 s interval -> 3 s
TIMEOUT = 1.0  # 10 s in production, scaled like the interval
HOSTILE = 1000
HEALTHY = 100
HOSTILE_HOSTS = [f"127.1.0.{i}" for i in range(1, 41)]
HEALTHY_HOSTS = [f"127.0.0.{i}" for i in range(2, 6)]
WINDOW = 10.0  # seconds of measurement per phase: 3+ intervals, ~330 healthy probes
FLOOR = 0.050  # lateness below 50 ms is scheduler noise, never a failure

# (path on the http target, or a special kind) -> the error the check must end with
KINDS = {
    "/slowloris": "timed out after 1 s",
    "/endless": None,  # 1 MiB read, then cut: ok
    "/huge-headers": "headers too large",
    "/loop": "too many redirects",
    "/reset-headers": "connection reset",
    "tls-garbage": "TLS handshake failed: wrong version number",
    "no-dns": "DNS lookup failed: {host}",
}


class LatenessRecorder:
    """The real prober, watched: how late each probe of a healthy check starts."""

    def __init__(self, inner: HttpProber, healthy: dict[str, int]) -> None:
        self.inner = inner
        self.healthy = healthy  # url -> check id
        self.engine: Engine | None = None
        self.samples: list[float] | None = None  # None: not recording

    async def probe(self, url: str) -> HttpOutcome:
        samples, engine = self.samples, self.engine
        if samples is not None and engine is not None:
            check_id = self.healthy.get(url)
            if check_id is not None:
                c = engine.check(check_id)
                if c is not None:
                    samples.append(max(0.0, time.monotonic() - c.due))
        return await self.inner.probe(url)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def measure(self, seconds: float) -> tuple[list[float], int]:
        """Lateness samples of the healthy probes started in the next ``seconds``, and the
        most probes in flight at once meanwhile."""
        assert self.engine is not None
        self.samples = []
        peak = 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            peak = max(peak, self.engine.in_flight)
            await asyncio.sleep(0.05)
        samples, self.samples = self.samples, None
        return samples, peak


def hostile_urls(ports: dict[str, dict[str, int]]) -> list[tuple[str, str | None]]:
    """HOSTILE (url, expected error) pairs, the kinds dealt out round-robin over the hosts."""
    out: list[tuple[str, str | None]] = []
    kinds = list(KINDS.items())
    for i in range(HOSTILE):
        host = HOSTILE_HOSTS[i % len(HOSTILE_HOSTS)]
        kind, error = kinds[i % len(kinds)]
        if kind == "tls-garbage":
            url = f"https://{host}:{ports[host]['garbage']}/t{i}"
        elif kind == "no-dns":
            name = f"gone-{i}.invalid"
            url, error = f"http://{name}/", (error or "").format(host=name)
        else:
            url = f"http://{host}:{ports[host]['http']}{kind}?n={i}"
            if kind == "/slowloris":
                url += "&interval=1"
        out.append((url, error))
    return out


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_healthy_p99_lateness_stays_within_2x_with_1000_hostile_targets(
    store: Store, account: tuple[Any, str], tmp_path: Path
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, time_scale=SCALE, probe_timeout=TIMEOUT,
                             result_flush_interval=0.2)
    healthy_sites = [await HttpTarget(host=h).start() for h in HEALTHY_HOSTS]
    try:
        async with hostile_fleet(HOSTILE_HOSTS) as fleet:
            healthy_urls = [healthy_sites[i % len(healthy_sites)].url(f"/h{i}")
                            for i in range(HEALTHY)]
            async with store.pool.acquire() as conn:
                healthy_ids = await add_monitors(conn, acc.id, healthy_urls)
            recorder = LatenessRecorder(
                HttpProber(timeout=TIMEOUT, user_agent=USER_AGENT, allow_private=True,
                           resolver=FakeDns().resolve),
                dict(zip(healthy_urls, healthy_ids, strict=True)),
            )
            metrics = Metrics()
            async with running_engine(store, settings, http_prober=recorder,
                                      metrics=metrics) as engine:
                recorder.engine = engine
                await wait_until(lambda: all(
                    _status(engine, c) == "ok" for c in healthy_ids),
                    timeout=15, what="the healthy checks ok")

                baseline, _ = await recorder.measure(WINDOW)

                hostile = hostile_urls(fleet.ports)
                async with store.pool.acquire() as conn:
                    hostile_ids = await add_monitors(
                        conn, acc.id, [u for u, _ in hostile], notify=True)
                # Measured once every hostile check is being probed (each has had its first
                # probe; the slow ones are in flight for their whole timeout, every interval).
                await wait_until(lambda: all(
                    _status(engine, c) not in (None, PENDING) for c in hostile_ids),
                    timeout=20, what="every hostile check probed")
                loaded, in_flight_peak = await recorder.measure(WINDOW)
                statuses = {c: _status(engine, c) for c in hostile_ids}
                healthy_now = {c: _status(engine, c) for c in healthy_ids}

            base_p99, load_p99 = percentile(baseline, 99), percentile(loaded, 99)
            base_p50, load_p50 = percentile(baseline, 50), percentile(loaded, 50)
            print(
                f"\nhealthy lateness, {len(baseline)} probes alone / {len(loaded)} probes with "
                f"{HOSTILE} hostile targets: p50 {base_p50 * 1000:.1f} / "
                f"{load_p50 * 1000:.1f} ms, p99 {base_p99 * 1000:.1f} / "
                f"{load_p99 * 1000:.1f} ms (ratio {load_p99 / max(base_p99, 1e-6):.2f}); "
                f"{in_flight_peak} probes in flight at the peak"
            )
            # Both phases saw (nearly) every scheduled healthy probe: none were skipped.
            expected = HEALTHY * WINDOW / (30 * SCALE)
            assert len(baseline) >= 0.8 * expected and len(loaded) >= 0.8 * expected
            assert load_p99 <= max(2 * base_p99, FLOOR), (base_p99, load_p99)
            # The hostile targets were really in flight at once (the ~143 slowloris alone hold
            # a slot for a third of every interval: ~48 at a time, more with the others), and
            # each got its verdict.
            assert in_flight_peak >= 30
            wrong = {}
            for (url, error), check_id in zip(hostile, hostile_ids, strict=True):
                want = "ok" if error is None else "down"
                if statuses[check_id] != want:
                    wrong[url] = statuses[check_id]
            assert not wrong, list(wrong.items())[:5]
            # No healthy check was ever failing, nor any healthy probe a failure.
            assert set(healthy_now.values()) == {"ok"}
            bad = await fetch(
                store,
                "SELECT check_id, at, outcome, total_ms, error FROM probe_results"
                " WHERE check_id = ANY($1::bigint[]) AND outcome <> 0",
                healthy_ids,
            )
            assert not bad, [dict(r) for r in bad]
            errors = await fetch(
                store,
                "SELECT error, count(*) AS n FROM checks WHERE id = ANY($1::bigint[])"
                " GROUP BY error",
                hostile_ids,
            )
            want_errors: dict[str | None, int] = {}
            for _, error in hostile:
                key = error if error is None or not error.startswith("DNS") else "DNS"
                want_errors[key] = want_errors.get(key, 0) + 1
            got_errors: dict[str | None, int] = {}
            for r in errors:
                e = r["error"]
                key = e if e is None or not e.startswith("DNS") else "DNS"
                got_errors[key] = got_errors.get(key, 0) + r["n"]
            assert got_errors == want_errors
    finally:
        for s in healthy_sites:
            await s.stop()


def _status(engine: Engine, check_id: int) -> str | None:
    c = engine.check(check_id)
    return c.state.status if c is not None else None
