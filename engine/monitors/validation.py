"""Input validation for the API: pure functions from decoded JSON values to typed commands.

Every function here either returns a clean value or raises
:class:`engine.runtime.errors.ValidationFailed` (a 422) /
:class:`engine.runtime.errors.NotFound` (a 404, for path ids). Nothing touches the network
except :func:`ensure_public_host`, which applies the private-address rule
through an injectable resolver.

Rules that hold for every body (decisions.md "Monitors"):

- The body is a JSON object; anything else is a 422 under ``body``. An empty body counts as
  ``{}`` so that clients may send nothing to endpoints whose fields are all optional.
- Unknown fields are ignored.
- An optional field given as ``null`` is treated as absent (``webhook_url`` is the exception:
  there ``null`` removes the URL).
- Strings that end up in the database never carry control characters: PostgreSQL cannot store
  NUL, and CR/LF in a name or URL is never legitimate (header injection downstream).
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

import idna
import orjson

from engine.domain import netpolicy
from engine.monitors import schemes
from engine.monitors.domain_settings import domain_fields, interval_on_create
from engine.monitors.scheme import UrlParts
from engine.runtime.errors import BlockedAddress, NotFound, ValidationFailed
from engine.runtime.settings import ALLOWED_INTERVALS, ALLOWED_THRESHOLDS, Plan

MAX_URL_LENGTH = 2048
MAX_ALIAS_LENGTH = 255
MAX_EXPIRY_DAYS = 365
DEFAULT_INTERVAL = 30
DEFAULT_THRESHOLD = 0
# The certificate check of a new monitor runs hourly: certificates change rarely and every
# run is a full TLS handshake against the customer's site.
CERTIFICATE_INTERVAL = 3600
SECONDS_PER_DAY = 86400
# Path ids are PostgreSQL bigint.
MAX_ID = 2**63 - 1

# What webhook URLs may use (monitor URLs: the registered schemes, engine.monitors.schemes).
_WEB_PORTS = {"http": 80, "https": 443}
# A hostname label after IDNA encoding (underscores appear in real DNS names).
_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
# Characters left as they are when the path and query are percent-encoded: RFC 3986
# reserved and unreserved characters, and '%' so existing escapes survive.
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_ID = re.compile(r"^[1-9][0-9]{0,18}$")
_WHITESPACE = re.compile(r"\s")  # what str.isspace() calls whitespace, searched in C
# What quote() leaves as it is: letters, digits, "_.-~" and the safe characters.
_PLAIN_PATH = re.compile("^[A-Za-z0-9_.~" + re.escape(_PATH_SAFE) + "-]*$")
_PLAIN_QUERY = re.compile("^[A-Za-z0-9_.~" + re.escape(_QUERY_SAFE) + "-]*$")
# An IPv4 address as ipaddress writes it (no leading zeros): the only numeric host accepted.
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_DOTTED_QUAD = re.compile(rf"^(?:{_OCTET}\.){{3}}{_OCTET}$")


def _fail(field: str, message: str) -> ValidationFailed:
    return ValidationFailed({field: [message]})


# --- the body ------------------------------------------------------------------------------


def parse_body(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object. Empty (or blank) means ``{}``.

    Not JSON (including invalid UTF-8, lone surrogates, NaN, nesting deeper than orjson's
    1024 levels, numbers beyond a double) or JSON that is not an object: 422 under ``body``.
    """
    if not raw.strip():
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise _fail("body", "The body must be valid JSON.") from None
    if not isinstance(value, dict):
        raise _fail("body", "The body must be a JSON object.")
    return value


def present(body: Mapping[str, Any], field: str) -> bool:
    """True when ``field`` is given with a value other than null."""
    return body.get(field) is not None


# --- path ids ------------------------------------------------------------------------------


