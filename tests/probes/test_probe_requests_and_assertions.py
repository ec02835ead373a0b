"""The probe with a monitor's own request and assertions, against real local
targets: what the target receives byte for byte, the redirect rules, and the verdict and
words of every source and comparison."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engine.domain.evaluate import Outcome, classify, uptime_error
from engine.probes.http import HttpProber
from engine.probes.request import RequestSpec
from tests.support.targets import HttpTarget

UA = "Upwatch/test"


@pytest.fixture
async def prober() -> AsyncIterator[HttpProber]:
    p = HttpProber(timeout=3.0, user_agent=UA, allow_private=True)
    yield p
    await p.aclose()


def spec(request: dict[str, Any] | None = None, assertions: list[dict[str, Any]] | None = None,
         limit: int = 1 << 20) -> RequestSpec:
    req = dict(request or {})
    req["headers"] = [[k, v] for k, v in (req.get("headers") or {}).items()]
    return RequestSpec.from_config(req, assertions, limit)


def a(source: str, comparison: str, target: Any = None, prop: str | None = None) -> dict[str, Any]:
    return {"source": source, "property": prop, "comparison": comparison, "target": target}


async def test_a_post_reaches_the_target_byte_for_byte(prober: HttpProber) -> None:
    body = '{"q": "caf\u00e9", "n": [1, 2]}\r\n\x01'
    async with HttpTarget() as site:
        out = await prober.probe(site.url("/api"), spec({
            "method": "POST", "body": body,
            "headers": {"Authorization": "Bearer s3cret", "Content-Type": "application/json",
                        "X-Custom": "one two"},
        }))
        assert out.status_code == 200 and out.error is None
        [seen] = site.requests
        assert seen.method == "POST" and seen.target == "/api"
        assert seen.body == body.encode("utf-8")
        assert seen.headers["content-length"] == str(len(body.encode("utf-8")))
        assert seen.headers["authorization"] == "Bearer s3cret"
        assert seen.headers["content-type"] == "application/json"
        assert seen.headers["x-custom"] == "one two"
        assert seen.headers["user-agent"] == UA  # kept without a User-Agent of the monitor
        assert seen.headers["connection"] == "close"


async def test_a_user_agent_of_the_monitor_replaces_the_probe_s(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        await prober.probe(site.url("/"), spec({"method": "HEAD",
                                                "headers": {"User-Agent": "Mine/1"}}))
        [seen] = site.requests
        assert seen.method == "HEAD" and seen.headers["user-agent"] == "Mine/1"


@pytest.mark.parametrize(("code", "method", "body"), [
    (307, "POST", True), (308, "PUT", True), (301, "POST", False), (302, "POST", False),
    (303, "PUT", False), (301, "PUT", True),
])
async def test_redirects_keep_or_drop_method_and_body_as_browsers_do(
    prober: HttpProber, code: int, method: str, body: bool
) -> None:
    async with HttpTarget() as site:
        out = await prober.probe(site.url(f"/redirect-to?code={code}&url=/final"), spec(
            {"method": method, "body": "payload",
             "headers": {"Content-Type": "text/plain"}}))
        assert out.status_code == 200 and out.redirects == 1
        first, second = site.requests
        assert first.method == method and first.body == b"payload"
        assert second.target == "/final"
        if body:
            assert second.method == method and second.body == b"payload"
            assert second.headers["content-type"] == "text/plain"
        else:
            assert second.method == "GET" and second.body == b""
            assert "content-type" not in second.headers
            assert "content-length" not in second.headers


async def test_without_follow_redirects_the_3xx_is_judged(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        s = spec({"follow_redirects": False}, [a("status_code", "equals", 302),
                                               a("header", "contains", "/final", "Location")])
        out = await prober.probe(site.url("/redirect-to?url=/final"), s)
        assert out.status_code == 302 and out.redirects == 0 and len(site.requests) == 1
        assert out.assertion_error is None and classify(out, 3000) is Outcome.OK


JSON_BODY = b'{"status": "DOWN", "n": 7, "items": [{"id": 1}, {"id": 2}], "e": "", "ok": true}'

# (assertion, holds on the answer below, words when it fails)
CASES: list[tuple[dict[str, Any], bool, str | None]] = [
    (a("status_code", "equals", 200), True, None),
    (a("status_code", "equals", 404), False, "status_code equals 404 failed: got 200"),
    (a("status_code", "not_equals", 200), False, "status_code not_equals 200 failed: got 200"),
    (a("status_code", "less_than", 300), True, None),
    (a("status_code", "greater_than", 200), False, "status_code greater_than 200 failed: got 200"),
    (a("response_time", "less_than", 60000), True, None),
    (a("response_time", "greater_than", 60000), False, None),
    (a("header", "equals", "application/json", "Content-Type"), True, None),
    (a("header", "not_equals", "application/json", "content-type"), False,
     'header content-type not_equals "application/json" failed: got "application/json"'),
    (a("header", "contains", "json", "Content-Type"), True, None),
    (a("header", "not_contains", "json", "Content-Type"), False, None),
    (a("header", "is_empty", None, "X-Missing"), True, None),
    (a("header", "not_empty", None, "X-Missing"), False,
     "header X-Missing not_empty failed: not found"),
    (a("header", "equals", "x", "X-Missing"), False,
     'header X-Missing equals "x" failed: not found'),
    (a("header", "matches", r"^application/(json|xml)$", "Content-Type"), True, None),
    (a("header", "less_than", 100, "X-Count"), True, None),
    (a("header", "greater_than", 100, "X-Count"), False, None),
    (a("body", "contains", '"DOWN"'), True, None),
    (a("body", "contains", "Welcome"), False, 'body contains "Welcome" failed: not in the body'),
    (a("body", "not_contains", "DOWN"), False,
     'body not_contains "DOWN" failed: found in the body'),
    (a("body", "equals", JSON_BODY.decode()), True, None),
    (a("body", "not_equals", JSON_BODY.decode()), False, None),
    (a("body", "matches", r'"n": \d+'), True, None),
    (a("body", "matches", r"^\{\"status\": \"UP\""), False, None),
    (a("body", "is_empty"), False, None),
    (a("body", "not_empty"), True, None),
    (a("json", "equals", "UP", "$.status"), False, 'json $.status equals "UP" failed: got "DOWN"'),
    (a("json", "equals", "DOWN", "$.status"), True, None),
    (a("json", "not_equals", "DOWN", "$.status"), False, None),
    (a("json", "equals", 7, "$.n"), True, None),
    (a("json", "less_than", 10, "$.n"), True, None),
    (a("json", "greater_than", 10, "$.n"), False, "json $.n greater_than 10 failed: got \"7\""),
    (a("json", "contains", "OW", "$.status"), True, None),
    (a("json", "not_contains", "OW", "$.status"), False, None),
    (a("json", "equals", 2, "$.items[?@.id > 1].id"), True, None),
    (a("json", "equals", "true", "$.ok"), True, None),
    (a("json", "is_empty", None, "$.e"), True, None),
    (a("json", "is_empty", None, "$.nothing"), True, None),
    (a("json", "not_empty", None, "$.nothing"), False,
     "json $.nothing not_empty failed: not found"),
    (a("json", "equals", "x", "$.nothing"), False, 'json $.nothing equals "x" failed: not found'),
    (a("json", "matches", "^D.WN$", "$.status"), True, None),
    (a("json", "equals", 1, "$.items[?match(@.id, '1')].id"), False, None),
]


@pytest.mark.parametrize(("assertion", "holds", "words"), CASES,
                         ids=[f"{c[0]['source']}-{c[0]['comparison']}-{i}"
                              for i, c in enumerate(CASES)])
async def test_each_source_and_comparison(
    prober: HttpProber, assertion: dict[str, Any], holds: bool, words: str | None
) -> None:
    async with HttpTarget() as site:
        site.body = JSON_BODY
        site.headers = {"Content-Type": "application/json", "X-Count": "42"}
        out = await prober.probe(site.url("/"), spec(None, [assertion]))
        assert out.status_code == 200
        if holds:
            assert out.assertion_error is None
            assert classify(out, 60000) is Outcome.OK
        else:
            assert out.assertion_error is not None
            if words is not None:
                assert out.assertion_error == words
            assert classify(out, 60000) is Outcome.FAILURE
            assert uptime_error(out, Outcome.FAILURE, 60000) == out.assertion_error


async def test_a_status_code_assertion_replaces_the_2xx_rule(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        out = await prober.probe(site.url("/status/404"), spec(
            None, [a("status_code", "equals", 404)]))
        assert out.status_code == 404 and classify(out, 3000) is Outcome.OK
        out = await prober.probe(site.url("/status/503"), spec(
            None, [a("status_code", "equals", 503)]))
        assert classify(out, 3000) is Outcome.OK
        # Other assertions keep today's rule: a 500 stays a failure.
        out = await prober.probe(site.url("/status/500"), spec(
            None, [a("body", "contains", "status")]))
        assert out.assertion_error is None and classify(out, 3000) is Outcome.FAILURE


async def test_a_body_is_read_only_up_to_the_limit(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        site.body = b"x" * 200_000 + b"Welcome"
        out = await prober.probe(site.url("/"), spec(
            None, [a("body", "contains", "Welcome")], limit=64 * 1024))
        assert out.assertion_error == 'body contains "Welcome" failed: not in the first 64 KiB'
        site.body = b"x" * 1000 + b"Welcome"
        out = await prober.probe(site.url("/"), spec(
            None, [a("body", "contains", "Welcome")], limit=64 * 1024))
        assert out.assertion_error is None


async def test_a_backtracking_bomb_is_matched_in_linear_time(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        site.body = b"a" * (1 << 20) + b"!"
        t0 = time.perf_counter()
        out = await prober.probe(site.url("/"), spec(
            None, [a("body", "matches", "(a+)+$")], limit=2 << 20))
        elapsed = time.perf_counter() - t0
        assert out.assertion_error == 'body matches "(a+)+$" failed: no match in the body'
        out = await prober.probe(site.url("/"), spec(
            None, [a("body", "matches", "^(a+)+!$")], limit=2 << 20))
        assert out.assertion_error is None
        # A backtracking engine takes longer than the universe's age here; RE2 milliseconds.
        assert elapsed < 2.5


async def test_a_plain_probe_is_untouched(prober: HttpProber) -> None:
    async with HttpTarget() as site:
        out = await prober.probe(site.url("/"))
        assert out.status_code == 200 and out.assertion_error is None
        assert out.status_asserted is False
        [seen] = site.requests
        assert seen.method == "GET" and seen.body == b""
