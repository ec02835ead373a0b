"""Ping probes inside a private network namespace: packet loss and hostile replies on a
loopback of its own.

A test calls :func:`run_lab` with a scenario; it runs this module as a child process under
``unshare --net`` (a network namespace that only the child sees: its own ``lo``, its own
sysctls, its own nftables and qdiscs), which sets the namespace up, runs real probes
through :class:`engine.probes.icmp.IcmpProber` and prints what they found as one JSON
object. :func:`run_lab` skips the test, with the reason, where the machine does not allow
a namespace or the scenario's tool (``tc``'s netem, nftables).

Scenarios:

* ``datagram``: unprivileged ICMP datagram sockets allowed to every group; 127.0.0.1 and ::1.
* ``nft_loss``: nftables drops every second echo request (four requests), then every one.
* ``netem_loss``: ``tc qdisc add dev lo root netem loss 100%``.
* ``unreachable``: a route of type ``unreachable`` to 192.0.2.9: the kernel refuses the send.
* ``hostile_raw`` / ``hostile_datagram``: the kernel answers no echo request
  (``icmp_echo_ignore_all``); a responder on a raw socket answers instead, from another
  address, twice, late, and after the probe ended.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import struct
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ("datagram", "nft_loss", "netem_loss", "hostile_raw", "hostile_datagram",
             "unreachable")
SKIP = 77  # the child's exit status for "this machine does not allow it" (reason on stdout)


def run_lab(scenario: str, timeout: float = 30.0) -> dict[str, Any]:
    """Run ``scenario`` in a fresh network namespace; its JSON result. Skips the calling
    test with the reason where the machine cannot."""
    if shutil.which("unshare") is None:
        pytest.skip("no unshare(1) on this machine to make a private network namespace")
    proc = subprocess.run(
        ["unshare", "--net", sys.executable, "-m", "tests.support.ping_lab", scenario],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode == SKIP:
        pytest.skip(proc.stdout.strip())
    refused = "unshare" in proc.stderr and "Operation not permitted" in proc.stderr
    if proc.returncode != 0 and refused:
        pytest.skip("this machine does not allow a private network namespace: "
                    + proc.stderr.strip())
    assert proc.returncode == 0, f"lab {scenario} failed:\n{proc.stdout}\n{proc.stderr}"
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


# --- in the namespace ------------------------------------------------------------------------


def _sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=10, check=False)


def _skip(reason: str) -> None:
    print(reason)
    raise SystemExit(SKIP)


def _sysctl(name: str, value: str) -> None:
    Path("/proc/sys/" + name.replace(".", "/")).write_text(value + "\n")


def _result(r: Any) -> dict[str, Any]:
    return asdict(r)


async def _datagram() -> dict[str, Any]:
    from engine.probes.icmp import DATAGRAM, IcmpProber, ping_access

    _sysctl("net.ipv4.ping_group_range", "0 2147483647")
    prober = IcmpProber(timeout=2.0, allow_private=True, mode=DATAGRAM)
    v4 = await prober.ping("127.0.0.1", 3, 0.05)
    v6 = await prober.ping("::1", 3, 0.05)
    modes = prober.modes()
    await prober.aclose()
    return {"access": asdict(ping_access()), "v4": _result(v4), "v6": _result(v6),
            "modes": modes}


async def _nft_loss() -> dict[str, Any]:
    from engine.probes.icmp import IcmpProber

    if shutil.which("nft") is None:
        _skip("no nft(8) on this machine to drop packets")
    rules = ("add table inet lab\n"
             "add chain inet lab input { type filter hook input priority 0; }\n"
             "add rule inet lab input icmp type echo-request numgen inc mod 2 1 drop\n")
    p = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True,
                       timeout=10, check=False)
    if p.returncode != 0:
        _skip(f"nftables cannot drop packets here: {p.stderr.strip()}")
    prober = IcmpProber(timeout=1.0, allow_private=True)
    half = await prober.ping("127.0.0.1", 4, 0.05)
    _sh("nft", "add", "rule", "inet", "lab", "input", "icmp", "type", "echo-request", "drop")
    none = await prober.ping("127.0.0.1", 2, 0.05)
    await prober.aclose()
    return {"half": _result(half), "none": _result(none)}


async def _netem_loss() -> dict[str, Any]:
    from engine.probes.icmp import IcmpProber

    if shutil.which("tc") is None:
        _skip("no tc(8) on this machine to make packet loss")
    p = _sh("tc", "qdisc", "add", "dev", "lo", "root", "netem", "loss", "100%")
    if p.returncode != 0:
        _skip(f"tc netem is not available on this kernel: {p.stderr.strip()}")
    prober = IcmpProber(timeout=0.5, allow_private=True)
    r = await prober.ping("127.0.0.1", 3, 0.05)
    await prober.aclose()
    return {"result": _result(r)}


async def _unreachable() -> dict[str, Any]:
    from engine.probes.icmp import IcmpProber

    p = _sh("ip", "route", "add", "unreachable", "192.0.2.9/32")
    if p.returncode != 0:
        _skip(f"cannot add an unreachable route here: {p.stderr.strip()}")
    prober = IcmpProber(timeout=2.0, allow_private=True)
    r = await prober.ping("192.0.2.9", 3, 0.05)
    await prober.aclose()
    return {"result": _result(r)}


class _Responder:
    """Answers echo requests to 127.0.0.1 by script: the k-th request seen (from 0) gets
    what ``plan[k]`` says, a list of (delay s, source address, which request's reply)."""

    def __init__(self, loop: asyncio.AbstractEventLoop,
                 plan: dict[int, list[tuple[float, str, int]]]) -> None:
        self.loop = loop
        self.plan = plan
        self.seen: list[bytes] = []  # each request's ICMP message
        self.recv = socket.socket(socket.AF_INET, socket.SOCK_RAW | socket.SOCK_NONBLOCK,
                                  socket.IPPROTO_ICMP)
        self.senders: dict[str, socket.socket] = {}
        loop.add_reader(self.recv.fileno(), self._readable)

    def _sender(self, source: str) -> socket.socket:
        s = self.senders.get(source)
        if s is None:
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            s.bind((source, 0))
            self.senders[source] = s
        return s

    def _readable(self) -> None:
        for _ in range(64):
            try:
                data = self.recv.recv(2048)
            except BlockingIOError:
                return
            icmp = data[(data[0] & 0x0F) * 4:]
            if icmp[0] != 8:
                continue
            k = len(self.seen)
            self.seen.append(icmp)
            for delay, source, which in self.plan.get(k, []):
                self.loop.call_later(delay, self._reply, source, which)

    def _reply(self, source: str, which: int) -> None:
        from engine.probes.icmp import _checksum

        req = self.seen[which]
        body = b"\x00\x00\x00\x00" + req[4:]
        cs = _checksum(body)
        msg = body[:2] + struct.pack("!H", cs) + body[4:]
        self._sender(source).sendto(msg, ("127.0.0.1", 0))

    def close(self) -> None:
        self.loop.remove_reader(self.recv.fileno())
        self.recv.close()
        for s in self.senders.values():
            s.close()


async def _hostile(mode: str) -> dict[str, Any]:
    from engine.probes.icmp import IcmpProber

    _sysctl("net.ipv4.icmp_echo_ignore_all", "1")
    _sysctl("net.ipv4.ping_group_range", "0 2147483647")
    loop = asyncio.get_running_loop()
    here, other = "127.0.0.1", "127.0.0.3"
    plan = {
        # request 0: no reply of its own now; answered late, after request 1's reply
        # request 1: a reply from another address, then its reply twice, then 0's late one
        1: [(0.0, other, 1), (0.01, here, 1), (0.02, here, 1), (0.05, here, 0)],
        # request 2 (the probe's last): lost; its reply comes after the probe ended, while
        # the next probe's request 3 is in flight on the same socket
        3: [(0.0, here, 2), (0.03, here, 3)],
    }
    responder = _Responder(loop, plan)
    prober = IcmpProber(timeout=0.6, allow_private=True, mode=mode)
    first = await prober.ping(here, 3, 0.1)
    second = await prober.ping(here, 1, 0.1)
    modes = prober.modes()
    await prober.aclose()
    responder.close()
    return {"first": _result(first), "second": _result(second), "modes": modes,
            "requests_seen": len(responder.seen)}


async def _main(scenario: str) -> dict[str, Any]:
    p = _sh("ip", "link", "set", "lo", "up")
    if p.returncode != 0:
        _skip(f"cannot bring up lo in a private network namespace: {p.stderr.strip()}")
    if scenario == "datagram":
        return await _datagram()
    if scenario == "nft_loss":
        return await _nft_loss()
    if scenario == "netem_loss":
        return await _netem_loss()
    if scenario == "unreachable":
        return await _unreachable()
    if scenario == "hostile_raw":
        return await _hostile("raw")
    if scenario == "hostile_datagram":
        return await _hostile("datagram")
    raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    print(json.dumps(asyncio.run(_main(sys.argv[1]))))
