"""``upwatch status`` says on its first line whether this node can ping (icmp:// monitors),
through which sockets, and, when it cannot, why and what to set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.db.store import Store
from engine.probes.icmp import ping_access
from tests.support.cli import upwatch

PREFIX = "Ping (icmp:// monitors) from this node: "


def _ping_line(stdout: str) -> str:
    [line] = [ln for ln in stdout.splitlines() if ln.startswith(PREFIX)]
    return line[len(PREFIX):]


async def test_status_says_how_this_node_pings(db_dsn: str, store: Store) -> None:
    account, _ = await store.create_account("ops")
    res = upwatch("status", "--account", str(account.id), dsn=db_dsn)
    assert res.returncode == 0, res.stderr
    assert _ping_line(res.stdout) == ping_access().words()
    if ping_access().ipv4 is not None:
        assert _ping_line(res.stdout).startswith(
            f"yes, IPv4 through {ping_access().ipv4} sockets")


def _datagram_allowed_to_root() -> bool:
    try:
        lo, hi = map(int, Path("/proc/sys/net/ipv4/ping_group_range").read_text().split())
    except (OSError, ValueError):
        return True
    return lo <= 0 <= hi


async def test_status_without_cap_net_raw_says_what_to_set(db_dsn: str, store: Store) -> None:
    if shutil.which("setpriv") is None:
        pytest.skip("no setpriv(1) to drop CAP_NET_RAW")
    if _datagram_allowed_to_root():
        pytest.skip("net.ipv4.ping_group_range allows this group unprivileged ping: the node "
                    "can ping without CAP_NET_RAW")
    account, _ = await store.create_account("ops")
    res = upwatch("status", "--account", str(account.id), dsn=db_dsn,
                  prefix=("setpriv", "--bounding-set", "-net_raw", "--inh-caps", "-net_raw"))
    assert res.returncode == 0, res.stderr
    line = _ping_line(res.stdout)
    assert line.startswith("no: this node cannot send ICMP echo requests")
    assert "net.ipv4.ping_group_range" in line and "CAP_NET_RAW" in line
