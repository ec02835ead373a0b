"""The confirmation step: before an uptime outage counts, a second probe must fail too.

The engine knows only the :class:`Confirmer` protocol, so the cluster can replace the local
second probe with a probe from another region without touching the runner or the state
machine. A confirmer answers with the region that probed and what it found, or ``None`` when
it has no verdict (the check then stays ``failing`` and the next probe asks again).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from engine.domain.outcomes import HttpOutcome
from engine.runtime.metrics import Metrics
from engine.runtime.settings import Settings

# The local re-probe waits this long (x time scale) so a blip of a second or two does not
# confirm itself; never less than the floor, so even fast test timelines re-connect afresh.
LOCAL_PAUSE_SECONDS = 1.0
LOCAL_PAUSE_FLOOR = 0.05


@dataclass(frozen=True, slots=True)
class Confirmation:
    region: str
    outcome: HttpOutcome


class ConfirmTarget(Protocol):
    """What a confirmer may know of the check (the engine's ScheduledCheck satisfies it)."""

    @property
    def id(self) -> int: ...

    @property
    def url(self) -> str: ...


class Confirmer(Protocol):
    async def confirm(
        self, check: ConfirmTarget, first_outcome: HttpOutcome
    ) -> Confirmation | None:
        """Probe ``check`` again from a confirming node; None means no verdict."""
        ...


class Prober(Protocol):
    async def probe(self, url: str) -> HttpOutcome: ...


class LocalConfirmer:
    """A second probe from this node after a short pause; the region is this node's."""

    def __init__(
        self,
        prober: Prober,
        *,
        region: str,
        pause: float,
        metrics: Metrics | None = None,
    ) -> None:
        self.prober = prober
        self.region = region
        self.pause = pause
        self._metrics = metrics

    @classmethod
    def from_settings(
        cls, prober: Prober, settings: Settings, metrics: Metrics | None = None
    ) -> LocalConfirmer:
        pause = max(LOCAL_PAUSE_FLOOR, settings.scaled(LOCAL_PAUSE_SECONDS))
        return cls(prober, region=settings.region, pause=pause, metrics=metrics)

    async def confirm(self, check: ConfirmTarget, first_outcome: HttpOutcome) -> Confirmation:
        await asyncio.sleep(self.pause)
        # The same request and assertions as the first probe.
        spec = getattr(check, "request", None)
        outcome = await (self.prober.probe(check.url) if spec is None
                         else self.prober.probe(check.url, spec))  # type: ignore[call-arg]
        if self._metrics is not None:
            self._metrics.confirmations.labels(result="local").inc()
        return Confirmation(self.region, outcome)
