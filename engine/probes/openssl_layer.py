"""The uptime probe's TLS layer over pyOpenSSL, with the OpenSSL that the ``cryptography``
wheel bundles (4.x) instead of the system one the ``ssl`` module links (3.0 here).

Why (measured: docs/performance.md, "Kept" under the internet scenario): OpenSSL 3.0
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

Compiled with mypyc (engine/runtime/compiled.py): the probe's connection calls these functions a
dozen times per probe and per socket read; interpreted, each call cost ~2-3k instructions
of frame set-up beside the C call it makes. The bindings it calls per read are bound once,
as ``Final`` names (compiled: C statics, no lookup of ``_lib`` and its attribute per call).
"""

from __future__ import annotations

import ssl
from typing import Any, Final

try:
    from OpenSSL import SSL
    from OpenSSL._util import exception_from_error_queue as _raise_queued
    from OpenSSL._util import ffi as _ffi
    from OpenSSL._util import lib as _lib
except ImportError:  # pragma: no cover - a dependency; the ssl module layer still works
    SSL = None  # type: ignore[assignment, unused-ignore]  # Any when the build env lacks it
    _lib = _ffi = None
    _raise_queued = None  # type: ignore[assignment, unused-ignore]

# Every binding this module calls. cryptography trims the OpenSSL functions its bindings
# expose from release to release; a build without one of these makes the prober fall back
# to the ssl module's layer (HttpProber), instead of failing its first HTTPS probe.
_NEEDED: Final = (
    "SSL_new", "SSL_free", "SSL_set_mode", "SSL_MODE_AUTO_RETRY", "BIO_new", "BIO_s_mem",
    "SSL_set_bio", "SSL_set_connect_state", "SSL_get_error", "SSL_ERROR_SYSCALL",
    "SSL_ERROR_ZERO_RETURN", "SSL_ERROR_WANT_READ", "ERR_peek_error", "ERR_clear_error",
    "SSL_set_tlsext_host_name", "SSL_get_session", "i2d_SSL_SESSION", "d2i_SSL_SESSION",
    "SSL_set_session", "SSL_SESSION_free", "BIO_write", "BIO_read", "SSL_do_handshake",
    "SSL_write", "SSL_read", "SSL_session_reused", "SSL_CTX_set1_curves_list",
    "BIO_new_mem_buf", "BIO_set_mem_eof_return", "BIO_get_mem_data", "SSL_set_options",
    "SSL_OP_NO_TLSv1_3",
)
MISSING: Final = (
    () if _lib is None else tuple(n for n in _NEEDED if not hasattr(_lib, n))
)
AVAILABLE = SSL is not None and not MISSING

_GROUPS = b"P-256:X25519:X448:P-384:P-521"
_TLS13_SUITES = b"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
_TLS12_SUITES = (b"ECDHE+AESGCM+AES128:ECDHE+AESGCM:ECDHE+CHACHA20:DHE+AESGCM+AES128:"
                 b"DHE+AESGCM:DHE+CHACHA20:ALL:!COMPLEMENTOFDEFAULT:!eNULL:!PSK:!SRP")


class _Never(Exception):
    """Stands for pyOpenSSL's errors where it is not installed (never raised)."""


if SSL is not None:
    WantReadError: type[Exception] = SSL.WantReadError
    ZeroReturnError: type[Exception] = SSL.ZeroReturnError
    Error: type[Exception] = SSL.Error
    SysCallError: type[Exception] = SSL.SysCallError
else:  # pragma: no cover
    WantReadError = ZeroReturnError = Error = SysCallError = _Never


def _binding(name: str) -> Any:
    return getattr(_lib, name, None)


