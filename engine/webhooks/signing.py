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
