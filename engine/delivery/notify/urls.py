"""Apprise URLs of notification channels: what makes one valid, which host it reaches, and
how it is shown without its secrets. Nothing here sends anything.

- **Valid** means Apprise has a service for the scheme and can build it from the URL
  (:func:`parse`); the error says which of the two failed.
- **Secrets** are whatever the service marks private (passwords, tokens, webhook ids), the
  password of the authority, every ``+Header=`` value, and query values whose names say
  token, key, secret, password or auth: :func:`masked` shows each as ``****`` and keeps the
  scheme and (unless the host itself is a token) the host. Apprise's own
  ``url(privacy=True)`` leaves some readable (an ntfy token as ``t...3``, json headers), so
  this does not rely on it.
- **Hosts**: for services the URL points at a host of the user's choosing (json, ntfy,
  gotify, mail's SMTP server, ...) :func:`target_hosts` names them, so the private-address
  rule applies to them; services with a fixed endpoint (Slack, Discord, Telegram) reach the
  vendor's public hosts and have none.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import apprise

from engine.runtime.errors import ValidationFailed

MASK = "****"
MAX_URL_LENGTH = 2048
# Query parameter names that carry a secret, whatever the service says.
_SECRET_PARAMS = re.compile(
    r"(token|key|secret|pass|pwd|auth|signature|sig|webhook|bearer|cred)", re.IGNORECASE
)
_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")
# Shorter values are masked where they stand (the authority's password), never searched for
# in the whole URL: "a" would mask every a.
_MIN_SEARCHED = 4


@dataclass(frozen=True, slots=True)
class ParsedUrl:
    """An Apprise URL Apprise can use: its service and the plugin built from it."""

    url: str
    service: str
    plugin: Any


def _fail(message: str, field: str = "url") -> ValidationFailed:
    return ValidationFailed({field: [message]})


def parse(value: Any, field: str = "url") -> ParsedUrl:
    """``value`` as an Apprise URL, or ValidationFailed under ``field`` saying what is
    wrong (not a string, an unknown scheme, a URL the service cannot use)."""
    if not isinstance(value, str) or not value.strip():
        raise _fail(f"The {field} must be an Apprise URL such as "
                    "mailtos://user:pass@smtp.example.com or ntfy://ntfy.example.com/topic.",
                    field)
    url = value.strip()
    if len(url) > MAX_URL_LENGTH:
        raise _fail(f"The {field} must be at most {MAX_URL_LENGTH} characters.", field)
    if any(ord(c) < 32 or ord(c) == 127 for c in url):
        raise _fail(f"The {field} must not contain control characters.", field)
    m = _SCHEME.match(url)
    if m is None:
        raise _fail(f"The {field} must start with a scheme such as mailtos:// or json://.",
                    field)
    scheme = m.group(1).lower()
    if MASK in url:
        raise _fail(f"The {field} contains a masked secret ({MASK}); send the whole URL, "
                    "or send it back exactly as shown to keep the stored one.", field)
    if scheme not in _known_schemes():
        raise _fail(f"The {field} scheme {scheme}:// is not a notification service Apprise "
                    "knows.", field)
    try:
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    except Exception:  # Apprise's parsers are many; none of their errors is a 500.
        plugin = None
    if plugin is None:
        raise _fail(f"The {field} is not a valid {scheme}:// URL: Apprise cannot build the "
                    "service from it (a missing host, token or recipient?).", field)
    return ParsedUrl(url=url, service=scheme, plugin=plugin)


@functools.cache
def _known_schemes() -> frozenset[str]:
    """Every scheme of a service this Apprise can use (built once: a walk over ~100
    plugins)."""
    schemas = apprise.Apprise().details(show_disabled=False).get("schemas", [])
    return frozenset(
        p.lower()
        for entry in schemas
        for key in ("protocols", "secure_protocols")
        for p in (entry.get(key) or ())
        if isinstance(p, str)
    )


def _private_values(plugin: Any) -> list[str]:
    """The values the plugin holds for what its service marks private."""
    out: list[str] = []
    names: set[str] = set()
    for table in ("template_tokens", "template_args"):
        for key, spec in (getattr(plugin, table, None) or {}).items():
            if isinstance(spec, dict) and spec.get("private"):
                names.add(str(spec.get("map_to") or spec.get("alias_of") or key))
                names.add(str(key))
    names.update(("password", "token", "apikey", "secret"))
    # Attribute names do not always match the token's ("integrationkey" is kept as
    # integration_key): compare them without underscores.
    attrs = {k.replace("_", "").lower(): v for k, v in vars(plugin).items()}
    for name in names:
        value = getattr(plugin, name, None)
        if value is None:
            value = attrs.get(name.replace("_", "").lower())
        values = value if isinstance(value, (list, tuple, set)) else [value]
        out.extend(str(v) for v in values if isinstance(v, (str, int)) and str(v))
    headers = getattr(plugin, "headers", None)
    if isinstance(headers, dict):
        out.extend(str(v) for v in headers.values() if v)
    return out


def masked(url: str) -> str:
    """``url`` with every secret shown as ``****`` (see the module docstring). A URL that
    cannot be parsed is masked whole after its scheme."""
    m = _SCHEME.match(url)
    scheme = m.group(0) if m else ""
    try:
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    except Exception:
        plugin = None
    if plugin is None:
        return scheme + MASK
    secrets = {s for s in _private_values(plugin) if len(s) >= _MIN_SEARCHED}
    out = _mask_structure(url)
    # Longest first, so a secret containing another is masked whole.
    for secret in sorted(secrets, key=len, reverse=True):
        for form in {secret, quote(secret, safe=""), quote(secret, safe="@:")}:
            out = out.replace(form, MASK)
    return out


def _mask_structure(url: str) -> str:
    """The authority's password, header values and secret-named query values as ``****``."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:{MASK}@{hostport}"
    query = parts.query
    if query:
        # Each parameter as written (no re-encoding: "+Header" must stay a "+"), only a
        # secret's value replaced.
        pairs = []
        for part in query.split("&"):
            name, eq, value = part.partition("=")
            bare = unquote(name).lstrip("+-:")
            secret = unquote(name).startswith("+") or bool(_SECRET_PARAMS.search(bare))
            pairs.append(f"{name}{eq}{MASK}" if secret and value else part)
        query = "&".join(pairs)
    out = f"{parts.scheme}://{netloc}{parts.path}"
    if query:
        out += "?" + query
    if parts.fragment:
        out += "#" + parts.fragment
    return out


