"""A tool a scenario needs (nginx, wrk), installed from its Debian package when it is
missing; :class:`~upwatch_bench.options.BenchError` in one line when that is not possible
(it needs root and apt-get)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable, Sequence

from upwatch_bench.options import BenchError

INSTALL_TIMEOUT_S = 300.0


async def ensure_installed(tool: str, find: Callable[[], str | None],
                           packages: Sequence[str]) -> str:
    """What ``find`` finds of ``tool`` (its path), installing ``packages`` in turn (each
    within ``INSTALL_TIMEOUT_S``) until it finds it."""
    found = find()
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        raise BenchError(f"{tool} is not installed and cannot be installed here (needs root "
                         f"and apt-get); install it with: apt-get install -y {packages[0]}")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    last = ""
    for package in packages:
        proc = await asyncio.create_subprocess_exec(
            apt, "install", "-y", "-q", package, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        try:
            _, err = await asyncio.wait_for(proc.communicate(), INSTALL_TIMEOUT_S)
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise BenchError(f"apt-get install {package} did not finish in "
                             f"{INSTALL_TIMEOUT_S:.0f} s") from None
        found = find()
        if found:
            return found
        lines = err.decode(errors="replace").strip().splitlines()
        last = lines[-1] if lines else f"exit {proc.returncode}"
    raise BenchError(f"{tool} could not be installed (apt-get install {packages[0]}: {last})")