# The bindings called per socket read or per record, bound once (see the module's doc).
_SSL_read: Final[Any] = _binding("SSL_read")
_SSL_get_error: Final[Any] = _binding("SSL_get_error")
_SSL_set_bio: Final[Any] = _binding("SSL_set_bio")
_SSL_do_handshake: Final[Any] = _binding("SSL_do_handshake")
_BIO_read: Final[Any] = _binding("BIO_read")
_BIO_write: Final[Any] = _binding("BIO_write")
_BIO_new_mem_buf: Final[Any] = _binding("BIO_new_mem_buf")
_BIO_set_mem_eof_return: Final[Any] = _binding("BIO_set_mem_eof_return")
_BIO_get_mem_data: Final[Any] = _binding("BIO_get_mem_data")
_NULL: Final[Any] = getattr(_ffi, "NULL", None)
_WANT_READ: Final[int] = getattr(_lib, "SSL_ERROR_WANT_READ", 2)
_ZERO_RETURN: Final[int] = getattr(_lib, "SSL_ERROR_ZERO_RETURN", 6)


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
    # The groups of OpenSSL 3.0's default with P-256 first (the only key share): OpenSSL
    # 3.5+ would also offer X25519MLKEM768 and send two key shares (an ML-KEM and a second
    # X25519 key made for every connection, ~15% of a resumed TLS 1.2 probe's CPU, wasted on
    # every server that picks X25519 or resumes a TLS 1.2 session). The one share is made
    # for every ClientHello, also when a TLS 1.2 session is offered and the server resumes
    # it without any key exchange. P-256's share is cheaper to make (a fixed-base multiple
    # from OpenSSL's precomputed tables) than X25519's, its exchange a little dearer
    # (instructions per probe: docs/performance.md). P-256 is the
    # group every TLS 1.3 server must implement (RFC 8446, 9.1), so no server asks for
    # another share (HelloRetryRequest) for want of it. The probe's GET is as confidential
    # as with the ssl module's layer, no more.
    if _lib.SSL_CTX_set1_curves_list(ctx._context, _GROUPS) != 1:  # pragma: no cover
        raise RuntimeError("OpenSSL refused the key exchange groups")
    # The suites of OpenSSL's default, AES-128-GCM first, as browsers order them on CPUs
    # with AES instructions: a server that takes the client's order (nginx's default, and
    # OpenSSL's in TLS 1.3) then decrypts the page with AES-128 instead of AES-256 (10
    # rounds instead of 14) and derives TLS 1.3 keys with SHA-256 instead of SHA-384.
    # TLS_AES_128_GCM_SHA256 is the suite every TLS 1.3 server must implement (RFC 8446,
    # 9.1). The TLS 1.2 list leaves out the PSK and SRP suites, which a client without
    # their credentials never sends but filtered out of every ClientHello it built.
    # Through the binding, not Context.set_tls13_ciphersuites: pyOpenSSL has that only
    # since 25.2, and this layer asks for 25.0. Without the binding, OpenSSL's order.
    suites13 = getattr(_lib, "SSL_CTX_set_ciphersuites", None)
    if suites13 is not None and suites13(ctx._context, _TLS13_SUITES) != 1:  # pragma: no cover
        raise RuntimeError("OpenSSL refused the TLS 1.3 cipher suites")
    ctx.set_cipher_list(_TLS12_SUITES)
    return ctx


class Conn:
    """A client ``SSL`` over two memory BIOs, as ``SSL.Connection(ctx, None)`` makes one,
    without its per-connection Python bookkeeping (a weak-reference map entry, a dozen
    attributes: 12-15 us made, with the connect state and SNI set, and freed, against 6-8
    here). Driven only by this module's functions; the ``SSL`` object owns the BIOs and
    holds a reference to the context's ``SSL_CTX``."""

    __slots__ = ("_from_ssl", "_into_ssl", "_offered", "_ssl", "copying", "tls12_only")

    def __init__(self, ctx: Any) -> None:
        # The session offered (an SSL_SESSION pointer, owned by the SSL), or None.
        self._offered: Any = None
        # True when the connection offers a TLS 1.2 session and TLS 1.2 only (connection).
        self.tls12_only = False
        # True once ciphertext is copied into a BIO of the connection's own (see receive).
        self.copying = False
        ssl_ = _lib.SSL_new(ctx._context)
        if ssl_ == _ffi.NULL:  # pragma: no cover - out of memory
            _raise_queued(SSL.Error)
        self._ssl = _ffi.gc(ssl_, _lib.SSL_free)
        _lib.SSL_set_mode(ssl_, _lib.SSL_MODE_AUTO_RETRY)  # as pyOpenSSL sets it
        self._into_ssl = _lib.BIO_new(_lib.BIO_s_mem())
        self._from_ssl = _lib.BIO_new(_lib.BIO_s_mem())
        if self._into_ssl == _ffi.NULL or self._from_ssl == _ffi.NULL:  # pragma: no cover
            _raise_queued(SSL.Error)
        _lib.SSL_set_bio(ssl_, self._into_ssl, self._from_ssl)
        _lib.SSL_set_connect_state(ssl_)


