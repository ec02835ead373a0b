"""The phase roll-up job: every few minutes, roll the hours that have ended into
``check_phase_rollups_hourly`` (:meth:`engine.db.timings.TimingsMixin.roll_phase_timings`)
and delete rolled hours older than the timings endpoint's longest period.

Safe on several nodes at once: the first to lock the progress row rolls, the others skip.
An hour is rolled ``GRACE`` after it ends, so results still in a writer's buffer (a flush is
due every second or so) are in the table by then. Results written later than that (a
database outage longer than the grace, with the engine holding them meanwhile) count in the
statistics but not in the phase timings.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from engine.db.store import Store
from engine.domain.timefmt import utcnow
from engine.runtime.errors import DatabaseUnavailable

log = logging.getLogger(__name__)

GRACE = timedelta(minutes=10)
KEEP = timedelta(days=32)  # the 30-day period, plus the partial first day and a margin
INTERVAL_S = 300.0
MAX_HOURS_PER_PASS = 24  # a week of catching up is spread over a few passes


class PhaseRollup:
    def __init__(self, store: Store, *, interval: float = INTERVAL_S) -> None:
        self.store = store
        self.interval = interval

    async def run(self, stop: asyncio.Event) -> None:
        """Roll now, then every ``interval`` (sooner while catching up) until ``stop``.

        A catch-up of several passes (a new database starts a week back, see migration
        0006) is logged once, when it ends, with its total: one line per pass put seven
        "24 hours rolled up" under the first start's "ready" line."""
        catching_up = 0
        while not stop.is_set():
            wait = self.interval
            try:
                done = await self.store.roll_phase_timings(
                    utcnow(), grace=GRACE, max_hours=MAX_HOURS_PER_PASS, keep=KEEP)
                if done == MAX_HOURS_PER_PASS:
                    catching_up += done
                    log.debug("phase timings: %d hours rolled up so far", catching_up)
                    wait = 1.0
                elif done or catching_up:
                    log.info("phase timings: %d hours rolled up", catching_up + done)
                    catching_up = 0
            except DatabaseUnavailable as exc:
                log.warning("phase roll-up postponed, database unavailable: %s", exc)
            except Exception:
                log.exception("phase roll-up failed; will retry")
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass
