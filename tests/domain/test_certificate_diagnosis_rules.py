"""The pure rules of certificate diagnoses: which code a verify result and a chain give,
the CA/Browser Forum lifetime limits by issue date, and what is a warning."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from engine.domain.certdiagnosis import ChainCert, Revocation, diagnose, lifetime_limit

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def cert(subject: str, issuer: str, *, days: tuple[float, float] = (-10, 80),
         key: tuple[str, int] = ("EC", 256), hash_name: str | None = "sha256",
         ca_issuers: tuple[str, ...] = (), names: tuple[str, ...] = ()) -> ChainCert:
    return ChainCert(
        subject=f"CN={subject}", issuer=f"CN={issuer}", subject_der=subject.encode(),
        issuer_der=issuer.encode(), not_before=NOW + timedelta(days=days[0]),
        not_after=NOW + timedelta(days=days[1]), key_type=key[0], key_bits=key[1],
        signature_algorithm=f"x-{hash_name}", hash=hash_name, is_ca=subject != "leaf",
        serial=1, names=names, ca_issuers=ca_issuers)


LEAF = cert("leaf", "Inter", names=("example.org",))
INTER = cert("Inter", "Root")
ROOT = cert("Root", "Root")


def test_lifetime_limits_follow_the_issue_date() -> None:
    assert lifetime_limit(datetime(2018, 2, 28, tzinfo=UTC)) is None
    assert lifetime_limit(datetime(2019, 1, 1, tzinfo=UTC))[0] == 825  # type: ignore[index]
    assert lifetime_limit(datetime(2026, 3, 14, 23, tzinfo=UTC))[0] == 398  # type: ignore[index]
    assert lifetime_limit(datetime(2026, 3, 15, tzinfo=UTC))[0] == 200  # type: ignore[index]
    assert lifetime_limit(datetime(2027, 3, 15, tzinfo=UTC))[0] == 100  # type: ignore[index]
    assert lifetime_limit(datetime(2029, 3, 15, tzinfo=UTC))[0] == 47  # type: ignore[index]


def test_a_long_leaf_is_a_warning_only_over_its_issue_dates_limit() -> None:
    ok = cert("leaf", "Inter", days=(-10, 189))  # 199 days, issued after 2026-03-15
    assert diagnose(None, "", [ok, INTER], "example.org", NOW).code is None
    long = cert("leaf", "Inter", days=(-10, 191))  # 201 days
    d = diagnose(None, "", [long, INTER], "example.org", NOW)
    assert (d.code, d.error) == ("lifetime_over_limit", None)
    assert "allows 200" in d.warnings[0]["message"]


def test_missing_issuer_with_aia_is_an_incomplete_chain_else_an_untrusted_root() -> None:
    aia = cert("leaf", "Inter", ca_issuers=("http://ca.example/inter.crt",))
    d = diagnose(20, "unable to get local issuer certificate", [aia], "example.org", NOW)
    assert d.code == "incomplete_chain" and d.error is not None
    assert "'CN=Inter'" in d.error and "http://ca.example/inter.crt" in d.error
    d = diagnose(20, "unable to get local issuer certificate", [LEAF, INTER], "x", NOW)
    assert d.code == "untrusted_root" and d.error is not None and "'CN=Root'" in d.error


def test_verify_codes_map_to_codes() -> None:
    old_inter = cert("Inter", "Root", days=(-400, -1))
    cases = {
        10: ([LEAF, old_inter], "expired_intermediate"),
        9: ([LEAF], "not_yet_valid"),
        18: ([cert("leaf", "leaf")], "self_signed"),
        19: ([LEAF, INTER, ROOT], "untrusted_root"),
        62: ([LEAF], "hostname_mismatch"),
        66: ([cert("leaf", "Inter", key=("RSA", 1024))], "weak_key"),
        68: ([cert("leaf", "Inter", hash_name="sha1")], "weak_signature"),
        26: ([LEAF], "certificate_invalid"),
    }
    for code, (chain, expected) in cases.items():
        d = diagnose(code, "unsuitable certificate purpose", chain, "other.example", NOW)
        assert d.code == expected, (code, d)
        assert d.error is not None
    expired = cert("leaf", "Inter", days=(-90, -1))
    assert diagnose(10, "", [expired, INTER], "x", NOW).code == "expired"
    assert diagnose(26, "unsuitable certificate purpose", [LEAF], "x", NOW).error == \
        "certificate invalid: unsuitable certificate purpose"


def test_a_verified_chain_is_down_for_weak_keys_and_signatures_below_the_root_only() -> None:
    weak_root = cert("Root", "Root", key=("RSA", 1024), hash_name="sha1")
    assert diagnose(None, "", [LEAF, INTER, weak_root], "example.org", NOW).error is None
    weak = cert("Inter", "Root", key=("EC", 224))
    assert diagnose(None, "", [LEAF, weak], "example.org", NOW).code == "weak_key"
    md5 = cert("Inter", "Root", hash_name="md5")
    assert diagnose(None, "", [LEAF, md5], "example.org", NOW).code == "weak_signature"


def test_revocation_decides_over_warnings_and_an_unknown_one_is_a_warning() -> None:
    revoked = Revocation("revoked", "http://crl", revoked_at=NOW, reason="superseded")
    d = diagnose(None, "", [LEAF, INTER], "example.org", NOW, revoked)
    assert d.code == "revoked" and d.error is not None and "(reason: superseded)" in d.error
    unknown = Revocation("unknown", "http://crl", error="CRL not fetched: timed out after 2 s")
    d = diagnose(None, "", [LEAF, INTER], "example.org", NOW, unknown)
    assert (d.code, d.error) == ("crl_unavailable", None)
    assert d.warnings[0]["message"] == \
        "revocation not checked: CRL not fetched: timed out after 2 s"
