"""The bench's command line: ``upwatch-bench SCENARIO [flags]``, also ``upwatch bench ...``.

Parses the flags, runs one scenario (:mod:`upwatch_bench.scenarios`) inside a
:class:`~upwatch_bench.harness.Bench`, and prints one record: a table, or one JSON line
with ``--json``. Exit codes: 0 done, 1 a step failed, 2 bad flags, 128+N a signal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from typing import Any

import orjson

from upwatch_bench import scenarios
from upwatch_bench.harness import Bench, BenchError, Options
from upwatch_bench.procs import ChildFailed
from upwatch_bench.stats import Progress, clean

# The flags in --help order: (flag, its value's type, or bool for a switch, metavar, help).
# A valued flag left out is None: the scenario's default.
Flag = tuple[str, type, str | None, str]
FLAGS: tuple[Flag, ...] = (
    ("--monitors", int, None, "monitors (scenario default)"),
    ("--duration", float, None, "measured seconds"),
    ("--quick", bool, None, "a short smoke run"),
    ("--json", bool, None, "one JSON object per line"),
    ("--names", bool, None,
     "http: the same targets by host name, answered by a DNS server the bench starts "
     "(names vs IP literals side by side)"),
    ("--dns-latency", float, "S",
     "--names, internet: seconds the DNS server takes to answer (default 0; internet 0.02)"),
    ("--dns-ttl", int, "S", "--names, internet: TTL of its answers (default 300)"),
    ("--warmup-intervals", int, "N",
     "internet: whole intervals before the window starts (default 2: the cold start's "
     "interval, then one to catch up from it)"),
    ("--https-only", bool, None,
     "internet: only the HTTPS-only window and the openssl s_time rounds around it (the "
     "HTTPS ratios in under three minutes)"),
    ("--load-only", bool, None,
     "http, tls, mixed, internet: only the engine at the scheduled load (no baseline, "
     "capacity or limit runs)"),
    ("--names-cost", int, "PAIRS",
     "http --names: only PAIRS interleaved pairs of capacity windows, names against IP "
     "literals, with the same probes in flight"),
    ("--rate", float, "PER_S",
     "http, tls: probes a second asked in the capacity windows (default 30000; tls 8000); "
     "lower under --callgrind"),
    ("--probe-timeout", float, "S",
     "the engine's probe timeout (default 10; --quick 2); longer under --callgrind"),
    ("--probe-batch-ms", float, "MS",
     "the engine's probe_batch_ms (default: the engine's, 1; 0 takes every ready socket at "
     "once, for a side-by-side run)"),
    ("--diagnoses", int, "PAIRS",
     "tls: what certificate diagnoses and a cached CRL cost per probe, PAIRS windows each "
     "way (upwatch_bench/scenarios/certdiag.py)"),
    ("--assertions", float, "SHARE",
     "http: what requests and assertions cost (upwatch_bench/scenarios/assertions.py)"),
    ("--database-url", str, "DSN",
     "an existing PostgreSQL server whose role may create databases: a fresh database is "
     "made there and dropped at the end (default: a fresh embedded server)"),
)
TRACER_FLAGS: tuple[Flag, ...] = (
    ("--profile", str, "DIR", "py-spy over each measured window into DIR"),
    ("--profile-native", bool, None,
     "--profile with C frames (py-spy pauses the process to sample)"),
    ("--cprofile", str, "DIR", "cProfile of each engine, deliverer and API window into DIR"),
    ("--perf", str, "DIR",
     "perf record and perf stat of each engine window and wrk run into DIR (python -m "
     "upwatch_bench.tracers.kernelprof DIR sums them up)"),
    ("--perf-callgraph", str, "MODE",
     "--perf: perf record --call-graph MODE (e.g. dwarf; default -g)"),
    ("--strace", str, "DIR", "strace -c and perf stat's tracepoint counts instead, into DIR"),
    ("--callgrind", str, "DIR",
     "every engine child under valgrind's callgrind, files into DIR: instructions per probe"),
)


def _add(add_argument: Callable[..., object], flags: tuple[Flag, ...]) -> None:
    for flag, kind, metavar, text in flags:
        if kind is bool:
            add_argument(flag, action="store_true", help=text)
        else:
            add_argument(flag, type=kind, default=None, metavar=metavar, help=text)


def parser(prog: str = "upwatch-bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Measure Upwatch's capacity and speed against local targets "
                    "(loopback only), side by side with a naive baseline and the machine's "
                    "limit.")
    p.add_argument("scenario", choices=scenarios.SCENARIOS)
    _add(p.add_argument, FLAGS)
    tracers = p.add_argument_group(
        "tracers", "opt-in profiles of the measured windows (upwatch_bench/tracers/); "
                   "they slow what they trace: quote figures from untraced runs")
    _add(tracers.add_argument, TRACER_FLAGS)
    return p


class Interrupted(Exception):
    """SIGINT or SIGTERM arrived; everything the run started has been stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


async def _run(opts: Options, progress: Progress) -> dict[str, Any]:
    """One scenario run. SIGINT and SIGTERM cancel it once (a second signal is ignored so the
    cleanup, bounded in time, is not cut short): children, database and files are released
    on the way out either way."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    assert main is not None
    received: list[int] = []

    def on_signal(signum: int) -> None:
        if not received:
            received.append(signum)
            main.cancel()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        async with Bench(opts, progress) as b:
            rec = await scenarios.run(b)
            b.describe(rec)
            return rec
    except asyncio.CancelledError:
        if received:
            raise Interrupted(received[0]) from None
        raise
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry of ``upwatch-bench`` and of ``upwatch bench``; returns the exit code."""
    import uvloop

    if prog is None:
        prog = os.path.basename(sys.argv[0]) or "upwatch-bench"
    args = parser(prog).parse_args(argv)
    try:
        opts = Options.from_args(args)
    except BenchError as exc:
        sys.stderr.write(f"{prog}: {exc}\n")
        return 2
    from engine.runtime import logs

    logs.configure()
    # The bench's own progress line says what happens; the store's INFO lines (embedded
    # server started, migration applied) would only interleave with it.
    logging.getLogger("engine").setLevel(logging.WARNING)
    progress = Progress()
    try:
        rec = uvloop.run(_run(opts, progress))
    except (KeyboardInterrupt, Interrupted) as exc:
        progress.clear()
        sys.stderr.write(f"{prog}: interrupted; everything it started is stopped\n")
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except (BenchError, ChildFailed, RuntimeError, OSError) as exc:
        progress.clear()
        sys.stderr.write(f"{prog}: {exc}\n")
        return 1
    progress.clear()
    rec = clean(rec)
    if opts.json:
        sys.stdout.write(orjson.dumps(rec).decode() + "\n")
    else:
        sys.stdout.write(scenarios.table(rec) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

