"""The rules of tcp/tls/smtp/imap/pop3 monitors' URLs, request and assertions: what is
kept, and a 422 naming the field for what is not."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.fernet import Fernet

from engine.monitors.requests import Config
from engine.monitors.stream_scheme import check_url, spec_rules, validate
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox

BOX = SecretBox(Fernet.generate_key())  # nothing of these monitors is secret


def refused(body: dict[str, Any], scheme: str = "tcp") -> dict[str, list[str]]:
    with pytest.raises(ValidationFailed) as info:
        validate(body, scheme, creating=True)
    return info.value.errors


@pytest.mark.parametrize(("scheme", "port", "kept"), [
    ("tcp", "5432", "5432"),
    ("tls", "853", "853"),
    ("smtp", "", ""),
    ("smtp", "25", ""),  # the default is dropped
    ("smtp", "587", "587"),
    ("imap", "143", ""),
    ("pop3", "995", "995"),
])
def test_urls_keep_their_port_and_mail_schemes_default_it(
    scheme: str, port: str, kept: str
) -> None:
    assert check_url(scheme, port, "", "") == kept
    assert check_url(scheme, port, "/", "") == kept


def test_urls_without_a_needed_port_or_with_a_path_are_refused() -> None:
    with pytest.raises(ValidationFailed) as info:
        check_url("tcp", "", "", "")
    assert info.value.errors == {"url": ["A tcp monitor's url needs a port: tcp://host:port."]}
    with pytest.raises(ValidationFailed) as info:
        check_url("tls", "443", "/health", "")
    assert list(info.value.errors) == ["url"]
    with pytest.raises(ValidationFailed):
        check_url("smtp", "", "", "x=1")


def test_a_body_and_assertions_are_kept() -> None:
    config = validate({
        "request": {"body": "PING\r\n"},
        "assertions": [
            {"source": "response", "comparison": "contains", "target": "PONG"},
            {"source": "response", "comparison": "matches", "target": "^\\+PONG"},
            {"source": "connect_time", "comparison": "less_than", "target": "250"},
            {"source": "response_time", "comparison": "less_than", "target": 1000.5},
            {"source": "response", "comparison": "not_empty", "target": "ignored"},
        ],
    }, "tcp", creating=True)
    assert config.request == {"method": "GET", "headers": [], "body": "PING\r\n",
                              "follow_redirects": True}
    assert [a["target"] for a in config.assertions] == ["PONG", "^\\+PONG", 250, 1000.5, None]
    spec = spec_rules(BOX, 0, (config.request, config.assertions), 1)
    assert spec is not None and spec.body == b"PING\r\n" and spec.reads


def test_removing_and_leaving_out() -> None:
    assert validate({}, "tcp", creating=False) == Config(None, None)
    assert validate({"request": None, "assertions": []}, "tcp", creating=False) == Config(
        Config.REMOVE, Config.REMOVE)
    assert spec_rules(BOX, 0, None, 0) is None
    assert spec_rules(BOX, 0, ({"body": None}, None), 0) is None


def test_bad_input_names_the_field() -> None:
    assert refused({"request": "PING"}) == {"request": ["The request field must be an object."]}
    assert refused({"request": {"method": "POST", "body": "x"}}) == {
        "request.method": ["A tcp monitor's request takes only a body."]}
    assert refused({"request": {"body": 5}}) == {"request.body": ["The body must be a string."]}
    assert list(refused({"request": {"body": "x" * 20000}})) == ["request.body"]
    assert list(refused({"request": {"body": "a\0b"}})) == ["request.body"]
    assert list(refused({"request": {"body": "EHLO x"}}, "smtp")) == ["request.body"]
    errors = refused({"assertions": [
        {"source": "status_code", "comparison": "equals", "target": 200},
        {"source": "response", "comparison": "less_than", "target": 3},
        {"source": "response", "comparison": "matches", "target": "(unclosed"},
        {"source": "connect_time", "comparison": "less_than", "target": "fast"},
        {"source": "response", "property": "x", "comparison": "contains", "target": "a"},
        {"source": "response", "comparison": "contains"},
        "nope",
    ]})
    assert set(errors) == {
        "assertions.0.source", "assertions.1.comparison", "assertions.2.target",
        "assertions.3.target", "assertions.4.property", "assertions.5.target", "assertions.6",
    }
    assert errors["assertions.0.source"] == [
        "The source of a tcp monitor's assertion must be one of response, response_time,"
        " connect_time."]
    assert list(refused({"assertions": {"source": "response"}})) == ["assertions"]
    assert list(refused({"assertions": [{"source": "response", "comparison": "not_empty"}] * 21})
                ) == ["assertions"]


def test_the_request_as_shown_or_exported_is_accepted_back() -> None:
    shown = {"method": "GET", "headers": {}, "body": "PING\r\n", "follow_redirects": True}
    assert validate({"request": shown}, "tcp", creating=True).request["body"] == "PING\r\n"
    assert list(refused({"request": {**shown, "headers": {"X-A": "1"}}})) == ["request.headers"]
    assert list(refused({"request": {**shown, "follow_redirects": False}})) == [
        "request.follow_redirects"]
