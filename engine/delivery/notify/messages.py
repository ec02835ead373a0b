"""The words of a notification: a title and a short body per event, and a digest for an
alert storm. Pure functions of the queued rows (the webhook body of the same event) and the
instance's base URL.

Bodies are Markdown (Apprise converts it for services that do not take Markdown). Times are
UTC and say so. Whatever users and targets wrote (an alias, a URL, a response quoted in an
error, a certificate's issuer) is escaped (:func:`md`), so it shows as written and never
becomes a live link, an image or HTML; in titles, which some services render and others
show as is, link and HTML syntax is broken invisibly (:func:`plain_title`).

Each message has Apprise's type (:data:`FAILURE` for downtime and an invalid certificate,
:data:`SUCCESS` for restored and recovered, :data:`WARNING` for renewal due; a digest has the
worst of its events'): the colour chat services give it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from engine.db.notifications import QueuedNotification
from engine.domain import events
from engine.domain.timefmt import fmt

# Lines a digest lists before "... and N more".
DIGEST_LINES = 20

# Apprise's notify types (apprise.NotifyType values), mildest first.
INFO = "info"
SUCCESS = "success"
WARNING = "warning"
FAILURE = "failure"
_SEVERITY = (INFO, SUCCESS, WARNING, FAILURE)
TYPE_OF_EVENT = {
    events.DOWNTIME: FAILURE,
    events.CERTIFICATE_INVALID: FAILURE,
    events.UPTIME_RESTORED: SUCCESS,
    events.CERTIFICATE_RECOVERED: SUCCESS,
    events.CERTIFICATE_RENEWAL_DUE: WARNING,
    events.DOMAIN_INVALID: FAILURE,
    events.DOMAIN_RECOVERED: SUCCESS,
    events.DOMAIN_RENEWAL_DUE: WARNING,
}


@dataclass(frozen=True, slots=True)
class Message:
    title: str
    body: str
    notify_type: str = INFO


# The marks that make Markdown within a line (links, images, emphasis, code, HTML, entities,
# strike-through and spoilers, mentions). Each may be backslash-escaped in CommonMark and in
# Apprise's Markdown to HTML conversion; the rest stay as written, so URLs stay readable.
_PUNCTUATION = re.compile(r"([\\`*_{}\[\]()<>!#|~&@])")
_SPACES = re.compile(r"\s+")


def md(value: object) -> str:
    """``value`` as Markdown text that shows as written: on one line (a newline could start
    a heading or a list), each mark of Markdown syntax backslash-escaped (no link, image,
    emphasis, HTML or mention)."""
    return _PUNCTUATION.sub(r"\\\1", _SPACES.sub(" ", str(value)).strip())


def plain_title(value: str) -> str:
    """A title on one line whose link and HTML syntax is broken by a zero-width space (a
    title is rendered as Markdown by services that put it in the body, shown as is by
    the rest, so it cannot carry backslashes)."""
    text = _SPACES.sub(" ", value).strip()
    return text.replace("](", "]\u200b(").replace("<", "<\u200b")


def _utc(value: str | datetime | None) -> str:
    if value is None:
        return "an unknown time"
    text = fmt(value) if isinstance(value, datetime) else str(value)
    return f"{text} UTC"


def _duration(hms: str | None) -> str:
    """``H:MM:SS`` in words: ``2 h 03 min``, ``4 min 10 s``."""
    if not hms:
        return "an unknown time"
    try:
        h, m, s = (int(x) for x in hms.split(":"))
    except ValueError:
        return hms
    if h:
        return f"{h} h {m:02d} min"
    if m:
        return f"{m} min {s:02d} s"
    return f"{s} s"


def _days_left(meta: dict[str, Any], checked: str | None) -> int | None:
    if "expires_in_days" in meta:
        return int(meta["expires_in_days"])
    try:
        valid_to = datetime.fromisoformat(str(meta["valid_to"]))
        at = datetime.fromisoformat(str(checked))
    except (KeyError, ValueError, TypeError):
        return None
    return (valid_to - at).days


def _status_line(row: QueuedNotification, base_url: str) -> str:
    if not row.identifier:
        return ""
    return f"Status page: {base_url.rstrip('/')}/{row.identifier}"


def _parts(row: QueuedNotification) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    body = orjson.loads(row.body)
    check = body.get("check") or {}
    return body.get("monitor") or {}, check, check.get("meta") or {}


def _name(monitor: dict[str, Any]) -> str:
    """The monitor in Markdown: its alias and URL, escaped."""
    alias = monitor.get("alias") or ""
    url = monitor.get("url") or ""
    return f"{md(alias)} ({md(url)})" if alias and alias != url else md(url or alias)


_DOMAIN_EVENTS = (events.DOMAIN_RENEWAL_DUE, events.DOMAIN_INVALID, events.DOMAIN_RECOVERED)


def _domain_lines(event: str, alias: str, who: str, check: dict[str, Any],
                  meta: dict[str, Any]) -> tuple[str, list[str]]:
    domain = md(meta.get("domain") or "the domain")
    checked = _utc(check.get("last_check_at"))
    expires = md(_utc(meta.get("expires_at"))) if meta.get("expires_at") else "an unknown date"
    if event == events.DOMAIN_INVALID:
        return f"Domain invalid: {alias}", [
            f"The domain {domain} of **{who}** is not usable: "
            f"{md(check.get('error') or 'no reason given')}.",
            f"Checked at {checked}.",
        ]
    if event == events.DOMAIN_RECOVERED:
        return f"Domain valid again: {alias}", [
            f"The domain {domain} of **{who}** is registered again (checked at {checked}).",
            f"It expires on {expires}.",
        ]
    days = meta.get("expires_in_days")
    return f"Domain expires in {days} days: {alias}", [
        f"The domain {domain} of **{who}** expires on {expires}, in {days} days.",
        f"Registrar: {md(meta.get('registrar') or 'unknown')}. Checked at {checked}.",
    ]


def render(row: QueuedNotification, base_url: str) -> Message:
    """The message of one event."""
    monitor, check, meta = _parts(row)
    alias = plain_title(str(monitor.get("alias") or monitor.get("url")
                            or f"monitor {row.monitor_id}"))
    who = _name(monitor)
    checked = check.get("last_check_at")
    lines: list[str]
    if row.event == events.DOWNTIME:
        title = f"DOWN: {alias}"
        since = _utc(row.since) if row.since is not None else _utc(checked)
        regions = meta.get("detected_by") or "?"
        verified = meta.get("verified_via")
        seen = f"{md(regions)}, confirmed from {md(verified)}" \
            if verified and verified != regions else md(regions)
        code = meta.get("http_status_code")
        error = str(check.get("error") or "no reason given")
        lines = [
            f"**{who}** is down since {since}.",
            f"Reason: {md(error)}"
            + (f" (HTTP {md(code)})" if code and str(code) not in error else ""),
            f"Seen from: {seen}.",
        ]
    elif row.event == events.UPTIME_RESTORED:
        title = f"UP again: {alias}"
        lines = [
            f"**{who}** is back up since {_utc(checked)}.",
            f"It was down for {_duration(meta.get('downtime'))}"
            + (f"; now answering HTTP {md(meta['http_status_code'])}."
               if meta.get("http_status_code") else "."),
        ]
    elif row.event == events.CERTIFICATE_INVALID:
        title = f"Certificate invalid: {alias}"
        lines = [
            f"The TLS certificate of **{who}** is not valid: "
            f"{md(check.get('error') or 'no reason given')}.",
            f"Checked at {_utc(checked)}.",
        ]
    elif row.event == events.CERTIFICATE_RECOVERED:
        title = f"Certificate valid again: {alias}"
        days = _days_left(meta, checked)
        lines = [
            f"The TLS certificate of **{who}** is valid again (checked at {_utc(checked)}).",
            f"Issuer: {md(meta.get('issuer') or 'unknown')}; valid until "
            f"{md(_utc(meta.get('valid_to')))}"
            + (f" ({days} days left)." if days is not None else "."),
        ]
    elif row.event in _DOMAIN_EVENTS:
        title, lines = _domain_lines(row.event, alias, who, check, meta)
    else:  # certificate_renewal_due
        days = _days_left(meta, checked)
        title = f"Certificate expires in {days} days: {alias}"
        lines = [
            f"The TLS certificate of **{who}** expires on {md(_utc(meta.get('valid_to')))}, "
            f"in {days} days.",
            f"Issuer: {md(meta.get('issuer') or 'unknown')}. Checked at {_utc(checked)}.",
        ]
    link = _status_line(row, base_url)
    if link:
        lines.append(link)
    return Message(title=title, body="\n\n".join(lines),
                   notify_type=TYPE_OF_EVENT.get(row.event, INFO))


_DIGEST_WORDS = {
    events.DOWNTIME: ("monitor down", "monitors down"),
    events.UPTIME_RESTORED: ("monitor back up", "monitors back up"),
    events.CERTIFICATE_INVALID: ("certificate invalid", "certificates invalid"),
    events.CERTIFICATE_RECOVERED: ("certificate valid again", "certificates valid again"),
    events.CERTIFICATE_RENEWAL_DUE: ("certificate due for renewal",
                                     "certificates due for renewal"),
    events.DOMAIN_RENEWAL_DUE: ("domain due for renewal", "domains due for renewal"),
    events.DOMAIN_INVALID: ("domain expired or on hold", "domains expired or on hold"),
    events.DOMAIN_RECOVERED: ("domain valid again", "domains valid again"),
}


def _digest_line(row: QueuedNotification) -> str:
    monitor, check, _meta = _parts(row)
    who = _name(monitor)
    if row.event == events.DOWNTIME:
        since = _utc(row.since) if row.since is not None else _utc(check.get("last_check_at"))
        return f"- {who}: down since {since}: {md(check.get('error') or 'no reason given')}"
    if row.event == events.UPTIME_RESTORED:
        return f"- {who}: back up since {_utc(check.get('last_check_at'))}"
    return f"- {who}: {md(render(row, '').title.replace(chr(0x200B), ''))}"


def render_digest(rows: Sequence[QueuedNotification], base_url: str) -> Message:
    """One message for many events: a title that counts them by kind ("37 monitors down,
    2 monitors back up"), then up to :data:`DIGEST_LINES` lines per kind and "... and N
    more". A single row renders as its own message."""
    if len(rows) == 1:
        return render(rows[0], base_url)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.event] = counts.get(r.event, 0) + 1
    parts = []
    for event in events.EVENTS:
        n = counts.get(event, 0)
        if n:
            one, many = _DIGEST_WORDS[event]
            parts.append(f"{n} {one if n == 1 else many}")
    title = ", ".join(parts)
    sections = []
    for event in events.EVENTS:
        group = [r for r in rows if r.event == event]
        if not group:
            continue
        one, many = _DIGEST_WORDS[event]
        head = f"**{len(group)} {one if len(group) == 1 else many}:**"
        lines = [_digest_line(r) for r in group[:DIGEST_LINES]]
        if len(group) > DIGEST_LINES:
            lines.append(f"- … and {len(group) - DIGEST_LINES} more")
        sections.append("\n".join([head, *lines]))
    sections.append(f"{len(rows)} events came together, so they are sent as one message.")
    worst = max((TYPE_OF_EVENT.get(r.event, INFO) for r in rows), key=_SEVERITY.index)
    return Message(title=title, body="\n\n".join(sections), notify_type=worst)
