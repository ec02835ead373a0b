"""The HTTPS uptime probe against ``openssl s_time`` in instructions (callgrind), not time:
``python -m upwatch_bench.lab.tlsinstr [--probes N] [--protocols 1.2,1.3] [--sizes 1024,102400]
[--modes full,resumed] [--key ec|rsa] [--s-time 2,8] [--keep DIR] [--json]``.

Why: on this shared 2-core machine a timed ratio to ``s_time -reuse`` moves by 1.0-1.8x
between rounds (docs/performance.md); user-space instructions do not move
with the load, so a change of a few percent shows. The kernel's part is not counted.

What runs: ``openssl s_server -WWW`` (one per protocol, TLS 1.2 only or 1.3 only, an ECDSA
P-256 or RSA-2048 certificate, session tickets on as by default) on core 0 serves pages of
the given sizes from a directory; on the last core

* the probe: one child, the real compiled :class:`~engine.probes.http.HttpProber`
  (pyOpenSSL layer) under ``valgrind --tool=callgrind --instr-atstart=no``, probes each case
  ``--warmup`` times, then switches instrumentation on for ``--probes`` probes in a row (one
  in flight) and off, and dumps the counts (one dump per case: start-up, imports and
  warm-up are not in them). ``full``: no session kept; ``resumed``: sessions kept (each
  measured probe must resume, or the run fails).
* ``s_time -new|-reuse -www /<page>`` (the same handshake, GET and page read to its end) under
  callgrind twice, ``-time`` short and long: its instructions per connection are the
  difference of the two runs' counts over the difference of their connections, so its
  start-up and first handshake are out.

``--vector-copies``: both sides run with glibc's ``rep movsb``/``rep stosb`` thresholds raised
(``GLIBC_TUNABLES``), so that ``memcpy``/``memset`` copy with vector loops whatever the size.
Valgrind counts each iteration of a ``rep`` instruction as an instruction: a 16 KB record
copied in one ``memcpy`` (the probe: into OpenSSL's buffer and out of it) counts ~16,000,
the same bytes copied in pieces under glibc's threshold (2 KiB here; ``s_time`` reads in
such pieces) ~1,000, though natively the two cost about the same. With the flag the counts
compare the work, not the copy's instruction.

Prints a table of instructions per connection and the probe's ratio to ``s_time``; ``--json``
one JSON line. ``--keep DIR`` keeps the callgrind files (``callgrind_annotate`` reads them).
Takes ~2-4 minutes for the default cases; run it through ``flock /tmp/upwatch-bench.lock``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from upwatch_bench.lab.tlscompare import make_cert, openssl, s_server, stop_servers, wait_port
from upwatch_bench.tracers import callgrind

PROTOCOLS = {"1.2": "-tls1_2", "1.3": "-tls1_3"}
# glibc's thresholds above which memcpy and memset use "rep movsb"/"rep stosb", raised past
# any size copied here (see --vector-copies).
VECTOR_COPIES = ("glibc.cpu.x86_rep_movsb_threshold=0x1000000:"
                 "glibc.cpu.x86_rep_stosb_threshold=0x1000000")


def page_name(size: int) -> str:
    return f"p{size}"


def write_pages(directory: Path, sizes: list[int]) -> None:
    """Pages of ``size`` bytes of printable text (the content does not matter: TLS does
    not compress)."""
    line = (b"upwatch tlsinstr page " * 4)[:79] + b"\n"
    for size in sizes:
        data = line * (size // len(line) + 1)
        (directory / page_name(size)).write_bytes(data[:size])


def start_servers(directory: Path, protocols: list[str], key: str, core: int) -> tuple[
        dict[str, int], list[subprocess.Popen[bytes]]]:
    cert, keyfile = make_cert(directory, key)
    ports: dict[str, int] = {}
    procs: list[subprocess.Popen[bytes]] = []
    for proto in protocols:
        proc, port = s_server(["-WWW", PROTOCOLS[proto]], cert, keyfile, core=core,
                              cwd=directory)
        procs.append(proc)
        ports[proto] = port
    for port in ports.values():
        wait_port(port)
    return ports, procs


# -- the probe's side: the child under callgrind ---------------------------------------------


async def _probe_cases(cases: list[dict[str, Any]], n: int, warmup: int) -> list[dict[str, Any]]:
    """Each case's ``n`` measured probes, instrumented and dumped on their own."""
    from upwatch_bench.lab.tlscompare import make_prober

    out = []
    for case in cases:
        prober = make_prober("pyopenssl", case["mode"] == "resumed")
        if prober._tls_layer != "pyopenssl":
            raise SystemExit("tlsinstr measures the pyOpenSSL layer; it is not available")
        await _run(prober, case["url"], warmup)
        h0, r0 = prober.tls_handshakes, prober.tls_resumed
        await callgrind.instrument(True)
        failed = await _run(prober, case["url"], n)
        await callgrind.instrument(False)
        await _dump(case["name"])
        out.append({"name": case["name"], "failed": failed,
                    "handshakes": prober.tls_handshakes - h0,
                    "resumed": prober.tls_resumed - r0})
        await prober.aclose()
    return out