def secrets_of(url: str) -> list[str]:
    """The secret strings in ``url`` (for scrubbing a service's words before they are
    logged or stored)."""
    try:
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    except Exception:
        return []
    if plugin is None:
        return []
    found = set(_private_values(plugin))
    parts = urlsplit(url)
    if parts.password:
        found.add(parts.password)
    return sorted((s for s in found if len(s) >= 3), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (and its URL-quoted form) as ``****``."""
    for secret in secrets:
        text = text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    return text


def target_hosts(plugin: Any) -> list[tuple[str, int]]:
    """(host, port) pairs the service connects to that the URL chose: the SMTP server of
    mail, the host of services that take one; none for fixed-endpoint services."""
    hosts: list[tuple[str, int]] = []
    secure = bool(getattr(plugin, "secure", False))
    port = getattr(plugin, "port", None)
    smtp_host = getattr(plugin, "smtp_host", None)
    if isinstance(smtp_host, str) and smtp_host:
        hosts.append((smtp_host, int(port or (465 if secure else 25))))
    tokens = getattr(plugin, "template_tokens", None) or {}
    host = getattr(plugin, "host", None)
    if "host" in tokens and isinstance(host, str) and host and not any(
        h == host for h, _ in hosts
    ):
        hosts.append((host, int(port or (443 if secure else 80))))
    return hosts


async def check_targets(
    plugin: Any, *, allow_private: bool, field: str = "url", resolve: Any = None
) -> None:
    """The private-address rule for the hosts the URL chose (:func:`target_hosts`):
    ValidationFailed under ``field`` when one resolves to a non-public address, or does not
    resolve and looks like a host name (a dot, or an IP literal). A single label that does
    not resolve is a service's token or topic (``ntfy://topic`` is ntfy.sh), not a host.
    Nothing to do when private targets are allowed. The sender checks again on every try."""
    if allow_private:
        return
    from engine.domain import netpolicy
    from engine.runtime.errors import BlockedAddress

    lookup = resolve or netpolicy.resolve
    for host, port in target_hosts(plugin):
        try:
            addresses = await lookup(host, port)
        except (OSError, TimeoutError, UnicodeError, ValueError):
            if "." in host or netpolicy.literal_ip(host) is not None:
                raise _fail(f"The {field} host {host} does not resolve.", field) from None
            continue
        try:
            netpolicy.ensure_public(list(addresses), allow_private=False)
        except BlockedAddress:
            raise _fail(
                f"The {field} host {host} resolves to a non-public address; private targets "
                "are not allowed.",
                field,
            ) from None
