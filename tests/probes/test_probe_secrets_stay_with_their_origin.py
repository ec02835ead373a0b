"""A monitor's secret headers and body go to its own origin only: on a redirect to another
scheme, host or port every header the API treats as secret is dropped, a 307/308 that would
carry the body there is not followed, and a same-origin redirect keeps everything."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

import pytest

from engine.probes.http import HttpProber
from engine.probes.request import RequestSpec
from tests.support.targets import HttpTarget

SECRETS = {"X-Api-Key": "k-123", "Private-Token": "glpat-456", "X-Auth-Token": "t-789",
           "Authorization": "Bearer s3cret", "Cookie": "sid=abc",
           "Proxy-Authorization": "Basic eA=="}
PLAIN = {"X-Custom": "visible", "Content-Type": "application/x-www-form-urlencoded"}
BODY = "user=ops&password=hunter2"


@pytest.fixture
async def prober() -> AsyncIterator[HttpProber]:
    p = HttpProber(timeout=3.0, user_agent="Upwatch/test", allow_private=True)
    yield p
    await p.aclose()


def spec(method: str, body: str | None) -> RequestSpec:
    headers: list[Any] = [[k, v] for k, v in {**SECRETS, **PLAIN}.items()]
    return RequestSpec.from_config(
        {"method": method, "headers": headers, "body": body}, None, 1 << 20)


def redirect(site: HttpTarget, code: int, to: str) -> str:
    return site.url(f"/redirect-to?code={code}&url={quote(to, safe='')}")


def assert_no_secret(headers: dict[str, str], raw_body: bytes) -> None:
    for name, value in SECRETS.items():
        assert name.lower() not in headers, name
        assert value not in " ".join(headers.values()), name
    assert b"hunter2" not in raw_body


@pytest.mark.parametrize("other_host", ["127.0.0.2", "127.0.0.1"])  # another host / port
@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_a_get_redirected_to_another_origin_sends_no_secret(
    prober: HttpProber, code: int, other_host: str,
) -> None:
    async with HttpTarget() as first, HttpTarget(host=other_host) as other:
        out = await prober.probe(redirect(first, code, other.url("/landing")), spec("GET", None))
        assert out.status_code == 200 and out.error is None and out.redirects == 1
        [start] = first.requests
        assert {k: start.headers[k.lower()] for k in SECRETS} == SECRETS
        [seen] = other.requests
        assert seen.target == "/landing"
        assert_no_secret(seen.headers, seen.body)
        assert seen.headers["x-custom"] == "visible"


@pytest.mark.parametrize(("code", "method"), [(301, "POST"), (302, "POST"), (303, "POST"),
                                               (303, "PUT")])
async def test_a_redirect_that_drops_the_body_goes_on_without_it_or_any_secret(
    prober: HttpProber, code: int, method: str,
) -> None:
    async with HttpTarget() as first, HttpTarget(host="127.0.0.2") as other:
        out = await prober.probe(redirect(first, code, other.url("/landing")),
                                 spec(method, BODY))
        assert out.status_code == 200 and out.error is None
        [start] = first.requests
        assert start.method == method and start.body == BODY.encode()
        [seen] = other.requests
        assert seen.method == "GET" and seen.body == b""
        assert_no_secret(seen.headers, seen.body)
        assert "content-type" not in seen.headers


@pytest.mark.parametrize(("code", "method"), [(307, "POST"), (308, "PUT"), (301, "PUT"),
                                               (302, "PATCH")])
async def test_a_redirect_that_would_carry_the_body_to_another_origin_is_not_followed(
    prober: HttpProber, code: int, method: str,
) -> None:
    async with HttpTarget() as first, HttpTarget(host="127.0.0.2") as other:
        out = await prober.probe(redirect(first, code, other.url("/landing")),
                                 spec(method, BODY))
        assert out.status_code is None
        assert out.error == ("redirect not followed: it would send the request body to "
                             f"another origin (http://127.0.0.2:{other.port})")
        assert len(first.requests) == 1
        assert other.requests == []


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
async def test_a_same_origin_redirect_keeps_the_secrets_and_the_body_rules(
    prober: HttpProber, code: int,
) -> None:
    async with HttpTarget() as site:
        out = await prober.probe(redirect(site, code, "/final"), spec("POST", BODY))
        assert out.status_code == 200 and out.error is None
        _, seen = site.requests
        assert {k: seen.headers[k.lower()] for k in SECRETS} == SECRETS
        if code in (307, 308):
            assert seen.method == "POST" and seen.body == BODY.encode()
        else:
            assert seen.method == "GET" and seen.body == b""


async def test_back_on_the_first_origin_after_another_the_secrets_stay_dropped(
    prober: HttpProber,
) -> None:
    """The hop back was chosen by the foreign server: it gets no authenticated request."""
    async with HttpTarget() as first, HttpTarget(host="127.0.0.2") as other:
        back = first.url("/final")
        out = await prober.probe(redirect(first, 302, redirect(other, 302, back)),
                                 spec("GET", None))
        assert out.status_code == 200 and out.redirects == 2
        [seen_other] = other.requests
        assert_no_secret(seen_other.headers, seen_other.body)
        start, again = first.requests
        assert start.headers["x-api-key"] == "k-123"
        assert again.target == "/final"
        assert_no_secret(again.headers, again.body)
        assert again.headers["x-custom"] == "visible"
