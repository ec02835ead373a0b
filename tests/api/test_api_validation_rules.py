"""The validation functions alone: every rule of decisions.md "Monitors", without a server."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.monitors import validation as v
from engine.runtime.errors import BlockedAddress, NotFound, ValidationFailed
from engine.runtime.settings import Plan
from engine.web.api import monitor_openapi

PLAN = Plan()
SMALL = Plan(allowed_intervals=[300, 900, 7200], monitor_limit=2)


def errors_of(fn: Any, *args: Any, **kw: Any) -> dict[str, list[str]]:
    with pytest.raises(ValidationFailed) as info:
        fn(*args, **kw)
    return info.value.errors


# --- path ids ----------------------------------------------------------------------------


@pytest.mark.parametrize("raw,expected", [("1", 1), ("42", 42), (str(2**63 - 1), 2**63 - 1)])
def test_ids_that_can_exist_parse(raw: str, expected: int) -> None:
    assert v.parse_id(raw) == expected


@pytest.mark.parametrize("raw", [
    "0", "-1", "1.5", "1e3", "abc", "", " 1", "01", "+1", "0x10", str(2**63),
    "99999999999999999999", "\uff11", "1/", "NaN",
])
def test_ids_that_cannot_exist_are_not_found(raw: str) -> None:
    with pytest.raises(NotFound):
        v.parse_id(raw)


# --- body --------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"", b"  \n"])
def test_an_empty_body_is_an_empty_object(raw: bytes) -> None:
    assert v.parse_body(raw) == {}


@pytest.mark.parametrize("raw", [
    b"not json", b"{", b"\xff\xfe", b'"\\ud800"', b"NaN", b"1e400", b"[" * 5000 + b"]" * 5000,
    b'{"a": 1,}',
])
def test_a_body_that_is_not_json_is_a_422_under_body(raw: bytes) -> None:
    assert errors_of(v.parse_body, raw) == {"body": ["The body must be valid JSON."]}


@pytest.mark.parametrize("raw", [b"[]", b'[{"url": "https://x.example"}]', b'"x"', b"1", b"null",
                                 b"true"])
def test_json_that_is_not_an_object_is_a_422_under_body(raw: bytes) -> None:
    assert errors_of(v.parse_body, raw) == {"body": ["The body must be a JSON object."]}


def test_nesting_within_the_limit_still_parses() -> None:
    assert v.parse_body(b'{"a":' + b"[" * 500 + b"]" * 500 + b"}") is not None


# --- URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize("raw,url,host,port", [
    ("https://Example.COM", "https://example.com/", "example.com", ""),
    ("HTTP://example.com:80/", "http://example.com/", "example.com", ""),
    ("https://example.com:443/a", "https://example.com/a", "example.com", ""),
    ("https://example.com:8443/a?b=c&d", "https://example.com:8443/a?b=c&d", "example.com", "8443"),
    ("http://example.com:443/", "http://example.com:443/", "example.com", "443"),
    ("https://example.com/Path/Keeps/Case", "https://example.com/Path/Keeps/Case", "example.com",
     ""),
    ("https://example.com/#frag", "https://example.com/", "example.com", ""),
    ("  https://example.com  ", "https://example.com/", "example.com", ""),
    ("https://example.com.", "https://example.com/", "example.com", ""),
    ("https://example.com:/", "https://example.com/", "example.com", ""),
    ("https://bücher.example/straße", "https://xn--bcher-kva.example/stra%C3%9Fe",
     "xn--bcher-kva.example", ""),
    ("https://my_host.example/", "https://my_host.example/", "my_host.example", ""),
    ("http://127.0.0.1:8080/x", "http://127.0.0.1:8080/x", "127.0.0.1", "8080"),
    ("http://[::1]:8080/", "http://[::1]:8080/", "::1", "8080"),
    ("http://[2001:DB8::1]/", "http://[2001:db8::1]/", "2001:db8::1", ""),
    ("https://example.com/a%20b", "https://example.com/a%20b", "example.com", ""),
])
def test_urls_are_normalised(raw: str, url: str, host: str, port: str) -> None:
    target = v.normalise_url(raw)
    assert (target.url, target.host, target.port) == (url, host, port)
    assert target.scheme == url.split(":", 1)[0]


@pytest.mark.parametrize("raw", [
    "", "   ", "example.com", "//example.com/", "ftp://example.com/", "javascript:alert(1)",
    "file:///etc/passwd", "https://", "https:///path", "http:example.com",
    "https://user:pass@example.com/", "https://user@example.com/",
    "https://example.com:0/", "https://example.com:65536/", "https://example.com:abc/",
    "https://example.com:+80/", "https://exa mple.com/", "https://example.com/a b",
    "https://example.com/\r\nX-Injected: 1", "https://example.com\n/", "https://example.com/\x00",
    "https://a..b/", "https://-a.example/", "https://" + "a" * 64 + ".example/",
    "https://0x7f.1/", "https://2130706433/", "https://127.1/", "https://example.123/",
    "http://[::1/", "http://[fe80::1%25eth0]/", "http://[zz::1]/", "https://exa\\mple.com/",
    "https://example.com" + "/a" * 1100, "https://ex%61mple.com/",
])
def test_bad_urls_are_422_under_url(raw: str) -> None:
    errs = errors_of(v.normalise_url, raw)
    assert list(errs) == ["url"] and len(errs["url"]) == 1


@pytest.mark.parametrize("value", [None, 1, 1.5, True, [], {}, ["https://example.com"]])
def test_a_url_that_is_not_a_string_is_422(value: Any) -> None:
    assert errors_of(v.normalise_url, value) == {"url": ["The url must be a string."]}


def test_the_length_limit_is_2048() -> None:
    base = "https://example.com/"
    assert v.normalise_url(base + "a" * (2048 - len(base))).url.endswith("a")
    assert "url" in errors_of(v.normalise_url, base + "a" * (2049 - len(base)))


def test_webhook_url_errors_are_named_after_their_field() -> None:
    assert list(errors_of(v.normalise_url, "ftp://x", "webhook_url")) == ["webhook_url"]


async def test_the_private_rule_maps_to_422_under_the_field() -> None:
    target = v.normalise_url("https://internal.example/")

    async def blocked(host: str, port: int) -> object:
        raise BlockedAddress("resolves to a non-public address (10.0.0.1)")

    async def unknown(host: str, port: int) -> object:
        raise OSError("Name or service not known")

    async def public(host: str, port: int) -> object:
        assert (host, port) == ("internal.example", 443)
        return ["93.184.216.34"]

    with pytest.raises(ValidationFailed) as info:
        await v.ensure_public_host(target, blocked)
    assert "non-public address" in info.value.errors["url"][0]
    with pytest.raises(ValidationFailed) as info:
        await v.ensure_public_host(target, unknown, "webhook_url")
    assert info.value.errors == {"webhook_url": ["The webhook_url host does not resolve."]}
    await v.ensure_public_host(target, public)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://10.1.2.3/", "http://[::1]/", "http://169.254.169.254/",
    "http://0.0.0.0/", "http://[::ffff:127.0.0.1]/", "http://localhost/",
])
async def test_webhook_urls_to_private_addresses_are_refused(url: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        await v.validate_webhook_url(url, allow_private=False)
    assert list(info.value.errors) == ["webhook_url"]
    allowed = await v.validate_webhook_url(url, allow_private=True)
    assert allowed == v.normalise_url(url, "webhook_url").url


async def test_a_public_literal_passes_the_private_rule() -> None:
    assert await v.validate_webhook_url("https://93.184.216.34/h", allow_private=False) == (
        "https://93.184.216.34/h")


# --- scalars -----------------------------------------------------------------------------


@pytest.mark.parametrize("value,expected", [(60, 60), (60.0, 60)])
def test_integers_accept_integral_numbers(value: Any, expected: int) -> None:
    assert v.validate_interval(value, PLAN) == expected


@pytest.mark.parametrize("value", [True, False, "60", 60.5, None, [60], {"v": 60}, float("inf")])
def test_integers_reject_other_types(value: Any) -> None:
    assert errors_of(v.validate_interval, value, PLAN) == {
        "interval": ["The interval must be an integer."]}


@pytest.mark.parametrize("value", [0, 1, 29, 31, -30, 10**30, 172800])
def test_intervals_outside_the_list_are_422(value: int) -> None:
    assert list(errors_of(v.validate_interval, value, PLAN)) == ["interval"]


def test_the_plan_subset_applies_and_the_message_lists_it() -> None:
    assert v.validate_interval(900, SMALL) == 900
    assert errors_of(v.validate_interval, 30, SMALL) == {
        "interval": ["The interval must be one of: 300, 900, 7200."]}


@pytest.mark.parametrize("value", [0, 15, 30, 60, 120, 300, 600, 900, 1800])
def test_allowed_thresholds(value: int) -> None:
    assert v.validate_threshold(value) == value


@pytest.mark.parametrize("value", [-1, 1, 45, 3600, "0", True, 0.5])
def test_other_thresholds_are_422(value: Any) -> None:
    assert list(errors_of(v.validate_threshold, value)) == ["notification_threshold"]


@pytest.mark.parametrize("value", [0, 1, 30, 365])
def test_expiry_days_in_range(value: int) -> None:
    assert v.validate_expiry_days(value) == value


@pytest.mark.parametrize("value", [-1, 366, "7", 7.5, False])
def test_expiry_days_out_of_range(value: Any) -> None:
    assert list(errors_of(v.validate_expiry_days, value)) == ["expiry_threshold_days"]


@pytest.mark.parametrize("value,expected", [
    ("  Shop  ", "Shop"), ("ß漢字🙂", "ß漢字🙂"),
    ("'; DROP TABLE monitors; --", "'; DROP TABLE monitors; --"),
    ("<script>alert(1)</script>", "<script>alert(1)</script>"), ("a" * 255, "a" * 255),
])
def test_aliases_are_trimmed_and_otherwise_verbatim(value: str, expected: str) -> None:
    assert v.validate_alias(value) == expected


@pytest.mark.parametrize("value", [
    "", "   ", "a" * 256, "a\r\nX-Injected: 1", "a\x00b", "tab\there", "\x85", 5, None, ["a"],
])
def test_bad_aliases_are_422(value: Any) -> None:
    assert list(errors_of(v.validate_alias, value)) == ["alias"]


# --- commands ----------------------------------------------------------------------------


def test_create_requires_url_and_collects_every_field_error() -> None:
    errs = errors_of(v.validate_monitor_create, {
        "alias": "", "interval": 31, "notification_threshold": 7}, PLAN)
    assert set(errs) == {"url", "alias", "interval", "notification_threshold"}
    assert errs["url"] == ["The url field is required."]


def test_create_defaults() -> None:
    cmd = v.validate_monitor_create({"url": "https://example.com", "extra": 1}, PLAN)
    assert cmd.alias == "example.com"
    assert (cmd.interval, cmd.notification_threshold, cmd.certificate_interval) == (30, 0, 3600)


def test_null_optional_fields_mean_absent() -> None:
    cmd = v.validate_monitor_create({"url": "https://example.com", "alias": None,
                                     "interval": None, "notification_threshold": None}, PLAN)
    assert (cmd.alias, cmd.interval, cmd.notification_threshold) == ("example.com", 30, 0)


def test_intervals_of_a_plan_without_30s_and_hourly() -> None:
    cmd = v.validate_monitor_create({"url": "https://example.com"}, SMALL)
    assert (cmd.interval, cmd.certificate_interval) == (300, 7200)
    assert v.certificate_interval(Plan(allowed_intervals=[30, 60])) == 60
    assert v.certificate_interval(Plan(allowed_intervals=[3600])) == 3600


def test_check_update_rules_by_kind() -> None:
    assert v.validate_check_update({}, "uptime", PLAN) == v.CheckUpdate(None, None)
    assert v.validate_check_update(
        {"interval": 60, "notification_threshold": 300}, "uptime", PLAN
    ) == v.CheckUpdate(60, 300)
    assert v.validate_check_update(
        {"interval": 7200, "expiry_threshold_days": 14}, "certificate_health", PLAN
    ) == v.CheckUpdate(7200, 14 * 86400)
    errs = errors_of(v.validate_check_update, {"notification_threshold": 0},
                     "certificate_health", PLAN)
    assert list(errs) == ["notification_threshold"]
    assert "expiry_threshold_days" in errs["notification_threshold"][0]
    errs = errors_of(v.validate_check_update, {"expiry_threshold_days": 3}, "uptime", PLAN)
    assert list(errs) == ["expiry_threshold_days"]


def test_account_update() -> None:
    assert v.validate_account_update({}) == v.AccountUpdate(False, None)
    assert v.validate_account_update({"webhook_url": None}) == v.AccountUpdate(True, None)
    upd = v.validate_account_update({"webhook_url": "HTTPS://Hooks.Example/x"})
    assert upd.webhook_url is not None and upd.webhook_url.url == "https://hooks.example/x"
    assert list(errors_of(v.validate_account_update, {"webhook_url": 5})) == ["webhook_url"]


# --- properties --------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.from_regex(monitor_openapi.URL_PATTERN, fullmatch=True))
def test_every_url_the_openapi_pattern_generates_is_accepted(url: str) -> None:
    if len(url) <= v.MAX_URL_LENGTH:
        assert v.normalise_url(url).url.startswith(url.split("://")[0])


@settings(max_examples=300, deadline=None)
@given(st.from_regex(monitor_openapi.ALIAS_PATTERN, fullmatch=True).filter(lambda s: len(s) <= 255))
def test_every_alias_the_openapi_pattern_generates_is_accepted(alias: str) -> None:
    assert v.validate_alias(alias) == alias.strip()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(
    st.sampled_from(["url", "alias", "interval", "notification_threshold",
                     "expiry_threshold_days", "webhook_url", "other"]),
    JSON_VALUES | st.text(alphabet="hpst:/.[]@%-_0123456789abcXYZ \r\n\x00é"),
))
def test_any_body_either_validates_or_fails_with_field_errors(body: dict[str, Any]) -> None:
    for fn in (
        lambda: v.validate_monitor_create(body, PLAN),
        lambda: v.validate_monitor_update(body),
        lambda: v.validate_check_update(body, "uptime", PLAN),
        lambda: v.validate_check_update(body, "certificate_health", SMALL),
        lambda: v.validate_account_update(body),
    ):
        try:
            fn()
        except ValidationFailed as exc:
            assert exc.errors and all(
                isinstance(m, str) for msgs in exc.errors.values() for m in msgs)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_path_segment_is_an_id_or_not_found(raw: str) -> None:
    try:
        assert 1 <= v.parse_id(raw) <= v.MAX_ID
    except NotFound:
        pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_any_bytes_are_a_body_or_a_422(raw: bytes) -> None:
    try:
        assert isinstance(v.parse_body(raw), dict)
    except ValidationFailed as exc:
        assert list(exc.errors) == ["body"]
