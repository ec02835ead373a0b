"""What a ``dns://`` monitor asks and how its answer is judged: pure, no I/O.

* :func:`split_dns_url`: ``dns://server[:port]/name?type=A`` into a :class:`DnsTarget`
  (:data:`RDTYPES` are the types asked; a PTR name may be given as an address).
* :class:`DnsAssertion` / :func:`compile_assertions`: the monitor's assertions, validated by
  ``engine/monitors/dnsmonitors.py`` and compiled once.
* :func:`read_answer`: a response message as :class:`DnsAnswer` (rcode, the records of the
  asked type at the end of any CNAME chain as text, the least TTL), or the words of a CNAME
  loop.
* :func:`verdict`: the first failed assertion's words, or, without assertions, the default
  rule (NOERROR with at least one answer of the type); None when it holds.
* :func:`details`: the check's meta for one answer (bounded).

Failure words follow the URL monitors' (``engine/probes/request.py``): the assertion as
given, then ``failed:`` and what was got, e.g. ``answers all_equal "192.0.2.1" failed: got
"192.0.2.9"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import parse_qsl, urlsplit

import dns.edns
import dns.exception
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.reversename

from engine.probes.patterns import compile_regex

DEFAULT_PORT: Final = 53
RDTYPES: Final = ("A", "AAAA", "CNAME", "MX", "NS", "TXT", "SOA", "SRV", "CAA", "PTR")
SOURCES: Final = ("rcode", "answers", "answer_count", "min_ttl", "response_time")
# ``answers`` comparisons read as they are meant: "all answers equal", "no answer contains".
ANSWER_COMPARISONS: Final = (
    "any_equals", "all_equal", "none_equals",
    "any_contains", "all_contain", "none_contains",
    "any_matches", "all_match", "none_matches",
    "is_empty", "not_empty",
)
NUMBER_COMPARISONS: Final = ("equals", "not_equals", "less_than", "greater_than")
SOURCE_COMPARISONS: Final = {
    "rcode": ("equals", "not_equals"),
    "answers": ANSWER_COMPARISONS,
    "answer_count": NUMBER_COMPARISONS,
    "min_ttl": NUMBER_COMPARISONS,
    "response_time": ("less_than", "greater_than"),
}
NO_TARGET: Final = ("is_empty", "not_empty")
RCODES: Final = tuple(dns.rcode.to_text(r) for r in sorted(set(dns.rcode.Rcode)) if r < 16)
# Meta: at most this many answers, each cut to this many characters.
SHOWN_ANSWERS: Final = 20
SHOWN_CHARS: Final = 255
# CNAMEs followed inside one answer before it counts as a loop.
MAX_CHAIN: Final = 16
_QUOTED: Final = 80


class DnsUrlRefused(ValueError):
    """A dns:// URL that cannot be probed; ``str(exc)`` says why, for a 422."""


@dataclass(frozen=True, slots=True)
class DnsTarget:
    """One question to one server: ``server`` as given (a name or an address, without
    brackets), ``port``, the absolute ``qname`` and its text ``name`` (no final dot),
    ``rdtype`` and its text ``type_text``."""

    server: str
    port: int
    name: str
    qname: dns.name.Name
    rdtype: dns.rdatatype.RdataType
    type_text: str


class Question(Protocol):
    """What :func:`verdict` and :func:`details` read of a question (a :class:`DnsTarget`,
    or the prober's slimmer record of one)."""

    @property
    def server(self) -> str: ...
    @property
    def port(self) -> int: ...
    @property
    def name(self) -> str: ...
    @property
    def type_text(self) -> str: ...


