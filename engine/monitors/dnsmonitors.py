"""A dns:// monitor's URL and assertions on the API side: validated once, with field paths.

* ``url``: ``dns://server[:port]/name?type=A`` (:func:`engine.probes.dnsspec.split_dns_url`);
  normalised to that form with the type written out.
* ``request``: none (a 422 on ``request``).
* ``assertions``: ``{"source", "comparison", "target"}`` (no ``property``) with the sources
  ``rcode`` (equals/not_equals an rcode name), ``answers`` (any_/all_/none_ equals,
  contains, matches; is_empty, not_empty), ``answer_count``, ``min_ttl`` (equals,
  not_equals, less_than, greater_than a number) and ``response_time`` (less_than,
  greater_than ms).

The same rules serve the API and monitors as code; the probe compiles what passes here
(:func:`engine.probes.dnsspec.compile_assertions`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from engine.monitors.assertrules import BySource, Errors, check_text, not_negative, walk
from engine.monitors.assertrules import fail as _fail
from engine.monitors.requests import Config, given
from engine.probes import dnsspec
from engine.runtime.errors import ValidationFailed


def normalized_url(url: str) -> str:
    """The stored form of a dns:// URL; ValidationFailed on ``url`` saying why not."""
    try:
        t = dnsspec.split_dns_url(url)
    except dnsspec.DnsUrlRefused as exc:
        raise ValidationFailed({"url": [f"Not a dns:// URL we can ask: {exc}."]}) from None
    host = f"[{t.server}]" if ":" in t.server else t.server
    port = "" if t.port == dnsspec.DEFAULT_PORT else f":{t.port}"
    name = url.split("/", 3)[3].split("?", 1)[0] if t.type_text == "PTR" else t.name
    return f"dns://{host}{port}/{name.rstrip('.').lower()}?type={t.type_text}"


def server_host(url: str) -> str:
    """The server's host of a valid dns:// URL (the name the private-address rule is
    applied to on the API side)."""
    return dnsspec.split_dns_url(url).server


def queried_name(url: str) -> str:
    """The name a valid dns:// URL asks about (no final dot): what its status page shows
    beside the server, and whose domain a domain_expiry check watches."""
    return dnsspec.split_dns_url(url).name


def validate(body: Mapping[str, Any], *, creating: bool) -> Config:
    """``request`` and ``assertions`` of a dns:// monitor's create or update body, as
    :func:`engine.monitors.requests.validate` gives them for URL monitors;
    ValidationFailed naming the field paths."""
    errors: Errors = {}
    request: Any = None
    if body.get("request") is not None:
        _fail(errors, "request", "A dns:// monitor takes no request: the URL is the question.")
    elif "request" in body and not creating:
        request = Config.REMOVE  # null removes one kept from another scheme
    assertions = given(body, "assertions", creating, lambda raw: validate_assertions(raw, errors))
    if errors:
        raise ValidationFailed(errors)
    return Config(request, assertions)


def validate_assertions(raw: Any, errors: Errors) -> list[dict[str, Any]]:
    """The stored form of a dns:// monitor's assertions; problems go to ``errors`` by
    field path (``assertions.1.comparison``)."""
    return walk(raw, errors, _RULES)


def _target(source: str, comparison: str, target: Any, field: str, errors: Errors) -> Any:
    """A target past the rules every source shares (:class:`BySource`): an rcode's name, a
    number for the counts and times, a text for the answers."""
    if isinstance(target, bool) or not isinstance(target, str | int | float):
        _fail(errors, field, "The target must be a string or a number.")
        return target
    if source == "rcode":
        text = str(target).upper()
        if text not in dnsspec.RCODES:
            _fail(errors, field, "An rcode is one of " + ", ".join(dnsspec.RCODES) + ".")
        return text
    if source in ("answer_count", "min_ttl", "response_time"):
        return not_negative(errors, field, target,
                            f"The {source} {comparison} target must be a number, 0 or more.")
    text = str(target)
    if not text:
        _fail(errors, field, "The target may not be empty.")
    else:
        check_text(errors, field, text, pattern=comparison.endswith(("_matches", "_match")))
    return text


_RULES: Final = BySource(dnsspec.SOURCES, "A dns:// monitor's source must be one of ",
                         dnsspec.SOURCE_COMPARISONS, dnsspec.NO_TARGET, _target)
