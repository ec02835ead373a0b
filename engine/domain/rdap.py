"""RDAP in plain data: the IANA bootstrap (``dns.json``, RFC 9224), a registry's domain answer
(RFC 9083) read into a :class:`Registration`, and the registrable domain of a host name (the
public suffix list, ICANN section, as bundled with ``publicsuffixlist``).

Pure: no I/O, no clock. A document that is not what it should be raises :class:`RdapGarbage`
with the reason in words; nothing here trusts a field's type.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from publicsuffixlist import PublicSuffixList

from engine.domain.netpolicy import literal_ip

# RFC 8056: the RDAP status words for EPP status codes; the rest are the EPP code in words
# ("client hold" <-> clientHold).
_RDAP_TO_EPP: Final = {"active": "ok", "inactive": "inactive"}
# What an answer may list at most (a registry lists a handful).
MAX_STATUSES: Final = 32
MAX_NAMESERVERS: Final = 16
MAX_TEXT: Final = 200


class RdapGarbage(ValueError):
    """A bootstrap or registry document that cannot be read; the message says why."""


@dataclass(frozen=True, slots=True)
class Registration:
    """What a registry says about a domain: ``expires_at`` None when it does not say."""

    registrar: str | None
    expires_at: datetime | None
    statuses: tuple[str, ...]
    nameservers: tuple[str, ...]


@functools.cache
def _suffixes() -> PublicSuffixList:
    # The bundled list, ICANN section only: a registry registers under an ICANN suffix
    # (github.io is a registration of its own, in the .io registry).
    return PublicSuffixList(only_icann=True)


def registrable_domain(host: str) -> str | None:
    """The domain a registry holds for ``host`` (``www.example.co.uk`` -> ``example.co.uk``),
    lower case, IDNA (A-label) form; None for an IP literal, a bare public suffix or a name
    that is not a valid host name."""
    name = host.strip().rstrip(".").lower()
    if not name or literal_ip(name) is not None:
        return None
    try:
        name = name.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    if "." not in name or any(not label or len(label) > 63 for label in name.split(".")):
        return None
    found = _suffixes().privatesuffix(name)
    return found if isinstance(found, str) else None


def tld_of(domain: str) -> str:
    return domain.rsplit(".", 1)[-1]


def parse_bootstrap(data: Any) -> dict[str, str]:
    """``dns.json`` -> {tld: base URL}, the first https URL of each service (else its
    first URL), each ending in ``/``."""
    if not isinstance(data, dict) or not isinstance(data.get("services"), list):
        raise RdapGarbage("the RDAP bootstrap has no services list")
    out: dict[str, str] = {}
    for service in data["services"]:
        if not (isinstance(service, list) and len(service) >= 2
                and isinstance(service[0], list) and isinstance(service[1], list)):
            continue
        urls = [u for u in service[1] if isinstance(u, str)
                and u.startswith(("https://", "http://"))]
        if not urls:
            continue
        url = next((u for u in urls if u.startswith("https://")), urls[0])
        if not url.endswith("/"):
            url += "/"
        for tld in service[0]:
            if isinstance(tld, str) and tld:
                out.setdefault(tld.lower().rstrip("."), url)
    if not out:
        raise RdapGarbage("the RDAP bootstrap lists no registry")
    return out


def epp_status(word: str) -> str:
    """An RDAP status (``client hold``) as its EPP code (``clientHold``)."""
    w = word.strip().lower()
    if w in _RDAP_TO_EPP:
        return _RDAP_TO_EPP[w]
    parts = w.split()
    return parts[0] + "".join(p.capitalize() for p in parts[1:]) if parts else ""


def _text(value: Any) -> str | None:
    return value[:MAX_TEXT] if isinstance(value, str) and value.strip() else None


def parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp (``2027-03-01T12:00:00Z``) as aware UTC, else None."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        ts = datetime.fromisoformat(value.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def _registrar(entities: Any) -> str | None:
    if not isinstance(entities, list):
        return None
    for entity in entities[:32]:
        if not isinstance(entity, dict):
            continue
        roles = entity.get("roles")
        if not isinstance(roles, list) or "registrar" not in roles:
            continue
        card = entity.get("vcardArray")
        if isinstance(card, list) and len(card) == 2 and isinstance(card[1], list):
            for item in card[1]:
                if (isinstance(item, list) and len(item) >= 4 and item[0] == "fn"):
                    name = _text(item[3])
                    if name:
                        return name
        handle = _text(entity.get("handle"))
        if handle:
            return handle
    return None


def parse_domain(data: Any, domain: str) -> Registration:
    """A registry's answer to ``GET domain/<domain>`` (RFC 9083 section 5.3). Raises
    RdapGarbage when it is not a domain object."""
    if not isinstance(data, dict) or data.get("objectClassName") != "domain":
        raise RdapGarbage("the RDAP answer is not a domain object")
    expires: datetime | None = None
    events = data.get("events")
    if isinstance(events, list):
        for ev in events[:64]:
            if isinstance(ev, dict) and ev.get("eventAction") == "expiration":
                expires = parse_time(ev.get("eventDate"))
                if expires is not None:
                    break
    statuses: list[str] = []
    raw_status = data.get("status")
    if isinstance(raw_status, list):
        for s in raw_status[:MAX_STATUSES]:
            if isinstance(s, str) and s.strip() and len(s) <= 64:
                code = epp_status(s)
                if code and code not in statuses:
                    statuses.append(code)
    nameservers: list[str] = []
    raw_ns = data.get("nameservers")
    if isinstance(raw_ns, list):
        for ns in raw_ns[:MAX_NAMESERVERS]:
            name = _text(ns.get("ldhName")) if isinstance(ns, dict) else None
            if name:
                nameservers.append(name.lower().rstrip("."))
    return Registration(
        registrar=_registrar(data.get("entities")),
        expires_at=expires,
        statuses=tuple(statuses),
        nameservers=tuple(nameservers),
    )
