"""Headless Chromium driven over the DevTools protocol, for tests that must do what a person
does (press Tab and Enter, look at what CSS shows) rather than read the DOM: a real browser
process on loopback, one page, commands and events over its WebSocket.

    async with Browser(tmp_path) as browser:
        await browser.open(url)
        await browser.key("Tab")
        assert await browser.evaluate("document.activeElement.tagName") == "a"
        await browser.screenshot(ARTIFACTS / "x.png")

``evaluate`` runs through DevTools, which the page's Content-Security-Policy does not govern
(the page itself still runs no script). ``security_messages`` collects what the browser
logged about refused content (CSP violations), so a test can assert there were none.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium")
                                        else None)
TIMEOUT = 30.0

_KEYS = {
    "Tab": {"key": "Tab", "code": "Tab", "windowsVirtualKeyCode": 9},
    "Enter": {"key": "Enter", "code": "Enter", "windowsVirtualKeyCode": 13, "text": "\r"},
}


class Browser:
    def __init__(self, tmp_path: Path, *, size: tuple[int, int] = (1280, 1600)) -> None:
        self._profile = tmp_path / "cdp-profile"
        self._size = size
        self._proc: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._events: list[dict[str, Any]] = []
        self._event_arrived = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.security_messages: list[str] = []

    async def __aenter__(self) -> Browser:
        assert CHROMIUM is not None
        self._proc = await asyncio.create_subprocess_exec(
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
            "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
            f"--window-size={self._size[0]},{self._size[1]}",
            f"--user-data-dir={self._profile}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )
        assert self._proc.stderr is not None
        port = None
        async with asyncio.timeout(TIMEOUT):
            while port is None:
                line = (await self._proc.stderr.readline()).decode(errors="replace")
                if not line:
                    raise AssertionError("chromium exited before DevTools listened")
                m = re.search(r"DevTools listening on ws://127\.0\.0\.1:(\d+)/", line)
                if m:
                    port = int(m.group(1))
        # Keep draining stderr, or a chatty browser blocks on a full pipe.
        self._drain = asyncio.create_task(self._drain_stderr())
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json/list") as resp:
            pages = [t for t in await resp.json() if t["type"] == "page"]
        self._ws = await self._session.ws_connect(pages[0]["webSocketDebuggerUrl"],
                                                  max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Log.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        self._drain.cancel()

    async def _drain_stderr(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        while await self._proc.stderr.readline():
            pass

    async def _read(self) -> None:
        assert self._ws is not None
        async for msg in self._ws:
            data = msg.json()
            if "id" in data:
                fut = self._pending.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
            else:
                self._events.append(data)
                if data.get("method") == "Log.entryAdded":
                    entry = data["params"]["entry"]
                    if entry.get("source") == "security" or "Content Security Policy" in (
                            entry.get("text") or ""):
                        self.security_messages.append(entry.get("text") or "")
                self._event_arrived.set()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        assert self._ws is not None
        i = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[i] = fut
        await self._ws.send_json({"id": i, "method": method, "params": params})
        reply = await asyncio.wait_for(fut, TIMEOUT)
        if "error" in reply:
            raise AssertionError(f"{method}: {reply['error']}")
        return dict(reply.get("result") or {})

    async def _wait_event(self, method: str, after: int) -> None:
        async with asyncio.timeout(TIMEOUT):
            while not any(e.get("method") == method for e in self._events[after:]):
                self._event_arrived.clear()
                await self._event_arrived.wait()

    async def open(self, url: str) -> None:
        """Navigate and wait for the load event."""
        mark = len(self._events)
        await self.send("Page.navigate", url=url)
        await self._wait_event("Page.loadEventFired", mark)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def key(self, name: str) -> None:
        """Press and release a key, as a person would."""
        spec = _KEYS[name]
        await self.send("Input.dispatchKeyEvent", type="keyDown", **spec)
        up = {k: v for k, v in spec.items() if k != "text"}
        await self.send("Input.dispatchKeyEvent", type="keyUp", **up)

    async def screenshot(self, target: Path) -> Path:
        target.parent.mkdir(parents=True, exist_ok=True)
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        target.write_bytes(base64.b64decode(shot["data"]))
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        return target

