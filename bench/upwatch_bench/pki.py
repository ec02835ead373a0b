"""A small certificate authority for tests and the bench: roots, intermediates, leaves and
CRLs made with ``cryptography``, TLS server contexts that send exactly the chain a test
chooses, and a CRL server on loopback.

    pki = Pki(tmp_path)                        # a trusted root in pki.bundle
    inter = pki.ca("Test Intermediate")        # issued by the root
    leaf = pki.leaf(inter, crl_url=url)         # for localhost and 127.0.0.1
    ctx = server_context(leaf, [inter])         # sends leaf, then inter
    der = pki.crl(inter, revoked=[leaf])        # a CRL of inter revoking leaf

Servers accept any key and signature (security level 0), so weak chains can be served;
the client under test judges them.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import AuthorityInformationAccessOID, NameOID

Key = Any  # an EC or RSA private key

HOSTS = ("localhost", "127.0.0.1")


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def ec_key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def rsa_key(bits: int = 2048) -> Key:
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


@dataclass
class Issued:
    cert: x509.Certificate
    key: Key

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def name(self) -> x509.Name:
        return self.cert.subject


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Upwatch Tests"),
                      x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _sans(hosts: Sequence[str]) -> x509.SubjectAlternativeName:
    out: list[x509.GeneralName] = []
    for h in hosts:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            out.append(x509.DNSName(h))
    return x509.SubjectAlternativeName(out)


def build(
    subject: x509.Name, key: Key, issuer: Issued | None, *, ca: bool,
    hosts: Sequence[str] = (), days: tuple[float, float] = (-1, 90),
    not_before: dt.datetime | None = None, digest: hashes.HashAlgorithm | None = None,
    aia_url: str | None = None, crl_url: str | None = None, serial: int | None = None,
) -> Issued:
    """One certificate; ``issuer`` None: self-signed. ``days``: validity from/to, in days
    from now (``not_before`` overrides the start)."""
    start = not_before or now() + dt.timedelta(days=days[0])
    end = now() + dt.timedelta(days=days[1]) if not_before is None else \
        start + dt.timedelta(days=days[1] - days[0])
    signer_key = key if issuer is None else issuer.key
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if issuer is None else issuer.name)
        .public_key(key.public_key())
        .serial_number(serial or x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                       critical=False)
    )
    if issuer is not None:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer.key.public_key()),
            critical=False)
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = builder.add_extension(_sans(hosts), critical=False).add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if aia_url:
        builder = builder.add_extension(x509.AuthorityInformationAccess([
            x509.AccessDescription(AuthorityInformationAccessOID.CA_ISSUERS,
                                   x509.UniformResourceIdentifier(aia_url))]), critical=False)
    if crl_url:
        builder = builder.add_extension(x509.CRLDistributionPoints([x509.DistributionPoint(
            full_name=[x509.UniformResourceIdentifier(crl_url)], relative_name=None,
            reasons=None, crl_issuer=None)]), critical=False)
    if isinstance(digest, hashes.SHA1):
        return Issued(_sign_sha1(builder.sign(signer_key, hashes.SHA256()), signer_key), key)
    if not isinstance(digest, _SIGNING_DIGESTS):
        digest = hashes.SHA256()
    return Issued(builder.sign(signer_key, digest), key)


# What ``CertificateBuilder.sign`` takes (SHA-1 goes through :func:`_sign_sha1`); any other
# digest, or none, signs with SHA-256.
_SIGNING_DIGESTS = (hashes.SHA224, hashes.SHA256, hashes.SHA384, hashes.SHA512)


def _sign_sha1(cert: x509.Certificate, signer_key: Key) -> x509.Certificate:
    """``cert`` signed again with SHA-1, which ``cryptography`` no longer does (OpenSSL
    still does, through pyOpenSSL's deprecated X509)."""
    import warnings

    from OpenSSL import crypto

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        legacy = crypto.X509.from_cryptography(cert)
        legacy.sign(crypto.PKey.from_cryptography_key(signer_key), "sha1")
        return legacy.to_cryptography()


class Pki:
    """A root (trusted: written to ``bundle``) and helpers to issue under it."""

    def __init__(self, directory: Path, *, root_cn: str = "Upwatch Test Root") -> None:
        self.root = build(_name(root_cn), ec_key(), None, ca=True, days=(-30, 3650))
        self.bundle = directory / "pki-root.pem"
        self.bundle.write_bytes(self.root.pem)
        self.dir = directory

    def ca(self, cn: str = "Upwatch Test Intermediate", issuer: Issued | None = None,
           **kw: Any) -> Issued:
        key = kw.pop("key", None) or ec_key()
        return build(_name(cn), key, issuer or self.root, ca=True, **kw)

    def leaf(self, issuer: Issued | None = None, hosts: Sequence[str] = HOSTS,
             cn: str = "localhost", **kw: Any) -> Issued:
        key = kw.pop("key", None) or ec_key()
        return build(_name(cn), key, issuer or self.root, ca=False, hosts=hosts, **kw)

    def crl(
        self, issuer: Issued, revoked: Sequence[tuple[Issued, x509.ReasonFlags | None]] = (),
        *, next_update_days: float = 7, signer: Issued | None = None,
    ) -> bytes:
        """A DER CRL in ``issuer``'s name, signed by ``signer`` (default: the issuer)."""
        t = now()
        builder = (x509.CertificateRevocationListBuilder()
                   .issuer_name(issuer.name)
                   .last_update(t - dt.timedelta(days=1))
                   .next_update(t + dt.timedelta(days=next_update_days)))
        for cert, reason in revoked:
            entry = (x509.RevokedCertificateBuilder()
                     .serial_number(cert.cert.serial_number)
                     .revocation_date(t - dt.timedelta(hours=2)))
            if reason is not None:
                entry = entry.add_extension(x509.CRLReason(reason), critical=False)
            builder = builder.add_revoked_certificate(entry.build())
        crl = builder.sign((signer or issuer).key, hashes.SHA256())
        return crl.public_bytes(serialization.Encoding.DER)


def server_context(leaf: Issued, chain: Sequence[Issued] = (), directory: Path | None = None
                   ) -> ssl.SSLContext:
    """A server context sending ``leaf`` then ``chain`` in that order, at security level 0."""
    import tempfile

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
    key_pem = leaf.key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption())
    with tempfile.NamedTemporaryFile("wb", suffix=".pem", dir=directory, delete=False) as f:
        f.write(leaf.pem + b"".join(c.pem for c in chain) + key_pem)
        path = f.name
    try:
        ctx.load_cert_chain(path)
    finally:
        Path(path).unlink()
    return ctx


