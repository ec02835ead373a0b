"""A monitor's ``request`` and ``assertions`` on the API side: validation with
field paths, the update rules, secrets encrypted for the store and masked for every answer.

Three forms of the same configuration:

* the API's: ``{"method", "headers": {name: value}, "body", "follow_redirects"}`` and a list
  of ``{"source", "property", "comparison", "target"}``;
* the stored one (``monitors.request``/``monitors.assertions``, jsonb): headers as
  ``[[name, value, is_secret], ...]`` in the order given, secret values as Fernet tokens;
* the shown one: the API's, every secret value ``"********"``.

Secret headers: ``Authorization``, ``Proxy-Authorization``, ``Cookie`` and any name holding
``token``, ``key``, ``secret`` or ``auth`` (any case; the one rule is
``engine.domain.secretheaders``, which the probe follows too).

The other schemes' rules take from here what a body's ``request`` and ``assertions`` mean
(:class:`Config`, :func:`given`) and the rules of a request body (:func:`checked_body`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.domain.secretheaders import is_secret_header
from engine.monitors.assertrules import (
    Errors,
    as_number,
    check_text,
    source_of,
    stored_number,
    walk,
)
from engine.monitors.assertrules import fail as _fail
from engine.probes import request as spec
from engine.probes.jsonpaths import JsonPathRefused, compile_jsonpath
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox, SecretUnreadable
from engine.runtime.settings import Settings

MASK = "********"
MAX_HEADERS = 20
MAX_BODY_BYTES = 16 * 1024
# Most servers refuse header blocks over 8-16 KiB. The API reads bodies of at most 64 KiB,
# so not every limit here can be reached in one request (a 16 KiB body fits).
MAX_HEADER_VALUE = 4096
MAX_PROPERTY = 1024
FORBIDDEN_HEADERS = frozenset(("host", "content-length", "transfer-encoding", "connection"))
# RFC 9110 token: the characters a header name may hold.
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


# Settings object id -> (the settings, kept alive so the id is never reused, its box).
_BOXES: dict[int, tuple[Settings, SecretBox]] = {}


def secret_box(settings: Settings) -> SecretBox:
    """The settings' :class:`SecretBox`, one per settings object (its key is read once)."""
    got = _BOXES.get(id(settings))
    if got is None:
        got = _BOXES[id(settings)] = (settings, SecretBox.from_settings(settings))
    return got[1]


@dataclass(frozen=True, slots=True)
class Config:
    """What a create or update body says of ``request`` and ``assertions``: ``None`` for a
    key left out (keep what is stored), ``Config.REMOVE`` to remove it, else the plain
    validated value (request headers as ``[[name, value], ...]``)."""

    request: Any
    assertions: Any

    REMOVE = "remove"


def given(body: Mapping[str, Any], key: str, creating: bool, read: Callable[[Any], Any]) -> Any:
    """What a create or update body says of ``key`` (``request`` or ``assertions``), as
    :class:`Config` holds it: None when left out; for null (or an empty list of assertions)
    None on a create and ``Config.REMOVE`` on an update; else ``read(value)``."""
    if key not in body:
        return None
    raw = body[key]
    if raw is None or (key == "assertions" and raw == []):
        return None if creating else Config.REMOVE
    return read(raw)


def validate(body: Mapping[str, Any], *, creating: bool) -> Config:
    """``request`` and ``assertions`` of a create or update body; ValidationFailed naming
    the field paths (``request.headers``, ``assertions.2.property``)."""
    errors: Errors = {}
    request = given(body, "request", creating, lambda raw: _request(raw, errors))
    method = request["method"] if isinstance(request, dict) else "GET"
    assertions = given(body, "assertions", creating, lambda raw: _assertions(raw, method, errors))
    if errors:
        raise ValidationFailed(errors)
    return Config(request, assertions)


def checked_body(body: Any, errors: Errors) -> str | None:
    """A request body as stored, or None with the first broken rule's words under
    ``request.body``: a string of at most :data:`MAX_BODY_BYTES` in UTF-8, without NUL."""
    if not isinstance(body, str):
        _fail(errors, "request.body", "The body must be a string.")
        return None
    if len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        _fail(errors, "request.body", f"The body may be at most {MAX_BODY_BYTES} bytes (UTF-8).")
        return None
    if "\0" in body:
        _fail(errors, "request.body", "The body may not contain NUL.")
        return None
    return body