def split_dns_url(url: str) -> DnsTarget:
    """``dns://server[:port]/name?type=A``; :class:`DnsUrlRefused` in words. The type
    defaults to A; a PTR question given an address asks its reverse name."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise DnsUrlRefused(f"not a valid URL ({exc})") from None
    if parts.scheme.lower() != "dns":
        raise DnsUrlRefused("the scheme must be dns")
    server = parts.hostname or ""
    if not server:
        raise DnsUrlRefused("the URL needs a server: dns://server[:port]/name?type=A")
    if parts.username is not None or parts.password is not None:
        raise DnsUrlRefused("a dns:// URL takes no user info")
    if parts.fragment:
        raise DnsUrlRefused("a dns:// URL takes no fragment")
    if port == 0:
        raise DnsUrlRefused("the port must be from 1 to 65535")
    name = parts.path.lstrip("/")
    if not name:
        raise DnsUrlRefused("the URL needs a name to ask: dns://server/name?type=A")
    if "/" in name:
        raise DnsUrlRefused("the name is one path segment: dns://server/name?type=A")
    type_text = "A"
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key != "type":
            raise DnsUrlRefused(f"unknown query parameter {key!r} (only type)")
        type_text = value.upper()
    if type_text not in RDTYPES:
        raise DnsUrlRefused("the type must be one of " + ", ".join(RDTYPES))
    type_text = RDTYPES[RDTYPES.index(type_text)]  # the shared constant
    try:
        if type_text == "PTR" and _is_address(name):
            qname = dns.reversename.from_address(name)
        else:
            qname = dns.name.from_text(name.rstrip(".") + ".")
    except (dns.exception.DNSException, UnicodeError, ValueError) as exc:
        raise DnsUrlRefused(f"{name!r} is not a valid DNS name ({_first_line(exc)})") from None
    if len(qname.to_wire() or b"") > 255:
        raise DnsUrlRefused("the name is longer than 255 bytes")
    return DnsTarget(server.lower(), port or DEFAULT_PORT, qname.to_text(omit_final_dot=True),
                     qname, dns.rdatatype.RdataType.make(type_text), type_text)


def _is_address(text: str) -> bool:
    try:
        dns.reversename.from_address(text)
    except (dns.exception.DNSException, ValueError):
        return False
    return True


def _first_line(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200].rstrip(".")


def _quoted(text: str) -> str:
    if len(text) > _QUOTED:
        text = text[:_QUOTED] + "..."
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(slots=True)
class DnsAnswer:
    """A response read: ``rcode`` in words (NOERROR, NXDOMAIN, ...), ``records`` (every
    record of the asked type at the end of the CNAME chain, as text, in the answer's
    order), ``min_ttl`` (the least TTL of those records and the CNAMEs on the way; None
    without records), ``chain`` (the names the CNAMEs led through), ``extended`` (the
    server's own words, RFC 8914 extended errors, or None) and ``loop`` (the words of a
    CNAME loop, else None)."""

    rcode: str
    records: list[str]
    min_ttl: int | None
    chain: list[str]
    extended: str | None = None
    loop: str | None = None


def read_answer(response: dns.message.Message, target: DnsTarget) -> DnsAnswer:
    """The answer ``response`` gives to ``target``'s question (see :class:`DnsAnswer`)."""
    rcode = dns.rcode.to_text(response.rcode())
    current = target.qname
    seen = [current]
    ttls: list[int] = []
    records: list[str] = []
    loop = None
    for _ in range(MAX_CHAIN + 1):
        rrset = _find(response, current, target.rdtype)
        if rrset is not None:
            ttls.append(rrset.ttl)
            records = [rd.to_text() for rd in rrset]
            break
        if target.rdtype == dns.rdatatype.CNAME:
            break
        cname = _find(response, current, dns.rdatatype.CNAME)
        if cname is None or len(cname) == 0:
            break
        ttls.append(cname.ttl)
        current = next(iter(cname)).target
        if current in seen or len(seen) > MAX_CHAIN:
            path = [*seen, current]
            loop = "DNS answer CNAME loop: " + " -> ".join(
                n.to_text(omit_final_dot=True) for n in path)
            records = []
            break
        seen.append(current)
    return DnsAnswer(
        rcode,
        records,
        min(ttls) if records else None,
        [n.to_text(omit_final_dot=True) for n in seen[1:]],
        _extended(response),
        loop,
    )


def _find(response: dns.message.Message, name: dns.name.Name, rdtype: int) -> Any:
    for rrset in response.answer:
        if rrset.rdtype == rdtype and rrset.rdclass == dns.rdataclass.IN and rrset.name == name:
            return rrset
    return None


def _extended(response: dns.message.Message) -> str | None:
    words = []
    for opt in response.options:
        if isinstance(opt, dns.edns.EDEOption):
            try:
                code = dns.edns.EDECode.to_text(opt.code)
            except (ValueError, dns.exception.DNSException):
                code = str(opt.code)
            words.append(f"{code}: {opt.text}" if opt.text else str(code))
    if not words:
        return None
    text = "; ".join(words)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."


class DnsAssertion:
    """One validated ``{source, comparison, target}`` of a dns:// monitor, compiled."""

    __slots__ = ("comparison", "number", "pattern", "source", "text", "words")

    def __init__(self, source: str, comparison: str, target: Any) -> None:
        self.source = source
        self.comparison = comparison
        self.number: float | None = None
        self.pattern: Any = None
        if target is None or isinstance(target, bool):
            self.text = ""
        elif isinstance(target, int | float):
            self.number = float(target)
            self.text = f"{target:g}" if isinstance(target, float) else str(target)
        else:
            self.text = str(target)
        if source == "rcode":
            self.text = self.text.upper()
        if comparison.endswith(("_matches", "_match")):
            self.pattern = compile_regex(self.text)
        words = f"{source} {comparison}"
        if comparison not in NO_TARGET:
            words += " " + (self.text if self.number is not None else _quoted(self.text))
        self.words = words

    def failed(self, why: str) -> str:
        return f"{self.words} failed: {why}"


