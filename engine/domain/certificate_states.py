"""The certificate state machine: (state, outcome, now) -> transition. Pure: no I/O, no clock.

The table "Certificate state machine" in docs/design.md is the specification; each branch
below names its row. States, outcome classes and transitions are
:mod:`engine.domain.evaluate`'s. Also the check's meta, from the leaf the probe read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from engine.domain import payloads
from engine.domain.evaluate import (
    DOWN,
    OK,
    CheckState,
    EventSpec,
    Outcome,
    Transition,
    bookkeeping_changed,
    cleared,
    kept,
)
from engine.domain.outcomes import CertOutcome
from engine.domain.timefmt import fmt

CERTIFICATE: Final = "certificate_health"

_DAY: Final = 86400.0
# Certificates a check remembers having announced as due for renewal (the newest): a server
# that goes back to one of them does not announce it again. Far more renewals than a
# certificate could outlive.
RENEWAL_MEMORY: Final = 32


def lifetime_days(outcome: CertOutcome) -> float | None:
    """The certificate's own lifetime (valid_to - valid_from) in days, 2 decimals."""
    if outcome.valid_from is None or outcome.valid_to is None:
        return None
    return round(_seconds(outcome.valid_to, outcome.valid_from) / _DAY, 2)


def certificate_meta(outcome: CertOutcome) -> dict[str, Any]:
    """api.md's keys always present (null when the probe could not read the certificate);
    the leaf's identity (docs/alerts.md) added when it was read."""
    meta: dict[str, Any] = {
        "issuer": outcome.issuer,
        "signature_algorithm": outcome.signature_algorithm,
        "is_self_signed": outcome.is_self_signed,
        "valid_from": fmt(outcome.valid_from),
        "valid_to": fmt(outcome.valid_to),
    }
    if outcome.fingerprint_sha256 is not None:
        meta["fingerprint_sha256"] = outcome.fingerprint_sha256
        meta["serial"] = outcome.serial
        meta["key_type"] = outcome.key_type
        meta["lifetime_days"] = lifetime_days(outcome)
    if outcome.chain is not None:
        meta.update(diagnosis=outcome.diagnosis, warnings=outcome.warnings,
                    chain=outcome.chain, revocation=outcome.revocation)
    return meta


def _seconds(a: datetime, b: datetime) -> float:
    return (a - b).total_seconds()


def _renewal_due(
    prev: CheckState, outcome: CertOutcome, now: datetime, threshold_days: int,
    threshold_percent: int,
) -> bool:
    """Fewer than ``threshold_days`` days, or less than ``threshold_percent`` of the
    certificate's own lifetime, left; once per certificate: by SHA-256 fingerprint (any
    the check remembers announcing, so a rollback to an earlier one is not announced again),
    or by ``valid_to`` when no fingerprint is known (a state from before fingerprints)."""
    valid_to = outcome.valid_to
    if valid_to is None or (threshold_days <= 0 and threshold_percent <= 0):
        return False
    fingerprint = outcome.fingerprint_sha256
    if fingerprint is not None and prev.renewal_notified_fingerprints:
        if fingerprint in prev.renewal_notified_fingerprints:
            return False
    elif prev.renewal_notified_for == valid_to:
        return False
    remaining = _seconds(valid_to, now)
    if threshold_days > 0 and remaining < threshold_days * _DAY:
        return True
    if threshold_percent > 0 and outcome.valid_from is not None:
        lifetime = _seconds(valid_to, outcome.valid_from)
        return lifetime > 0 and remaining < lifetime * threshold_percent / 100.0
    return False


def announced(remembered: tuple[str, ...], fingerprint: str | None) -> tuple[str, ...]:
    """The fingerprints a check remembers once ``fingerprint`` is announced: appended (None,
    a leaf whose fingerprint was not read, adds nothing), the oldest dropped past
    RENEWAL_MEMORY."""
    if fingerprint is None or fingerprint in remembered:
        return remembered
    return (*remembered, fingerprint)[-RENEWAL_MEMORY:]


def _cert_fields(outcome: CertOutcome, now: datetime) -> dict[str, Any]:
    # A verified certificate always has both dates; the fallbacks only keep types honest.
    return {
        "last_check_at": now,
        "issuer": outcome.issuer or "",
        "signature_algorithm": outcome.signature_algorithm or "",
        "valid_from": outcome.valid_from or now,
        "valid_to": outcome.valid_to or now,
    }


def evaluate_certificate(
    prev: CheckState, outcome: CertOutcome, *, now: datetime, expiry_threshold_days: int,
    expiry_threshold_percent: int = 0,
) -> Transition:
    """A certificate probe's outcome (design.md, certificate table). Every probe that read
    a leaf carries it (``certificate``) for the check's certificate history, and is then
    durable."""
    tr = _evaluate_certificate(
        prev, outcome, now, expiry_threshold_days, expiry_threshold_percent)
    if outcome.fingerprint_sha256 is not None:
        tr.certificate = outcome
        tr.durable = True
    return tr


def _evaluate_certificate(
    prev: CheckState, outcome: CertOutcome, now: datetime, expiry_threshold_days: int,
    expiry_threshold_percent: int,
) -> Transition:
    meta = certificate_meta(outcome)
    if outcome.valid:
        if prev.status == DOWN:
            # down | valid -> ok; certificate_recovered (parent = certificate_invalid).
            new = cleared(OK, None, now, prev)
            tr = Transition(new, meta, Outcome.OK, durable=True)
            if prev.incident_event_id is not None:
                tr.events.append(EventSpec(
                    payloads.CERTIFICATE_RECOVERED,
                    _cert_fields(outcome, now),
                    parent_id=prev.incident_event_id,
                ))
            return tr
        # not down | valid -> ok; renewal_due once per certificate when fewer days (or less
        # of its lifetime) remain.
        new = cleared(OK, None, now, prev)
        tr = Transition(new, meta, Outcome.OK)
        if _renewal_due(prev, outcome, now, expiry_threshold_days, expiry_threshold_percent):
            assert outcome.valid_to is not None
            remaining = _seconds(outcome.valid_to, now)
            fields = _cert_fields(outcome, now)
            fields["expires_in_days"] = max(0, int(remaining // _DAY))
            tr.events.append(EventSpec(payloads.CERTIFICATE_RENEWAL_DUE, fields))
            new.renewal_notified_for = outcome.valid_to
            new.renewal_notified_fingerprints = announced(
                prev.renewal_notified_fingerprints, outcome.fingerprint_sha256)
        tr.durable = bool(tr.events) or bookkeeping_changed(prev, new)
        return tr

    error = outcome.error or "certificate invalid"
    if prev.status == DOWN:
        # down | invalid -> down, error updated.
        return Transition(kept(prev, DOWN, error, now), meta, Outcome.FAILURE)
    # not down | invalid -> down; certificate_invalid.
    new = cleared(DOWN, error, now, prev)
    ev = EventSpec(
        payloads.CERTIFICATE_INVALID, {"last_check_at": now, "error": error}, opens_incident=True
    )
    return Transition(new, meta, Outcome.FAILURE, events=[ev], durable=True)
