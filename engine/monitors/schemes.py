"""The URL schemes uptime monitors may use, registered in one place: :data:`SCHEMES`.

Adding a scheme is one module of rules in ``engine/monitors/`` (a
:class:`engine.monitors.scheme.Scheme`), one line below, and its prober's line in
:mod:`engine.kinds.uptime_probers`. A scheme not registered here is refused (422 under
``url``). Also the two steps every caller goes through: :func:`validated` (a body's rules,
the scheme's request/assertions rules included) and :func:`build_spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from engine.monitors import dns_scheme, http_scheme, icmp_scheme, stream_scheme
from engine.monitors.requests import Config
from engine.monitors.scheme import Scheme
from engine.runtime.errors import ValidationFailed
from engine.runtime.secretbox import SecretBox

SCHEMES: Final[Mapping[str, Scheme]] = {s.name: s for s in (
    http_scheme.HTTP,
    http_scheme.HTTPS,
    dns_scheme.DNS,
    *(stream_scheme.TCP, stream_scheme.TLS, stream_scheme.SMTP, stream_scheme.IMAP,
      stream_scheme.POP3),
    icmp_scheme.ICMP,
)}

# The rules of a body whose scheme is not known (an update that keeps its URL).
DEFAULT: Final = http_scheme.HTTP


def get(name: str) -> Scheme | None:
    return SCHEMES.get(name)


def of_url(url: str) -> Scheme | None:
    """The registered scheme of a stored URL (None: not registered here)."""
    return SCHEMES.get(url[: url.find(":")])


def names() -> tuple[str, ...]:
    """The registered schemes, in registration order."""
    return tuple(SCHEMES)


def validated(
    body: Mapping[str, Any], creating: bool, other: Callable[[], Any],
    scheme: str | None = None,
) -> tuple[Any, Config]:
    """``other()`` (the API's validation of the rest of the body) and the request/assertions
    rules of the monitor's scheme, with the errors of both in one 422. The scheme is that of
    ``other()``'s ``target`` when it has one, else that the body's ``url`` names (refused
    or not), else ``scheme`` (the stored URL's), else :data:`DEFAULT`'s rules."""
    errors: dict[str, list[str]] = {}
    result = None
    config = Config(None, None)
    try:
        result = other()
    except ValidationFailed as exc:
        errors.update(exc.errors)
    target = getattr(result, "target", None)
    name = target.scheme if target is not None else named_in(body.get("url")) or scheme
    rules = (SCHEMES.get(name) if name is not None else None) or DEFAULT
    try:
        config = rules.config_rules(body, creating)
    except ValidationFailed as exc:
        errors.update(exc.errors)
    if errors:
        raise ValidationFailed(errors)
    return result, config


def kept_config(
    old: str, new: str, body: Mapping[str, Any], shown_request: Any, shown_assertions: Any,
) -> Config:
    """An update that moves a monitor from scheme ``old`` to ``new``: the stored request and
    assertions the body leaves out (given in their shown form, None when there are none),
    checked by ``new``'s rules as if the body had sent them. ValidationFailed naming each
    field they break, with what to send instead; else the :class:`Config` of what is kept
    (``None`` fields: nothing kept there, or the stored one kept as stored)."""
    if old == new:
        return Config(None, None)
    kept = {key: value for key, value in (("request", shown_request),
                                          ("assertions", shown_assertions))
            if key not in body and value is not None}
    if not kept:
        return Config(None, None)
    rules = SCHEMES.get(new) or DEFAULT
    try:
        config = rules.config_rules(kept, False)
    except ValidationFailed as exc:
        errors: dict[str, list[str]] = {}
        for field, messages in exc.errors.items():
            top = field.split(".", 1)[0]
            errors[field] = [*messages, (
                f"The monitor's stored {top} came with its {old}:// url; send {top} that"
                f" fit a {new}:// monitor with the new url, or {top}: null to remove them.")]
        raise ValidationFailed(errors) from None
    # A request that passes is kept as stored (its secret values stay encrypted).
    return Config(None, config.assertions if "assertions" in kept else None)


def named_in(url: Any) -> str | None:
    """The scheme a URL as given names (lower-case), valid or not; None without one."""
    if not isinstance(url, str) or ":" not in url:
        return None
    return url.strip().split(":", 1)[0].lower()


def build_spec(
    box: SecretBox, capture_limit: int, url: str, configured: tuple[Any, Any] | None,
    owner: int = 0,
) -> Any:
    """The spec the prober of ``url``'s scheme takes for this stored configuration (None:
    the URL alone)."""
    scheme = of_url(url) or DEFAULT
    return scheme.spec_rules(box, capture_limit, configured, owner)
