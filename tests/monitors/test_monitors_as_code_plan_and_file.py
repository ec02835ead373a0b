"""The pure parts of monitors as code: how a file's entries match an account's monitors
(engine.monitors.plan), and the file itself (engine.monitors.file): validation, TOML written and
read back, and the lines errors point at."""

from __future__ import annotations

from typing import Any

import pytest

from engine.monitors.file import (
    LineMap,
    export_document,
    parse_toml,
    render_toml,
    validate_document,
)
from engine.monitors.plan import CheckSettings, CurrentMonitor, MonitorSpec, plan
from engine.runtime.errors import ValidationFailed
from engine.runtime.settings import Plan

UP = CheckSettings(30, 0, True)
CERT = CheckSettings(3600, 0, True)


def spec(url: str, key: str | None = None, alias: str | None = None,
         uptime: CheckSettings = UP) -> MonitorSpec:
    host = url.split("/")[2]
    return MonitorSpec(key, url, "https", host, "", alias or host,
                       {"uptime": uptime, "certificate_health": CERT})


def current(id_: int, url: str, key: str | None = None) -> CurrentMonitor:
    return CurrentMonitor(id_, f"ident{id_:07d}", ids(100 + id_, 200 + id_), spec(url, key))


def ids(uptime: int, certificate: int) -> dict[str, int]:
    return {"uptime": uptime, "certificate_health": certificate}


def test_keys_match_first_then_urls_and_a_key_can_be_given_to_a_monitor() -> None:
    have = [current(1, "https://a.example/"), current(2, "https://b.example/", key="bee"),
            current(3, "https://c.example/"), current(4, "https://d.example/")]
    want = [
        spec("https://b2.example/", key="bee"),   # the key wins over the URL: an update
        spec("https://a.example/"),               # by URL: unchanged
        spec("https://c.example/", key="sea"),    # adopts the unkeyed monitor of its URL
        spec("https://e.example/"),               # new
    ]
    p = plan(have, want, prune=False)
    assert [(u.index, u.current.id, u.changes) for u in p.updates] == [
        (0, 2, ("url", "alias")), (2, 3, ("key",))]
    assert p.updates[0].host_changed and p.updates[0].url_changed
    assert p.unchanged == 1 and [i for i, _ in p.creates] == [3]
    assert p.deletes == [] and p.kept == 1
    pruned = plan(have, want, prune=True)
    assert [m.id for m in pruned.deletes] == [4] and pruned.kept == 0


def test_a_shared_url_matches_the_unkeyed_monitor_first_and_each_monitor_once() -> None:
    have = [current(1, "https://a.example/", key="old"), current(2, "https://a.example/"),
            current(3, "https://a.example/")]
    want = [spec("https://a.example/"), spec("https://a.example/", key="new")]
    p = plan(have, want, prune=True)
    assert p.unchanged == 1  # entry 0 takes monitor 2, unkeyed and lowest id
    assert [(u.index, u.current.id, u.changes) for u in p.updates] == [(1, 3, ("key",))]
    assert [m.id for m in p.deletes] == [1]  # "old" is not in the file


def test_every_field_that_differs_is_named() -> None:
    before = spec("https://a.example/", key="k", alias="A")
    after = MonitorSpec("k", "https://a.example/x", "https", "a.example", "", "B",
                        {"uptime": CheckSettings(60, 300, False),
                         "certificate_health": CheckSettings(7200, 86400, False)})
    p = plan([CurrentMonitor(1, "i", ids(2, 3), before)], [after], prune=False)
    assert p.updates[0].changes == (
        "url", "alias", "uptime.interval", "uptime.notification_threshold", "uptime.enabled",
        "certificate_health.interval", "certificate_health.expiry_threshold_days",
        "certificate_health.enabled")
    assert not p.updates[0].host_changed


def test_the_limit_counts_creates_and_deletes_and_never_blocks_shrinking() -> None:
    have = [current(i, f"https://h{i}.example/") for i in range(1, 4)]
    grow = plan(have, [spec(f"https://h{i}.example/") for i in range(1, 6)], prune=False)
    assert grow.over_limit(3, 4) == (
        "Applying the file would give the account 5 monitors; its limit is 4.")
    assert grow.over_limit(3, 5) is None
    shrink = plan(have, [spec("https://h1.example/")], prune=True)
    assert shrink.over_limit(3, 0) is None


PLAN = Plan(allowed_intervals=[60, 300, 3600, 86400], monitor_limit=100)


