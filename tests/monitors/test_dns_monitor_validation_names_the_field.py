"""A dns:// monitor's URL and assertions are validated with the field named: the URL form,
the record types, each source's comparisons and targets; what passes is stored in one
shape and compiled by the probe."""

from __future__ import annotations

from typing import Any

import pytest

from engine.monitors import dnsmonitors
from engine.monitors.requests import Config
from engine.probes.dnsspec import compile_assertions
from engine.runtime.errors import ValidationFailed


@pytest.mark.parametrize(
    ("url", "stored"),
    [
        ("dns://1.1.1.1/Example.COM", "dns://1.1.1.1/example.com?type=A"),
        ("DNS://ns1.example.net:5353/example.com.?type=mx",
         "dns://ns1.example.net:5353/example.com?type=MX"),
        ("dns://[2606:4700:4700::1111]/example.com?type=AAAA",
         "dns://[2606:4700:4700::1111]/example.com?type=AAAA"),
        ("dns://9.9.9.9/192.0.2.1?type=PTR", "dns://9.9.9.9/192.0.2.1?type=PTR"),
        ("dns://9.9.9.9:53/_sip._tcp.example.com?type=SRV",
         "dns://9.9.9.9/_sip._tcp.example.com?type=SRV"),
    ],
)
def test_a_dns_url_is_stored_in_one_form(url: str, stored: str) -> None:
    assert dnsmonitors.normalized_url(url) == stored


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("dns:///example.com", "needs a server"),
        ("dns://1.1.1.1", "needs a name"),
        ("dns://1.1.1.1/", "needs a name"),
        ("dns://1.1.1.1/a/b", "one path segment"),
        ("dns://1.1.1.1/example.com?type=ANY", "the type must be one of A, AAAA, CNAME"),
        ("dns://1.1.1.1/example.com?kind=A", "unknown query parameter 'kind'"),
        ("dns://1.1.1.1:0/example.com", "the port must be from 1 to 65535"),
        ("dns://1.1.1.1:99999/example.com", "not a valid URL"),
        ("dns://user@1.1.1.1/example.com", "no user info"),
        ("dns://1.1.1.1/" + "a" * 64 + ".com", "is not a valid DNS name"),
        ("dns://1.1.1.1/" + ".".join(["abcdefghi"] * 30), "is not a valid DNS name"),
    ],
)
def test_a_bad_dns_url_is_refused_on_the_url_field(url: str, words: str) -> None:
    with pytest.raises(ValidationFailed) as exc:
        dnsmonitors.normalized_url(url)
    assert list(exc.value.errors) == ["url"]
    assert words in exc.value.errors["url"][0]


def test_the_server_and_the_queried_name_are_read_from_the_url() -> None:
    url = "dns://ns1.example.net:5353/www.example.com?type=A"
    assert dnsmonitors.server_host(url) == "ns1.example.net"
    assert dnsmonitors.queried_name(url) == "www.example.com"


GOOD: list[dict[str, Any]] = [
    {"source": "rcode", "comparison": "equals", "target": "noerror"},
    {"source": "answers", "comparison": "all_equal", "target": "192.0.2.1"},
    {"source": "answers", "comparison": "none_contains", "target": "old-host"},
    {"source": "answers", "comparison": "any_matches", "target": r"^10 mail\."},
    {"source": "answers", "comparison": "not_empty"},
    {"source": "answer_count", "comparison": "greater_than", "target": "1"},
    {"source": "min_ttl", "comparison": "greater_than", "target": 59},
    {"source": "response_time", "comparison": "less_than", "target": 250.5},
]


def test_good_assertions_are_stored_in_one_shape_and_compile() -> None:
    config = dnsmonitors.validate({"assertions": GOOD}, creating=True)
    assert config.request is None
    assert config.assertions[0] == {"source": "rcode", "property": None,
                                    "comparison": "equals", "target": "NOERROR"}
    assert config.assertions[4]["target"] is None
    assert config.assertions[5]["target"] == 1
    assert config.assertions[7]["target"] == 250.5
    words = [a.words for a in compile_assertions(config.assertions)]
    assert words[1] == 'answers all_equal "192.0.2.1"'
    assert words[5] == "answer_count greater_than 1"


def test_empty_assertions_on_update_remove_them() -> None:
    assert dnsmonitors.validate({"assertions": []}, creating=False).assertions == Config.REMOVE
    assert dnsmonitors.validate({}, creating=False).assertions is None