async def _run(prober: Any, url: str, n: int) -> int:
    """``n`` probes of ``url`` one after the other, as the engine runs them (``start`` with
    a callback, which starts the next: no task or future per probe); how many failed."""
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    state = {"left": n, "failed": 0}

    def done(_: None, outcome: Any) -> None:
        if outcome.status_code != 200:
            state["failed"] += 1
            print("probe failed:", outcome.error, file=sys.stderr)
        state["left"] -= 1
        if state["left"] > 0:
            prober.start(loop, url, done, None)
        elif not finished.done():
            finished.set_result(None)

    if n > 0:
        prober.start(loop, url, done, None)
        await finished
    return state["failed"]


async def _dump(name: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", f"--dump={name}", str(os.getpid()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    await proc.wait()


def child_main(spec: str) -> None:
    import uvloop

    cfg = json.loads(spec)
    res = uvloop.run(_probe_cases(cfg["cases"], cfg["probes"], cfg["warmup"]))
    print(json.dumps(res))


def _dumps(out_file: Path) -> dict[str, int]:
    """Instructions of each dump of a callgrind run, by the dump's reason (the case name)."""
    found: dict[str, int] = {}
    for f in sorted(out_file.parent.glob(out_file.name + ".*")):
        text = f.read_text(errors="replace")
        # "desc: Trigger: dump <reason>" (callgrind_control --dump=<reason>)
        m = re.search(r"^desc: Trigger: (?:dump )?(.*)$", text, re.M)
        reason = m.group(1).strip() if m else f.name
        total = callgrind.total_instructions(text)
        if total is not None:
            found[reason] = total
    return found


def measure_probes(cases: list[dict[str, Any]], n: int, warmup: int,
                   directory: Path) -> dict[str, dict[str, Any]]:
    out_file = directory / "probe.callgrind"
    spec = json.dumps({"cases": cases, "probes": n, "warmup": warmup})
    proc = subprocess.run(  # noqa: S603 - our own arguments
        [*callgrind.wrapper(out_file), sys.executable, "-m", "upwatch_bench.lab.tlsinstr",
         "--child", spec],
        capture_output=True, text=True, timeout=900,
    )
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        raise SystemExit("the probe child failed")
    counts = json.loads(proc.stdout.strip().splitlines()[-1])
    totals = _dumps(out_file)
    res: dict[str, dict[str, Any]] = {}
    for c in counts:
        name = c["name"]
        if name not in totals:
            raise SystemExit(f"no callgrind dump for {name}: {sorted(totals)}")
        res[name] = {"instructions": totals[name] / n, **c}
    return res


# -- s_time ----------------------------------------------------------------------------------


class STimeFailed(RuntimeError):
    """An ``s_time`` run under callgrind gave no count (the message says why)."""


def _valgrind() -> str:
    exe = shutil.which("valgrind")
    if exe is None:
        raise STimeFailed("tlsinstr needs valgrind (Debian: apt-get install valgrind)")
    return exe


def _s_time_run(port: int, mode: str, path: str, seconds: int,
                out_file: Path, host: str = "127.0.0.1") -> tuple[int, int, int]:
    """(instructions, connections, resumed connections) of one ``s_time`` run; raises
    STimeFailed."""
    try:
        proc = subprocess.run(  # noqa: S603 - our own arguments
            [_valgrind(), "--tool=callgrind", f"--callgrind-out-file={out_file}", openssl(),
             "s_time", "-connect", f"{host}:{port}", f"-{mode}", "-time", str(seconds),
             "-www", path],
            capture_output=True, text=True, timeout=seconds * 10 + 120,
        )
    except subprocess.TimeoutExpired as e:
        raise STimeFailed(f"s_time under callgrind did not end in {e.timeout:g} s") from e
    counts = re.findall(r"(\d+) connections in ([\d.]+)s", proc.stdout)
    total = (callgrind.total_instructions(out_file.read_text(errors="replace"))
             if out_file.exists() else None)
    if not counts or total is None:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        raise STimeFailed("s_time under callgrind failed")
    # "-reuse" makes one connection before the timed ones (it takes the session from it).
    conns = int(counts[-1][0]) + (1 if mode == "reuse" else 0)
    marks = "".join(re.findall(r"^[rt*23]+$", proc.stdout.split("starting")[-1], re.M))
    return total, conns, marks.count("r")


def measure_s_time(port: int, mode: str, path: str, lengths: tuple[int, int],
                   directory: Path, name: str, host: str = "127.0.0.1") -> dict[str, Any]:
    """``s_time -<mode> -www <path>`` against ``host:port`` under callgrind: instructions per
    connection (the difference of a short and a long run, so start-up is out), the
    connections and the resumed ones that difference counts. Raises STimeFailed."""
    (i1, c1, r1), (i2, c2, r2) = (
        _s_time_run(port, mode, path, s, directory / f"s_time-{name}-{s}.callgrind", host)
        for s in lengths)
    if c2 <= c1:
        raise STimeFailed(f"s_time {name}: {c2} connections in the long run, {c1} in the short")
    return {"instructions": (i2 - i1) / (c2 - c1), "connections": c2 - c1,
            "resumed": r2 - r1}


# -- the comparison -------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m upwatch_bench.lab.tlsinstr")
    ap.add_argument("--probes", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--protocols", default="1.2,1.3")
    ap.add_argument("--sizes", default="1024,102400")
    ap.add_argument("--modes", default="full,resumed")
    ap.add_argument("--key", choices=("ec", "rsa"), default="ec")
    ap.add_argument("--s-time", default="2,6",
                    help="seconds of the short and long s_time runs (none: no s_time)")
    ap.add_argument("--keep", type=Path, help="keep the callgrind files here")
    ap.add_argument("--vector-copies", action="store_true",
                    help="memcpy/memset without rep instructions on both sides")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child_main(args.child)
        return
    if not callgrind.available():
        raise SystemExit("tlsinstr needs valgrind (Debian: apt-get install valgrind)")
    if args.vector_copies:
        os.environ["GLIBC_TUNABLES"] = VECTOR_COPIES  # for every child
    protocols = args.protocols.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    modes = args.modes.split(",")
    ncpu = os.cpu_count() or 1
    client_core, server_core = ncpu - 1, 0
    with tempfile.TemporaryDirectory(prefix="tlsinstr-") as tmp:
        work = Path(tmp)
        write_pages(work, sizes)
        ports, procs = start_servers(work, protocols, args.key, server_core)
        try:
            cases = [{"name": f"{p} {s} {m}", "mode": m,
                      "url": f"https://127.0.0.1:{ports[p]}/{page_name(s)}"}
                     for p in protocols for s in sizes for m in modes]
            # Children (the probe's, s_time's) inherit this core.
            os.sched_setaffinity(0, {client_core})
            probes = measure_probes(cases, args.probes, args.warmup, work)
            limits: dict[str, dict[str, Any]] = {}
            if args.s_time != "none":
                short, long_ = (int(x) for x in args.s_time.split(","))
                for p in protocols:
                    for s in sizes:
                        for m in modes:
                            st = "new" if m == "full" else "reuse"
                            try:
                                limits[f"{p} {s} {m}"] = measure_s_time(
                                    ports[p], st, "/" + page_name(s), (short, long_),
                                    work, f"{p}-{s}-{st}")
                            except STimeFailed as e:
                                raise SystemExit(str(e)) from e
        finally:
            stop_servers(procs)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                for f in work.glob("*.callgrind*"):
                    shutil.copy(f, args.keep / f.name)
    bad = [k for k, v in probes.items()
           if v["failed"] or (k.endswith("resumed") and v["resumed"] != v["handshakes"])]
    result = {"key": args.key, "probes": args.probes, "vector_copies": args.vector_copies,
              "probe": probes, "s_time": limits}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{'case (' + args.key + ')':24s} {'probe':>11s} {'s_time':>11s}  ratio"
              "  (instructions per connection)")
        for name, v in probes.items():
            lim = limits.get(name)
            st = f"{lim['instructions']:11,.0f}" if lim else f"{'':11s}"
            ratio = f"  {v['instructions'] / lim['instructions']:.3f}x" if lim else ""
            print(f"{name:24s} {v['instructions']:11,.0f} {st}{ratio}")
        for name, lim in limits.items():
            if name.endswith("resumed") and lim["resumed"] != lim["connections"]:
                print(f"note: s_time {name}: {lim['resumed']} of {lim['connections']} resumed")
    if bad:
        raise SystemExit(f"probes failed or did not resume: {bad}")


if __name__ == "__main__":
    main()
