"""The region-confirmation protocol.

When an uptime probe fails, the owner asks a live node of ANOTHER region to re-probe now:
``POST {node_url}/internal/v1/confirm`` with ``{"check_id": N}``, signed as
:mod:`engine.cluster.peerauth` describes. The peer looks the URL up in the shared database
(it never probes a URL a caller hands it), probes with its own settings and source address,
and answers the outcome, signed. Peers are tried in a stable per-check order; a peer that
times out or errs is skipped for the next.

Fall-backs:
- no live node of another region (a one-region cluster, or the others are dead: they stopped
  heartbeating): a second probe from this node after a short pause; ``verified_via`` is then
  this region (decisions.md);
- live nodes of other regions exist but none answers: NO verdict. The check stays ``failing``
  and no alert goes out, because a node that can reach neither its peers nor its targets is
  far more likely cut off itself than watching every site fail at once; the next probe asks
  again. Peers that are really gone stop heartbeating and the first rule applies.
  Counted in ``upwatch_confirmations_total{result="unreachable"}`` and logged.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Protocol

import aiohttp
import orjson
from aiohttp import web

from engine.cluster.nodes import Membership
from engine.cluster.ownership import confirmation_order
from engine.cluster.peerauth import (
    H_NODE,
    ReplayGuard,
    sign_request,
    sign_response,
    verify_response,
)
from engine.domain.outcomes import HttpOutcome
from engine.monitors.requestspecs import SpecBuilder
from engine.runtime.errors import PeerAuthError
from engine.runtime.metrics import Metrics
from engine.runtime.secretbox import SecretBox
from engine.runtime.settings import Settings
from engine.scheduler.confirm import Confirmation, Confirmer, ConfirmTarget

log = logging.getLogger(__name__)

CONFIRM_PATH = "/internal/v1/confirm"
MAX_BODY = 4096


class _Prober(Protocol):
    async def probe(self, url: str) -> HttpOutcome: ...


class _Targets(Protocol):
    async def confirm_target(self, check_id: int) -> str | None: ...
    async def confirm_config(self, check_id: int) -> tuple[Any, Any] | None: ...


def _outcome_to_json(o: HttpOutcome) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "status_code": o.status_code,
        "error": o.error,
        "total_ms": o.total_ms,
        "dns_ms": o.dns_ms,
        "connect_ms": o.connect_ms,
        "tls_ms": o.tls_ms,
        "ttfb_ms": o.ttfb_ms,
        "redirects": o.redirects,
        "remote_ip": o.remote_ip,
        "assertion_error": o.assertion_error,
        "status_asserted": o.status_asserted,
    }
    if o.details is not None:  # a scheme other than http(s)
        answer["details"] = o.details
    return answer


def _outcome_from_json(d: dict[str, Any]) -> HttpOutcome:
    def num(key: str) -> float | None:
        v = d.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    status = d.get("status_code")
    error = d.get("error")
    if "status_code" not in d or "error" not in d:
        raise ValueError("answer has no status_code or error")
    details = d.get("details")
    return HttpOutcome(
        status_code=status if isinstance(status, int) and not isinstance(status, bool) else None,
        error=error if isinstance(error, str) else None,
        total_ms=num("total_ms") or 0.0,
        dns_ms=num("dns_ms"),
        connect_ms=num("connect_ms"),
        tls_ms=num("tls_ms"),
        ttfb_ms=num("ttfb_ms"),
        redirects=int(d.get("redirects") or 0),
        remote_ip=d.get("remote_ip") if isinstance(d.get("remote_ip"), str) else None,
        assertion_error=(
            d.get("assertion_error") if isinstance(d.get("assertion_error"), str) else None),
        status_asserted=d.get("status_asserted") is True,
        details=details if isinstance(details, dict) else None,
    )


def peer_routes(
    targets: _Targets,
    settings: Settings,
    prober: _Prober,
    membership: Membership,
    metrics: Metrics,
) -> web.RouteTableDef:
    """The peer endpoint, mounted on the node URL's server (every engine role serves it)."""
    routes = web.RouteTableDef()
    secret = (
        settings.cluster_secret.get_secret_value().encode() if settings.cluster_secret else None
    )
    guard = ReplayGuard(secret) if secret else None
    specs = SpecBuilder(SecretBox.from_settings(settings), settings.max_assertion_body)

    def refuse(status: int, message: str) -> web.Response:
        return web.json_response(
            {"message": message}, status=status, dumps=lambda o: orjson.dumps(o).decode()
        )

    @routes.post(CONFIRM_PATH)
    async def confirm(request: web.Request) -> web.Response:
        if guard is None or secret is None:
            return refuse(401, "This node has no cluster secret.")
        if request.content_length is not None and request.content_length > MAX_BODY:
            return refuse(413, "Body too large.")
        body = await request.content.read(MAX_BODY + 1)
        if len(body) > MAX_BODY:
            return refuse(413, "Body too large.")
        try:
            nonce = guard.verify(request.method, request.path, body, request.headers, time.time())
        except PeerAuthError as exc:
            metrics.confirmations.labels(result="refused").inc()
            log.warning("refused peer request: %s", exc, extra={"peer": request.remote})
            return refuse(401, f"Peer authentication failed: {exc}.")
        try:
            payload = orjson.loads(body)
            check_id = payload["check_id"]
            if not isinstance(check_id, int) or isinstance(check_id, bool) or check_id <= 0:
                raise ValueError
        except (ValueError, KeyError, TypeError):
            return refuse(422, 'Body must be {"check_id": <positive integer>}.')
        url = await targets.confirm_target(check_id)
        if url is None:
            return refuse(404, "No such uptime check.")
        # The check's own request and assertions, from the shared database.
        spec = specs.build(await targets.confirm_config(check_id), 0, url)
        outcome = await (prober.probe(url) if spec is None
                         else prober.probe(url, spec))  # type: ignore[call-arg]
        metrics.confirmations.labels(result="served").inc()
        answer = orjson.dumps(
            {
                "node": membership.node_id,
                "region": settings.region,
                **_outcome_to_json(outcome),
            }
        )
        headers = sign_response(secret, 200, nonce, answer, time.time())
        return web.Response(
            body=answer, status=200, content_type="application/json", headers=headers
        )

    return routes


