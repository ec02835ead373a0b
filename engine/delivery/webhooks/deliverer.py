"""The webhook deliverer: claims due events from the durable queue and POSTs them. The loop,
claiming, fair share and retries are the shared outbox runner's (:mod:`engine.delivery.outbox`);
this module is the webhook's sender (:class:`WebhookSender`: headers, signing, the POST).

Contract (decisions.md "Webhooks"):

- Only a 200 answer ends delivery. Anything else (another status, a redirect, which is not
  followed, a timeout, a refused or closed connection, a blocked address) is a failed try,
  retried with :mod:`engine.delivery.policy` until 24 h (x time scale) after the event, then
  the event is ``failed`` and kept.
- Every try carries ``X-Service-Webhook`` (the event id, the same on every try),
  ``X-Service-Current-Try`` (1, 2, ...), ``X-Service-Parent-Webhook`` (the incident's opening
  event, else the event itself) and ``X-Service-Signature`` over the exact stored body bytes.
- Per-monitor order and one-sender-per-try come from the store's claim
  (:meth:`engine.db.outbox.OutboxQueue.claim`); several deliverers, in one
  process or many, can run against one database.
- The private-address rule is applied to the addresses the connection is made to: the host
  is resolved on every try and every address checked before connecting to one of them (IP
  literals are checked as they are), so a DNS change after the URL was accepted cannot
  reach an internal address (:mod:`engine.delivery.webhooks.http`).
- A dead or slow receiver costs at most one concurrency slot per try for at most
  ``webhook_timeout``. One account's share is three quarters of the slots while its receiver
  answers, and an eighth once a try of it got no answer at all, so the others always find
  free slots; nothing here blocks the event loop, so probing goes on. The share is
  work-conserving for a receiver that answers 200 quickly: such an account may also take the
  slots no other account has a due event for (the usual self-hosted instance has one
  account), and every claim serves the other accounts' shares first, so as its tries end
  their slots go to the others. A receiver that turns slow loses the extra slots at once;
  the ones it holds come back within ``webhook_timeout``.
- Results of finished tries are written in one batch, in the claim's transaction and before
  its queries, so the next event of a monitor only becomes claimable once the previous one's
  result is written (and both are committed together).

Wake-ups: LISTEN ``upwatch_webhooks`` (new events, a URL set, a manual retry), a timer at
each retry this deliverer scheduled, the end of every try (a slot freed, and the next event of
that monitor may now be due), and a periodic poll for everything else (retries scheduled by
another instance, a lost notification, a lease that ran out).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from engine import USER_AGENT
from engine.db.webhook_queue import ClaimedEvent, WebhookQueueMixin
from engine.delivery.outbox import (
    BATCH_WINDOW,
    LEASE_MARGIN,
    RESULT_DELIVERED,
    RESULT_EXPIRED,
    RESULT_GAVE_UP,
    Attempt,
    OutboxRunner,
    RunnerMetrics,
)
from engine.delivery.webhooks.http import (
    MAX_RESPONSE_BODY,
    BadUrl,
    BlockedTarget,
    ConnectError,
    NoAnswer,
    ResolveError,
    WebhookClient,
    parse_url,
)
from engine.delivery.webhooks.signing import sign, sign_256
from engine.domain.netpolicy import Resolver
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

__all__ = [
    "BATCH_WINDOW", "LEASE_MARGIN", "MAX_RESPONSE_BODY", "RESULT_DELIVERED", "RESULT_EXPIRED",
    "RESULT_GAVE_UP", "BlockedTarget", "Deliverer", "WebhookSender",
]
# Connect timeout, within the total: a receiver that does not accept in this long is down.
MAX_CONNECT_TIMEOUT = 5.0
# A receiver whose last try got a 200 within this long (and none of whose tries in flight has
# taken longer) may use slots beyond its account's share. Short, so that a receiver that turns
# slow can only be holding extra slots it took while it was fast.
QUICK_ANSWER = 1.0

# deliveries_total{result=...}: one per try, plus gave_up/expired once per event that ends
# failed (by the deliverer after its last try, or by the expiry sweep).
RESULT_HTTP_ERROR = "http_error"
RESULT_REDIRECT = "redirect"
RESULT_TIMEOUT = "timeout"
RESULT_CONNECTION_ERROR = "connection_error"
RESULT_BLOCKED = "blocked"
# RESULT_DELIVERED, RESULT_GAVE_UP and RESULT_EXPIRED come from the runner (re-exported).


# The same for every try; Accept as any client sends it. No Accept-Encoding: a body is only
# quoted, never decompressed.
_FIXED_HEADERS = (
    f"Content-Type: application/json\r\nUser-Agent: {USER_AGENT}\r\nAccept: */*\r\n"
).encode("latin-1")


def _header_lines(event: ClaimedEvent) -> bytes:
    """The headers of one try as the request's header lines, exactly as api.md section 6 and
    decisions.md name them (made without a dict)."""
    return _FIXED_HEADERS + (
        b"X-Service-Webhook: %d\r\nX-Service-Current-Try: %d\r\n"
        b"X-Service-Parent-Webhook: %d\r\nX-Service-Signature: %s\r\n"
        b"X-Service-Signature-256: %s\r\n"
        % (event.id, event.tries, event.parent_webhook,
           sign(event.body, event.token).encode("ascii"),
           sign_256(event.body, event.token, int(time.time())).encode("ascii"))
    )


class WebhookSender:
    """One signed POST per try (the :class:`engine.delivery.outbox.Sender` of webhooks)."""

    noun = "webhook"

    def __init__(self, settings: Settings, *, resolver: Resolver | None = None) -> None:
        self._timeout = settings.webhook_timeout
        self._connect_timeout = min(self._timeout, MAX_CONNECT_TIMEOUT)
        self._client = WebhookClient(
            allow_private=settings.allow_private_targets, resolver=resolver
        )

    def ready(self, event: ClaimedEvent) -> bool:
        return event.webhook_url is not None

    def members(self, event: ClaimedEvent) -> Sequence[tuple[int, int]]:
        return ((event.id, event.tries),)

    async def send(self, event: ClaimedEvent) -> Attempt:
        return await self._attempt(event)

    async def _attempt(self, event: ClaimedEvent) -> Attempt:
        """One POST of ``event``; never raises (apart from cancellation)."""
        assert event.webhook_url is not None
        try:
            target = parse_url(event.webhook_url)
        except BadUrl as exc:
            return Attempt(RESULT_CONNECTION_ERROR, error=str(exc))
        try:
            # One deadline for the whole try: resolving, connecting, sending and the answer.
            answer = await self._client.post(
                target, _header_lines(event), event.body,
                timeout=self._timeout, connect_timeout=self._connect_timeout,
            )
        except BlockedTarget as exc:
            return Attempt(RESULT_BLOCKED, error=f"{exc}; refused")
        except ResolveError as exc:
            return Attempt(RESULT_CONNECTION_ERROR,
                           error=f"cannot resolve the webhook host: {exc}")
        except ConnectError as exc:
            return Attempt(RESULT_CONNECTION_ERROR, error=f"cannot connect: {exc}")
        except NoAnswer as exc:
            return Attempt(RESULT_CONNECTION_ERROR, error=str(exc))
        except TimeoutError:  # before OSError: TimeoutError is one
            return Attempt(RESULT_TIMEOUT,
                           error=f"no answer within {self._timeout:g}s (timed out)")
        except OSError as exc:
            return Attempt(RESULT_CONNECTION_ERROR, error=f"connection error: {exc}")
        except Exception as exc:
            # Not expected; still a failed try with its words, not a crashed task whose
            # event would only come back after its lease.
            log.exception("webhooks: unexpected error in a try of webhook %d", event.id)
            return Attempt(RESULT_CONNECTION_ERROR, error=f"{type(exc).__name__}: {exc}")
        status = answer.status
        if status == 200:
            return Attempt(RESULT_DELIVERED, status_code=200)
        if 300 <= status < 400:
            where = f" to {answer.location}" if answer.location else ""
            return Attempt(RESULT_REDIRECT, status_code=status,
                           error=f"HTTP {status}: redirect{where} not followed")
        # One line in a log and a table cell.
        snippet = " ".join(answer.snippet.decode("utf-8", "replace").split())
        detail = f": {snippet}" if snippet else ""
        return Attempt(RESULT_HTTP_ERROR, status_code=status, error=f"HTTP {status}{detail}")


class Deliverer(OutboxRunner[ClaimedEvent]):
    """Delivers queued webhook events until stopped: the outbox runner over the webhook
    queue with :class:`WebhookSender`.

    ``run(stop)`` returns once ``stop`` is set and in-flight tries have finished or, after
    ``drain_timeout`` seconds, been handed back to the queue (counted as made, due at once).
    """

    def __init__(
        self,
        store: WebhookQueueMixin,
        settings: Settings,
        *,
        metrics: Metrics | None = None,
        drain_timeout: float = 5.0,
        resolver: Resolver | None = None,
    ) -> None:
        m = metrics or Metrics()
        super().__init__(
            store.webhook_queue,
            WebhookSender(settings, resolver=resolver),
            concurrency=settings.webhook_concurrency,
            timeout=settings.webhook_timeout,
            time_scale=settings.time_scale,
            metrics=RunnerMetrics(
                m.deliveries, m.webhook_queue_depth, m.webhook_oldest_pending
            ),
            drain_timeout=drain_timeout,
            quick_answer=QUICK_ANSWER,
        )
