"""Webhook signatures (api.md section 6, decisions.md "Webhooks"). Pure functions.

``X-Service-Signature`` is the lower-case hex HMAC-SHA1 of the exact body bytes that are
sent, keyed with the account's API token (UTF-8). The body is never re-serialised between
signing and sending: the queue stores the bytes once and both sides use those bytes.
"""

from __future__ import annotations

import hashlib
import hmac

SIGNATURE_HEADER = "X-Service-Signature"
SIGNATURE_LENGTH = 40  # hex digits of a SHA-1 digest


def _key(token: str) -> bytes:
    # surrogatepass: a token is ours (ASCII), but a key must never make signing raise.
    return token.encode("utf-8", "surrogatepass")


def sign(body: bytes, token: str) -> str:
    """The signature of ``body`` under ``token``: 40 lower-case hex characters."""
    return hmac.new(_key(token), body, hashlib.sha1).hexdigest()


def verify(body: bytes, token: str, signature: str | bytes | None) -> bool:
    """True when ``signature`` is the signature of ``body`` under ``token``.

    Compares in constant time (``hmac.compare_digest``) so a receiver cannot leak how many
    leading characters of a forged signature were right. Hex case is not significant;
    anything that is not a well-formed signature (missing, wrong length, not ASCII) is simply
    False, never an exception.
    """
    if signature is None:
        return False
    if isinstance(signature, str):
        try:
            given = signature.strip().lower().encode("ascii")
        except UnicodeEncodeError:
            return False
    else:
        given = signature.strip().lower()
    expected = sign(body, token).encode("ascii")
    # compare_digest is constant-time for equal lengths; a length mismatch is not secret.
    return hmac.compare_digest(expected, given)


# -- the replay-proof signature ---------------------------------------------------------------
#
# ``X-Service-Signature-256: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">``, with the
# same key. The time is that of the try, so a receiver can refuse a captured request replayed
# later (docs/webhooks.md shows one refusing more than 5 minutes either way); api.md's
# X-Service-Signature is sent unchanged beside it.

SIGNATURE_256_HEADER = "X-Service-Signature-256"
REPLAY_TOLERANCE_S = 300


def sign_256(body: bytes, token: str, timestamp: int) -> str:
    """The header value for ``body`` sent at ``timestamp`` (Unix seconds)."""
    mac = hmac.new(_key(token), b"%d." % timestamp + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify_256(body: bytes, token: str, header: str | None, now: float,
               tolerance: float = REPLAY_TOLERANCE_S) -> bool:
    """True when ``header`` signs ``body`` under ``token`` at a time within ``tolerance``
    seconds of ``now``. Constant-time comparison; malformed headers are False."""
    if not header:
        return False
    fields: dict[str, str] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, value)
    t, given = fields.get("t", ""), fields.get("v1", "")
    if not t.isascii() or not t.isdigit() or not given.isascii():
        return False
    if abs(now - int(t)) > tolerance:
        return False
    expected = sign_256(body, token, int(t)).encode("ascii")
    return hmac.compare_digest(expected, f"t={int(t)},v1={given.lower()}".encode("ascii"))
