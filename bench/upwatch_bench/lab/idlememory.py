"""Where an idle monitor's bytes are: ``python -m upwatch_bench.lab.idlememory [monitors]``.

The internet world's monitors (default 50,000; 1 % with a certificate check as well) as
the store's check query returns them, adopted by a real :class:`Engine` (no database, no
probe), then the engine's :class:`ProbeResolver` cache holding every name (entries made as
an answer of one address makes them). Per monitor, by object kind: ``sys.getsizeof``, the
same rounded up to the 16 B blocks the allocator hands out, and the whole growth that
``tracemalloc`` saw (what the table does not name: the interpreter's table of interned
strings, free slots of dicts). Compiled or not as installed (``UPWATCH_PURE_PYTHON=1``:
the sources). ``upwatch bench internet`` measures the same by RSS (issue 15's target: at
most 1 KiB per idle monitor including its cache entry); this says what makes it up.
"""

from __future__ import annotations

import gc
import socket
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SMALL = 512  # larger requests go to malloc, not the 16 B blocks of the object allocator


def _alloc(n: int) -> int:
    return (n + 15) // 16 * 16 if n <= SMALL else n


class Table:
    """Bytes by kind of object, each object counted once."""

    def __init__(self) -> None:
        self.size: Counter[str] = Counter()
        self.alloc: Counter[str] = Counter()
        self._seen: set[int] = set()

    def add(self, kind: str, *objs: Any) -> None:
        for o in objs:
            if o is None or id(o) in self._seen:
                continue
            if isinstance(o, int) and -5 <= o <= 256:
                continue  # the interpreter's shared small ints
            self._seen.add(id(o))
            n = sys.getsizeof(o)
            self.size[kind] += n
            self.alloc[kind] += _alloc(n)

    def add_container(self, kind: str, containers: Iterable[Any]) -> None:
        """Dicts (tables of entries: large ones come from malloc, no rounding)."""
        for c in containers:
            n = sys.getsizeof(c)
            self.size[kind] += n
            self.alloc[kind] += _alloc(n)

    def lines(self, per: int, traced: int, title: str) -> list[str]:
        out = [f"{title:<44}{'getsizeof':>10}{'allocated':>10}"]
        for kind in self.size:
            out.append(f"  {kind:<42}{self.size[kind] / per:>10.1f}{self.alloc[kind] / per:>10.1f}")
        total = sum(self.alloc.values())
        out.append(f"  {'sum':<42}{sum(self.size.values()) / per:>10.1f}{total / per:>10.1f}")
        out.append(f"  {'tracemalloc growth (all of it)':<42}{'':>10}{traced / per:>10.1f}")
        return out


def _rows(monitors: int) -> list[dict[str, Any]]:
    """The store's check rows for the internet world (upwatch_bench/world.py), each string
    its own object as asyncpg decodes it; badcert monitors have their certificate check
    enabled too (ids one apart, as the bench seeds them)."""
    from upwatch_bench.world import World

    world = World(monitors, 44300, 8080, 12000)
    now = datetime.now(UTC)
    rows = []
    for i in range(monitors):
        site = world.site(i)
        port = site.url.split(":")[2].split("/")[0]
        kinds = ("uptime", "certificate_health") if site.kind == "badcert" else ("uptime",)
        for k, kind in enumerate(kinds):
            rows.append({
                "id": 1_000_000 + 2 * i + k, "monitor_id": 500_000 + i, "kind": "".join(kind),
                "url": "".join([site.url]), "host": "".join([site.host]),
                "port": "".join([port]), "interval_s": 60, "notification_threshold_s": 0,
                "config_version": 1, "status": "".join(["ok"]), "error": None,
                "last_check_at": now.replace(microsecond=i % 1_000_000),
                "failing_since": None, "detected_by": None, "verified_via": None,
                "outage_id": None, "incident_event_id": None, "renewal_notified_for": None,
                "recovering_since": None, "renewal_notified_fingerprint": None,
                "request": None, "assertions": None, "recovery_threshold_s": 0,
                "expiry_threshold_percent": 20, "account_id": 2,
            })
    return rows


