"""The uptime probe's TLS layer over pyOpenSSL, with the OpenSSL that the ``cryptography``
wheel bundles (4.x) instead of the system one the ``ssl`` module links (3.0 here).

Why (``python -m engine.bench.tlscompare``, engine/bench/RESULTS.md, "TLS layer"): OpenSSL 3.0
spends a third of a resumed handshake's CPU looking algorithms up by name on every new
connection (``OPENSSL_strcasecmp``, ``CRYPTO_strndup``, read locks); the newer library
caches them, and a connection costs less whatever Python wrapper drives it. And the ``ssl``
module copies a session (DER encode and parse, the peer's certificate included) each time
``SSLObject.session`` is read, where pyOpenSSL takes a reference.

The contract is :class:`engine.probes._net.ClientConn`'s: a client connection over two
memory BIOs, driven by the reactor's bytes. The certificate probe stays on the ``ssl``
module (its verification against the system trust store is decisions.md's).

Only this module touches pyOpenSSL's internals (``OpenSSL._util.lib`` and a connection's
``_ssl``), for what the library does not wrap: whether a handshake resumed.
"""

from __future__ import annotations

import ssl
from typing import Any

try:
    from OpenSSL import SSL
    from OpenSSL._util import lib as _lib
except ImportError:  # pragma: no cover - a dependency; the ssl module layer still works
    SSL = None  # type: ignore[assignment, unused-ignore]  # Any when the build env lacks it
    _lib = None

AVAILABLE = SSL is not None

_GROUPS = b"X25519:P-256:X448:P-384:P-521"

if SSL is not None:
    WantReadError: type[Exception] = SSL.WantReadError
    ZeroReturnError: type[Exception] = SSL.ZeroReturnError
    Error: type[Exception] = SSL.Error
    SysCallError: type[Exception] = SSL.SysCallError
    _SENT_SHUTDOWN = SSL.SENT_SHUTDOWN
else:  # pragma: no cover

    class _Never(Exception):
        pass

    WantReadError = ZeroReturnError = Error = SysCallError = _Never
    _SENT_SHUTDOWN = 1


def client_context() -> Any:
    """What ``HttpProber`` builds with the ``ssl`` module, in pyOpenSSL: no verification
    (the certificate probe verifies), ALPN ``http/1.1``, buffers released when idle. One
    context serves every connection of a prober."""
    if SSL is None:
        raise RuntimeError("pyOpenSSL is not installed")
    ctx = SSL.Context(SSL.TLS_CLIENT_METHOD)
    ctx.set_verify(SSL.VERIFY_NONE)
    ctx.set_mode(SSL.MODE_RELEASE_BUFFERS)
    ctx.set_alpn_protos([b"http/1.1"])
    # The groups of OpenSSL 3.0's default, X25519 first (its only key share): OpenSSL 3.5+
    # would also offer X25519MLKEM768 and send two key shares (an ML-KEM and a second X25519
    # key made for every connection, ~15% of a resumed TLS 1.2 probe's CPU, wasted on every
    # server that picks X25519 or resumes a TLS 1.2 session). The probe's GET is then as
    # confidential as with the ssl module's layer, no more.
    if _lib.SSL_CTX_set1_curves_list(ctx._context, _GROUPS) != 1:  # pragma: no cover
        raise RuntimeError("OpenSSL refused the key exchange groups")
    return ctx


def connection(ctx: Any, server_hostname: str | None, session: Any) -> Any:
    """A client connection in memory-BIO mode; ``session``: offer it (the server may
    decline: then a full handshake). ``server_hostname`` is ASCII (IDNA already applied)."""
    assert SSL is not None
    conn = SSL.Connection(ctx, None)
    conn.set_connect_state()
    if server_hostname is not None:
        conn.set_tlsext_host_name(server_hostname.encode("ascii"))
    if session is not None:
        conn.set_session(session)
    return conn


def take_session(conn: Any) -> Any:
    """The connection's session, to offer on a later connection; None when there is none.

    OpenSSL marks a session not resumable when a connection using it is freed without a
    shutdown (``ssl_clear_bad_session``); the ``ssl`` module hides that by copying each
    session it hands out. Here the connection is marked shut down instead (no alert is
    sent: probes abort their sockets), so a reference is enough."""
    session = conn.get_session()
    if session is not None:
        conn.set_shutdown(_SENT_SHUTDOWN)
    return session


def session_reused(conn: Any) -> bool:
    """Whether the handshake resumed the offered session."""
    return bool(_lib.SSL_session_reused(conn._ssl))


def as_ssl_error(exc: BaseException) -> ssl.SSLError:
    """A pyOpenSSL error as the ``ssl`` module would raise it, so that the probe's words
    for it (``_net.ssl_error_words``: the reason, e.g. ``wrong version number``) stay the
    same whichever layer made the connection."""
    if isinstance(exc, SysCallError):
        reason = "UNEXPECTED_EOF_WHILE_READING"
    else:
        reason = ""
        args = exc.args[0] if exc.args else None
        if isinstance(args, list) and args and isinstance(args[0], tuple) and args[0]:
            reason = str(args[0][-1])
    out = ssl.SSLError(reason or str(exc) or type(exc).__name__)
    if reason:
        out.reason = reason
    return out
