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
from typing import Any

import orjson

from upwatch_bench import scenarios
from upwatch_bench.harness import Bench, BenchError, Options
from upwatch_bench.procs import ChildFailed
from upwatch_bench.stats import Progress, clean


def parser(prog: str = "upwatch-bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Measure Upwatch's capacity and speed against local targets "
                    "(loopback only), side by side with a naive baseline and the machine's "
                    "limit.")
    p.add_argument("scenario", choices=scenarios.SCENARIOS)
    p.add_argument("--monitors", type=int, default=None, help="monitors (scenario default)")
    p.add_argument("--duration", type=float, default=None, help="measured seconds")
    p.add_argument("--quick", action="store_true", help="a short smoke run")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--names", action="store_true",
                   help="http: the same targets by host name, answered by a DNS server "
                        "the bench starts (names vs IP literals side by side)")
    p.add_argument("--dns-latency", type=float, default=None, metavar="S",
                   help="--names, internet: seconds the DNS server takes to answer "
                        "(default 0; internet 0.02)")
    p.add_argument("--dns-ttl", type=int, default=None, metavar="S",
                   help="--names, internet: TTL of its answers (default 300)")
    p.add_argument("--warmup-intervals", type=int, default=None, metavar="N",
                   help="internet: whole intervals before the window starts (default 2: "
                        "the cold start's interval, then one to catch up from it)")
    p.add_argument("--https-only", action="store_true",
                   help="internet: only the HTTPS-only window and the openssl s_time "
                        "rounds around it (the HTTPS ratios in under three minutes)")
    p.add_argument("--load-only", action="store_true",
                   help="http, tls, mixed, internet: only the engine at the scheduled "
                        "load (no baseline, capacity or limit runs)")
    p.add_argument("--names-cost", type=int, default=None, metavar="PAIRS",
                   help="http --names: only PAIRS interleaved pairs of capacity windows, "
                        "names against IP literals, with the same probes in flight")
    p.add_argument("--rate", type=float, default=None, metavar="PER_S",
                   help="http, tls: probes a second asked in the capacity windows "
                        "(default 30000; tls 8000); lower under --callgrind")
    p.add_argument("--probe-timeout", type=float, default=None, metavar="S",
                   help="the engine's probe timeout (default 10; --quick 2); longer "
                        "under --callgrind")
    p.add_argument("--probe-batch-ms", type=float, default=None, metavar="MS",
                   help="the engine's probe_batch_ms (default: the engine's, 1; 0 takes "
                        "every ready socket at once, for a side-by-side run)")
    p.add_argument("--diagnoses", type=int, default=None, metavar="PAIRS",
                   help="tls: what certificate diagnoses and a cached CRL cost per probe, "
                        "PAIRS windows each way (upwatch_bench/scenarios/certdiag.py)")
    p.add_argument("--assertions", type=float, default=None, metavar="SHARE",
                   help="http: what requests and assertions cost "
                        "(upwatch_bench/scenarios/assertions.py)")
    p.add_argument("--database-url", default=None, metavar="DSN",
                   help="an existing PostgreSQL server whose role may create databases: a "
                        "fresh database is made there and dropped at the end (default: a "
                        "fresh embedded server)")
    tracers = p.add_argument_group(
        "tracers", "opt-in profiles of the measured windows (upwatch_bench/tracers/); "
                   "they slow what they trace: quote figures from untraced runs")
    tracers.add_argument("--profile", default=None, metavar="DIR",
                         help="py-spy over each measured window into DIR")
    tracers.add_argument("--profile-native", action="store_true",
                         help="--profile with C frames (py-spy pauses the process to sample)")
    tracers.add_argument("--cprofile", default=None, metavar="DIR",
                         help="cProfile of each engine, deliverer and API window into DIR")
    tracers.add_argument("--perf", default=None, metavar="DIR",
                         help="perf record and perf stat of each engine window and wrk run "
                              "into DIR (python -m upwatch_bench.tracers.kernelprof DIR "
                              "sums them up)")
    tracers.add_argument("--perf-callgraph", default=None, metavar="MODE",
                         help="--perf: perf record --call-graph MODE (e.g. dwarf; "
                              "default -g)")
    tracers.add_argument("--strace", default=None, metavar="DIR",
                         help="strace -c and perf stat's tracepoint counts instead, into DIR")
    tracers.add_argument("--callgrind", default=None, metavar="DIR",
                         help="every engine child under valgrind's callgrind, files into DIR: "
                              "instructions per probe")
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