class PeerConfirmer:
    """Asks peers of other regions to re-probe; see the module docstring for fall-backs.

    ``ask(check_id)`` returns ``(region, outcome)`` from the first peer that answers with a
    valid signature, ``None`` when live peers of other regions exist but none answered, and
    raises :class:`LookupError` when there is no live node of another region at all (the
    caller then confirms locally).
    """

    def __init__(self, membership: Membership, settings: Settings, metrics: Metrics) -> None:
        self.membership, self.settings, self.metrics = membership, settings, metrics
        self._secret = (
            settings.cluster_secret.get_secret_value().encode() if settings.cluster_secret else None
        )
        self._session: aiohttp.ClientSession | None = None

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.settings.probe_timeout + 5, connect=3),
                json_serialize=lambda o: orjson.dumps(o).decode(),
            )
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def ask(self, check_id: int) -> tuple[str, HttpOutcome] | None:
        order = confirmation_order(check_id, self.settings.region, self.membership.peers())
        if not order or self._secret is None:
            raise LookupError("no live node of another region")
        for node_id in order:
            node = self.membership.node(node_id)
            if node is None:
                continue
            try:
                got = await self._ask_one(node.url, node.id, check_id)
            except (aiohttp.ClientError, TimeoutError, ValueError, PeerAuthError, OSError) as exc:
                self.metrics.confirmations.labels(result="peer_error").inc()
                log.warning(
                    "peer %s did not confirm check %s: %s",
                    node_id,
                    check_id,
                    exc or type(exc).__name__,
                    extra={"check_id": check_id},
                )
                continue
            self.metrics.confirmations.labels(result="answered").inc()
            return got
        self.metrics.confirmations.labels(result="unreachable").inc()
        log.warning(
            "no peer region reachable to confirm check %s; no alert",
            check_id,
            extra={"check_id": check_id},
        )
        return None

    async def _ask_one(self, base_url: str, node_id: str, check_id: int) -> tuple[str, HttpOutcome]:
        assert self._secret is not None
        body = orjson.dumps({"check_id": check_id})
        headers = sign_request(self._secret, "POST", CONFIRM_PATH, body, time.time())
        headers[H_NODE] = self.membership.node_id
        headers["Content-Type"] = "application/json"
        async with self._client().post(
            base_url + CONFIRM_PATH, data=body, headers=headers, allow_redirects=False
        ) as resp:
            answer = await resp.content.read(64 * 1024)
            if resp.status != 200:
                raise ValueError(f"answered HTTP {resp.status}")
            verify_response(
                self._secret,
                resp.status,
                headers["X-Upwatch-Nonce"],
                answer,
                resp.headers,
                time.time(),
            )
        data = orjson.loads(answer)
        region = data.get("region")
        if not isinstance(region, str) or region == self.settings.region:
            raise ValueError("answer from an unexpected region")
        return region, _outcome_from_json(data)


class RegionConfirmer:
    """The engine's confirmation step in a cluster (see the module docstring).

    Asks a live node of another region; with none at all, falls back to ``local`` (a second
    probe from this node, ``verified_via`` = this region); with peers that do not answer,
    returns None (no verdict, no alert).
    """

    def __init__(self, peers: PeerConfirmer, local: Confirmer) -> None:
        self.peers, self.local = peers, local

    async def confirm(
        self, check: ConfirmTarget, first_outcome: HttpOutcome
    ) -> Confirmation | None:
        try:
            got = await self.peers.ask(check.id)
        except LookupError:
            return await self.local.confirm(check, first_outcome)
        if got is None:
            return None
        region, outcome = got
        return Confirmation(region, outcome)
