"""A stand-in for DNS, for tests that must control what a name resolves to without leaving
loopback: an :data:`engine.domain.netpolicy.Resolver` (``await dns.resolve(host, port)``) that the
probes (``HttpProber(resolver=...)``, ``CertProber(resolver=...)``) and the webhook deliverer
(``Deliverer(resolver=...)``) take in place of the system resolver. The private-address rule
is still applied by our code to whatever it answers.

Each name answers from a list of answers in turn and keeps the last one, which is how a
rebinding attacker's DNS behaves (a public address while being validated, then, after a
zero TTL, an internal one)::

    dns = FakeDns()
    dns.names["rebind.test"] = [["93.184.216.34"], ["127.0.0.1"]]
    await dns.resolve("rebind.test", 80)   # ["93.184.216.34"]
    await dns.resolve("rebind.test", 80)   # ["127.0.0.1"], and from then on

A name it does not know fails as ``getaddrinfo`` does (``socket.gaierror``, EAI_NONAME).
Every lookup is recorded in ``lookups``.
"""

from __future__ import annotations

import socket


class FakeDns:
    def __init__(self) -> None:
        self.names: dict[str, list[list[str]]] = {}
        self.lookups: list[tuple[str, list[str] | None]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        answers = self.names.get(host)
        if not answers:
            self.lookups.append((host, None))
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        answer = answers.pop(0) if len(answers) > 1 else answers[0]
        self.lookups.append((host, answer))
        return list(answer)

    def answers_for(self, host: str) -> list[list[str] | None]:
        """What ``host`` resolved to, lookup by lookup."""
        return [a for h, a in self.lookups if h == host]
