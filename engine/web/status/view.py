"""The status page's view model: pure functions from :class:`engine.db.public.StatusPageData`
to :class:`StatusView` (HTML) and to the JSON body, testable without a database or server.

:mod:`engine.web.status.history` adds the day lines and the phase chart to a built view;
:mod:`engine.web.status.page` renders it and serves both forms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from engine.db.public import (
    BUCKET_SECONDS,
    RESPONSE_WINDOW,
    DayBar,
    PublicCheck,
    PublicOutage,
    ResponseBucket,
    StatusPageData,
)
from engine.domain.stats import uptime_percentage
from engine.domain.timefmt import fmt
from engine.domain.words import plural
from engine.kinds.registry import SHOWN
from engine.kinds.shown import duration_text, meta_text, parse_timestamp, status_code
from engine.web.status.notice import MaintenanceNotice
from engine.web.status.public_text import (
    CONFIRMED_WORDS,
    REASONS,
    confirmed_by,
    public_reason,
    reason_of,
)

UPTIME = "uptime"
HEARTBEAT = "heartbeat"  # a heartbeat monitor's one check stands where uptime would
CERTIFICATE = "certificate_health"
DOMAIN = "domain_expiry"

def shown_checks(checks: Mapping[str, PublicCheck]) -> dict[str, PublicCheck]:
    """The checks a page shows: all but a disabled certificate check, which shows nothing
    (no row, no certificate figures; as a paused check it never sets the overall state)."""
    return {k: c for k, c in checks.items() if c.is_enabled or k != CERTIFICATE}


@dataclass(frozen=True, slots=True)
class OverallState:
    """``key`` is one of operational, degraded, outage, pending, paused (a stable value for
    the JSON twin and the CSS class); ``headline`` and ``detail`` are the words shown."""

    key: str
    headline: str
    detail: str | None
    icon: str


def overall_state(
    checks: Mapping[str, PublicCheck], ongoing: PublicOutage | None = None
) -> OverallState:
    """The monitor's state in one phrase, from its enabled checks.

    Worst first: a confirmed uptime outage; then anything less than healthy (a slow or 4xx
    site, an unconfirmed failure being verified, an invalid certificate); then checks that
    have not run yet; else operational. Paused when no check is enabled, or when only the
    certificate is (nothing says whether the site is up).
    """
    active = {k: c for k, c in checks.items() if c.is_enabled and c.status != "paused"}
    if not active:
        return OverallState("paused", "Paused", "Monitoring of this site is paused.", "II")
    up = active.get(UPTIME) or active.get(HEARTBEAT)
    cert = active.get(CERTIFICATE)
    if up is not None and up.status == "down":
        return OverallState("outage", "Outage", _outage_detail(up, ongoing), "\u2715")
    if up is not None and up.status == "failing":
        return OverallState(
            "degraded", "Possible outage",
            "A check failed and is being confirmed by a second check.", "!")
    if up is not None and up.status == "degraded":
        return OverallState(
            "degraded", "Degraded performance",
            "The site responds, but slowly or with an error status.", "!")
    if cert is not None and cert.status in ("down", "failing", "degraded"):
        return OverallState(
            "degraded", "Certificate problem",
            "The site's TLS certificate failed validation.", "!")
    domain = active.get(DOMAIN)
    if domain is not None and domain.status == "down":
        return OverallState(
            "degraded", "Domain problem",
            "The site's domain has expired or is on hold at its registry.", "!")
    if up is None:
        # Only the certificate is watched: whether the site answers is not known.
        return OverallState("paused", "Paused", "Uptime monitoring of this site is paused.",
                            "II")
    if any(c.status == "pending" for c in active.values()):
        return OverallState("pending", "Checking\u2026", "The first checks are on their way.",
                            "\u2026")
    return OverallState("operational", "All systems operational", None, "\u2713")


def _outage_detail(up: PublicCheck, ongoing: PublicOutage | None) -> str:
    """The banner's sentence for a confirmed outage, by its reason (public_text.py)."""
    if ongoing is not None:
        reason = reason_of(ongoing.error, ongoing.http_status_code)
        since = fmt(ongoing.started_at)
    else:
        reason = reason_of(up.error, status_code(up.meta))
        since = None
    sentence = reason.outage if reason is not None else "The site has not been responding"
    return f"{sentence} since {since} UTC." if since else f"{sentence}."


