"""The role ``world_dnscache``: the engine's resolver filled with the internet world's names
from the bench's DNS server, and the memory each cached name holds (``bench internet``)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from upwatch_bench.engine_parts import build_resolver
from upwatch_bench.world import World


async def _dnscache(cfg: dict[str, Any]) -> None:
    """The engine's resolver (ProbeResolver, A and AAAA) filled with the world's names from
    the bench's DNS server: RSS growth per cached name, after the first ``warm`` names (the
    one-time structures) are in."""
    import gc

    from engine.probes.failures import ProbeFailure
    from upwatch_bench.child import emit

    world = World.from_dict(cfg["world"])
    hosts = [world.site(i).host for i in range(world.monitors)]
    res = build_resolver([cfg["dns_server"]], max_names=len(hosts) + 1)

    async def lookups(names: list[str]) -> None:
        # 200 workers, not a task per name: the transient objects of 50,000 tasks would
        # stay in the RSS (freed memory is not given back) and be counted as the cache.
        it = iter(names)

        async def worker() -> None:
            for host in it:
                with contextlib.suppress(ProbeFailure):
                    await res(host, 0)

        await asyncio.gather(*(worker() for _ in range(200)))

    warm = min(len(hosts) // 10, 1000)
    await lookups(hosts[:warm])
    gc.collect()
    from upwatch_bench.roles.engine_run import settled_rss

    before = await settled_rss(2.0, min_s=0.5)
    await lookups(hosts[warm:])
    gc.collect()
    after = await settled_rss(3.0, min_s=0.5)
    names = len(res) - warm
    emit("result", names=names, cached=len(res), rss_before=before, rss_after=after,
         bytes_per_name=round((after - before) / names, 1) if names > 0 else None,
         python_bytes_per_name=python_bytes_per_name(res))
    await res.aclose()


def python_bytes_per_name(res: Any) -> float | None:
    """What the resolver's own cache holds per name in Python objects (key, answer, its
    list and floats, the dict's share), each object counted once however many entries
    share it (one-address lists, graces): the rest of the RSS growth per name is native
    memory (c-ares) and the allocator's."""
    import sys

    cache = res._cache
    if not cache:
        return None
    seen: dict[int, int] = {}
    # Compiled, DnsAnswer has no __slots__: its floats live unboxed in the object (in its
    # getsizeof), and only its object fields point elsewhere.
    fields = getattr(type(next(iter(cache.values()))), "__slots__", ("addresses", "error"))
    for key, answer in cache.items():
        for obj in (key, answer, *(getattr(answer, f) for f in fields)):
            if obj is not None:
                seen[id(obj)] = sys.getsizeof(obj)
    return round((sys.getsizeof(cache) + sum(seen.values())) / len(cache), 1)


def run(cfg: dict[str, Any]) -> int:
    import uvloop

    uvloop.run(_dnscache(cfg))
    return 0
