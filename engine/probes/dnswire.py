"""The common reply read without dnspython's objects: A or AAAA records owned by the
question's name, nothing in authority, at most an empty OPT record in additional. Any other
reply (CNAMEs, other types, an authority section, EDNS options, trailing bytes) gives None
and is parsed by dnspython (:func:`engine.probes.dnsspec.read_answer`); both read the same
reply to the same :class:`~engine.probes.dnsspec.DnsAnswer`.

Why: dnspython's parse of a two-record reply was ~70 % of a dns:// probe's CPU; this
reads it in a few microseconds (docs/performance.md, "dns:// probes").
"""

from __future__ import annotations

import socket
from typing import Final

import dns.rcode

from engine.probes.dnsspec import DnsAnswer

_A: Final = 1
_AAAA: Final = 28
_OPT: Final = 41
_POINTER_TO_QUESTION: Final = b"\xc0\x0c"
_RCODES: Final = tuple(dns.rcode.to_text(dns.rcode.Rcode.make(i)) for i in range(16))
_FAMILY: Final = {_A: (socket.AF_INET, 4), _AAAA: (socket.AF_INET6, 16)}


def fast_answer(data: bytes, question_len: int, rdtype: int) -> DnsAnswer | None:
    """The answer of ``data`` (a reply whose header and question, ``question_len`` bytes
    after the header, were checked) when it is of the common shape; else None."""
    family = _FAMILY.get(rdtype)
    if family is None or len(data) < 12:
        return None
    af, size = family
    count = data[6] << 8 | data[7]
    if data[8] or data[9] or data[10] or data[11] > 1:  # authority; additional beyond OPT
        return None
    rcode = data[3] & 0x0F
    at = 12 + question_len
    ttls: list[int] = []
    records: list[str] = []
    end = len(data)
    for _ in range(count):
        if data[at:at + 2] != _POINTER_TO_QUESTION or at + 12 + size > end:
            return None
        if (data[at + 2] << 8 | data[at + 3]) != rdtype or data[at + 4:at + 6] != b"\x00\x01":
            return None
        if (data[at + 10] << 8 | data[at + 11]) != size:
            return None
        ttl = int.from_bytes(data[at + 6:at + 10], "big")
        ttls.append(ttl if ttl < 0x80000000 else 0)  # RFC 2181: a TTL with the top bit is 0
        records.append(socket.inet_ntop(af, data[at + 12:at + 12 + size]))
        at += 12 + size
    if data[11]:
        # An OPT record: the root name, type 41, no options, no extended rcode bits.
        if at + 11 != end or data[at] != 0 or (data[at + 1] << 8 | data[at + 2]) != _OPT:
            return None
        if data[at + 5] or data[at + 9] or data[at + 10]:
            return None
        at += 11
    if at != end:
        return None
    return DnsAnswer(_RCODES[rcode], records, min(ttls) if ttls else None, [])
