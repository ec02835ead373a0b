"""A test-only uptime scheme, ``echo://host:port`` (a line sent, a line back), registered
through the same seam as http(s): its rules (:class:`engine.monitors.scheme.Scheme`) and a
prober over a real loopback socket."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import pytest

from engine.domain.outcomes import HttpOutcome
from engine.monitors import requests, schemes
from engine.monitors.scheme import Scheme, UrlParts, refuse
from engine.runtime.secretbox import SecretBox


def _url_rules(parts: UrlParts, field: str) -> UrlParts:
    if not parts.port:
        raise refuse(field, f"The {field} must name a port.")
    if parts.path not in ("", "/") or parts.query:
        raise refuse(field, f"An echo {field} has no path or query.")
    return UrlParts(parts.scheme, parts.host, parts.url_host, parts.port, "", "")


def _config_rules(body: Mapping[str, Any], creating: bool) -> requests.Config:
    if body.get("request") is not None:
        raise refuse("request", "An echo monitor sends no request.")
    return requests.Config(None, None)


def _spec_rules(box: SecretBox, limit: int, configured: Any, owner: int) -> Any:
    return None


ECHO = Scheme("echo", "Echo", None, False, _url_rules, _config_rules, _spec_rules)


@contextmanager
def echo_registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[Scheme]:
    """``echo`` registered for the block (the registry is a plain dict at run time)."""
    with monkeypatch.context() as m:
        m.setitem(schemes.SCHEMES, "echo", ECHO)  # type: ignore[index]
        yield ECHO


class EchoProber:
    """Connects to the URL's port on loopback, sends ``ping``, expects ``pong``; records
    every URL it probed."""

    def __init__(self) -> None:
        self.probed: list[str] = []

    async def probe(self, url: str, spec: Any = None) -> HttpOutcome:
        self.probed.append(url)
        host, _, port = url.removeprefix("echo://").rpartition(":")
        start = time.perf_counter()
        try:
            async with asyncio.timeout(2):
                reader, writer = await asyncio.open_connection(host, int(port))
                try:
                    writer.write(b"ping\n")
                    reply = (await reader.readline()).decode().strip()
                finally:
                    writer.close()
        except (OSError, TimeoutError) as exc:
            error = "connection refused" if isinstance(exc, ConnectionRefusedError) else str(exc)
            return HttpOutcome(None, error, (time.perf_counter() - start) * 1000, None, None,
                               None, None)
        ms = (time.perf_counter() - start) * 1000
        return HttpOutcome(None, None, ms, None, None, None, ms,
                           assertion_error=None if reply == "pong" else f"replied {reply!r}",
                           details={"reply": reply})

    async def aclose(self) -> None:
        pass


class EchoServer:
    """A loopback server answering each line with ``reply``; :meth:`close` stops it (its
    port then refuses)."""

    def __init__(self) -> None:
        self.reply = "pong"
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> EchoServer:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()
            self.server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await reader.readline()
            writer.write(self.reply.encode() + b"\n")
            await writer.drain()
        finally:
            writer.close()
