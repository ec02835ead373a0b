"""The loop thread's wait for a core, as the kernel counts it: a thread sharing its core with
a busy process waits about half the time. (Linux: the run-queue wait in
/proc/thread-self/schedstat.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from engine.runtime.schedstat import waited_s

pytestmark = pytest.mark.skipif(waited_s() is None, reason="the kernel gives no schedstat")

# A thread on one core spins for 0.6 s of wall time beside a busy process on the same core,
# and prints how long the kernel says it waited for the core.
_SPIN = textwrap.dedent("""
    import os, subprocess, sys, time
    from engine.runtime.schedstat import waited_s
    core = int(sys.argv[1])
    os.sched_setaffinity(0, {core})
    rival = subprocess.Popen([sys.executable, "-c",
        "import os, time; os.sched_setaffinity(0, {%d}); t = time.monotonic()\\n"
        "while time.monotonic() - t < 2: pass" % core])
    time.sleep(0.2)
    before = waited_s()
    t = time.monotonic()
    while time.monotonic() - t < 0.6:
        pass
    print(waited_s() - before)
    rival.kill()
    rival.wait()
""")


def test_a_thread_sharing_its_core_with_a_busy_process_waits_for_it() -> None:
    core = max(os.sched_getaffinity(0))
    out = subprocess.run([sys.executable, "-c", _SPIN, str(core)], capture_output=True,
                         text=True, timeout=30, check=True)
    assert float(out.stdout) > 0.15  # about 0.3 of the 0.6 s


def test_the_counter_only_grows() -> None:
    a = waited_s()
    b = waited_s()
    assert a is not None and b is not None and 0 <= a <= b
