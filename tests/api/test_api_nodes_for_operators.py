"""GET /webapi/nodes: operators see every node, its liveness and the checks it owns."""

from typing import Any

import aiohttp

from engine.db.store import Store


async def test_operator_sees_live_nodes_splitting_every_enabled_check(
    api: str, store: Store
) -> None:
    _, token = await store.create_account("ops", is_operator=True)
    await store.register_node("eu-1", "eu", "http://127.0.0.1:1", "1.0")
    await store.register_node("us-1", "us", "http://127.0.0.1:2", "1.0")
    await store.register_node("gone-1", "eu", "http://127.0.0.1:3", "1.0")
    await store.pool.execute(
        "UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'gone-1'"
    )
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession(base_url=api, headers=headers) as http:
        for i in range(5):
            async with http.post(
                "/webapi/monitors", json={"url": f"http://127.0.0.1:{9000 + i}/"}
            ) as r:
                assert r.status == 201, await r.text()
        async with http.get("/webapi/nodes") as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("application/json")
            nodes: list[dict[str, Any]] = await r.json()
    by_id = {n["id"]: n for n in nodes}
    assert set(by_id) == {"eu-1", "us-1", "gone-1"}
    assert by_id["gone-1"]["live"] is False and by_id["gone-1"]["checks_owned"] == 0
    assert by_id["eu-1"]["live"] and by_id["us-1"]["live"]
    # Five uptime checks: an http monitor's certificate check is created paused.
    assert by_id["eu-1"]["checks_owned"] + by_id["us-1"]["checks_owned"] == 5
    assert by_id["eu-1"]["region"] == "eu" and by_id["us-1"]["url"] == "http://127.0.0.1:2"
    assert len(by_id["eu-1"]["last_heartbeat_at"]) == 19


async def test_other_accounts_are_refused(client: aiohttp.ClientSession) -> None:
    async with client.get("/webapi/nodes") as r:
        assert r.status == 403
        assert "operator" in (await r.json())["message"]


async def test_nodes_endpoint_is_in_the_openapi_document(api: str) -> None:
    async with aiohttp.ClientSession() as http, http.get(f"{api}/webapi/openapi.json") as r:
        doc = await r.json()
    assert "get" in doc["paths"]["/webapi/nodes"]
