"""An attacker who can reach a node's peer endpoint (``POST /internal/v1/confirm``) but has
no cluster secret: unsigned, forged, re-signed with another secret, stale, future,
replayed, tampered and re-targeted requests are all a 401 with a JSON message, and the node
never probes for them. Only a correctly signed, fresh, first-seen request is served, and
its answer is signed so that a forged answer cannot confirm an outage either.

The endpoint is mounted as the daemon mounts it (``peer_routes``) on a real loopback port.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import orjson
import pytest
from aiohttp import web

from engine.cluster.nodes import Membership
from engine.cluster.peer import CONFIRM_PATH, peer_routes
from engine.cluster.peerauth import H_NONCE, H_SIG, H_TS, sign_request, verify_response
from engine.domain.outcomes import HttpOutcome
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings

SECRET = "correct horse battery staple, but longer"
BODY = orjson.dumps({"check_id": 7})


@dataclass
class FakeTargets:
    async def confirm_target(self, check_id: int) -> str | None:
        return "https://shop.example/" if check_id == 7 else None

    async def confirm_config(self, check_id: int) -> None:
        return None  # a plain GET


@dataclass
class CountingProber:
    urls: list[str] = field(default_factory=list)

    async def probe(self, url: str) -> HttpOutcome:
        self.urls.append(url)
        return HttpOutcome(status_code=503, error=None, total_ms=12.0, dns_ms=None,
                           connect_ms=None, tls_ms=None, ttfb_ms=None, redirects=0,
                           remote_ip="192.0.2.1")


@dataclass
class Node:
    url: str
    prober: CountingProber


async def serve(tmp_path: Path, secret: str | None) -> tuple[web.AppRunner, Node]:
    settings = Settings(data_dir=tmp_path / "data", port=0, region="eu",
                        cluster_secret=secret, base_url="http://127.0.0.1:8080")
    prober = CountingProber()
    app = web.Application()
    app.router.add_routes(peer_routes(
        FakeTargets(), settings, prober, Membership("node-eu", "eu"), Metrics()))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, Node(f"http://127.0.0.1:{port}", prober)


@pytest.fixture
async def node(tmp_path: Path) -> AsyncIterator[Node]:
    runner, n = await serve(tmp_path, SECRET)
    try:
        yield n
    finally:
        await runner.cleanup()


async def post(
    url: str, headers: dict[str, str], body: bytes = BODY, path: str = CONFIRM_PATH
) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as s, s.post(
        url + path, data=body, headers={"Content-Type": "application/json", **headers}
    ) as r:
        return r.status, dict(r.headers), await r.read()


def signed(body: bytes = BODY, *, now: float | None = None, secret: str = SECRET,
           method: str = "POST", path: str = CONFIRM_PATH,
           nonce: str | None = None) -> dict[str, str]:
    return sign_request(secret.encode(), method, path, body,
                        time.time() if now is None else now, nonce)


def assert_refused(answer: tuple[int, dict[str, str], bytes], reason: str) -> None:
    status, headers, body = answer
    assert status == 401, (status, body)
    assert headers["Content-Type"].startswith("application/json")
    assert orjson.loads(body) == {"message": f"Peer authentication failed: {reason}."}
    assert H_SIG not in headers  # a refusal carries no signed verdict


async def test_a_correctly_signed_request_is_served_with_a_signed_answer(node: Node) -> None:
    headers = signed()
    status, answer_headers, body = await post(node.url, headers)
    assert status == 200, body
    verify_response(SECRET.encode(), 200, headers[H_NONCE], body, answer_headers, time.time())
    assert orjson.loads(body)["status_code"] == 503
    assert node.prober.urls == ["https://shop.example/"]


def tampered(name: str) -> tuple[dict[str, str], bytes, str]:
    """(headers, body, reason refused) of one attack, signed now: at collection time the
    timestamps would go stale before a long test run reaches them."""
    now = time.time()
    good = signed(now=now)
    cases: dict[str, tuple[dict[str, str], bytes, str]] = {
        "unsigned": ({}, BODY, "unsigned request"),
        "only a signature": ({H_SIG: good[H_SIG]}, BODY, "unsigned request"),
        "zero signature": ({**good, H_SIG: "0" * 64}, BODY, "bad signature"),
        "empty signature": ({**good, H_SIG: ""}, BODY, "unsigned request"),
        "signature of another secret": (signed(now=now, secret="guess"), BODY,
                                        "bad signature"),
        "body changed": (good, orjson.dumps({"check_id": 8}), "bad signature"),
        "body padded": (good, BODY + b" ", "bad signature"),
        "timestamp moved": ({**good, H_TS: str(int(now) + 1)}, BODY, "bad signature"),
        "nonce swapped": ({**good, H_NONCE: "f" * 32}, BODY, "bad signature"),
        "signed for another path": (signed(now=now, path="/internal/v1/other"), BODY,
                                    "bad signature"),
        "signed for another method": (signed(now=now, method="GET"), BODY, "bad signature"),
        "stale by a minute": (signed(now=now - 60), BODY, "stale request"),
        "a day in the future": (signed(now=now + 86400), BODY, "stale request"),
        "negative timestamp": ({**good, H_TS: "-5"}, BODY, "malformed signature headers"),
        "timestamp not a number": ({**good, H_TS: "1e9"}, BODY,
                                   "malformed signature headers"),
        "short nonce": (signed(now=now, nonce="abc"), BODY, "malformed signature headers"),
        "upper-case signature": ({**good, H_SIG: good[H_SIG].upper()}, BODY,
                                 "bad signature"),
    }
    return cases[name]


ATTACKS = [
    "unsigned", "only a signature", "zero signature", "empty signature",
    "signature of another secret", "body changed", "body padded", "timestamp moved",
    "nonce swapped", "signed for another path", "signed for another method",
    "stale by a minute", "a day in the future", "negative timestamp",
    "timestamp not a number", "short nonce", "upper-case signature",
]


@pytest.mark.parametrize("attack", ATTACKS)
async def test_forged_unsigned_and_stale_requests_are_401_and_probe_nothing(
    node: Node, attack: str
) -> None:
    headers, body, reason = tampered(attack)
    assert_refused(await post(node.url, headers, body), reason)
    assert node.prober.urls == []


async def test_a_replayed_request_is_refused(node: Node) -> None:
    headers = signed()
    status, _, _ = await post(node.url, headers)
    assert status == 200
    assert_refused(await post(node.url, headers), "replayed request")
    assert len(node.prober.urls) == 1


async def test_a_request_to_a_node_without_a_secret_is_refused(tmp_path: Path) -> None:
    runner, n = await serve(tmp_path, None)
    try:
        status, _, body = await post(n.url, signed())
        assert status == 401
        assert orjson.loads(body) == {"message": "This node has no cluster secret."}
        # Signing with the empty secret does not help either.
        status, _, _ = await post(n.url, signed(secret=""))
        assert status == 401
        assert n.prober.urls == []
    finally:
        await runner.cleanup()


async def test_an_oversize_body_is_refused_before_any_signature_work(node: Node) -> None:
    big = b'{"check_id": 7, "pad": "' + b"a" * 10_000 + b'"}'
    status, _, body = await post(node.url, signed(big), big)
    assert status == 413
    assert orjson.loads(body) == {"message": "Body too large."}
    assert node.prober.urls == []


async def test_signed_requests_for_unknown_checks_or_junk_probe_nothing(node: Node) -> None:
    # Even a peer with the secret cannot make a node probe a URL of its choosing: the body
    # names a check id, and the node looks the URL up itself.
    for body, status in (
        (orjson.dumps({"check_id": 9}), 404),
        (orjson.dumps({"check_id": 7, "url": "http://169.254.169.254/"}), 200),
        (orjson.dumps({"check_id": "7"}), 422),
        (orjson.dumps({"url": "http://169.254.169.254/"}), 422),
        (b"not json", 422),
    ):
        got, _, _ = await post(node.url, signed(body), body)
        assert got == status, body
    assert node.prober.urls == ["https://shop.example/"]


async def test_the_peer_endpoint_is_not_part_of_the_public_api(api: str) -> None:
    # The API app does not serve it: only the daemon's node server mounts peer_routes.
    async with aiohttp.ClientSession() as s, s.post(api + CONFIRM_PATH, data=BODY,
                                                    headers=signed()) as r:
        assert r.status in (404, 405)

