"""Every URL scheme refuses an assertion list, a number target and an RE2 pattern in the
same words under the same field paths (one set of rules serves them all)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.monitors import dnsmonitors, icmp_scheme, requests, stream_scheme
from engine.runtime.errors import ValidationFailed

RULES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "http": lambda body: requests.validate(body, creating=True),
    "tcp": lambda body: stream_scheme.validate(body, "tcp", creating=True),
    "dns": lambda body: dnsmonitors.validate(body, creating=True),
    "icmp": lambda body: icmp_scheme.config_rules(body, True),
}
# One valid assertion of each scheme, and one on a number with a target of choice.
VALID = {
    "http": {"source": "body", "comparison": "contains", "target": "ok"},
    "tcp": {"source": "response", "comparison": "contains", "target": "ok"},
    "dns": {"source": "answers", "comparison": "any_equals", "target": "192.0.2.1"},
    "icmp": {"source": "rtt_avg", "comparison": "less_than", "target": 50},
}
NUMERIC = {
    "http": {"source": "response_time", "comparison": "less_than"},
    "tcp": {"source": "response_time", "comparison": "less_than"},
    "dns": {"source": "response_time", "comparison": "less_than"},
    "icmp": {"source": "rtt_avg", "comparison": "less_than"},
}
PATTERN = {
    "http": {"source": "body", "comparison": "matches"},
    "tcp": {"source": "response", "comparison": "matches"},
    "dns": {"source": "answers", "comparison": "any_matches"},
}


def refused(scheme: str, assertions: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationFailed) as info:
        RULES[scheme]({"assertions": assertions})
    return info.value.errors


@pytest.mark.parametrize("scheme", RULES)
def test_a_list_that_is_no_list_or_too_long_is_refused_alike(scheme: str) -> None:
    assert refused(scheme, "x") == {"assertions": ["The assertions field must be a list."]}
    assert refused(scheme, [VALID[scheme]] * 21) == {
        "assertions": ["At most 20 assertions are allowed."]}
    assert len(RULES[scheme]({"assertions": [VALID[scheme]] * 20}).assertions) == 20


@pytest.mark.parametrize("scheme", RULES)
def test_each_item_is_named_by_its_place(scheme: str) -> None:
    errors = refused(scheme, [VALID[scheme], "x", VALID[scheme], 3])
    assert errors == {"assertions.1": ["An assertion must be an object."],
                      "assertions.3": ["An assertion must be an object."]}


@pytest.mark.parametrize("scheme", RULES)
@pytest.mark.parametrize(("given", "stored"), [(50, 50), ("50", 50), (" 2.5 ", 2.5), (7.0, 7)])
def test_a_number_target_is_stored_as_a_number(scheme: str, given: Any, stored: Any) -> None:
    got = RULES[scheme]({"assertions": [{**NUMERIC[scheme], "target": given}]}).assertions
    assert got[0]["target"] == stored
    assert type(got[0]["target"]) is type(stored)


@pytest.mark.parametrize("scheme", RULES)
@pytest.mark.parametrize("bad", [True, "ten", "nan", "inf", float("inf"), 10 ** 400])
def test_what_is_no_finite_number_is_refused_under_the_target(scheme: str, bad: Any) -> None:
    errors = refused(scheme, [{**NUMERIC[scheme], "target": bad}])
    assert list(errors) == ["assertions.0.target"]
    assert "a number" in errors["assertions.0.target"][0]


@pytest.mark.parametrize("scheme", PATTERN)
def test_a_pattern_re2_refuses_is_refused_in_the_same_words(scheme: str) -> None:
    errors = refused(scheme, [{**PATTERN[scheme], "target": "a(?=b)"}])
    words = errors["assertions.0.target"]
    assert len(words) == 1
    assert words[0].startswith("Not a regular expression RE2 accepts: ")
    assert words[0].endswith(".") and not words[0].endswith("..")


@pytest.mark.parametrize("scheme", PATTERN)
def test_a_long_or_nul_target_is_refused_in_the_same_words(scheme: str) -> None:
    long = refused(scheme, [{**PATTERN[scheme], "target": "a" * 1025}])
    assert long == {"assertions.0.target": ["The target may be at most 1024 characters."]}
    nul = refused(scheme, [{**PATTERN[scheme], "target": "a\0b"}])
    assert nul == {"assertions.0.target": ["The target may not contain NUL."]}
