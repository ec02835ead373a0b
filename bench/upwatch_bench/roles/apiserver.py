"""The API under measurement (a child role): ``create_app`` served as the daemon serves it.

The app is exactly :func:`engine.web.app.create_app` over a :class:`Store`, run by an aiohttp
``AppRunner`` on uvloop without an access log (as :class:`engine.daemon.WebServer` does),
pinned to one core by the parent. ``mark`` commands report this process's CPU time so the
parent can give CPU seconds per request.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from upwatch_bench.child import commands, emit, run_reporting
from upwatch_bench.stats import cpu_seconds, rss_bytes


async def _serve(cfg: dict[str, Any]) -> None:
    from aiohttp import web

    from engine.db.store import Store
    from engine.runtime.secretbox import SecretBox
    from engine.runtime.settings import Settings
    from engine.web.app import create_app

    settings = Settings(**cfg["settings"])
    store = await Store.connect(cfg["dsn"], min_size=2, max_size=cfg.get("pool", 10),
                                secrets=SecretBox.from_settings(settings))
    runner = web.AppRunner(create_app(store, settings), access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        site = web.TCPSite(runner, cfg["host"], int(cfg["port"]), reuse_address=True,
                           backlog=1024)
        await site.start()
        emit("ready")
        profiler: Any = None
        async for msg in commands():
            if msg.get("cmd") == "mark":
                tag = str(msg.get("tag"))
                # --cprofile: a deterministic profile of each load run, from
                # its "start" mark to its "end" mark.
                if profiler is not None and tag.endswith("end"):
                    profiler.disable()
                    profiler.dump_stats(f"{cfg['cprofile']}/api-{tag}.pstats")
                    profiler = None
                emit("mark", tag=tag, wall=time.time(), cpu_s=cpu_seconds(), rss=rss_bytes())
                if cfg.get("cprofile") and tag.endswith("start"):
                    import cProfile

                    profiler = cProfile.Profile()
                    profiler.enable()
            elif msg.get("cmd") == "stop":
                break
    finally:
        with contextlib.suppress(Exception):
            await runner.cleanup()
        await store.close()


def run(cfg: dict[str, Any]) -> int:
    return run_reporting(_serve(cfg))