def _request(raw: Any, errors: dict[str, list[str]]) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        _fail(errors, "request", "The request field must be an object.")
        return None
    method = raw.get("method", "GET")
    if method is None:
        method = "GET"
    if not isinstance(method, str) or method.upper() not in spec.METHODS:
        _fail(errors, "request.method",
              "The method must be one of " + ", ".join(spec.METHODS) + ".")
        method = "GET"
    method = method.upper()
    follow = raw.get("follow_redirects", True)
    if follow is None:
        follow = True
    if not isinstance(follow, bool):
        _fail(errors, "request.follow_redirects", "The follow_redirects field must be a boolean.")
    headers: list[list[str]] = []
    raw_headers = raw.get("headers")
    if raw_headers is not None:
        if not isinstance(raw_headers, dict):
            _fail(errors, "request.headers", "The headers field must be an object of name: value.")
        elif len(raw_headers) > MAX_HEADERS:
            _fail(errors, "request.headers", f"At most {MAX_HEADERS} headers are allowed.")
        else:
            seen: set[str] = set()
            for name, value in raw_headers.items():
                field = f"request.headers.{name}"
                if not _TOKEN.fullmatch(name) or len(name) > 256:
                    _fail(errors, "request.headers",
                          f"{name!r} is not a valid header name (an HTTP token).")
                    continue
                low = name.lower()
                if low in FORBIDDEN_HEADERS:
                    _fail(errors, "request.headers", f"The {name} header cannot be set.")
                    continue
                if low in seen:
                    _fail(errors, "request.headers", f"The {name} header is given twice.")
                    continue
                seen.add(low)
                if not isinstance(value, str):
                    _fail(errors, field, "A header value must be a string.")
                    continue
                if any(c in value for c in "\r\n\0"):
                    _fail(errors, field, "A header value may not contain CR, LF or NUL.")
                    continue
                if len(value) > MAX_HEADER_VALUE:
                    _fail(errors, field,
                          f"A header value may be at most {MAX_HEADER_VALUE} characters.")
                    continue
                headers.append([name, value])
    body = raw.get("body")
    if body is not None:
        if isinstance(body, str) and method in ("GET", "HEAD"):
            _fail(errors, "request.body", f"A {method} request cannot have a body.")
            body = None
        else:
            body = checked_body(body, errors)
    return {"method": method, "headers": headers, "body": body,
            "follow_redirects": follow if isinstance(follow, bool) else True}


def _assertions(raw: Any, method: str, errors: Errors) -> list[dict[str, Any]]:
    return walk(raw, errors, lambda a, at, errs: _assertion(a, at, method, errs))


def _assertion(a: Any, at: str, method: str, errors: Errors) -> dict[str, Any] | None:
    source = source_of(a, at, errors, spec.SOURCES, "The source must be one of ")
    if source is None:
        return None
    n = len(errors)
    comparison = a.get("comparison")
    if comparison not in spec.COMPARISONS:
        _fail(errors, f"{at}.comparison",
              "The comparison must be one of " + ", ".join(spec.COMPARISONS) + ".")
        return None
    if comparison not in spec.SOURCE_COMPARISONS[source]:
        _fail(errors, f"{at}.comparison", f"A {source} assertion cannot use {comparison}.")
        return None
    if method == "HEAD" and source in ("body", "json"):
        _fail(errors, f"{at}.source", "A HEAD request gets no body to assert on.")
    prop = a.get("property")
    if source in ("header", "json"):
        if not isinstance(prop, str) or not prop:
            _fail(errors, f"{at}.property", f"A {source} assertion needs a property.")
        elif len(prop) > MAX_PROPERTY:
            _fail(errors, f"{at}.property",
                  f"The property may be at most {MAX_PROPERTY} characters.")
        elif source == "header" and not _TOKEN.fullmatch(prop):
            _fail(errors, f"{at}.property", "The property must be a header name (an HTTP token).")
        elif source == "json":
            try:
                compile_jsonpath(prop)
            except JsonPathRefused as exc:
                _fail(errors, f"{at}.property", f"The JSONPath {exc}.")
    elif prop not in (None, ""):
        _fail(errors, f"{at}.property", f"A {source} assertion takes no property.")
        prop = None
    target = a.get("target")
    if comparison in spec.NO_TARGET:
        target = None
    elif target is None:
        _fail(errors, f"{at}.target", f"The {comparison} comparison needs a target.")
    elif isinstance(target, bool) or not isinstance(target, str | int | float):
        _fail(errors, f"{at}.target", "The target must be a string or a number.")
    else:
        numeric = comparison in spec.NUMBER_COMPARISONS or source in (
            "status_code", "response_time")
        if numeric:
            number = as_number(target)
            if number is None:
                _fail(errors, f"{at}.target", f"The {source} {comparison} target must be a number.")
            elif source == "status_code" and comparison in ("equals", "not_equals") and not (
                    number == int(number) and 100 <= number <= 599):
                _fail(errors, f"{at}.target", "A status code is an integer from 100 to 599.")
            else:
                target = stored_number(number)
        elif isinstance(target, str):
            check_text(errors, f"{at}.target", target, pattern=comparison == "matches")
    if len(errors) != n:
        return None
    return {"source": source, "property": prop or None, "comparison": comparison,
            "target": target}


# --- stored form ----------------------------------------------------------------------------


