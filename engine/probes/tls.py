"""The certificate probe: one TLS handshake, the chain and host name verified.

Contract (decisions.md, "Certificate health check"): :meth:`CertProber.probe` connects to
``host:port`` (the port :func:`certificate_port` picks for the monitor's URL; resolved here
and checked against the private-address rule like the uptime probe, then connected to by IP
literal), sends SNI = ``host``, verifies the chain against the system trust store (which
honours ``SSL_CERT_FILE``) plus ``ca_bundle``, checks the host name, and closes right after
the handshake: no HTTP request. It never raises (except ``asyncio.CancelledError``) and never
runs longer than ``timeout`` plus scheduling noise.

The chain the server sent is read (``certchain``) and judged with OpenSSL's verify code by
:func:`engine.domain.certdiagnosis.diagnose`: the outcome's ``diagnosis`` code, its error in
words with the fix ("incomplete chain: ...; fix: ...", docs/certificates.md), the warnings
and the chain; a verified leaf with an http CRL is judged for revocation (``crl``), and a
verified chain OpenSSL accepts can still be down (weak key or signature, revoked).
Anything that prevents a verdict is "no TLS answer: <reason>", "timed out after N s" or
"blocked: ...".

The certificate fields come from the leaf (parsed with ``cryptography``; the fields of
recently seen leaves are kept by DER, so a certificate seen again is not parsed again). When
verification fails, a second handshake to the same address without verification fetches the
leaf so the outcome can still say whose certificate expired when; it runs only in the
failure case, only within what is left of the deadline, and its own failure changes nothing
but the missing fields. TLS runs over memory BIOs with one ``SSLContext`` per prober (loading
the trust store costs about 1 MB and milliseconds of CPU; see ``engine/probes/http.py`` for
the memory notes).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from time import perf_counter
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed448, ed25519, rsa
from cryptography.x509.oid import NameOID

from engine.domain.certdiagnosis import diagnose, verified
from engine.domain.netpolicy import Resolver
from engine.domain.outcomes import CertOutcome
from engine.probes._net import READ_BUFFER_SIZE, ClientConn, reactor_for, wake_future
from engine.probes.addresses import ip_literal, resolve_checked, source_family
from engine.probes.certchain import ChainReader, leaf_issuer, sent_chain
from engine.probes.crl import CrlChecker
from engine.probes.deadlines import Deadlines
from engine.probes.failures import ProbeFailure, os_error_words, ssl_error_words, timeout_words
from engine.probes.reactor import Reactor
from engine.probes.starttls import DEFAULT_PORTS, Dialogue, advance

log = logging.getLogger(__name__)

# OpenSSL X509_V_ERR_* codes -> the words decisions.md asks for.
_VERIFY_WORDS: Final[dict[int, str]] = {
    2: "untrusted issuer",  # unable to get issuer certificate
    9: "certificate not yet valid",
    10: "certificate expired",
    18: "self-signed certificate",  # depth zero self-signed
    19: "self-signed certificate",  # self-signed certificate in chain
    20: "untrusted issuer",  # unable to get local issuer certificate
    21: "untrusted issuer",  # unable to verify the first certificate
    62: "host name mismatch",
    64: "host name mismatch",  # IP address mismatch
}


HTTPS_PORT: Final = 443


_OWN_TLS_PORT: Final = ("https:", "tls:", "smtp:", "imap:", "pop3:")


def certificate_port(url: str, port: int) -> int:
    """The port a certificate check of the monitor ``url`` (normalised, its port ``port``, 0
    when it names none) probes: an https, tls, smtp, imap or pop3 URL's own port (a mail
    scheme's default, 25, 143 or 110, when it names none), else 443; an http URL's port is
    plain HTTP, so its host is checked on 443."""
    if port and url.startswith(_OWN_TLS_PORT):
        return port
    return DEFAULT_PORTS.get(url[: url.find(":")], HTTPS_PORT)


def verify_words(exc: ssl.SSLCertVerificationError) -> str:
    """Plain words for a failed chain or host name verification."""
    words = _VERIFY_WORDS.get(exc.verify_code)
    if words is not None:
        return words
    message = exc.verify_message or ssl_error_words(exc)
    return f"certificate invalid: {message}"


class _CertConn(ClientConn):
    """A connection that only does the handshake and keeps the leaf certificate (DER), the
    chain the server sent and the certificate that issued the leaf (DER, when verified);
    with ``starttls`` (a mail scheme) the server's greeting and STARTTLS come first."""

    __slots__ = ("chain", "der", "dialogue", "issuer_der", "keep_chain", "tls_ctx", "tls_name",
                 "verify_error")

    def __init__(
        self,
        notify: Callable[[], None],
        rview: memoryview,
        pview: memoryview,
        ctx: ssl.SSLContext,
        server_hostname: str,
        keep_chain: bool,
        starttls: str | None = None,
    ) -> None:
        super().__init__(notify, rview, pview, None if starttls else ctx, server_hostname)
        self.keep_chain = keep_chain
        self.der: bytes | None = None
        self.chain: list[bytes] = []
        self.issuer_der: bytes | None = None
        self.verify_error: ssl.SSLCertVerificationError | None = None
        self.dialogue = Dialogue(starttls) if starttls else None
        self.tls_ctx = ctx
        self.tls_name = server_hostname

    def on_ready(self) -> None:
        if self.dialogue is not None and not self.handshaken:
            return  # connected in plaintext: the greeting and STARTTLS first
        sslobj = self.ssl_object
        if sslobj is not None:
            if self.keep_chain:
                # The client's copy of the peer's chain starts with the leaf.
                self.chain = sent_chain(sslobj)
                self.issuer_der = leaf_issuer(sslobj)
            self.der = self.chain[0] if self.chain else sslobj.getpeercert(binary_form=True)
        self.finish()

    def on_data(self, data: memoryview) -> None:
        d = self.dialogue
        if d is not None and not d.ready:  # else never reached: on_ready ends it
            advance(d, self, data, self.tls_ctx, self.tls_name, "no TLS answer: ")

    def on_lost(self, exc: BaseException | None) -> None:
        d = self.dialogue
        if d is not None and not d.ready and exc is None:
            self.finish("no TLS answer: " + d.closed_words())
            return
        self.finish("no TLS answer: " + os_error_words(exc))

    def on_tls_failed(self, exc: BaseException | None) -> None:
        if isinstance(exc, ssl.SSLCertVerificationError):
            self.verify_error = exc
            if self.keep_chain:
                self.chain = sent_chain(self.ssl_object)
            self.finish(verify_words(exc))
        elif isinstance(exc, ssl.SSLError):
            self.finish("no TLS answer: " + ssl_error_words(exc))
        elif exc is None:
            self.finish("no TLS answer: connection closed during the handshake")
        else:
            self.finish("no TLS answer: " + os_error_words(exc))


