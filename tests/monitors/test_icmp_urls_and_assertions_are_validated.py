"""The icmp:// scheme's rules: the URL (count and interval_ms in its query, no port, no
path), no request, the ping assertions; each refusal names its field."""

from __future__ import annotations

from typing import Any

import pytest

from engine.monitors.icmp_scheme import ICMP, config_rules
from engine.monitors.requests import Config
from engine.monitors.validation import normalise_url
from engine.probes.icmp import ping_access
from engine.runtime.errors import ValidationFailed

needs_ping = pytest.mark.skipif(not ping_access().can_ping,
                                reason=f"this node cannot ping: {ping_access().reason}")


def _refused(fn: Any, *args: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationFailed) as exc:
        fn(*args)
    return exc.value.errors


@needs_ping
@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("icmp://Router.Example.NET", "icmp://router.example.net"),
        ("icmp://router.example.net/", "icmp://router.example.net"),
        ("icmp://192.0.2.7?count=3&interval_ms=500", "icmp://192.0.2.7"),
        ("icmp://192.0.2.7?interval_ms=200&count=5", "icmp://192.0.2.7?count=5&interval_ms=200"),
        ("icmp://[2001:DB8::1]?count=1", "icmp://[2001:db8::1]?count=1"),
    ],
)
def test_urls_are_normalised(given: str, stored: str) -> None:
    if "[" in given and ping_access().ipv6 is None:
        pytest.skip("this node cannot ping IPv6")
    assert normalise_url(given).url == stored


@needs_ping
@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("icmp://router.example.net:7", "takes no port"),
        ("icmp://router.example.net/x", "has no path"),
        ("icmp://router.example.net?count=0", "count must be a whole number from 1 to 10"),
        ("icmp://router.example.net?count=11", "count must be a whole number from 1 to 10"),
        ("icmp://router.example.net?count=two", "count must be a whole number"),
        ("icmp://router.example.net?interval_ms=5", "interval_ms must be a whole number from 20"),
        ("icmp://router.example.net?count=10&interval_ms=1000", "(count - 1) x interval_ms"),
        ("icmp://router.example.net?size=64", "only count and interval_ms"),
        ("icmp://router.example.net?count=2&count=3", "gives count twice"),
    ],
)
def test_bad_urls_are_refused_under_url(url: str, words: str) -> None:
    errors = _refused(normalise_url, url)
    assert list(errors) == ["url"]
    assert words in errors["url"][0]


def test_a_request_is_refused_and_assertions_are_kept() -> None:
    errors = _refused(config_rules, {"request": {"method": "GET"}}, True)
    assert list(errors) == ["request"]
    assert "count and interval_ms go in its url" in errors["request"][0]
    got = config_rules({"assertions": [
        {"source": "packet_loss", "comparison": "less_than", "target": "20"},
        {"source": "rtt_avg", "comparison": "less_than", "target": 12.5, "property": None},
    ]}, True)
    assert got == Config(None, [
        {"source": "packet_loss", "property": None, "comparison": "less_than", "target": 20},
        {"source": "rtt_avg", "property": None, "comparison": "less_than", "target": 12.5},
    ])
    # an update removes a request left from another scheme; no assertions removes them
    assert config_rules({"assertions": []}, False) == Config(Config.REMOVE, Config.REMOVE)


@pytest.mark.parametrize(
    ("assertion", "field", "words"),
    [
        ({"source": "status_code", "comparison": "equals", "target": 200}, "source",
         "packet_loss, rtt_avg, rtt_max, jitter"),
        ({"source": "rtt_max", "comparison": "contains", "target": 5}, "comparison",
         "less_than, greater_than, equals, not_equals"),
        ({"source": "jitter", "comparison": "less_than", "target": "soon"}, "target",
         "must be a number"),
        ({"source": "jitter", "comparison": "less_than", "target": -1}, "target",
         "must be a number, 0 or more"),
        ({"source": "packet_loss", "comparison": "less_than", "target": 101}, "target",
         "a percent, 0 to 100"),
        ({"source": "rtt_avg", "comparison": "less_than", "target": 5, "property": "x"},
         "property", "takes no property"),
    ],
)
def test_bad_assertions_are_refused_naming_the_field(
    assertion: dict[str, Any], field: str, words: str
) -> None:
    ok = {"source": "packet_loss", "comparison": "equals", "target": 0}
    errors = _refused(config_rules, {"assertions": [ok, assertion]}, True)
    assert list(errors) == [f"assertions.1.{field}"]
    assert words in errors[f"assertions.1.{field}"][0]


def test_the_scheme_has_no_certificate_and_no_default_port() -> None:
    assert (ICMP.name, ICMP.tls, ICMP.default_port) == ("icmp", False, None)
