"""``HttpProber.start``, the engine's way to probe without a task: one call back per probe,
never from inside ``start``; a cancelled probe never calls back and lets its connection go;
the deadline ends a probe by itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from engine import USER_AGENT
from engine.domain.outcomes import HttpOutcome
from engine.probes.http import HttpProber
from tests.support.targets import HttpTarget


@pytest.fixture
async def site() -> AsyncIterator[HttpTarget]:
    async with HttpTarget() as s:
        yield s


class Calls:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.outcomes: list[tuple[str, HttpOutcome]] = []
        self.first = loop.create_future()

    def __call__(self, arg: str, outcome: HttpOutcome) -> None:
        self.outcomes.append((arg, outcome))
        if not self.first.done():
            self.first.set_result(None)


async def test_the_outcome_comes_back_once_with_its_argument(site: HttpTarget) -> None:
    loop = asyncio.get_running_loop()
    prober = HttpProber(timeout=2.0, user_agent=USER_AGENT, allow_private=True)
    calls = Calls(loop)
    prober.start(loop, site.url("/redirect/1"), calls, "check 7")
    async with asyncio.timeout(5):
        await calls.first
    for _ in range(5):
        await asyncio.sleep(0)  # a second call back would come within a few turns
    assert [(arg, o.status_code, o.redirects) for arg, o in calls.outcomes] == [
        ("check 7", 200, 1)
    ]


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("ftp://127.0.0.1/", "unsupported URL: ftp://127.0.0.1/"),
        ("http://10.0.0.1/", "blocked: 10.0.0.1 resolves to a non-public address (10.0.0.1)"),
    ],
)
async def test_a_failure_found_at_start_is_still_called_back_later(url: str, error: str) -> None:
    """Never from inside start(): a caller that starts the next probe from its call back
    would otherwise recurse once per failing probe."""
    loop = asyncio.get_running_loop()
    prober = HttpProber(timeout=2.0, user_agent=USER_AGENT)
    calls = Calls(loop)
    prober.start(loop, url, calls, "x")
    assert calls.outcomes == []
    async with asyncio.timeout(5):
        await calls.first
    assert [(o.status_code, o.error) for _, o in calls.outcomes] == [(None, error)]


async def test_a_cancelled_probe_never_calls_back_and_closes_its_connection(
    site: HttpTarget,
) -> None:
    loop = asyncio.get_running_loop()
    site.mode = "hang"
    prober = HttpProber(timeout=0.5, user_agent=USER_AGENT, allow_private=True)
    calls = Calls(loop)
    handle = prober.start(loop, site.url(), calls, "x")
    await site.wait_for_connections(1)
    handle.cancel()
    assert prober._reactor is not None and len(prober._reactor) == 0  # socket closed
    await asyncio.sleep(0.8)  # past the timeout: the deadline must not call back either
    assert calls.outcomes == []


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_the_deadline_ends_a_probe_by_itself(site: HttpTarget) -> None:
    loop = asyncio.get_running_loop()
    site.mode = "hang"
    prober = HttpProber(timeout=0.3, user_agent=USER_AGENT, allow_private=True)
    calls = Calls(loop)
    t0 = time.monotonic()
    prober.start(loop, site.url(), calls, "x")
    async with asyncio.timeout(5):
        await calls.first
    took = time.monotonic() - t0
    assert [(o.status_code, o.error) for _, o in calls.outcomes] == [
        (None, "timed out after 0.3 s")
    ]
    assert 0.29 <= took < 0.3 + 0.15
    assert prober._reactor is not None and len(prober._reactor) == 0


async def test_a_failing_call_back_is_logged_and_other_probes_go_on(
    site: HttpTarget, caplog: pytest.LogCaptureFixture
) -> None:
    loop = asyncio.get_running_loop()
    prober = HttpProber(timeout=2.0, user_agent=USER_AGENT, allow_private=True)
    calls = Calls(loop)

    def explode(arg: str, outcome: HttpOutcome) -> None:
        raise RuntimeError("a bug in the caller")

    prober.start(loop, site.url("/a"), explode, "bad")
    for i in range(5):
        prober.start(loop, site.url(f"/b{i}"), calls, f"good {i}")
    async with asyncio.timeout(5):
        while len(calls.outcomes) < 5:
            await asyncio.sleep(0.01)
    assert sorted(arg for arg, _ in calls.outcomes) == [f"good {i}" for i in range(5)]
    assert all(o.status_code == 200 for _, o in calls.outcomes)
    assert "a bug in the caller" in caplog.text


@pytest.mark.serial  # measures timing: run alone (scripts/test)
async def test_closing_the_prober_ends_running_probes_at_once(site: HttpTarget) -> None:
    """aclose() aborts what is in flight: each probe ends with an error now, not at its
    deadline, and a probe with addresses left does not reconnect through the closed reactor."""
    site.mode = "hang"
    prober = HttpProber(timeout=5.0, user_agent=USER_AGENT, allow_private=True)
    running = asyncio.ensure_future(prober.probe(site.url()))
    await site.wait_for_connections(1)
    t0 = time.monotonic()
    await prober.aclose()
    async with asyncio.timeout(1):
        o = await running
    assert time.monotonic() - t0 < 0.5
    assert o.status_code is None and o.error == "connection reset"


async def test_every_address_failing_at_once_is_still_called_back_later(
    site: HttpTarget,
) -> None:
    """A source address this machine does not have fails each connect inside start(): the
    outcome still comes on a later loop turn, or an engine starting its next probe from the
    call back would recurse once per check."""
    loop = asyncio.get_running_loop()
    prober = HttpProber(timeout=2.0, user_agent=USER_AGENT, allow_private=True,
                        source_address="192.0.2.1")  # TEST-NET-1: never ours
    calls = Calls(loop)
    prober.start(loop, site.url(), calls, "x")
    assert calls.outcomes == []
    async with asyncio.timeout(5):
        await calls.first
    assert [(o.status_code, o.error) for _, o in calls.outcomes] == [
        (None, "source address not available")
    ]
