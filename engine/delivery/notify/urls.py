"""Apprise URLs of notification channels: what makes one valid, which host it reaches, and
how it is shown without its secrets. Nothing here sends anything.

- **Valid** means Apprise has a service for the scheme and can build it from the URL
  (:func:`parse`); the error says which of the two failed.
- **Secrets** are whatever the service's schema marks private (each plugin's
  ``template_tokens``/``template_args`` with ``private``, and their aliases), read from
  Apprise's own parse of the URL by the token's name and the keyword it maps to; what
  Apprise's privacy view hides; the password of the authority (and a user name where the
  schema puts a token, ``ntfy://{token}@host``); every ``+Header=`` value; and query values
  whose names say token, key, secret, password or auth. :func:`masked` shows each as
  ``****`` and keeps the scheme and (unless the host itself is a token) the host;
  :func:`secrets_of` lists the same values for scrubbing error texts. Apprise's own
  ``url(privacy=True)`` leaves some readable (an ntfy token as ``t...3``, json headers), so
  this does not rely on it alone.
- **Hosts**: for services the URL points at a host of the user's choosing (json, ntfy,
  gotify, mail's SMTP server, Nostr's relays, ...) :func:`target_hosts` names them, so the
  private-address rule applies to them; services with a fixed endpoint (Slack, Discord,
  Telegram) reach the vendor's public hosts and have none. Services the connect guard
  cannot cover (:data:`UNGUARDED`: syslog on this server, rsyslog's own lookup) are refused
  while private targets are not allowed.
"""

from __future__ import annotations

import contextlib
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


def _private(cls: Any, name: str, depth: int = 0) -> bool:
    """Whether the plugin's schema marks token or argument ``name`` private (directly, or
    as an alias of a private one)."""
    for table in ("template_tokens", "template_args"):
        spec = (getattr(cls, table, None) or {}).get(name)
        if isinstance(spec, dict):
            if spec.get("private"):
                return True
            alias = spec.get("alias_of")
            if isinstance(alias, str) and alias != name and depth < 4:
                return _private(cls, alias, depth + 1)
    return False


def _private_names(cls: Any) -> set[str]:
    """Every name a private value goes by: the token or argument, what it maps to (the
    plugin's keyword), and the query argument names that are aliases of one."""
    names: set[str] = set()
    for table in ("template_tokens", "template_args"):
        for key, spec in (getattr(cls, table, None) or {}).items():
            if isinstance(spec, dict) and _private(cls, key):
                names.add(str(key))
                if isinstance(spec.get("map_to"), str):
                    names.add(spec["map_to"])
    return names


def _strings(value: Any) -> list[str]:
    values = value if isinstance(value, (list, tuple, set)) else [value]
    return [str(v) for v in values if isinstance(v, (str, int)) and not isinstance(v, bool)
            and str(v)]


_URL_PARTS = re.compile(r"[/?&=@:#]+")


def _privacy_diff(plugin: Any) -> list[str]:
    """What Apprise's own privacy view hides: the parts of ``plugin.url()`` that differ
    from ``plugin.url(privacy=True)`` (compared part by part when both split alike)."""
    try:
        full = _URL_PARTS.split(str(plugin.url(privacy=False)))
        shown = _URL_PARTS.split(str(plugin.url(privacy=True)))
    except Exception:  # a plugin's url() is its own code; no answer is no secret found
        return []
    if len(full) != len(shown):
        return []
    return [unquote(a) for a, b in zip(full, shown, strict=True) if a != b and a]


_USER_SLOT = re.compile(r"://{([a-z0-9_]+)}@", re.IGNORECASE)


@functools.cache
def _token_as_user_cached(cls: Any) -> bool:
    return any(
        (m := _USER_SLOT.search(str(t))) is not None and m.group(1) != "user"
        and _private(cls, m.group(1))
        for t in getattr(cls, "templates", ()) or ()
    )


def _token_as_user(cls: Any) -> bool:
    """Whether the service takes a private value where a URL's user name stands
    (``ntfy://{token}@host``): a user name without a password is then that value."""
    try:
        return _token_as_user_cached(cls)
    except TypeError:  # an unhashable class: never, but no 500 for it
        return False


