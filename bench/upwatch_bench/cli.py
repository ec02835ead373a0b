"""The bench's command line: ``upwatch-bench SCENARIO [flags]``, also ``upwatch bench ...``.

Parses the flags and runs one scenario, which prints one record: a table, or one JSON line
with ``--json``. Exit codes: 0 done, 1 a step failed, 2 bad flags, 128+N a signal.
"""

from __future__ import annotations

import argparse
import os
import sys

from upwatch_bench import SCENARIOS


def parser(prog: str = "upwatch-bench") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Measure Upwatch's capacity and speed against local targets "
                    "(loopback only), side by side with a naive baseline and the machine's "
                    "limit.")
    p.add_argument("scenario", choices=SCENARIOS)
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
                        "(default 30000; tls 8000); lower under UPWATCH_BENCH_CALLGRIND")
    p.add_argument("--probe-timeout", type=float, default=None, metavar="S",
                   help="the engine's probe timeout (default 10; --quick 2); longer "
                        "under UPWATCH_BENCH_CALLGRIND")
    p.add_argument("--probe-batch-ms", type=float, default=None, metavar="MS",
                   help="the engine's probe_batch_ms (default: the engine's, 1; 0 takes "
                        "every ready socket at once, for a side-by-side run)")
    p.add_argument("--assertions", type=float, default=None, metavar="SHARE",
                   help="http: what requests and assertions cost "
                        "(upwatch_bench/scenarios/assertions.py)")
    return p


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Entry of ``upwatch-bench`` and of ``upwatch bench``; returns the exit code."""
    if prog is None:
        prog = os.path.basename(sys.argv[0]) or "upwatch-bench"
    args = parser(prog).parse_args(argv)
    from engine.runtime import logs
    from upwatch_bench.harness import run

    logs.configure()
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