def _raise(ssl_: Any, result: int) -> None:
    """Raise what pyOpenSSL's ``Connection`` raises for a failed call's ``result``: its
    ``SysCallError`` for an end without close_notify, else ``Error`` with OpenSSL's queued
    errors (library, function, reason)."""
    err = _lib.SSL_get_error(ssl_, result)
    if err == _lib.SSL_ERROR_SYSCALL and _lib.ERR_peek_error() == 0:
        raise SSL.SysCallError(-1, "Unexpected EOF")
    if err == _lib.SSL_ERROR_ZERO_RETURN:
        raise SSL.ZeroReturnError()
    _raise_queued(SSL.Error)


def connection(ctx: Any, server_hostname: str | None, session: bytes | None) -> Conn:
    """A client connection in memory-BIO mode; ``session``: a session of
    :func:`take_session` to offer (the server may decline: then a full handshake; one that
    does not parse is not offered). ``server_hostname`` is ASCII (IDNA already applied)."""
    assert SSL is not None
    conn = Conn(ctx)
    if server_hostname is not None:
        _lib.SSL_set_tlsext_host_name(conn._ssl, server_hostname.encode("ascii"))
    if session is not None:
        offer_session(conn, session)
        if conn._offered is not None and session_protocol(session) == TLS1_2:
            # A TLS 1.2 session offered by a ClientHello that also offers TLS 1.3 makes
            # the client compute a TLS 1.3 key share that a server resuming the session
            # never uses: a P-256 key generated, encoded and freed (5.5% of the engine's
            # CPU in the world's HTTPS window, every probe). Such a site resumed TLS 1.2
            # last time, so this ClientHello offers TLS 1.2 alone and no key share. The
            # prober retries at once without the session if the handshake fails (a
            # server gone TLS 1.3-only); a server that declines the session makes a full
            # TLS 1.2 handshake, and its session is then not kept (http._keep_session),
            # so the next probe offers every version again.
            _lib.SSL_set_options(conn._ssl, _lib.SSL_OP_NO_TLSv1_3)
            conn.tls12_only = True
    return conn


def take_session(conn: Conn, strip: bool = True) -> bytes | None:
    """The connection's session as compact bytes, to offer on a later connection
    (:func:`connection`); None when there is none.

    A session object holds the peer's parsed certificate: ~9.8 KB kept per site. Its DER
    (``i2d_SSL_SESSION``) without the certificate, which resumption does not use (the
    uptime probe does not verify; the certificate probe makes full handshakes), is a few
    hundred bytes: the ticket, the master secret, the cipher, the times. Parsing it back
    when it is offered costs a few microseconds (docs/performance.md).
    ``strip``: False when the session is known to hold no certificate (a resumed one)."""
    sess = _lib.SSL_get_session(conn._ssl)
    if sess == _ffi.NULL:
        return None
    n = _lib.i2d_SSL_SESSION(sess, _ffi.NULL)
    if n <= 0:  # pragma: no cover - OpenSSL could not encode it
        _lib.ERR_clear_error()
        return None
    buf = _ffi.new("unsigned char[]", n)
    _lib.i2d_SSL_SESSION(sess, _ffi.new("unsigned char **", buf))
    der: bytes = _ffi.buffer(buf, n)[:]
    return without_peer(der) if strip else der


def offer_session(conn: Conn, der: bytes) -> None:
    """Offer the session ``der`` (of :func:`take_session`) on ``conn``'s handshake."""
    with _ffi.from_buffer(der) as data:
        sess = _lib.d2i_SSL_SESSION(
            _ffi.NULL, _ffi.new("unsigned char **", _ffi.cast("unsigned char *", data)),
            len(der))
    if sess == _ffi.NULL:  # not a session: nothing to offer, a full handshake
        _lib.ERR_clear_error()
        return
    _lib.SSL_set_session(conn._ssl, sess)  # takes its own reference
    _lib.SSL_SESSION_free(sess)
    conn._offered = sess


