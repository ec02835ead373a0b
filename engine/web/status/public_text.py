"""What the public may read of why a check failed: a reason in a visitor's words, never the
owner's error text.

A check's ``error`` is written for its owner and may quote what the target answered
(``json $.token is_empty failed: got "..."``) or where its name resolved to. The status
page, its JSON and its badges therefore never show it: :func:`reason_of` sorts the error
into one of a fixed set of reasons (:data:`REASONS`) using the structured facts (the HTTP
status code the check recorded) and the probe's fixed phrases, and the public text is the
reason's own words. Only two things from the owner's data may appear in them: the HTTP
status code (published on the page anyway) and, for a failed assertion, the assertion's
source and property as the owner configured them (:func:`assertion_words`), never its
target nor the value received. The owner reads the whole error in the API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# The banner's sentence for an ongoing outage, by what the visitor would experience.
NOT_RESPONDING = "The site has not been responding"
ANSWERS_WITH_ERRORS = "The site has been answering with errors"
CHECK_FAILING = "The site answers, but its response check has been failing"
CANNOT_CHECK = "The site could not be checked"
JOB_SILENT = "The job has not reported in"
JOB_FAILING = "The job has been failing"


@dataclass(frozen=True, slots=True)
class Reason:
    """``key``: a stable name for the JSON; ``words``: what the page says; ``outage``: the
    banner's sentence while an outage of this reason goes on (followed by "since ...")."""

    key: str
    words: str
    outage: str = NOT_RESPONDING


REASONS: Mapping[str, Reason] = {r.key: r for r in (
    Reason("no_response", "No response"),
    Reason("timeout", "Timed out: the site did not answer in time"),
    Reason("refused", "Connection refused: nothing accepted the connection"),
    Reason("dropped", "The connection was closed before a complete response"),
    Reason("unreachable", "The site's network could not be reached"),
    Reason("connect_failed", "Could not connect to the site"),
    Reason("dns", "The site's name could not be looked up (DNS)"),
    Reason("tls", "A secure (TLS) connection could not be made"),
    Reason("certificate", "The TLS certificate is not valid"),
    Reason("invalid_response", "The site sent an invalid HTTP response", ANSWERS_WITH_ERRORS),
    Reason("redirects", "Too many redirects", ANSWERS_WITH_ERRORS),
    Reason("http_status", "Error status", ANSWERS_WITH_ERRORS),
    Reason("assertion_failed", "Response check failed", CHECK_FAILING),
    Reason("slow", "Slow response"),
    Reason("dns_answer", "The DNS server's answer was not the expected one",
           ANSWERS_WITH_ERRORS),
    Reason("recovering", "Responding again; the recovery is being confirmed"),
    Reason("private_address", "The site's name points to a non-public address", CANNOT_CHECK),
    Reason("not_checkable", "The check could not be run", CANNOT_CHECK),
    Reason("other", "The check failed", CANNOT_CHECK),
    # Heartbeats (engine/domain/heartbeat.py): the job's pings, never its output.
    Reason("late", "No ping by the expected time", JOB_SILENT),
    Reason("job_failed", "The job reported a failure", JOB_FAILING),
    Reason("overrun", "A run went on past its time limit", JOB_FAILING),
    Reason("too_fast", "A run finished faster than expected", JOB_FAILING),
    Reason("too_often", "Pings came more often than expected", JOB_FAILING),
)}

# The certificate diagnoses by the fixed opening of their words (docs/certificates.md; the
# details and the fix after it are the owner's), in the page's words.
_CERTIFICATE_WORDS: Mapping[str, str] = {
    "certificate expired": "The TLS certificate has expired",
    "certificate not yet valid": "The TLS certificate is not valid yet",
    "self-signed certificate": "The TLS certificate is self-signed",
    "untrusted issuer": "The TLS certificate's issuer is not trusted",
    "untrusted root": "The TLS certificate's issuer is not trusted",
    "incomplete chain": "The site does not send its whole certificate chain",
    "intermediate certificate expired": "An intermediate certificate has expired",
    "host name mismatch": "The TLS certificate is for another name",
    "weak key": "The TLS certificate's key is too weak",
    "weak signature": "The TLS certificate's signature is too weak",
    "certificate revoked": "The TLS certificate has been revoked",
    "certificate invalid": "The TLS certificate is not valid",
}