def compile_assertions(raw: list[dict[str, Any]] | None) -> list[DnsAssertion]:
    """Validated assertions (``engine/monitors/dnsmonitors.py``) compiled for the probe."""
    return [DnsAssertion(a["source"], a["comparison"], a.get("target")) for a in raw or []]


def verdict(
    answer: DnsAnswer, target: Question, total_ms: float, assertions: list[DnsAssertion]
) -> str | None:
    """None when the answer passes; else the words of the first failed assertion, or,
    without assertions, of the default rule (NOERROR with an answer of the type). A CNAME
    loop fails whatever the assertions say."""
    if answer.loop is not None:
        return answer.loop
    if not assertions:
        if answer.rcode != "NOERROR" or not answer.records:
            return (f"DNS answer {answer.rcode}: no {target.type_text} record for "
                    f"{target.name}")
        return None
    for a in assertions:
        why = _judge(a, answer, total_ms)
        if why is not None:
            return a.failed(why)
    return None


def _judge(a: DnsAssertion, answer: DnsAnswer, total_ms: float) -> str | None:
    source = a.source
    if source == "rcode":
        same = answer.rcode == a.text
        return None if same == (a.comparison == "equals") else f"got {answer.rcode}"
    if source == "answers":
        return _answers(a, answer.records)
    if source == "answer_count":
        return _number(a, float(len(answer.records)), str(len(answer.records)), "")
    if source == "min_ttl":
        if answer.min_ttl is None:
            return "no answer"
        return _number(a, float(answer.min_ttl), str(answer.min_ttl), " s")
    return _number(a, total_ms, f"{total_ms:.0f}", " ms")


def _number(a: DnsAssertion, value: float, text: str, unit: str) -> str | None:
    target = a.number
    assert target is not None  # validated: a number
    c = a.comparison
    ok = (value == target if c == "equals" else value != target if c == "not_equals"
          else value < target if c == "less_than" else value > target)
    return None if ok else f"got {text}{unit}"


def _holds(a: DnsAssertion, record: str) -> bool:
    c = a.comparison
    if c.endswith(("_equals", "_equal")):
        return record.lower() == a.text.lower() or record == a.text
    if c.endswith(("_contains", "_contain")):
        return a.text in record
    return a.pattern.search(record) is not None


def _answers(a: DnsAssertion, records: list[str]) -> str | None:
    c = a.comparison
    if c == "is_empty":
        return None if not records else f"got {_listed(records)}"
    if c == "not_empty":
        return None if records else "no answer"
    if not records:
        return "no answer"
    if c.startswith("any_"):
        return None if any(_holds(a, r) for r in records) else f"got {_listed(records)}"
    if c.startswith("all_"):
        bad = next((r for r in records if not _holds(a, r)), None)
        return None if bad is None else f"got {_quoted(bad)}"
    bad = next((r for r in records if _holds(a, r)), None)
    return None if bad is None else f"got {_quoted(bad)}"


def _listed(records: list[str]) -> str:
    shown = ", ".join(_quoted(r) for r in records[:3])
    more = len(records) - 3
    return shown if more <= 0 else f"{shown} and {more} more"


def details(answer: DnsAnswer, target: Question, transport: str) -> dict[str, Any]:
    """The uptime check's meta for a dns:// probe that got an answer: the server as the
    user named it, the question, rcode, the answers (at most :data:`SHOWN_ANSWERS`, each
    cut to :data:`SHOWN_CHARS`), their count, the least TTL, the transport (udp, or tcp
    after a truncated answer) and the server's own words when it gave any."""
    shown = [r if len(r) <= SHOWN_CHARS else r[:SHOWN_CHARS] + "..."
             for r in answer.records[:SHOWN_ANSWERS]]
    meta: dict[str, Any] = {
        "server": target.server if target.port == DEFAULT_PORT else
        f"{_bracketed(target.server)}:{target.port}",
        "name": target.name,
        "type": target.type_text,
        "rcode": answer.rcode,
        "answers": shown,
        "answer_count": len(answer.records),
        "min_ttl": answer.min_ttl,
        "transport": transport,
    }
    if answer.extended is not None:
        meta["server_says"] = answer.extended
    return meta


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host
