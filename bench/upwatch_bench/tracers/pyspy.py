"""Optional profiles of the measured children with py-spy (a developer's tool, not a
dependency): ``upwatch bench ... --profile DIR`` records each measured window
of the engine (and of the baseline, the deliverer and the API server) into
``DIR/<scenario>-<role>.txt`` (py-spy's collapsed stacks) and writes the top lines by self
and by total time beside it (``...-top.txt``).

py-spy runs with ``--nonblocking`` (it reads the child's memory without stopping it) on the
other cores, so the profiled run's figures move little; still, quote figures from runs
without a profiler. ``--profile-native`` adds C frames (uvloop, OpenSSL,
the kernel entry points); py-spy then has to pause the process for every sample.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections import Counter
from pathlib import Path

from upwatch_bench.procs import Procs


def pyspy_path() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


async def record(procs: Procs, pid: int, seconds: float, out: Path,
                 cpus: set[int] | None, *, native: bool = False) -> Path | None:
    """Sample ``pid`` for ``seconds`` into ``out`` (collapsed stacks) and write the top
    lines to ``<out>-top.txt``. None when py-spy is not installed or failed."""
    exe = pyspy_path()
    if exe is None:
        return None
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [exe, "record", "-r", "250", "-d", str(max(1, round(seconds))),
            "-p", str(pid), "-f", "raw", "-o", str(out)]
    # Native frames need the process stopped while its stack is read; Python frames do not.
    argv.append("--native" if native else "--nonblocking")
    run = await procs.run_measured("py-spy", argv, cpus=cpus, timeout=seconds + 60)
    if run.returncode != 0:
        sys.stderr.write(f"upwatch bench: py-spy failed: {run.stderr.strip()[-300:]}\n")
        return None
    return await asyncio.to_thread(_write_top, out)


def _write_top(out: Path) -> Path | None:
    if not out.exists():
        return None
    top = out.with_name(out.stem + "-top.txt")
    top.write_text(top_lines(out.read_text(errors="replace")), encoding="utf-8")
    return top


def top_lines(collapsed: str, n: int = 30) -> str:
    """The ``n`` frames with most self samples and most total samples, as percentages of
    all samples, from py-spy's collapsed-stack output (``f1;f2;f3 count`` per line)."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    samples = 0
    for line in collapsed.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = stack.split(";")
        samples += count
        own[frames[-1]] += count
        for frame in set(frames):
            total[frame] += count
    if not samples:
        return "no samples\n"
    out = [f"{samples} samples", "", "self %  frame"]
    out += [f"{100 * c / samples:6.2f}  {f}" for f, c in own.most_common(n)]
    out += ["", "total % frame"]
    out += [f"{100 * c / samples:6.2f}  {f}" for f, c in total.most_common(n)]
    return "\n".join(out) + "\n"
