"""The certificate kind: a TLS handshake with the monitor's host (on the port
:func:`engine.probes.tls.certificate_port` picks), judged by the leaf's validity and time left.

Probes through an :class:`engine.probes.tls.CertProber` (or anything with its ``probe``);
judged by :func:`engine.domain.certificate_states.evaluate_certificate`. No confirmation, no
taskless start, no steady path: every probe is judged and committed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final, Protocol

from engine.domain.certificate_states import CERTIFICATE, evaluate_certificate
from engine.domain.evaluate import Outcome, Transition
from engine.domain.outcomes import CertOutcome
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
    api_timestamp,
    every_key,
    expiry_text,
    last_checked,
    meta_text,
    parse_timestamp,
    status_words,
)
from engine.probes.starttls import starttls_scheme
from engine.probes.tls import certificate_port

CODE: Final = 2  # probe_results.kind

_WORDS: Final = status_words(ok="Valid", down="Invalid")
# The API meta's keys once a probe has read the leaf, and once it has read the chain.
_LEAF_KEYS: Final = ("fingerprint_sha256", "serial", "key_type", "lifetime_days")
_CHAIN_KEYS: Final = ("diagnosis", "warnings", "chain", "revocation")


class CertProbe(Protocol):
    async def probe(
        self, host: str, port: int, starttls: str | None = None
    ) -> CertOutcome: ...
    async def aclose(self) -> None: ...


class CertificateKind:
    """See the module docstring; ``prober`` None builds a kind for presentation only."""

    def __init__(self, prober: CertProbe | None = None) -> None:
        self.name: str = CERTIFICATE
        self.code: int = CODE
        self.label: str = "TLS certificate"
        self.words: Mapping[str, tuple[str, str]] = _WORDS
        self.prober = prober
        self.start: Callable[..., Cancellable] | None = None
        self.steady: Steady | None = None

    async def probe(self, check: ScheduledCheck) -> CertOutcome:
        if self.prober is None:
            raise no_prober(self.name)
        url = check.url
        return await self.prober.probe(
            check.host, certificate_port(url, check.port), starttls_scheme(url))

    def judge(
        self, check: ScheduledCheck, outcome: CertOutcome, now: datetime, judging: Judging
    ) -> Transition:
        return evaluate_certificate(
            check.state, outcome, now=now, expiry_threshold_days=check.threshold_s // 86400,
            expiry_threshold_percent=check.expiry_percent,
        )

    def judge_again(
        self, check: ScheduledCheck, outcome: CertOutcome, now: datetime, region: str,
        judging: Judging,
    ) -> Transition:
        return self.judge(check, outcome, now, judging)  # never asks for a confirmation

    def decision_due(self, check: ScheduledCheck, judging: Judging) -> datetime | None:
        return None

    def row(
        self, check_id: int, at: datetime, cls: Outcome, outcome: CertOutcome, region: str,
        confirmation: bool,
    ) -> ResultRow:
        return plain_row(check_id, at, CODE, cls, outcome.total_ms, region, confirmation,
                         outcome.error)

    def observe(self, outcome: CertOutcome, phases: Phases) -> None:
        phases.total.observe(outcome.total_ms / 1000.0)

    def api_meta(self, check: ShownCheck, figures: Any) -> dict[str, Any]:
        """api.md's keys, every one always present (null before the first run), the
        leaf's identity once a probe has read it, and the diagnosis, warnings, chain and
        revocation verdict once a probe has read the chain."""
        meta = check.meta
        self_signed = meta.get("is_self_signed")
        out = {
            "issuer": meta.get("issuer"),
            "signature_algorithm": meta.get("signature_algorithm"),
            "is_self_signed": self_signed if isinstance(self_signed, bool) else None,
            "valid_from": api_timestamp(meta.get("valid_from")),
            "valid_to": api_timestamp(meta.get("valid_to")),
        }
        if isinstance(meta.get("fingerprint_sha256"), str):
            out.update(every_key(meta, _LEAF_KEYS))
        if isinstance(meta.get("chain"), list):
            out.update(every_key(meta, _CHAIN_KEYS))
        return out

    def status_facts(self, check: ShownCheck, now: datetime) -> list[Fact]:
        issuer = meta_text(check.meta, "issuer")
        valid_to = parse_timestamp(check.meta.get("valid_to"))
        return [
            ("Issuer", issuer or "Unknown", issuer is not None),
            ("Expires", "Unknown" if valid_to is None else expiry_text(valid_to, now), False),
            ("Last checked", last_checked(check.last_check_at), False),
        ]

    def status_fields(self, check: ShownCheck) -> dict[str, Any]:
        return {}
