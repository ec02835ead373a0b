"""The OpenAPI document: public, complete, self-consistent, and true of real responses."""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from engine.db.store import Store
from engine.runtime.settings import Settings
from engine.web.api import openapi
from engine.web.app import create_app
from engine.web.keys import OPENAPI_DOCUMENT
from tests.support.openapi import check, resolve


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        out = [node["$ref"]] if "$ref" in node else []
        return out + [r for v in node.values() for r in refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def test_every_reference_resolves_and_ids_are_int64() -> None:
    doc = openapi.build_document("http://x")
    assert doc["openapi"].startswith("3.")
    for ref in refs(doc):
        resolve(doc, {"$ref": ref})
    assert doc["components"]["parameters"]["Id"]["schema"] == {
        "type": "integer", "format": "int64", "minimum": 1, "maximum": 2**63 - 1}
    for path, item in doc["paths"].items():
        if "{id}" in path:
            for op in item.values():
                assert op["parameters"] == [{"$ref": "#/components/parameters/Id"}]
                assert "404" in op["responses"]


def test_every_route_of_the_app_is_described(settings: Settings) -> None:
    app = create_app(None, settings)  # type: ignore[arg-type]  # only the routes are read
    doc = orjson.loads(app[OPENAPI_DOCUMENT])  # with the other modules' paths merged
    for ref in refs(doc):
        resolve(doc, {"$ref": ref})
    for route in app.router.routes():
        info = route.resource.get_info() if route.resource else {}
        path = info.get("path") or info.get("formatter")
        if route.method == "HEAD" or path is None:
            continue
        assert path in doc["paths"], path
        assert route.method.lower() in doc["paths"][path], (route.method, path)


def test_other_modules_paths_are_merged_without_overriding() -> None:
    extra = {
        "/webapi/webhooks": {"get": {"operationId": "listWebhooks", "responses": {}}},
        "/webapi/monitors": {"get": {"operationId": "hijack", "responses": {}}},
    }
    doc = openapi.build_document("http://x", extra_paths=extra)
    assert doc["paths"]["/webapi/webhooks"]["get"]["operationId"] == "listWebhooks"
    assert doc["paths"]["/webapi/monitors"]["get"]["operationId"] == "listMonitors"


async def test_the_document_is_public_and_true_of_real_responses(
    client: aiohttp.ClientSession, api: str, store: Store,
) -> None:
    async with aiohttp.ClientSession(base_url=api) as s, s.get("/webapi/openapi.json") as r:
        assert r.status == 200
        assert r.headers["Content-Type"] == "application/json"
        doc = await r.json()
    assert doc["servers"] == [{"url": "http://127.0.0.1:8080"}]
    paths = doc["paths"]

    def schema_of(path: str, method: str, status: str) -> dict[str, Any]:
        response = resolve(doc, paths[path][method]["responses"][status])
        return response["content"]["application/json"]["schema"]  # type: ignore[no-any-return]

    async def exchange(method: str, url: str, path: str, status: int, **kw: Any) -> Any:
        async with client.request(method.upper(), url, **kw) as r:
            assert r.status == status, await r.text()
            body = await r.json()
        check(doc, schema_of(path, method, str(status)), body, f"{method} {path}")
        return body

    create_schema = resolve(doc, paths["/webapi/monitors"]["post"]["requestBody"]["content"]
                            ["application/json"]["schema"])
    good = {"url": "https://example.com/x", "alias": "Shop", "interval": 60,
            "notification_threshold": 30}
    check(doc, create_schema, good)
    m = await exchange("post", "/webapi/monitors", "/webapi/monitors", 201, json=good)
    cid = m["checks"]["uptime"]["id"]
    cert = m["checks"]["certificate_health"]["id"]
    async with store.pool.acquire() as conn:
        await conn.execute(
            "UPDATE checks SET meta = $2, last_check_at = now() WHERE id = $1", cert,
            {"issuer": "R3", "signature_algorithm": "ecdsa-with-SHA256", "is_self_signed": False,
             "valid_from": "2026-01-01 00:00:00", "valid_to": "2027-01-01 00:00:00"})
        await conn.execute(
            "INSERT INTO outages (check_id, started_at, ended_at, http_status_code) VALUES"
            " ($1, now() - interval '2 hours', now() - interval '1 hour', 500),"
            " ($1, now() - interval '1 minute', NULL, NULL)", cid)
        await conn.execute(
            "UPDATE checks SET meta = '{\"http_status_code\": 200}', last_check_at = now()"
            " WHERE id = $1", cid)
    await exchange("get", "/webapi/monitors", "/webapi/monitors", 200)
    await exchange("get", f"/webapi/monitors/{m['id']}", "/webapi/monitors/{id}", 200)
    await exchange("put", f"/webapi/monitors/{m['id']}", "/webapi/monitors/{id}", 200,
                   json={"alias": "New"})
    stats = await exchange("get", f"/webapi/monitors/{m['id']}/statistics",
                           "/webapi/monitors/{id}/statistics", 200)
    assert len(stats["outages"]) == 2
    await exchange("put", f"/webapi/checks/{cid}", "/webapi/checks/{id}", 200,
                   json={"interval": 120})
    await exchange("post", f"/webapi/checks/{cid}/disable", "/webapi/checks/{id}/disable", 200)
    await exchange("post", f"/webapi/checks/{cid}/enable", "/webapi/checks/{id}/enable", 200)
    await exchange("get", "/webapi/account", "/webapi/account", 200)
    await exchange("put", "/webapi/account", "/webapi/account", 200,
                   json={"webhook_url": "https://hooks.example/x"})
    # Error answers match too.
    await exchange("get", "/webapi/monitors/999", "/webapi/monitors/{id}", 404)
    await exchange("post", "/webapi/monitors", "/webapi/monitors", 422, json={})
    await exchange("put", f"/webapi/checks/{cert}", "/webapi/checks/{id}", 422,
                   json={"notification_threshold": 0})
    async with client.delete(f"/webapi/monitors/{m['id']}") as r:
        assert r.status == 204
    async with aiohttp.ClientSession(base_url=api) as s, s.get("/webapi/account") as r:
        check(doc, schema_of("/webapi/account", "get", "401"), await r.json())


async def test_the_document_is_true_of_network_monitors(
    client: aiohttp.ClientSession, api: str,
) -> None:
    """tcp://, tls:// and dns:// monitors, with their own assertions, answer in the shapes
    the document gives: their scheme, exactly their checks, their sources and comparisons."""
    async with aiohttp.ClientSession(base_url=api) as s, s.get("/webapi/openapi.json") as r:
        doc = await r.json()
    paths = doc["paths"]
    create = resolve(doc, {"$ref": "#/components/schemas/MonitorCreate"})
    bodies = [
        {"url": "tcp://127.0.0.1:7", "request": {"body": "PING\r\n"},
         "assertions": [{"source": "response", "comparison": "contains", "target": "OK"},
                        {"source": "connect_time", "comparison": "less_than", "target": 50}]},
        {"url": "tls://127.0.0.1:7"},
        {"url": "dns://127.0.0.1/example.com?type=MX",
         "assertions": [{"source": "answers", "comparison": "none_contains", "target": "old"},
                        {"source": "rcode", "comparison": "equals", "target": "NOERROR"}]},
    ]
    for body in bodies:
        for key in ("request", "assertions"):  # the url pattern is http(s) only
            if key in body:
                check(doc, resolve(doc, create["properties"][key]), body[key], key)
        async with client.post("/webapi/monitors", json=body) as r:
            assert r.status == 201, await r.text()
            made = await r.json()
        check(doc, resolve(doc, paths["/webapi/monitors"]["post"]["responses"]["201"])
              ["content"]["application/json"]["schema"], made, body["url"])
    async with client.get("/webapi/monitors") as r:
        listed = await r.json()
    check(doc, resolve(doc, paths["/webapi/monitors"]["get"]["responses"]["200"])
          ["content"]["application/json"]["schema"], listed, "list")
    assert [sorted(m["checks"]) for m in listed] == [
        ["uptime"], ["certificate_health", "uptime"], ["uptime"]]
