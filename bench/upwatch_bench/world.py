"""The world of ``upwatch bench internet``: which site monitor ``i`` is, as a pure function.

Every monitor is a distinct host name under ``ZONE`` that the bench's DNS server answers
(upwatch_bench/roles/dnsserver.py, with this module's :meth:`World.address_of`). The parent (which
seeds the database and writes the nginx configuration), the DNS server and the baseline
child derive the same world from :meth:`World.to_dict`: nothing is drawn at random.

Per block of 100 monitors (a permutation of the block, so every kind's share is exact):

=========  ======  ==============================================================
slots      kind    what the probe meets
=========  ======  ==============================================================
75         https   one of four nginx TLS servers: TLS 1.3 or 1.2 only, an ECDSA P-256
                   or an RSA-2048 certificate (``SERVER_KINDS``), session tickets on
10         http    plain HTTP through nginx
10         redir   plain HTTP answering 301 to the same name over HTTPS (one of the four)
1          slow    HTTPS; the answer comes after the probe's timeout
1          hang    HTTPS address that accepts and never answers (not even TLS)
1          refuse  HTTPS address where nothing listens
1          nxdom   a name that does not exist (NXDOMAIN)
1          badcrt  HTTPS with an expired certificate: the uptime probe does not verify
                   certificates (decisions.md), so it is up; its certificate check fails
=========  ======  ==============================================================

So 80 % of the URLs are HTTPS, 20 % plain HTTP of which half redirect, 5 % failing kinds.
Healthy sites answer after a think time of 10-300 ms with a body of 1-200 KB (both uniform,
drawn per monitor by a hash of its index); the URL's path carries them
(``/w/<think ms>/<bytes>``) to the nginx backend (upwatch_bench/roles/worldserver.py).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Final

ZONE: Final = "internet.test"
INTERVAL_S: Final = 60  # every monitor's interval (before the run's time scale)
_M64: Final = (1 << 64) - 1

# The four TLS server kinds (nginx), their protocol and certificate key.
SERVER_KINDS: Final = ("tls13-ecdsa", "tls13-rsa", "tls12-ecdsa", "tls12-rsa")
PROTOCOL: Final = {"tls13-ecdsa": "TLSv1.3", "tls13-rsa": "TLSv1.3",
                   "tls12-ecdsa": "TLSv1.2", "tls12-rsa": "TLSv1.2", "badcert": "TLSv1.3"}
KEY_TYPE: Final = {"tls13-ecdsa": "ecdsa", "tls13-rsa": "rsa", "tls12-ecdsa": "ecdsa",
                   "tls12-rsa": "rsa", "badcert": "ecdsa"}
# One loopback address per server; the TLS servers also serve plain HTTP on the http port
# (the 301 to HTTPS of the redirecting sites).
ADDRESS: Final = {
    "tls13-ecdsa": "127.0.4.1", "tls13-rsa": "127.0.4.2", "tls12-ecdsa": "127.0.4.3",
    "tls12-rsa": "127.0.4.4", "http": "127.0.4.5", "badcert": "127.0.4.6",
    "hang": "127.0.4.7", "refuse": "127.0.4.8",
}
FAILING_KINDS: Final = ("slow", "hang", "refuse", "nxdomain", "badcert")
KINDS: Final = ("https", "http", "redirect", *FAILING_KINDS)
THINK_MS: Final = (10, 300)
BODY_BYTES: Final = (1024, 200 * 1024)

_NAME: Final = re.compile(r"(?:nx-)?m(\d+)\.")
_SLOTS: Final = (
    ("slow",) + ("hang",) + ("refuse",) + ("nxdomain",) + ("badcert",)
    + ("http",) * 10 + ("redirect",) * 10 + ("https",) * 75
)
assert len(_SLOTS) == 100


def _mix(i: int, salt: int) -> int:
    """splitmix64 of (i, salt): a well-spread deterministic draw."""
    z = (i * 0x9E3779B97F4A7C15 + (salt + 1) * 0xD1B54A32D192ED03) & _M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


@dataclass(frozen=True)
class Site:
    """Monitor ``index`` of the world."""

    index: int
    kind: str  # one of KINDS
    server: str | None  # the TLS server kind behind it (https, redirect, slow), else None
    host: str
    url: str
    address: str | None  # what the DNS server answers (None: NXDOMAIN)
    think_ms: int
    body_bytes: int

    @property
    def healthy(self) -> bool:
        """The uptime probe must succeed (bad certificates included: it does not verify)."""
        return self.kind in ("https", "http", "redirect", "badcert")

    @property
    def tls(self) -> bool:
        return self.url.startswith("https:")


@dataclass(frozen=True)
class World:
    """``monitors`` sites on ``https_port``/``http_port``; slow sites answer after
    ``slow_ms`` (more than the probe timeout)."""

    monitors: int
    https_port: int
    http_port: int
    slow_ms: int

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> World:
        return cls(**{k: int(d[k]) for k in ("monitors", "https_port", "http_port", "slow_ms")})

    def site(self, i: int) -> Site:
        kind = _SLOTS[(i * 37 + 11) % 100]
        server: str | None = SERVER_KINDS[_mix(i, 1) % len(SERVER_KINDS)]
        think = THINK_MS[0] + _mix(i, 2) % (THINK_MS[1] - THINK_MS[0] + 1)
        body = BODY_BYTES[0] + _mix(i, 3) % (BODY_BYTES[1] - BODY_BYTES[0] + 1)
        host = f"m{i}.{ZONE}"
        scheme, port = "https", self.https_port
        address: str | None
        if kind in ("https", "redirect"):
            address = ADDRESS[SERVER_KINDS[_mix(i, 1) % 4]]
            if kind == "redirect":
                scheme, port = "http", self.http_port
        elif kind == "slow":
            address, think = ADDRESS[SERVER_KINDS[_mix(i, 1) % 4]], self.slow_ms
        elif kind == "http":
            server, address, scheme, port = None, ADDRESS["http"], "http", self.http_port
        elif kind == "nxdomain":
            server, address, host = None, None, f"nx-m{i}.{ZONE}"
        else:  # hang, refuse, badcert
            server, address = None, ADDRESS[kind]
        return Site(i, kind, server, host, f"{scheme}://{host}:{port}/w/{think}/{body}",
                    address, think, body)

    def sites(self) -> list[Site]:
        return [self.site(i) for i in range(self.monitors)]

    def urls(self) -> list[str]:
        return [self.site(i).url for i in range(self.monitors)]

    def address_of(self, host: str) -> str | None:
        """The DNS server's answer for ``host`` (a name of the world), None: NXDOMAIN."""
        m = _NAME.match(host)
        if m is None or host.startswith("nx-"):
            return None
        i = int(m.group(1))
        if i >= self.monitors:
            return None
        return self.site(i).address


def index_of(host: str) -> int | None:
    """The monitor index a host name of the world carries."""
    m = _NAME.match(host)
    return int(m.group(1)) if m else None


def parse_path(path: str) -> tuple[int, int] | None:
    """(think ms, body bytes) of a request path ``/w/<think>/<bytes>``; None otherwise."""
    parts = path.split("/", 4)
    if len(parts) < 4 or parts[1] != "w":
        return None
    try:
        return int(parts[2]), int(parts[3].split("?", 1)[0])
    except ValueError:
        return None


# What the probe of each failing kind says (engine/probes: words of the outcome).
EXPECTED_WORDS: Final = {
    "slow": re.compile(r"timed out|timeout", re.I),
    "hang": re.compile(r"timed out|timeout", re.I),
    "refuse": re.compile(r"refused", re.I),
    "nxdomain": re.compile(r"DNS lookup failed", re.I),
    "badcert": re.compile(r"expired", re.I),  # the certificate check's words
}


def expected_uptime(site: Site) -> str:
    """``ok`` when the uptime probe must succeed, else ``failure``."""
    return "ok" if site.healthy else "failure"
