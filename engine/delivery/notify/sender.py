"""Sending notifications through Apprise: the outbox's sender for channels, and one-off test
messages (the API's test button, ``upwatch notify test``).

Apprise's providers block (smtplib, requests), so every send runs in a bounded thread pool
and the event loop only awaits its future, with a per-try deadline: a slow SMTP server holds
one thread, never the loop, and never a probe. The plugin's own socket timeouts are set to
the same deadline, so a thread that was given up on ends soon after.

Apprise answers a send with a boolean and logs the reason; the reason is read from its log
(:class:`apprise.LogCapture`, filtered to the sending thread, since sends run in parallel)
and scrubbed of the URL's secrets before it reaches our log or the delivery log. Apprise's
own log lines do not reach the service's log at all (they may quote a URL).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import itertools
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus

import apprise

from engine.db.notifications import Grouping, NotificationItem, NotificationsMixin
from engine.delivery.notify import connectguard, messages, urls
from engine.delivery.outbox import RESULT_DELIVERED, Attempt, OutboxRunner, RunnerMetrics
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings

log = logging.getLogger(__name__)

RESULT_FAILED = "failed"
RESULT_TIMEOUT = "timeout"
RESULT_BLOCKED = "blocked"

_apprise_log = logging.getLogger("apprise")
# The reasons are logged at WARNING (what failed) and DEBUG ("Socket Exception: (535, ...)").
# Not propagated: the service's log gets our scrubbed line, never Apprise's own (which may
# quote a URL).
_apprise_log.setLevel(logging.DEBUG)
_apprise_log.propagate = False

# Which send a log record belongs to. Apprise sends from its own worker threads but copies
# the caller's context into them, so the record's context names the send, whichever thread
# logs it; sends run in parallel and LogCapture's handler sees all of them.
_send_id: contextvars.ContextVar[int] = contextvars.ContextVar("upwatch_send", default=0)
_send_ids = itertools.count(1)


class _StampSend(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.upwatch_send = _send_id.get()
        return True


_apprise_log.addFilter(_StampSend())
_CAPTURE_FORMAT = "%(upwatch_send)s\t%(levelname)s\t%(message)s"
_ERRNO = re.compile(r"\[Errno -?\d+\] ([^\"')]+)")
_HTTP_ERROR = re.compile(r"\berror=([1-5]\d\d)\b")
_SMTP_CODE = re.compile(r"^\((\d{3}), b?['\"](.*)['\"]\)$")


@dataclass(frozen=True, slots=True)
class SendResult:
    delivered: bool
    error: str | None = None
    timed_out: bool = False


def _reason(captured: str, send: int) -> str | None:
    """What Apprise logged about send number ``send``: its WARNING/ERROR lines, with the
    low-level cause from its DEBUG "Socket Exception" line in short words."""
    reasons: list[str] = []
    causes: list[str] = []
    for line in captured.splitlines():
        sid, _, rest = line.partition("\t")
        level, _, message = rest.partition("\t")
        if sid != str(send) or not message:
            continue
        message = " ".join(message.split())
        if level in ("WARNING", "ERROR", "CRITICAL"):
            reasons.append(message)
        elif message.startswith("Socket Exception:"):
            causes.append(_short_cause(message.removeprefix("Socket Exception:").strip()))
    words = list(dict.fromkeys(reasons + causes))
    if not words:
        return None
    text = "; ".join(words)
    # An HTTP service's status first, in the words of its status line: Apprise ends its
    # line with "error=500." where it has one.
    m = _HTTP_ERROR.search(text)
    if m:
        code = int(m.group(1))
        with contextlib.suppress(ValueError):
            text = f"HTTP {code} {HTTPStatus(code).phrase}; {text}"
    return text[:480]


def _short_cause(text: str) -> str:
    """``(535, b'5.7.8 Authentication credentials invalid')`` -> ``535 5.7.8 ...``; a
    requests error's ``[Errno 111] Connection refused`` -> ``Connection refused``."""
    m = _SMTP_CODE.match(text)
    if m:
        return f"{m.group(1)} {m.group(2)}"
    m = _ERRNO.search(text)
    if m:
        return m.group(1).strip()
    if "timed out" in text.lower():
        return "timed out"
    return text


