"""A registry's RDAP server on loopback, and the bootstrap file that points at it.

:class:`RdapRegistry` answers ``GET /rdap/domain/<name>`` like a registry (RFC 9083 domain
objects) for the domains in ``domains`` (change them to renew one), 404 for others, and
behaves badly for a few names: ``slow.<tld>`` (never answers in time), ``garbage.<tld>``
(not JSON), ``loop.<tld>`` (redirects to itself), ``huge.<tld>`` (50 MB, streamed).
``queries`` counts the domain queries by name. :meth:`bootstrap` writes a ``dns.json``
listing ``tlds`` at this server, for ``UPWATCH_RDAP_BOOTSTRAP_URL=file://...``.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

HUGE_BYTES = 50 * 1024 * 1024


@dataclass
class Record:
    expires: datetime | None
    statuses: tuple[str, ...] = ("active",)
    registrar: str = "Loopback Registrar, Inc."
    nameservers: tuple[str, ...] = ("ns1.loopback.test", "ns2.loopback.test")


def domain_object(name: str, rec: Record) -> dict[str, Any]:
    events = [{"eventAction": "registration", "eventDate": "2020-01-01T00:00:00Z"}]
    if rec.expires is not None:
        events.append({"eventAction": "expiration",
                       "eventDate": rec.expires.strftime("%Y-%m-%dT%H:%M:%SZ")})
    return {
        "objectClassName": "domain",
        "ldhName": name.upper(),
        "rdapConformance": ["rdap_level_0"],
        "status": list(rec.statuses),
        "events": events,
        "entities": [{
            "objectClassName": "entity", "handle": "9999", "roles": ["registrar"],
            "vcardArray": ["vcard", [["version", {}, "text", "4.0"],
                                     ["fn", {}, "text", rec.registrar]]],
        }],
        "nameservers": [{"objectClassName": "nameserver", "ldhName": ns.upper()}
                        for ns in rec.nameservers],
    }


@dataclass
class RdapRegistry:
    domains: dict[str, Record] = field(default_factory=dict)
    queries: Counter[str] = field(default_factory=Counter)
    slow_seconds: float = 4.0
    _runner: web.AppRunner | None = None
    port: int = 0

    async def start(self) -> RdapRegistry:
        app = web.Application()
        app.router.add_get("/rdap/domain/{name}", self._domain)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> RdapRegistry:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}/rdap/"

    def bootstrap(self, path: Path, tlds: tuple[str, ...] = ("test",)) -> str:
        """Write dns.json at ``path``; its file:// URL."""
        path.write_bytes(orjson.dumps({
            "version": "1.0", "publication": "2026-11-01T00:00:00Z",
            "services": [[list(tlds), [self.base]]],
        }))
        return path.as_uri()

    async def _domain(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"].lower()
        self.queries[name] += 1
        label = name.split(".", 1)[0]
        if label == "slow":
            await asyncio.sleep(self.slow_seconds)
        if label == "garbage":
            return web.Response(body=b"<html>Service Unavailable</html>",
                                content_type="application/rdap+json")
        if label == "loop":
            raise web.HTTPFound(str(request.url))
        if label == "huge":
            resp = web.StreamResponse(headers={"Content-Type": "application/rdap+json"})
            await resp.prepare(request)
            chunk = b" " * (1 << 20)
            try:
                for _ in range(HUGE_BYTES // len(chunk)):
                    await resp.write(chunk)
            except (ConnectionError, RuntimeError):
                pass  # the client stopped reading, as it should
            return resp
        rec = self.domains.get(name)
        if rec is None:
            return web.json_response({"errorCode": 404, "title": "Not Found"}, status=404,
                                     content_type="application/rdap+json")
        return web.Response(body=orjson.dumps(domain_object(name, rec)),
                            content_type="application/rdap+json")
