"""The common reply (A or AAAA records of the asked name) is read without dnspython's
objects; whatever it reads, dnspython reads the same, and anything else is left to
dnspython."""

from __future__ import annotations

import dns.message
import dns.rrset
import pytest

from engine.probes.dnsspec import read_answer, split_dns_url
from engine.probes.dnswire import fast_answer
from tests.support.dns_zone_server import DnsZoneServer


def question_len(url: str) -> int:
    t = split_dns_url(url)
    return len(t.qname.to_wire() or b"") + 4


@pytest.mark.parametrize(
    ("name", "rdtype", "edns"),
    [("www.zone.test", "A", 0), ("www.zone.test", "A", -1), ("www.zone.test", "AAAA", 0),
     ("mail.zone.test", "A", 0), ("ns1.zone.test", "A", -1)],
)
def test_a_common_reply_reads_as_dnspython_reads_it(name: str, rdtype: str, edns: int) -> None:
    server = DnsZoneServer()
    url = f"dns://127.0.0.1/{name}?type={rdtype}"
    target = split_dns_url(url)
    query = dns.message.make_query(target.qname, target.rdtype, use_edns=edns)
    wire = server.wire(query, 1232)
    fast = fast_answer(wire, question_len(url), target.rdtype)
    assert fast is not None
    assert fast == read_answer(dns.message.from_wire(wire), target)
    assert fast.records


@pytest.mark.parametrize(
    ("name", "rdtype"),
    [("alias.zone.test", "CNAME"), ("chain.zone.test", "A"), ("gone.zone.test", "A"),
     ("mail.zone.test", "AAAA"), ("zone.test", "MX")],
)
def test_any_other_reply_is_left_to_dnspython(name: str, rdtype: str) -> None:
    server = DnsZoneServer()
    url = f"dns://127.0.0.1/{name}?type={rdtype}"
    target = split_dns_url(url)
    wire = server.wire(dns.message.make_query(target.qname, target.rdtype, use_edns=0), 1232)
    assert fast_answer(wire, question_len(url), target.rdtype) is None


def test_trailing_bytes_or_a_cut_record_are_left_to_dnspython() -> None:
    url = "dns://127.0.0.1/www.zone.test?type=A"
    target = split_dns_url(url)
    query = dns.message.make_query(target.qname, target.rdtype, use_edns=0)
    response = dns.message.make_response(query)
    response.answer.append(dns.rrset.from_text(target.qname, 60, "IN", "A", "192.0.2.1"))
    wire = response.to_wire()
    n = question_len(url)
    assert fast_answer(wire, n, target.rdtype) is not None
    assert fast_answer(wire + b"\x00", n, target.rdtype) is None
    assert fast_answer(wire[:-13], n, target.rdtype) is None
    assert fast_answer(wire[:40], n, target.rdtype) is None
