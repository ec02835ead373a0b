"""The tcp, tls, smtp, imap and pop3 schemes of uptime monitors: their URL, ``request``
and ``assertions`` rules, and the spec their prober (:class:`engine.probes.tcp.TcpProber`)
takes (:class:`engine.probes.streamspec.StreamSpec`).

- URL: ``tcp://host:port`` and ``tls://host:port`` need their port; ``smtp://host``,
  ``imap://host`` and ``pop3://host`` default to 25, 143 and 110 (dropped from the URL
  when given). No path (a lone ``/`` is dropped), query, user info or fragment.
- ``request``: only ``body`` (a string of at most 16 KiB UTF-8, no NUL), and only for tcp
  and tls: a mail monitor's probe is the greeting, STARTTLS and TLS. It is stored, shown
  and exported in the URL monitors' form (``method`` GET, no headers, ``follow_redirects``
  true), which is accepted back as it is.
- ``assertions``: the URL monitors' ``{"source", "property", "comparison", "target"}``;
  sources ``response`` (equals, not_equals, contains, not_contains, matches (RE2),
  is_empty, not_empty), ``response_time`` and ``connect_time`` (less_than, greater_than,
  in ms); no property.

Every refusal is a 422 naming the field (``url``, ``request.body``,
``assertions.1.comparison``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from engine.monitors.assertrules import BySource, Errors, check_text, not_negative, walk
from engine.monitors.assertrules import fail as _fail
from engine.monitors.requests import Config, checked_body, given
from engine.monitors.scheme import Scheme, UrlParts
from engine.probes.starttls import DEFAULT_PORTS
from engine.probes.streamspec import SOURCE_COMPARISONS, SOURCES, StreamSpec
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox

log = logging.getLogger(__name__)

SCHEMES: Final = ("tcp", "tls", "smtp", "imap", "pop3")
_NO_TARGET: Final = ("is_empty", "not_empty")
_NUMERIC: Final = ("response_time", "connect_time")
# What the request of a tcp/tls monitor may hold.
_REQUEST_KEYS: Final = frozenset(("body",))


def _shown_default(key: str, value: Any) -> bool:
    """Whether ``request.<key>`` is the value the API shows for a request of the URL
    monitors' form (``method`` GET, no ``headers``, ``follow_redirects`` true), so that a
    monitor read back from the API or exported to a file is accepted as it is."""
    if key == "method":
        return isinstance(value, str) and value.upper() == "GET"
    if key == "headers":
        return value == {} or value == []
    if key == "follow_redirects":
        return value is True
    return False


def _refuse(field: str, message: str) -> ValidationFailed:
    return ValidationFailed({field: [message]})


def check_url(scheme: str, port: str, path: str, query: str, field: str = "url") -> str:
    """The port as stored once the URL's scheme-specific rules hold (a mail scheme's
    default port is already dropped: "" then); ValidationFailed under ``field`` otherwise.
    ``port`` is "" when the URL names none."""
    if path not in ("", "/") or query:
        raise _refuse(field, f"A {scheme} monitor's url is {scheme}://host:port, without a path"
                             " or query.")
    default = DEFAULT_PORTS.get(scheme)
    if default is None and not port:
        raise _refuse(field, f"A {scheme} monitor's url needs a port: {scheme}://host:port.")
    if default is not None and port == str(default):
        return ""
    return port


def url_rules(parts: UrlParts, field: str) -> UrlParts:
    """The seam's URL rules (:class:`engine.monitors.scheme.Scheme`): :func:`check_url`,
    and no path."""
    port = check_url(parts.scheme, parts.port, parts.path, parts.query, field)
    return UrlParts(parts.scheme, parts.host, parts.url_host, port, "", "")


def config_rules_for(scheme: str) -> Callable[[Mapping[str, Any], bool], Config]:
    """The ``request``/``assertions`` rules of a create or update body of a ``scheme``
    monitor (see the module docstring)."""

    def rules(body: Mapping[str, Any], creating: bool) -> Config:
        return validate(body, scheme, creating=creating)

    return rules


def validate(body: Mapping[str, Any], scheme: str, *, creating: bool) -> Config:
    errors: Errors = {}
    request = given(body, "request", creating, lambda raw: _request(raw, scheme, errors))
    rules = BySource(SOURCES, f"The source of a {scheme} monitor's assertion must be one of ",
                     SOURCE_COMPARISONS, _NO_TARGET, _target)
    assertions = given(body, "assertions", creating, lambda raw: walk(raw, errors, rules))
    if errors:
        raise ValidationFailed(errors)
    return Config(request, assertions)


def _request(raw: Any, scheme: str, errors: dict[str, list[str]]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        _fail(errors, "request", "The request field must be an object.")
        return None
    for key, value in raw.items():
        if key not in _REQUEST_KEYS and value is not None and not _shown_default(key, value):
            _fail(errors, f"request.{key}", f"A {scheme} monitor's request takes only a body.")
    body = raw.get("body")
    if body is not None:
        if scheme in DEFAULT_PORTS:
            _fail(errors, "request.body",
                  f"A {scheme} monitor sends no body: its probe is the greeting, STARTTLS"
                  " and TLS.")
            body = None
        else:
            body = checked_body(body, errors)
    # The URL monitors' stored form, so the store, masks and monitors as code need no
    # second shape.
    return {"method": "GET", "headers": [], "body": body or None, "follow_redirects": True}


def _target(source: str, comparison: str, target: Any, field: str, errors: Errors) -> Any:
    """A target past the rules every source shares (:class:`BySource`): ms for the times, a
    text for the response."""
    if source in _NUMERIC:
        return not_negative(errors, field, target,
                            f"The {source} {comparison} target must be a number of ms, 0 or more.")
    if not isinstance(target, str):
        _fail(errors, field, "The target must be a string.")
    else:
        check_text(errors, field, target, pattern=comparison == "matches")
    return target


def spec_rules(
    box: SecretBox, capture_limit: int, configured: tuple[Any, Any] | None, owner: int
) -> StreamSpec | None:
    """The spec of ``(stored request, stored assertions)``; None for neither (connected,
    and the handshake where TLS, is up). Nothing in it is secret."""
    if configured is None:
        return None
    request, assertions = configured
    if not (request or {}).get("body") and not assertions:
        return None
    return StreamSpec.from_config(request, assertions)


def _scheme(name: str, label: str) -> Scheme:
    # ``tls`` for the mail schemes too: their certificate check is created enabled, as a
    # tls:// monitor's (the certificate probe does the STARTTLS step first).
    return Scheme(name, label, DEFAULT_PORTS.get(name), name != "tcp", url_rules,
                  config_rules_for(name), spec_rules)


TCP: Final = _scheme("tcp", "TCP")
TLS: Final = _scheme("tls", "TLS")
SMTP: Final = _scheme("smtp", "SMTP")
IMAP: Final = _scheme("imap", "IMAP")
POP3: Final = _scheme("pop3", "POP3")

__all__ = [
    "IMAP", "POP3", "SCHEMES", "SMTP", "TCP", "TLS", "check_url", "config_rules_for",
    "spec_rules", "url_rules", "validate",
]
