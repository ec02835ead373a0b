"""Instructions per probe: the engine child under valgrind's callgrind (a developer's tool).

``upwatch bench ... --callgrind DIR`` runs every engine child under
``valgrind --tool=callgrind --instr-atstart=no``; the child switches instrumentation on for
its measured window only (``callgrind_control -i on|off`` on itself) and the run adds
``instructions_per_probe`` (user-space instructions, the child's event loop and everything
it calls) to the engine's figures. Other figures of such a run are not to be quoted:
under valgrind the engine runs some twenty times slower. ``bench internet`` (best with
``--https-only --monitors 2000``, so that the engine keeps up under valgrind) then also counts
``s_time -reuse -www`` of the world's mean page against each server kind, and puts the
HTTPS probe's ratio to it in the record (``https_instructions_vs_s_time_reuse_www``).

Why: this machine's speed moves by 10-20% within minutes, more than most single changes
to the probe path are worth; an instruction count moves by 1-3% between runs (the batch
sizes of the result writes differ) and not at all with the machine's load. It does not
see the kernel's time, nor cache misses: a change that trades instructions for system
calls still needs the paired timing runs.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from pathlib import Path

# The event-count summary callgrind writes at the end of its output file.
_TOTALS = re.compile(r"^(?:totals|summary):\s+(\d+)", re.MULTILINE)


def available() -> bool:
    return shutil.which("valgrind") is not None and shutil.which("callgrind_control") is not None


def wrapper(out_file: Path) -> list[str]:
    """The argv prefix that runs a child under callgrind, instrumenting nothing until told."""
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            f"--callgrind-out-file={out_file}"]


def total_instructions(text: str) -> int | None:
    """Instructions (``Ir``) recorded in a callgrind output file's text; None without any."""
    found = _TOTALS.findall(text)
    return int(found[-1]) if found else None


async def instrument(on: bool) -> None:
    """Switch callgrind's instrumentation of this process on or off (waits until done)."""
    proc = await asyncio.create_subprocess_exec(
        "callgrind_control", "-i", "on" if on else "off", str(os.getpid()),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )
    await proc.wait()
