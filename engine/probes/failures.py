"""How a probe fails: :class:`ProbeFailure`, and the plain English every failure is told in
(an outcome's ``error``: a short phrase, never a traceback)."""

from __future__ import annotations

import errno
import ssl
from typing import Final

# Longest host name we quote back in an error (a hostile Location header can be long).
_MAX_NAME_IN_ERROR: Final = 253


class ProbeFailure(Exception):
    """A probe step failed; ``str(exc)`` is the plain-words error of the outcome."""


def short(name: str) -> str:
    """``name`` cut to a length fit for an error message."""
    return name if len(name) <= _MAX_NAME_IN_ERROR else name[:_MAX_NAME_IN_ERROR] + "..."


def timeout_words(timeout: float) -> str:
    """``timed out after 10 s`` (``1.5 s``, ``0.25 s``: no trailing zeros)."""
    return f"timed out after {timeout:g} s"


def os_error_words(exc: BaseException | None) -> str:
    """Plain words for a socket-level failure."""
    if exc is None:
        return "connection closed"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, ConnectionResetError | ConnectionAbortedError | BrokenPipeError):
        return "connection reset"
    if isinstance(exc, OSError):
        code = exc.errno
        if code == errno.ENETUNREACH:
            return "network unreachable"
        if code == errno.EHOSTUNREACH:
            return "host unreachable"
        if code == errno.ETIMEDOUT:
            return "connection timed out"
        if code == errno.EADDRNOTAVAIL:
            return "source address not available"
        if exc.strerror:
            return "connection failed: " + exc.strerror.lower()
    return "connection failed: " + (str(exc) or type(exc).__name__)


def ssl_error_words(exc: ssl.SSLError) -> str:
    """``WRONG_VERSION_NUMBER`` -> ``wrong version number``; falls back to the message."""
    reason = getattr(exc, "reason", None)
    if isinstance(reason, str) and reason:
        return reason.lower().replace("_", " ")
    if isinstance(exc.strerror, str) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
