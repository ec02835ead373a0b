"""What a visitor reads of why a check failed: every reason the probes give, in fixed words
that never carry the owner's error text; a failed assertion named by its source and
property, never by its target or the value received; and what confirmed an outage, as the
outage row records it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engine.db.public import PublicCheck, PublicOutage
from engine.web.status.public_text import confirmed_by, public_reason
from engine.web.status.view import confirmed_text, outage_views, overall_state

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
SECRET = "RESPONSE_SECRET-91c2"


@pytest.mark.parametrize(("error", "code", "key", "words"), [
    ("timed out after 10 s", None, "timeout", "Timed out: the site did not answer in time"),
    ("connection timed out", None, "timeout", "Timed out: the site did not answer in time"),
    ("connection refused", None, "refused",
     "Connection refused: nothing accepted the connection"),
    ("connection reset", None, "dropped",
     "The connection was closed before a complete response"),
    ("connection closed before a response", None, "dropped",
     "The connection was closed before a complete response"),
    ("network unreachable", None, "unreachable", "The site's network could not be reached"),
    ("connection failed: no route to host", None, "connect_failed",
     "Could not connect to the site"),
    ("DNS lookup failed: secret-host.internal (server failure)", None, "dns",
     "The site's name could not be looked up (DNS)"),
    ("blocked: intranet.example resolves to a non-public address (10.1.2.3)", None,
     "private_address", "The site's name points to a non-public address"),
    ("TLS handshake failed: wrong version number", None, "tls",
     "A secure (TLS) connection could not be made"),
    ("no TLS answer: connection refused", None, "tls",
     "A secure (TLS) connection could not be made"),
    ("certificate expired", None, "certificate", "The TLS certificate has expired"),
    ("self-signed certificate", None, "certificate", "The TLS certificate is self-signed"),
    ("host name mismatch", None, "certificate", "The TLS certificate is for another name"),
    ("certificate expired on 2026-01-01 00:00:00 UTC; fix: renew it", None, "certificate",
     "The TLS certificate has expired"),
    ("incomplete chain: the server does not send 'CN=R3'; fix: serve it", None,
     "certificate", "The site does not send its whole certificate chain"),
    ("certificate revoked on 2026-01-01 00:00:00 UTC (reason: keyCompromise); fix: x", None,
     "certificate", "The TLS certificate has been revoked"),
    ("certificate invalid: unsuitable certificate purpose", None, "certificate",
     "The TLS certificate is not valid"),
    ("invalid HTTP response", None, "invalid_response",
     "The site sent an invalid HTTP response"),
    ("headers too large", None, "invalid_response", "The site sent an invalid HTTP response"),
    ("too many redirects", None, "redirects", "Too many redirects"),
    ("request secrets cannot be decrypted (another UPWATCH_SECRET_KEY?)", None,
     "not_checkable", "The check could not be run"),
    ("probe failed: internal error", None, "not_checkable", "The check could not be run"),
    ("no response", None, "no_response", "No response"),
    ("HTTP 503", 503, "http_status", "Server error (HTTP 503)"),
    ("HTTP 404", 404, "http_status", "Error status (HTTP 404)"),
    ("slow response: 3120 ms (threshold 2000 ms)", 200, "slow", "Slow response"),
    ("responding again since 2026-03-10 11:58:00; recovery not confirmed yet", 200,
     "recovering", "Responding again; the recovery is being confirmed"),
    (f'json $.token is_empty failed: got "{SECRET}"', 200, "assertion_failed",
     "Response check failed"),
    (f"something new the probes may say one day: {SECRET}", None, "other", "The check failed"),
])
def test_every_probe_reason_has_its_own_words(
    error: str, code: int | None, key: str, words: str
) -> None:
    assert public_reason(error, code) == (key, words)


def test_nothing_wrong_has_no_reason() -> None:
    assert public_reason(None, None) is None
    assert public_reason("", None) is None


ASSERTIONS = [
    {"source": "status_code", "property": None, "comparison": "equals", "target": 200},
    {"source": "header", "property": "Set-Cookie", "comparison": "equals",
     "target": "expected-cookie"},
    {"source": "json", "property": "$.token", "comparison": "is_empty", "target": None},
    {"source": "json", "property": "$.status", "comparison": "equals", "target": "UP"},
    {"source": "body", "property": None, "comparison": "not_contains", "target": "Fatal"},
]


@pytest.mark.parametrize(("error", "named"), [
    (f'header Set-Cookie equals "expected-cookie" failed: got "session={SECRET}"',
     "the Set-Cookie header did not have the expected value"),
    (f'json $.token is_empty failed: got "{SECRET}"', "the JSON value at $.token was not empty"),
    ('json $.status equals "UP" failed: got "DOWN"',
     "the JSON value at $.status did not have the expected value"),
    ('body not_contains "Fatal" failed: found in the body',
     "the response body contained text it must not contain"),
    ("status_code equals 200 failed: got 201", "the HTTP status code did not have the "
     "expected value"),
])
def test_a_failed_assertion_is_named_by_its_source_never_by_values(
    error: str, named: str
) -> None:
    key, words = public_reason(error, 200, ASSERTIONS) or ("", "")
    assert key == "assertion_failed"
    assert words == f"Response check failed: {named}"
    for private in (SECRET, "expected-cookie", "DOWN", "Fatal", '"UP"', "201"):
        assert private not in words


def test_an_assertion_no_longer_configured_is_not_named() -> None:
    error = f'header X-Build equals "abc" failed: got "{SECRET}"'
    assert public_reason(error, 200, ASSERTIONS) == ("assertion_failed", "Response check failed")


def _check(status: str, error: str | None, code: int | None) -> PublicCheck:
    return PublicCheck(1, "uptime", status, error, 60, True, None, {"http_status_code": code})


def test_the_banner_tells_an_assertion_outage_from_a_site_that_does_not_answer() -> None:
    error = f'json $.token is_empty failed: got "{SECRET}"'
    ongoing = PublicOutage(NOW - timedelta(minutes=5), None, 300, 200, error)
    state = overall_state({"uptime": _check("down", error, 200)}, ongoing)
    assert state.detail == ("The site answers, but its response check has been failing since "
                            "2026-03-10 11:55:00 UTC.")
    refused = PublicOutage(NOW - timedelta(minutes=5), None, 300, None, "connection refused")
    state = overall_state({"uptime": _check("down", "connection refused", None)}, refused)
    assert state.detail == "The site has not been responding since 2026-03-10 11:55:00 UTC."
    # Without the outage row (a page read between the two writes): from the check alone.
    state = overall_state({"uptime": _check("down", "HTTP 502", 502)})
    assert state.detail == "The site has been answering with errors."


def test_an_outage_cause_is_the_reason_never_the_status_it_got() -> None:
    error = f'json $.token is_empty failed: got "{SECRET}"'
    outage = PublicOutage(NOW - timedelta(hours=1), NOW, 3600, 200, error, "local", "local")
    (row,) = outage_views([outage], ASSERTIONS)
    assert row.cause == "Response check failed: the JSON value at $.token was not empty"
    assert "HTTP 200" not in row.cause


@pytest.mark.parametrize(("rows", "key", "text"), [
    ([("local", "local")], "same_region",
     "Confirmed by a second check from the same region"),
    ([("eu-west", "us-east")], "another_region", "Confirmed by a check from another region"),
    ([("eu-west", "us-east"), ("eu-west", "eu-west")], None,
     "Confirmed by a second check from the same or another region"),
    ([(None, None)], None, "Confirmed by a second check"),
])
def test_what_confirmed_the_outages(
    rows: list[tuple[str | None, str | None]], key: str | None, text: str
) -> None:
    outages = [PublicOutage(NOW - timedelta(hours=1), NOW, 3600, 503, "HTTP 503", d, v)
               for d, v in rows]
    if len(rows) == 1:
        assert confirmed_by(*rows[0]) == key
    assert confirmed_text(outage_views(outages)) == text
    assert confirmed_text([]) == ""
