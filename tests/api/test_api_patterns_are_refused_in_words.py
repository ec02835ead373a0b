"""A JSONPath or regular expression the API refuses: a 422 under the assertion's field that
says what is wrong in words, with the position, and creates nothing. Queries whose cost
could grow with the body beyond a constant factor are refused by their shape; patterns RE2
would build too large are refused, and quickly, the same pattern sent again from cache."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import pytest

from engine.db.store import Store


async def refused(client: aiohttp.ClientSession, assertion: dict[str, Any]) -> tuple[str, str]:
    body = {"url": "https://api.example.com/health", "assertions": [assertion]}
    async with client.post("/webapi/monitors", json=body) as r:
        answer = await r.json()
        assert r.status == 422, answer
    [(field, [message])] = answer["errors"].items()
    return field, message


def json_assertion(path: str) -> dict[str, Any]:
    return {"source": "json", "property": path, "comparison": "not_empty"}


@pytest.mark.parametrize(("path", "words"), [
    ("status", "The JSONPath must start with $ (position 0), as in $.status."),
    (" ", "The JSONPath is empty; it must start with $, as in $.status."),
    ("@.status", "The JSONPath must start with $ (position 0): @ (the current node) belongs"
                 " inside a filter, as in $.items[?@.ok == true]."),
    ("$.items[0", "The JSONPath has a '[' that is not closed (position 7)."),
    ("$['name", "The JSONPath has a quote that is not closed (position 2)."),
    ("$.a]", "The JSONPath has a ']' that closes nothing (position 3)."),
    ("$.status.", "The JSONPath ends with '.' (position 8): a name or * must follow, as in"
                  " $.status or $..*."),
    ("$[?@.status = 'UP']", "The JSONPath compares with '=' (position 12); a filter compares"
                            " with '=='."),
    ("$[?@.status ==]", "The JSONPath ends too early (position 14): a bracket, filter or"
                        " comparison is incomplete."),
    ("$[?up(@)]", "The JSONPath calls an unknown function 'up' (position 3); RFC 9535 has"
                  " length, count, match, search, value."),
    ("$.a b", "The JSONPath has an unexpected 'b' (position 4)."),
])
async def test_a_bad_jsonpath_says_what_is_wrong_and_where(
    client: aiohttp.ClientSession, store: Store, path: str, words: str
) -> None:
    field, message = await refused(client, json_assertion(path))
    assert field == "assertions.0.property"
    assert message == words
    assert "TOKEN" not in message
    assert await store.pool.fetchval("SELECT count(*) FROM monitors") == 0


@pytest.mark.parametrize(("path", "words"), [
    ("$..*..*..*..*..*[?@ == 'zz']", "one descendant segment '..' only"),
    ("$..a..b", "another is at position 4"),
    ("$..a[?count(@..*) > 1]", "another is at position 13"),
    ("$.items[?@.tags[?@ == 'x']]", "may not hold a filter inside a filter; one is at"
                                    " position 16"),
    ("$[?match(@.a, @.b)]", "match() needs its pattern as a string literal"),
    ("$[?search(@.a, '\\\\p{L}{1000}')]", "is not a regular expression RE2 accepts: the"
                                          " pattern is too large once compiled"),
])
async def test_a_jsonpath_whose_cost_could_explode_is_refused_with_the_reason(
    client: aiohttp.ClientSession, path: str, words: str
) -> None:
    field, message = await refused(client, json_assertion(path))
    assert field == "assertions.0.property"
    assert words in message, message


async def test_accepted_shapes_still_create(client: aiohttp.ClientSession) -> None:
    for path in ("$.status", "$..status", "$.items[?@.ok == true].name",
                 "$..items[?match(@.name, 'db-[0-9]+')]", "$[?count(@.*) > 2]"):
        async with client.post("/webapi/monitors", json={
                "url": "https://api.example.com/health",
                "assertions": [json_assertion(path)]}) as r:
            assert r.status == 201, (path, await r.json())


async def test_a_regex_too_large_once_compiled_is_refused_quickly_and_again_from_cache(
    client: aiohttp.ClientSession,
) -> None:
    pattern = "\\p{L}{977}"  # 10 characters, a million RE2 instructions
    took = []
    for _ in range(2):
        started = time.perf_counter()
        field, message = await refused(
            client, {"source": "body", "comparison": "matches", "target": pattern})
        took.append(time.perf_counter() - started)
        assert field == "assertions.0.target"
        assert message.startswith("Not a regular expression RE2 accepts: the pattern is too"
                                  " large once compiled (RE2 program over 128 KiB"), message
    # Unbounded, RE2 built ~100 ms of program before refusing it.
    assert max(took) < 0.5, took