def _send_blocking(
    url: str, title: str, body: str, timeout: float, public_only: bool, notify_type: str
) -> SendResult:
    """One Apprise send in the calling (pool) thread; with ``public_only`` its providers' own
    lookups refuse non-public answers (:mod:`engine.delivery.notify.connectguard`)."""
    plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    if plugin is None:
        return SendResult(False, "the URL is not a usable Apprise URL")
    # Bound the plugin's own sockets by the try's deadline (requests and smtplib honour them).
    for attr in ("socket_connect_timeout", "socket_read_timeout", "timeout"):
        if hasattr(plugin, attr):
            try:
                setattr(plugin, attr, timeout)
            except (AttributeError, TypeError):
                pass
    notifier = apprise.Apprise()
    notifier.add(plugin)
    send = next(_send_ids)
    _send_id.set(send)  # this pool thread's context; Apprise copies it to its workers
    with apprise.LogCapture(level=logging.DEBUG, fmt=_CAPTURE_FORMAT) as captured, \
            connectguard.public_only(public_only):
        try:
            ok = bool(notifier.notify(
                title=title, body=body, body_format=apprise.NotifyFormat.MARKDOWN,
                notify_type=apprise.NotifyType(notify_type), timeout=timeout,
            ))
        except Exception as exc:  # a provider's bug is a failed try with its words
            return SendResult(False, f"{type(exc).__name__}: {exc}")
        text = captured.getvalue()
    if ok:
        return SendResult(True)
    # Scrubbed before _reason shortens it: a secret cut in two would no longer match.
    reason = _reason(urls.scrub(text, urls.secrets_of(url)), send)
    return SendResult(False, reason or "the service did not accept the message (no reason "
                                       "given)")


class NotifyPool:
    """The bounded thread pool every Apprise send runs in."""

    def __init__(self, threads: int) -> None:
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=threads, thread_name_prefix="upwatch-notify"
        )
        self.threads = threads

    async def send(
        self, url: str, title: str, body: str, *, timeout: float, allow_private: bool,
        notify_type: str = messages.INFO, done: Callable[[], None] | None = None,
    ) -> SendResult:
        """Send one message; never raises (but for cancellation). A try past ``timeout`` is
        a failed try; its thread is left to end on its sockets' timeouts. Unless
        ``allow_private``, the providers' connections reach public addresses only, whatever
        a name answers by then or a redirect names. ``notify_type`` is Apprise's (the
        colour chat services show); ``done`` is called on the loop when the thread has
        ended, whether or not this call still waited for it."""
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(
            self._pool, _send_blocking, url, title, body, timeout, not allow_private,
            notify_type,
        )
        if done is not None:
            future.add_done_callback(lambda _f: done())
        try:
            async with asyncio.timeout(timeout):
                result = await asyncio.shield(future)
        except TimeoutError:
            return SendResult(False, f"no answer within {timeout:g}s (timed out)",
                              timed_out=True)
        secrets = urls.secrets_of(url)
        if result.error is not None and secrets:
            result = SendResult(result.delivered, urls.scrub(result.error, secrets),
                                result.timed_out)
        return result

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def aclose(self) -> None:
        self.close()


async def check_policy(url: str, *, allow_private: bool) -> str | None:
    """The private-address rule on the hosts of ``url`` again, at send time: the reason it
    is refused, or None."""
    if allow_private:
        return None
    try:
        parsed = urls.parse(url)
        await urls.check_targets(parsed.plugin, allow_private=False)
    except Exception as exc:  # ValidationFailed: its message, in words
        errors = getattr(exc, "errors", None)
        if isinstance(errors, dict):
            return "; ".join(m for msgs in errors.values() for m in msgs) + "; refused"
        return f"{exc}; refused"
    return None


