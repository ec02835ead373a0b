"""systemd's notify protocol (sd_notify): READY=1, WATCHDOG=1, STOPPING=1.

A datagram to the socket named by ``NOTIFY_SOCKET``; a no-op when it is unset. The watchdog
ping is sent from the event loop itself, so a stuck loop stops pinging and systemd restarts it.
"""

from __future__ import annotations

import asyncio
import os
import socket


class Notifier:
    def __init__(self, address: str | None = None) -> None:
        addr = address if address is not None else os.environ.get("NOTIFY_SOCKET")
        if addr and addr.startswith("@"):
            addr = "\0" + addr[1:]  # abstract namespace
        self._addr = addr or None

    @property
    def enabled(self) -> bool:
        return self._addr is not None

    def send(self, state: str) -> bool:
        if self._addr is None:
            return False
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            try:
                sock.sendto(state.encode(), self._addr)
            except OSError:
                return False
        return True

    def ready(self, status: str = "") -> bool:
        return self.send("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def stopping(self) -> bool:
        return self.send("STOPPING=1")

    @staticmethod
    def watchdog_interval() -> float | None:
        """Half of systemd's WatchdogSec (``WATCHDOG_USEC``), or None when not asked for."""
        usec = os.environ.get("WATCHDOG_USEC")
        pid = os.environ.get("WATCHDOG_PID")
        if not usec or (pid and pid != str(os.getpid())):
            return None
        return int(usec) / 2_000_000

    async def run_watchdog(self, stop: asyncio.Event) -> None:
        interval = self.watchdog_interval()
        if interval is None or not self.enabled:
            await stop.wait()
            return
        while not stop.is_set():
            self.send("WATCHDOG=1")
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except TimeoutError:
                pass
