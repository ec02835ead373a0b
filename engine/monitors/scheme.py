"""What one URL scheme of an uptime monitor brings: :class:`Scheme`, the protocol seam's
contract (the registry is :mod:`engine.monitors.schemes`).

A scheme's rules are plain functions: the URL's scheme-specific rules after the generic
ones (:class:`UrlParts` in, normalised parts out), the ``request``/``assertions`` rules of a
create or update body, and the stored configuration -> the spec its prober gets. Each raises
:class:`engine.runtime.errors.ValidationFailed` naming the field, never anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.monitors.requests import Config
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox


@dataclass(frozen=True, slots=True)
class UrlParts:
    """A monitor URL after the generic rules (``engine.monitors.validation.normalise_url``):
    scheme and host lower-cased (IDN as punycode), ``port`` the explicit port unless it is
    the scheme's default ("" then), ``path`` and ``query`` percent-encoded as given (the
    path may be empty). ``url_host`` is the host as written in a URL (IPv6 in brackets)."""

    scheme: str
    host: str
    url_host: str
    port: str
    path: str
    query: str

    def url(self) -> str:
        """The URL these parts write."""
        port = ":" + self.port if self.port else ""
        query = "?" + self.query if self.query else ""
        return f"{self.scheme}://{self.url_host}{port}{self.path}{query}"


# (parts, field) -> the parts as stored; ValidationFailed under ``field`` to refuse.
UrlRules = Callable[[UrlParts, str], UrlParts]
# (create or update body, creating) -> its request and assertions (requests.Config).
ConfigRules = Callable[[Mapping[str, Any], bool], Config]
# (box, capture limit, (stored request, stored assertions) | None, owner) -> the spec the
# scheme's prober takes as its second argument (None: probe the URL alone).
SpecRules = Callable[[SecretBox, int, "tuple[Any, Any] | None", int], Any]


@dataclass(frozen=True, slots=True)
class Scheme:
    """One URL scheme of uptime monitors.

    ``default_port``: dropped from URLs (None: the scheme has none, any port is kept);
    ``tls``: the protocol speaks TLS from the start, so the monitor's certificate_health
    check is created enabled; ``certificate``: the monitor has a certificate_health check
    at all (None: when ``tls``; http's is True, created paused); ``label``: the protocol
    in words ("HTTP").
    """

    name: str
    label: str
    default_port: int | None
    tls: bool
    url_rules: UrlRules
    config_rules: ConfigRules
    spec_rules: SpecRules
    certificate: bool | None = None

    @property
    def has_certificate(self) -> bool:
        return self.tls if self.certificate is None else self.certificate


def refuse(field: str, message: str) -> ValidationFailed:
    """The 422 of a scheme's rule: ``raise refuse("url", "The url must ...")``."""
    return ValidationFailed({field: [message]})
