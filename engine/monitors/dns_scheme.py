"""The dns scheme of uptime monitors (:class:`engine.monitors.scheme.Scheme`):
``dns://server[:port]/name?type=A``, stored as ``dns://server/name?type=A`` (lower case,
type written out, port 53 dropped); no ``request``; the assertions of
:mod:`engine.monitors.dnsmonitors`; the spec an :class:`engine.probes.dns.DnsSpec`. The
monitor's host is the server (the private-address rule applies to it). No certificate
check. Its prober is :class:`engine.probes.dns.DnsProber`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from engine.monitors import dnsmonitors, requests
from engine.monitors.scheme import Scheme, UrlParts, refuse
from engine.probes.dns import DnsSpec
from engine.probes.dnsspec import DnsUrlRefused, split_dns_url
from engine.runtime.secretbox import SecretBox


def url_rules(parts: UrlParts, field: str) -> UrlParts:
    try:
        target = split_dns_url(parts.url())
    except DnsUrlRefused as exc:
        raise refuse(field, f"The {field} is not a DNS question we can ask: {exc} "
                            "(dns://server[:port]/name?type=A).") from None
    name = parts.path.lstrip("/") if target.type_text == "PTR" else target.name
    return UrlParts(parts.scheme, parts.host, parts.url_host, parts.port,
                    "/" + name.rstrip(".").lower(), "type=" + target.type_text)


def config_rules(body: Mapping[str, Any], creating: bool) -> requests.Config:
    return dnsmonitors.validate(body, creating=creating)


def spec_rules(
    box: SecretBox, capture_limit: int, configured: tuple[Any, Any] | None, owner: int
) -> DnsSpec | None:
    """The compiled assertions of a stored configuration; None without assertions (the
    default rule: NOERROR with a record of the type)."""
    if configured is None or not configured[1]:
        return None
    return DnsSpec.from_config(configured[1])


DNS: Final[Scheme] = Scheme(
    "dns", "DNS", 53, False, url_rules, config_rules, spec_rules, certificate=False)
