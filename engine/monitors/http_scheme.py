"""The http and https schemes of uptime monitors (:class:`engine.monitors.scheme.Scheme`):
an empty path is ``/``; ``request`` and ``assertions`` as :mod:`engine.monitors.requests`
validates them; the spec is a :class:`engine.probes.request.RequestSpec`. https monitors
have a certificate check. Their prober is :class:`engine.probes.http.HttpProber`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from engine.monitors import requests
from engine.monitors.scheme import Scheme, UrlParts
from engine.probes.request import RequestSpec
from engine.runtime.secretbox import SecretBox, SecretUnreadable

log = logging.getLogger(__name__)

UNREADABLE = "request secrets cannot be decrypted (another UPWATCH_SECRET_KEY?)"


def url_rules(parts: UrlParts, field: str) -> UrlParts:
    if parts.path:
        return parts
    return UrlParts(parts.scheme, parts.host, parts.url_host, parts.port, "/", parts.query)


def config_rules(body: Mapping[str, Any], creating: bool) -> requests.Config:
    return requests.validate(body, creating=creating)


def spec_rules(
    box: SecretBox, capture_limit: int, configured: tuple[Any, Any] | None, owner: int
) -> RequestSpec | None:
    """The spec of ``(stored request, stored assertions)`` of a monitor of account
    ``owner`` (0: not known); None for neither. A spec that cannot be built fails every
    probe with words saying why, rather than probing without its headers or assertions."""
    if configured is None:
        return None
    request, assertions = configured
    if request is None and not assertions:
        return None
    try:
        return RequestSpec.from_config(
            requests.plain_request(request, box), assertions, capture_limit, owner)
    except SecretUnreadable:
        broken = UNREADABLE
    except Exception:
        log.exception("cannot use a stored request configuration")
        broken = "request configuration unusable"
    return RequestSpec("GET", [], None, True, [], capture_limit, broken=broken, owner=owner)


# A plain-HTTP monitor has a certificate check too, created paused (it may move to https).
HTTP = Scheme("http", "HTTP", 80, False, url_rules, config_rules, spec_rules, certificate=True)
HTTPS = Scheme("https", "HTTPS", 443, True, url_rules, config_rules, spec_rules)
