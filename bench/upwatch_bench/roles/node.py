"""``node``: a whole node as ``upwatch run`` serves it by default (a child role): the engine
and the API on one loop, built by :func:`engine.daemon.serve` with role ``all`` over the
bench database, pinned to one core by the parent. Emits ``ready`` once ``/healthz``
answers and the engine has loaded its checks; stops on the parent's ``stop``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from upwatch_bench.child import commands, emit


async def _serve(cfg: dict[str, Any]) -> None:
    import aiohttp

    from engine.daemon import Supervisor, serve
    from engine.runtime.settings import Settings

    settings = Settings(**cfg["settings"])
    sup = Supervisor()
    node = asyncio.create_task(serve(settings, "all", cfg["dsn"], sup=sup))
    url = f"http://{settings.host}:{settings.port}/healthz"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + float(cfg.get("ready_timeout_s", 300))
    async with aiohttp.ClientSession() as http:
        while loop.time() < deadline and not node.done():
            with contextlib.suppress(aiohttp.ClientError, OSError):
                async with http.get(url) as r:
                    body = await r.json()
                    if r.status == 200 and "load" in body:  # the engine ran a second
                        break
            await asyncio.sleep(0.25)
    if node.done():
        await node  # its exception, for the parent's log
        return
    emit("ready")
    async for msg in commands():
        if msg.get("cmd") == "stop":
            break
    sup.stop.set()
    await node


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_serve(cfg))
    return 0
