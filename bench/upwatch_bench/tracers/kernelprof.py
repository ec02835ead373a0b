"""Kernel-side profiles of the engine at capacity and of the limit tool, taken the same way
(developer's tools, not dependencies): where each spends its system time per probe.

``upwatch bench http --perf DIR`` attaches, from the other cores, to every
measured engine window and to every ``wrk`` run:

- ``perf record -g`` (cpu-clock samples, so it works in a VM without hardware counters)
  into ``DIR/<stem>.data``;
- ``perf stat`` with the software counts (task-clock, context switches, migrations, page
  faults) into ``DIR/<stem>.stat``.

``--strace DIR`` attaches ``strace -c -f`` instead (``DIR/<stem>.strace``):
exact counts per system call, at a cost that slows the traced process severalfold, so it
is not combined with perf in one run; and ``perf stat`` with tracepoint counts (system
calls, softirqs run in the process's context, packets sent, wake-ups it made, resets sent)
into ``DIR/<stem>.stat``. Tracepoints cost the traced process time in the kernel
(``perf_tp_event``, ``syscall_trace_enter``: ~5% of a system-call-heavy process's samples),
so they are counted in the strace run, not in the profile.

Each traced run adds a line to ``DIR/index.jsonl`` (its stem, operations, CPU seconds, user
and system apart, from the run's own measured window) so that the counts are divided per
probe or per request afterwards: ``python -m upwatch_bench.tracers.kernelprof DIR`` (after the
bench: ``perf report`` on the targets' core during a run would slow the targets) writes
each profile's top lines into ``DIR/<stem>-top.txt`` (the split by shared object, where
``[kernel.kallsyms]`` is the kernel, softirqs run in the task's context included; the
hottest symbols; the inclusive share of each system call and of the softirqs) and prints a
table of microseconds per operation: CPU, user, system, and each system call. The tracers
cost the traced process a few percent (perf) or most of its speed (strace): quote timing
figures from untraced runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from upwatch_bench.procs import Procs

SAMPLE_HZ = 999
# Software events (no PMU in this VM: ``cycles`` and ``instructions`` are "not
# supported"); the tracepoints only beside strace (see the module's docstring).
SOFTWARE_EVENTS = "task-clock,context-switches,cpu-migrations,page-faults"
TRACEPOINTS = ",".join((
    SOFTWARE_EVENTS, "raw_syscalls:sys_enter", "irq:softirq_entry", "net:net_dev_xmit",
    "sched:sched_wakeup", "tcp:tcp_send_reset",
))
# Inclusive shares worth a line in the top file: system calls' entry points and softirqs.
_CHILDREN_KEYS = ("__x64_sys_", "ksys_", "handle_softirqs", "net_rx_action",
                  "do_syscall_64", "asm_sysvec", "exit_to_user_mode")
# ``[k] __x64_sys_connect`` (``ksys_write``: write and read have no frame of their own).
_INCLUSIVE = re.compile(r"^\s*([\d.]+)%\s+[\d.]+%\s+\[k\]\s+(?:__x64_sys_|ksys_)(\w+)\s*$")
_SOFTIRQ = re.compile(r"^\s*([\d.]+)%\s+[\d.]+%\s+\[k\]\s+handle_softirqs\s*$")
_KERNEL = re.compile(r"^\s*([\d.]+)%\s+\[kernel\.kallsyms\]\s*$")


@dataclass(frozen=True)
class KernelTracing:
    """What to trace: ``perf`` and ``strace`` output directories (``--perf DIR``,
    ``--strace DIR``; None: not that tool) and ``perf record``'s call-graph mode
    (``--perf-callgraph dwarf``: stacks through code built without frame pointers, such as
    libpython, OpenSSL and libc, at the cost of a much larger data file; None: ``-g``)."""

    perf: Path | None = None
    strace: Path | None = None
    callgraph: str | None = None

    @property
    def enabled(self) -> bool:
        return self.perf is not None or self.strace is not None


async def trace(tracing: KernelTracing, procs: Procs, pid: int, seconds: float, stem: str,
                cpus: set[int] | None) -> None:
    """Trace ``pid`` for ``seconds`` with the tools asked for; never raises (a missing tool
    or a failed trace leaves a note on stderr, the bench goes on)."""
    try:
        jobs = []
        if tracing.perf is not None:
            jobs.append(_perf(procs, pid, seconds, tracing.perf, stem, cpus, tracing.callgraph))
        if tracing.strace is not None:
            jobs.append(_strace(procs, pid, seconds, tracing.strace, stem, cpus))
        await asyncio.gather(*jobs)
    except Exception as exc:  # a developer's aid: never the reason a bench fails
        os.write(2, f"upwatch bench: tracing {stem} failed: {exc}\n".encode())


def _path(out_dir: Path, name: str) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir / name


def note(tracing: KernelTracing, stem: str, **figures: Any) -> None:
    """Record the traced run's own figures (operations, CPU) in each directory's index."""
    for d in (tracing.perf, tracing.strace):
        if d is not None:
            with open(_path(d, "index.jsonl"), "ab") as fh:
                fh.write(orjson.dumps({"stem": stem, **figures}) + b"\n")


async def _perf(procs: Procs, pid: int, seconds: float, out_dir: Path, stem: str,
                cpus: set[int] | None, graph: str | None) -> None:
    exe = shutil.which("perf")
    if exe is None:
        raise RuntimeError("perf is not installed (Debian: apt-get install linux-perf)")
    data = _path(out_dir, f"{stem}.data")
    secs = str(max(1, round(seconds)))
    stacks = ["--call-graph", graph] if graph else ["-g"]
    record = [exe, "record", *stacks, "-F", str(SAMPLE_HZ), "-p", str(pid), "-o", str(data),
              "--", "sleep", secs]
    timeout = seconds + 60
    await asyncio.gather(
        procs.run_measured("perf-record", record, cpus=cpus, timeout=timeout),
        _perf_stat(procs, exe, pid, seconds, out_dir, stem, cpus, SOFTWARE_EVENTS))


async def _perf_stat(procs: Procs, exe: str, pid: int, seconds: float, out_dir: Path,
                     stem: str, cpus: set[int] | None, events: str) -> None:
    argv = [exe, "stat", "-e", events, "-p", str(pid), "-o",
            str(_path(out_dir, f"{stem}.stat")), "--", "sleep", str(max(1, round(seconds)))]
    await procs.run_measured("perf-stat", argv, cpus=cpus, timeout=seconds + 60)


async def _strace(procs: Procs, pid: int, seconds: float, out_dir: Path, stem: str,
                  cpus: set[int] | None) -> None:
    exe, stop = shutil.which("strace"), shutil.which("timeout")
    if exe is None or stop is None:
        raise RuntimeError("strace is not installed (Debian: apt-get install strace)")
    out = _path(out_dir, f"{stem}.strace")
    # SIGINT makes strace detach and write its summary.
    argv = [stop, "--signal=INT", str(max(1, round(seconds))), exe, "-c", "-f",
            "-p", str(pid), "-o", str(out)]
    jobs: list[Awaitable[object]] = [
        procs.run_measured("strace", argv, cpus=cpus, timeout=seconds + 60)]
    perf = shutil.which("perf")
    if perf is not None:
        jobs.append(_perf_stat(procs, perf, pid, seconds, out_dir, stem, cpus, TRACEPOINTS))
    await asyncio.gather(*jobs)


# -- after the run: top lines and microseconds per operation -----------------------------------


def write_top(exe: str, data: Path) -> Path:
    """``<stem>-top.txt`` beside ``data``: shares by shared object, by symbol, and the
    inclusive shares of system calls and softirqs."""
    parts = []
    for title, args in (
        ("by shared object (self)", ["--no-children", "--sort", "dso", "--percent-limit", "0.3"]),
        ("by symbol (self)", ["--no-children", "--sort", "dso,sym", "--percent-limit", "0.4"]),
        ("inclusive (children), system calls and softirqs",
         ["--children", "--sort", "sym", "--percent-limit", "0.3"]),
    ):
        run = subprocess.run(  # noqa: S603 - perf, arguments built here
            [exe, "report", "-i", str(data), "--stdio", "-g", "none", *args],
            capture_output=True, text=True, check=False, timeout=600)
        lines = [ln for ln in run.stdout.splitlines() if ln.strip() and
                 (not ln.startswith("#") or "Samples" in ln or "Event count" in ln)]
        if title.startswith("inclusive"):
            lines = [ln for ln in lines if ln.startswith("#")
                     or any(k in ln for k in _CHILDREN_KEYS)]
        else:
            lines = lines[:45]
        parts.append(f"== {title}\n" + "\n".join(lines))
    top = data.with_name(data.stem + "-top.txt")
    top.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return top


def per_operation(top: str, figures: dict[str, Any]) -> dict[str, float]:
    """Microseconds per operation (probe or request) of a traced run: CPU, user and system
    from its ``getrusage``/``wait4`` figures; the kernel share, softirqs and each system
    call from the profile's shares of that CPU."""
    ops = figures.get("probes") or figures.get("requests") or 0
    cpu = figures.get("cpu_s") or 0.0
    if not ops or not cpu:
        return {}
    us = cpu / ops * 1e6
    out = {"cpu": us, "user": (figures.get("user_s") or 0.0) / ops * 1e6,
           "sys": (figures.get("sys_s") or 0.0) / ops * 1e6}
    for line in top.splitlines():
        if (m := _KERNEL.match(line)) and "kernel" not in out:
            out["kernel"] = us * float(m.group(1)) / 100
        elif m := _SOFTIRQ.match(line):
            out.setdefault("softirq", us * float(m.group(1)) / 100)
        elif m := _INCLUSIVE.match(line):
            out.setdefault(m.group(2), us * float(m.group(1)) / 100)
    return out


def summarize(out_dir: Path) -> str:
    """Top files for every profile in ``out_dir`` and a table, one row per traced run."""
    exe = shutil.which("perf")
    rows = []
    index = out_dir / "index.jsonl"
    for line in index.read_bytes().splitlines() if index.exists() else []:
        figures = orjson.loads(line)
        data = out_dir / f"{figures['stem']}.data"
        if not data.exists() or exe is None:
            continue
        rows.append((figures["stem"], per_operation(write_top(exe, data).read_text(), figures)))
    calls = sorted({k for _, r in rows for k in r} - {"cpu", "user", "sys", "kernel", "softirq"},
                   key=lambda k: -max(r.get(k, 0.0) for _, r in rows))
    keys = ["cpu", "user", "sys", "kernel", "softirq", *calls]
    head = ["run (us per operation)", "CPU", "user", "sys", "kernel (perf)",
            "softirq (in the calls)", *calls]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for stem, r in rows:
        cells = [f"{r[k]:.1f}" if k in r else "" for k in keys]
        out.append(f"| {stem} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":  # pragma: no cover - a developer's command
    sys.stdout.write(summarize(Path(sys.argv[1])))
