"""A json assertion's query is bounded: against real local targets serving bodies built to
make accepted queries costly (a megabyte of small objects, 45,000 members of one object,
nesting past the descendant segment's limit), each probe ends with its verdict in words,
and what it does on the event loop once the body is in takes little CPU."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest
from aiohttp import web

from engine.probes.http import HttpProber
from engine.probes.request import RequestSpec
from tests.support.web import serve

BODIES = {
    "/wide": orjson.dumps([{"a": {"b": i, "c": "x"}} for i in range(40_000)]),
    "/members": orjson.dumps({f"k{i}": i for i in range(45_000)}),
    "/nested": b"[" * 300 + b"0" + b"]" * 300,
    "/issue": b"[" * 30 + b"0" + b"]" * 30,
}
STEPS = "the JSONPath needs more than 2000 steps on this body"
# (path on the target, query, what the check's error says)
CASES = [
    ("/wide", "$..*[?@ == 'zz']", STEPS),
    ("/wide", "$[?@ == 'zz']", STEPS),
    ("/wide", "$.*.*.*.*", STEPS),
    ("/wide", "$..[?search(@, 'z+q')]", STEPS),
    ("/members", "$..zz", STEPS),
    ("/members", "$[?@ == -1]", STEPS),
    ("/nested", "$..zz", "the body nests deeper than 100 levels under '..'"),
    ("/nested", "$[0][0][0][0]", "the value found nests too deep to compare"),
    ("/issue", "$..*[?@ == 'zz']", "not found"),
    ("/wide", "$[39999].a.b", None),  # a path of names and indexes is cheap on any body
]
# CPU seconds one check may take. Most of it is parsing the megabyte (about 10 ms on an idle
# core); unbounded, the first query walked all 120,000 nodes of /wide (about 0.5 s).
MAX_CPU = 0.08


@pytest.fixture
async def target() -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=BODIES[request.path], content_type="application/json")

    app = web.Application()
    for path in BODIES:
        app.router.add_get(path, handle)
    async with serve(app) as url:
        yield url


@pytest.fixture
async def prober() -> AsyncIterator[HttpProber]:
    p = HttpProber(timeout=5.0, user_agent="Upwatch/test", allow_private=True, max_body=1 << 21)
    yield p
    await p.aclose()


def spec(query: str) -> RequestSpec:
    assertion: dict[str, Any] = {"source": "json", "property": query,
                                 "comparison": "not_empty", "target": None}
    return RequestSpec.from_config(None, [assertion], 1 << 21)


async def test_costly_queries_end_in_words_and_take_little_cpu(
    target: str, prober: HttpProber
) -> None:
    for path, query, words in CASES:
        s = spec(query)
        out = await prober.probe(target + path, s)
        assert out.status_code == 200, (query, out.error)
        if words is None:
            assert out.assertion_error is None, (query, out.assertion_error)
        else:
            assert out.assertion_error is not None and words in out.assertion_error, (
                query, out.assertion_error)
        # What the probe does on the loop once the body is in (parse and query), alone.
        started = time.thread_time()
        assert s.check(200, 1.0, {}, BODIES[path], False) == out.assertion_error
        took = time.thread_time() - started
        print(f"{query:26s} {path:9s} {took * 1000:6.1f} ms CPU")
        assert took < MAX_CPU, (query, path, took)
