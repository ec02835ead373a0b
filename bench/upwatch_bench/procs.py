"""Child processes of a bench run: started pinned, talked to in JSON lines, always stopped.

Two kinds:

- Python children (:class:`Child`): ``python -m upwatch_bench.child CONFIG.json`` with the
  protocol of :mod:`upwatch_bench.child`. Started in their own session, so a Ctrl-C reaches
  only the parent, which then stops them in order (and they die with it anyway).
- External tools (:meth:`Procs.run_measured`: ``wrk``, ``openssl s_time``): run to the end,
  reaped with ``wait4`` so their own user+sys CPU time is known exactly.

Every wait has a time limit; :meth:`Procs.close` terminates, then kills, whatever is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

import engine
import upwatch_bench

STOP_GRACE = 3.0  # seconds a child gets to end by itself before SIGTERM, then SIGKILL
_LOG_TAIL = 3000


class ChildFailed(Exception):
    """A child exited, said ``error``, or did not answer in time; the message holds the tail
    of its log."""


def pin_pid(pid: int, cpus: set[int] | list[int] | None) -> None:
    """Best effort: pin process ``pid`` to ``cpus``."""
    if cpus and hasattr(os, "sched_setaffinity"):
        with contextlib.suppress(OSError):
            os.sched_setaffinity(pid, set(cpus))


def child_env() -> dict[str, str]:
    """The parent's environment without ``UPWATCH_*`` (children build their settings from
    their config only, so an operator's settings cannot change a measurement), with the
    engine and the bench importable even from a source tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPWATCH_")}
    roots = [str(Path(pkg.__file__ or "").resolve().parent.parent)
             for pkg in (engine, upwatch_bench)]
    env["PYTHONPATH"] = os.pathsep.join(
        dict.fromkeys(p for p in (*roots, env.get("PYTHONPATH", "")) if p))
    return env


class Child:
    """One running Python child; messages are read into a queue as they arrive."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process, log: Path) -> None:
        self.name = name
        self.proc = proc
        self.log = log
        self._queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._reader = asyncio.create_task(self._read(), name=f"bench-read-{name}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                try:
                    msg = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue  # a stray print; the protocol lines are JSON
                if isinstance(msg, dict):
                    await self._queue.put(msg)
        finally:
            await self._queue.put(None)

    def log_tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return text[-_LOG_TAIL:]

    def _failed(self, what: str) -> ChildFailed:
        tail = self.log_tail().strip()
        return ChildFailed(f"{self.name}: {what}" + (f"\n--- its log ---\n{tail}" if tail else ""))

    async def expect(
        self, event: str, timeout: float, tick: Callable[[], None] | None = None
    ) -> dict[str, Any]:
        """The next message with ``event``; others are skipped. ``tick`` runs every quarter
        second while waiting (the progress bar). Raises ChildFailed on exit, ``error`` or
        timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            if left <= 0:
                raise self._failed(f"no {event!r} within {timeout:.0f} s")
            try:
                msg = await asyncio.wait_for(self._queue.get(), min(0.25, left))
            except TimeoutError:
                if tick is not None:
                    tick()
                continue
            if msg is None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.proc.wait(), 5.0)
                raise self._failed(f"exited (code {self.proc.returncode}) before {event!r}")
            if msg.get("event") == "error":
                raise self._failed(str(msg.get("message", "error")))
            if msg.get("event") == event:
                return msg

    def send(self, **msg: Any) -> None:
        """A command line on the child's stdin (ignored when it is gone)."""
        stdin = self.proc.stdin
        if stdin is None or stdin.is_closing():
            return
        with contextlib.suppress(ConnectionError, RuntimeError):
            stdin.write(orjson.dumps(msg) + b"\n")

    async def stop(self, grace: float = STOP_GRACE) -> None:
        """Ask to stop (stdin closed), then SIGTERM, then SIGKILL; bounded in time."""
        proc = self.proc
        if proc.returncode is None:
            self.send(cmd="stop")
            if proc.stdin is not None:
                with contextlib.suppress(Exception):
                    proc.stdin.close()
            for sig in (None, signal.SIGTERM, signal.SIGKILL):
                if sig is not None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
                try:
                    await asyncio.wait_for(proc.wait(), grace)
                    break
                except TimeoutError:
                    continue
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader


