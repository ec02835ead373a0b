"""The per-account token bucket: pure logic with a given clock, and the 429 it causes."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web.ratelimit import RateLimiter, retry_after_header


def test_a_full_bucket_allows_a_burst_then_refuses() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    assert [limiter.take("a", 100.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.take("a", 100.0) == pytest.approx(0.5)


def test_tokens_refill_at_the_rate_up_to_the_burst() -> None:
    limiter = RateLimiter(rate=2.0, burst=3)
    for _ in range(3):
        limiter.take("a", 0.0)
    assert limiter.take("a", 0.25) == pytest.approx(0.25)  # half a token so far
    assert limiter.take("a", 0.5) == 0.0
    assert limiter.take("a", 0.5) > 0
    # A long pause refills to the burst, not beyond.
    assert [limiter.take("a", 1000.0) for _ in range(4)][-1] > 0


def test_a_refused_request_takes_nothing() -> None:
    limiter = RateLimiter(rate=1.0, burst=1)
    assert limiter.take("a", 0.0) == 0.0
    for _ in range(10):
        assert limiter.take("a", 0.5) == pytest.approx(0.5)
    assert limiter.take("a", 1.0) == 0.0


def test_accounts_have_their_own_buckets() -> None:
    limiter = RateLimiter(rate=1.0, burst=1)
    assert limiter.take(1, 0.0) == 0.0
    assert limiter.take(1, 0.0) > 0
    assert limiter.take(2, 0.0) == 0.0


def test_a_clock_stepping_back_refills_nothing() -> None:
    limiter = RateLimiter(rate=1.0, burst=1)
    limiter.take("a", 10.0)
    assert limiter.take("a", 5.0) == pytest.approx(1.0)


def test_rate_zero_disables_the_limit() -> None:
    limiter = RateLimiter(rate=0, burst=1)
    assert not limiter.enabled
    assert all(limiter.take("a", 0.0) == 0.0 for _ in range(1000))


def test_idle_buckets_are_pruned() -> None:
    limiter = RateLimiter(rate=10.0, burst=10)
    for key in range(2000):
        limiter.take(key, float(key))
    assert len(limiter._buckets) < 2000


@pytest.mark.parametrize("wait,header", [(0.01, "1"), (1.0, "1"), (1.2, "2"), (59.5, "60")])
def test_retry_after_is_whole_seconds_rounded_up(wait: float, header: str) -> None:
    assert retry_after_header(wait) == header


def test_invalid_parameters_are_refused() -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate=-1, burst=1)
    with pytest.raises(ValueError):
        RateLimiter(rate=1, burst=0)


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A limit slow enough that the test cannot refill it: 2 requests, then 1 per 100 s."""
    return Settings(data_dir=tmp_path / "data", allow_private_targets=True, port=0,
                    base_url="http://127.0.0.1:8080",
                    rate_limit_per_second=0.01, rate_limit_burst=2)


async def test_over_the_limit_the_api_answers_429_with_retry_after(
    client: aiohttp.ClientSession, api: str, store: Store,
) -> None:
    for _ in range(2):
        async with client.get("/webapi/monitors") as r:
            assert r.status == 200
    async with client.get("/webapi/monitors") as r:
        assert r.status == 429
        assert await r.json() == {"message": "Too many requests."}
        assert r.headers["Content-Type"] == "application/json"
        assert 1 <= int(r.headers["Retry-After"]) <= 100
    # Another account has its own bucket; public endpoints are not limited.
    _, other = await store.create_account("other")
    async with aiohttp.ClientSession(base_url=api) as s:
        async with s.get("/webapi/account", headers={"Authorization": f"Bearer {other}"}) as r:
            assert r.status == 200
        async with s.get("/healthz") as r:
            assert r.status == 200


async def test_unauthenticated_requests_do_not_spend_an_accounts_tokens(
    client: aiohttp.ClientSession, api: str,
) -> None:
    async with aiohttp.ClientSession(base_url=api) as s:
        for _ in range(5):
            async with s.get("/webapi/monitors", headers={"Authorization": "Bearer nope"}) as r:
                assert r.status == 401
    async with client.get("/webapi/monitors") as r:
        assert r.status == 200