def _private_values(plugin: Any, url: str | None = None) -> list[str]:
    """The values the URL gives for what the plugin's service marks private: read from
    Apprise's own parse of the URL (by the token's name and the keyword it maps to), from
    the plugin's attributes of those names, from what its privacy view hides, plus every
    header value."""
    cls = type(plugin)
    names = _private_names(cls) | {"password", "token", "apikey", "secret"}
    results: dict[str, Any] = {}
    if url is not None:
        try:
            results = cls.parse_url(url) or {}
        except Exception:  # Apprise's parsers are many; a failure finds nothing here
            results = {}
    query = {str(k).lower(): v for k, v in (results.get("qsd") or {}).items()}
    # Attribute names do not always match the token's ("integrationkey" is kept as
    # integration_key, "secret_access_key" as aws_secret_access_key): compare them without
    # underscores, and also by their ends.
    attrs = {k.replace("_", "").lower(): v for k, v in vars(plugin).items()}
    out: list[str] = []
    for name in names:
        bare = name.replace("_", "").lower()
        out.extend(_strings(results.get(name)))
        out.extend(_strings(query.get(name.lower())))
        out.extend(_strings(getattr(plugin, name, None)))
        for attr, value in attrs.items():
            if attr == bare or (len(bare) >= 5 and attr.endswith(bare)):
                out.extend(_strings(value))
    out.extend(_privacy_diff(plugin))
    if results.get("user") and not results.get("password") and _token_as_user(cls):
        out.append(str(results["user"]))
    for table in ("headers", "qsd+"):
        headers = getattr(plugin, "headers", None) if table == "headers" else results.get(table)
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
    secrets = {s for s in _secrets(url, plugin) if len(s) >= _MIN_SEARCHED}
    # Never within the scheme: a secret "mail" must not turn mailto:// into ****to://.
    head, sep, out = _mask_structure(url).partition("://")
    # Longest first, so a secret containing another is masked whole.
    for secret in sorted(secrets, key=len, reverse=True):
        for form in {secret, quote(secret, safe=""), quote(secret, safe="@:")}:
            out = out.replace(form, MASK)
    return head + sep + out


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


def _secrets(url: str, plugin: Any) -> set[str]:
    """Every secret value in ``url``: the plugin's private values, the authority's
    password, every header value and every secret-named query value (as written and
    unquoted)."""
    found = set(_private_values(plugin, url))
    parts = urlsplit(url)
    with contextlib.suppress(ValueError):
        if parts.password:
            found.update((parts.password, unquote(parts.password)))
    for part in parts.query.split("&") if parts.query else ():
        name, _, value = part.partition("=")
        bare = unquote(name)
        if value and (bare.startswith("+") or _SECRET_PARAMS.search(bare.lstrip("+-:"))):
            found.update((value, unquote(value)))
    return found


def secrets_of(url: str) -> list[str]:
    """The secret strings in ``url`` (for scrubbing a service's words before they are
    logged or stored), longest first: the same ones :func:`masked` hides."""
    try:
        plugin = apprise.Apprise.instantiate(url, suppress_exceptions=True)
    except Exception:
        return []
    if plugin is None:
        return []
    return sorted((s for s in _secrets(url, plugin) if len(s) >= 3), key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (and its URL-quoted form) as ``****``."""
    for secret in secrets:
        text = text.replace(secret, MASK).replace(quote(secret, safe=""), MASK)
    return text


# Services whose sends the connect guard (engine.delivery.notify.connectguard) cannot hold
# to public addresses: refused while private targets are not allowed, with the reason.
UNGUARDED = {
    "syslog": "writes to the system log of the server Upwatch runs on",
    "rsyslog": "sends to a host whose address is looked up past Upwatch's checks",
}


def _schemes(plugin: Any) -> set[str]:
    out: set[str] = set()
    for attr in ("protocol", "secure_protocol"):
        value = getattr(plugin, attr, None)
        out.update(v.lower() for v in (value if isinstance(value, (list, tuple)) else [value])
                   if isinstance(v, str))
    return out


def _url_host(url: str) -> tuple[str, int] | None:
    """(host, port) of a ws(s)/http(s) URL written with or without its scheme."""
    try:
        parts = urlsplit(url if "://" in url else f"wss://{url}")
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host:
        return None
    return host, port or (443 if parts.scheme in ("wss", "https") else 80)


def target_hosts(plugin: Any) -> list[tuple[str, int]]:
    """(host, port) pairs the service connects to that the URL chose: the SMTP server of
    mail, the host of services that take one, Nostr's relays and Blossom server; none for
    fixed-endpoint services."""
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
    if "nostr" in _schemes(plugin):
        relays = getattr(plugin, "relays", None) or []
        blossom = getattr(plugin, "blossom", None)
        for url in [*relays, *([blossom] if blossom else [])]:
            found = _url_host(str(url))
            if found is not None and found not in hosts:
                hosts.append(found)
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

    for scheme in sorted(_schemes(plugin) & UNGUARDED.keys()):
        raise _fail(f"The {field} scheme {scheme}:// {UNGUARDED[scheme]}; it is refused "
                    "unless private targets are allowed (UPWATCH_ALLOW_PRIVATE_TARGETS).",
                    field)
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
