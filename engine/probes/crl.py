"""Revocation by CRL for the certificate probe: fetch, verify, cache, judge.

:meth:`CrlChecker.check` judges a leaf against the CRL its distribution point names. The
CRL is fetched over plain HTTP under the probes' private-address rule and timeout, read to
at most ``max_bytes`` (a longer one is refused while reading, never held whole), parsed
off the loop, its issuer name and signature checked against the leaf's issuer, and cached
until its ``nextUpdate`` (a fetch that failed, or a CRL past its ``nextUpdate``, is tried
again after ``retry_after`` seconds). The cache is bounded in entries and in bytes (oldest
out first); one fetch per URL is in flight however many probes ask. A fetch outlives the
probe that started it (the next probe finds it cached); a probe waits at most ``wait``
seconds for it. Every failure is a :class:`~engine.domain.certdiagnosis.Revocation` with
status "unknown" and the reason in words: never an exception, never a verdict of its own.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final
from urllib.parse import urlsplit

from cryptography import x509

from engine.domain.certdiagnosis import ChainCert, Revocation
from engine.domain.netpolicy import Resolver
from engine.domain.timefmt import fmt
from engine.probes.addresses import ip_literal, resolve_checked
from engine.probes.failures import ProbeFailure, short, timeout_words

log = logging.getLogger(__name__)

MAX_CRL_BYTES: Final = 16 << 20
CACHE_ENTRIES: Final = 64
CACHE_BYTES: Final = 128 << 20
RETRY_AFTER: Final = 300.0
_HEADER_LIMIT: Final = 64 << 10
_ENTRY_COST: Final = 160  # bytes held per revoked serial in the lookup table (estimate)


class CrlError(Exception):
    """A CRL that could not be used; the message is the reason in words."""


@dataclass(slots=True)
class _Entry:
    expires: datetime  # when to fetch again
    cost: int
    error: str | None = None
    issuer_der: bytes = b""  # the CRL's issuer name
    next_update: datetime | None = None
    revoked: _Revoked | None = None
    crl: x509.CertificateRevocationList | None = None
    verified_with: bytes | None = None  # the issuer certificate (DER) that verified it


_Revoked = dict[int, tuple[datetime, str | None]]  # serial -> (revocation date, reason)


def _parse(data: bytes) -> tuple[x509.CertificateRevocationList, _Revoked]:
    """The CRL and its revoked serials (run in a worker thread: a big CRL takes a while)."""
    try:
        crl = x509.load_der_x509_crl(data)
    except ValueError:
        try:
            crl = x509.load_pem_x509_crl(data)
        except ValueError:
            raise CrlError("not a CRL (neither DER nor PEM)") from None
    table: _Revoked = {}
    for entry in crl:
        reason: str | None = None
        try:
            ext = entry.extensions.get_extension_for_class(x509.CRLReason)
            reason = ext.value.reason.value
        except (x509.ExtensionNotFound, ValueError):
            pass
        table[entry.serial_number] = (entry.revocation_date_utc, reason)
    return crl, table


async def fetch_crl(
    url: str, *, timeout: float, max_bytes: int, allow_private: bool,
    resolver: Resolver | None = None, family: int = 0, source_address: str | None = None,
) -> bytes:
    """The body of ``GET url`` (http only, status 200, at most ``max_bytes``) within
    ``timeout`` seconds, from ``source_address`` when given; raises :class:`CrlError` with
    the reason in words."""
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme != "http" or not host:
        raise CrlError(f"CRL URL is not a plain http URL: {short(url)}")
    try:
        port = parts.port or 80
    except ValueError:
        raise CrlError(f"CRL URL has a bad port: {short(url)}") from None
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        async with asyncio.timeout(timeout):
            try:
                addrs, _ = await resolve_checked(
                    host, port, literal=ip_literal(host), family=family,
                    allow_private=allow_private, resolver=resolver)
            except ProbeFailure as exc:
                raise CrlError(str(exc)) from None
            local = (source_address, 0) if source_address else None
            return await _get(addrs[0], port, host, path, max_bytes, local)
    except TimeoutError:
        raise CrlError(timeout_words(timeout)) from None
    except OSError as exc:
        raise CrlError(f"connection failed: {exc.strerror or type(exc).__name__}") from None


async def _get(ip: str, port: int, host: str, path: str, max_bytes: int,
               local: tuple[str, int] | None) -> bytes:
    reader, writer = await asyncio.open_connection(ip, port, limit=_HEADER_LIMIT,
                                                   local_addr=local)
    try:
        hostport = host if port == 80 else f"{host}:{port}"
        if ":" in host and not host.startswith("["):
            hostport = f"[{host}]" if port == 80 else f"[{host}]:{port}"
        writer.write(
            f"GET {path} HTTP/1.1\r\nHost: {hostport}\r\nUser-Agent: Upwatch\r\n"
            f"Accept: application/pkix-crl\r\nConnection: close\r\n\r\n".encode("latin-1"))
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            raise CrlError("invalid HTTP response from the CRL server") from None
        lines = head.decode("latin-1").split("\r\n")
        status = lines[0].split(" ", 2)
        if len(status) < 2 or not status[1].isdigit():
            raise CrlError("invalid HTTP response from the CRL server")
        if status[1] != "200":
            raise CrlError(f"the CRL server answered HTTP {status[1]}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        too_big = f"CRL over the {max_bytes >> 20} MiB limit"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return await _chunked(reader, max_bytes, too_big)
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                raise CrlError("invalid HTTP response from the CRL server")
            if int(length) > max_bytes:
                raise CrlError(too_big)
            try:
                return await reader.readexactly(int(length))
            except asyncio.IncompleteReadError:
                raise CrlError("the CRL server closed the connection early") from None
        body = await reader.read(max_bytes + 1)
        while len(body) <= max_bytes:
            more = await reader.read(max_bytes + 1 - len(body))
            if not more:
                return body
            body += more
        raise CrlError(too_big)
    finally:
        writer.transport.abort()


async def _chunked(reader: asyncio.StreamReader, max_bytes: int, too_big: str) -> bytes:
    body = bytearray()
    for _ in range(max_bytes + 1):  # bounded: every round reads at least one line
        try:
            size_line = await reader.readuntil(b"\r\n")
            size = int(size_line.split(b";")[0].strip() or b"x", 16)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError):
            raise CrlError("invalid chunked body from the CRL server") from None
        if size == 0:
            return bytes(body)
        if len(body) + size > max_bytes:
            raise CrlError(too_big)
        try:
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        except asyncio.IncompleteReadError:
            raise CrlError("the CRL server closed the connection early") from None
    raise CrlError(too_big)


def _signed_by(crl: x509.CertificateRevocationList, issuer_der: bytes) -> bool:
    try:
        key = x509.load_der_x509_certificate(issuer_der).public_key()
        return crl.is_signature_valid(key)  # type: ignore[arg-type, unused-ignore]
    except Exception:  # an unsupported key or a broken certificate
        return False


class CrlChecker:
    """See the module docstring; one per certificate prober."""

    def __init__(
        self, *, timeout: float, allow_private: bool, resolver: Resolver | None = None,
        family: int = 0, source_address: str | None = None, max_bytes: int = MAX_CRL_BYTES,
        entries: int = CACHE_ENTRIES, budget: int = CACHE_BYTES,
        retry_after: float = RETRY_AFTER,
    ) -> None:
        self._timeout = timeout
        self._allow_private = allow_private
        self._resolver = resolver
        self._family = family
        self._source = source_address
        self._max_bytes = max_bytes
        self._entries = entries
        self._budget = budget
        self._retry = timedelta(seconds=retry_after)
        self._cache: dict[str, _Entry] = {}
        self._held = 0
        self._inflight: dict[str, asyncio.Task[_Entry]] = {}

    @property
    def held_bytes(self) -> int:
        return self._held

    def close(self) -> None:
        for task in self._inflight.values():
            task.cancel()
        self._inflight.clear()

    async def check(
        self, leaf: ChainCert, issuer_der: bytes | None, now: datetime, wait: float
    ) -> Revocation | None:
        """The revocation verdict for ``leaf`` (None when it names no http CRL);
        ``issuer_der`` the certificate that issued it (None: not known)."""
        url = next((u for u in leaf.crl_urls if u.startswith("http://")), None)
        if url is None:
            return None
        entry = self._cache.get(url)
        if entry is None or entry.expires <= now:
            try:
                entry = await asyncio.wait_for(asyncio.shield(self._fetching(url)), wait)
            except TimeoutError:
                if entry is None:
                    return Revocation("unknown", url, error="CRL not fetched in time")
        return self._judge(entry, url, leaf, issuer_der, now)

    def _fetching(self, url: str) -> asyncio.Task[_Entry]:
        task = self._inflight.get(url)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._load(url))
            self._inflight[url] = task
            task.add_done_callback(lambda _t: self._inflight.pop(url, None))
        return task

    async def _load(self, url: str) -> _Entry:
        started = datetime.now(UTC)
        try:
            data = await fetch_crl(
                url, timeout=self._timeout, max_bytes=self._max_bytes,
                allow_private=self._allow_private, resolver=self._resolver,
                family=self._family, source_address=self._source)
            crl, table = await asyncio.to_thread(_parse, data)
        except CrlError as exc:
            entry = _Entry(started + self._retry, 0, error=f"CRL not fetched: {exc}")
        except Exception:
            log.exception("CRL fetch from %s failed unexpectedly", url)
            entry = _Entry(started + self._retry, 0, error="CRL not fetched: internal error")
        else:
            next_update = crl.next_update_utc
            expires = next_update if next_update is not None and next_update > started \
                else started + self._retry
            entry = _Entry(expires, len(data) + _ENTRY_COST * len(table),
                           issuer_der=crl.issuer.public_bytes(), next_update=next_update,
                           revoked=table, crl=crl)
        self._store(url, entry)
        return entry

    def _store(self, url: str, entry: _Entry) -> None:
        old = self._cache.pop(url, None)
        if old is not None:
            self._held -= old.cost
        if entry.cost > self._budget:
            return
        while self._cache and (len(self._cache) >= self._entries
                               or self._held + entry.cost > self._budget):
            oldest = next(iter(self._cache))
            self._held -= self._cache.pop(oldest).cost
        self._cache[url] = entry
        self._held += entry.cost

    def _judge(
        self, entry: _Entry, url: str, leaf: ChainCert, issuer_der: bytes | None, now: datetime
    ) -> Revocation:
        if entry.error is not None or entry.crl is None or entry.revoked is None:
            return Revocation("unknown", url, error=entry.error or "CRL not fetched")
        if entry.issuer_der != leaf.issuer_der:
            return Revocation("unknown", url, error=(
                f"CRL at {short(url)} is issued by {entry.crl.issuer.rfc4514_string()}, "
                f"not by the certificate's issuer {leaf.issuer}"))
        if issuer_der is None:
            return Revocation("unknown", url, error="CRL not checked: the issuer certificate "
                                                    "is not known")
        if entry.verified_with != issuer_der:
            if not _signed_by(entry.crl, issuer_der):
                return Revocation("unknown", url, error=(
                    f"CRL at {short(url)} is not signed by the certificate's issuer "
                    f"{leaf.issuer}"))
            entry.verified_with = issuer_der
        hit = entry.revoked.get(leaf.serial)
        if hit is not None:
            return Revocation("revoked", url, revoked_at=hit[0], reason=hit[1] or "unspecified")
        if entry.next_update is not None and entry.next_update < now:
            return Revocation("unknown", url, error=(
                f"CRL out of date: its next update was due {fmt(entry.next_update)} UTC"))
        return Revocation("good", url)


__all__ = ["CrlChecker", "CrlError", "fetch_crl"]
