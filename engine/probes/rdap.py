"""The RDAP client: which registry answers for a TLD (the IANA bootstrap) and what it says
about a domain.

- The bootstrap (``dns.json``) is read from ``bootstrap_url`` (http(s), or ``file://`` for
  tests and air-gapped installs), kept a week, and retried after an hour when it cannot be
  read; until one has been read, the copy bundled with the package (``rdap_dns.json``, the
  registries of the most used TLDs) serves.
- Every GET goes to an address checked against the private-address rule (resolved here,
  every address of the answer checked, IP literals too, at every redirect), with one time
  budget for the whole lookup (redirects included), at most :data:`MAX_REDIRECTS`
  redirects (a loop is named), and at most :data:`MAX_BODY` bytes read.
- :meth:`RdapClient.lookup` never raises (but for cancellation): a failure is an
  :class:`RdapAnswer` with the reason in words.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote, urljoin, urlsplit

import aiohttp
import orjson
from aiohttp.abc import AbstractResolver, ResolveResult

from engine.domain.netpolicy import Resolver, is_public_ip, literal_ip, resolve
from engine.domain.rdap import (
    RdapGarbage,
    Registration,
    parse_bootstrap,
    parse_domain,
    tld_of,
)

DEFAULT_BOOTSTRAP_URL: Final = "https://data.iana.org/rdap/dns.json"
BOOTSTRAP_TTL: Final = 7 * 86400.0
BOOTSTRAP_RETRY: Final = 3600.0
MAX_BODY: Final = 1 << 20  # a registry's answer is a few KB
MAX_BOOTSTRAP: Final = 4 << 20  # IANA's dns.json is ~40 KB
MAX_REDIRECTS: Final = 5
_REDIRECTS: Final = (301, 302, 303, 307, 308)
_ACCEPT: Final = "application/rdap+json, application/json;q=0.9"


class RdapFailure(Exception):
    """A GET that gave no usable document; the message says why, in words."""


@dataclass(frozen=True, slots=True)
class RdapAnswer:
    """One lookup: ``registration``, or ``error`` (it failed), or ``unsupported`` (no
    registry publishes RDAP for the TLD). ``server``: the registry's base URL."""

    registration: Registration | None
    server: str | None = None
    error: str | None = None
    unsupported: str | None = None


class _CheckedResolver(AbstractResolver):
    """aiohttp's name lookups, through the private-address rule."""

    def __init__(self, allow_private: bool, resolver: Resolver | None) -> None:
        self._allow_private = allow_private
        self._resolver = resolver

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        try:
            addrs = (await self._resolver(host, port) if self._resolver is not None
                     else await resolve(host, port))
        except OSError:
            raise
        except Exception as exc:  # a stand-in resolver's failure is a lookup failure
            raise OSError(f"{host} does not resolve ({exc})") from exc
        if not addrs:
            raise OSError(f"{host} has no address")
        _ensure(addrs, self._allow_private, host)
        return [
            ResolveResult(hostname=host, host=a, port=port,
                          family=socket.AF_INET6 if ":" in a else socket.AF_INET,
                          proto=0, flags=socket.AI_NUMERICHOST)
            for a in addrs
        ]

    async def close(self) -> None:
        return None


def _ensure(addrs: list[str], allow_private: bool, host: str) -> None:
    if allow_private:
        return
    for a in addrs:
        if not is_public_ip(a):
            raise _Blocked(f"{host} resolves to a non-public address ({a})")


class _Blocked(OSError):
    pass


def bundled_bootstrap() -> dict[str, str]:
    """The bootstrap shipped with the package."""
    data = resources.files("engine.probes").joinpath("rdap_dns.json").read_bytes()
    return parse_bootstrap(orjson.loads(data))


