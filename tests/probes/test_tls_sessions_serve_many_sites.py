"""Uptime probes resume TLS sessions at the scale of a node's monitors: sessions are kept
compactly (a few hundred bytes, no certificate), as many as ``tls_sessions`` says (a
validated setting, 50,000 by default), a full cache keeps what it has instead of cycling
through more sites than it holds (which would resume none), sessions unused for a while
go, and the engine counts resumed handshakes in ``/metrics``."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from engine import USER_AGENT
from engine.db.store import Store
from engine.probes import openssl_layer
from engine.probes.http import HttpProber
from engine.probes.sessions import TlsSessions
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings
from tests.support.engine_support import add_monitor, fast_settings, running_engine
from tests.support.metrics import sample
from tests.support.targets import HttpTarget, TlsCerts
from tests.support.wait import wait_until


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TlsCerts:
    return TlsCerts(tmp_path_factory.mktemp("certs"))


@pytest.fixture(params=["1.2", "1.3"])
async def sites(request: pytest.FixtureRequest, certs: TlsCerts) -> AsyncIterator[
        list[HttpTarget]]:
    """Three HTTPS sites (three ports: three sessions to keep)."""
    out = []
    version = ssl.TLSVersion.TLSv1_2 if request.param == "1.2" else ssl.TLSVersion.TLSv1_3
    try:
        for _ in range(3):
            ctx = certs.server_context()
            ctx.minimum_version = ctx.maximum_version = version
            out.append(await HttpTarget(ssl_context=ctx).start())
        yield out
    finally:
        for s in out:
            await s.stop()


def hits(site: HttpTarget) -> int:
    assert site.ssl_context is not None
    return int(site.ssl_context.session_stats()["hits"])


async def test_more_sites_than_sessions_kept_resume_as_many_as_are_kept(
    sites: list[HttpTarget],
) -> None:
    """Probed in a cycle, three sites and room for two: the two kept resume every round
    after the first (a cache dropping its oldest for each new session resumed none)."""
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True,
                        tls_sessions=2)
    for _ in range(4):
        for s in sites:
            o = await prober.probe(s.url("/", host="localhost"))
            assert o.status_code == 200, o
    assert [hits(s) for s in sites] == [3, 3, 0]
    assert (prober.tls_handshakes, prober.tls_resumed) == (12, 6)
    assert len(prober._sessions) == 2
    await prober.aclose()


async def test_a_kept_session_is_compact_and_holds_no_certificate(
    sites: list[HttpTarget],
) -> None:
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True)
    url = sites[0].url("/", host="localhost")
    assert (await prober.probe(url)).status_code == 200
    (kept,) = list(prober._sessions._current.values())
    assert isinstance(kept, bytes) and len(kept) < 1024
    assert openssl_layer.without_peer(kept) == kept  # nothing left to strip
    for _ in range(2):  # and it resumes, from its bytes
        assert (await prober.probe(url)).status_code == 200
    assert prober.tls_resumed == 2 and hits(sites[0]) == 2
    await prober.aclose()


async def test_a_kept_session_that_does_not_parse_gets_a_full_handshake(
    sites: list[HttpTarget],
) -> None:
    prober = HttpProber(timeout=3.0, user_agent=USER_AGENT, allow_private=True)
    site = sites[0]
    prober._sessions.keep(TlsSessions.key("127.0.0.1", site.port, "localhost"),
                          b"\x30\x03\x02\x01\x01garbage", 0.0)
    o = await prober.probe(site.url("/", host="localhost"))
    assert o.status_code == 200, o
    assert (prober.tls_handshakes, prober.tls_resumed, hits(site)) == (1, 0, 0)
    # Not resumed: dropped, as a declined one; the next probe's is kept and resumed.
    for _ in range(2):
        assert (await prober.probe(site.url("/", host="localhost"))).status_code == 200
    assert (prober.tls_handshakes, prober.tls_resumed, hits(site)) == (3, 1, 1)
    await prober.aclose()


def test_sessions_unused_for_a_turn_go_and_make_room() -> None:
    cache = TlsSessions(2, idle=100.0)
    a, b, c = (TlsSessions.key("192.0.2.1", 443, n) for n in ("a", "b", "c"))
    cache.keep(a, b"A", 0.0)
    cache.keep(b, b"B", 1.0)
    cache.keep(c, b"C", 2.0)  # full: turned away, the two kept stay
    assert (cache.get(a), cache.get(b), cache.get(c)) == (b"A", b"B", None)
    cache.keep(a, b"A2", 150.0)  # a new turn: a is used again, b is not
    cache.keep(c, b"C", 160.0)  # still full (b may yet be used)
    assert cache.get(c) is None
    cache.keep(c, b"C", 260.0)  # another turn: b went unused for a whole one
    assert (cache.get(a), cache.get(b), cache.get(c)) == (b"A2", None, b"C")
    cache.drop(a)
    assert cache.get(a) is None and len(cache) == 1
    assert TlsSessions(0).limit == 0


def test_the_setting_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings(data_dir=tmp_path).tls_sessions == 50_000
    with pytest.raises(ValidationError, match="tls_sessions"):
        Settings(data_dir=tmp_path, tls_sessions=-1)
    monkeypatch.setenv("UPWATCH_TLS_SESSIONS", "0")
    assert Settings(data_dir=tmp_path).tls_sessions == 0


@pytest.mark.parametrize("kept", [50_000, 0])
async def test_the_engine_counts_resumed_handshakes_in_metrics(
    store: Store, account: tuple[Any, str], tmp_path: Path, certs: TlsCerts, kept: int,
) -> None:
    acc, _ = account
    settings = fast_settings(tmp_path, tls_sessions=kept)
    metrics = Metrics()
    async with HttpTarget(ssl_context=certs.server_context()) as site:
        await add_monitor(store, acc.id, site.url("/", host="localhost"))

        def handshakes(resumed: str) -> float:
            return sample(metrics, "upwatch_tls_handshakes_total", resumed=resumed)

        async with running_engine(store, settings, metrics=metrics):
            async def probed() -> bool:
                return handshakes("true") + handshakes("false") >= 3

            await wait_until(probed, timeout=15, what="three HTTPS probes")
        text = metrics.render()[0].decode()
        assert 'upwatch_tls_handshakes_total{resumed="true"}' in text
        if kept:
            assert handshakes("true") >= 2 and handshakes("false") == 1
            assert hits(site) == handshakes("true")
        else:
            assert handshakes("true") == 0 and hits(site) == 0