class AppriseSender:
    """The :class:`engine.delivery.outbox.Sender` of notification channels."""

    noun = "notification"

    def __init__(
        self, pool: NotifyPool, *, base_url: str, timeout: float, allow_private: bool
    ) -> None:
        self._pool = pool
        self._base_url = base_url
        self._timeout = timeout
        self._allow_private = allow_private

    def ready(self, item: NotificationItem) -> bool:
        return True

    def members(self, item: NotificationItem) -> Sequence[tuple[int, int]]:
        return [(r.id, r.tries) for r in item.rows]

    def message(self, item: NotificationItem) -> messages.Message:
        if item.is_digest:
            return messages.render_digest(item.rows, self._base_url)
        return messages.render(item.rows[0], self._base_url)

    async def send(self, item: NotificationItem) -> Attempt:
        if not item.url:
            return Attempt(RESULT_FAILED, answered=False,
                           error="the channel URL cannot be decrypted with this node's "
                                 "secret key (UPWATCH_SECRET_KEY)")
        refused = await check_policy(item.url, allow_private=self._allow_private)
        if refused is not None:
            return Attempt(RESULT_BLOCKED, error=refused, answered=False)
        msg = self.message(item)
        result = await self._pool.send(item.url, msg.title, msg.body, timeout=self._timeout,
                                       allow_private=self._allow_private,
                                       notify_type=msg.notify_type)
        if result.delivered:
            detail = f"digest of {len(item.rows)} events" if len(item.rows) > 1 else None
            return Attempt(RESULT_DELIVERED, error=detail, answered=True)
        return Attempt(RESULT_TIMEOUT if result.timed_out else RESULT_FAILED,
                       error=result.error, answered=not result.timed_out)


TEST_TITLE = "Upwatch test message"
TEST_BODY = ("This is a test message from Upwatch. If you can read it, this channel "
             "works: alerts for your monitors will arrive here.")


async def send_test(
    url: str, *, allow_private: bool, timeout: float, pool: NotifyPool | None = None
) -> SendResult:
    """Send the test message to ``url`` now (the test button, ``upwatch notify test``)."""
    refused = await check_policy(url, allow_private=allow_private)
    if refused is not None:
        return SendResult(False, refused)
    own = pool is None
    p = pool or NotifyPool(1)
    try:
        return await p.send(url, TEST_TITLE, TEST_BODY, timeout=timeout,
                            allow_private=allow_private)
    finally:
        if own:
            p.close()


def notification_runner(
    store: NotificationsMixin, settings: Settings, *, metrics: Metrics | None = None,
    pool: NotifyPool | None = None, drain_timeout: float = 5.0,
) -> OutboxRunner[NotificationItem]:
    """The outbox runner of notification channels: the shared runner over the notification
    queue with :class:`AppriseSender`, as many tries at once as the pool has threads."""
    m = metrics or Metrics()
    p = pool or NotifyPool(settings.notify_threads)
    sender = AppriseSender(
        p, base_url=settings.public_base_url, timeout=settings.notify_timeout,
        allow_private=settings.allow_private_targets,
    )
    return OutboxRunner(
        store.notification_queue, sender,
        concurrency=p.threads, timeout=settings.notify_timeout,
        time_scale=settings.time_scale,
        metrics=RunnerMetrics(
            m.notification_deliveries, m.notification_queue_depth,
            m.notification_oldest_pending,
        ),
        drain_timeout=drain_timeout,
    )


def grouping(settings: Settings) -> Grouping:
    """The alert-storm window the settings ask for (seconds scaled by the time scale)."""
    return Grouping(settings.scaled(settings.notify_group_seconds), settings.notify_group_max)