def test_defaults_follow_the_plan_and_values_are_normalised() -> None:
    specs = validate_document({"monitors": [
        {"url": "HTTPS://Shop.Example.COM:443", "alias": "  Shop  ",
         "certificate_health": {"expiry_threshold_days": 7, "enabled": False}},
    ]}, PLAN)
    s = specs[0]
    assert (s.url, s.host, s.alias, s.key) == (
        "https://shop.example.com/", "shop.example.com", "Shop", None)
    assert s.checks["uptime"] == CheckSettings(60, 0, True)  # the plan's shortest: 30 s not allowed
    assert s.checks["certificate_health"] == CheckSettings(3600, 7 * 86400, False)


def test_an_unstated_certificate_check_is_created_as_the_api_creates_it_then_kept() -> None:
    """A file silent on ``certificate_health.enabled`` creates an http monitor's check
    paused (an https one's enabled), and a later apply never toggles it: not when the user
    enabled it by hand, not when an http monitor from before kept it enabled, not when the
    file moves the URL between http and https. Stating ``enabled`` wins."""
    silent, on, off = validate_document({"monitors": [
        {"url": "http://plain.example/"},
        {"url": "http://on.example/", "certificate_health": {"enabled": True}},
        {"url": "https://off.example/", "certificate_health": {"enabled": False}},
    ]}, PLAN)
    assert silent.checks["certificate_health"].enabled is None
    created = plan([], [silent, on, off, *validate_document(
        {"monitors": [{"url": "https://secure.example/"}]}, PLAN)], prune=False)
    assert [s.checks["certificate_health"].enabled for _, s in created.creates] == [
        False, True, False, True]

    def have(url: str, enabled: bool) -> CurrentMonitor:
        [s] = validate_document({"monitors": [
            {"url": url, "certificate_health": {"enabled": enabled}}]}, PLAN)
        return CurrentMonitor(1, "i", ids(2, 3), s)

    for current_url, enabled, file_url in (
        ("http://plain.example/", True, "http://plain.example/"),    # enabled by hand
        ("http://plain.example/", False, "http://plain.example/"),   # as created
        ("https://plain.example/", True, "http://plain.example/"),   # moved to http
        ("http://plain.example/", False, "https://plain.example/"),  # moved to https
    ):
        [entry] = validate_document({"monitors": [{"url": file_url}]}, PLAN)
        p = plan([have(current_url, enabled)], [entry], prune=False)
        changed = p.updates[0].changes if p.updates else ()
        assert "certificate_health.enabled" not in changed, (current_url, enabled, file_url)
        if p.updates:
            assert p.updates[0].desired.checks["certificate_health"].enabled is enabled
    [stated] = validate_document({"monitors": [
        {"url": "http://plain.example/", "certificate_health": {"enabled": False}}]}, PLAN)
    p = plan([have("http://plain.example/", True)], [stated], prune=False)
    assert p.updates[0].changes == ("certificate_health.enabled",)


@pytest.mark.parametrize(("doc", "errors"), [
    ({"monitors": [{"url": "https://a.example/"}, {"url": "https://A.example"}]},
     {"monitors[1].url": ["The url https://a.example/ is already named by monitors[0]; give"
                          " each monitor of the same URL its own key."]}),
    ({"monitors": [{"url": "https://a.example/", "key": "k"},
                   {"url": "https://b.example/", "key": "k"}]},
     {"monitors[1].key": ["The key 'k' is already used by monitors[0]."]}),
    ({"monitors": [{"url": "https://a.example/", "uptime": {"interval": 30}}]},
     {"monitors[0].uptime.interval": ["The interval must be one of: 60, 300, 3600, 86400."]}),
    ({"monitors": [{"url": "https://a.example/", "uptime": {"expiry_threshold_days": 3}}]},
     {"monitors[0].uptime.expiry_threshold_days": [
         "Unknown key 'expiry_threshold_days' in uptime; known: interval,"
         " notification_threshold, recovery_threshold, enabled."]}),
    ({"monitors": [{"url": "https://a.example/", "certificate_health": {"enabled": "yes"}}]},
     {"monitors[0].certificate_health.enabled": ["The enabled must be true or false."]}),
    ({"monitors": [{"url": "https://a.example/", "uptime": [1]}]},
     {"monitors[0].uptime": ["The uptime entry must be a table."]}),
    ({"monitors": {"url": "x"}, "version": 2},
     {"monitors": ["The monitors entry must be a list of monitors."],
      "version": ["Unknown key 'version'; the file holds only 'monitors' and 'heartbeats'."]}),
    ({"monitors": ["https://a.example/"]},
     {"monitors[0]": ["Each monitor must be a table (an object)."]}),
])
def test_invalid_documents_name_every_error(doc: object, errors: dict[str, list[str]]) -> None:
    with pytest.raises(ValidationFailed) as exc:
        validate_document(doc, PLAN)
    assert exc.value.errors == errors