# The leaf's fields as _set_meta copies them: issuer, signature algorithm, self-signed,
# valid from, valid to, SHA-256 fingerprint, serial, key type, subject common name.
_Meta = tuple[str | None, str, bool, datetime, datetime, str, str, str, str | None]

# Parsed fields kept per prober, by the leaf's DER. Parsing costs 25-45 us, 2-4% of a whole
# probe, and gives the same answer for the same certificate, which changes every
# few months and is often shared by many checks (one site's several checks, a provider's
# wildcard certificate). Bounded (oldest out first): at most this many entries of about
# 1-3 KB each (the DER key plus the fields).
_META_CACHE_SIZE: Final = 128


def _name_text(name: x509.Name) -> str | None:
    """A name's common name, else its organisation."""
    attrs = name.get_attributes_for_oid(NameOID.COMMON_NAME) or name.get_attributes_for_oid(
        NameOID.ORGANIZATION_NAME
    )
    if not attrs:
        return None
    value = attrs[0].value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def key_type(cert: x509.Certificate) -> str:
    """The key of ``cert``: "RSA-2048", "EC-secp256r1", "Ed25519", ...; "unknown" else."""
    try:
        key = cert.public_key()
    except Exception:  # an algorithm cryptography does not support
        return "unknown"
    if isinstance(key, rsa.RSAPublicKey):
        return f"RSA-{key.key_size}"
    if isinstance(key, ec.EllipticCurvePublicKey):
        return f"EC-{key.curve.name}"
    if isinstance(key, ed25519.Ed25519PublicKey):
        return "Ed25519"
    if isinstance(key, ed448.Ed448PublicKey):
        return "Ed448"
    if isinstance(key, dsa.DSAPublicKey):
        return f"DSA-{key.key_size}"
    return "unknown"


def parse_meta(der: bytes) -> _Meta:
    """The leaf's issuer, signature algorithm, self-signedness, validity and identity
    (fingerprint, serial, key type, subject); raises what ``cryptography`` raises for a
    certificate it cannot parse."""
    cert = x509.load_der_x509_certificate(der)
    issuer = cert.issuer
    issuer_name = _name_text(issuer)
    oid = cert.signature_algorithm_oid
    # ``_name`` is OpenSSL's short name ("sha256WithRSAEncryption", "ecdsa-with-SHA256");
    # unknown OIDs report "Unknown OID", where the dotted form says more.
    name = getattr(oid, "_name", None)
    algorithm = name if isinstance(name, str) and name != "Unknown OID" else oid.dotted_string
    return (
        issuer_name,
        algorithm,
        cert.subject == issuer,
        cert.not_valid_before_utc,
        cert.not_valid_after_utc,
        hashlib.sha256(der).hexdigest(),
        format(cert.serial_number, "x"),
        key_type(cert),
        _name_text(cert.subject),
    )