class CrlServer:
    """A plain HTTP server on loopback serving CRLs: ``files[path]`` is the body, or
    ``"huge"`` (``huge_bytes`` of zeros, no Content-Length, then close), ``"huge-declared"``
    (the same with its Content-Length), ``"hang"`` (never answers). ``hits`` counts the
    requests per path and ``peers`` the client address of each."""

    def __init__(self, huge_bytes: int = 100 << 20) -> None:
        import asyncio

        self.files: dict[str, bytes | str] = {}
        self.hits: dict[str, int] = {}
        self.peers: list[str] = []
        self.huge_bytes = huge_bytes
        self.sent = 0  # body bytes written for "huge" paths
        self._server: asyncio.Server | None = None
        self._asyncio = asyncio
        self._writers: set[Any] = set()

    def url(self, path: str) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}{path}"

    async def __aenter__(self) -> CrlServer:
        self._server = await self._asyncio.start_server(self._client, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _client(self, reader: Any, writer: Any) -> None:
        asyncio = self._asyncio
        self._writers.add(writer)
        self.peers.append(str(writer.get_extra_info("peername")[0]))
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            path = head.split(b" ")[1].decode()
            self.hits[path] = self.hits.get(path, 0) + 1
            body = self.files.get(path)
            if body is None:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            elif body == "hang":
                await asyncio.sleep(3600)
            elif body in ("huge", "huge-declared"):
                length = (f"Content-Length: {self.huge_bytes}\r\n"
                          if body == "huge-declared" else "")
                writer.write(f"HTTP/1.1 200 OK\r\n{length}Connection: close\r\n\r\n".encode())
                chunk = bytes(1 << 16)
                while self.sent < self.huge_bytes and not writer.is_closing():
                    writer.write(chunk)
                    self.sent += len(chunk)
                    await writer.drain()
            else:
                assert isinstance(body, bytes)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/pkix-crl\r\n"
                             b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
                writer.write(body)
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            writer.transport.abort()
