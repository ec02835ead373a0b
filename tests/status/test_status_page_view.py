"""The status page's view model (engine/web/status/page.py), pure: words for states and
numbers, the 90-day bars and the response-time chart geometry."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from engine.db.public import DayBar, PublicCheck, PublicOutage, ResponseBucket
from engine.web.status.view import (
    bars_view,
    chart_view,
    check_views,
    day_class,
    duration_text,
    ms_text,
    overall_state,
    percent_text,
    shown_checks,
)

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _check(kind: str, status: str, enabled: bool = True) -> PublicCheck:
    return PublicCheck(1, kind, status, None, 60, enabled, None, {})


@pytest.mark.parametrize(
    ("uptime", "certificate", "key", "headline"),
    [
        ("ok", "ok", "operational", "All systems operational"),
        ("down", "ok", "outage", "Outage"),
        ("down", "down", "outage", "Outage"),
        ("failing", "ok", "degraded", "Possible outage"),
        ("degraded", "ok", "degraded", "Degraded performance"),
        ("ok", "down", "degraded", "Certificate problem"),
        ("pending", "pending", "pending", "Checking\u2026"),
        ("ok", "pending", "pending", "Checking\u2026"),
        ("paused", "paused", "paused", "Paused"),
        ("paused", "ok", "paused", "Paused"),
        ("paused", "down", "degraded", "Certificate problem"),
        ("ok", "paused", "operational", "All systems operational"),
    ],
)
def test_overall_state(uptime: str, certificate: str, key: str, headline: str) -> None:
    checks = {
        "uptime": _check("uptime", uptime, uptime != "paused"),
        "certificate_health": _check("certificate_health", certificate,
                                     certificate != "paused"),
    }
    state = overall_state(checks)
    assert (state.key, state.headline) == (key, headline)


def test_a_disabled_certificate_check_shows_nothing() -> None:
    """Not even what it read before it was disabled; a disabled uptime check still shows
    as paused."""
    old = PublicCheck(2, "certificate_health", "paused", None, 3600, False, NOW,
                      {"issuer": "R11", "valid_to": "2026-01-01 00:00:00"})
    checks = {"uptime": _check("uptime", "ok"), "certificate_health": old}
    assert list(shown_checks(checks)) == ["uptime"]
    assert [v.kind for v in check_views(shown_checks(checks), NOW)] == ["uptime"]
    assert overall_state(checks).key == "operational"
    paused_up = {"uptime": _check("uptime", "paused", False), "certificate_health": old}
    assert list(shown_checks(paused_up)) == ["uptime"]
    enabled = {**checks, "certificate_health": _check("certificate_health", "ok")}
    assert list(shown_checks(enabled)) == ["uptime", "certificate_health"]


def test_outage_detail_names_its_start() -> None:
    checks = {"uptime": _check("uptime", "down")}
    ongoing = PublicOutage(NOW - timedelta(minutes=5), None, 300, 503, "HTTP 503")
    assert "since 2026-03-10 11:55:00 UTC" in (overall_state(checks, ongoing).detail or "")


@pytest.mark.parametrize(
    ("value", "text"),
    [(100.0, "100%"), (99.999, "99.99%"), (99.5, "99.50%"), (0.0, "0.00%"), (12.345, "12.34%"),
     (99.29, "99.29%"), (99.999999, "99.99%")],
)
def test_percent_text_never_rounds_up_to_perfect(value: float, text: str) -> None:
    assert percent_text(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0 s"), (42, "42 s"), (60, "1 min"), (312, "5 min 12 s"), (3600, "1 h"),
     (7500, "2 h 5 min"), (273600, "3 d 4 h"), (86400, "1 d")],
)
def test_duration_text(seconds: int, text: str) -> None:
    assert duration_text(seconds) == text


def test_ms_text() -> None:
    assert ms_text(230.4) == "230 ms"
    assert ms_text(1250) == "1.25 s"


def test_day_classes() -> None:
    assert [day_class(v) for v in (None, 100.0, 99.5, 99.0, 98.9)] == [
        "d-none", "d-ok", "d-minor", "d-minor", "d-major"]


def test_bars_have_tooltips_and_a_summary() -> None:
    days = [DayBar(date(2026, 3, 1) + timedelta(days=i), 100, 0, 0.0, 86400.0) for i in range(88)]
    days.append(DayBar(date(2026, 5, 28), 0, 0, 0.0, 86400.0))
    days.append(DayBar(date(2026, 5, 29), 100, 3, 864.0, 86400.0))
    view = bars_view(days)
    assert len(view.items) == 90
    assert view.items[0].title == "2026-03-01: 100% uptime"
    assert view.items[-2].title == "2026-05-28: no data" and view.items[-2].cls == "d-none"
    assert view.items[-1].title == "2026-05-29: 99.00% uptime, down 14 min 24 s"
    assert view.items[-1].cls == "d-minor"
    assert "Days with downtime: 2026-05-29 (99.00%)." in view.summary
    assert "1 day without data." in view.summary
    assert view.width == 898 and view.items[-1].x == 890


def test_bars_without_any_data() -> None:
    view = bars_view([DayBar(date(2026, 3, 1), 0, 0, 0.0, 0.0)] * 90)
    assert view.summary == "No uptime data in the last 90 days."


def _bucket(minutes_ago: int, ms: float) -> ResponseBucket:
    start = NOW - timedelta(minutes=minutes_ago)
    return ResponseBucket(start.replace(minute=start.minute - start.minute % 5), ms, ms, 5)


def test_chart_scales_to_a_round_maximum_and_labels_axes() -> None:
    buckets = [_bucket(m, 180.0 + m % 40) for m in range(1440, 0, -5)]
    chart = chart_view(buckets, [], NOW, 60)
    assert chart is not None
    assert chart.y_labels == ["250 ms", "125 ms", "0 ms"]
    assert chart.x_labels == ["12:00", "18:00", "00:00", "06:00", "now"]
    assert len(chart.lines) == 1
    points = chart.lines[0].split()
    assert len(points) == len(buckets)
    xs = [float(p.split(",")[0]) for p in points]
    ys = [float(p.split(",")[1]) for p in points]
    assert xs == sorted(xs) and 0 <= min(xs) and max(xs) <= chart.width
    assert all(0 <= y <= chart.height for y in ys)
    assert "Average response time over the last 24 hours" in chart.summary


def test_chart_breaks_the_line_across_missing_data_and_shades_outages() -> None:
    early = [_bucket(m, 200.0) for m in range(1200, 900, -5)]
    late = [_bucket(m, 200.0) for m in range(600, 0, -5)]
    lone = [_bucket(700, 200.0)]
    outage = PublicOutage(NOW - timedelta(minutes=890), NOW - timedelta(minutes=610), 16800,
                          None, "timeout")
    chart = chart_view(early + lone + late, [outage], NOW, 60)
    assert chart is not None
    assert len(chart.lines) == 3
    # The lone bucket is drawn as a short dash, not a single (invisible) point.
    assert len(chart.lines[1].split()) == 2
    assert len(chart.shades) == 1 and "Outage from" in chart.shades[0].title
    assert "1 outage in this period." in chart.summary


def test_a_check_running_hourly_is_one_line() -> None:
    buckets = [_bucket(m, 300.0) for m in range(1380, 0, -60)]
    chart = chart_view(buckets, [], NOW, 3600)
    assert chart is not None and len(chart.lines) == 1


def test_no_chart_without_data() -> None:
    assert chart_view([], [], NOW, 60) is None
