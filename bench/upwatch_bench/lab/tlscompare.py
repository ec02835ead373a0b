"""The HTTPS uptime probe's CPU per connection against ``openssl s_time``, side by side:
``python -m upwatch_bench.lab.tlscompare [--probes N] [--in-flight K] [--rounds R] [--layers ...]``.

Four ``openssl s_server -www`` targets (RSA-2048 and ECDSA P-256 certificates, each with TLS
1.2 only and TLS 1.3 only) run on core 0; this process, pinned to the last core, runs N
probes (K in flight) of the real :class:`~engine.probes.http.HttpProber` per server, TLS
layer and mode (full handshake: no session kept; resumed: sessions kept), the cases
alternating over R rounds; after every round ``openssl s_time -new`` and ``-reuse`` run on
the same core against the same servers, so each round's ratio has its own limit. CPU is
user+sys from ``getrusage`` (the probes: this process; s_time: the child, from ``wait4``),
divided by the connections made. Prints one table; ``--json`` one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.probes.http import HttpProber
from upwatch_bench.engine_parts import build_http_prober
from upwatch_bench.stats import cpu_seconds

SERVERS = {
    # name: (key type, openssl s_server protocol flag)
    "rsa-1.3": ("rsa", "-tls1_3"),
    "ec-1.3": ("ec", "-tls1_3"),
    "rsa-1.2": ("rsa", "-tls1_2"),
    "ec-1.2": ("ec", "-tls1_2"),
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def openssl() -> str:
    exe = shutil.which("openssl")
    if exe is None:
        raise SystemExit("tlscompare needs the openssl command")
    return exe


def make_cert(directory: Path, kind: str) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (the uptime probe does not verify)."""
    key, cert = directory / f"{kind}.key", directory / f"{kind}.pem"
    newkey = ["-newkey", "rsa:2048"] if kind == "rsa" else [
        "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    subprocess.run(  # noqa: S603 - our own arguments
        [openssl(), "req", "-x509", *newkey, "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    return cert, key


def wait_port(port: int, limit: float = 10.0) -> None:
    end = time.monotonic() + limit
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
            return
        except OSError:
            if time.monotonic() > end:
                raise
            time.sleep(0.05)


def s_server(options: list[str], cert: Path, key: Path, *, core: int | None = None,
             cwd: Path | None = None) -> tuple[subprocess.Popen[bytes], int]:
    """``openssl s_server -quiet`` with ``options`` on a free loopback port (pinned to
    ``core`` when given), and that port; the caller waits for it (:func:`wait_port`) and
    ends the process."""
    port = _free_port()
    proc = subprocess.Popen(  # noqa: S603 - our own arguments
        [openssl(), "s_server", "-quiet", *options,
         "-accept", f"127.0.0.1:{port}", "-cert", str(cert), "-key", str(key)],
        cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    if core is not None:
        os.sched_setaffinity(proc.pid, {core})
    return proc, port


def stop_servers(procs: list[subprocess.Popen[bytes]]) -> None:
    """End the ``s_server`` processes: all asked to stop first, then each waited for."""
    for proc in procs:
        proc.terminate()
    for proc in procs:
        proc.wait(timeout=10)


def start_servers(directory: Path, names: list[str], core: int) -> tuple[
        dict[str, int], list[subprocess.Popen[bytes]]]:
    ports: dict[str, int] = {}
    procs: list[subprocess.Popen[bytes]] = []
    certs = {kind: make_cert(directory, kind) for kind in {SERVERS[n][0] for n in names}}
    for name in names:
        kind, proto = SERVERS[name]
        cert, key = certs[kind]
        proc, port = s_server(["-www", proto], cert, key, core=core)
        procs.append(proc)
        ports[name] = port
    for port in ports.values():
        wait_port(port)
    return ports, procs


async def run_probes(prober: HttpProber, url: str, n: int, in_flight: int) -> tuple[float, int]:
    """CPU seconds of this process for ``n`` probes of ``url``, and how many failed (the
    handshakes that resumed: ``prober.tls_resumed``)."""
    loop = asyncio.get_running_loop()
    finished = loop.create_future()
    state = {"started": 0, "done": 0, "failed": 0}

    def done(_: None, outcome: Any) -> None:
        state["done"] += 1
        if outcome.status_code != 200:
            state["failed"] += 1
            if state["failed"] == 1:
                print("probe failed:", outcome.error, file=sys.stderr)
        if state["started"] < n:
            state["started"] += 1
            prober.start(loop, url, done, None)
        elif state["done"] == n and not finished.done():
            finished.set_result(None)

    c0 = cpu_seconds()
    for _ in range(min(in_flight, n)):
        state["started"] += 1
        prober.start(loop, url, done, None)
    await finished
    return cpu_seconds() - c0, state["failed"]


def s_time(port: int, mode: str, seconds: int) -> tuple[float, float] | None:
    """CPU seconds per connection of ``openssl s_time -new|-reuse -www /`` on this
    process's core (the child inherits it), and the share of its timed connections that
    resumed (s_time prints ``r`` for each, else a version letter or ``*``)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(  # noqa: S603 - our own arguments
        [openssl(), "s_time", "-connect", f"127.0.0.1:{port}",
         f"-{mode}", "-time", str(seconds), "-www", "/"],
        capture_output=True, text=True, timeout=seconds + 30,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # "-reuse" prints its own line after the "-new"-like first connection's; take the last.
    counts = re.findall(r"(\d+) connections in ([\d.]+)s", proc.stdout)
    if not counts:
        print(proc.stdout, proc.stderr, file=sys.stderr)
        return None
    conns = int(counts[-1][0]) + (1 if mode == "reuse" else 0)
    marks = "".join(re.findall(r"^[rt*23]+$", proc.stdout.split("starting")[-1], re.M))
    return cpu / conns, marks.count("r") / max(1, len(marks))


def make_prober(layer: str, sessions: bool) -> HttpProber:
    return build_http_prober(timeout=10.0, tls_sessions=1000 if sessions else 0,
                             tls_layer=layer)


async def compare(ports: dict[str, int], layers: list[str], n: int, in_flight: int,
                  rounds: int, modes: tuple[str, ...] = ("full", "resumed"),
                  s_seconds: int = 0) -> dict[str, list[float]]:
    """CPU per probe of each case (and, with ``s_seconds``, of s_time -new/-reuse against
    each server, run after each round so that every round has its own limit), in us."""
    out: dict[str, list[float]] = {}
    cases = [(s, layer, mode) for s in ports for layer in layers for mode in modes]
    probers = {(s, layer, mode): make_prober(layer, mode == "resumed") for s, layer, mode in cases}
    for s, layer, mode in cases:  # warm-up: first handshakes, code paths, allocator
        await run_probes(probers[s, layer, mode], f"https://127.0.0.1:{ports[s]}/", 100,
                         in_flight)
    for r in range(rounds):
        order = cases if r % 2 == 0 else cases[::-1]
        for s, layer, mode in order:
            prober = probers[s, layer, mode]
            h0, r0 = prober.tls_handshakes, prober.tls_resumed
            cpu, failed = await run_probes(
                prober, f"https://127.0.0.1:{ports[s]}/", n, in_flight)
            if failed:
                print(f"{s} {layer} {mode}: {failed} of {n} failed", file=sys.stderr)
            out.setdefault(f"{s} {layer} {mode}", []).append(cpu / n * 1e6)
            out.setdefault(f"{s} {layer} {mode} resumed_share", []).append(
                (prober.tls_resumed - r0) / max(1, prober.tls_handshakes - h0))
        for s, port in (ports.items() if s_seconds else ()):
            for st in ("new", "reuse"):
                v = s_time(port, st, s_seconds)
                out.setdefault(f"{s} s_time -{st}", []).append(-1.0 if v is None else v[0] * 1e6)
                out.setdefault(f"{s} s_time -{st} resumed_share", []).append(
                    -1.0 if v is None else v[1])
    for p in probers.values():
        await p.aclose()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m upwatch_bench.lab.tlscompare")
    ap.add_argument("--probes", type=int, default=1000)
    ap.add_argument("--in-flight", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--layers", default="ssl")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--modes", default="full,resumed")
    ap.add_argument("--s-time", type=int, default=2,
                    help="seconds per s_time run, after every round (0: none)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ncpu = os.cpu_count() or 1
    client_core, server_core = ncpu - 1, 0
    names = args.servers.split(",")
    layers = args.layers.split(",")
    with tempfile.TemporaryDirectory(prefix="tlscompare-") as tmp:
        ports, procs = start_servers(Path(tmp), names, server_core)
        os.sched_setaffinity(0, {client_core})
        try:
            import uvloop

            results = uvloop.run(compare(ports, layers, args.probes, args.in_flight,
                                         args.rounds, tuple(args.modes.split(",")),
                                         args.s_time))
        finally:
            stop_servers(procs)
    if args.json:
        print(json.dumps({"us": results}))
        return
    for key, vals in results.items():
        if key.endswith(" resumed_share"):
            print(f"{key:36s} " + " / ".join(f"{v:.3f}" for v in vals))
            continue
        s, what, mode = key.split()
        lims = results.get(f"{s} s_time -{'new' if mode == 'full' else 'reuse'}")
        ratio = "" if what == "s_time" or not lims else "  (" + " / ".join(
            f"{v / lim:.2f}x" for v, lim in zip(vals, lims, strict=True)) + ", same round)"
        print(f"{key:28s} " + " / ".join(f"{v:7.1f}" for v in vals) + f" us{ratio}")


if __name__ == "__main__":
    main()
