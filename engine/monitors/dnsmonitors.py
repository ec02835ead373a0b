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
from typing import Any

from engine.monitors.assertrules import as_number, check_text, stored_number, walk
from engine.monitors.assertrules import fail as _fail
from engine.monitors.requests import Config
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
    errors: dict[str, list[str]] = {}
    assertions: Any = None
    request: Any = None
    if body.get("request") is not None:
        _fail(errors, "request", "A dns:// monitor takes no request: the URL is the question.")
    elif "request" in body and not creating:
        request = Config.REMOVE  # null removes one kept from another scheme
    if "assertions" in body:
        raw = body["assertions"]
        if raw is None or raw == []:
            assertions = None if creating else Config.REMOVE
        else:
            assertions = validate_assertions(raw, errors)
    if errors:
        raise ValidationFailed(errors)
    return Config(request, assertions)


def validate_assertions(raw: Any, errors: dict[str, list[str]]) -> list[dict[str, Any]]:
    """The stored form of a dns:// monitor's assertions; problems go to ``errors`` by
    field path (``assertions.1.comparison``)."""
    return walk(raw, errors, _assertion)


def _assertion(a: Any, at: str, errors: dict[str, list[str]]) -> dict[str, Any] | None:
    if not isinstance(a, dict):
        _fail(errors, at, "An assertion must be an object.")
        return None
    n = len(errors)
    source = a.get("source")
    if source not in dnsspec.SOURCES:
        _fail(errors, f"{at}.source",
              "A dns:// monitor's source must be one of " + ", ".join(dnsspec.SOURCES) + ".")
        return None
    comparison = a.get("comparison")
    allowed = dnsspec.SOURCE_COMPARISONS[source]
    if comparison not in allowed:
        _fail(errors, f"{at}.comparison",
              f"A {source} assertion's comparison must be one of " + ", ".join(allowed) + ".")
        return None
    if a.get("property") not in (None, ""):
        _fail(errors, f"{at}.property", f"A {source} assertion takes no property.")
    target = a.get("target")
    if comparison in dnsspec.NO_TARGET:
        target = None
    elif target is None:
        _fail(errors, f"{at}.target", f"The {comparison} comparison needs a target.")
    elif isinstance(target, bool) or not isinstance(target, str | int | float):
        _fail(errors, f"{at}.target", "The target must be a string or a number.")
    elif source == "rcode":
        text = str(target).upper()
        if text not in dnsspec.RCODES:
            _fail(errors, f"{at}.target",
                  "An rcode is one of " + ", ".join(dnsspec.RCODES) + ".")
        target = text
    elif source in ("answer_count", "min_ttl", "response_time"):
        number = as_number(target)
        if number is None or number < 0:
            _fail(errors, f"{at}.target",
                  f"The {source} {comparison} target must be a number, 0 or more.")
        else:
            target = stored_number(number)
    else:
        target = str(target)
        if not target:
            _fail(errors, f"{at}.target", "The target may not be empty.")
        else:
            check_text(errors, f"{at}.target", target,
                       pattern=comparison.endswith(("_matches", "_match")))
    if len(errors) != n:
        return None
    return {"source": source, "property": None, "comparison": comparison, "target": target}