class RdapClient:
    """See the module docstring. ``clock``: seconds (the bootstrap's age)."""

    def __init__(
        self,
        *,
        bootstrap_url: str = DEFAULT_BOOTSTRAP_URL,
        allow_private: bool = False,
        timeout: float = 10.0,
        resolver: Resolver | None = None,
        max_body: int = MAX_BODY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bootstrap_url = bootstrap_url
        self._allow_private = allow_private
        self._timeout = timeout
        self._resolver = resolver
        self._max_body = max_body
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None
        self._servers: dict[str, str] | None = None
        self._servers_until = 0.0
        self._bootstrap_lock = asyncio.Lock()
        self.bootstrap_note: str | None = None  # why the bundled copy serves, if it does
        self.gets = 0  # GETs sent to registries (and for the bootstrap): what the figures count

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                resolver=_CheckedResolver(self._allow_private, self._resolver),
                use_dns_cache=False, force_close=True, limit=32)
            self._session = aiohttp.ClientSession(
                connector=connector, auto_decompress=True,
                headers={"Accept": _ACCEPT, "User-Agent": "upwatch (domain expiry)"})
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- the bootstrap ------------------------------------------------------------------

    async def servers(self) -> dict[str, str]:
        """{tld: RDAP base URL}: the fetched bootstrap while fresh, else the bundled copy."""
        if self._servers is not None and self._clock() < self._servers_until:
            return self._servers
        async with self._bootstrap_lock:
            if self._servers is not None and self._clock() < self._servers_until:
                return self._servers
            try:
                async with asyncio.timeout(self._timeout):
                    raw = await self._bootstrap_bytes()
                self._servers = parse_bootstrap(_json(raw, "the RDAP bootstrap"))
                self._servers_until = self._clock() + BOOTSTRAP_TTL
                self.bootstrap_note = None
            except (RdapFailure, RdapGarbage, OSError, TimeoutError) as exc:
                reason = str(exc) or type(exc).__name__
                if isinstance(exc, TimeoutError):
                    reason = f"no answer within {self._timeout:g} s"
                self.bootstrap_note = (
                    f"the RDAP bootstrap at {self.bootstrap_url} could not be read "
                    f"({reason}); the bundled copy serves")
                if self._servers is None:
                    self._servers = bundled_bootstrap()
                self._servers_until = self._clock() + BOOTSTRAP_RETRY
            return self._servers

    async def _bootstrap_bytes(self) -> bytes:
        parts = urlsplit(self.bootstrap_url)
        if parts.scheme == "file":
            path = Path(unquote(parts.path))
            data = await asyncio.to_thread(_read_bounded, path, MAX_BOOTSTRAP)
            return data
        return await self._get(self.bootstrap_url, MAX_BOOTSTRAP)

    # -- lookups ------------------------------------------------------------------------

    async def unsupported(self, domain: str) -> str | None:
        """Why ``domain`` cannot be looked up (its TLD has no RDAP service), else None."""
        if tld_of(domain) in await self.servers():
            return None
        return (f"the .{tld_of(domain)} registry publishes no RDAP service "
                "(not in the IANA bootstrap)")

    async def lookup(self, domain: str) -> RdapAnswer:
        """The registry's answer about ``domain`` (a registrable domain, A-labels)."""
        servers = await self.servers()
        base = servers.get(tld_of(domain))
        if base is None:
            return RdapAnswer(None, unsupported=await self.unsupported(domain))
        url = urljoin(base, f"domain/{domain}")
        try:
            async with asyncio.timeout(self._timeout):
                body = await self._get(url, self._max_body, not_found=domain)
            reg = parse_domain(_json(body, "the RDAP answer"), domain)
        except TimeoutError:
            return RdapAnswer(None, base, error=(
                f"the RDAP server {_host(base)} did not answer within {self._timeout:g} s"))
        except (RdapFailure, RdapGarbage) as exc:
            return RdapAnswer(None, base, error=str(exc))
        except (OSError, aiohttp.ClientError) as exc:
            return RdapAnswer(None, base, error=(
                f"the RDAP server {_host(base)} cannot be reached: {_words(exc)}"))
        return RdapAnswer(reg, base)

    async def _get(self, url: str, limit: int, not_found: str | None = None) -> bytes:
        seen: set[str] = set()
        for _hop in range(MAX_REDIRECTS + 1):
            if url in seen:
                raise RdapFailure(f"the RDAP server {_host(url)} redirects in a loop")
            seen.add(url)
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise RdapFailure(f"the RDAP server sent a redirect to a URL that is "
                                  f"not http(s): {url[:200]}")
            lit = literal_ip(parts.hostname)
            if lit is not None and not self._allow_private and not is_public_ip(lit):
                raise RdapFailure(
                    f"the RDAP server {parts.hostname} is a non-public address")
            self.gets += 1
            try:
                async with self._client().get(url, allow_redirects=False) as resp:
                    if resp.status in _REDIRECTS:
                        location = resp.headers.get("Location")
                        if not location:
                            raise RdapFailure(
                                f"the RDAP server {_host(url)} redirects without a Location")
                        url = urljoin(url, location)
                        continue
                    if resp.status == 404 and not_found is not None:
                        raise RdapFailure(f"the registry has no record of {not_found}")
                    if resp.status != 200:
                        raise RdapFailure(
                            f"the RDAP server {_host(url)} answered HTTP {resp.status}")
                    if resp.content_length is not None and resp.content_length > limit:
                        raise RdapFailure(_too_large(url, limit))
                    body = bytearray()
                    async for chunk in resp.content.iter_chunked(64 * 1024):
                        body += chunk
                        if len(body) > limit:
                            raise RdapFailure(_too_large(url, limit))
                    return bytes(body)
            except aiohttp.ClientConnectorError as exc:
                if isinstance(exc.os_error, _Blocked):
                    raise RdapFailure(f"the RDAP server {exc.os_error}") from exc
                raise
        raise RdapFailure(f"the RDAP server {_host(url)} redirects more than "
                          f"{MAX_REDIRECTS} times")


def _read_bounded(path: Path, limit: int) -> bytes:
    with path.open("rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise RdapFailure(f"{path} is larger than {limit // (1 << 20)} MB")
    return data


def _json(raw: bytes, what: str) -> Any:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise RdapGarbage(f"{what} is not JSON") from exc


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or url[:100]
    except ValueError:
        return url[:100]


def _too_large(url: str, limit: int) -> str:
    return f"the RDAP server {_host(url)} sent more than {limit // 1024} KB"


def _words(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text[:200]