# --- numbers as words ------------------------------------------------------------------------


def percent_text(value: float) -> str:
    """A percentage for people: ``100%`` only when perfect; otherwise two decimals rounded
    down, so 99.999 reads 99.99% and never a flattering 100.00%."""
    if value >= 100.0:
        return "100%"
    # round() first: 99.29 * 100 is 9928.999... in binary floating point.
    return f"{math.floor(round(max(0.0, value) * 100, 6)) / 100:.2f}%"


def ms_text(ms: float) -> str:
    """``230 ms`` below a second, ``1.25 s`` above."""
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.3g} s"


@dataclass(frozen=True, slots=True)
class DayLine:
    anchor: str  # the element id the day's bar links to
    text: str


@dataclass(frozen=True, slots=True)
class Segment:
    cls: str
    y: float
    h: float


@dataclass(frozen=True, slots=True)
class PhaseBar:
    x: int
    w: int
    segments: list[Segment]
    title: str


@dataclass(frozen=True, slots=True)
class PhaseChartView:
    width: int
    height: int
    bars: list[PhaseBar]
    y_labels: list[str]
    x_labels: list[str]
    legend: list[tuple[str, str]]  # (css class, words)
    label: str
    summary: str


# --- view model ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckView:
    kind: str
    title: str
    status_text: str
    tone: str
    # (label, value, is_user_string): user strings get dir="auto" and wrapping.
    facts: list[tuple[str, str, bool]]
    error: str | None


@dataclass(frozen=True, slots=True)
class Stat:
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    w: float
    cls: str
    title: str
    anchor: str = ""  # id of the day's detail line (engine/web/status/history.py)


@dataclass(frozen=True, slots=True)
class BarsView:
    width: int
    height: int
    items: list[Bar]
    label: str
    summary: str
    first_label: str
    uptime_label: str


@dataclass(frozen=True, slots=True)
class Shade:
    x: float
    w: float
    title: str


@dataclass(frozen=True, slots=True)
class ChartView:
    width: int
    height: int
    lines: list[str]
    shades: list[Shade]
    grid_x: list[int]
    grid_y: list[int]
    x_labels: list[str]
    y_labels: list[str]
    label: str
    summary: str


@dataclass(frozen=True, slots=True)
class OutageView:
    started: str
    ended: str | None
    duration: str
    cause: str
    confirmed_by: str | None = None  # public_text.confirmed_by


@dataclass(frozen=True, slots=True)
class StatusView:
    alias: str
    host: str
    state: OverallState
    stats: list[Stat]
    checks: list[CheckView]
    bars: BarsView
    chart: ChartView | None
    outages: list[OutageView]
    updated: str
    # What confirmed the outages listed, in words ("a second check from the same region").
    confirmed: str = ""
    # Maintenance windows on now or coming (engine/web/status/notice.py).
    maintenance: list[MaintenanceNotice] = field(default_factory=list)
    # Added by engine.web.status.history.enrich.
    day_lines: list[DayLine] = field(default_factory=list)
    phases: PhaseChartView | None = None


_BAR_STEP = 10   # viewBox units per day; the SVG is stretched to the card width
_BAR_GAP = 2
_BAR_HEIGHT = 40


def day_class(uptime: float | None) -> str:
    """The colour class of a day: full (100%), minor (99% up to 100%), major, or none."""
    if uptime is None:
        return "d-none"
    if uptime >= 100.0:
        return "d-ok"
    if uptime >= 99.0:
        return "d-minor"
    return "d-major"


def day_anchor(day: date) -> str:
    """The id of a day's detail line, which its bar links to."""
    return f"day-{day.isoformat()}"


