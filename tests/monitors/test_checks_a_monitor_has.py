"""Which checks a monitor has is one pure function of its type, scheme and host, and the
plan of a monitors file follows it: a monitor of a scheme without a certificate check is
planned, resolved and compared with its one check."""

from __future__ import annotations

import pytest

from engine.monitors.checkset import checks_of, enabled_on_create
from engine.monitors.file import entry_of, validate_document
from engine.monitors.plan import CheckSettings, CurrentMonitor, MonitorSpec, plan
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Plan
from tests.support.schemes import echo_registered

PLAN = Plan(allowed_intervals=[30, 60, 3600], monitor_limit=100)


def test_http_and_https_monitors_have_uptime_and_certificate_checks() -> None:
    assert checks_of("https", "192.0.2.1") == ("uptime", "certificate_health")
    assert checks_of("http", "192.0.2.1") == ("uptime", "certificate_health")
    assert checks_of("gopher", "192.0.2.1") == ("uptime",)  # not registered: no TLS
    assert enabled_on_create("certificate_health", "https")
    assert not enabled_on_create("certificate_health", "http")
    assert enabled_on_create("uptime", "http")


def test_host_names_under_a_registrable_domain_have_a_domain_check() -> None:
    assert checks_of("https", "www.example.com") == (
        "uptime", "certificate_health", "domain_expiry")
    assert checks_of("http", "shop.example.co.uk") == (
        "uptime", "certificate_health", "domain_expiry")
    assert checks_of("gopher", "example.com") == ("uptime", "domain_expiry")
    assert checks_of("dns", "ns1.example.net") == ("uptime",)  # the server, not the name
    for host in ("192.0.2.1", "2001:db8::1", "localhost", "co.uk", "intranet"):
        assert "domain_expiry" not in checks_of("https", host), host
    assert enabled_on_create("domain_expiry", "http")


def test_a_scheme_without_a_certificate_check(monkeypatch: pytest.MonkeyPatch) -> None:
    with echo_registered(monkeypatch):
        assert checks_of("echo", "127.0.0.1") == ("uptime",)
        assert enabled_on_create("uptime", "echo")
        [spec] = validate_document({"monitors": [
            {"url": "echo://127.0.0.1:7", "uptime": {"interval": 60}}]}, PLAN)
        assert spec.checks == {"uptime": CheckSettings(60, 0, True)}
        assert entry_of(spec) == {
            "url": "echo://127.0.0.1:7", "alias": "127.0.0.1",
            "uptime": {"interval": 60, "notification_threshold": 0, "recovery_threshold": 0,
                       "enabled": True}}
        with pytest.raises(ValidationFailed) as exc:
            validate_document({"monitors": [
                {"url": "echo://127.0.0.1:7", "certificate_health": {}}]}, PLAN)
        assert exc.value.errors == {"monitors[0].certificate_health": [
            "A echo:// monitor has no certificate_health check."]}

        have = CurrentMonitor(1, "ident", {"uptime": 10}, spec)
        assert plan([have], [spec], prune=True).unchanged == 1
        [https] = validate_document({"monitors": [{"url": "https://127.0.0.1:7/"}]}, PLAN)
        moved = plan([have], [MonitorSpec(None, "echo://127.0.0.1:7", "https", "127.0.0.1",
                                          "7", "127.0.0.1", https.checks)], prune=False)
        [update] = moved.updates
        assert update.changes == ("uptime.interval", "certificate_health")
        # The check it gains is created as the API creates it: enabled for https.
        assert update.desired.checks["certificate_health"].enabled is True