def test_shared_check_tables_are_read_by_value_and_type() -> None:
    # Two entries with equal-looking tables, one of them wrong only in type (1 is not true):
    # the cache of check tables must not hand the first's verdict to the second.
    with pytest.raises(ValidationFailed) as exc:
        validate_document({"monitors": [
            {"url": "https://a.example/", "uptime": {"enabled": True}},
            {"url": "https://b.example/", "uptime": {"enabled": 1}},
        ]}, PLAN)
    assert list(exc.value.errors) == ["monitors[1].uptime.enabled"]


def test_toml_written_reads_back_and_errors_find_their_lines() -> None:
    odd = 'say "hi"\\'
    have = [CurrentMonitor(1, "abc-_DEF123", ids(10, 11), spec("https://a.example/", alias=odd)),
            CurrentMonitor(2, "-xyz_987654", ids(12, 13), spec("https://a.example/")),
            CurrentMonitor(3, "qqqqqqqqqqqq", ids(14, 15), spec("https://b.example/", key="bee"))]
    doc = export_document(have)
    text = render_toml(doc, "exported\nby a test")
    assert text.startswith("# exported\n# by a test\n")
    assert parse_toml(text) == doc
    # The shared URL is told apart by identifiers as keys; the file is valid as it stands.
    assert [m.get("key") for m in doc["monitors"]] == ["abc-_DEF123", "-xyz_987654", "bee"]
    specs = validate_document(doc, Plan())
    assert [s.alias for s in specs] == ['say "hi"\\', "a.example", "b.example"]

    lines = LineMap.of(text)
    assert text.splitlines()[lines.line_of("monitors[2].key") - 1] == 'key = "bee"'
    assert text.splitlines()[lines.line_of("monitors[1].uptime.interval") - 1] == \
        "interval = 30"
    assert text.splitlines()[lines.line_of("monitors[1].uptime.colour") - 1] == \
        "[monitors.uptime]"  # an unknown key's table, when the key itself is not there
    assert lines.line_of("monitors[7].url") is None and lines.line_of("file") is None


def test_text_that_is_not_toml_names_its_line() -> None:
    with pytest.raises(ValidationFailed) as exc:
        parse_toml('[[monitors]]\nurl = "https://a.example/\n')
    assert "line 2" in exc.value.errors["file"][0]


def test_a_request_is_compared_with_its_secrets_decrypted_and_masks_kept() -> None:
    from dataclasses import replace

    from cryptography.fernet import Fernet

    from engine.monitors import requests as requestconfig
    from engine.runtime.secretbox import SecretBox

    box = SecretBox(Fernet.generate_key())
    given = {"method": "GET", "headers": [["Authorization", "Bearer a"], ["Accept", "x"]],
             "body": None, "follow_redirects": True}
    stored = requestconfig.to_stored(given, box, None)
    assert "Bearer a" not in str(stored)

    def same(s: Any, d: Any) -> bool:
        return requestconfig.same_request(s, d, box)

    masked = {**given, "headers": [["authorization", "********"], ["Accept", "x"]]}
    named = {**given, "headers": [["Authorization", "********"], ["Accept", "x"]]}
    other = {**given, "headers": [["Authorization", "Bearer b"], ["Accept", "x"]]}
    assert same(stored, given) and same(stored, named)  # plain equal, or masked: kept
    assert not same(stored, masked)  # the name's case changes what is sent
    assert not same(stored, other) and not same(stored, None) and not same(None, given)
    have = [CurrentMonitor(1, "i", ids(2, 3), replace(spec("https://a.example/"), request=stored))]
    assert plan(have, [replace(spec("https://a.example/"), request=named)], prune=False,
                same_request=same).unchanged == 1
    [update] = plan(have, [replace(spec("https://a.example/"), request=other,
                                   assertions=[{"source": "body"}])],
                    prune=False, same_request=same).updates
    assert update.changes == ("request", "assertions")
    assert requestconfig.unkept_masks(named, None) == {"request.headers.Authorization": [
        '"********" keeps a stored value, and this monitor has no Authorization header.']}
