"""With a real ``upwatch run`` at log level DEBUG, a Mattermost channel (its token in the
request path) is tested against a local receiver: the message arrives with the token in
its path, and the process's log never shows the token (urllib3 and requests, which log
request paths at DEBUG, stay at WARNING)."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from engine.db.store import Store
from tests.support.instances import Instance
from tests.support.notify_support import HttpReceiver

TOKEN = "3ccdd113474722377935511fc85d3dd4"


async def test_a_channel_token_in_a_request_path_stays_out_of_the_debug_log(
    db_dsn: str, tmp_path: Path, store: Store
) -> None:
    _, token = await store.create_account("debug")
    async with HttpReceiver() as receiver:
        inst = await Instance(db_dsn, tmp_path, env={"UPWATCH_LOG_LEVEL": "DEBUG"}).start()
        try:
            async with aiohttp.ClientSession(
                base_url=inst.base_url, headers={"Authorization": f"Bearer {token}"}
            ) as http:
                url = f"mmost://127.0.0.1:{receiver.port}/{TOKEN}"
                async with http.post("/webapi/notification-channels",
                                     json={"name": "mm", "url": url}) as r:
                    assert r.status == 201, await r.text()
                    cid = (await r.json())["id"]
                async with http.post(f"/webapi/notification-channels/{cid}/test") as r:
                    assert await r.json() == {"delivered": True}
        finally:
            await inst.stop()
    [hit] = receiver.delivered()
    assert TOKEN in hit.path  # the token did travel in the path...
    log = inst.log_text()
    assert "DEBUG" in log  # ...the log was at DEBUG...
    assert TOKEN not in log  # ...and never showed it.
