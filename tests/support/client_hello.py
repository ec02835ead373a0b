"""Reading the ClientHello the HTTPS probe's TLS layer (engine/probes/openssl_layer.py)
writes, for the tests of what it offers: its cipher suites and extensions (RFC 8446, 4.1.2)."""

from __future__ import annotations

from typing import Any

from engine.probes import openssl_layer

KEY_SHARE, SUPPORTED_VERSIONS = 0x0033, 0x002B


def client_hello(conn: openssl_layer.Conn) -> bytes:
    """The first flight of a fresh client connection: its ClientHello record."""
    assert openssl_layer.handshake(conn) is False  # wants the server's answer
    hello = openssl_layer.outgoing(conn)
    assert hello is not None and hello[0] == 0x16  # a handshake record
    return hello


def probe_hello(session: Any = None, sni: str = "localhost") -> bytes:
    """The ClientHello of a probe's connection offering ``session`` (or none)."""
    return client_hello(
        openssl_layer.connection(openssl_layer.client_context(), sni, session))


def _suites_at(hello: bytes) -> int:
    p = 5 + 4 + 2 + 32  # record and handshake headers, legacy_version, random
    return p + 1 + hello[p]  # past legacy_session_id


def cipher_suites(hello: bytes) -> list[int]:
    p = _suites_at(hello)
    n = int.from_bytes(hello[p:p + 2], "big")
    return [int.from_bytes(hello[q:q + 2], "big") for q in range(p + 2, p + 2 + n, 2)]


def extension(hello: bytes, kind: int) -> bytes | None:
    """The body of the extension ``kind``; None without one."""
    p = _suites_at(hello)
    p += 2 + int.from_bytes(hello[p:p + 2], "big")  # cipher_suites
    p += 1 + hello[p]  # legacy_compression_methods
    end = p + 2 + int.from_bytes(hello[p:p + 2], "big")
    p += 2
    while p < end:
        size = int.from_bytes(hello[p + 2:p + 4], "big")
        if int.from_bytes(hello[p:p + 2], "big") == kind:
            return hello[p + 4:p + 4 + size]
        p += 4 + size
    return None


def key_share_groups(hello: bytes) -> list[int]:
    """The groups of the key_share extension (RFC 8446, 4.2.8); [] without one."""
    body = extension(hello, KEY_SHARE) or b""
    groups, q = [], 2
    while q < len(body):
        groups.append(int.from_bytes(body[q:q + 2], "big"))
        q += 4 + int.from_bytes(body[q + 2:q + 4], "big")
    return groups


def supported_versions(hello: bytes) -> list[int] | None:
    """The versions of the supported_versions extension (RFC 8446, 4.2.1); None without
    one."""
    body = extension(hello, SUPPORTED_VERSIONS)
    if body is None:
        return None
    return [int.from_bytes(body[i:i + 2], "big") for i in range(1, len(body), 2)]