def parse_id(raw: str) -> int:
    """A path id: a positive decimal integer that fits in bigint, else NotFound (a 404).

    Ids that cannot exist (``0``, ``-1``, ``1.5``, ``abc``, ``01``, 20 digits) are simply not
    found: the client asked for something that is not there.
    """
    if not _ID.match(raw):
        raise NotFound("Not found.")
    value = int(raw)
    if value > MAX_ID:
        raise NotFound("Not found.")
    return value


# --- scalars -------------------------------------------------------------------------------


def as_int(value: Any, field: str) -> int:
    """A JSON integer. Floats without a fraction (``60.0``) count; bools, strings and
    fractional numbers do not."""
    if isinstance(value, bool):
        raise _fail(field, f"The {field} must be an integer.")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise _fail(field, f"The {field} must be an integer.")


# Control characters (C0, DEL, C1 with NEL), lone surrogates, and the Unicode line and
# paragraph separators U+2028/U+2029: each can end a line in some consumer (a log, a
# header, a JavaScript string), so none belongs in a single-line value.
_LINE_BREAKING_CATEGORIES = frozenset({"Cc", "Cs", "Zl", "Zp"})


def _has_control_chars(text: str) -> bool:
    if text.isascii():  # the usual case, in C: ASCII's only such characters are C0 and DEL
        return not text.isprintable()
    return any(unicodedata.category(ch) in _LINE_BREAKING_CATEGORIES for ch in text)


has_control_chars = _has_control_chars


def validate_interval(value: Any, plan: Plan, field: str = "interval") -> int:
    """An interval in seconds from api.md section 8 that the account's plan allows."""
    interval = as_int(value, field)
    allowed = [i for i in ALLOWED_INTERVALS if i in plan.allowed_intervals]
    if interval not in allowed:
        raise _fail(
            field,
            f"The {field} must be one of: {', '.join(str(i) for i in allowed)}.",
        )
    return interval


def validate_threshold(value: Any, field: str = "notification_threshold") -> int:
    """An uptime notification threshold in seconds from api.md section 8."""
    threshold = as_int(value, field)
    if threshold not in ALLOWED_THRESHOLDS:
        raise _fail(
            field,
            f"The {field} must be one of: {', '.join(str(t) for t in ALLOWED_THRESHOLDS)}.",
        )
    return threshold


def validate_expiry_days(value: Any, field: str = "expiry_threshold_days") -> int:
    """Days before certificate expiry for the renewal-due webhook: 0 (off) to 365."""
    days = as_int(value, field)
    if not 0 <= days <= MAX_EXPIRY_DAYS:
        raise _fail(field, f"The {field} must be between 0 and {MAX_EXPIRY_DAYS}.")
    return days


MAX_RECOVERY_THRESHOLD = 86400  # seconds of good probes before uptime_restored
MAX_EXPIRY_PERCENT = 99  # renewal due with this percent of the lifetime left (100: always)


def validate_int_range(value: Any, field: str, low: int, high: int) -> int:
    """An integer in ``[low, high]``."""
    number = as_int(value, field)
    if not low <= number <= high:
        raise _fail(field, f"The {field} must be between {low} and {high}.")
    return number


def validate_alias(value: Any, field: str = "alias") -> str:
    """A display name: a string, trimmed, 1..255 characters, no control characters.

    Anything else (unicode, quotes, SQL-looking text, HTML) is stored verbatim: it is data,
    and every place that shows it escapes it.
    """
    if not isinstance(value, str):
        raise _fail(field, f"The {field} must be a string.")
    alias = value.strip()
    if not alias:
        raise _fail(field, f"The {field} must not be empty.")
    if len(alias) > MAX_ALIAS_LENGTH:
        raise _fail(field, f"The {field} must not be longer than {MAX_ALIAS_LENGTH} characters.")
    if _has_control_chars(alias):
        raise _fail(field, f"The {field} must not contain control characters or line breaks.")
    return alias