def same_session(conn: Conn) -> bool:
    """Whether ``conn``'s session is still the one :func:`offer_session` gave it: a resumed
    TLS 1.2 handshake without a new ticket. Its DER is then the one offered, and need not
    be encoded again (OpenSSL makes a new session object for any new ticket, and for every
    TLS 1.3 one)."""
    offered = conn._offered
    return offered is not None and _lib.SSL_get_session(conn._ssl) == offered


# The session's DER (OpenSSL's ssl/ssl_asn1.c, SSL_SESSION_ASN1): a SEQUENCE whose field
# ``peer`` is ``[3] EXPLICIT Certificate OPTIONAL``, tag byte 0xA3 (constructed,
# context-specific 3).
_SEQUENCE = 0x30
_PEER = 0xA3


def _der_length(der: bytes, i: int) -> tuple[int, int]:
    """The DER length at ``der[i]``, and where its contents start."""
    first = der[i]
    if first < 0x80:
        return first, i + 1
    n = first & 0x7F
    return int.from_bytes(der[i + 1 : i + 1 + n], "big"), i + 1 + n


def _der_header(tag: int, length: int) -> bytes:
    if length < 0x80:
        return bytes((tag, length))
    body = length.to_bytes((length.bit_length() + 7) // 8, "big")
    return bytes((tag, 0x80 | len(body))) + body


def without_peer(der: bytes) -> bytes:
    """``der`` (an encoded session) without its peer certificate; ``der`` itself when it
    holds none or is not the expected SEQUENCE. Only top-level fields are walked."""
    if len(der) < 2 or der[0] != _SEQUENCE:
        return der
    length, start = _der_length(der, 1)
    end = start + length
    if end != len(der):
        return der
    i = start
    while i < end:
        tag = der[i]
        length, contents = _der_length(der, i + 1)
        nxt = contents + length
        if tag == _PEER:
            inner = der[start:i] + der[nxt:end]
            return _der_header(_SEQUENCE, len(inner)) + inner
        i = nxt
    return der


TLS1_2: Final = 0x0303
_INTEGER: Final = 0x02


def session_protocol(der: bytes) -> int:
    """The protocol version of an encoded session (its ``ssl_version``, e.g. 0x0303 for
    TLS 1.2, 0x0304 for TLS 1.3: the second field of SSL_SESSION_ASN1, after the
    encoding's own version); 0 when ``der`` does not hold one where expected."""
    try:
        if der[0] != _SEQUENCE:
            return 0
        _, i = _der_length(der, 1)
        if der[i] != _INTEGER:
            return 0
        length, start = _der_length(der, i + 1)
        i = start + length
        if der[i] != _INTEGER:
            return 0
        length, start = _der_length(der, i + 1)
        if not 0 < length <= 2 or start + length > len(der):
            return 0
        return int.from_bytes(der[start : start + length], "big")
    except IndexError:
        return 0


# One buffer for what every connection sends (read out and copied into a bytes object at
# once, on the loop's thread): no buffer of _OUT_SIZE allocated per read, as pyOpenSSL's
# ``bio_read`` does, and no exception when there is nothing to send.
_OUT_SIZE: Final = 64 * 1024
_OUT: Final[Any] = _ffi.new("char[]", _OUT_SIZE) if _ffi is not None else None


# Pointers to the prober's buffers, made once: by id() of the view, with the view (so the
# id stays its own). A few probers per process; bounded for the tests, which make many.
_POINTERS: dict[int, tuple[memoryview, Any]] = {}
_MAX_POINTERS: Final = 16


def pointer(view: memoryview) -> Any:
    """A C pointer to ``view``'s bytes (kept for later calls with the same view)."""
    known = _POINTERS.get(id(view))
    if known is not None:
        return known[1]
    ptr = _ffi.from_buffer(view)
    if len(_POINTERS) >= _MAX_POINTERS:
        _POINTERS.clear()
    _POINTERS[id(view)] = (view, ptr)
    return ptr


def receive(conn: Conn, ptr: Any, n: int) -> None:
    """Make the ``n`` bytes of ciphertext at ``ptr`` what ``conn`` reads next.

    Not copied: a read-only memory BIO over them becomes the connection's read BIO (the
    previous one, read to its end, is freed). A memory BIO that owns its data copied every
    byte in (after zeroing the room for it) and out again, and cleansed its buffer when
    freed: ~0.2 M of a resumed probe's ~2 M instructions with a 100 KB body (callgrind,
    docs/performance.md), and it kept its largest size for good.

    The caller drives ``conn`` (:func:`handshake`, :func:`read_into`) until it wants more
    ciphertext, or ends the connection, before the bytes at ``ptr`` change; then it calls
    :func:`settle`. OpenSSL reads a record's header and then its body, and keeps a partial
    record in its own buffer, so a connection that wants more has read every byte."""
    if conn.copying:
        _BIO_write(conn._into_ssl, ptr, n)
        return
    bio = _BIO_new_mem_buf(ptr, n)
    if bio == _NULL:  # pragma: no cover - out of memory
        raise MemoryError("BIO_new_mem_buf failed")
    _BIO_set_mem_eof_return(bio, -1)  # at its end: "retry", not the peer's EOF
    _SSL_set_bio(conn._ssl, bio, conn._from_ssl)  # frees the previous read BIO
    conn._into_ssl = bio


def settle(conn: Conn) -> None:
    """After :func:`receive`'s bytes were read: if any are left unread (which OpenSSL's
    reads, as :func:`receive` says, never leave), copy them into a memory BIO of the
    connection's own, which takes all ciphertext from then on."""
    if conn.copying:
        return
    into = conn._into_ssl
    n: int = _BIO_get_mem_data(into, _NULL)
    if n <= 0:
        return
    rest = _ffi.new("char **")
    _BIO_get_mem_data(into, rest)
    bio = _lib.BIO_new(_lib.BIO_s_mem())
    if bio == _ffi.NULL:  # pragma: no cover - out of memory
        raise MemoryError("BIO_new failed")
    _BIO_write(bio, rest[0], n)
    _SSL_set_bio(conn._ssl, bio, conn._from_ssl)
    conn._into_ssl = bio
    conn.copying = True


def handshake(conn: Conn) -> bool:
    """Go on with ``conn``'s handshake: True once it is done, False while it wants the
    peer's next flight; raises the pyOpenSSL error when it failed. ``do_handshake``
    without a ``WantReadError`` per flight."""
    ssl_ = conn._ssl
    n: int = _SSL_do_handshake(ssl_)
    if n == 1:
        return True
    if _SSL_get_error(ssl_, n) == _WANT_READ:
        return False
    _raise(ssl_, n)
    return False  # pragma: no cover


def write(conn: Conn, data: bytes) -> None:
    """Encrypt ``data`` as application data (the memory BIO takes all of it); raises the
    pyOpenSSL error when OpenSSL refuses."""
    ssl_ = conn._ssl
    with _ffi.from_buffer(data) as buf:
        n: int = _lib.SSL_write(ssl_, buf, len(data))
    if n <= 0:
        _raise(ssl_, n)


def read_into(conn: Conn, ptr: Any, size: int) -> int:
    """Decrypt at most ``size`` bytes of application data into ``ptr``: the count (> 0),
    0 when more ciphertext is needed, -1 at the peer's close_notify; raises the pyOpenSSL
    error otherwise (``SysCallError`` for an end without close_notify).

    ``recv_into`` without its temporary buffer of ``size`` and the copy out of it (per TLS
    record: ~7 a 100 KB body), and without an exception (``WantReadError``) at the end of
    what arrived."""
    ssl_ = conn._ssl
    n: int = _SSL_read(ssl_, ptr, size)
    if n > 0:
        return n
    err: int = _SSL_get_error(ssl_, n)
    if err == _WANT_READ:
        return 0
    if err == _ZERO_RETURN:
        return -1
    _raise(ssl_, n)
    return -1  # pragma: no cover


def outgoing(conn: Conn) -> bytes | None:
    """Ciphertext ``conn`` has to send (at most 64 KiB: call again while a read is full),
    or None."""
    n: int = _BIO_read(conn._from_ssl, _OUT, _OUT_SIZE)
    if n <= 0:
        return None
    data: bytes = _ffi.buffer(_OUT, n)[:]
    return data


def session_reused(conn: Conn) -> bool:
    """Whether the handshake resumed the offered session."""
    return bool(_lib.SSL_session_reused(conn._ssl))


def as_ssl_error(exc: BaseException) -> ssl.SSLError:
    """A pyOpenSSL error as the ``ssl`` module would raise it, so that the probe's words
    for it (``failures.ssl_error_words``: the reason, e.g. ``wrong version number``) stay the
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