def _certificate_opening(low: str) -> str | None:
    for opening in _CERTIFICATE_WORDS:
        if low == opening or low.startswith((opening + ":", opening + " on ")):
            return opening
    return None

# The probes' fixed openings (engine/probes/failures.py, http.py, tls.py, resolver.py), first
# match wins. Only the reason is taken from a match, never any text.
_PREFIXES: Sequence[tuple[str, str]] = (
    ("timed out", "timeout"),
    ("connection timed out", "timeout"),
    ("connection refused", "refused"),
    ("connection reset", "dropped"),
    ("connection closed", "dropped"),
    ("network unreachable", "unreachable"),
    ("host unreachable", "unreachable"),
    ("connection failed", "connect_failed"),
    ("dns lookup failed", "dns"),
    ("blocked:", "private_address"),
    ("tls error", "tls"),
    ("tls handshake failed", "tls"),
    ("no tls answer", "tls"),
    ("certificate invalid", "certificate"),
    ("invalid http response", "invalid_response"),
    ("headers too large", "invalid_response"),
    ("too many redirects", "redirects"),
    ("invalid url", "not_checkable"),
    ("unsupported url", "not_checkable"),
    ("invalid host name", "not_checkable"),
    ("probe failed", "not_checkable"),
    ("assertions failed", "not_checkable"),
    ("request secrets", "not_checkable"),
    ("request configuration", "not_checkable"),
    ("no response", "no_response"),
    ("no ping since", "late"),
    ("exit status", "job_failed"),
    ("the job reported a failure", "job_failed"),
    ("run started", "overrun"),
    ("finished in", "too_fast"),
    ("pinged ", "too_often"),
    # dns:// probes (engine/probes/dns.py, dnsspec.py): the answer, then an assertion.
    ("dns answer ", "dns_answer"),
    ("malformed dns answer", "dns_answer"),
    ("no matching dns answer", "dns_answer"),
    ("rcode ", "assertion_failed"),
    ("answers ", "assertion_failed"),
    ("answer_count ", "assertion_failed"),
    ("min_ttl ", "assertion_failed"),
    ("response_time ", "assertion_failed"),
)
_RECOVERING = "responding again since"
_SLOW = "slow response:"


def reason_of(error: str | None, status_code: int | None) -> Reason | None:
    """The reason of a check's or an outage's ``error``, given the HTTP status code of the
    same probe (None: no response). None when there is nothing wrong to tell (no error and
    no status code)."""
    low = (error or "").lower()
    if low.startswith(_RECOVERING):
        return REASONS["recovering"]
    if status_code is not None:
        # The site answered: the error is the status itself, a slow answer, or else a
        # failed assertion (engine/domain/evaluate.py, uptime_error).
        if error is None or error == f"HTTP {status_code}":
            return REASONS["http_status"]
        if low.startswith(_SLOW):
            return REASONS["slow"]
        return REASONS["assertion_failed"]
    if not error:
        return None
    if _certificate_opening(low) is not None:
        return REASONS["certificate"]
    for prefix, key in _PREFIXES:
        if low.startswith(prefix):
            return REASONS[key]
    return REASONS["other"]


# --- failed assertions -------------------------------------------------------------------