# --- URLs ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TargetUrl:
    """A normalised absolute URL of a registered scheme (a webhook's: http or https) and
    its parts as the API shows them."""

    url: str
    scheme: str
    host: str  # lower-case; IDN as punycode; IPv6 without brackets
    port: str  # the explicit non-default port as a string, else ""

    @property
    def connect_port(self) -> int:
        """The port connected to (0: the scheme has none, as icmp)."""
        if self.port:
            return int(self.port)
        scheme = schemes.get(self.scheme)
        default = _WEB_PORTS.get(self.scheme) if scheme is None else scheme.default_port
        return default or 0


def _normalise_host(raw: str, field: str) -> tuple[str, str]:
    """(host as shown, host as written in the URL). Raises ValidationFailed."""
    bad = _fail(field, f"The {field} must have a valid host.")
    if raw.startswith("["):
        # IPv6 literal. Zone ids (fe80::1%eth0) name an interface of *this* machine.
        if not raw.endswith("]") or "%" in raw:
            raise bad
        try:
            ip6 = ipaddress.IPv6Address(raw[1:-1])
        except ValueError:
            raise bad from None
        return str(ip6), f"[{ip6}]"
    host = raw.rstrip(".") if raw.endswith(".") and not raw.endswith("..") else raw
    if not host or "%" in host:
        raise bad
    if host.isascii() and "xn--" not in host.lower():
        # Plain ASCII without an A-label: idna would only lower-case it, or refuse it and
        # leave it to the label rule below as in the fallback (at a third of a create's CPU).
        ascii_host = host.lower()
    else:
        try:
            ascii_host = idna.encode(host, uts46=True).decode("ascii").lower()
        except (idna.IDNAError, UnicodeError, ValueError):
            # idna is strict (no underscores, for one); plain ASCII names it rejects are
            # checked against the DNS label rule below instead.
            if not host.isascii():
                raise bad from None
            ascii_host = host.lower()
    labels = ascii_host.split(".")
    if len(ascii_host) > 253 or not all(_LABEL.match(label) for label in labels):
        raise bad
    # A numeric last label makes the whole host an IPv4 address (as browsers and
    # getaddrinfo read it); only the canonical dotted quad is accepted, so "0x7f.1" or
    # "2130706433" cannot dress up a private address.
    if (labels[-1].isdigit() or labels[-1].startswith("0x")) and not _DOTTED_QUAD.fullmatch(
            ascii_host):
        raise bad
    return ascii_host, ascii_host


