"""The uptime kind: a probe of the monitor's URL, judged by status and time.

Probes http(s) URLs through an :class:`engine.probes.http.HttpProber` (or anything with its
``probe``; one with ``start`` too gives the taskless start), other schemes through their
probers (:mod:`engine.kinds.uptime_probers`), chosen by the URL's scheme. Judged by
:func:`engine.domain.evaluate.evaluate_uptime` (and ``evaluate_confirmation`` for the
second opinion its failures ask for). Offers ``steady``: the common probe that leaves the
state as it was, without a transition, a task or an await. Per-probe code: compiled
(engine/runtime/compiled.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Protocol

from engine.domain.evaluate import (
    FAILING,
    UPTIME,
    Outcome,
    Transition,
    decision_due,
    evaluate_confirmation,
    evaluate_uptime,
    steady_class,
    uptime_error,
    uptime_meta,
)
from engine.domain.outcomes import HttpOutcome
from engine.domain.timefmt import fmt
from engine.kinds.base import (
    Cancellable,
    Fact,
    Judging,
    Phases,
    ResultRow,
    ShownCheck,
    Steady,
    no_prober,
)
from engine.kinds.scheduled import ScheduledCheck, Touch
from engine.kinds.shown import duration_text, last_checked, status_code, status_words
from engine.kinds.uptime_probers import ByScheme, UptimeProbe

CODE: Final = 1  # probe_results.kind

# The meta of a steady probe, one shared (never modified) dict per status code: no dict per
# probe, and the results writer encodes each once per batch.
_META: Final[dict[int | None, dict[str, Any]]] = {}
_META_MAX: Final = 1000  # status codes are three digits; a bound all the same

_OK: Final = Outcome.OK  # a global, not a read through enum's descriptor per probe
_OUTCOME_CODE: Final = tuple(int(cls) for cls in Outcome)  # int(cls) without a call
_utcnow: Final = datetime.now  # the classmethod bound once: one lookup fewer per probe

_WORDS: Final = status_words(ok="Up", failing="Failing, verifying", down="Down")


class HttpProbe(Protocol):
    """``probe`` is all a prober needs. One that also has ``start(loop, url, done, arg[,
    spec])`` returning a :class:`Cancellable` (``HttpProber.start``: ``done(arg, outcome)``
    is called once, later, unless the handle is cancelled) probes without a task each."""

    async def probe(self, url: str) -> HttpOutcome: ...
    async def aclose(self) -> None: ...


class UptimeKind:
    """See the module docstring; ``prober`` None builds a kind for presentation only."""

    def __init__(
        self, prober: HttpProbe | None = None,
        others: Mapping[str, UptimeProbe] | None = None,
    ) -> None:
        """``prober``: http(s)'s; ``others``: the other schemes' probers, by scheme."""
        self.name: str = UPTIME
        self.code: int = CODE
        self.label: str = "Website"
        self.words: Mapping[str, tuple[str, str]] = _WORDS
        self.prober = prober
        self.by_scheme = ByScheme(prober, others)
        self._others = bool(others)
        # Probers passed in (tests' wrappers) may have only ``probe``.
        http_start: Callable[..., Cancellable] | None = getattr(prober, "start", None)
        self._http_start = http_start
        self.start: Callable[..., Cancellable] | None = (
            self._start if http_start is not None and others else http_start)
        self.steady: Steady | None = self._steady

    async def probe(self, check: ScheduledCheck) -> HttpOutcome:
        if self.prober is None and not self._others:
            raise no_prober(self.name)
        if self._others:
            return await self.by_scheme.probe(check.url, check.request)
        prober = self.prober
        assert prober is not None
        if check.request is None:
            return await prober.probe(check.url)
        return await prober.probe(check.url, check.request)  # type: ignore[call-arg]

    def _start(
        self, loop: Any, url: str, done: Callable[[Any, HttpOutcome], None], arg: Any,
        spec: Any = None,
    ) -> Cancellable:
        """``start`` when other schemes are registered: http(s) without a task as ever,
        the others in a task that calls ``done`` back the same way."""
        if url.startswith("http"):
            start = self._http_start
            assert start is not None
            return start(loop, url, done, arg) if spec is None else start(
                loop, url, done, arg, spec)
        task: Cancellable = loop.create_task(self._probe_then(url, spec, done, arg))
        return task

    async def _probe_then(
        self, url: str, spec: Any, done: Callable[[Any, HttpOutcome], None], arg: Any
    ) -> None:
        try:
            outcome = await self.by_scheme.probe(url, spec)
        except Exception as exc:  # a prober's bug: a failed probe, never a stuck check
            outcome = HttpOutcome(None, f"probe failed: {type(exc).__name__}", 0.0,
                                  None, None, None, None)
        done(arg, outcome)

    def _steady(
        self, c: ScheduledCheck, version: int, outcome: HttpOutcome, judging: Judging
    ) -> tuple[ResultRow, Touch] | None:
        """The common case: a probe that leaves the check as it was (ok stays ok, see
        ``steady_class``) changes only error, meta and last_check_at. Its row and touch are
        exactly what ``judge`` and a commit would write for it, without building the
        transition; None for anything else."""
        state = c.state
        slow = judging.slow_threshold_ms
        cls = steady_class(state, outcome, slow)
        if cls is None:
            return None
        # Its own datetime.now(), not one shared by the probes ending in the same
        # millisecond: a shared one put a result's time up to 1 ms early, so that its time
        # minus its duration could fall before the moment it was due.
        now = _utcnow(UTC)
        error = None if cls is _OK else uptime_error(outcome, cls, slow)
        row: ResultRow = (
            c.id, now, CODE, _OUTCOME_CODE[cls], outcome.status_code, outcome.total_ms,
            outcome.dns_ms, outcome.connect_ms, outcome.tls_ms, outcome.ttfb_ms,
            judging.region, False, outcome.error,
        )
        code = outcome.status_code
        meta = _META.get(code) if outcome.details is None else None
        if meta is None:
            meta = uptime_meta(outcome)
            if len(_META) < _META_MAX and outcome.details is None:
                _META[code] = meta
        return row, Touch(version, now, state.status, error, meta)

    def judge(
        self, check: ScheduledCheck, outcome: HttpOutcome, now: datetime, judging: Judging
    ) -> Transition:
        scale = judging.scale
        threshold = check.threshold_s * scale
        muted_until, resumed_at = judging.quiet(check.monitor_id, check.account_id, now)
        return evaluate_uptime(
            check.state, outcome, now=now, region=judging.region, threshold=threshold,
            slow_threshold_ms=judging.slow_threshold_ms, recovery=check.recovery_s * scale,
            muted_until=muted_until, resumed_at=resumed_at,
        )

    def judge_again(
        self, check: ScheduledCheck, outcome: HttpOutcome, now: datetime, region: str,
        judging: Judging,
    ) -> Transition:
        scale = judging.scale
        muted_until, resumed_at = judging.quiet(check.monitor_id, check.account_id, now)
        return evaluate_confirmation(
            check.state, outcome, now=now, verified_via=region,
            threshold=check.threshold_s * scale, slow_threshold_ms=judging.slow_threshold_ms,
            recovery=check.recovery_s * scale, muted_until=muted_until, resumed_at=resumed_at,
        )

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        state = check.state
        # Only failing checks and recovering ones may wait: no calendar call for the others.
        if state.status != FAILING and state.recovering_since is None:
            return None
        scale = judging.scale
        muted_until, resumed_at = judging.quiet(
            check.monitor_id, check.account_id, datetime.now(UTC))
        return decision_due(
            state, check.threshold_s * scale, check.recovery_s * scale, muted_until,
            resumed_at,
        )

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: HttpOutcome, region: str,
        confirmation: bool,
    ) -> ResultRow:
        o = outcome
        return (
            check_id, at, CODE, int(cls), o.status_code, o.total_ms, o.dns_ms,
            o.connect_ms, o.tls_ms, o.ttfb_ms, region, confirmation,
            o.error if o.assertion_error is None else o.assertion_error,
        )

    def observe(self, outcome: HttpOutcome, phases: Phases) -> None:
        o = outcome
        phases.total.observe(o.total_ms / 1000.0)
        if o.dns_ms is not None:
            phases.dns.observe(o.dns_ms / 1000.0)
        if o.connect_ms is not None:
            phases.connect.observe(o.connect_ms / 1000.0)
        if o.tls_ms is not None:
            phases.tls.observe(o.tls_ms / 1000.0)
        if o.ttfb_ms is not None:
            phases.first_byte.observe(o.ttfb_ms / 1000.0)

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]:
        """Every key always present (null before the first run); ``figures`` are the
        check's 30-day figures (``engine.db.monitor_records.UptimeFigures``); then a
        non-HTTP probe's figures (``HttpOutcome.details``) as the last probe stored them."""
        meta = {
            "http_status_code": status_code(check.meta),
            "average_uptime_percentage": figures.uptime_percentage,
            "average_response_time": figures.average_response_ms,
            "offline_since": fmt(figures.offline_since),
        }
        if isinstance(check.meta, Mapping) and len(check.meta) > 1:
            for key, value in check.meta.items():
                meta.setdefault(key, value)
        return meta

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]:
        facts: list[Fact] = [("Last checked", last_checked(check.last_check_at), False)]
        code = status_code(check.meta)
        if code is not None:
            facts.append(("HTTP status", str(code), False))
        loss = check.meta.get("packet_loss")
        if isinstance(loss, int | float):  # a ping (icmp://) monitor's last probe
            facts.append(("Packet loss", f"{loss:g} %", False))
            rtt = check.meta.get("rtt_avg")
            if isinstance(rtt, int | float):
                facts.append(("Round trip", f"{rtt:.1f} ms on average", False))
        facts.append(("Checked every", duration_text(check.interval), False))
        return facts

    def status_fields(self, check: ShownCheck) -> dict[str, Any]:
        return {"http_status_code": status_code(check.meta)}
