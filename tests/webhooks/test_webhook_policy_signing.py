"""Pure parts of webhook delivery: the retry policy and the signature."""

from __future__ import annotations

import hashlib
import hmac
import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.delivery import policy
from engine.delivery.webhooks import signing

T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
scales = st.floats(min_value=1e-6, max_value=1000, allow_nan=False, allow_infinity=False)
jitters = st.floats(min_value=0.0, max_value=1.0)


# --- policy ----------------------------------------------------------------------------


def test_nominal_delays_double_from_10s_and_cap_at_an_hour() -> None:
    assert [policy.nominal_delay(n) for n in range(1, 11)] == [
        10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600,
    ]
    assert policy.nominal_delay(10_000) == 3600
    with pytest.raises(ValueError):
        policy.nominal_delay(0)


@given(tries=st.integers(1, 10_000), scale=scales, jitter=jitters)
def test_jittered_delay_stays_in_band_times_scale(tries: int, scale: float, jitter: float) -> None:
    d = policy.nominal_delay(tries)
    got = policy.retry_delay(tries, time_scale=scale, jitter=jitter)
    assert 0.8 * d * scale * (1 - 1e-12) <= got <= d * scale * (1 + 1e-12)
    # The cap is a hard cap, jitter or not.
    assert got <= policy.MAX_DELAY * scale * (1 + 1e-12)


@given(tries=st.integers(1, 60), a=jitters, b=jitters)
def test_waits_strictly_grow_until_the_cap(tries: int, a: float, b: float) -> None:
    if policy.nominal_delay(tries) < policy.MAX_DELAY:
        assert policy.retry_delay(tries + 1, jitter=a) > policy.retry_delay(tries, jitter=b)


def test_random_jitter_spreads_retries() -> None:
    values = {policy.retry_delay(3) for _ in range(50)}
    assert len(values) > 40
    assert all(32 <= v <= 40 for v in values)


@given(
    age=st.floats(min_value=0, max_value=200_000),
    tries=st.integers(1, 100),
    scale=scales,
    jitter=jitters,
)
def test_next_try_is_after_now_and_never_past_the_deadline(
    age: float, tries: int, scale: float, jitter: float
) -> None:
    now = T0 + timedelta(seconds=age * scale)
    got = policy.next_try_at(created_at=T0, now=now, tries=tries, time_scale=scale, jitter=jitter)
    end = policy.deadline(T0, scale)
    if now >= end:
        assert got is None
        assert policy.is_expired(T0, now, scale)
    else:
        assert got is not None
        assert now < got <= end


def test_a_receiver_that_never_answers_200_is_tried_for_24h_then_given_up() -> None:
    now, tries, times = T0, 1, [T0]
    while True:
        nxt = policy.next_try_at(created_at=T0, now=now, tries=tries, jitter=1.0)
        if nxt is None:
            break
        now, tries = nxt, tries + 1
        times.append(now)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert gaps[:4] == [10, 20, 40, 80]
    assert max(gaps) == 3600
    # The final try happens at the deadline, 24 h after the event.
    assert times[-1] == T0 + timedelta(hours=24)
    assert 25 < len(times) < 40


def test_time_scale_shrinks_every_duration() -> None:
    assert policy.retry_delay(1, time_scale=0.001, jitter=1.0) == pytest.approx(0.01)
    assert policy.max_age(0.001) == timedelta(seconds=86.4)
    with pytest.raises(ValueError):
        policy.retry_delay(1, time_scale=0)


# --- signing ---------------------------------------------------------------------------


def test_signature_is_lower_hex_hmac_sha1_of_the_exact_bytes() -> None:
    body = b"The quick brown fox jumps over the lazy dog"
    assert signing.sign(body, "key") == "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9"
    token = "uw_secret-token"
    raw = b'{"check":{"name":"uptime"},"monitor":{"id":1}}'
    sig = signing.sign(raw, token)
    assert sig == hmac.new(token.encode(), raw, hashlib.sha1).hexdigest()
    assert len(sig) == signing.SIGNATURE_LENGTH and sig == sig.lower()


@given(body=st.binary(max_size=512), token=st.text(min_size=1, max_size=64))
def test_verify_accepts_its_own_signature_only(body: bytes, token: str) -> None:
    sig = signing.sign(body, token)
    assert signing.verify(body, token, sig)
    assert signing.verify(body, token, sig.upper())
    assert signing.verify(body, token, sig.encode())
    assert not signing.verify(body + b" ", token, sig)
    assert not signing.verify(body, token + "x", sig)


@pytest.mark.parametrize("bad", [None, "", "abc", "0" * 40, "é" * 40, "z" * 40, b"\xff" * 40])
def test_verify_rejects_malformed_signatures_without_raising(bad: str | bytes | None) -> None:
    assert signing.verify(b"{}", "token", bad) is False
