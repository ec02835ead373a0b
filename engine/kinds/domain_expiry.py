"""The domain expiry kind: what the registry of the monitor's registrable domain says (RDAP),
judged by time left before expiry and the registry's status codes.

Probes through a :class:`DomainProbe` (``engine.scheduler.registrations.DomainProber``: one
registry query per domain and day, shared by every monitor); judged by
:func:`engine.domain.domain_expiry.evaluate_domain`. No confirmation, no taskless start, no
steady path: every probe is judged and committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, Protocol

from engine.domain.domain_expiry import (
    DEFAULT_THRESHOLDS,
    DOMAIN_EXPIRY,
    DomainOutcome,
    evaluate_domain,
)
from engine.domain.evaluate import Outcome, Transition
from engine.kinds.base import (
    Cancellable,
    Fact,
    Judging,
    Phases,
    ResultRow,
    ShownCheck,
    Steady,
    no_prober,
    plain_row,
)
from engine.kinds.scheduled import ScheduledCheck
from engine.kinds.shown import (
    every_key,
    expiry_text,
    last_checked,
    meta_text,
    parse_timestamp,
    status_words,
)

CODE: Final = 4  # probe_results.kind

_WORDS: Final = status_words(
    ok="Registered", degraded="Registry not answering", down="Expired or on hold",
    unsupported="Not checkable (no RDAP)",
)

# The API meta's keys, every one always present (null, or empty lists, before a probe).
META_KEYS: Final = (
    "domain", "registrar", "expires_at", "days_left", "statuses", "nameservers", "source",
    "rdap_server", "checked_at", "warning",
)


class DomainProbe(Protocol):
    async def probe(self, host: str) -> DomainOutcome: ...
    async def aclose(self) -> None: ...


def thresholds(check: ScheduledCheck) -> tuple[int, ...]:
    return DEFAULT_THRESHOLDS if check.expiry_days is None else check.expiry_days


class DomainExpiryKind:
    """See the module docstring; ``prober`` None builds a kind for presentation only."""

    def __init__(self, prober: DomainProbe | None = None) -> None:
        self.name: str = DOMAIN_EXPIRY
        self.code: int = CODE
        self.label: str = "Domain registration"
        self.words: Mapping[str, tuple[str, str]] = _WORDS
        self.prober = prober
        self.start: Callable[..., Cancellable] | None = None
        self.steady: Steady | None = None

    async def probe(self, check: ScheduledCheck) -> DomainOutcome:
        if self.prober is None:
            raise no_prober(self.name)
        return await self.prober.probe(check.host)

    def judge(
        self, check: ScheduledCheck, outcome: DomainOutcome, now: datetime, judging: Judging
    ) -> Transition:
        return evaluate_domain(check.state, outcome, now=now, thresholds=thresholds(check))

    def judge_again(
        self, check: ScheduledCheck, outcome: DomainOutcome, now: datetime, region: str,
        judging: Judging,
    ) -> Transition:
        return self.judge(check, outcome, now, judging)  # never asks for a confirmation

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        return None

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: DomainOutcome, region: str,
        confirmation: bool,
    ) -> ResultRow:
        error = outcome.unsupported or (outcome.error if outcome.registration is None else None)
        return plain_row(check_id, at, CODE, cls, outcome.total_ms, region, confirmation, error)

    def observe(self, outcome: DomainOutcome, phases: Phases) -> None:
        phases.total.observe(outcome.total_ms / 1000.0)

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]:
        out = every_key(check.meta, META_KEYS)
        for k in ("statuses", "nameservers"):
            if not isinstance(out[k], list):
                out[k] = []
        return out

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]:
        domain = meta_text(check.meta, "domain")
        expires = parse_timestamp(check.meta.get("expires_at"))
        if expires is not None:
            when = expiry_text(expires, now)
        elif check.status == "unsupported":
            when = "Not published by the registry (no RDAP)"
        else:
            when = "Unknown"
        return [
            ("Domain", domain or "Unknown", False),
            ("Domain expires", when, False),
            ("Last checked", last_checked(check.last_check_at), False),
        ]

    def status_fields(self, check: ShownCheck) -> dict[str, Any]:
        left = check.meta.get("days_left")
        return {"domain_days_left": left if isinstance(left, int) else None}
