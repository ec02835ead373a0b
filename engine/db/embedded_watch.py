"""The service's watch over its embedded PostgreSQL: a server that dies under ``upwatch run``
(``kill -9`` of the postmaster, the OOM killer, ``pg_ctl stop`` by hand) is started again
within seconds, and the service carries on without a restart.

While the server is away the rest of the service behaves as during any database outage:
probing goes on, results and state changes wait in bounded memory (engine.scheduler.results,
engine.scheduler.transitions), the API answers 503 and ``/healthz`` ``unavailable``; all of it is
written once the server is back and the pool has reconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import time

from engine.db.embedded_lease import EmbeddedLease
from engine.runtime.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

CHECK_INTERVAL_S = 1.0
# A start that fails is retried every half second for a while (the usual cause passes within
# a second or two), then less and less often, up to every 10 s.
RETRY_FAST_S = 0.5
RETRY_FAST_FOR_S = 15.0
RETRY_CAP_S = 10.0


class EmbeddedWatch:
    """Component: every ``interval`` seconds, is the postmaster alive? If not, start it."""

    def __init__(self, lease: EmbeddedLease, interval: float = CHECK_INTERVAL_S) -> None:
        self.lease, self.interval = lease, interval
        self.restarts = 0

    async def run(self, stop: asyncio.Event) -> None:
        wait = self.interval
        down_since: float | None = None
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), wait)
            if stop.is_set():
                return
            # A file read and a /proc lookup: cheap enough to run on the loop.
            if self.lease.server.postmaster_pid() is not None:
                wait, down_since = self.interval, None
                continue
            if down_since is None:
                down_since = time.monotonic()
                log.warning("embedded PostgreSQL is not running; starting it again")
            try:
                # pg_ctl blocks for as long as the start takes: off the loop.
                started = await asyncio.to_thread(self.lease.restart_if_down)
            except (DatabaseUnavailable, OSError, subprocess.SubprocessError) as exc:
                # Typically: the killed postmaster's children have not all exited yet and
                # still hold its shared memory. They do within moments.
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                if time.monotonic() - down_since < RETRY_FAST_FOR_S:
                    wait = RETRY_FAST_S
                else:
                    wait = min(RETRY_CAP_S, max(self.interval, wait * 2))
                log.warning("embedded PostgreSQL did not start again (%s); retrying in %.1f s",
                            first[:300], wait)
                continue
            wait = self.interval
            if started:
                self.restarts += 1
                log.warning("embedded PostgreSQL started again, %.1f s after it was found "
                            "gone", time.monotonic() - down_since)
            down_since = None