@dataclass
class Measured:
    """An external tool's run: output, exit code and its own CPU seconds (user+sys, and
    each apart)."""

    stdout: str
    stderr: str
    returncode: int
    cpu_s: float
    wall_s: float
    user_s: float = 0.0
    sys_s: float = 0.0


class Procs:
    """The registry of a run's processes; ``close()`` ends all of them."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.children: list[Child] = []
        self._external: set[subprocess.Popen[bytes]] = set()
        self._env = child_env()
        self._seq = 0

    async def spawn(
        self, name: str, role: str, cfg: dict[str, Any], cpus: set[int] | list[int] | None,
        *, prefix: list[str] | None = None,
    ) -> Child:
        """Start a child of ``role`` with ``cfg``, pinned to ``cpus``; ``prefix`` runs it
        under another program (valgrind)."""
        self._seq += 1
        stem = f"{self._seq:02d}-{name}"
        config = self.workdir / f"{stem}.json"
        config.write_bytes(orjson.dumps({
            **cfg, "role": role, "cpus": sorted(cpus) if cpus else None,
        }))
        log = self.workdir / f"{stem}.log"
        with open(log, "wb") as err:  # noqa: ASYNC230 - a local temp file, opened at once
            proc = await asyncio.create_subprocess_exec(
                *(prefix or ()), sys.executable, "-m", "upwatch_bench.child",
                str(config),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=err,
                env=self._env,
                start_new_session=True,
            )
        child = Child(name, proc, log)
        self.children.append(child)
        return child

    async def stop(self, child: Child) -> None:
        await child.stop()
        with contextlib.suppress(ValueError):
            self.children.remove(child)

    async def run_measured(
        self, name: str, argv: list[str], *, cpus: set[int] | None, timeout: float,
        on_start: Callable[[int], object] | None = None,
    ) -> Measured:
        """Run an external tool to its end (killed after ``timeout``) and reap it with
        ``wait4`` for its exact CPU time. ``on_start`` is called with its pid once it runs
        (a tracer attaching to it)."""
        self._seq += 1
        out_path = self.workdir / f"{self._seq:02d}-{name}.out"
        err_path = self.workdir / f"{self._seq:02d}-{name}.err"
        loop = asyncio.get_running_loop()
        proc = await asyncio.to_thread(self._popen, argv, out_path, err_path)
        pin_pid(proc.pid, cpus)
        self._external.add(proc)
        if on_start is not None:
            on_start(proc.pid)
        started = loop.time()
        waiter = asyncio.ensure_future(asyncio.to_thread(os.wait4, proc.pid, 0))
        try:
            try:
                _, status, usage = await asyncio.wait_for(asyncio.shield(waiter), timeout)
            except (TimeoutError, asyncio.CancelledError):
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(waiter, 5.0)
                proc.returncode = -9
                raise
        finally:
            self._external.discard(proc)
        proc.returncode = os.waitstatus_to_exitcode(status)
        return Measured(
            stdout=out_path.read_text(errors="replace"),
            stderr=err_path.read_text(errors="replace"),
            returncode=proc.returncode,
            cpu_s=usage.ru_utime + usage.ru_stime,
            wall_s=loop.time() - started,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
        )

    def _popen(self, argv: list[str], out_path: Path, err_path: Path) -> subprocess.Popen[bytes]:
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            return subprocess.Popen(  # noqa: S603 - a fixed tool, arguments built here
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                env=self._env, start_new_session=True,
            )

    async def close(self) -> None:
        """Stop every child (concurrently, bounded) and kill external tools still running."""
        for proc in list(self._external):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        children, self.children = self.children, []
        await asyncio.gather(*(c.stop() for c in children), return_exceptions=True)
