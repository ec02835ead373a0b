"""Certificates judged by their own lifetime, renewal-due once per certificate (by SHA-256
fingerprint, a rollback to an announced one included), and the leaf's identity in meta (pure:
no database, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain import payloads
from engine.domain.certificate_states import RENEWAL_MEMORY, evaluate_certificate
from engine.domain.evaluate import OK, CheckState, Transition
from engine.domain.outcomes import CertOutcome

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def leaf(lifetime_days: float, left_days: float, fingerprint: str = "aa" * 32) -> CertOutcome:
    valid_to = NOW + timedelta(days=left_days)
    return CertOutcome(True, None, "Test CA", "ecdsa-with-SHA256", False,
                       valid_to - timedelta(days=lifetime_days), valid_to, 12.0,
                       fingerprint_sha256=fingerprint, serial="1f", key_type="EC-secp256r1",
                       subject="example.com")


def due(o: CertOutcome, *, days: int = 0, percent: int = 0,
        prev: CheckState | None = None) -> bool:
    tr = evaluate_certificate(prev or CheckState(status=OK), o, now=NOW,
                              expiry_threshold_days=days, expiry_threshold_percent=percent)
    return [e.event for e in tr.events] == [payloads.CERTIFICATE_RENEWAL_DUE]


def test_a_day_threshold_is_always_due_for_a_six_day_certificate() -> None:
    assert due(leaf(6, 5), days=14)  # the problem the percent threshold solves
    assert not due(leaf(6, 5), percent=33)  # 83 % of its lifetime left
    assert not due(leaf(6, 2.1), percent=33)  # 35 % left
    assert due(leaf(6, 1.9), percent=33)  # 32 % left


def test_the_percent_threshold_fits_a_398_day_certificate() -> None:
    assert not due(leaf(398, 300), percent=33)
    assert not due(leaf(398, 132), percent=33)  # 33.2 % left
    assert due(leaf(398, 130), percent=33)  # 32.7 % left
    # Both thresholds set: whichever comes first.
    assert due(leaf(398, 200), percent=33, days=210)


def test_renewal_due_is_sent_once_per_certificate_by_fingerprint() -> None:
    first = evaluate_certificate(CheckState(status=OK), leaf(6, 1), now=NOW,
                                 expiry_threshold_days=0, expiry_threshold_percent=33)
    [event] = first.events
    assert event.fields["expires_in_days"] == 1
    assert first.state.renewal_notified_fingerprints == ("aa" * 32,)
    assert not due(leaf(6, 1), percent=33, prev=first.state)  # the same certificate
    # Another certificate with the very same valid_to (a re-issue) is news.
    assert due(leaf(6, 1, fingerprint="bb" * 32), percent=33, prev=first.state)
    # A state from before fingerprints remembers by valid_to: no second webhook for it.
    legacy = CheckState(status=OK, renewal_notified_for=leaf(6, 1).valid_to)
    assert not due(leaf(6, 1), percent=33, prev=legacy)


def judged(o: CertOutcome, prev: CheckState) -> Transition:
    return evaluate_certificate(prev, o, now=NOW, expiry_threshold_days=14)


def test_a_rollback_to_an_announced_certificate_is_not_announced_again() -> None:
    a, b = leaf(90, 5, fingerprint="aa" * 32), leaf(90, 6, fingerprint="bb" * 32)
    state = CheckState(status=OK)
    sent = []
    for o in (a, b, a, b, a):  # A, then B, then back to A (and flapping on)
        tr = judged(o, state)
        sent += [(e.event, o.fingerprint_sha256) for e in tr.events]
        state = tr.state
    assert sent == [(payloads.CERTIFICATE_RENEWAL_DUE, "aa" * 32),
                    (payloads.CERTIFICATE_RENEWAL_DUE, "bb" * 32)]
    assert state.renewal_notified_fingerprints == ("aa" * 32, "bb" * 32)


def test_the_announced_fingerprints_are_bounded_newest_kept() -> None:
    state = CheckState(status=OK)
    for n in range(RENEWAL_MEMORY + 3):
        tr = judged(leaf(90, 5, fingerprint=f"{n:064x}"), state)
        assert len(tr.events) == 1
        state = tr.state
    remembered = state.renewal_notified_fingerprints
    assert len(remembered) == RENEWAL_MEMORY
    assert remembered[0] == f"{3:064x}" and remembered[-1] == f"{RENEWAL_MEMORY + 2:064x}"
    # The newest are still known; the oldest, long gone, would be announced again.
    assert not judged(leaf(90, 5, fingerprint=f"{RENEWAL_MEMORY:064x}"), state).events
    assert judged(leaf(90, 5, fingerprint=f"{0:064x}"), state).events


def test_meta_gains_the_leaf_identity_and_the_history_gets_every_leaf() -> None:
    tr = evaluate_certificate(CheckState(status=OK), leaf(90, 60), now=NOW,
                              expiry_threshold_days=0)
    assert tr.meta["fingerprint_sha256"] == "aa" * 32 and tr.meta["serial"] == "1f"
    assert tr.meta["key_type"] == "EC-secp256r1" and tr.meta["lifetime_days"] == 90.0
    assert tr.certificate is not None and tr.durable
    # No leaf read (no TLS answer): api.md's keys only, nothing for the history.
    none = CertOutcome(False, "no TLS answer: connection refused", None, None, None, None,
                       None, 3.0)
    failed = evaluate_certificate(CheckState(status=OK), none, now=NOW,
                                  expiry_threshold_days=0)
    assert set(failed.meta) == {"issuer", "signature_algorithm", "is_self_signed",
                                "valid_from", "valid_to"}
    assert failed.certificate is None
