"""Which request headers hold secrets, and what an origin is.

One rule for the whole engine: the API masks and encrypts these headers' values
(``engine/monitors/requests.py``), a probe sends them to the monitor's own origin only
(``engine/probes/request.py``), and moving a monitor to another origin asks for them again.

A secret header is ``Authorization``, ``Proxy-Authorization``, ``Cookie``, or any name holding
``token``, ``key``, ``secret`` or ``auth`` (any case): ``X-Api-Key``, ``Private-Token``,
``X-Auth-Token``.
"""

from __future__ import annotations

from typing import Final

SECRET_NAMES: Final = frozenset(("authorization", "proxy-authorization", "cookie"))
SECRET_PARTS: Final = ("token", "key", "secret", "auth")
DEFAULT_PORTS: Final = {"http": 80, "https": 443}

# (scheme, host, port): the origin of RFC 6454, host lower-case, the port always given.
Origin = tuple[str, str, int]


def is_secret_header(name: str) -> bool:
    """Whether the header ``name`` (any case) holds a secret."""
    low = name.lower()
    return low in SECRET_NAMES or any(part in low for part in SECRET_PARTS)


def origin(scheme: str, host: str, port: int | str | None) -> Origin:
    """The origin of an http(s) URL's parts; ``port`` empty or None: the scheme's default."""
    s = scheme.lower()
    return (s, host.lower().strip("[]"), int(port) if port else DEFAULT_PORTS.get(s, 0))


def origin_text(o: Origin) -> str:
    """``o`` as a URL prefix, the default port left out: ``https://new.example:8443``."""
    scheme, host, port = o
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if DEFAULT_PORTS.get(scheme) == port else f":{port}")