def bars_view(days: list[DayBar]) -> BarsView:
    """One bar per day, oldest left, each with a tooltip giving its date and uptime, plus a
    spoken summary: overall uptime of the days with data and every day with downtime."""
    items: list[Bar] = []
    bad: list[str] = []
    no_data = 0
    outage_s = 0.0
    enabled_s = 0.0
    probes = 0
    for i, d in enumerate(days):
        uptime = d.uptime
        date_text = d.day.isoformat()
        if uptime is None:
            title = f"{date_text}: no data"
            no_data += 1
        else:
            title = f"{date_text}: {percent_text(uptime)} uptime"
            if d.outage_seconds > 0:
                title += f", down {duration_text(d.outage_seconds)}"
                bad.append(f"{date_text} ({percent_text(uptime)})")
            outage_s += d.outage_seconds
            enabled_s += d.enabled_seconds
            probes += d.probes
        items.append(Bar(x=i * _BAR_STEP, w=_BAR_STEP - _BAR_GAP, cls=day_class(uptime),
                         title=title, anchor=day_anchor(d.day)))
    overall = uptime_percentage(outage_s, enabled_s, probes)
    with_data = len(days) - no_data
    if with_data == 0:
        summary = f"No uptime data in the last {len(days)} days."
        uptime_label = "no data yet"
    else:
        summary = f"{percent_text(overall)} uptime over {with_data} days with data."
        summary += (f" Days with downtime: {', '.join(bad)}." if bad
                    else " No downtime on any day.")
        if no_data:
            summary += f" {plural(no_data, 'day')} without data."
        uptime_label = f"{percent_text(overall)} uptime"
    return BarsView(
        width=max(1, len(days)) * _BAR_STEP - _BAR_GAP,
        height=_BAR_HEIGHT,
        items=items,
        label=f"Daily uptime for the last {len(days)} days",
        summary=summary,
        first_label=f"{len(days)} days ago",
        uptime_label=uptime_label,
    )


_CHART_W = 1000
_CHART_H = 180
# Round axis maxima in milliseconds: the chart's top is the first one above the data.
_NICE_MS = (50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 30000, 60000, 120000)


def _nice_max(value: float) -> float:
    for nice in _NICE_MS:
        if value * 1.08 <= nice:
            return float(nice)
    return float(math.ceil(value / 60000) * 60000)