def _set_meta(out: CertOutcome, meta: _Meta) -> None:
    """Copy the leaf's issuer, signature algorithm, self-signedness and validity into ``out``."""
    issuer, algorithm, self_signed, valid_from, valid_to, fingerprint, serial, key, subject = meta
    if issuer is not None:
        out.issuer = issuer
    out.signature_algorithm = algorithm
    out.is_self_signed = self_signed
    out.valid_from = valid_from
    out.valid_to = valid_to
    out.fingerprint_sha256 = fingerprint
    out.serial = serial
    out.key_type = key
    out.subject = subject


class CertProber:
    """Runs certificate probes; one instance serves any number of concurrent probes."""

    def __init__(
        self,
        *,
        timeout: float,
        source_address: str | None = None,
        allow_private: bool = False,
        ca_bundle: Path | None = None,
        resolver: Resolver | None = None,
        parse: Callable[[bytes], _Meta] | None = None,
        batch: float = 0.0,
        crl: CrlChecker | None = None,
        check_crl: bool = True,
        diagnoses: bool = True,
    ) -> None:
        """``parse`` reads a leaf's fields (``parse_meta`` unless given); ``batch`` as
        :class:`~engine.probes.http.HttpProber`'s; ``crl`` judges revocation (one under
        the same address rule and timeout unless given; none when ``check_crl`` is False);
        ``diagnoses`` False: no chain read, no diagnosis, no CRL (the probe as it was before
        them: the bench's reference)."""
        if timeout <= 0:
            raise ValueError("timeout must be positive")
        self._parse = parse_meta if parse is None else parse
        self._timeout = timeout
        self._timeout_words = timeout_words(timeout)
        self._local = (source_address, 0) if source_address else None
        self._family = source_family(source_address)
        self._allow_private = allow_private
        self._resolver = resolver
        self._deadlines = Deadlines()
        self._reactor: Reactor | None = None
        self._batch = batch
        self._rview = memoryview(bytearray(READ_BUFFER_SIZE))
        self._pview = memoryview(bytearray(1))  # no application data is ever read
        # The verifying context: system trust store (honours SSL_CERT_FILE) plus the bundle.
        self._verify_ctx = ssl.create_default_context()
        if ca_bundle is not None:
            self._verify_ctx.load_verify_locations(cafile=str(ca_bundle))
        # For the second look at a certificate that failed verification.
        self._peek_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self._peek_ctx.check_hostname = False
        self._peek_ctx.verify_mode = ssl.CERT_NONE
        self._meta: dict[bytes, _Meta] = {}
        self._chains = ChainReader()
        self._diagnoses = diagnoses
        if crl is None and check_crl and diagnoses:
            crl = CrlChecker(timeout=timeout, allow_private=allow_private, resolver=resolver,
                             family=self._family, source_address=source_address)
        self._crl = crl

    async def aclose(self) -> None:
        """Drop the reactor (probes still running fail at once) and cancel CRL fetches in
        flight; the prober stays usable."""
        if self._crl is not None:
            self._crl.close()
        if self._reactor is not None:
            self._reactor.close()
            self._reactor = None

    async def probe(self, host: str, port: int, starttls: str | None = None) -> CertOutcome:
        """Check the certificate ``host:port`` presents, after the greeting and STARTTLS of
        ``starttls`` ("smtp", "imap", "pop3") when given; never raises except
        CancelledError."""
        out = CertOutcome(False, None, None, None, None, None, None, 0.0)
        t0 = perf_counter()
        task, slot, cancelling = self._deadlines.arm(self._timeout)
        try:
            await self._run(host.strip("[]"), port, out, t0, starttls)
        except asyncio.CancelledError:
            if not self._deadlines.expired(task, cancelling):
                raise
            # A verdict already reached stands; only the optional second look was cut short.
            if out.error is None and not out.valid:
                out.error = self._timeout_words
        except ProbeFailure as exc:
            out.error = str(exc)
        except Exception:
            log.exception("certificate probe of %s:%s failed unexpectedly", host, port)
            out.error = "probe failed: internal error"
        finally:
            slot.discard(task)
        out.valid = out.error is None
        out.total_ms = (perf_counter() - t0) * 1000.0
        return out

    async def _run(
        self, host: str, port: int, out: CertOutcome, t0: float, starttls: str | None = None
    ) -> None:
        try:
            literal = ip_literal(host)
            addrs, _ = await resolve_checked(
                host, port, literal=literal, family=self._family,
                allow_private=self._allow_private, resolver=self._resolver,
            )
        except ProbeFailure as exc:
            words = str(exc)
            raise ProbeFailure(
                words if words.startswith("blocked:") else "no TLS answer: " + words
            ) from None
        reactor = self._reactor = reactor_for(
            self._reactor, asyncio.get_running_loop(), self._batch)
        # For an IP literal OpenSSL checks the IP SANs and sends no SNI, as it should.
        server_hostname = literal or host
        conn, ip = await self._handshake(
            reactor, addrs, port, server_hostname, self._verify_ctx, starttls)
        if conn.error is None:
            out.valid = True
            if conn.der is not None:
                self._fill_meta(out, conn.der)
            if self._diagnoses:
                await self._diagnose(out, conn, server_hostname, t0)
            return
        out.error = conn.error
        verify_error = conn.verify_error
        if verify_error is None:
            return
        if self._diagnoses:
            self._diagnose_failure(out, verify_error, conn.chain, server_hostname)
        # Verification failed; the leaf is still worth describing. Same checked address.
        peek, _ = await self._handshake(
            reactor, [ip], port, server_hostname, self._peek_ctx, starttls)
        if peek.der is not None:
            self._fill_meta(out, peek.der)
        if self._diagnoses and peek.chain and not conn.chain:
            self._diagnose_failure(out, verify_error, peek.chain, server_hostname)

    def _diagnose_failure(
        self, out: CertOutcome, exc: ssl.SSLCertVerificationError, ders: list[bytes],
        host: str,
    ) -> None:
        """The verify code and the chain as sent (as far as known) named and worded."""
        chain = self._chains.read(ders)
        found = diagnose(exc.verify_code, exc.verify_message or "", chain, host,
                         datetime.now(UTC))
        out.diagnosis, out.warnings = found.code, found.warnings
        out.chain = [c.shown() for c in chain]
        if found.error is not None:
            out.error = found.error

    async def _diagnose(
        self, out: CertOutcome, conn: _CertConn, host: str, t0: float
    ) -> None:
        """A verified chain read for what OpenSSL accepts but a user should hear of (weak
        keys and signatures, order, lifetime) and judged for revocation."""
        seen = self._chains.verified(conn.chain)
        if seen is None:
            return
        chain, shown, findings = seen
        revocation = None
        if self._crl is not None and chain[0].crl_urls:
            # What is left of the deadline, less a margin for the verdict to be written.
            wait = self._timeout - (perf_counter() - t0) - 0.05
            revocation = await self._crl.check(
                chain[0], conn.issuer_der, datetime.now(UTC), max(wait, 0.0))
            out.revocation = revocation.shown() if revocation is not None else None
        found = verified(findings, revocation)
        out.diagnosis, out.error, out.warnings = found.code, found.error, found.warnings
        out.chain = shown

    def _fill_meta(self, out: CertOutcome, der: bytes) -> None:
        meta = self._meta.get(der)
        if meta is None:
            # A certificate OpenSSL accepted can still be one cryptography refuses to parse
            # (odd encodings); the verdict stands, only the fields stay empty. Not cached:
            # such certificates are rare, and the log line should keep appearing.
            try:
                meta = self._parse(der)
            except Exception as exc:
                log.info("cannot parse certificate fields: %s", exc)
                return
            cache = self._meta
            if len(cache) >= _META_CACHE_SIZE:
                del cache[next(iter(cache))]
            cache[der] = meta
        _set_meta(out, meta)

    async def _handshake(
        self,
        reactor: Reactor,
        addrs: list[str],
        port: int,
        server_hostname: str,
        ctx: ssl.SSLContext,
        starttls: str | None = None,
    ) -> tuple[_CertConn, str]:
        # Words, not the exception: its traceback would hold this frame (and the
        # connection) in a reference cycle that only the cyclic GC could free.
        last_error = "connection failed"
        for ip in addrs:
            waiter: asyncio.Future[None] = reactor.loop.create_future()
            conn = _CertConn(
                wake_future(waiter), self._rview, self._pview, ctx, server_hostname,
                self._diagnoses, starttls,
            )
            # No continue inside the try: mypyc does not compile that (engine/runtime/compiled.py).
            error: str | None
            try:
                try:
                    reactor.connect(conn, ip, port, self._local)
                except OSError as exc:
                    error = os_error_words(exc)
                else:
                    await waiter
                    error = conn.connect_error
            finally:
                if conn.transport is not None:
                    conn.transport.abort()
                conn.release()
            if error is None:
                return conn, ip
            last_error = error
        raise ProbeFailure("no TLS answer: " + last_error)


__all__ = ["CertProber", "parse_meta", "verify_words"]