@pytest.mark.parametrize(
    ("assertion", "field", "words"),
    [
        ({"source": "status_code", "comparison": "equals", "target": 200},
         "assertions.0.source", "must be one of rcode, answers"),
        ({"source": "answers", "comparison": "equals", "target": "x"},
         "assertions.0.comparison", "any_equals, all_equal, none_equals"),
        ({"source": "rcode", "comparison": "less_than", "target": "NOERROR"},
         "assertions.0.comparison", "equals, not_equals"),
        ({"source": "rcode", "comparison": "equals", "target": "NOPE"},
         "assertions.0.target", "An rcode is one of NOERROR"),
        ({"source": "answer_count", "comparison": "equals", "target": "two"},
         "assertions.0.target", "must be a number"),
        ({"source": "min_ttl", "comparison": "less_than", "target": -1},
         "assertions.0.target", "0 or more"),
        ({"source": "answers", "comparison": "any_matches", "target": "(unclosed"},
         "assertions.0.target", "Not a regular expression RE2 accepts"),
        ({"source": "answers", "comparison": "all_equal"},
         "assertions.0.target", "needs a target"),
        ({"source": "answers", "comparison": "all_equal", "target": True},
         "assertions.0.target", "a string or a number"),
        ({"source": "answers", "comparison": "all_equal", "target": "x" * 1025},
         "assertions.0.target", "at most 1024"),
        ({"source": "rcode", "property": "x", "comparison": "equals", "target": "NOERROR"},
         "assertions.0.property", "takes no property"),
        ("rcode", "assertions.0", "must be an object"),
    ],
)
def test_a_bad_assertion_is_refused_naming_its_field(
    assertion: Any, field: str, words: str
) -> None:
    with pytest.raises(ValidationFailed) as exc:
        dnsmonitors.validate({"assertions": [assertion]}, creating=True)
    assert field in exc.value.errors, exc.value.errors
    assert words in exc.value.errors[field][0]


def test_a_request_is_refused_for_a_dns_monitor() -> None:
    with pytest.raises(ValidationFailed) as exc:
        dnsmonitors.validate({"request": {"method": "GET"}}, creating=True)
    assert "takes no request" in exc.value.errors["request"][0]


def test_too_many_assertions_are_refused() -> None:
    with pytest.raises(ValidationFailed) as exc:
        dnsmonitors.validate({"assertions": [GOOD[0]] * 21}, creating=True)
    assert "At most 20" in exc.value.errors["assertions"][0]


def test_the_api_normalises_a_dns_url_through_its_scheme() -> None:
    from engine.monitors import validation

    t = validation.normalise_url("DNS://NS1.Example.NET:53/WWW.Example.com.?type=aaaa")
    assert (t.url, t.scheme, t.host, t.port, t.connect_port) == (
        "dns://ns1.example.net/www.example.com?type=AAAA", "dns", "ns1.example.net", "", 53)
    t = validation.normalise_url("dns://9.9.9.9:5353/192.0.2.1?type=PTR")
    assert t.url == "dns://9.9.9.9:5353/192.0.2.1?type=PTR" and t.connect_port == 5353
    with pytest.raises(ValidationFailed) as exc:
        validation.normalise_url("dns://9.9.9.9/example.com?type=ANY")
    assert "the type must be one of" in exc.value.errors["url"][0]


def test_monitors_as_code_take_dns_monitors_with_the_same_rules() -> None:
    from engine.monitors.file import entry_of, parse_toml, validate_document
    from engine.runtime.settings import Plan

    specs = validate_document(parse_toml(
        '[[monitors]]\nurl = "dns://1.1.1.1/Example.com?type=mx"\nalias = "mail"\n'
        'assertions = [{source = "answers", comparison = "any_matches", target = "mail"}]\n'
    ), Plan())
    entry = entry_of(specs[0])
    assert entry["url"] == "dns://1.1.1.1/example.com?type=MX"
    assert entry["assertions"] == [
        {"source": "answers", "comparison": "any_matches", "target": "mail"}]
    with pytest.raises(ValidationFailed) as exc:
        validate_document(parse_toml(
            '[[monitors]]\nurl = "dns://1.1.1.1/example.com"\n'
            'assertions = [{source = "answers", comparison = "equals", target = "x"}]\n'
        ), Plan())
    assert list(exc.value.errors) == ["monitors[0].assertions.0.comparison"]
