"""The limits on test messages (the API's test button): pure bookkeeping over ``now``.

A test starts only when all three limits let it:

- **per channel**: one test at a time; a burst of :attr:`Limits.channel_burst`, then
  one every :attr:`Limits.channel_every` seconds;
- **per account**: :attr:`Limits.account_at_once` tests at a time; a burst of
  :attr:`Limits.account_burst`, then one every :attr:`Limits.account_every` seconds;
- **per server**: :attr:`Limits.server_at_once` tests at a time (the test pool's threads).

Otherwise :meth:`Gate.start` answers :class:`Refused`: which limit, in words, and the
seconds until it would let the test start (the 429's ``Retry-After``). A refused test takes
nothing. A started test holds its places until :meth:`Gate.finish`, which its sender
calls when the sending thread has ended (not when the API answered: a thread given up on
still holds a connection to the receiver).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CHANNEL = "channel"
ACCOUNT = "account"
SERVER = "server"


@dataclass(frozen=True, slots=True)
class Limits:
    channel_burst: int = 3
    channel_every: float = 20.0
    account_at_once: int = 2
    account_burst: int = 5
    account_every: float = 12.0
    server_at_once: int = 4
    # How long a running test is expected to hold its place at most (the send deadline):
    # the Retry-After of a limit on tests at once.
    deadline: float = 15.0


@dataclass(frozen=True, slots=True)
class Refused:
    limit: str  # CHANNEL, ACCOUNT or SERVER
    message: str
    retry_after: float


@dataclass(frozen=True, slots=True)
class Ticket:
    """A started test's places."""

    account_id: int
    channel_id: int
    started: float


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


@dataclass(slots=True)
class _Bookkeeping:
    running: dict[int, list[float]] = field(default_factory=dict)  # key -> start times
    buckets: dict[int, _Bucket] = field(default_factory=dict)


def _refill(bucket: _Bucket, burst: int, every: float, now: float) -> None:
    bucket.tokens = min(float(burst), bucket.tokens + max(0.0, now - bucket.at) / every)
    bucket.at = max(bucket.at, now)


class Gate:
    """The three limits over tests in progress and tests started."""

    def __init__(self, limits: Limits | None = None) -> None:
        self.limits = limits or Limits()
        self._channels = _Bookkeeping()
        self._accounts = _Bookkeeping()
        self._server: list[float] = []

    def _busy_until(self, starts: list[float], now: float) -> float:
        return max(1.0, min(starts) + self.limits.deadline - now)

    def _rate_wait(self, book: _Bookkeeping, key: int, burst: int, every: float,
                   now: float) -> float:
        bucket = book.buckets.get(key)
        if bucket is None:
            return 0.0
        _refill(bucket, burst, every, now)
        # A token refilled to within rounding of whole is whole.
        return 0.0 if bucket.tokens >= 1.0 - 1e-9 else (1.0 - bucket.tokens) * every

    def start(self, account_id: int, channel_id: int, now: float) -> Ticket | Refused:
        """Start a test of ``channel_id`` for ``account_id`` at ``now``, or say why not."""
        lim = self.limits
        running = self._channels.running.get(channel_id, [])
        if running:
            return Refused(CHANNEL, "This channel is already sending a test message; one "
                                    "test per channel at a time.",
                           self._busy_until(running, now))
        wait = self._rate_wait(self._channels, channel_id, lim.channel_burst,
                               lim.channel_every, now)
        if wait:
            return Refused(CHANNEL, f"Too many test messages to this channel: at most "
                                    f"{lim.channel_burst} in a row, then one every "
                                    f"{lim.channel_every:g} s.", wait)
        running = self._accounts.running.get(account_id, [])
        if len(running) >= lim.account_at_once:
            return Refused(ACCOUNT, f"Your account is already sending {len(running)} test "
                                    f"messages; at most {lim.account_at_once} at a time.",
                           self._busy_until(running, now))
        wait = self._rate_wait(self._accounts, account_id, lim.account_burst,
                               lim.account_every, now)
        if wait:
            return Refused(ACCOUNT, f"Too many test messages from your account: at most "
                                    f"{lim.account_burst} in a row, then one every "
                                    f"{lim.account_every:g} s.", wait)
        if len(self._server) >= lim.server_at_once:
            return Refused(SERVER, f"The server is sending {len(self._server)} test messages "
                                   f"already, its most at a time; try again shortly.",
                           self._busy_until(self._server, now))
        self._take(self._channels, channel_id, lim.channel_burst, now)
        self._take(self._accounts, account_id, lim.account_burst, now)
        self._server.append(now)
        return Ticket(account_id, channel_id, now)

    def _take(self, book: _Bookkeeping, key: int, burst: int, now: float) -> None:
        book.running.setdefault(key, []).append(now)
        bucket = book.buckets.get(key)
        if bucket is None:
            bucket = book.buckets[key] = _Bucket(float(burst), now)
        bucket.tokens -= 1.0
        if len(book.buckets) > 4096:
            self._prune(now)

    def finish(self, ticket: Ticket) -> None:
        """The test's thread has ended: its places are free (its rate tokens stay spent)."""
        for book, key in ((self._channels, ticket.channel_id),
                          (self._accounts, ticket.account_id)):
            starts = book.running.get(key)
            if starts and ticket.started in starts:
                starts.remove(ticket.started)
                if not starts:
                    del book.running[key]
        if ticket.started in self._server:
            self._server.remove(ticket.started)

    def _prune(self, now: float) -> None:
        """Forget buckets that have refilled: they carry nothing."""
        lim = self.limits
        for book, burst, every in ((self._channels, lim.channel_burst, lim.channel_every),
                                   (self._accounts, lim.account_burst, lim.account_every)):
            full = [k for k, b in book.buckets.items() if now - b.at >= burst * every]
            for k in full:
                del book.buckets[k]
