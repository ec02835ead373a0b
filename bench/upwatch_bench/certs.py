"""A throw-away CA and one server certificate for the TLS targets, made at run time.

ECDSA P-256 throughout: cheap for the targets to sign with, so the server side of each
handshake costs little on the shared core, and the certificate probes' verification is the
same work a real site with an ECDSA certificate asks for. The leaf names every loopback
address the targets serve (IP SANs) plus ``localhost``; the engine trusts the CA through
``Settings.ca_bundle`` (``UPWATCH_CA_BUNDLE``), so certificate probes verify and succeed.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class CertFiles:
    ca: Path  # CA certificate (PEM): the bundle clients trust
    cert: Path  # server certificate (PEM)
    key: Path  # server key (PEM, unencrypted, mode 0600)


def _name(cn: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Upwatch bench"),
        x509.NameAttribute(NameOID.COMMON_NAME, cn),
    ])


def make_certs(directory: Path, addresses: Iterable[str]) -> CertFiles:
    """Write ``ca.pem``, ``server.pem`` and ``server.key`` into ``directory``."""
    now = dt.datetime.now(dt.UTC)
    start, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=7)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Upwatch bench CA")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = [x509.DNSName("localhost")]
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("upwatch-bench-target"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )

    directory.mkdir(parents=True, exist_ok=True)
    files = CertFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files.key.touch(mode=0o600)
    files.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return files


@dataclass(frozen=True)
class WorldCerts:
    """The internet world's CA and one (certificate, key) pair per TLS server kind."""

    ca: Path
    pairs: dict[str, tuple[Path, Path]]


def make_world_certs(directory: Path, zone: str, addresses: dict[str, str],
                     kinds: dict[str, str], expired: Iterable[str] = ()) -> WorldCerts:
    """A CA and, per server kind (``kinds``: kind -> "ecdsa" | "rsa"), a leaf for
    ``*.<zone>`` and the kind's address (``addresses``); kinds in ``expired`` get a leaf that
    expired yesterday (the certificate check must say so)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Upwatch bench world CA")
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=30)).not_valid_after(now + dt.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    gone = set(expired)
    pairs: dict[str, tuple[Path, Path]] = {}
    for kind, key_type in kinds.items():
        key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if key_type == "rsa" else ec.generate_private_key(ec.SECP256R1()))
        end = now - dt.timedelta(days=1) if kind in gone else now + dt.timedelta(days=7)
        sans: list[x509.GeneralName] = [x509.DNSName(f"*.{zone}")]
        if kind in addresses:
            sans.append(x509.IPAddress(ipaddress.ip_address(addresses[kind])))
        leaf = (
            x509.CertificateBuilder().subject_name(_name(f"{kind}.{zone}"))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=20)).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        cert_path, key_path = directory / f"{kind}.pem", directory / f"{kind}.key"
        cert_path.write_bytes(leaf.public_bytes(pem))
        key_path.touch(mode=0o600)
        key_path.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
        pairs[kind] = (cert_path, key_path)
    return WorldCerts(directory / "ca.pem", pairs)
