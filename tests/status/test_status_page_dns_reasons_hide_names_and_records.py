"""What a visitor reads of a dns:// monitor's failure: the reason in fixed words (the answer
was not the expected one, or which assertion failed), never the name asked, the server or
the records it answered."""

from __future__ import annotations

import pytest

from engine.monitors import dnsmonitors
from engine.probes.dns import DnsProber, DnsSpec
from engine.web.status.public_text import public_reason
from tests.support.dns_zone_server import DnsZoneServer

SECRET = "intranet-secret-7f3a"
ASSERTIONS = [
    {"source": "answers", "property": None, "comparison": "all_equal", "target": "192.0.2.1"},
    {"source": "rcode", "property": None, "comparison": "equals", "target": "NOERROR"},
    {"source": "min_ttl", "property": None, "comparison": "greater_than", "target": 60},
]


@pytest.mark.parametrize(("error", "key", "words"), [
    (f"DNS answer NXDOMAIN: no A record for {SECRET}.example", "dns_answer",
     "The DNS server's answer was not the expected one"),
    (f"DNS answer CNAME loop: {SECRET}.example -> b.example -> {SECRET}.example",
     "dns_answer", "The DNS server's answer was not the expected one"),
    (f"malformed DNS answer from {SECRET} (bad label)", "dns_answer",
     "The DNS server's answer was not the expected one"),
    (f'answers all_equal "192.0.2.1" failed: got "{SECRET}"', "assertion_failed",
     "Response check failed: the DNS answers were not all the expected value"),
    ("rcode equals \"NOERROR\" failed: got SERVFAIL", "assertion_failed",
     "Response check failed: the DNS response code did not have the expected value"),
    ("min_ttl greater_than 60 failed: got 30 s", "assertion_failed",
     "Response check failed: the DNS answers' TTL was not above its limit"),
])
def test_a_dns_failure_has_fixed_public_words(error: str, key: str, words: str) -> None:
    assert public_reason(error, None, ASSERTIONS) == (key, words)


async def test_every_word_the_dns_probe_fails_with_has_a_reason_of_its_own() -> None:
    async with DnsZoneServer() as server:
        prober = DnsProber(timeout=0.5, allow_private=True)
        gone = await prober.probe(server.url("gone.zone.test"))
        loop = await prober.probe(server.url("loop-a.zone.test"))
        config = dnsmonitors.validate({"assertions": ASSERTIONS[:1]}, creating=True)
        changed = await prober.probe(server.url("mail.zone.test"),
                                     DnsSpec.from_config(config.assertions))
        server.mode = "garbage_matching"
        garbage = await prober.probe(server.url("www.zone.test"))
    for out in (gone, loop):
        assert public_reason(out.assertion_error, None)[0] == "dns_answer"  # type: ignore[index]
    assert public_reason(garbage.error, None)[0] == "dns_answer"  # type: ignore[index]
    assert public_reason(changed.assertion_error, None, ASSERTIONS) == (
        "assertion_failed",
        "Response check failed: the DNS answers were not all the expected value")
