"""Peer requests: signed with HMAC-SHA256 over method, path, timestamp and body; stale,
forged, unsigned and replayed requests are refused; answers are signed too."""

import pytest

from engine.cluster.peerauth import (
    H_NONCE,
    H_SIG,
    H_TS,
    ReplayGuard,
    sign_request,
    sign_response,
    verify_response,
)
from engine.runtime.errors import PeerAuthError

SECRET = b"s3cret"
BODY = b'{"check_id": 7}'


def test_a_signed_request_passes_once_and_its_replay_is_refused() -> None:
    guard = ReplayGuard(SECRET)
    headers = sign_request(SECRET, "POST", "/internal/v1/confirm", BODY, now=1000.0)
    assert guard.verify("POST", "/internal/v1/confirm", BODY, headers, now=1001.0)
    with pytest.raises(PeerAuthError, match="replayed"):
        guard.verify("POST", "/internal/v1/confirm", BODY, headers, now=1002.0)


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (lambda h, b: ({}, b), "unsigned"),
        (lambda h, b: ({**h, H_SIG: "0" * 64}, b), "bad signature"),
        (lambda h, b: (h, b + b" "), "bad signature"),
        (lambda h, b: ({**h, H_TS: str(int(h[H_TS]) + 1)}, b), "bad signature"),
        (lambda h, b: ({**h, H_NONCE: "x"}, b), "malformed"),
    ],
)
def test_forged_or_unsigned_requests_are_refused(mutate, reason) -> None:  # type: ignore[no-untyped-def]
    guard = ReplayGuard(SECRET)
    headers = sign_request(SECRET, "POST", "/internal/v1/confirm", BODY, now=1000.0)
    h, b = mutate(headers, BODY)
    with pytest.raises(PeerAuthError, match=reason):
        guard.verify("POST", "/internal/v1/confirm", b, h, now=1000.0)


def test_a_request_signed_with_another_secret_or_path_is_refused() -> None:
    guard = ReplayGuard(SECRET)
    other = sign_request(b"other", "POST", "/internal/v1/confirm", BODY, now=1000.0)
    with pytest.raises(PeerAuthError):
        guard.verify("POST", "/internal/v1/confirm", BODY, other, now=1000.0)
    wrong_path = sign_request(SECRET, "POST", "/internal/v1/other", BODY, now=1000.0)
    with pytest.raises(PeerAuthError):
        guard.verify("POST", "/internal/v1/confirm", BODY, wrong_path, now=1000.0)


def test_stale_and_future_requests_are_refused() -> None:
    guard = ReplayGuard(SECRET)
    old = sign_request(SECRET, "POST", "/p", BODY, now=1000.0)
    with pytest.raises(PeerAuthError, match="stale"):
        guard.verify("POST", "/p", BODY, old, now=1031.0)
    future = sign_request(SECRET, "POST", "/p", BODY, now=1100.0)
    with pytest.raises(PeerAuthError, match="stale"):
        guard.verify("POST", "/p", BODY, future, now=1000.0)


def test_nonces_are_forgotten_only_after_the_window() -> None:
    guard = ReplayGuard(SECRET)
    h = sign_request(SECRET, "POST", "/p", BODY, now=1000.0)
    guard.verify("POST", "/p", BODY, h, now=1000.0)
    # Long after, the nonce is forgotten, but the timestamp is stale anyway: still refused.
    with pytest.raises(PeerAuthError, match="stale"):
        guard.verify("POST", "/p", BODY, h, now=1100.0)


def test_answers_are_signed_and_bound_to_the_request() -> None:
    answer = b'{"outcome": "failure"}'
    h = sign_response(SECRET, 200, "nonce-1234", answer, now=50.0)
    verify_response(SECRET, 200, "nonce-1234", answer, h, now=51.0)
    with pytest.raises(PeerAuthError):
        verify_response(SECRET, 200, "nonce-9999", answer, h, now=51.0)
    with pytest.raises(PeerAuthError):
        verify_response(SECRET, 200, "nonce-1234", b'{"outcome": "ok"}', h, now=51.0)