def chart_view(
    buckets: list[ResponseBucket],
    outages: list[PublicOutage],
    now: datetime,
    interval_s: int,
) -> ChartView | None:
    """The last 24 h of 5-minute average response times as SVG geometry, or None without
    data. The line breaks where buckets are missing for longer than the check's rhythm
    explains (an outage, a pause), and confirmed outages in the window are shaded."""
    if not buckets:
        return None
    start = now - RESPONSE_WINDOW
    span = RESPONSE_WINDOW.total_seconds()
    peak = max(b.avg_ms for b in buckets)
    top = _nice_max(peak)

    def x_of(ts: datetime) -> float:
        return round(min(1.0, max(0.0, (ts - start).total_seconds() / span)) * _CHART_W, 1)

    def y_of(ms: float) -> float:
        return round(_CHART_H - min(1.0, ms / top) * _CHART_H, 1)

    # A gap longer than this is missing data, not just a check that runs less often.
    max_gap = max(3 * BUCKET_SECONDS, 2.5 * interval_s)
    segments: list[list[tuple[float, float]]] = []
    prev: datetime | None = None
    for b in buckets:
        centre = b.start + timedelta(seconds=BUCKET_SECONDS / 2)
        point = (x_of(centre), y_of(b.avg_ms))
        if prev is None or (centre - prev).total_seconds() > max_gap:
            segments.append([])
        segments[-1].append(point)
        prev = centre
    lines = []
    for seg in segments:
        if len(seg) == 1:
            # A lone point: a short dash (a circle would be stretched by the viewBox).
            (x, y) = seg[0]
            seg = [(max(0.0, x - 3), y), (min(float(_CHART_W), x + 3), y)]
        lines.append(" ".join(f"{x:g},{y:g}" for x, y in seg))

    shades = []
    for o in outages:
        end = o.ended_at or now
        if end <= start:
            continue
        x0, x1 = x_of(o.started_at), x_of(end)
        ended = f"{fmt(o.ended_at)} UTC" if o.ended_at else "ongoing"
        shades.append(Shade(x=x0, w=round(max(2.0, x1 - x0), 1),
                            title=f"Outage from {fmt(o.started_at)} UTC to {ended}"))

    samples = sum(b.samples for b in buckets)
    mean = sum(b.avg_ms * b.samples for b in buckets) / samples
    fastest = min(b.avg_ms for b in buckets)
    slowest = max(buckets, key=lambda b: b.avg_ms)
    summary = (
        f"Average response time over the last 24 hours: {ms_text(mean)} from {samples} "
        f"checks. 5-minute averages ranged from {ms_text(fastest)} to {ms_text(slowest.avg_ms)}"
        f" (at {fmt(slowest.start)} UTC)."
    )
    if shades:
        summary += f" {plural(len(shades), 'outage')} in this period."
    quarters = [start + RESPONSE_WINDOW * (i / 4) for i in range(5)]
    return ChartView(
        width=_CHART_W,
        height=_CHART_H,
        lines=lines,
        shades=shades,
        grid_x=[_CHART_W * i // 4 for i in (1, 2, 3)],
        grid_y=[0, _CHART_H // 2],
        x_labels=[q.strftime("%H:%M") for q in quarters[:-1]] + ["now"],
        y_labels=[ms_text(top), ms_text(top / 2), "0 ms"],
        label=f"Response time over the last 24 hours, average {ms_text(mean)}",
        summary=summary,
    )


def _cause(o: PublicOutage, assertions: Sequence[Mapping[str, Any]] = ()) -> str:
    """An outage's cause in a visitor's words, never its error text (public_text.py)."""
    reason = public_reason(o.error, o.http_status_code, assertions)
    return reason[1] if reason is not None else "No response"


def outage_views(
    outages: list[PublicOutage], assertions: Sequence[Mapping[str, Any]] = ()
) -> list[OutageView]:
    return [
        OutageView(
            started=fmt(o.started_at) or "",
            ended=fmt(o.ended_at),
            duration=duration_text(o.duration_seconds),
            cause=_cause(o, assertions),
            confirmed_by=confirmed_by(o.detected_by, o.verified_via),
        )
        for o in outages
    ]


def confirmed_text(outages: list[OutageView]) -> str:
    """What confirmed the outages shown: one kind of confirmation for all of them is named;
    a mix, or rows that do not say, only as a second check."""
    kinds = {o.confirmed_by for o in outages}
    if not kinds:
        return ""
    if kinds == {"same_region", "another_region"}:
        return "Confirmed by a second check from the same or another region"
    only = kinds.pop() if len(kinds) == 1 else None
    return f"Confirmed by {CONFIRMED_WORDS[only]}"


def _check_error(check: PublicCheck, assertions: Sequence[Mapping[str, Any]]) -> str | None:
    return _error_fields(check, assertions)["error"]


def _error_fields(
    check: PublicCheck, assertions: Sequence[Mapping[str, Any]]
) -> dict[str, str | None]:
    """A check's ``error`` in public words and its ``reason`` key, never the owner's text."""
    reason = public_reason(check.error, status_code(check.meta) if check.error else None,
                           assertions)
    return {"error": reason[1] if reason is not None else None,
            "reason": reason[0] if reason is not None else None}


def check_views(
    checks: Mapping[str, PublicCheck], now: datetime,
    assertions: Sequence[Mapping[str, Any]] = (),
) -> list[CheckView]:
    """One row per check, in the kinds' registration order: the kind's label, words,
    facts, and what is wrong in a visitor's words (public_text.py)."""
    out = []
    for kind in SHOWN:
        check = checks.get(kind.name)
        if check is None:
            continue
        words, tone = kind.words.get(check.status, (check.status, "s-idle"))
        out.append(CheckView(kind.name, kind.label, words, tone, kind.status_facts(check, now),
                             _check_error(check, assertions) if check.is_enabled else None))
    return out


def _stats(data: StatusPageData) -> list[Stat]:
    samples = sum(b.samples for b in data.responses)
    mean = (sum(b.avg_ms * b.samples for b in data.responses) / samples) if samples else None
    cert = shown_checks(data.monitor.checks).get(CERTIFICATE)
    valid_to = parse_timestamp(cert.meta.get("valid_to")) if cert is not None else None
    if valid_to is None:
        expiry = "Unknown"
    else:
        days = math.floor((valid_to - data.now).total_seconds() / 86400)
        expiry = "Expired" if days < 0 else plural(days, "day")
    stats = [
        Stat("Uptime, last 30 days", percent_text(data.uptime_30d)),
        Stat("Average response, 24 h", ms_text(mean) if mean is not None else "No data"),
    ]
    if cert is not None:
        stats.append(Stat("Certificate expires in", expiry))
    return stats


_NO_RESPONSE = REASONS["no_response"]


def _ongoing(outages: list[PublicOutage]) -> PublicOutage | None:
    return next((o for o in outages if o.ended_at is None), None)


def build_view(data: StatusPageData) -> StatusView:
    """Everything the template shows, as plain strings and numbers."""
    checks = data.monitor.checks
    up = checks.get(UPTIME) or checks.get(HEARTBEAT)
    assertions = data.monitor.assertions
    outages = outage_views(data.outages, assertions)
    return StatusView(
        alias=data.monitor.alias,
        host=data.monitor.host,
        state=overall_state(checks, _ongoing(data.outages)),
        stats=_stats(data),
        checks=check_views(shown_checks(checks), data.now, assertions),
        bars=bars_view(data.days),
        chart=chart_view(data.responses, data.outages, data.now,
                         up.interval if up is not None else BUCKET_SECONDS),
        outages=outages,
        updated=fmt(data.now) or "",
        confirmed=confirmed_text(outages),
    )


def build_json(data: StatusPageData) -> dict[str, Any]:
    """The JSON twin: the same facts for badges and embeds. Timestamps are UTC
    ``YYYY-MM-DD HH:MM:SS``; ``state`` is one of operational, degraded, outage, pending,
    paused; a ``days`` entry's ``uptime_percentage`` is null for a day without data. A
    check's ``error`` and an outage's ``cause`` are public words with a ``reason`` key
    (public_text.REASONS); an outage's ``confirmed_by`` is another_region, same_region or
    null."""
    checks = data.monitor.checks
    state = overall_state(checks, _ongoing(data.outages))
    out_checks: dict[str, Any] = {}
    for kind, check in checks.items():
        entry: dict[str, Any] = {
            "status": check.status,
            "is_enabled": check.is_enabled,
            "last_check_at": fmt(check.last_check_at),
            **_error_fields(check, data.monitor.assertions),
        }
        shown = SHOWN.get(kind)
        if shown is not None:
            entry.update(shown.status_fields(check))
        out_checks[kind] = entry
    cert = shown_checks(checks).get(CERTIFICATE)
    valid_to = parse_timestamp(cert.meta.get("valid_to")) if cert is not None else None
    samples = sum(b.samples for b in data.responses)
    return {
        "identifier": data.monitor.identifier,
        "alias": data.monitor.alias,
        "host": data.monitor.host,
        "state": state.key,
        "state_text": state.headline,
        "checks": out_checks,
        "uptime_30d": data.uptime_30d,
        "average_response_time_24h_ms": (
            round(sum(b.avg_ms * b.samples for b in data.responses) / samples, 3)
            if samples else None),
        "certificate": {
            "issuer": meta_text(cert.meta, "issuer") if cert is not None else None,
            "valid_to": fmt(valid_to),
        },
        "outages": [
            {
                "started_at": fmt(o.started_at),
                "ended_at": fmt(o.ended_at),
                "duration_seconds": o.duration_seconds,
                "http_status_code": o.http_status_code,
                "reason": (reason_of(o.error, o.http_status_code) or _NO_RESPONSE).key,
                "cause": _cause(o, data.monitor.assertions),
                "confirmed_by": confirmed_by(o.detected_by, o.verified_via),
            }
            for o in data.outages
        ],
        "days": [{"date": d.day.isoformat(), "uptime_percentage": d.uptime} for d in data.days],
        "generated_at": fmt(data.now),
    }


