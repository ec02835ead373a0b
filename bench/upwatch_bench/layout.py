"""Where each benchmark monitor points: loopback addresses, ports and paths.

The engine limits probes per host name (``per_host_limit``), so monitors are spread over
many loopback addresses (Linux routes all of 127.0.0.0/8 to ``lo``): healthy targets on
``127.0.1.1`` .. ``127.0.1.100``, hostile ones (mixed scenario) on ``127.0.3.1`` ..
``127.0.3.20``, each monitor with its own path. Every function here is pure and
deterministic, so the parent (which seeds the database) and the baseline child (which
probes the same URLs) derive the same list from a few numbers.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from typing import Any

HEALTHY_HOSTS: tuple[str, ...] = tuple(f"127.0.1.{i}" for i in range(1, 101))
HOSTILE_HOSTS: tuple[str, ...] = tuple(f"127.0.3.{i}" for i in range(1, 21))
RECEIVER_HOST = "127.0.2.1"
API_HOST = "127.0.0.1"

# ``--names``: monitor i is ``m<i>.names.test``, which the bench's DNS server
# (upwatch_bench/roles/dnsserver.py) answers with HEALTHY_HOSTS[i % 100], the address its IP-literal
# URL has: the same targets, by name.
NAMES_ZONE = "names.test"

# Mixed scenario: every tenth monitor is hostile, the kinds taking turns.
HOSTILE_KINDS: tuple[str, ...] = ("slow", "hang", "refuse")


@dataclass(frozen=True)
class Ports:
    """One port per target behaviour, the same on every address of its group."""

    ok: int
    tls: int
    tls_hang: int
    slow: int
    hang: int
    refuse: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Ports:
        return cls(**{k: int(v) for k, v in d.items()})


def free_port(host: str = HEALTHY_HOSTS[0]) -> int:
    """A TCP port free on ``host`` now (the kernel's choice). Targets bind it moments later;
    the window for another program to take it is negligible on a bench machine."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def pick_ports() -> Ports:
    chosen: set[int] = set()
    values = []
    for _ in range(6):
        p = free_port()
        for _try in range(20):  # bounded: the kernel rarely hands the same port twice
            if p not in chosen:
                break
            p = free_port()
        chosen.add(p)
        values.append(p)
    return Ports(*values)


def hostile_kind(i: int) -> str | None:
    """The hostile behaviour of monitor ``i`` in the mixed scenario, None when healthy."""
    if i % 10 != 9:
        return None
    return HOSTILE_KINDS[(i // 10) % len(HOSTILE_KINDS)]


def monitor_url(i: int, ports: Ports, *, tls: bool = False, mixed: bool = False,
                names: bool = False) -> str:
    """The URL of monitor ``i`` (0-based); ``names``: by host name (healthy ones)."""
    kind = hostile_kind(i) if mixed else None
    if kind is None:
        host = f"m{i}.{NAMES_ZONE}" if names else HEALTHY_HOSTS[i % len(HEALTHY_HOSTS)]
        if tls:
            return f"https://{host}:{ports.tls}/m/{i}"
        return f"http://{host}:{ports.ok}/m/{i}"
    host = HOSTILE_HOSTS[i % len(HOSTILE_HOSTS)]
    port = {"slow": ports.slow, "hang": ports.hang, "refuse": ports.refuse}[kind]
    return f"http://{host}:{port}/m/{i}"


def monitor_urls(n: int, ports: Ports, *, tls: bool = False, mixed: bool = False,
                 names: bool = False) -> list[str]:
    return [monitor_url(i, ports, tls=tls, mixed=mixed, names=names) for i in range(n)]


def target_binds(ports: Ports) -> list[tuple[str, int, str]]:
    """(address, port, behaviour) of every socket the target processes serve."""
    binds: list[tuple[str, int, str]] = []
    for host in HEALTHY_HOSTS:
        binds += [(host, ports.ok, "ok"), (host, ports.tls, "tls"),
                  (host, ports.tls_hang, "tls_hang")]
    for host in HOSTILE_HOSTS:
        binds += [(host, ports.slow, "slow"), (host, ports.hang, "hang"),
                  (host, ports.refuse, "refuse")]
    return binds