def measure(monitors: int) -> str:
    from engine.kinds.scheduled import ScheduledCheck
    from engine.probes.resolver import DnsAnswer, ProbeResolver
    from engine.runtime.compiled import compiled_modules
    from engine.runtime.metrics import Metrics
    from engine.runtime.settings import Settings
    from engine.scheduler.runner import Engine

    settings = Settings(data_dir=Path(tempfile.mkdtemp(prefix="upwatch-idlememory-")),
                        allow_private_targets=True, log_level="WARNING")
    engine = Engine(object(), settings, metrics=Metrics())  # type: ignore[arg-type]  # no store
    rows = _rows(monitors)
    gc.collect()
    tracemalloc.start()
    t0 = tracemalloc.get_traced_memory()[0]
    for r in rows:
        engine._adopt(ScheduledCheck.from_row(r))
    # What the rows' own objects the checks kept (strings, datetimes) cost was allocated
    # before t0: added below from the table, as the store's decoding makes them.
    held = sum(sys.getsizeof(o) for c in engine._checks.values()
               for o in {id(x): x for x in (c.url, c.host, c.state.last_check_at)}.values())
    del rows, r
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - t0 + held
    tracemalloc.stop()

    checks = engine._checks
    wheel: Any = engine._wheel
    t = Table()
    for c in checks.values():
        t.add("ScheduledCheck", c)
        t.add("CheckState", c.state)
        t.add("url str", c.url)
        t.add("host str", c.host)
        t.add("last_check_at datetime", c.state.last_check_at)
    t.add_container("Engine._checks dict", [checks])
    for key in checks:
        t.add("int: id as a dict key", key)
    where = getattr(wheel, "_where", None)  # the wheel keyed by check id (before i15-mem)
    if where is not None:
        t.add_container("wheel: id -> bucket dict", [where])
        for key in where:
            t.add("int: id as the wheel's key", key)
    empty = sys.getsizeof({})
    buckets = [b for b in wheel._slots if b]
    t.size["wheel: buckets' growth"] += sum(sys.getsizeof(b) - empty for b in buckets)
    t.alloc["wheel: buckets' growth"] += sum(_alloc(sys.getsizeof(b)) - _alloc(empty)
                                             for b in buckets)
    for b in buckets:
        for key, when in b.items():
            t.add("int: id as the wheel's key", key)
            t.add("wheel: due float", when)
    compiled = all(compiled_modules().values())
    out = [f"{monitors:,} monitors, {len(checks):,} enabled checks, "
           f"{'compiled' if compiled else 'pure Python'}; bytes per monitor"]
    out += t.lines(monitors, traced, "the engine's checks (idle, loaded)")

    res = ProbeResolver(family=socket.AF_UNSPEC, max_names=monitors + 1)
    one = ["127.0.0.9"]  # answers of one address share one list (ProbeResolver._parsed)
    gc.collect()
    tracemalloc.start()
    r0 = tracemalloc.get_traced_memory()[0]
    now = time.monotonic()
    for c in checks.values():
        if c.kind == "uptime":
            res._store(c.host, DnsAnswer(one, None, now + 300.0, now + 330.0))
            now += 0.001
    gc.collect()
    r_traced = tracemalloc.get_traced_memory()[0] - r0
    tracemalloc.stop()
    cache = res._cache
    hosts = {id(c.host) for c in checks.values()}
    rt = Table()
    rt.add_container(f"{type(cache).__name__} (its table)", [cache])
    for name, answer in cache.items():
        rt.add("DnsAnswer", answer)
        # Compiled, DnsAnswer keeps its floats unboxed in the object (no __slots__ then).
        rt.add("floats", *(getattr(answer, f, None) for f in ("expires", "stale_until", "grace")
                           if f in getattr(type(answer), "__slots__", ())))
        rt.add("address list (shared)", answer.addresses)
        if id(name) not in hosts:
            rt.add("key str (a copy of the check's host)", name)
    out += rt.lines(len(cache), r_traced, "the resolver's entry per cached name")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    print(measure(int(args[0]) if args else 50_000))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