def normalise_url(value: Any, field: str = "url") -> TargetUrl:
    """Validate and normalise a monitor or webhook URL (decisions.md "Monitors").

    Absolute, of a registered scheme (:mod:`engine.monitors.schemes`; a webhook's:
    http/https), a host, no user info, at most 2048 characters; scheme and host lower-cased,
    IDN hosts as punycode, the default port dropped, the fragment dropped (never sent to a
    server), path and query kept (non-ASCII percent-encoded), then the scheme's own rules
    (http(s): ``/`` for an empty path). Surrounding whitespace is trimmed; whitespace or
    control characters inside the URL are rejected.
    """
    if not isinstance(value, str):
        raise _fail(field, f"The {field} must be a string.")
    text = value.strip()
    if not text:
        raise _fail(field, f"The {field} field is required.")
    if len(text) > MAX_URL_LENGTH:
        raise _fail(field, f"The {field} must not be longer than {MAX_URL_LENGTH} characters.")
    if _has_control_chars(text) or _WHITESPACE.search(text) or "\\" in text:
        raise _fail(field, f"The {field} must not contain whitespace or control characters.")
    try:
        parts = urlsplit(text)
    except ValueError:
        raise _fail(field, f"The {field} must be a valid URL.") from None
    scheme = parts.scheme.lower()
    rules = None if field == "webhook_url" else schemes.get(scheme)
    if rules is None and (field != "webhook_url" or scheme not in _WEB_PORTS):
        allowed = tuple(_WEB_PORTS) if field == "webhook_url" else schemes.names()
        raise _fail(field, f"The {field} must be an absolute URL with scheme {_or(allowed)}.")
    default_port = _WEB_PORTS[scheme] if rules is None else rules.default_port
    netloc = parts.netloc
    if not netloc:
        raise _fail(field, f"The {field} must have a host.")
    if "@" in netloc:
        raise _fail(field, f"The {field} must not contain user information.")
    # Split host and port by hand: urlsplit's .port raises on junk and accepts "+80".
    if netloc.startswith("["):
        close = netloc.find("]")
        raw_host, rest = netloc[: close + 1], netloc[close + 1 :]
        if close < 0 or (rest and not rest.startswith(":")):
            raise _fail(field, f"The {field} must have a valid host.")
        raw_port = rest[1:] if rest else None
    else:
        raw_host, sep, port_text = netloc.partition(":")
        raw_port = port_text if sep else None
    if not raw_host:
        raise _fail(field, f"The {field} must have a host.")
    host, url_host = _normalise_host(raw_host, field)
    port = ""
    if raw_port:  # "host:" with an empty port means the default, as in browsers
        if not raw_port.isdigit() or not raw_port.isascii() or not 0 < int(raw_port) <= 65535:
            raise _fail(field, f"The {field} must have a port between 1 and 65535.")
        if int(raw_port) != default_port:
            port = str(int(raw_port))
    # quote() would return plain ASCII of safe characters unchanged; most URLs are that.
    path = (parts.path if _PLAIN_PATH.fullmatch(parts.path)
            else quote(parts.path, safe=_PATH_SAFE))
    query = parts.query if _PLAIN_QUERY.fullmatch(parts.query) else quote(
        parts.query, safe=_QUERY_SAFE)
    got = UrlParts(scheme, host, url_host, port, path, query)
    got = (rules or schemes.DEFAULT).url_rules(got, field)
    url = got.url()
    if len(url) > MAX_URL_LENGTH:
        raise _fail(field, f"The {field} must not be longer than {MAX_URL_LENGTH} characters.")
    return TargetUrl(url=url, scheme=scheme, host=got.host, port=got.port)


