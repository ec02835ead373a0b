"""Authentication of instance-to-instance calls. Pure, except for the clock passed in.

A request carries ``X-Upwatch-Timestamp`` (Unix seconds), ``X-Upwatch-Nonce`` (random) and
``X-Upwatch-Signature``: hex HMAC-SHA256 under the cluster secret over
``METHOD\\nPATH\\nTIMESTAMP\\nNONCE\\n`` + body. The receiver refuses (401) a missing or wrong
signature, a timestamp more than 30 s away from its clock, and a nonce it has already seen
within that window (a replay). The answer is signed the same way over
``STATUS\\nREQUEST_NONCE\\nTIMESTAMP\\n`` + body, so a forged answer cannot confirm an outage.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections import OrderedDict
from collections.abc import Mapping

from engine.runtime.errors import PeerAuthError

MAX_SKEW_S = 30.0
H_TS = "X-Upwatch-Timestamp"
H_NONCE = "X-Upwatch-Nonce"
H_SIG = "X-Upwatch-Signature"
H_NODE = "X-Upwatch-Node"


def _mac(secret: bytes, head: str, body: bytes) -> str:
    return hmac.new(secret, head.encode() + body, hashlib.sha256).hexdigest()


def sign_request(
    secret: bytes, method: str, path: str, body: bytes, now: float, nonce: str | None = None
) -> dict[str, str]:
    nonce = nonce or secrets.token_hex(16)
    ts = str(int(now))
    sig = _mac(secret, f"{method.upper()}\n{path}\n{ts}\n{nonce}\n", body)
    return {H_TS: ts, H_NONCE: nonce, H_SIG: sig}


def sign_response(
    secret: bytes, status: int, request_nonce: str, body: bytes, now: float
) -> dict[str, str]:
    ts = str(int(now))
    return {H_TS: ts, H_SIG: _mac(secret, f"{status}\n{request_nonce}\n{ts}\n", body)}


def verify_response(
    secret: bytes,
    status: int,
    request_nonce: str,
    body: bytes,
    headers: Mapping[str, str],
    now: float,
) -> None:
    ts, sig = headers.get(H_TS, ""), headers.get(H_SIG, "")
    if not ts.isdigit() or abs(now - int(ts)) > MAX_SKEW_S:
        raise PeerAuthError("answer timestamp missing or out of range")
    want = _mac(secret, f"{status}\n{request_nonce}\n{ts}\n", body)
    if not hmac.compare_digest(want, sig):
        raise PeerAuthError("answer signature does not match")


class ReplayGuard:
    """Verifies signed requests and remembers nonces for the skew window."""

    def __init__(self, secret: bytes, *, max_nonces: int = 100_000) -> None:
        self._secret = secret
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._max = max_nonces

    def verify(
        self, method: str, path: str, body: bytes, headers: Mapping[str, str], now: float
    ) -> str:
        """Return the request's nonce, or raise PeerAuthError saying why it is refused."""
        ts, nonce, sig = headers.get(H_TS, ""), headers.get(H_NONCE, ""), headers.get(H_SIG, "")
        if not ts or not nonce or not sig:
            raise PeerAuthError("unsigned request")
        if not ts.isdigit() or not (8 <= len(nonce) <= 128):
            raise PeerAuthError("malformed signature headers")
        if abs(now - int(ts)) > MAX_SKEW_S:
            raise PeerAuthError("stale request")
        want = _mac(self._secret, f"{method.upper()}\n{path}\n{ts}\n{nonce}\n", body)
        if not hmac.compare_digest(want, sig):
            raise PeerAuthError("bad signature")
        self._expire(now)
        if nonce in self._seen:
            raise PeerAuthError("replayed request")
        self._seen[nonce] = now
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)
        return nonce

    def _expire(self, now: float) -> None:
        horizon = now - 2 * MAX_SKEW_S
        while self._seen:
            _nonce, seen_at = next(iter(self._seen.items()))
            if seen_at >= horizon:
                break
            self._seen.popitem(last=False)