def to_stored(
    request: dict[str, Any], box: SecretBox, previous: dict[str, Any] | None
) -> dict[str, Any]:
    """The stored form of a validated request: secret values encrypted; a value ``MASK``
    keeps the stored value of the header of that name (any case), a 422 when none is
    stored."""
    kept: dict[str, list[Any]] = {}
    for h in (previous or {}).get("headers") or []:
        kept[str(h[0]).lower()] = h
    errors = unkept_masks(request, previous)
    if errors:
        raise ValidationFailed(errors)
    headers = []
    for name, value in request["headers"]:
        if value == MASK:
            old = kept[name.lower()]
            if bool(old[2]) == is_secret_header(name):
                headers.append([name, old[1], bool(old[2])])
            elif old[2]:  # stored secret, no longer a secret name: cannot happen (same name)
                headers.append([name, box.decrypt(old[1]), False])
            else:
                headers.append([name, box.encrypt(old[1]), True])
            continue
        secret = is_secret_header(name)
        headers.append([name, box.encrypt(value) if secret else value, secret])
    return {"method": request["method"], "headers": headers, "body": request["body"],
            "follow_redirects": request["follow_redirects"]}


def unkept_masks(
    request: dict[str, Any], previous: dict[str, Any] | None
) -> dict[str, list[str]]:
    """The headers of a validated request whose value ``MASK`` has no stored value to keep
    (no header of that name, any case, in ``previous``), as errors by field path."""
    stored = {str(h[0]).lower() for h in (previous or {}).get("headers") or []}
    errors: dict[str, list[str]] = {}
    for name, value in request["headers"]:
        if value == MASK and name.lower() not in stored:
            _fail(errors, f"request.headers.{name}",
                  f'"{MASK}" keeps a stored value, and this monitor has no {name} header.')
    return errors


def moved_secrets(request: Any, stored: dict[str, Any] | None, where: str) -> dict[str, list[str]]:
    """The errors of an update that moves a monitor to another origin (``where``, e.g.
    ``https://new.example``) while keeping what was meant for the old one, by field path:

    * a secret header whose value ``MASK`` keeps the stored one, or, with ``request`` left
      out of the update (None: the stored request stays), every stored secret header;
    * with ``request`` left out, a stored body (it may hold a password; sending the
      request again with its body confirms it goes to the new origin).

    ``request``: the validated request of the update, None when left out, or
    ``Config.REMOVE``. A value given again is sent to the new origin from then on."""
    errors: dict[str, list[str]] = {}
    if stored is None or request == Config.REMOVE:
        return errors
    secret = {str(h[0]).lower() for h in stored.get("headers") or [] if h[2]}
    if request is None:
        masked = [str(h[0]) for h in stored.get("headers") or [] if h[2]]
    else:
        masked = [name for name, value in request["headers"]
                  if value == MASK and name.lower() in secret]
    for name in masked:
        _fail(errors, f"request.headers.{name}",
              f"The url moves this monitor to another origin ({where}), and a stored secret "
              f"is not sent to a new origin: give the {name} value again, or leave the "
              "header out.")
    if request is None and stored.get("body") is not None:
        _fail(errors, "request.body",
              f"The url moves this monitor to another origin ({where}): send the request "
              "again with its body to send the body there.")
    return errors


def same_request(
    stored: dict[str, Any] | None, request: dict[str, Any] | None, box: SecretBox
) -> bool:
    """Whether storing the validated ``request`` over ``stored`` (:func:`to_stored`'s rules:
    a value ``MASK`` keeps the stored one) would leave the monitor's request as it is.
    Secret values are compared decrypted (their tokens differ at every encryption); a
    secret this key cannot read counts as a change."""
    if request is None or stored is None:
        return request is None and stored is None
    try:
        plain = plain_request(stored, box)
    except SecretUnreadable:
        return False
    assert plain is not None
    kept = {str(h[0]).lower(): h[1] for h in plain["headers"]}
    headers = [[name, kept.get(name.lower(), value) if value == MASK else value]
               for name, value in request["headers"]]
    return {**request, "headers": headers} == plain


def shown_request(stored: dict[str, Any] | None) -> dict[str, Any] | None:
    """The API's form of a stored request, every secret value masked."""
    if stored is None:
        return None
    return {
        "method": stored.get("method", "GET"),
        "headers": {str(h[0]): (MASK if h[2] else h[1]) for h in stored.get("headers") or []},
        "body": stored.get("body"),
        "follow_redirects": bool(stored.get("follow_redirects", True)),
    }


def shown_assertions(stored: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    if not stored:
        return None
    return [
        {"source": a["source"], "property": a.get("property"),
         "comparison": a["comparison"], "target": a.get("target")}
        for a in stored
    ]


def plain_request(stored: dict[str, Any] | None, box: SecretBox) -> dict[str, Any] | None:
    """The stored request with secret values decrypted (for the probe only; raises
    :class:`engine.runtime.secretbox.SecretUnreadable`)."""
    if stored is None:
        return None
    return {
        "method": stored.get("method", "GET"),
        "headers": [[h[0], box.decrypt(h[1]) if h[2] else h[1]]
                    for h in stored.get("headers") or []],
        "body": stored.get("body"),
        "follow_redirects": bool(stored.get("follow_redirects", True)),
    }
