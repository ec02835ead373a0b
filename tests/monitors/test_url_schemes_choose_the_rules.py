"""A monitor URL's scheme chooses its rules through one registry: only registered schemes
are accepted (http and https today), each with its URL, request and default-port rules;
webhook URLs stay http(s) whatever is registered."""

from __future__ import annotations

import pytest

from engine.monitors import schemes, validation
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Plan
from tests.support.schemes import echo_registered

PLAN = Plan()


def errors_of(fn: object) -> dict[str, list[str]]:
    with pytest.raises(ValidationFailed) as exc:
        fn()  # type: ignore[operator]
    return exc.value.errors


def test_http_and_https_are_the_registered_schemes() -> None:
    assert schemes.names()[:2] == ("http", "https")
    assert schemes.SCHEMES["https"].tls and not schemes.SCHEMES["http"].tls
    assert schemes.SCHEMES["https"].has_certificate and schemes.SCHEMES["http"].has_certificate
    assert schemes.SCHEMES["http"].default_port == 80
    listed = ", ".join(schemes.names()[:-1]) + " or " + schemes.names()[-1]
    assert errors_of(lambda: validation.normalise_url("gopher://example.com:25")) == {
        "url": [f"The url must be an absolute URL with scheme {listed}."]}


def test_http_urls_are_normalised_as_before() -> None:
    t = validation.normalise_url("HTTPS://Example.COM:443")
    assert (t.url, t.scheme, t.host, t.port, t.connect_port) == (
        "https://example.com/", "https", "example.com", "", 443)
    t = validation.normalise_url("http://example.com:8080/é?q=é")
    assert t.url == "http://example.com:8080/%C3%A9?q=%C3%A9" and t.connect_port == 8080
    assert validation.normalise_url("http://example.com").url == "http://example.com/"


def test_a_registered_scheme_brings_its_own_url_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    with echo_registered(monkeypatch):
        t = validation.normalise_url("echo://Example.com:7/")
        assert (t.url, t.scheme, t.host, t.port, t.connect_port) == (
            "echo://example.com:7", "echo", "example.com", "7", 7)
        assert errors_of(lambda: validation.normalise_url("echo://example.com")) == {
            "url": ["The url must name a port."]}
        assert errors_of(lambda: validation.normalise_url("echo://example.com:7/x")) == {
            "url": ["An echo url has no path or query."]}
        listed = ", ".join(schemes.names()[:-1]) + " or echo"
        assert errors_of(lambda: validation.normalise_url("ftp://example.com")) == {
            "url": [f"The url must be an absolute URL with scheme {listed}."]}
        # Webhooks are HTTP whatever monitors may use.
        assert errors_of(lambda: validation.normalise_url(
            "echo://example.com:7", "webhook_url")) == {
            "webhook_url": ["The webhook_url must be an absolute URL with scheme http or https."]}
    assert errors_of(lambda: validation.normalise_url("echo://example.com:7"))


def test_the_request_rules_are_the_schemes(monkeypatch: pytest.MonkeyPatch) -> None:
    body = {"url": "echo://example.com:7", "request": {"method": "POST"}}
    with echo_registered(monkeypatch):
        errors = errors_of(lambda: schemes.validated(
            body, True, lambda: validation.validate_monitor_create(body, PLAN)))
        assert errors == {"request": ["An echo monitor sends no request."]}
        # The same request on an http monitor is valid; both errors of a body come at once.
        http = {**body, "url": "http://example.com/"}
        command, config = schemes.validated(
            http, True, lambda: validation.validate_monitor_create(http, PLAN))
        assert command.target.scheme == "http" and config.request["method"] == "POST"
        bad = {**body, "alias": ""}
        assert set(errors_of(lambda: schemes.validated(
            bad, True, lambda: validation.validate_monitor_create(bad, PLAN)))) == {
            "alias", "request"}