def _or(names: tuple[str, ...]) -> str:
    """("http", "https", "tcp") -> "http, https or tcp"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


Resolver = Callable[[str, int], Awaitable[object]]


async def ensure_public_host(target: TargetUrl, resolve: Resolver, field: str = "url") -> None:
    """Apply the private-address rule through ``resolve`` (``netpolicy.check_host`` bound to
    ``allow_private=False``): a non-public address or a name that does not resolve is a 422
    under ``field``. Callers skip this when private targets are allowed."""
    try:
        await resolve(target.host, target.connect_port)
    except BlockedAddress:
        # Not the address itself: the answer would map internal names to internal
        # addresses for anyone with an account.
        raise _fail(
            field,
            f"The {field} host resolves to a non-public address; private targets are not"
            " allowed (UPWATCH_ALLOW_PRIVATE_TARGETS=true allows them).",
        ) from None
    except (OSError, TimeoutError, UnicodeError, ValueError):
        raise _fail(field, f"The {field} host does not resolve.") from None


async def check_target(target: TargetUrl, *, allow_private: bool, field: str = "url") -> None:
    """The private-address rule for ``target`` with the real resolver
    (:func:`engine.domain.netpolicy.check_host`); nothing to do when private targets are allowed.
    The engine checks the address again when it connects."""
    if allow_private:
        return

    async def resolve(host: str, port: int) -> object:
        return await netpolicy.check_host(host, port, allow_private=False)

    await ensure_public_host(target, resolve, field)


async def validate_webhook_url(value: Any, *, allow_private: bool) -> str:
    """A webhook URL under the monitor URL rules, normalised; ValidationFailed under
    ``webhook_url`` otherwise. Shared by ``PUT /webapi/account`` and the command line."""
    target = normalise_url(value, "webhook_url")
    await check_target(target, allow_private=allow_private, field="webhook_url")
    return target.url


# --- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MonitorCreate:
    target: TargetUrl
    alias: str
    interval: int
    notification_threshold: int
    certificate_interval: int


@dataclass(frozen=True, slots=True)
class MonitorUpdate:
    target: TargetUrl | None
    alias: str | None


@dataclass(frozen=True, slots=True)
class CheckUpdate:
    interval: int | None
    # Seconds, as stored in checks.notification_threshold_s: the uptime threshold, or the
    # certificate expiry threshold in days x 86400.
    notification_threshold_s: int | None
    recovery_threshold_s: int | None = None
    expiry_threshold_percent: int | None = None
    # Domain expiry (engine/monitors/domain_settings.py): the renewal-due days.
    expiry_threshold_days: tuple[int, ...] | None = None


# The fields of a check update body, by check kind: every setting a check takes through
# the API (api.md "Check update body", docs/alerts.md). :func:`validate_check_update` reads
# these and no others, and a monitors file's check tables hold exactly these (and
# ``enabled``), so a setting added here is one a file must accept and export must write
# (tests/monitors hold both to it).
CHECK_UPDATE_FIELDS: dict[str, tuple[str, ...]] = {
    "uptime": ("interval", "notification_threshold", "recovery_threshold"),
    "certificate_health": ("interval", "expiry_threshold_days", "expiry_threshold_percent"),
    "domain_expiry": ("interval", "expiry_threshold_days"),
}


def default_interval(plan: Plan) -> int:
    """The uptime interval of a create body without one: 30 s (api.md section 8), or the
    plan's shortest interval when the plan does not allow 30 s (a default that the plan
    refuses would make ``interval`` mandatory on such plans)."""
    allowed = sorted(plan.allowed_intervals)
    return DEFAULT_INTERVAL if DEFAULT_INTERVAL in allowed else allowed[0]


def certificate_interval(plan: Plan) -> int:
    """Interval of a new monitor's certificate check: hourly when the plan allows it, else
    the plan's smallest allowed interval above an hour, else its largest (the closest to
    hourly that the plan permits)."""
    allowed = sorted(plan.allowed_intervals)
    if CERTIFICATE_INTERVAL in allowed:
        return CERTIFICATE_INTERVAL
    above = [i for i in allowed if i > CERTIFICATE_INTERVAL]
    return above[0] if above else allowed[-1]


def check_interval(kind: str, plan: Plan) -> int:
    """The interval of a new monitor's check of ``kind``: the uptime default, hourly (as
    :func:`certificate_interval`) for every other kind."""
    if kind == "uptime":
        return default_interval(plan)
    return interval_on_create(kind, certificate_interval(plan))


class _Collector:
    """Gathers every field's error so a client sees all problems of a body at once."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}

    def run(self, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except ValidationFailed as exc:
            for key, messages in exc.errors.items():
                self.errors.setdefault(key, []).extend(messages)
            return None

    def raise_if_any(self) -> None:
        if self.errors:
            raise ValidationFailed(self.errors)


def validate_monitor_create(body: Mapping[str, Any], plan: Plan) -> MonitorCreate:
    """The create body (api.md section 4): url required; alias defaults to the host;
    interval defaults to 30 and must be allowed by the plan; notification_threshold
    defaults to 0. The plan's interval subset applies to the default too."""
    c = _Collector()
    target: TargetUrl | None = None
    if not present(body, "url"):
        c.errors["url"] = ["The url field is required."]
    else:
        target = c.run(lambda: normalise_url(body["url"]))
    alias = c.run(lambda: validate_alias(body["alias"])) if present(body, "alias") else None
    interval = (
        c.run(lambda: validate_interval(body["interval"], plan))
        if present(body, "interval")
        else default_interval(plan)
    )
    threshold = (
        c.run(lambda: validate_threshold(body["notification_threshold"]))
        if present(body, "notification_threshold")
        else DEFAULT_THRESHOLD
    )
    c.raise_if_any()
    assert target is not None and interval is not None and threshold is not None
    return MonitorCreate(
        target=target,
        alias=alias if alias is not None else target.host,
        interval=interval,
        notification_threshold=threshold,
        certificate_interval=certificate_interval(plan),
    )


def validate_monitor_update(body: Mapping[str, Any]) -> MonitorUpdate:
    """The update body: optional alias and url, same rules as on create."""
    c = _Collector()
    target = c.run(lambda: normalise_url(body["url"])) if present(body, "url") else None
    alias = c.run(lambda: validate_alias(body["alias"])) if present(body, "alias") else None
    c.raise_if_any()
    return MonitorUpdate(target=target, alias=alias)


def validate_check_update(body: Mapping[str, Any], kind: str, plan: Plan) -> CheckUpdate:
    """The check update body for a check of ``kind``.

    ``interval``: every kind. ``notification_threshold``: uptime only; on a certificate
    check a 422 that points at ``expiry_threshold_days``. ``expiry_threshold_days``:
    certificate, stored as days x 86400; domain_expiry, a list of days (domain_settings).
    """
    c = _Collector()
    interval = (
        c.run(lambda: validate_interval(body["interval"], plan))
        if present(body, "interval")
        else None
    )
    if kind == "domain_expiry":
        days, errors = domain_fields(body)
        c.errors.update(errors)
        c.raise_if_any()
        return CheckUpdate(interval, None, expiry_threshold_days=days)
    threshold_s: int | None = None
    recovery: int | None = None
    percent: int | None = None
    only = "The {} field applies to {} checks only."
    if kind == "uptime":
        if present(body, "recovery_threshold"):
            recovery = c.run(lambda: validate_int_range(
                body["recovery_threshold"], "recovery_threshold", 0, MAX_RECOVERY_THRESHOLD))
        if present(body, "expiry_threshold_percent"):
            c.errors["expiry_threshold_percent"] = [
                only.format("expiry_threshold_percent", "certificate_health")]
    else:
        if present(body, "expiry_threshold_percent"):
            percent = c.run(lambda: validate_int_range(
                body["expiry_threshold_percent"], "expiry_threshold_percent", 0,
                MAX_EXPIRY_PERCENT))
        if present(body, "recovery_threshold"):
            c.errors["recovery_threshold"] = [only.format("recovery_threshold", "uptime")]
    if kind == "uptime":
        if present(body, "notification_threshold"):
            threshold_s = c.run(lambda: validate_threshold(body["notification_threshold"]))
        if present(body, "expiry_threshold_days"):
            c.errors["expiry_threshold_days"] = [
                "The expiry_threshold_days field applies to certificate_health checks only."
            ]
    else:
        if present(body, "notification_threshold"):
            c.errors["notification_threshold"] = [
                "The notification_threshold field applies to uptime checks only; "
                "use expiry_threshold_days for a certificate_health check."
            ]
        if present(body, "expiry_threshold_days"):
            days = c.run(lambda: validate_expiry_days(body["expiry_threshold_days"]))
            threshold_s = None if days is None else days * SECONDS_PER_DAY
    c.raise_if_any()
    return CheckUpdate(
        interval=interval, notification_threshold_s=threshold_s,
        recovery_threshold_s=recovery, expiry_threshold_percent=percent,
    )


@dataclass(frozen=True, slots=True)
class AccountUpdate:
    change_webhook: bool
    webhook_url: TargetUrl | None


def validate_account_update(body: Mapping[str, Any]) -> AccountUpdate:
    """``{"webhook_url": "https://..." | null}``; absent leaves it unchanged, null removes it."""
    if "webhook_url" not in body:
        return AccountUpdate(change_webhook=False, webhook_url=None)
    if body["webhook_url"] is None:
        return AccountUpdate(change_webhook=True, webhook_url=None)
    return AccountUpdate(
        change_webhook=True, webhook_url=normalise_url(body["webhook_url"], "webhook_url")
    )
