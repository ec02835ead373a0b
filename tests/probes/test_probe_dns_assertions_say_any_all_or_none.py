"""A dns:// monitor's assertions against a real server's answers: rcode, answers with
any/all/none comparisons, answer_count, min_ttl, response_time; the first failed one's
words in the URL monitors' form."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.monitors import dnsmonitors
from engine.probes.dns import DnsProber, DnsSpec
from tests.support.dns_zone_server import DnsZoneServer


@pytest.fixture
async def server() -> AsyncIterator[DnsZoneServer]:
    async with DnsZoneServer() as s:
        yield s


async def verdict(server: DnsZoneServer, name: str, rdtype: str,
                  *assertions: dict[str, Any]) -> str | None:
    config = dnsmonitors.validate({"assertions": list(assertions)}, creating=True)
    spec = DnsSpec.from_config(config.assertions)
    out = await DnsProber(timeout=2.0, allow_private=True).probe(
        server.url(name, rdtype), spec)
    assert out.error is None, out.error
    return out.assertion_error


def a(source: str, comparison: str, target: Any = None) -> dict[str, Any]:
    return {"source": source, "comparison": comparison, "target": target}


@pytest.mark.parametrize(
    ("assertion", "words"),
    [
        (a("answers", "any_equals", "192.0.2.2"), None),
        (a("answers", "any_equals", "192.0.2.9"),
         'answers any_equals "192.0.2.9" failed: got "192.0.2.1", "192.0.2.2"'),
        (a("answers", "all_equal", "192.0.2.1"),
         'answers all_equal "192.0.2.1" failed: got "192.0.2.2"'),
        (a("answers", "none_equals", "192.0.2.9"), None),
        (a("answers", "all_contain", "192.0.2."), None),
        (a("answers", "none_contains", ".2.2"),
         'answers none_contains ".2.2" failed: got "192.0.2.2"'),
        (a("answers", "any_contains", "old-host"),
         'answers any_contains "old-host" failed: got "192.0.2.1", "192.0.2.2"'),
        (a("answers", "all_match", r"^192\.0\.2\.[12]$"), None),
        (a("answers", "none_matches", r"\.1$"),
         r'answers none_matches "\\.1$" failed: got "192.0.2.1"'),
        (a("answers", "is_empty"), 'answers is_empty failed: got "192.0.2.1", "192.0.2.2"'),
        (a("answers", "not_empty"), None),
        (a("answer_count", "equals", 2), None),
        (a("answer_count", "greater_than", 2), "answer_count greater_than 2 failed: got 2"),
        (a("min_ttl", "less_than", 121), None),
        (a("min_ttl", "greater_than", 300), "min_ttl greater_than 300 failed: got 120 s"),
        (a("rcode", "equals", "NOERROR"), None),
        (a("rcode", "not_equals", "noerror"), "rcode not_equals \"NOERROR\" failed: got NOERROR"),
        (a("response_time", "less_than", 5000), None),
        (a("response_time", "greater_than", 5000), None),  # checked below: it fails
    ][:-1],
)
async def test_each_assertion_on_an_answer_of_two_records(
    server: DnsZoneServer, assertion: dict[str, Any], words: str | None
) -> None:
    got = await verdict(server, "www.zone.test", "A", assertion)
    # The two records come in either order.
    assert got in (words, None if words is None else words.replace(
        '"192.0.2.1", "192.0.2.2"', '"192.0.2.2", "192.0.2.1"')), got


async def test_a_slow_assertion_says_the_time_got(server: DnsZoneServer) -> None:
    got = await verdict(server, "www.zone.test", "A", a("response_time", "greater_than", 5000))
    assert got is not None and got.startswith("response_time greater_than 5000 failed: got ")
    assert got.endswith(" ms")


async def test_a_name_that_must_not_exist_holds_with_an_rcode_assertion(
    server: DnsZoneServer,
) -> None:
    assert await verdict(server, "gone.zone.test", "A", a("rcode", "equals", "NXDOMAIN")) is None
    server.set("gone", "A", ["192.0.2.66"])
    assert await verdict(server, "gone.zone.test", "A", a("rcode", "equals", "NXDOMAIN")) == (
        'rcode equals "NXDOMAIN" failed: got NOERROR')


async def test_answer_comparisons_on_no_answer_say_so(server: DnsZoneServer) -> None:
    assert await verdict(server, "mail.zone.test", "AAAA", a("answers", "all_equal", "x")) == (
        'answers all_equal "x" failed: no answer')
    assert await verdict(server, "mail.zone.test", "AAAA", a("min_ttl", "less_than", 5)) == (
        "min_ttl less_than 5 failed: no answer")
    assert await verdict(server, "mail.zone.test", "AAAA", a("answers", "is_empty")) is None


async def test_the_first_failed_assertion_is_the_one_reported(server: DnsZoneServer) -> None:
    got = await verdict(server, "zone.test", "MX",
                        a("answers", "any_matches", r"^10 mail\."),
                        a("answer_count", "equals", 1),
                        a("answers", "none_contains", "backup"))
    assert got == "answer_count equals 1 failed: got 2"


async def test_txt_answers_are_compared_as_their_text(server: DnsZoneServer) -> None:
    assert await verdict(server, "many.zone.test", "TXT",
                         a("answers", "all_equal", '"one" "two"')) is None
