"""The bench reports user and system CPU apart (for the engine and for the limit tool), and
its opt-in tracers (upwatch_bench/tracers/kernelprof.py) attach to a running process and leave
their files and an index of the traced runs' own figures."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from upwatch_bench.procs import Procs
from upwatch_bench.stats import cpu_split
from upwatch_bench.tracers import kernelprof

# Some user time (pure arithmetic) and some system time (reads of /dev/zero), ~0.3 s each,
# each measured by its own clock: process_time() is itself a system call, so a loop that only
# polled it would spend its "user" budget in the kernel (CI once saw 0.08 s of user time).
# Wall time bounds both loops.
_BURN = (
    "import resource, time\n"
    "wall = time.monotonic() + 20\n"
    "ru = lambda: resource.getrusage(resource.RUSAGE_SELF)\n"
    "end = ru().ru_utime + 0.3\n"
    "while ru().ru_utime < end and time.monotonic() < wall: sum(i * i for i in range(20000))\n"
    "f = open('/dev/zero', 'rb', buffering=0)\n"
    "end = ru().ru_stime + 0.3\n"
    "while ru().ru_stime < end and time.monotonic() < wall: f.read(1 << 20)\n"
)


async def test_a_measured_tool_reports_user_and_system_time_apart(tmp_path: Path) -> None:
    procs = Procs(tmp_path)
    pids: list[int] = []
    run = await procs.run_measured("burn", [sys.executable, "-c", _BURN], cpus=None,
                                   timeout=30, on_start=pids.append)
    assert run.returncode == 0
    assert len(pids) == 1 and pids[0] > 0
    assert run.user_s > 0.1
    assert run.sys_s > 0.05
    assert run.user_s + run.sys_s == pytest.approx(run.cpu_s)


def test_own_cpu_split_adds_up() -> None:
    user, system = cpu_split()
    assert user > 0 and system >= 0


def test_tracing_is_off_without_its_flags() -> None:
    assert not kernelprof.KernelTracing().enabled
    assert kernelprof.KernelTracing(strace=Path("/tmp/x")).enabled


def test_traced_runs_are_indexed_with_their_figures(tmp_path: Path) -> None:
    tracing = kernelprof.KernelTracing(perf=tmp_path / "perf")
    kernelprof.note(tracing, "http-01-wrk", requests=200, cpu_s=0.01, user_s=0.001,
                    sys_s=0.009)
    kernelprof.note(tracing, "http-02-engine", probes=100, cpu_s=0.02, user_s=0.01, sys_s=0.01)
    lines = (tmp_path / "perf" / "index.jsonl").read_bytes().splitlines()
    assert [orjson.loads(x)["stem"] for x in lines] == ["http-01-wrk", "http-02-engine"]
    assert orjson.loads(lines[0])["requests"] == 200


async def _trace_busy(tmp_path: Path, tracing: kernelprof.KernelTracing) -> None:
    """kernelprof.trace for 1 s of a process that opens and closes files, as "busy"."""
    proc = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 20\n"
                             "while time.time() < end: open('/dev/null').close()\n"])
    try:
        await kernelprof.trace(tracing, Procs(tmp_path), proc.pid, 1.0, "busy", None)
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(shutil.which("strace") is None, reason="strace not installed")
async def test_strace_counts_the_system_calls_of_a_running_process(tmp_path: Path) -> None:
    await _trace_busy(tmp_path, kernelprof.KernelTracing(strace=tmp_path))
    summary = (tmp_path / "busy.strace").read_text()
    if "calls" not in summary:
        pytest.skip(f"strace could not attach here: {summary[:200]!r}")
    assert "openat" in summary and "close" in summary
    if shutil.which("perf") is not None:  # the tracepoint counts beside it
        assert "raw_syscalls:sys_enter" in (tmp_path / "busy.stat").read_text()


def _perf_works() -> bool:
    exe = shutil.which("perf")
    if exe is None:
        return False
    run = subprocess.run([exe, "stat", "-e", "task-clock", "true"], capture_output=True,
                         check=False, timeout=30)
    return run.returncode == 0


@pytest.mark.skipif(not _perf_works(), reason="perf not usable here")
async def test_perf_profiles_a_running_process_and_divides_its_time_per_operation(
    tmp_path: Path,
) -> None:
    tracing = kernelprof.KernelTracing(perf=tmp_path)
    await _trace_busy(tmp_path, tracing)
    if not (tmp_path / "busy.data").exists():
        pytest.skip("perf record could not attach here")
    stat = (tmp_path / "busy.stat").read_text()
    assert "context-switches" in stat
    assert "raw_syscalls" not in stat  # tracepoints would cost the profiled process
    # 1 s of CPU over 1,000 operations: 1,000 us each, split by the profile's shares.
    kernelprof.note(tracing, "busy", probes=1000, cpu_s=1.0, user_s=0.5, sys_s=0.5)
    table = kernelprof.summarize(tmp_path)
    top = (tmp_path / "busy-top.txt").read_text()
    assert "== by shared object" in top and "[kernel.kallsyms]" in top
    assert "__x64_sys_openat" in top  # the system calls' inclusive shares
    row = next(line for line in table.splitlines() if line.startswith("| busy |"))
    cells = row.strip("|").split("|")
    assert float(cells[1]) == pytest.approx(1000.0)
    assert 0 < float(cells[4]) < 1000.0  # the kernel's part, from the profile
    assert "openat" in table.splitlines()[0]


def test_per_operation_reads_the_shares_of_a_profile() -> None:
    top = """== by shared object (self)
    60.00%  [kernel.kallsyms]
    40.00%  libpython3.11.so.1.0

== inclusive (children), system calls and softirqs
    58.00%     0.71%  [k] do_syscall_64
    25.00%     0.02%  [k] __x64_sys_connect
    20.00%     0.25%  [k] handle_softirqs
    10.00%     0.02%  [k] ksys_write
"""
    got = kernelprof.per_operation(top, {"requests": 100, "cpu_s": 0.01, "user_s": 0.004,
                                         "sys_s": 0.006})
    assert got == pytest.approx({"cpu": 100.0, "user": 40.0, "sys": 60.0, "kernel": 60.0,
                                 "softirq": 20.0, "connect": 25.0, "write": 10.0})