_SUBJECTS: Mapping[str, str] = {
    "status_code": "the HTTP status code",
    "response_time": "the response time",
    "body": "the response body",
    "rcode": "the DNS response code",
    "answers": "the DNS answers",
    "answer_count": "the number of DNS answers",
    "min_ttl": "the DNS answers' TTL",
}
_FAILED: Mapping[str, str] = {
    "equals": "did not have the expected value",
    "not_equals": "had a value it must not have",
    "contains": "did not contain the expected text",
    "not_contains": "contained text it must not contain",
    "less_than": "was not below its limit",
    "greater_than": "was not above its limit",
    "is_empty": "was not empty",
    "not_empty": "was empty or missing",
    "matches": "did not match its pattern",
    "any_equals": "did not include the expected value",
    "all_equal": "were not all the expected value",
    "none_equals": "included a value they must not",
    "any_contains": "did not include the expected text",
    "all_contain": "did not all contain the expected text",
    "none_contains": "contained text they must not",
    "any_matches": "did not include a match of the pattern",
    "all_match": "did not all match the pattern",
    "none_matches": "included a match of the pattern",
}
_NO_TARGET = ("is_empty", "not_empty")


def _subject(source: str, prop: str) -> str:
    if source == "header":
        return f"the {prop} header"
    if source == "json":
        return f"the JSON value at {prop}"
    return _SUBJECTS.get(source, "the response")


def failed_assertion(error: str, assertions: Sequence[Mapping[str, Any]]) -> str | None:
    """Which of the monitor's ``assertions`` (as stored: source, property, comparison,
    target) ``error`` reports, in words naming its source and property and what went wrong;
    None when none of them matches (the configuration changed since)."""
    for a in assertions:
        source, comparison = a.get("source"), a.get("comparison")
        if not isinstance(source, str) or not isinstance(comparison, str) \
                or comparison not in _FAILED:
            continue
        prop = a.get("property") or ""
        if not isinstance(prop, str):
            continue
        # The probe's words begin "<source>[ <property>] <comparison>" (probes/request.py).
        opening = f"{source} {prop} {comparison}" if prop else f"{source} {comparison}"
        if comparison in _NO_TARGET:
            matched = error.startswith(opening + " failed: ")
        else:
            matched = error.startswith(opening + " ") and " failed: " in error
        if matched:
            return f"{_subject(source, prop)} {_FAILED[comparison]}"
    return None


def assertion_words(error: str | None, assertions: Sequence[Mapping[str, Any]]) -> str:
    """``Response check failed: the JSON value at $.status did not have the expected
    value``, or the bare reason when the assertion cannot be named."""
    named = failed_assertion(error or "", assertions)
    words = REASONS["assertion_failed"].words
    return f"{words}: {named}" if named else words


def reason_words(
    reason: Reason, error: str | None, status_code: int | None,
    assertions: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The public words of ``reason`` (from :func:`reason_of` of the same ``error`` and
    ``status_code``)."""
    if reason.key == "http_status" and status_code is not None:
        kind = "Server error" if status_code >= 500 else "Error status"
        return f"{kind} (HTTP {status_code})"
    if reason.key == "assertion_failed":
        return assertion_words(error, assertions)
    if reason.key == "certificate":
        opening = _certificate_opening((error or "").lower())
        return reason.words if opening is None else _CERTIFICATE_WORDS[opening]
    return reason.words


def public_reason(
    error: str | None, status_code: int | None, assertions: Sequence[Mapping[str, Any]] = ()
) -> tuple[str, str] | None:
    """(reason key, public words) of an ``error``, or None when there is nothing wrong."""
    reason = reason_of(error, status_code)
    if reason is None:
        return None
    return reason.key, reason_words(reason, error, status_code, assertions)


# --- confirmations -------------------------------------------------------------------------

CONFIRMED_WORDS: Mapping[str | None, str] = {
    "another_region": "a check from another region",
    "same_region": "a second check from the same region",
    None: "a second check",
}


def confirmed_by(detected_by: str | None, verified_via: str | None) -> str | None:
    """What confirmed an outage, from the regions its row records: ``another_region`` (a
    node of another region re-probed), ``same_region`` (a second probe from the region that
    saw the failure, as a one-region install does), or None when the row does not say."""
    if verified_via is None or detected_by is None:
        return None
    return "same_region" if verified_via == detected_by else "another_region"
